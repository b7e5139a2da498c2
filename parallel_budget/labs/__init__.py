"""Optional CPU labs on real ``torch.distributed`` processes.

``run_lab(name)`` starts the lab's default number of ranks (2; 4 for
``ring_allreduce``, ``checkpoint`` and ``pipeline_schedule``; one driver for
``restart_drill``, which starts torchrun itself), or ``ranks=N``, as processes (gloo on CPU) running
``parallel_budget.labs.<name>`` and returns a :class:`LabResult` whose table puts
what the package predicts beside what was measured, and names the torch
version, backend and device.  Logs are deleted after a successful run
(``keep_logs=True`` keeps them) and kept after a failure.  Each lab is also a
torchrun entry point::

    torchrun --nproc_per_node=2 -m parallel_budget.labs.two_rank_update

Importing this package does not import torch; the first ``run_lab`` does, and
starts this process's *zygote* (:mod:`.zygote`): a fork server that imports torch
once and forks every rank of every later run, which then is what ``python -m
parallel_budget.labs.<name>`` would have been (same command line and environment
in ``ps``, session, logs, return codes) without paying ~1.5 s of CPU to start.  It
exits with this process or after a minute without a run.  ``PB_LAB_ZYGOTE=0`` (or
``LaunchConfig(zygote=False)``) starts every rank as its own ``python -m``.
"""

from .engine.config import LABS, LaunchConfig
from .engine.launcher import live_processes, run_lab
from .engine.result import LabError, LabResult, LabTimeout
from .engine.report import Report, Row
from .engine.runtime import HangDetected, Option

__all__ = [
    "LABS",
    "HangDetected",
    "LabError",
    "LabResult",
    "LabTimeout",
    "LaunchConfig",
    "Option",
    "Report",
    "Row",
    "live_processes",
    "run_lab",
]
