"""Does `grade --jobs 2` give exactly the serial result, survive being killed, and handle late work?

A small course (two notebooks) and a class of five students, one of whom
kills their kernel.  Every run is the real grade command.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from grading_helpers import ROOT, comments, course_copy, flags, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading import runner
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
NOTEBOOKS = ("01-two-rank-update", "05-debugging")
ONE = ("05-debugging",)


def _class(course: Course, folder: Path, names) -> None:
    right = synthetic.submission(course, "lesson")
    wrong = synthetic.submission(course, "lesson", {"answer_updated_w": "updated_w = 0.4", "answer_hang": "hang_rank = 0\nhang_cause = 'C'"})
    dies = synthetic.submission(course, "lesson", {"answer_bug": "import os\nos._exit(1)"})
    for i, name in enumerate(names):
        synthetic.write_student(folder, name, "lesson", [right, wrong, dies][i % 3])


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _outputs(course: Course) -> dict:
    out = {"csv": course.grades_csv.read_text(encoding="utf-8"),
           "integrity": course.integrity_csv.read_text(encoding="utf-8"),
           "scores": scores(course.gradebook), "comments": comments(course.gradebook), "flags": flags(course.gradebook)}
    for path in sorted(course.feedback.rglob("*.html")):
        out[str(path.relative_to(course.feedback))] = path.read_text(encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def classroom_dir(tmp_path_factory):
    root = course_copy(tmp_path_factory.mktemp("template"), NOTEBOOKS)
    folder = tmp_path_factory.mktemp("class")
    _class(Course(root), folder, [f"p{i}" for i in range(4)])
    return folder


@pytest.fixture(scope="module")
def serial_and_parallel(tmp_path_factory, classroom_dir):
    serial = Course(course_copy(tmp_path_factory.mktemp("serial"), NOTEBOOKS))
    parallel = Course(course_copy(tmp_path_factory.mktemp("parallel"), NOTEBOOKS))
    for course, jobs in ((serial, 1), (parallel, 2)):
        summary = grade(classroom_dir, root=course.root, jobs=jobs, timeout=5, quiet=True)
        assert summary["kernels"]["fresh"] == 0 and summary["kernels"]["forked"] >= 8, summary  # warm kernels
    return serial, parallel


def test_parallel_equals_serial(serial_and_parallel):
    """Are scores, comments, flags, the CSV and every feedback file identical with --jobs 1 and --jobs 2?"""
    serial, parallel = serial_and_parallel
    a, b = _outputs(serial), _outputs(parallel)
    assert a.keys() == b.keys() and len([k for k in a if k.endswith(".html")]) == 8
    for key in a:
        assert a[key] == b[key], key
    assert ("p2", "01-two-rank-update", "answer_bug", "kernel_died") in a["flags"]


def test_warm_kernels_grade_exactly_like_fresh_kernels(tmp_path, classroom_dir, serial_and_parallel):
    """With ``fork_kernels = False`` (every kernel started from scratch, as stock nbgrader does), is every output the same?"""
    fresh = Course(course_copy(tmp_path / "fresh", NOTEBOOKS))
    with open(fresh.config_file, "a", encoding="utf-8") as fh:
        fh.write("\nc.ResilientExecute.fork_kernels = False\n")
    summary = grade(classroom_dir, root=fresh.root, jobs=2, timeout=5, quiet=True)
    assert summary["kernels"]["forked"] == 0 and summary["kernels"]["fresh"] >= 8, summary
    serial, _ = serial_and_parallel
    a, b = _outputs(serial), _outputs(fresh)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == b[key], key


def test_one_broken_student_does_not_block_the_others(serial_and_parallel):
    """Do the students next to a dying kernel get full marks on every test cell?"""
    _, parallel = serial_and_parallel
    sc = scores(parallel.gradebook)
    for student in ("p0", "p3"):
        mine = {k: v for k, v in sc.items() if k[0] == student and k[2].startswith("test_")}
        assert mine and all(v[0] == v[1] for v in mine.values()), student
    assert sc[("p2", "05-debugging", "test_hang_rank")] == (1.0, 1.0)  # its other notebook is untouched


def test_killed_run_leaves_gradebook_untouched_and_rerun_completes(tmp_path, classroom_dir, serial_and_parallel):
    """After kill -9 mid-run, is the gradebook byte-identical to before, and does rerunning finish the class?"""
    course = Course(course_copy(tmp_path / "course", NOTEBOOKS))
    first = tmp_path / "first"
    _class(course, first, ["p0", "p1"])
    grade(first, root=course.root, jobs=2, timeout=5, quiet=True)
    before = _digest(course.gradebook)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "grade",
                             str(classroom_dir), "--jobs", "2", "--timeout", "5"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    shards = course.work / "shards"
    while time.monotonic() < deadline and not list(shards.glob("*/done.json")):
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert list(shards.glob("*/done.json")), "no shard finished before the kill"
    assert _digest(course.gradebook) == before
    con = sqlite3.connect(str(course.gradebook))
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    summary = grade(classroom_dir, root=course.root, jobs=2, timeout=5, quiet=True)
    assert not summary["failed"]
    _, parallel = serial_and_parallel
    assert scores(course.gradebook) == scores(parallel.gradebook)
    assert not (course.work / "journal.json").exists()


def test_crash_after_gradebook_replace_is_completed_by_the_next_run(tmp_path, monkeypatch):
    """If the run dies after the gradebook is replaced, does the next run place feedback and export?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    folder = tmp_path / "in"
    _class(course, folder, ["p0"])
    real_export = runner.export

    def dying_export(c):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "export", dying_export)
    with pytest.raises(KeyboardInterrupt):
        grade(folder, root=course.root, jobs=1, timeout=5, quiet=True)
    assert (course.work / "journal.json").exists() and not course.grades_csv.exists()
    monkeypatch.setattr(runner, "export", real_export)
    summary = grade(folder, root=course.root, jobs=1, timeout=5, quiet=True)
    assert summary["graded"] == [] and summary["skipped"] == 1
    assert course.grades_csv.exists() and (course.feedback / "p0" / "lesson" / "05-debugging.html").exists()
    assert not (course.work / "journal.json").exists()


def test_late_submission_and_single_regrade_keep_manual_grades(tmp_path):
    """Is a late zip_collect archive graded alone, and does re-grading one student keep manual scores?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    folder = tmp_path / "in"
    _class(course, folder, ["p0", "p1"])
    grade(folder, root=course.root, jobs=2, timeout=5, quiet=True)
    con = sqlite3.connect(str(course.gradebook))
    con.execute("UPDATE grade SET manual_score = 0.5 WHERE id IN (SELECT g.id FROM grade g JOIN submitted_notebook sn "
                "ON g.notebook_id = sn.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell bc "
                "ON g.cell_id = bc.id WHERE sa.student_id = 'p1' AND bc.name = 'test_hang_rank')")
    con.commit()
    con.close()
    late = tmp_path / "late"
    _class(course, late, ["p0", "p1", "late"])
    archive = tmp_path / "downloaded.zip"  # what zip_collect takes: <student>_<notebook>.ipynb
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(late / "late" / "lesson" / "05-debugging.ipynb", "lms-export/late_05-debugging.ipynb")
    summary = grade(archive, root=course.root, jobs=2, timeout=5, quiet=True, owner="late", unwrap=True)  # README 4.4
    assert summary["graded"] == ["late"] and summary["skipped"] == 2
    summary = grade(None, root=course.root, jobs=2, timeout=5, quiet=True, students=["p1"])
    assert summary["graded"] == ["p1"]
    sc = scores(course.gradebook)
    assert sc[("p1", "05-debugging", "test_hang_rank")] == (0.5, 1.0)
    assert {k[0] for k in sc} == {"p0", "p1", "late"}
