"""Step time of data parallelism on a fixed global batch.

Compute splits evenly over the ranks; communication adds only the part that is
not hidden behind compute.

How much can be hidden (DDP with gradient buckets):

* ``overlap`` is the fraction of the communication that the schedule lets run
  concurrently with compute (0: none, bucketing off; 1: every bucket as soon as
  it is ready).
* DDP launches a bucket's all-reduce when its gradients are ready, i.e. *during
  backward*.  Forward has no gradients yet, so only the backward share of the
  per-rank compute can hide communication: ``backward_share`` (default 2/3,
  backward costs about twice forward for a transformer).  The hidden time never
  exceeds ``backward_share * compute_per_rank``.
* The last bucket becomes ready only when backward ends, so its all-reduce is
  always exposed.  ``last_bucket`` is that bucket's communication time (default
  0: the idealisation of a last bucket small enough to neglect); the hidden time
  never exceeds ``comm - last_bucket``.

Everything else is ignored: communication slowing compute down (shared memory
bandwidth, SMs busy with NCCL kernels), the optimizer step, data loading.
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .units import Q_, as_count, as_fraction, as_time, fmt, fmt_percent

#: Share of one step's compute spent in backward, the only phase DDP can hide
#: gradient communication behind (backward ~ 2 x forward).
BACKWARD_SHARE = 2 / 3


@dataclass(frozen=True)
class StepTime:
    """One training step on ``ranks`` ranks against one device, same global batch."""

    compute_single: pint.Quantity
    ranks: int
    comm: pint.Quantity
    overlap: float
    compute_per_rank: pint.Quantity
    hidden_comm: pint.Quantity
    exposed_comm: pint.Quantity
    step: pint.Quantity
    speedup: float
    efficiency: float
    backward_share: float = BACKWARD_SHARE
    backward: pint.Quantity = None  # per-rank backward time: the window that can hide communication
    last_bucket: pint.Quantity = None  # communication that is always exposed

    def is_comm_bound(self) -> bool:
        """True when exposed communication takes longer than compute."""
        return self.exposed_comm > self.compute_per_rank

    def __repr__(self) -> str:
        return (
            f"StepTime(compute_per_rank={fmt(self.compute_per_rank, digits=4)}, "
            f"exposed_comm={fmt(self.exposed_comm, digits=4)}, step={fmt(self.step, digits=4)}, "
            f"speedup={self.speedup:.3g}x, efficiency={fmt_percent(self.efficiency)})"
        )


def step_time(compute_single, ranks, comm, overlap=0.0, backward_share=BACKWARD_SHARE, last_bucket=0.0) -> StepTime:
    """Step time, speedup and efficiency for a fixed global batch.

    ``compute_single``: the step's compute on one device; ``comm``: the
    communication time per step (e.g. ``ring_allreduce(...).lower_bound``);
    ``overlap``: fraction of ``comm`` the schedule lets run during compute, in
    [0, 1]; ``backward_share``: the share of compute that is backward, the only
    window DDP can hide gradient communication behind (default 2/3);
    ``last_bucket``: communication time of the last gradient bucket, which is
    ready only when backward ends and is therefore always exposed (default 0).

    hidden = min(overlap * comm, backward_share * compute_per_rank, comm - last_bucket)
    step   = compute_per_rank + comm - hidden

    >>> r = step_time("400 ms", 4, "120 ms")
    >>> round(r.speedup, 2), round(r.efficiency, 3)
    (1.82, 0.455)
    >>> fmt(step_time("400 ms", 4, "120 ms", overlap=1).step, digits=4)
    '153.3 ms'
    """
    t1 = as_time(compute_single, arg="compute_single", func="step_time")
    ranks = as_count(ranks, arg="ranks", func="step_time")
    c = as_time(comm, arg="comm", func="step_time")
    f = as_fraction(overlap, arg="overlap", func="step_time")
    b = as_fraction(backward_share, arg="backward_share", func="step_time")
    last = as_time(last_bucket, arg="last_bucket", func="step_time")
    if t1.magnitude == 0:
        raise ValueError('step_time() 的参数 compute_single 必须大于 0。例如 "400 ms"')
    if last > c:
        raise ValueError(
            f"step_time() 的参数 last_bucket（{fmt(last, digits=4)}）不能超过全部通信 comm（{fmt(c, digits=4)}）："
            "最后一个桶只是通信的一部分。"
        )
    per_rank = t1 / ranks
    backward = per_rank * b
    hidden = max(min(c * f, backward, c - last), Q_(0.0, "s"))
    exposed = c - hidden
    step = per_rank + exposed
    speedup = float((t1 / step).to("").magnitude)
    return StepTime(
        compute_single=t1,
        ranks=ranks,
        comm=c,
        overlap=f,
        compute_per_rank=per_rank.to("s"),
        hidden_comm=hidden.to("s"),
        exposed_comm=exposed.to("s"),
        step=step.to("s"),
        speedup=speedup,
        efficiency=speedup / ranks,
        backward_share=b,
        backward=backward.to("s"),
        last_bucket=last.to("s"),
    )


@dataclass(frozen=True)
class StragglerWait:
    """Who waits how long at one collective when the ranks arrive at different times."""

    arrivals: tuple  # per rank: time spent before reaching the collective
    comm: pint.Quantity
    waits: tuple  # per rank: time spent inside the collective waiting for the last rank
    slowest: int  # the rank everybody waits for
    step: pint.Quantity  # last arrival + communication

    def __repr__(self) -> str:
        ws = ", ".join(fmt(w, digits=3) for w in self.waits)
        return f"StragglerWait(slowest=rank {self.slowest}, waits=[{ws}], step={fmt(self.step, digits=4)})"


def straggler_wait(arrivals, comm=0.0) -> StragglerWait:
    """A collective completes only after its last rank arrives.

    ``arrivals[r]`` is how long rank r works (loads data, computes) before it
    calls the collective; rank r then waits ``max(arrivals) - arrivals[r]``, and
    the step takes ``max(arrivals) + comm`` on every rank.

    >>> [round(w.to("ms").magnitude) for w in straggler_wait(["20 ms", "220 ms"]).waits]
    [200, 0]
    """
    if isinstance(arrivals, (str, bytes)) or not hasattr(arrivals, "__iter__"):
        raise ValueError('straggler_wait() 的参数 arrivals 需要每个 rank 的到达前用时列表，例如 ["20 ms", "220 ms"]。')
    ts = tuple(as_time(t, arg=f"arrivals[{i}]", func="straggler_wait").to("s") for i, t in enumerate(arrivals))
    if not ts:
        raise ValueError("straggler_wait() 的参数 arrivals 至少需要一个 rank。")
    c = as_time(comm, arg="comm", func="straggler_wait")
    last = max(ts)
    slowest = ts.index(last)
    return StragglerWait(
        arrivals=ts, comm=c.to("s"), waits=tuple((last - t).to("s") for t in ts), slowest=slowest,
        step=(last + c).to("s"),
    )
