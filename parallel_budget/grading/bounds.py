"""Bounds on the grader's own work on a submission: size caps before parsing, and the per-student time budget.

The grader (unsandboxed) reads every submitted notebook, scans its cells
(:mod:`.integrity`) and sends them to the sandboxed kernel and function host.
What a submission can make it spend is bounded here:

* a notebook file over :data:`MAX_NOTEBOOK_BYTES` is never read: it scores 0
  with an ``oversized_notebook`` integrity row (:func:`notebook_too_big`);
* a cell whose source is over :data:`MAX_CELL_CHARS` is never parsed nor run:
  :func:`cap_cells` replaces its source by :func:`stub` before anything else
  reads it (an ``oversized_cell`` row; a graded cell scores 0, and the answers
  it would have defined are missing, so their tests score 0);
* cells up to :data:`AST_SCAN_CHARS` are scanned on their syntax tree (about
  600 bytes of memory per character in the worst case, ``x=1`` repeated:
  at most about 40 MB), longer ones on their text (regular expressions,
  memory linear in the text);
* a message from a kernel over :data:`MAX_KERNEL_MESSAGE` is refused by ZeroMQ itself (``zmq.MAXMSGSIZE``
  on every socket of the grader's kernel client, :mod:`.warmkernels`): it is never received, decoded or
  kept (the cell loses that output); what is kept of the rest is capped per cell
  (``c.ResilientExecute.max_output_chars``), so no output makes a worker grow;
* per student, the kernels' time across all notebooks, cells and restarts is
  capped by ``c.ResilientExecute.student_budget`` seconds
  (:class:`.preprocessors.ResilientExecute`): what did not run scores 0, with
  one ``time_budget`` row per notebook (:data:`OVER_BUDGET` is the ename of the
  cells that did not run).

With these caps one grading worker stays under :data:`WORKER_PEAK_BYTES` of
resident memory whatever it is handed (measured by
``tests/test_grading_bounds.py`` with a 5 MB and a 50 MB notebook;
``benchmarks/bench_grading_bounds.py`` prints the figures).
"""

from __future__ import annotations

import json
import os

MAX_NOTEBOOK_BYTES = 10 * 2**20  # a notebook file; honest ones with outputs are well under 1 MB
MAX_CELL_CHARS = 1_000_000  # the source of one cell (a data cell of a few hundred KB still runs)
AST_SCAN_CHARS = 64_000  # longer cells are scanned on their text, not their syntax tree
MAX_META_CHARS = 4_000  # nbgrader metadata kept on a capped cell
MAX_KERNEL_MESSAGE = 16 * 2**20  # one frame from a kernel; larger ones are dropped by ZeroMQ before they are read
WORKER_PEAK_BYTES = 512 * 2**20  # the stated bound on a grading process's peak RSS (measured: workers 190 MB, command 285 MB)
STUDENT_BUDGET_S = 300.0  # default of c.ResilientExecute.student_budget
OVER_BUDGET = "StudentBudgetExceeded"


def notebook_too_big(path) -> str | None:
    """The Chinese detail of a notebook file over :data:`MAX_NOTEBOOK_BYTES` (checked before reading), else None."""
    size = os.path.getsize(path)
    if size <= MAX_NOTEBOOK_BYTES:
        return None
    return f"文件 {size / 2**20:.1f} MB，超过上限 {MAX_NOTEBOOK_BYTES / 2**20:.0f} MB，没有读取"


def source_of(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source if isinstance(source, str) else ""


def source_chars(cell) -> int:
    """Characters of a cell's source, counted without joining a list of lines."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return sum(len(line) if isinstance(line, str) else 0 for line in source)
    return len(source) if isinstance(source, str) else 0


def stub(chars: int) -> str:
    """What a capped cell holds instead of its source (a comment: it runs, defines nothing)."""
    return f"# 这个单元的源码有 {chars} 个字符，超过评分上限 {MAX_CELL_CHARS} 个字符：没有检查，也没有运行。\n"


def _small_nbgrader_meta(cell) -> dict:
    meta = cell.get("metadata", {})
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    if isinstance(nbgrader, dict) and len(json.dumps(nbgrader, default=str)) <= MAX_META_CHARS:
        return {"nbgrader": nbgrader}
    return {}


def replace_cell(cell, text: str) -> None:
    """Put ``text`` in place of a cell's source; keep only small nbgrader metadata, drop outputs."""
    cell["source"] = text
    cell["metadata"] = _small_nbgrader_meta(cell)
    if cell.get("cell_type") == "code":
        cell["outputs"], cell["execution_count"] = [], None
    cell.pop("attachments", None)


def cap_cells(nb: dict) -> list[tuple[int, str | None, int]]:
    """Replace every cell over :data:`MAX_CELL_CHARS` by :func:`stub`; (index, grade_id, characters) of each."""
    capped = []
    cells = nb.get("cells") if isinstance(nb, dict) else None
    for index, cell in enumerate(cells if isinstance(cells, list) else []):
        if not isinstance(cell, dict):
            continue
        chars = source_chars(cell)
        if chars > MAX_CELL_CHARS:
            replace_cell(cell, stub(chars))
            gid = (cell.get("metadata", {}).get("nbgrader", {}) or {}).get("grade_id")
            capped.append((index, gid if isinstance(gid, str) else None, chars))
    return capped
