"""parallel_budget: the quantitative model of the course.

"四张卡,为什么既没省四倍内存,也没快四倍?" -- every number in the book, the
in-page calculators, the grader and the labs comes from these functions.

Modules, one concept each:

* :mod:`.units`         registry, parsing (``"25 Gb/s"``), formatting
* :mod:`.update`        one data-parallel update, sum vs mean
* :mod:`.communication` ring all-reduce traffic, nccl-tests busbw
* :mod:`.steptime`      step time, speedup, efficiency, overlap, waiting for a straggler
* :mod:`.memory`        ZeRO resident model-state table
* :mod:`.parallelism`   pipeline bubble and schedule, tensor-parallel traffic
* :mod:`.protocol`      do all ranks call the same collectives in the same order (hangs)
* :mod:`.figures`       build-time matplotlib figures of the chapters (import explicitly)
* :mod:`.widgets`       ipywidgets recompute panels for JupyterLab (import explicitly)
* :mod:`.labs`          optional CPU labs on real torch.distributed processes (import explicitly)
"""

from .communication import RingAllReduce, RingTransfer, busbw, ring_allreduce, ring_schedule, ring_send_factor
from .memory import ZeroMemory, ZeroTable, zero_memory, zero_table
from .parallelism import (
    PipelineBubble,
    PipelineSchedule,
    TensorParallelComm,
    pipeline_bubble,
    pipeline_bubble_over_ideal,
    pipeline_schedule,
    tp_allreduce,
)
from .protocol import CollectiveCheck, check_collectives
from .steptime import StepTime, StragglerWait, step_time, straggler_wait
from .units import Q_, as_bandwidth, as_bytes, as_params, as_time, fmt, fmt_percent, parse, ureg
from .update import DataParallelUpdate, data_parallel_update

__version__ = "0.1.0"

__all__ = [
    "CollectiveCheck",
    "DataParallelUpdate",
    "PipelineBubble",
    "PipelineSchedule",
    "Q_",
    "RingAllReduce",
    "RingTransfer",
    "StepTime",
    "StragglerWait",
    "TensorParallelComm",
    "ZeroMemory",
    "ZeroTable",
    "as_bandwidth",
    "as_bytes",
    "as_params",
    "as_time",
    "busbw",
    "check_collectives",
    "data_parallel_update",
    "fmt",
    "fmt_percent",
    "parse",
    "pipeline_bubble",
    "pipeline_bubble_over_ideal",
    "pipeline_schedule",
    "ring_allreduce",
    "ring_schedule",
    "ring_send_factor",
    "step_time",
    "straggler_wait",
    "tp_allreduce",
    "ureg",
    "zero_memory",
    "zero_table",
]
