"""How a plan scales: speedup and efficiency against device count or against link bandwidth.

The course's title question, "why not 4× faster", for a whole plan: keep the
model, the global batch and the plan's TP, PP, ZeRO stage and micro-batch size,
and change one thing.

* ``over="devices"``: the data-parallel degree takes 1, the plan's own dp, and
  every power of two from dp/8 up that divides global_batch / micro_batch; the
  device count is dp·tp·pp.  ZeRO needs dp > 1, so the one-replica point runs stage 0.
* ``over="inter_bw"``: the inter-node bandwidth is the plan's times 1/8 … 8.

Speedup is measured against one device doing only the model's compute (no
recomputation, no communication; it would not fit, the baseline is an ideal):
speedup = devices × efficiency, efficiency = compute without recomputation ÷
step, the plan builder's efficiency.  Each point says whether it fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import planterms as T
from .plan import _memory, _time
from .plansettings import settings
from .units import as_count

FACTORS = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


@dataclass(frozen=True)
class ScalingPoint:
    x: float  # devices, or inter-node bandwidth in B/s
    devices: int
    dp: int
    zero_stage: int
    step: float  # seconds
    speedup: float
    efficiency: float
    fits: bool


@dataclass(frozen=True)
class PlanScaling:
    over: str  # "devices" or "inter_bw"
    points: tuple  # ScalingPoint, by x

    def __repr__(self) -> str:
        pts = ", ".join(f"{p.x:g}: {p.speedup:.3g}x ({100 * p.efficiency:.3g}%)" for p in self.points)
        return f"PlanScaling(over={self.over!r}: {pts})"


def _point(s: dict, x: float, dp: int, tp: int, pp: int, stage: int, mb: int) -> ScalingPoint:
    c = {**_memory(s, dp, tp, pp, stage, mb), **_time(s, dp, tp, pp, stage, mb)}
    n = dp * tp * pp
    return ScalingPoint(x, n, dp, stage, c["step"], n * c["efficiency"], c["efficiency"], c["fits"])


def scaling_dps(global_batch: int, micro_batch: int, dp: int) -> list:
    """The data-parallel degrees of the device curve: 1, dp, and the powers of two from dp/8 up that divide
    global_batch/micro_batch (at most a dozen timelines, however large the batch)."""
    most = global_batch // micro_batch
    return sorted({d for d in (2 ** i for i in range(most.bit_length())) if most % d == 0 and 8 * d >= dp} | {1, dp})


def plan_scaling(*, dp=1, tp=1, pp=1, zero_stage=0, micro_batch=1, over="devices", **kw) -> PlanScaling:
    """Speedup and efficiency of this plan's split as the device count (or the bandwidth) changes.

    Takes :func:`.plan.plan_budget`'s keywords.

    >>> r = plan_scaling(model="llama2-7b", cluster="a100-40gb", global_batch=32, dp=16, zero_stage=3,
    ...                  recompute="selective")
    >>> [p.devices for p in r.points]
    [1, 2, 4, 8, 16, 32]
    """
    func = "plan_scaling"
    if over not in ("devices", "inter_bw"):
        raise ValueError(f'{func}() 的参数 over 只能是 "devices" 或 "inter_bw"，收到 {over!r}。例如 over="devices"')
    s = settings(func=func, **kw)
    split = [as_count(x, arg=k, func=func) for k, x in (("dp", dp), ("tp", tp), ("pp", pp), ("micro_batch", micro_batch))]
    dp, tp, pp, mb = split
    stage = int(zero_stage)
    why = T.split_problem(s, dp, tp, pp, stage, mb)
    if why:
        raise ValueError(f"{func}() 的切分不可行：{why}")
    points = []
    if over == "devices":
        for d in scaling_dps(s["global_batch"], mb, dp):
            st = stage if d > 1 else 0
            if not T.split_problem(s, d, tp, pp, st, mb):
                points.append(_point(s, d * tp * pp, d, tp, pp, st, mb))
    else:
        for f in FACTORS:
            s2 = {**s, "inter_bw": s["inter_bw"] * f}
            points.append(_point(s2, s2["inter_bw"], dp, tp, pp, stage, mb))
    return PlanScaling(over, tuple(points))
