"""Is the grader's own work on a submission bounded (issue 22, items 4, 7 and 8)?

* size caps before parsing: a 5 MB notebook (one cell ``"x=1\\n" * 1_000_000``) keeps its
  honest points, its big cell is neither scanned nor run and is reported; a 50 MB notebook is
  never read and scores 0; a graded cell over the cap scores 0; a cell the scan cannot read
  costs that cell only;
* the grading processes' peak memory, measured, stays under :data:`.bounds.WORKER_PEAK_BYTES`;
* a 280 KB data cell before ``consistent_checkpoint`` reaches the function host whole;
* the per-student time budget: a student whose every answer cell sleeps just under the cell
  timeout is cut at the budget, scores 0 on what did not run and is reported; a classmate is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from grading_helpers import course_copy, flags, notebook_total, scores

from parallel_budget.grading import bounds
from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.scoring import integrity
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

NB, CKPT = "02-ring-allreduce", "05-debugging"
BIG_CELL = "x=1\n" * 1_000_000  # the 5 MB notebook of the review
DATA_CELL = "DATA = [" + ", ".join(f"{i * 0.001:.6f}" for i in range(28_000)) + "]\n"  # about 280 KB


def test_scan_failures_cost_the_cell_not_the_student():
    """Does a cell the parser gives up on (MemoryError, RecursionError) get replaced and reported, never raised?"""
    for source in ("-" * 50_000 + "1", "x = 1" + " + 1" * 15_000):
        assert len(source) <= bounds.AST_SCAN_CHARS
        with pytest.raises(integrity.ScanFailed):
            integrity.scan_source(source)
        nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": source},
                        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                         "source": "import socket\n"}]}
        found = integrity.compare_cells("s", "nb", nb, {})
        assert [(f.cell, f.trick) for f in found] == [("第 1 个单元", "unscannable_cell"), ("第 2 个单元", "network")]
        assert nb["cells"][0]["source"].startswith("# ") and "\n" not in nb["cells"][0]["source"].rstrip("\n")


def test_long_cells_are_scanned_on_their_text():
    """Is a cell too long for the syntax tree still scanned for the tricks (on its text)?"""
    tricks = {t for t, _ in integrity.scan_source("x = 1\n" * 20_000 + "import subprocess\nclass A:\n    def __eq__(self, o):\n        return True\n")}
    assert {"spawn_processes", "lying_object"} <= tricks
    assert integrity.scan_source(DATA_CELL) == []


def test_cells_over_the_cap_are_replaced_before_anything_reads_them():
    """Does cap_cells replace exactly the cells over MAX_CELL_CHARS (source as one string or as lines)?"""
    lines = ["y=2\n"] * (bounds.MAX_CELL_CHARS // 4 + 1)
    nb = {"cells": [{"cell_type": "code", "metadata": {"nbgrader": {"grade_id": "answer_a", "solution": True}},
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": "x"}], "source": BIG_CELL},
                    {"cell_type": "markdown", "metadata": {}, "source": lines},
                    {"cell_type": "code", "metadata": {}, "outputs": [], "source": DATA_CELL}]}
    assert bounds.cap_cells(nb) == [(0, "answer_a", len(BIG_CELL)), (1, None, 4 * len(lines))]
    assert nb["cells"][0]["source"] == bounds.stub(len(BIG_CELL)) and nb["cells"][0]["outputs"] == []
    assert nb["cells"][0]["metadata"] == {"nbgrader": {"grade_id": "answer_a", "solution": True}}
    assert nb["cells"][2]["source"] == DATA_CELL


# The command's own peak is VmHWM (this process image only): ru_maxrss of RUSAGE_SELF also counts the pages
# the process shared with its parent before exec, here the pytest worker (~700 MB in CI), not the grader.
# RUSAGE_CHILDREN is the largest worker or kernel, an upper bound (each counts what it shared at its fork).
MEASURE = textwrap.dedent("""
    import json, resource, sys
    from parallel_budget.grading.runner import grade
    summary = grade(sys.argv[1], root=sys.argv[2], jobs=2, quiet=True)
    with open("/proc/self/status") as status:
        hwm = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"summary": summary, "self": hwm, "children": children}))
""")


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """One run (in a subprocess, whose peak memory is measured) of honest and oversized submissions."""
    root = course_copy(tmp_path_factory.mktemp("course"), notebooks={NB, CKPT})
    course = Course(root)
    incoming = tmp_path_factory.mktemp("incoming")
    honest = synthetic.submission(course, "lesson")
    synthetic.write_student(incoming, "honest", "lesson", honest)
    big5 = synthetic.submission(course, "lesson")[NB]
    synthetic.insert_code(big5, "answer_ex1", BIG_CELL)
    big50 = synthetic.submission(course, "lesson")[NB]
    synthetic.insert_code(big50, "answer_ex1", BIG_CELL * 10)
    explain = synthetic.submission(course, "lesson", {"explain_ex1": "很长的解释。" * 200_000})[NB]
    data = synthetic.submission(course, "lesson")[CKPT]
    synthetic.insert_code(data, "answer_ckpt", DATA_CELL)
    deep = synthetic.submission(course, "lesson")[NB]
    synthetic.insert_code(deep, "answer_ex1", "-" * 50_000 + "1")
    for student, notebooks in (("big5", {NB: big5}), ("big50", {NB: big50}), ("bigexplain", {NB: explain}),
                               ("bigdata", {CKPT: data}), ("deep", {NB: deep})):
        folder = incoming / student / "lesson"
        folder.mkdir(parents=True)
        for name, nb in notebooks.items():  # compact JSON: the sizes of the review
            (folder / f"{name}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
    sizes = {p.parent.parent.name: p.stat().st_size for p in incoming.glob(f"big5*/lesson/{NB}.ipynb")}
    run = subprocess.run([sys.executable, "-c", MEASURE, str(incoming), str(root)], capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    measured = json.loads(run.stdout.strip().splitlines()[-1])
    return course, measured, sizes, scores(course.gradebook), flags(course.gradebook)


def test_the_grader_stays_under_its_memory_bound(big):
    """Do the grade command and its workers, fed a 5 MB and a 50 MB notebook, stay under WORKER_PEAK_BYTES?"""
    _, measured, sizes, _, _ = big
    assert sizes["big5"] > 4_000_000 and sizes["big50"] > 40_000_000
    assert measured["self"] < bounds.WORKER_PEAK_BYTES, measured
    assert measured["children"] < bounds.WORKER_PEAK_BYTES, measured


def test_oversized_submissions_cost_only_what_is_over_the_cap(big):
    """Is everyone graded, the 5 MB notebook at full marks minus nothing, the 50 MB one at 0, each reported?"""
    _, measured, _, sc, fl = big
    summary = measured["summary"]
    assert set(summary["graded"]) == {"honest", "big5", "big50", "bigexplain", "bigdata", "deep"}
    assert not summary["failed"]
    full = notebook_total(sc, "honest", NB)
    assert full == sum(mx for (s, n, c), (_, mx) in sc.items() if s == "honest" and n == NB and c.startswith("test_"))
    assert notebook_total(sc, "big5", NB) == full and notebook_total(sc, "deep", NB) == full
    assert notebook_total(sc, "big50", NB) == 0
    assert ("big5", NB, "第 7 个单元", "oversized_cell") in fl
    assert ("big50", NB, "", "oversized_notebook") in fl
    assert ("deep", NB, "第 7 个单元", "unscannable_cell") in fl
    assert ("bigexplain", NB, "explain_ex1", "oversized_cell") in fl
    assert sc[("bigexplain", NB, "explain_ex1")][0] == 0 and notebook_total(sc, "bigexplain", NB) == full
    assert not {f for f in fl if f[0] in ("honest", "bigdata") and f[3] != "missing_notebook"}


def test_a_big_data_cell_reaches_the_function_host(big):
    """Do the consistent_checkpoint tests score as for an honest student after a 280 KB data cell?"""
    _, _, _, sc, _ = big
    assert len(DATA_CELL) > 270_000
    ckpt = sorted(k[2] for k in sc if k[0] == "honest" and k[2].startswith("test_ckpt_"))
    assert len(ckpt) == 4
    for cell in ckpt:
        assert sc[("bigdata", CKPT, cell)] == sc[("honest", CKPT, cell)] and sc[("bigdata", CKPT, cell)][0] > 0, cell


BUDGET, TIMEOUT, SLEEP = 30, 8, 7.5  # six sleeping cells would take 45 s


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    root = course_copy(tmp_path_factory.mktemp("course"), notebooks={NB})
    with open(root / "autograde" / "nbgrader_config.py", "a", encoding="utf-8") as fh:
        fh.write(f"\nc.ResilientExecute.student_budget = {BUDGET}\n")
    course = Course(root)
    incoming = tmp_path_factory.mktemp("incoming")
    synthetic.write_student(incoming, "honest", "lesson", synthetic.submission(course, "lesson"))
    walk = synthetic.submission(course, "lesson")[NB]
    nap = f"import time\ntime.sleep({SLEEP})\n"
    for gid in ("answer_ex1", "answer_ex2", "answer_step", "answer_overlap"):
        cell = synthetic.cell(walk, gid)
        cell["source"] = nap + "".join(cell["source"])
    synthetic.insert_code(walk, "answer_ex1", nap)
    synthetic.insert_code(walk, "answer_ex1", nap)
    synthetic.write_student(incoming, "slow", "lesson", {NB: walk})
    summary = grade(incoming, root=root, jobs=2, timeout=TIMEOUT, quiet=True)
    return course, summary, scores(course.gradebook), flags(course.gradebook)


def test_a_slow_walk_is_cut_at_the_student_budget(slow):
    """Does a student whose answer cells each sleep just under the timeout lose what did not run, reported?"""
    course, summary, sc, fl = slow
    assert set(summary["graded"]) == {"honest", "slow"} and not summary["failed"]
    full = sum(mx for (s, n, c), (_, mx) in sc.items() if s == "honest" and n == NB and c.startswith("test_"))
    assert notebook_total(sc, "honest", NB) == full and not {f for f in fl if f[0] == "honest"}
    assert notebook_total(sc, "slow", NB) < full
    assert sc[("slow", NB, "test_overlap_step")][0] == 0  # the last question never ran
    rows = [f for f in fl if f[0] == "slow" and f[3] == "time_budget"]
    assert len(rows) == 1
    nb = json.loads((course.autograded / "slow" / "lesson" / f"{NB}.ipynb").read_text(encoding="utf-8"))
    cut = [c for c in nb["cells"] if any(o.get("ename") == bounds.OVER_BUDGET for o in c.get("outputs", []))]
    assert cut and all(f"{BUDGET} s" in c["outputs"][0]["evalue"] for c in cut)
    with open(course.integrity_csv, encoding="utf-8") as fh:
        assert f"超出每名学生的评分时间预算 {BUDGET} s" in fh.read()

