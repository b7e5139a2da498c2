"""A pipeline step, timed: the forward and backward of every microbatch on every stage.

:func:`pipeline_bubble` and :func:`pipeline_in_flight` give one number each;
:func:`pipeline_timeline` gives the schedule they summarise, with start and end
times, so that a lab can draw it beside the one it measured.  The order of each
stage's actions is :func:`.schedule.pipeline_order`'s (the order
``torch.distributed.pipelining`` runs; one stage per rank here); every action
then starts as soon as its stage is free and its input is there.

Dependencies: the forward of microbatch ``j`` on stage ``i`` needs the forward
of ``j`` on stage ``i - 1``; its backward needs the backward of ``j`` on stage
``i + 1`` (the last stage: its own forward of ``j``).  Every stage takes
``forward`` per forward and ``backward`` per backward; sending activations and
gradients costs nothing.  Under these assumptions both GPipe and 1F1B idle
(p-1)/(m+p-1) of the step, :func:`pipeline_bubble`'s figure, and a stage holds
at most :func:`pipeline_in_flight`'s microbatches (forward done, backward not
yet), which the tests check.  (The plan builder's step timeline,
:mod:`.planstep`, schedules whole plans on the same orders.)
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .schedule import in_flight, pipeline_order
from .units import Q_, as_count, as_time, fmt, fmt_percent

SCHEDULES = ("gpipe", "1f1b")  # one stage per rank (interleaved 1F1B is the plan builder's)


@dataclass(frozen=True)
class PipelineAction:
    """One forward (``"F"``) or backward (``"B"``) of one microbatch on one stage, in seconds."""

    stage: int
    kind: str
    microbatch: int
    start: float
    end: float


@dataclass(frozen=True)
class PipelineTimeline:
    """Every action of one step, per stage in execution order, with what it implies."""

    schedule: str
    stages: int
    microbatches: int
    forward: pint.Quantity
    backward: pint.Quantity
    actions: tuple  # actions[stage] = (PipelineAction, ...) in the order the stage runs them
    makespan: pint.Quantity
    idle_fraction: float  # 1 - busy / (stages * makespan)
    in_flight: tuple  # peak microbatches held per stage (forward done, backward not yet)

    def __repr__(self) -> str:
        return (
            f"PipelineTimeline(schedule={self.schedule!r}, stages={self.stages}, microbatches={self.microbatches}: "
            f"makespan={fmt(self.makespan, digits=4)}, idle_fraction={fmt_percent(self.idle_fraction)}, "
            f"in_flight={list(self.in_flight)})"
        )


def _schedule(schedule, func: str) -> str:
    key = str(schedule).lower().replace("-", "").replace("_", "")
    if key not in SCHEDULES:
        raise ValueError(f"{func}() 的参数 schedule 不认识 {schedule!r}。可用：\"gpipe\"、\"1f1b\"。")
    return key


def pipeline_timeline(stages, microbatches, schedule="1f1b", forward="1 ms", backward="2 ms") -> PipelineTimeline:
    """Start and end of every forward and backward of one step (see the module docstring).

    >>> t = pipeline_timeline(4, 8, "gpipe", "10 ms", "20 ms")
    >>> fmt(t.makespan), round(t.idle_fraction, 4), t.in_flight
    ('330 ms', 0.2727, (8, 8, 8, 8))
    """
    p = as_count(stages, arg="stages", func="pipeline_timeline")
    m = as_count(microbatches, arg="microbatches", func="pipeline_timeline")
    key = _schedule(schedule, "pipeline_timeline")
    f = as_time(forward, arg="forward", func="pipeline_timeline").to("s").magnitude
    b = as_time(backward, arg="backward", func="pipeline_timeline").to("s").magnitude
    if f <= 0 or b <= 0:
        raise ValueError("pipeline_timeline() 的参数 forward 和 backward 都必须大于 0。例如 forward=\"10 ms\"")
    order = pipeline_order(key, p, m)
    done: dict = {}  # (kind, stage, microbatch) -> end
    free = [0.0] * p
    nxt = [0] * p
    placed = [[] for _ in range(p)]
    remaining = sum(len(o) for o in order)
    while remaining:
        progress = False
        for i in range(p):
            while nxt[i] < len(order[i]):
                _, kind, j = order[i][nxt[i]]
                if kind == "F":
                    dep = ("F", i - 1, j) if i else None
                else:
                    dep = ("B", i + 1, j) if i < p - 1 else ("F", i, j)
                if dep is not None and dep not in done:
                    break
                start = max(free[i], done[dep] if dep is not None else 0.0)
                end = start + (f if kind == "F" else b)
                done[(kind, i, j)] = end
                free[i] = end
                placed[i].append(PipelineAction(i, kind, j, start, end))
                nxt[i] += 1
                remaining -= 1
                progress = True
        if not progress:  # cannot happen for these schedules; a guard against an endless loop
            raise RuntimeError("pipeline_timeline(): the schedule deadlocks")
    makespan = max(free)
    return PipelineTimeline(
        schedule=key, stages=p, microbatches=m, forward=Q_(f, "s"), backward=Q_(b, "s"),
        actions=tuple(tuple(a) for a in placed), makespan=Q_(makespan, "s"),
        idle_fraction=1 - p * m * (f + b) / (p * makespan), in_flight=tuple(in_flight(o) for o in order),
    )
