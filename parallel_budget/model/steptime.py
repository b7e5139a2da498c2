"""Step time of data parallelism on a fixed global batch.

Compute splits evenly over the ranks; communication adds only the part that is
not hidden behind compute.  ``overlap`` is the fraction of the communication
that runs concurrently with backward; the hidden part can never exceed the
compute time of one rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .units import as_count, as_fraction, as_time, fmt, fmt_percent


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

    def is_comm_bound(self) -> bool:
        """True when exposed communication takes longer than compute."""
        return self.exposed_comm > self.compute_per_rank

    def __repr__(self) -> str:
        return (
            f"StepTime(compute_per_rank={fmt(self.compute_per_rank, digits=4)}, "
            f"exposed_comm={fmt(self.exposed_comm, digits=4)}, step={fmt(self.step, digits=4)}, "
            f"speedup={self.speedup:.3g}x, efficiency={fmt_percent(self.efficiency)})"
        )


def step_time(compute_single, ranks, comm, overlap=0.0) -> StepTime:
    """Step time, speedup and efficiency for a fixed global batch.

    ``compute_single``: the step's compute on one device; ``comm``: the
    communication time per step (e.g. ``ring_allreduce(...).lower_bound``);
    ``overlap``: fraction of ``comm`` hidden behind compute, in [0, 1].

    >>> r = step_time("400 ms", 4, "120 ms")
    >>> round(r.speedup, 2), round(r.efficiency, 3)
    (1.82, 0.455)
    """
    t1 = as_time(compute_single, arg="compute_single", func="step_time")
    ranks = as_count(ranks, arg="ranks", func="step_time")
    c = as_time(comm, arg="comm", func="step_time")
    f = as_fraction(overlap, arg="overlap", func="step_time")
    if t1.magnitude == 0:
        raise ValueError('step_time() 的参数 compute_single 必须大于 0。例如 "400 ms"')
    per_rank = t1 / ranks
    hidden = min(c * f, per_rank)
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
        raise ValueError('straggler_wait() 的参数 arrivals 需要每个 rank 的到达前用时列表,例如 ["20 ms", "220 ms"]。')
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
