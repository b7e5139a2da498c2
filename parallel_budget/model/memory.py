"""Resident model-state memory per device under ZeRO stages.

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
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .units import Q_, as_bytes, as_count, as_params, as_positive, fmt

STAGE_SHARDS = {
    0: "无:每个副本保存完整模型状态",
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
        raise ValueError(f"zero_memory() 的参数 stage 只能是 0、1、2、3(0 表示普通完整副本),收到 {stage!r}。")
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
        lines = [f"{r.name:<16} {fmt(r.total, digits=4):>10}   分摊:{r.sharded}" for r in self.rows]
        return "ZeroTable(\n  " + "\n  ".join(lines) + "\n)"


def zero_table(params, dp, param_bytes=2, grad_bytes=2, optim_bytes=12) -> ZeroTable:
    """All four rows for ``params`` parameters and data-parallel degree ``dp``."""
    return ZeroTable(
        tuple(zero_memory(params, dp, s, param_bytes, grad_bytes, optim_bytes) for s in range(4))
    )
