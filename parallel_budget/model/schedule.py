"""Pipeline schedules as data: the order of forward and backward actions on each pipeline rank.

A schedule is a list of actions per rank, ``(stage, kind, microbatch)`` with
``kind`` "F" or "B" (or, in the zero-bubble schedules, "I" and "W": the backward
split into its input-gradient and weight-gradient halves), as in
``torch.distributed.pipelining`` (``_Action``);
the step timeline (:mod:`.planstep`) runs these lists, and
``tests/test_schedule.py`` holds them to PyTorch's own
(``_schedule_visualizer.get_schedule_ops``).  p ranks, m microbatches, v
stages per rank (virtual stages; rank r holds stages r, r + p, …, r + (v−1)·p).

* ``gpipe`` (Huang et al. 2019): all m forwards, then all m backwards, in
  microbatch order (``ScheduleGPipe``).
* ``1f1b`` (PipeDream-Flush, Narayanan et al. 2021): rank r runs min(m, p − r)
  forwards, then alternates one backward and one forward, then the remaining
  backwards (``Schedule1F1B``'s runtime order; Megatron-LM's is the same).
* ``interleaved`` (Narayanan et al. 2021, section 2.2): v stages per rank,
  microbatches in rounds of ``m // max(1, m // p)`` (``ScheduleInterleaved1F1B``,
  which needs m to be a multiple of the number of rounds); warm-up
  (v−1)·(per round) + 2·(p−1−r) forwards, capped at v·m, then one forward and
  one backward alternately, then the remaining backwards.

* ``interleaved_zb`` (ZB-1P of Qi et al. 2024, arXiv:2401.10241;
  ``ScheduleInterleavedZeroBubble``): the interleaved order with warm-up
  (v−1)·(per round) + (p−1−r) forwards, each backward split into I (the input
  gradient, which the previous stage waits for) and W (the weight gradient,
  which nobody waits for); rank r runs its first r backwards' W late and then
  one W after each I, and the W left over at the end fill the cool-down.
* ``zbv`` (ZB-V, same paper, section 6; ``ScheduleZBVZeroBubble``): exactly two
  stages per rank in a V: rank r holds stages r and 2p−1−r, so the first and the
  last stage sit on rank 0 and the turn (stages p−1 and p) on rank p−1.

torch's third schedule with a split backward, ``ScheduleDualPipeV`` (DeepSeek-V3's
DualPipe folded into a V), also runs one microbatch's forward together with
another's backward (``OVERLAP_F_B``) to hide MoE all-to-alls; it is not modelled.

With equal stages and nothing else slowing them, the bubble is (p−1)/m of the
ideal time for GPipe and 1F1B and (p−1)/(v·m) for interleaved 1F1B (the papers'
convention); as a share of the whole step, the book's convention (chapter 4),
that is (p−1)/(m+p−1) and (p−1)/(v·m+p−1).
"""

from __future__ import annotations

from functools import lru_cache

SCHEDULES = ("gpipe", "1f1b", "interleaved", "interleaved_zb", "zbv")
#: Schedules with several stages per rank (``virtual_stages``), and those whose backward is split into I and W.
MULTI = ("interleaved", "interleaved_zb", "zbv")
SPLIT = ("interleaved_zb", "zbv")
#: PyTorch's class of each schedule (torch.distributed.pipelining, torch 2.13).
TORCH_CLASS = {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B", "interleaved": "ScheduleInterleaved1F1B",
               "interleaved_zb": "ScheduleInterleavedZeroBubble", "zbv": "ScheduleZBVZeroBubble"}


def stage_rank(schedule: str, p: int, k: int) -> int:
    """The pipeline rank that runs stage ``k``: k mod p (looped), or the V of ZB-V (k, then 2p−1−k)."""
    if schedule == "zbv" and k >= p:
        return 2 * p - 1 - k
    return k % p


def rounds(p: int, m: int) -> tuple:
    """(number of rounds, microbatches per round) of torch's interleaved 1F1B."""
    n = max(1, m // p)
    return n, m // n


def schedule_problem(schedule: str, layers: int, p: int, v: int, m: int) -> str:
    """Why this multi-stage schedule cannot run this split, in Chinese, or '' (one stage per rank: always '')."""
    if schedule == "zbv":
        if v != 2:
            return f"ZB-V 调度每个 rank 恰好有 2 个阶段（PyTorch 的 ScheduleZBVZeroBubble 同样要求），收到 virtual_stages={v}。"
        if layers % (2 * p):
            return f"ZB-V 调度要求 layers={layers} 能被 2×pp=2×{p}={2 * p} 整除：每个阶段要分到整数层。"
        return ""
    if schedule in ("interleaved", "interleaved_zb"):
        return interleave_problem(layers, p, v, m, TORCH_CLASS[schedule])
    return ""


def interleave_problem(layers: int, p: int, v: int, m: int, cls: str = "ScheduleInterleaved1F1B") -> str:
    """Why interleaved 1F1B (or its zero-bubble form, ``cls``) cannot run this split, in Chinese, or ''."""
    if v < 2:
        return f"交错调度每个 rank 至少要有 2 个虚拟阶段，收到 virtual_stages={v}。"
    if layers % (p * v):
        return (f"交错调度要求 layers={layers} 能被 pp×virtual_stages={p}×{v}={p * v} 整除："
                "每个虚拟阶段要分到整数层。")
    n, _ = rounds(p, m)
    if m % n:
        return (f"交错调度要求微批次数 m={m} 是轮数 max(1, m // pp)={n} 的整数倍"
                f"（PyTorch 的 {cls} 同样要求）。")
    return ""


def _one_rank(p: int, m: int, r: int, schedule: str) -> tuple:
    if schedule == "gpipe":
        return tuple((r, "F", j) for j in range(m)) + tuple((r, "B", j) for j in range(m))
    warm = min(m, p - r)
    ops = [(r, "F", j) for j in range(warm)]
    f = warm
    for j in range(m):
        ops.append((r, "B", j))
        if f < m:
            ops.append((r, "F", f))
            f += 1
    return tuple(ops)


def _interleaved_rank(p: int, m: int, v: int, r: int) -> tuple:
    _, per = rounds(p, m)
    warm = min((v - 1) * per + 2 * (p - 1 - r), m * v)
    total = v * m
    fwd = [0] * v
    bwd = [0] * v
    ops = []

    def forward(step):
        c = (step // per) % v
        ops.append((c * p + r, "F", fwd[c]))
        fwd[c] += 1

    def backward(step):
        c = v - 1 - ((step - warm) // per) % v
        ops.append((c * p + r, "B", bwd[c]))
        bwd[c] += 1

    for step in range(warm):
        forward(step)
    for step in range(warm, total):
        forward(step)
        backward(step)
    for step in range(total, total + warm):
        backward(step)
    return tuple(ops)


def _zb1p_rank(p: int, m: int, v: int, r: int) -> tuple:
    """ScheduleInterleavedZeroBubble's actions of rank r (torch's ``_get_1f1b_rank_ops``, zero-bubble branch)."""
    _, per = rounds(p, m)
    total = v * m
    warm = min((v - 1) * per + (p - 1 - r), total)
    count = {"F": [0] * v, "I": [0] * v, "W": [0] * v}
    ops, backwards = [], []

    def act(kind, c):
        ops.append((c * p + r, kind, count[kind][c]))
        count[kind][c] += 1

    def chunk_b(step):
        return v - 1 - ((step - warm) // per) % v

    for step in range(total + warm):
        if step < total:
            act("F", (step // per) % v)
        if step < warm:
            continue
        act("I", chunk_b(step))
        backwards.append(step)
        if step - warm >= r:  # rank r keeps its first r backwards' W for the cool-down
            act("W", chunk_b(backwards[sum(count["W"])]))
    while sum(count["W"]) < len(backwards):
        act("W", chunk_b(backwards[sum(count["W"])]))
    return tuple(ops)


def _zbv_rank(p: int, m: int, r: int) -> tuple:
    """ScheduleZBVZeroBubble's actions of rank r (stages r and 2p−1−r), microbatches ≥ m dropped as torch does."""
    n = max(2 * p - 1, m)
    c0, c1 = r, 2 * p - 1 - r
    f0 = f1 = b0 = b1 = 0
    ops = []
    for _ in range(2 * (p - r) - 1):
        ops.append((c0, "F", f0))
        f0 += 1
    for _ in range(r):
        ops += [(c1, "F", f1), (c0, "F", f0)]
        f1 += 1
        f0 += 1
    for _ in range(p - r):
        ops += [(c1, "F", f1), (c1, "I", b1), (c1, "W", b1)]
        f1 += 1
        b1 += 1
    while f1 < f0 or f0 < n:
        if f0 < n:
            ops.append((c0, "F", f0))
            f0 += 1
        ops += [(c0, "I", b0), (c0, "W", b0), (c1, "F", f1), (c1, "I", b1), (c1, "W", b1)]
        b0 += 1
        f1 += 1
        b1 += 1
    w0, w1 = b0, b1
    for _ in range(r):
        ops += [(c0, "I", b0), (c1, "I", b1)]
        b0 += 1
        b1 += 1
    for _ in range(p - r):
        ops += [(c0, "I", b0), (c0, "W", w0)]
        b0 += 1
        w0 += 1
    ops += [(c1, "W", j) for j in range(w1, b1)] + [(c0, "W", j) for j in range(w0, b0)]
    return tuple(op for op in ops if op[2] < m)


@lru_cache(maxsize=2048)
def pipeline_order(schedule: str, p: int, m: int, v: int = 1) -> tuple:
    """((stage, "F"/"B", microbatch), ...) for each of the p ranks, in the order the rank runs them.

    Stages are numbered 0 … p·v−1 along the model; with p = 1 every schedule is
    plain gradient accumulation (forward and backward of each microbatch in turn).
    Arguments are validated by the caller (:func:`interleave_problem`).

    >>> [len(ops) for ops in pipeline_order("1f1b", 4, 8)]
    [16, 16, 16, 16]
    >>> pipeline_order("1f1b", 2, 3)[0]
    ((0, 'F', 0), (0, 'F', 1), (0, 'B', 0), (0, 'F', 2), (0, 'B', 1), (0, 'B', 2))
    """
    if p == 1:
        return (tuple(x for j in range(m) for x in ((0, "F", j), (0, "B", j))),)
    if schedule == "interleaved":
        return tuple(_interleaved_rank(p, m, v, r) for r in range(p))
    if schedule == "interleaved_zb":
        return tuple(_zb1p_rank(p, m, v, r) for r in range(p))
    if schedule == "zbv":
        return tuple(_zbv_rank(p, m, r) for r in range(p))
    return tuple(_one_rank(p, m, r, schedule) for r in range(p))


@lru_cache(maxsize=2048)
def peak_in_flight(schedule: str, p: int, m: int, v: int = 1) -> int:
    """:func:`in_flight` of the rank that holds the most (the first rank, except in some ZB-V shapes)."""
    return max(in_flight(o) for o in pipeline_order(schedule, p, m, v))


def in_flight(ops) -> int:
    """Peak number of (stage, microbatch) activations a rank holds: forwards done whose backward is not.

    With the backward split, a microbatch's activations are held until its W (the weight gradient needs
    the layers' inputs); what I frees early (the activation gradients' buffers) is not counted.
    """
    peak = held = 0
    for _, kind, _ in ops:
        if kind == "F":
            held += 1
            peak = max(peak, held)
        elif kind != "I":
            held -= 1
    return peak
