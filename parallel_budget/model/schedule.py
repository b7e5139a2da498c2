"""Pipeline schedules as data: the order of forward and backward actions on each pipeline rank.

A schedule is a list of actions per rank, ``(stage, kind, microbatch)`` with
``kind`` "F" or "B", as in ``torch.distributed.pipelining`` (``_Action``);
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

With equal stages and nothing else slowing them, the bubble is (p−1)/m of the
ideal time for GPipe and 1F1B and (p−1)/(v·m) for interleaved 1F1B (the papers'
convention); as a share of the whole step, the book's convention (chapter 4),
that is (p−1)/(m+p−1) and (p−1)/(v·m+p−1).
"""

from __future__ import annotations

from functools import lru_cache

SCHEDULES = ("gpipe", "1f1b", "interleaved")


def rounds(p: int, m: int) -> tuple:
    """(number of rounds, microbatches per round) of torch's interleaved 1F1B."""
    n = max(1, m // p)
    return n, m // n


def interleave_problem(layers: int, p: int, v: int, m: int) -> str:
    """Why interleaved 1F1B cannot run this split, in Chinese, or ''."""
    if v < 2:
        return f"交错调度每个 rank 至少要有 2 个虚拟阶段，收到 virtual_stages={v}。"
    if layers % (p * v):
        return (f"交错调度要求 layers={layers} 能被 pp×virtual_stages={p}×{v}={p * v} 整除："
                "每个虚拟阶段要分到整数层。")
    n, _ = rounds(p, m)
    if m % n:
        return (f"交错调度要求微批次数 m={m} 是轮数 max(1, m // pp)={n} 的整数倍"
                "（PyTorch 的 ScheduleInterleaved1F1B 同样要求）。")
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
    return tuple(_one_rank(p, m, r, schedule) for r in range(p))


@lru_cache(maxsize=2048)
def peak_in_flight(schedule: str, p: int, m: int, v: int = 1) -> int:
    """:func:`in_flight` of the first rank, the one that holds the most."""
    return in_flight(pipeline_order(schedule, p, m, v)[0])


def in_flight(ops) -> int:
    """Peak number of (stage, microbatch) activations a rank holds: forwards done whose backward is not."""
    peak = held = 0
    for _, kind, _ in ops:
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak
