"""parallel_budget: the quantitative model of the course.

"四张卡，为什么既没省四倍内存，也没快四倍？" -- every number in the book, the
in-page calculators, the grader and the labs comes from these functions.

Subpackages, one concern each (a module per concept inside):

* :mod:`.model`    the quantitative model: units, update, communication, steptime,
                   memory, parallelism, pipeline, protocol.  Every formula lives here; the
                   public names are re-exported below (``pb.ring_allreduce``).
* :mod:`.book`     book-side code: page helpers, figures, ipywidgets panels, the
                   calculators' Python side and their shared test vectors, the
                   Sphinx extension (import explicitly).
* :mod:`.grading`  nbgrader autograding (import explicitly).
* :mod:`.labs`     optional CPU labs on real torch.distributed processes (import explicitly).
"""

from .model.activations import ActivationMemory, activation_memory
from .model.calibration import NcclFit, fit_nccl_tests, nccl_tests_text
from .model.communication import RingAllReduce, RingTransfer, busbw, ring_allreduce, ring_schedule, ring_send_factor
from .model.hfufit import HfuFit, hfu_from_step
from .model.memory import ZeroCommunication, ZeroMemory, ZeroTable, zero_communication, zero_memory, zero_table
from .model.overlapcriteria import OverlapThreshold, TpOverlap, overlap_threshold, tp_overlap
from .model.parallelism import (
    PipelineBubble,
    PipelineInFlight,
    PipelineSchedule,
    TensorParallelComm,
    pipeline_bubble,
    pipeline_bubble_over_ideal,
    pipeline_in_flight,
    pipeline_schedule,
    tp_allreduce,
)
from .model.pipeline import PipelineAction, PipelineTimeline, pipeline_timeline
from .model.plan import SHAPES, Collective, PlanBudget, PlanMemory, plan_budget
from .model.plansearch import PlanSearch, search_plans
from .model.presets import CLUSTERS, MODELS, preset
from .model.scaling import PlanScaling, plan_scaling
from .model.protocol import CollectiveCheck, check_collectives
from .model.recovery import ResumePoint, resume_point
from .model.steptime import BACKWARD_SHARE, StepTime, StragglerWait, step_time, straggler_wait
from .model.units import Q_, as_bandwidth, as_bytes, as_params, as_time, fmt, fmt_auto, fmt_count, fmt_percent, parse, ureg
from .model.update import DataParallelUpdate, data_parallel_update

__version__ = "0.1.0"

__all__ = [
    "ActivationMemory",
    "BACKWARD_SHARE",
    "CLUSTERS",
    "Collective",
    "CollectiveCheck",
    "DataParallelUpdate",
    "HfuFit",
    "MODELS",
    "NcclFit",
    "OverlapThreshold",
    "PipelineAction",
    "PipelineBubble",
    "PipelineInFlight",
    "PipelineSchedule",
    "PipelineTimeline",
    "PlanBudget",
    "PlanMemory",
    "PlanScaling",
    "PlanSearch",
    "Q_",
    "ResumePoint",
    "RingAllReduce",
    "RingTransfer",
    "SHAPES",
    "StepTime",
    "StragglerWait",
    "TensorParallelComm",
    "TpOverlap",
    "ZeroCommunication",
    "ZeroMemory",
    "ZeroTable",
    "activation_memory",
    "as_bandwidth",
    "as_bytes",
    "as_params",
    "as_time",
    "busbw",
    "check_collectives",
    "data_parallel_update",
    "fit_nccl_tests",
    "fmt",
    "fmt_auto",
    "fmt_count",
    "fmt_percent",
    "hfu_from_step",
    "nccl_tests_text",
    "overlap_threshold",
    "parse",
    "pipeline_bubble",
    "pipeline_bubble_over_ideal",
    "pipeline_in_flight",
    "pipeline_schedule",
    "pipeline_timeline",
    "plan_budget",
    "plan_scaling",
    "preset",
    "resume_point",
    "ring_allreduce",
    "ring_schedule",
    "ring_send_factor",
    "search_plans",
    "step_time",
    "straggler_wait",
    "tp_allreduce",
    "tp_overlap",
    "ureg",
    "zero_communication",
    "zero_memory",
    "zero_table",
]
