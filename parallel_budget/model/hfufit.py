"""A measured step time (or tokens per second) read as the HFU that reproduces it, and the MFU that follows.

The plan model's compute runs at ``peak_flops · hfu``; everything else on the
step (exposed communication, bubble) follows from the links, which
:func:`.calibration.fit_nccl_tests` calibrates.  With those fixed, the step
time falls as hfu rises, so one measured step pins hfu down (bisection).  What
is left over is whatever the model does not contain (data loading, kernels
slowed by communication beside them, unequal stages): it ends up in hfu, which
is why the result is "the hfu that reproduces the step", not a measured kernel rate.
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .plan import plan_budget
from .units import Q_, as_positive, as_time


@dataclass(frozen=True)
class HfuFit:
    """The HFU at which the plan model reproduces a measured step, and what follows from it."""

    step: pint.Quantity  # the measured step time
    hfu: float  # hardware FLOPs utilization while computing (the model's input) that reproduces it
    mfu: float  # model FLOPs / (step · devices · peak)
    hfu_step: float  # executed FLOPs / (step · devices · peak), whole step
    budget: object  # the PlanBudget at that hfu (its settings mark hfu as measured)


def hfu_from_step(step=None, *, tokens_per_s=None, **kw) -> HfuFit:
    """Solve for the hfu at which :func:`.plan.plan_budget` (same keywords) gives the measured step time.

    ``step`` (e.g. "8.2 s") or ``tokens_per_s`` (then step = global_batch · seq / tokens_per_s); with both, they
    must agree within 2 %.  Needs ``peak_flops`` (or a cluster preset), not ``compute``.
    """
    func = "hfu_from_step"
    if step is None and tokens_per_s is None:
        raise ValueError(f"{func}() 需要实测的 step（如 \"8.2 s\"）或 tokens_per_s（每秒词元数）二者之一。")
    measured = tuple(kw.pop("measured", ()))
    kw.pop("hfu", None)  # what is solved for: a given one is only a starting guess, not needed
    base = plan_budget(**kw, hfu=1.0, measured=measured)
    tokens = base.settings["global_batch"] * base.settings["seq"]
    t = None if step is None else as_time(step, arg="step", func=func).magnitude
    if tokens_per_s is not None:
        t2 = tokens / as_positive(tokens_per_s, arg="tokens_per_s", func=func)
        if t is not None and abs(t2 - t) > 0.02 * t:
            raise ValueError(f"{func}() 的 step={t:.4g} s 与 tokens_per_s 推出的 {t2:.4g} s（全局 batch {tokens} 个词元）"
                             "相差超过 2%：两者应来自同一次测量。")
        t = t2 if t is None else t
    if base.mfu is None:
        raise ValueError(f"{func}() 要用 peak_flops（或集群预设）算 HFU，不能配 compute。")
    if t <= 0 or t < base.step.magnitude * (1 - 1e-9):
        raise ValueError(f"{func}() 的实测步时 {t:.4g} s 比 hfu=1（计算跑满峰值）时模型的步时 {base.step.magnitude:.4g} s "
                         "还短：模型的通信或气泡比实测的多，先用 nccl-tests 的实测带宽校准通信（dp_nccl=…）。")
    lo, hi = 1e-4, 1.0
    for _ in range(60):  # the step grows as hfu falls; bisection on log hfu
        mid = (lo * hi) ** 0.5
        if plan_budget(**kw, hfu=mid, measured=measured).step.magnitude > t:
            lo = mid
        else:
            hi = mid
    b = plan_budget(**kw, hfu=hi, measured=(*measured, "hfu"))
    return HfuFit(Q_(t, "s"), hi, b.mfu * b.step.magnitude / t, b.hfu * b.step.magnitude / t, b)
