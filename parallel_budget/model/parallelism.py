"""Model parallelism: pipeline bubbles and tensor-parallel all-reduce traffic.

Pipeline (GPipe / 1F1B, p stages, m microbatches, equal stage times): each
stage is idle for (p-1) of the (m+p-1) slots of a step, so the idle fraction
is (p-1)/(m+p-1).  Papers also quote bubble time over ideal time, (p-1)/m.
With unequal stage times the slowest stage sets the pace.

The two schedules have the same bubble but not the same memory.  GPipe runs all
m forwards before any backward, so every stage holds the activations of all m
microbatches.  1F1B (PipeDream-Flush, Narayanan et al. 2021) starts backward as
soon as the last stage has finished a microbatch's forward and then alternates
one forward with one backward: stage i (0-based) holds at most min(p - i, m)
microbatches, bounded by the number of stages rather than by m.

Tensor parallel (Megatron-LM style): each transformer layer does two
all-reduces of the activations (b x s x h) in forward (after attention and
after the MLP) and two in backward.  Their traffic is ring all-reduce traffic
across the ``tp`` ranks of one layer.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import pint

from .communication import ring_send_factor
from .schedule import in_flight, pipeline_order
from .units import Q_, as_count, as_positive, fmt, fmt_percent


@dataclass(frozen=True)
class PipelineBubble:
    """Bubble of a pipeline step with equal stage times.

    ``float(b)`` is the idle fraction.
    """

    stages: int
    microbatches: int
    idle_fraction: float
    bubble_over_ideal: float

    def __float__(self) -> float:
        return self.idle_fraction

    def __repr__(self) -> str:
        return (
            f"PipelineBubble(stages={self.stages}, microbatches={self.microbatches}: "
            f"idle_fraction={fmt_percent(self.idle_fraction)}, bubble_over_ideal={fmt_percent(self.bubble_over_ideal)})"
        )


def pipeline_bubble(stages, microbatches) -> PipelineBubble:
    """Idle fraction (p-1)/(m+p-1) and bubble-over-ideal (p-1)/m.

    >>> round(pipeline_bubble(4, 8).idle_fraction, 4)
    0.2727
    """
    p = as_count(stages, arg="stages", func="pipeline_bubble")
    m = as_count(microbatches, arg="microbatches", func="pipeline_bubble")
    return PipelineBubble(p, m, (p - 1) / (m + p - 1), (p - 1) / m)


def pipeline_bubble_over_ideal(stages, microbatches) -> float:
    """The other convention: bubble time divided by ideal time, (p-1)/m."""
    return pipeline_bubble(stages, microbatches).bubble_over_ideal


@dataclass(frozen=True)
class PipelineSchedule:
    """Start times of every (stage, microbatch) slot of a fill-steady-drain pipeline."""

    stage_times: tuple
    microbatches: int
    starts: tuple  # starts[stage][microbatch], seconds
    makespan: pint.Quantity
    idle_per_stage: tuple  # seconds idle for each stage within the makespan
    idle_fraction: float

    def __repr__(self) -> str:
        return (
            f"PipelineSchedule(stages={len(self.stage_times)}, microbatches={self.microbatches}: "
            f"makespan={fmt(self.makespan, digits=4)}, idle_fraction={fmt_percent(self.idle_fraction)})"
        )


def pipeline_schedule(stage_times, microbatches) -> PipelineSchedule:
    """Schedule ``microbatches`` through stages taking ``stage_times`` each.

    Stage i works on microbatch j once stage i-1 finished it and stage i
    finished microbatch j-1 (one work unit per microbatch and stage).  With
    equal times the idle fraction equals :func:`pipeline_bubble`'s.
    """
    from .units import as_time

    if isinstance(stage_times, (str, bytes)) or not hasattr(stage_times, "__iter__"):
        raise ValueError("pipeline_schedule() 的参数 stage_times 需要每个阶段的时间列表，例如 [\"10 ms\", \"12 ms\"]。")
    times = [as_time(t, arg=f"stage_times[{i}]", func="pipeline_schedule").magnitude for i, t in enumerate(stage_times)]
    if not times:
        raise ValueError("pipeline_schedule() 的参数 stage_times 至少需要一个阶段。")
    if any(t <= 0 for t in times):
        raise ValueError("pipeline_schedule() 的参数 stage_times 每个阶段的时间都必须大于 0。")
    m = as_count(microbatches, arg="microbatches", func="pipeline_schedule")
    starts = []
    for i, t in enumerate(times):
        row = []
        for j in range(m):
            ready_input = starts[i - 1][j] + times[i - 1] if i else 0.0
            ready_stage = row[j - 1] + t if j else 0.0
            row.append(max(ready_input, ready_stage))
        starts.append(tuple(row))
    makespan = starts[-1][-1] + times[-1]
    idle = tuple(makespan - m * t for t in times)
    busy = m * sum(times)
    return PipelineSchedule(
        stage_times=tuple(Q_(t, "s") for t in times),
        microbatches=m,
        starts=tuple(starts),
        makespan=Q_(makespan, "s"),
        idle_per_stage=idle,
        idle_fraction=1 - busy / (len(times) * makespan),
    )


@dataclass(frozen=True)
class TensorParallelComm:
    """All-reduce volume of Megatron-style tensor parallelism."""

    tp: int
    layers: int
    message: pint.Quantity  # one all-reduce payload, b*s*h*bytes
    allreduces_per_layer: int
    per_layer: pint.Quantity  # payload summed over the layer's all-reduces
    per_step: pint.Quantity
    send_per_rank_per_layer: pint.Quantity  # ring traffic each TP rank sends
    send_per_rank_per_step: pint.Quantity

    def lower_bound(self, bandwidth) -> pint.Quantity:
        """Time each TP rank needs to send its per-step traffic at ``bandwidth`` (one-way, effective).

        Like :func:`ring_allreduce`'s bound it ignores per-round latency and
        contention, and assumes nothing overlaps with compute.
        """
        from .units import as_bandwidth

        bw = as_bandwidth(bandwidth, func="TensorParallelComm.lower_bound")
        if bw.magnitude == 0:
            raise ValueError('TensorParallelComm.lower_bound() 的参数 bandwidth 必须大于 0。例如 "100 GB/s"')
        return (self.send_per_rank_per_step / bw).to("s")

    def __repr__(self) -> str:
        return (
            f"TensorParallelComm(tp={self.tp}, layers={self.layers}: message={fmt(self.message, 'MB', 4)}, "
            f"per_layer={fmt(self.per_layer, 'MB', 4)}, per_step={fmt(self.per_step, digits=4)}, "
            f"send_per_rank_per_step={fmt(self.send_per_rank_per_step, digits=4)})"
        )


def tp_allreduce(batch, seq, hidden, tp, layers, bytes_per_elem=2) -> TensorParallelComm:
    """All-reduce volume per layer and per step for tensor parallelism.

    Four all-reduces of ``batch*seq*hidden*bytes_per_elem`` bytes per layer
    (two forward, two backward); each TP rank sends 2(t-1)/t of every payload
    in a ring.  With ``tp=1`` nothing is exchanged.
    """
    b = as_count(batch, arg="batch", func="tp_allreduce")
    s = as_count(seq, arg="seq", func="tp_allreduce")
    h = as_count(hidden, arg="hidden", func="tp_allreduce")
    t = as_count(tp, arg="tp", func="tp_allreduce")
    n_layers = as_count(layers, arg="layers", func="tp_allreduce")
    e = as_positive(bytes_per_elem, arg="bytes_per_elem", func="tp_allreduce")
    if t > 1 and h % t:
        raise ValueError(f"tp_allreduce() 的参数 hidden={h} 不能被 tp={t} 整除：张量并行要把矩阵按列/行均分。")
    count = 4 if t > 1 else 0
    message = Q_(float(b * s * h) * e, "B")
    per_layer = message * count
    factor = ring_send_factor(t)
    return TensorParallelComm(
        tp=t,
        layers=n_layers,
        message=message,
        allreduces_per_layer=count,
        per_layer=per_layer,
        per_step=per_layer * n_layers,
        send_per_rank_per_layer=per_layer * factor,
        send_per_rank_per_step=per_layer * factor * n_layers,
    )


PIPELINE_SCHEDULES = ("gpipe", "1f1b")


@dataclass(frozen=True)
class PipelineInFlight:
    """Microbatches whose activations a stage holds at its peak, per schedule."""

    schedule: str
    stages: int
    microbatches: int
    per_stage: tuple  # peak microbatches in flight on stage 0 .. p-1
    peak: int  # the worst stage (stage 0)
    activations: pint.Quantity  # peak * activation bytes of one microbatch on one stage

    @property
    def batch_fraction(self) -> float:
        """The peak as a share of the whole batch's activations on one stage, when a fixed batch is split
        into ``microbatches`` equal parts (each holds 1/m of it): GPipe 1 whatever m is, 1F1B p/m."""
        return self.peak / self.microbatches

    def __repr__(self) -> str:
        return (
            f"PipelineInFlight(schedule={self.schedule!r}, stages={self.stages}, microbatches={self.microbatches}: "
            f"per_stage={list(self.per_stage)}, peak={self.peak}, activations={fmt(self.activations, digits=4)})"
        )


def pipeline_in_flight(stages, microbatches, schedule="1f1b", activation_per_microbatch=0) -> PipelineInFlight:
    """Peak microbatches in flight (forward done, backward not yet) on each stage.

    Read off the same schedules the plan builder runs (:func:`.schedule.pipeline_order`,
    PyTorch's ``ScheduleGPipe`` and ``Schedule1F1B``): GPipe m on every stage,
    1F1B min(p - i, m) on stage i.
    ``activation_per_microbatch`` (bytes one stage stores for one microbatch)
    turns the peak count into bytes.  At a fixed batch, a microbatch is 1/m of it:
    ``batch_fraction`` is the peak in units of the whole batch (GPipe 1, 1F1B p/m).

    >>> pipeline_in_flight(4, 8, "gpipe").peak, pipeline_in_flight(4, 8, "1f1b").peak
    (8, 4)
    """
    from .units import as_bytes

    p = as_count(stages, arg="stages", func="pipeline_in_flight")
    m = as_count(microbatches, arg="microbatches", func="pipeline_in_flight")
    key = str(schedule).lower().replace("-", "").replace("_", "")
    if key not in PIPELINE_SCHEDULES:
        raise ValueError(
            f"pipeline_in_flight() 的参数 schedule 不认识 {schedule!r}。可用：\"gpipe\"、\"1f1b\"。"
        )
    act = as_bytes(activation_per_microbatch, arg="activation_per_microbatch", func="pipeline_in_flight")
    if p > 1:
        per_stage = tuple(in_flight(ops) for ops in pipeline_order(key, p, m))
    else:  # one stage: GPipe still runs every forward first; 1F1B is plain accumulation
        per_stage = (m if key == "gpipe" else 1,)
    peak = max(per_stage)
    return PipelineInFlight(key, p, m, per_stage, peak, (act * peak).to("B"))
