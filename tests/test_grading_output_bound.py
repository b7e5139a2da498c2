"""Issue 31, item 6: a kernel's huge output never reaches the grader's memory (ZeroMQ's MAXMSGSIZE).

A sandboxed kernel prints 4 x 400 MB (each one message of about 400 MB); the grading process that runs it
(nbclient with the grader's kernel client, in a subprocess whose peak is measured as ``VmHWM``) must stay
under :data:`.bounds.WORKER_PEAK_BYTES` and keep none of it.  ZeroMQ ends the kernel's IOPub connection at the
first refused message (a protocol error is not reconnected), so later output of that kernel is lost: nbgrader's
``raise_on_iopub_timeout`` then makes it a timed-out cell, and :class:`.preprocessors.ResilientExecute` scores
that cell 0 and goes on in a fresh kernel (the student's own output cost their cell, nobody else's).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from parallel_budget.grading import bounds
from parallel_budget.grading.sandbox import bwrap

pytestmark = pytest.mark.skipif(bwrap.unavailable() is not None and not os.environ.get("CI"),
                                reason=str(bwrap.unavailable()))

RUN = textwrap.dedent("""
    import json, sys
    import nbformat
    from nbclient import NotebookClient
    from parallel_budget.grading.sandbox import bwrap
    from parallel_budget.grading.sandbox.warmkernels import kernel_manager_class
    cells = [sys.argv[1]]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    limits = bwrap.Limits(memory_bytes=4 * 10**9, scratch_bytes=32 * 2**20)
    NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True, shutdown_kernel="immediate",
                   iopub_timeout=10, kernel_manager_class=kernel_manager_class(limits)).execute()
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    kept = sum(len(json.dumps(o)) for c in nb.cells for o in c.outputs)
    print(json.dumps({"hwm": hwm, "kept": kept}))
""")
FLOOD = "import sys\nfor _ in range(4):\n    sys.stdout.write('x' * (400 * 2**20))\n    sys.stdout.flush()\n"


def _measure(cell: str) -> dict:
    run = subprocess.run([sys.executable, "-c", RUN, cell], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_four_times_400_mb_of_output_keep_the_grader_under_its_bound():
    quiet = _measure("print('small')")
    assert quiet["kept"] > 0  # the control: ordinary output does arrive
    flood = _measure(FLOOD)
    assert flood["hwm"] < bounds.WORKER_PEAK_BYTES, flood
    assert flood["hwm"] - quiet["hwm"] < 64 * 2**20, (quiet, flood)  # nothing of the 1.6 GB was held
    assert flood["kept"] < 2**20, flood
