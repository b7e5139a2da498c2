"""ZeRO: resident model-state memory per device, and communication, per stage.

With mixed-precision Adam each parameter carries ``param_bytes`` (2, bf16/fp16
weights), ``grad_bytes`` (2) and ``optim_bytes`` (12: fp32 master copy, Adam's
first and second moments), 16 B in all.  ZeRO removes the copies that data
parallel replicas keep of the same state:

==========  ============================  ======================================
stage       bytes per device              what is sharded over the D replicas
==========  ============================  ======================================
0 (DDP)     (p + g + o) P                 nothing: every replica holds all of it
1           (p + g + o/D) P               optimizer state
2           (p + (g + o)/D) P             optimizer state and gradients
3           (p + g + o) P / D             optimizer state, gradients, parameters
==========  ============================  ======================================

Only resident model state is counted.  Activations depend on inputs, layers
and the execution plan and are *not* divided by D; temporary all-gathers,
prefetch and communication buffers raise the real peak above these numbers.

Communication (ZeRO paper, Rajbhandari et al. 2020, section 7): an all-reduce
is a reduce-scatter followed by an all-gather.  ZeRO-1 and ZeRO-2
reduce-scatter the gradients and all-gather the updated parameters, which is
exactly DDP's all-reduce volume.  ZeRO-3 also has to all-gather every layer's
parameters before using them, in forward and again in backward: two
all-gathers plus one reduce-scatter, about 1.5x DDP.  :func:`zero_communication`
counts what each rank sends in an ideal ring ((D-1)/D of the payload per
reduce-scatter or all-gather), ignoring latency and prefetch overlap, for a
step of one microbatch, as the paper does.  With gradient accumulation ZeRO-2
reduce-scatters after every microbatch and ZeRO-3 repeats all three
collectives per microbatch (:mod:`.planstep` schedules that).
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .communication import ring_send_factor
from .units import Q_, as_bandwidth, as_bytes, as_count, as_params, as_positive, fmt

STAGE_SHARDS = {
    0: "无：每个副本保存完整模型状态",
    1: "优化器状态",
    2: "优化器状态 + 梯度",
    3: "优化器状态 + 梯度 + 参数",
}
STAGE_NAMES = {0: "完整副本 (DDP)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


@dataclass(frozen=True)
class ZeroMemory:
    """Resident model-state bytes per device for one ZeRO stage."""

    stage: int
    params: float
    dp: int
    param_state: pint.Quantity
    grad_state: pint.Quantity
    optim_state: pint.Quantity
    total: pint.Quantity
    sharded: str

    @property
    def name(self) -> str:
        return STAGE_NAMES[self.stage]

    @property
    def bytes_per_param(self) -> float:
        return float(self.total.to("B").magnitude / self.params)

    def fits(self, device_memory) -> bool:
        """Whether the resident model state alone fits in ``device_memory``."""
        return self.total <= as_bytes(device_memory, arg="device_memory", func="ZeroMemory.fits")

    def __repr__(self) -> str:
        return (
            f"ZeroMemory(stage={self.stage}, params={self.params:.4g}, dp={self.dp}: "
            f"total={fmt(self.total, digits=4)} per device = params {fmt(self.param_state, digits=4)} "
            f"+ grads {fmt(self.grad_state, digits=4)} + optimizer {fmt(self.optim_state, digits=4)})"
        )


def _stage(stage) -> int:
    if isinstance(stage, bool) or stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_memory() 的参数 stage 只能是 0、1、2、3（0 表示普通完整副本），收到 {stage!r}。")
    return int(stage)


def zero_memory(params, dp, stage, param_bytes=2, grad_bytes=2, optim_bytes=12) -> ZeroMemory:
    """Resident model-state bytes per device.

    >>> fmt(zero_memory(1e9, 4, 1).total)
    '7 GB'
    """
    n = as_params(params, func="zero_memory")
    d = as_count(dp, arg="dp", func="zero_memory")
    s = _stage(stage)
    p = as_positive(param_bytes, arg="param_bytes", func="zero_memory", allow_zero=True)
    g = as_positive(grad_bytes, arg="grad_bytes", func="zero_memory", allow_zero=True)
    o = as_positive(optim_bytes, arg="optim_bytes", func="zero_memory", allow_zero=True)
    shard_o = s >= 1
    shard_g = s >= 2
    shard_p = s >= 3
    ps = Q_(n * p / (d if shard_p else 1), "B")
    gs = Q_(n * g / (d if shard_g else 1), "B")
    os_ = Q_(n * o / (d if shard_o else 1), "B")
    return ZeroMemory(
        stage=s,
        params=n,
        dp=d,
        param_state=ps,
        grad_state=gs,
        optim_state=os_,
        total=ps + gs + os_,
        sharded=STAGE_SHARDS[s],
    )


@dataclass(frozen=True)
class ZeroTable:
    """The four rows (replica, ZeRO-1, -2, -3) for one model and DP degree."""

    rows: tuple

    def __iter__(self):
        return iter(self.rows)

    def __getitem__(self, stage: int) -> ZeroMemory:
        return self.rows[stage]

    def __len__(self) -> int:
        return len(self.rows)

    def smallest_fitting_stage(self, device_memory):
        """The lowest stage whose resident state fits, or None if none does."""
        for row in self.rows:
            if row.fits(device_memory):
                return row.stage
        return None

    def __repr__(self) -> str:
        lines = [f"{r.name:<16} {fmt(r.total, digits=4):>10}   分摊：{r.sharded}" for r in self.rows]
        return "ZeroTable(\n  " + "\n  ".join(lines) + "\n)"


def zero_table(params, dp, param_bytes=2, grad_bytes=2, optim_bytes=12) -> ZeroTable:
    """All four rows for ``params`` parameters and data-parallel degree ``dp``."""
    return ZeroTable(
        tuple(zero_memory(params, dp, s, param_bytes, grad_bytes, optim_bytes) for s in range(4))
    )


#: Collectives of one training step per stage: (collective, what it moves).
STAGE_COLLECTIVES = {
    0: (("all-reduce", "梯度"),),
    1: (("reduce-scatter", "梯度"), ("all-gather", "更新后的参数")),
    2: (("reduce-scatter", "梯度"), ("all-gather", "更新后的参数")),
    3: (("all-gather", "前向用的参数"), ("all-gather", "反向用的参数"), ("reduce-scatter", "梯度")),
}


@dataclass(frozen=True)
class ZeroCommunication:
    """Bytes each rank sends per training step under one ZeRO stage (ideal ring)."""

    stage: int
    params: float
    dp: int
    collectives: tuple  # ((collective, what, bytes sent per rank), ...)
    send_per_rank: pint.Quantity
    ddp_send_per_rank: pint.Quantity  # stage 0 with the same arguments
    relative_to_ddp: float | None  # per-rank send over DDP's; None when gradients have 0 bytes

    @property
    def name(self) -> str:
        return STAGE_NAMES[self.stage]

    def lower_bound(self, bandwidth) -> pint.Quantity:
        """Time to send :attr:`send_per_rank` at ``bandwidth`` (one-way, effective; no latency, no overlap)."""
        bw = as_bandwidth(bandwidth, func="ZeroCommunication.lower_bound")
        if bw.magnitude == 0:
            raise ValueError('ZeroCommunication.lower_bound() 的参数 bandwidth 必须大于 0。例如 "25 GB/s"')
        return (self.send_per_rank / bw).to("s")

    def __repr__(self) -> str:
        parts = " + ".join(f"{c} {fmt(b, digits=4)}" for c, _, b in self.collectives)
        return (
            f"ZeroCommunication(stage={self.stage}, params={self.params:.4g}, dp={self.dp}: "
            f"send_per_rank={fmt(self.send_per_rank, digits=4)} = {parts}; "
            + (f"{self.relative_to_ddp:.3g}x DDP)" if self.relative_to_ddp is not None else "DDP sends nothing)")
        )


def zero_communication(params, dp, stage, param_bytes=2, grad_bytes=2) -> ZeroCommunication:
    """Per-rank send volume of one step's ZeRO collectives, next to DDP's (one microbatch per step).

    A reduce-scatter or an all-gather of ``n`` bytes sends (D-1)/D * n per rank
    in a ring; an all-reduce sends twice that.  Gradients are ``grad_bytes``,
    gathered parameters ``param_bytes`` per parameter (2 and 2: bf16).

    >>> [round(zero_communication(1e9, 4, s).relative_to_ddp, 2) for s in range(4)]
    [1.0, 1.0, 1.0, 1.5]
    >>> fmt(zero_communication(1e9, 4, 3).send_per_rank)
    '4.5 GB'
    """
    n = as_params(params, func="zero_communication")
    d = as_count(dp, arg="dp", func="zero_communication")
    s = _stage(stage)
    p = as_positive(param_bytes, arg="param_bytes", func="zero_communication", allow_zero=True)
    g = as_positive(grad_bytes, arg="grad_bytes", func="zero_communication", allow_zero=True)
    half = ring_send_factor(d) / 2  # (D-1)/D
    rows, units = [], 0.0  # units: bytes counted once per collective, without the ring factor
    for coll, what in STAGE_COLLECTIVES[s]:
        size = n * (g if what == "梯度" else p)
        factor = 2 if coll == "all-reduce" else 1
        units += size * factor
        rows.append((coll, what, Q_(size * factor * half, "B")))
    total = sum((b for _, _, b in rows), Q_(0.0, "B"))
    ddp = Q_(n * g * 2 * half, "B")
    rel = units / (n * g * 2) if g else None  # None: DDP would send nothing to compare with
    return ZeroCommunication(
        stage=s, params=n, dp=d, collectives=tuple(rows), send_per_rank=total.to("B"),
        ddp_send_per_rank=ddp.to("B"), relative_to_ddp=rel,
    )
