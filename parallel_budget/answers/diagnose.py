"""Expected answers and their typical wrong twins, all computed by the package.

An :class:`Expected` holds the right value of one answer and a list of
*mistakes*: the value a student gets by making one named slip (bits read as
bytes, receive counted too, ...).  Every value comes from the same package call
as the right one, with the slip applied to an argument or a result, so a
formula change moves the answer and its mistakes together.

:func:`diagnose` returns the message of the mistake that matches a wrong value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pint

from ..model.communication import ring_allreduce, ring_send_factor
from ..model.memory import zero_communication, zero_memory, zero_table
from ..model.parallelism import pipeline_bubble, tp_allreduce
from ..model.steptime import step_time, straggler_wait
from ..model.units import Q_, as_bandwidth, as_bytes, fmt
from ..model.update import data_parallel_update

# The slips the issue names, with the feedback sentence each one gets.
MISTAKES = {
    "bits": "把比特当成了字节（或反过来），结果差 8 倍：GB/s 是字节每秒，Gb/s 是比特每秒",
    "recv": "把接收量也算进了发送量（多乘了 2）；每 rank 的发送和接收同时进行，下界只看单向",
    "total": "算成了全网所有 rank 的发送总量（多乘了 R）；题目要的是每个 rank 的量",
    "gib": "用了 GiB（2^30 字节）而不是本课程的十进制 GB（10^9 字节）",
    "ring_fraction": "漏掉了 (R-1)/R：两个阶段各 R-1 轮、每轮只发 G/R，所以每个阶段每 rank 发送 (R-1)/R × G，不是整份 G",
    "factor2": "漏掉了系数 2：ring all-reduce 有 reduce-scatter 和 all-gather 两个阶段",
    "mean_twice": "平均做了两次：all-reduce 已经求平均，又除了一次 R",
    "sum": "all-reduce 求和后没有除以 R，梯度被放大了 R 倍",
    "act_over_d": "把激活也除以了 D：激活跟输入和执行计划有关，数据并行分片不会缩小它",
    "bubble_convention": "用了“气泡时间 / 理想时间”(p-1)/m；题目问的是空闲占整步的比例 (p-1)/(m+p-1)",
    "comm_twice": "通信时间按发送加接收算了两遍",
    "no_split": "单卡计算时间没有除以 R（固定全局 batch 时每卡只算 1/R）",
    "tp_forward_only": "只算了前向的两次 all-reduce；反向传播还有两次，每层一共四次",
    "tp_half": "结果少了一半：可能只算了前向的两次 all-reduce（反向还有两次，每层一共四次），"
               "也可能漏掉了 ring 的系数 2（reduce-scatter 和 all-gather 两个阶段）；这两种错误总是得到同一个数",
    "tp_no_ring": "算成了每层 all-reduce 的数据量本身；ring 里每个 rank 要发送 2(t-1)/t 倍",
    "mean_arrival": "用了各 rank 到达时间的平均值；集合通信要等最后一个 rank 到达才能完成",
    "no_comm": "漏掉了通信本身的时间：最后一个 rank 到达之后，all-reduce 还要传完",
    "wait_with_comm": "把通信时间也算进了等待；等待只是从自己到达到最后一个 rank 到达的那一段",
    "overlap_compute": "把整段计算都当成了能藏通信的时间；DDP 的梯度通信只能藏在反向传播（约占计算的 2/3）后面",
    "overlap_all": "把通信全部藏起来了；能藏住的不超过反向传播的时间，最后一个桶也总是暴露的",
    "no_overlap": "没有算重叠：这是通信完全不重叠时的步时",
    "last_twice": "最后一个桶的通信已经在没藏住的那部分里了，又加了一次",
    "zero3_as_ddp": "这是 DDP（也是 ZeRO-1/2）的通信量；ZeRO-3 在前向和反向各要 all-gather 一次参数，约为 DDP 的 1.5 倍",
    "zero3_no_ring": "漏掉了 ring 的系数 (D-1)/D：每个 rank 只发送每次集合通信数据的 (D-1)/D",
    "correct_code": "这是正确代码的结果；题目问的是这段有问题的代码（平均了两次）更新之后的值",
    "flight_gpipe": "按 GPipe 数了在途的微批次：1F1B 下第一阶段最多同时保存 min(p, m) 个微批次的激活，不是全部 m 个",
    "all_layers": "把全部层的激活都算在了一个阶段上：PP 把层分给 p 个阶段，每个阶段只保存自己的 L/p 层",
    "no_sp": "没有按序列并行把激活分到 TP 组里：开了序列并行，每层的激活整个除以 t",
    # per-student numbers (questions/variants.py): the prose shows the book's numbers, the part is graded on yours
    "book_numbers": "这是书中数字（正文里的例子）的答案；这一部分按你自己的数字评分，见“你的数字”单元",
}

# Units a bare number may have been written in by mistake, per answer kind.
SLIP_UNITS = {
    "time": ("s", "ms", "us", "min"),
    "bytes": ("B", "kB", "MB", "GB", "TB", "GiB"),
    "bandwidth": ("B/s", "MB/s", "GB/s", "Gb/s"),
}


@dataclass(frozen=True)
class Expected:
    """The right value of one answer and the values of its named mistakes.

    ``value`` is a Quantity or a float; ``unit`` is how messages show it.
    """

    value: object
    unit: str | None = None
    mistakes: tuple = field(default_factory=tuple)  # ((key, value), ...)
    rel_tol: float = 0.01

    def matches(self, given) -> bool:
        return _close(given, self.value, self.rel_tol)

    def shown(self, q) -> str:
        return fmt(q, self.unit, digits=4) if self.unit or hasattr(q, "units") else f"{q:.4g}"


def _mag(x) -> float:
    return float(x.to_base_units().magnitude) if hasattr(x, "to_base_units") else float(x)


def _close(a, b, rel_tol: float) -> bool:
    return math.isclose(_mag(a), _mag(b), rel_tol=rel_tol, abs_tol=1e-12)


def diagnose(expected: Expected, given) -> str | None:
    """The feedback sentence(s) of the mistakes whose value ``given`` matches, joined by "或者"."""
    found = []
    for key, value in expected.mistakes:
        if _close(given, value, expected.rel_tol) and not _close(value, expected.value, expected.rel_tol):
            if MISTAKES[key] not in found:
                found.append(MISTAKES[key])
    return "；或者".join(found) or None


def unit_slip(name: str, given, expected: Expected) -> str | None:
    """A bare number that is right in another unit than the name's suffix: say which unit it was written in."""
    from .read import _genuine_number, unit_of

    spec = unit_of(name)
    number = _genuine_number(given)
    if spec is None or number is None or not hasattr(expected.value, "units"):
        return None
    for alt in SLIP_UNITS.get(spec[0], ()):
        if alt != spec[1] and expected.matches(Q_(number, alt)):
            right = fmt(expected.value, spec[1], digits=4)
            return (f"这个数按 {alt} 算是对的，但变量名后缀 _{name.rsplit('_', 1)[-1]} 表示纯数字按 {spec[1]} 理解；"
                    f"请写 {right.split()[0]}，或写带单位的字符串 \"{number:g} {alt}\"")
    return None


# A unit written in bits: "Mb", "Gb/s", "kbit", "bits" (not "MB", "GiB", "byte").
_BITS_UNIT = re.compile(r"(?<![A-Za-z])(?:[kMGTP]i?)?(?:b|bits?)(?:/s|ps)?\s*$")


def written_in_bits(given) -> bool:
    """Did the student write a bits unit (``"1006.63 Mb"``, ``Q_(8, "Gbit")``)?  Numbers never are."""
    from .read import _genuine_quantity

    if isinstance(given, str):
        text = str.__str__(given)  # only text the grammar read (64 characters) ever gets here; bound it anyway
        return len(text) <= 200 and bool(_BITS_UNIT.search(text))
    if isinstance(given, pint.Quantity):
        try:
            _, parts = _genuine_quantity(given, "答案")
        except ValueError:
            return False
        names = " ".join(name for name, _ in parts)
        return "bit" in names and "byte" not in names
    return False


def bits_slip(given, read, expected: Expected) -> str | None:
    """The bits/bytes slip when a bits unit was written for a bytes answer whose number is right in bytes.

    ``"1006.63 Mb"`` for ``tp_send_per_layer_MB`` (1006.63 MB) reads as 125.8 MB: the student's number is
    the byte count, their unit says bits.
    """
    if not hasattr(expected.value, "units") or not hasattr(read, "units") or not written_in_bits(given):
        return None
    if "[information]" not in str(expected.value.dimensionality) or not expected.matches(read * 8):
        return None
    return MISTAKES["bits"]


def _gib_as_gb(q):
    """The number a student writes when they convert to GiB but label it GB."""
    return Q_(q.to("GiB").magnitude, "GB")


def ring_send(ranks, grad, bandwidth) -> Expected:
    """Per-rank send of a ring all-reduce (lesson exercises 1 and 2)."""
    r = ring_allreduce(ranks, grad, bandwidth)
    s = r.send_per_rank
    return Expected(s, "GB", (
        ("bits", Q_(s.to("bit").magnitude, "B")),
        ("recv", s + r.recv_per_rank),
        ("total", r.total_sent),
        ("gib", _gib_as_gb(s)),
        ("ring_fraction", s / ring_send_factor(ranks) * 2),
        ("factor2", s / 2),
    ))


def ring_bound(ranks, grad, bandwidth) -> Expected:
    """Lower bound of the ring all-reduce time at one-way ``bandwidth``."""
    r = ring_allreduce(ranks, grad, bandwidth)
    bw = as_bandwidth(bandwidth)
    bits = ring_allreduce(ranks, grad, Q_(bw.to("GB/s").magnitude, "Gb/s")).lower_bound
    return Expected(r.lower_bound, "ms", (
        ("bits", bits),
        ("bits", r.lower_bound / 8),
        ("recv", (r.send_per_rank + r.recv_per_rank) / bw),
        ("total", r.total_sent / bw),
        ("ring_fraction", r.lower_bound / ring_send_factor(ranks) * 2),
        ("factor2", r.lower_bound / 2),
    ))


def dp_weight(w, grads, lr) -> Expected:
    """The weight every rank holds after one data-parallel SGD step."""
    right = data_parallel_update(w, grads, lr, "mean").weights[0]
    return Expected(right, None, (
        ("mean_twice", data_parallel_update(w, grads, lr, "mean_twice").weights[0]),
        ("sum", data_parallel_update(w, grads, lr, "sum").weights[0]),
    ), rel_tol=1e-3)


def buggy_weight(w, grads, lr) -> Expected:
    """The weight after one step of the buggy sync that averages twice (lesson NB01 part B)."""
    right = data_parallel_update(w, grads, lr, "mean_twice").weights[0]
    return Expected(right, None, (
        ("correct_code", data_parallel_update(w, grads, lr, "mean").weights[0]),
        ("sum", data_parallel_update(w, grads, lr, "sum").weights[0]),
    ), rel_tol=1e-3)


def _step_variants(compute_single, ranks, comm):
    from ..model.units import as_time

    c = as_time(comm)
    return (
        ("comm_twice", step_time(compute_single, ranks, c * 2)),
        ("bits", step_time(compute_single, ranks, c * 8)),
        ("no_split", step_time(compute_single, 1, c)),
    )


def step(compute_single, ranks, comm, what: str = "step") -> Expected:
    """Step time (``what='step'``), ``'speedup'`` or ``'efficiency'`` of :func:`step_time`."""
    right = step_time(compute_single, ranks, comm)
    variants = _step_variants(compute_single, ranks, comm)
    if what == "step":
        return Expected(right.step, "ms", tuple((k, v.step) for k, v in variants))
    if what == "speedup":
        return Expected(right.speedup, None, tuple((k, v.speedup) for k, v in variants))
    return Expected(right.efficiency, None, tuple((k, v.speedup / ranks) for k, v in variants))


def overlap_step(compute_single, ranks, comm, last_bucket) -> Expected:
    """Step time when every bucket may overlap (overlap=1), hidden only behind backward (default share)."""
    from ..model.units import as_time

    right = step_time(compute_single, ranks, comm, 1.0, last_bucket=last_bucket)
    loose = step_time(compute_single, ranks, comm, 1.0, backward_share=1.0, last_bucket=last_bucket)
    return Expected(right.step, "ms", (
        ("overlap_compute", loose.step),
        ("overlap_all", right.compute_per_rank),
        ("no_overlap", step_time(compute_single, ranks, comm).step),
        ("last_twice", right.step + as_time(last_bucket)),
    ))


def zero_send(params, dp, stage) -> Expected:
    """Bytes each rank sends per step under one ZeRO stage (ideal ring), with DDP's as the classic slip."""
    c = zero_communication(params, dp, stage)
    half = ring_send_factor(dp) / 2
    return Expected(c.send_per_rank, "GB", (
        ("zero3_as_ddp", c.ddp_send_per_rank),
        ("zero3_no_ring", c.send_per_rank / half),
        ("bits", Q_(c.send_per_rank.to("bit").magnitude, "B")),
        ("gib", _gib_as_gb(c.send_per_rank)),
    ))


def zero_state(params, dp, stage) -> Expected:
    """Resident model-state bytes per device of one ZeRO stage."""
    right = zero_memory(params, dp, stage).total
    return Expected(right, "GB", (("gib", _gib_as_gb(right)),))


def zero_peak(params, dp, stage, activations) -> Expected:
    """Model state of ``stage`` plus activations, which do not shrink with D."""
    state = zero_memory(params, dp, stage).total
    act = as_bytes(activations)
    right = state + act
    return Expected(right, "GB", (
        ("act_over_d", state + act / dp),
        ("gib", _gib_as_gb(right)),
    ))


def smallest_stage(params, dp, device_memory, activations="0 GB") -> int | None:
    """Lowest ZeRO stage whose state plus activations fits ``device_memory``."""
    room = as_bytes(device_memory) - as_bytes(activations)
    if room.magnitude < 0:
        return None
    return zero_table(params, dp).smallest_fitting_stage(room)


def bubble(stages, microbatches) -> Expected:
    """Idle fraction of a pipeline step with equal stage times."""
    b = pipeline_bubble(stages, microbatches)
    return Expected(b.idle_fraction, None, (("bubble_convention", b.bubble_over_ideal),), rel_tol=0.01)


def tp_send_layer(batch, seq, hidden, tp, bytes_per_elem=2) -> Expected:
    """What each TP rank sends for one layer's all-reduces (Megatron: two forward, two backward)."""
    c = tp_allreduce(batch, seq, hidden, tp, 1, bytes_per_elem)
    s = c.send_per_rank_per_layer
    # Forward only and a missing ring factor 2 both halve the answer for every t: one named slip, not two.
    return Expected(s, "MB", (
        ("tp_half", s / 2),
        ("tp_no_ring", c.per_layer),
        ("bits", Q_(s.to("bit").magnitude, "B")),
        ("total", s * c.tp),
    ))


def straggler_step(arrivals, comm) -> Expected:
    """Step time when every rank waits for the last one at the collective."""
    w = straggler_wait(arrivals, comm)
    mean = sum(w.arrivals, Q_(0, "s")) / len(w.arrivals)
    return Expected(w.step, "ms", (
        ("mean_arrival", mean + w.comm),
        ("no_comm", w.step - w.comm),
    ))


def straggler_wait_of(arrivals, comm, rank) -> Expected:
    """How long ``rank`` waits inside the collective for the last rank."""
    w = straggler_wait(arrivals, comm)
    mean = sum(w.arrivals, Q_(0, "s")) / len(w.arrivals)
    return Expected(w.waits[rank], "ms", (
        ("wait_with_comm", w.waits[rank] + w.comm),
        ("mean_arrival", mean - w.arrivals[rank]),
    ))


def stage_activations(**plan) -> Expected:
    """Activations the first pipeline stage holds under 1F1B (:func:`plan_budget`), GPipe's count as the slip."""
    from ..model.plan import plan_budget

    right = plan_budget(**plan, schedule="1f1b").memory.activations
    return Expected(right, "GB", (
        ("flight_gpipe", plan_budget(**plan, schedule="gpipe").memory.activations),
        ("all_layers", right * plan["pp"]),
        ("no_sp", plan_budget(**plan, schedule="1f1b", sequence_parallel=False).memory.activations),
        ("gib", _gib_as_gb(right)),
    ))
