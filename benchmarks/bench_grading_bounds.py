"""Benchmark of the grader's bounded work on a submission (issue 22, item 4). Prints figures; asserts nothing.

    python benchmarks/bench_grading_bounds.py [--grade]

1. the host-side path of one notebook before kernels: read the JSON, cap the cells
   (:func:`parallel_budget.grading.bounds.cap_cells`), integrity scan
   (:func:`parallel_budget.grading.scoring.integrity.compare_cells`), for the review's 5 MB notebook
   (one cell ``"x=1\\n" * 1_000_000``): seconds and peak traced memory;
2. the worst case under the caps: a cell of ``AST_SCAN_CHARS`` characters of ``x=1`` (syntax-tree scan)
   and one of ``MAX_CELL_CHARS`` (text scan);
3. with ``--grade``: peak RSS of the grade command (``--jobs 2``) and its workers, for an honest class
   of one and for the same class plus a 5 MB and a 50 MB notebook (about 2 minutes).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from parallel_budget.grading import bounds
from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.scoring import integrity  # noqa: E402
from parallel_budget.grading.course import Course  # noqa: E402

NB = "02-ring-allreduce"
# VmHWM for the command itself (ru_maxrss of RUSAGE_SELF would count its parent's pages shared before exec)
MEASURE = ("import json, resource, sys\nfrom parallel_budget.grading.runner import grade\n"
           "grade(sys.argv[1], root=sys.argv[2], jobs=2, quiet=True)\n"
           "hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
           "print(json.dumps([hwm / 1024, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024]))")


def traced(fn):
    """Seconds of one untraced call, and the peak traced memory (MB) of a second, traced call."""
    started = time.perf_counter()
    fn()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return seconds, peak / 2**20


def host_path(text: str) -> None:
    nb = json.loads(text)
    bounds.cap_cells(nb)
    integrity.compare_cells("s", NB, nb, {})


def grade_peak(tmp: Path, extra: bool) -> list:
    root = tmp / ("big" if extra else "plain")
    (root / "autograde").mkdir(parents=True)
    for name in ("nbgrader_config.py", "header.ipynb"):
        shutil.copy(ROOT / "autograde" / name, root / "autograde" / name)
    for folder in ("solutions", "exercises"):
        (root / folder / "lesson").mkdir(parents=True)
        shutil.copy(ROOT / folder / "lesson" / f"{NB}.ipynb", root / folder / "lesson")
    incoming = root / "incoming"
    course = Course(root)
    synthetic.write_student(incoming, "honest", "lesson", {NB: synthetic.submission(course, "lesson")[NB]})
    if extra:
        for student, times in (("big5", 1), ("big50", 10)):
            nb = synthetic.submission(course, "lesson")[NB]
            synthetic.insert_code(nb, "answer_ex1", "x=1\n" * 1_000_000 * times)
            synthetic.write_student(incoming, student, "lesson", {NB: nb})
    run = subprocess.run([sys.executable, "-c", MEASURE, str(incoming), str(root)], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grade", action="store_true", help="also measure the grade command's peak RSS (minutes)")
    args = parser.parse_args()
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    five = json.dumps({"cells": [dict(cell, source="x=1\n" * 1_000_000)]})
    seconds, peak = traced(lambda: host_path(five))
    print(f"5 MB notebook ({len(five) / 1e6:.1f} MB), read + cap + scan: {seconds:.2f} s, peak {peak:.0f} MB traced")
    ast_cell = "x=1\n" * (bounds.AST_SCAN_CHARS // 4)
    seconds, peak = traced(lambda: integrity.scan_source(ast_cell))
    print(f"worst syntax-tree scan ({len(ast_cell)} characters of x=1): {seconds:.2f} s, peak {peak:.0f} MB traced")
    text_cell = "x=1\n" * (bounds.MAX_CELL_CHARS // 4)
    seconds, peak = traced(lambda: integrity.scan_source(text_cell))
    print(f"text scan at the cell cap ({len(text_cell)} characters): {seconds:.2f} s, peak {peak:.0f} MB traced")
    if args.grade:
        with tempfile.TemporaryDirectory() as tmp:
            for extra in (False, True):
                own, children = grade_peak(Path(tmp), extra)
                what = "honest + 5 MB + 50 MB notebooks" if extra else "honest only"
                print(f"grade --jobs 2, {what}: peak RSS {own:.0f} MB (command), {children:.0f} MB (largest worker or "
                      f"kernel); bound {bounds.WORKER_PEAK_BYTES / 2**20:.0f} MB")


if __name__ == "__main__":
    main()
