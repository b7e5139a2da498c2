"""Optional CPU labs on real ``torch.distributed`` processes.

``run_lab(name, ranks=2)`` starts ``ranks`` processes (gloo on CPU) running
``parallel_budget.labs.<name>`` and returns a :class:`LabResult` whose table puts
what the package predicts beside what was measured.  Each lab is also a
torchrun entry point::

    torchrun --nproc_per_node=2 -m parallel_budget.labs.two_rank_update

Importing this package does not import torch; the first ``run_lab`` does.
"""

from .launcher import LABS, LabError, LabResult, LabTimeout, LaunchConfig, live_processes, run_lab
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
