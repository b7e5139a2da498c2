"""Optional CPU labs on real ``torch.distributed`` processes.

``run_lab(name)`` starts the lab's default number of ranks (2; 4 for
``ring_allreduce``), or ``ranks=N``, as processes (gloo on CPU) running
``parallel_budget.labs.<name>`` and returns a :class:`LabResult` whose table puts
what the package predicts beside what was measured, and names the torch
version, backend and device.  Logs are deleted after a successful run
(``keep_logs=True`` keeps them) and kept after a failure.  Each lab is also a
torchrun entry point::

    torchrun --nproc_per_node=2 -m parallel_budget.labs.two_rank_update

Importing this package does not import torch; the first ``run_lab`` does.
"""

from .config import LABS, LaunchConfig
from .launcher import live_processes, run_lab
from .result import LabError, LabResult, LabTimeout
from .report import Report, Row
from .runtime import HangDetected, Option

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
