"""Do hostile and broken submissions lose exactly what they tampered with, and get reported?

One real nbgrader run (the course's grade command, two workers, 3 s cell
timeout) over an honest student, a student with classic slips and one student
per trick in ``tests/files/<defect>.ipynb``.  Every hostile file is a
submission of ``02-ring-allreduce`` (11 automatic points: ex1 send 2, ex1
bound 2, ex2 send 2, ex2 bound 2, step 1, speedup 1, efficiency 1).
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from grading_helpers import FILES, course_copy, flags, notebook_total, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.intake.collect import intake_rows
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
NB = "02-ring-allreduce"
HOSTILE = sorted(p.stem for p in FILES.glob("*.ipynb"))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = course_copy(tmp_path_factory.mktemp("course"))
    course = Course(root)
    incoming = tmp_path_factory.mktemp("incoming")
    synthetic.write_student(incoming, "honest", "lesson", synthetic.submission(course, "lesson"))
    slips = synthetic.submission(course, "lesson", {
        "answer_ex1": "ex1_send_per_rank_GB = '24 GB'\nex1_lower_bound_ms = 480",
        "answer_ex2": "ex2_send_per_rank_GB = '56000 MB'\nex2_lower_bound_ms = '0.14 s'",
        "answer_updated_w": "updated_w = 0.85",
        "answer_zero2": "zero2_GB = '24.45 GiB'",
        "answer_peak": "peak_GB = 27\nsmallest_stage = 2",
    })
    synthetic.write_student(incoming, "slips", "lesson", {k: v for k, v in slips.items() if k[:2] in ("01", "02", "03")})
    for name in HOSTILE:
        dest = incoming / name / "lesson"
        dest.mkdir(parents=True)
        shutil.copy(FILES / f"{name}.ipynb", dest / f"{NB}.ipynb")
    # the invalid-JSON student also hands in a valid 01, which must keep its points
    synthetic.write_student(incoming, "invalid-json", "lesson",
                            {"01-two-rank-update": synthetic.submission(course, "lesson")["01-two-rank-update"]})
    # output that reaches nbgrader in several chunks (a flush, then more text) must be saved as one
    chunky = synthetic.submission(course, "lesson")["01-two-rank-update"]
    synthetic.insert_code(chunky, "answer_updated_w", CHUNKY)
    synthetic.write_student(incoming, "chunky", "lesson", {"01-two-rank-update": chunky})
    summary = grade(incoming, root=root, jobs=2, timeout=3, quiet=True)
    return course, summary, scores(course.gradebook), flags(course.gradebook)


CHUNKY = "import time\nprint('first', end='', flush=True)\ntime.sleep(0.5)\nprint(' second')\nprint('third')"


def test_stream_output_is_one_block_however_it_was_flushed(graded):
    """Is stdout that arrived in chunks stored as one stream output (so feedback never depends on timing)?"""
    course, _, _, _ = graded
    nb = json.loads((course.autograded / "chunky" / "lesson" / "01-two-rank-update.ipynb").read_text(encoding="utf-8"))
    mine = next(c for c in nb["cells"] if "".join(c["source"]) == CHUNKY)
    outputs = [(o["output_type"], o.get("name"), "".join(o.get("text", ""))) for o in mine["outputs"]]
    assert outputs == [("stream", "stdout", "first second\nthird\n")]


def test_every_student_is_graded(graded):
    """Does every student, hostile or not, end up in the gradebook, the CSV and the feedback?"""
    course, summary, sc, _ = graded
    students = {"honest", "slips", "chunky", *HOSTILE}
    assert set(summary["graded"]) == students and not summary["failed"]
    with open(course.grades_csv, encoding="utf-8") as fh:
        assert {row["student_id"] for row in csv.DictReader(fh)} == students
    for s in students - {"invalid-json", "chunky"}:  # these two hand in no 02
        assert (course.feedback / s / "lesson" / f"{NB}.html").exists(), s


def test_honest_student_gets_every_automatic_point(graded):
    """Do the source solutions score full marks on every test cell?"""
    _, _, sc, fl = graded
    mine = {k: v for k, v in sc.items() if k[0] == "honest" and k[2].startswith("test_")}
    assert len(mine) == 26
    assert all(v[0] == v[1] for v in mine.values()), [k for k, v in mine.items() if v[0] != v[1]]
    assert not {f for f in fl if f[0] == "honest"}


def test_slips_are_named_in_the_feedback_html(graded):
    """Does the feedback HTML name bits-for-bytes, receive counted, averaging twice, GiB and activations/D?"""
    course, _, sc, _ = graded
    html = (course.feedback / "slips" / "lesson" / f"{NB}.html").read_text(encoding="utf-8")
    assert "把比特当成了字节" in html and "把接收量也算进了发送量" in html
    assert "ex2_send_per_rank_GB = 56 GB 不对" in html and "算成了全网所有 rank 的发送总量" in html
    assert "平均做了两次" in (course.feedback / "slips" / "lesson" / "01-two-rank-update.html").read_text(encoding="utf-8")
    zero = (course.feedback / "slips" / "lesson" / "03-zero-memory.html").read_text(encoding="utf-8")
    assert "GiB" in zero and "把激活也除以了 D" in zero
    assert sc[("slips", NB, "test_ex2_bound")][0] == 2  # "0.14 s" is 140 ms: converted, right
    assert notebook_total(sc, "slips", NB) == notebook_total(sc, "honest", NB) - 2 - 2 - 2


EXPECTED = {
    # student: (score of 02 out of 11, tricks that must be flagged).  Test cells run in the
    # grader (trusted checking), so a trick in the kernel earns nothing: only right values score.
    # collection quarantines it (unreadable_notebook, an integrity.csv row): the shard finds 02 missing
    "invalid-json": (0, {"missing_notebook"}),
    "deleted-test-cell": (9, {"deleted_test_cell"}),
    "edited-test-cell": (9, {"edited_test_cell"}),
    "duplicated-test-cell": (11, {"duplicated_test_cell"}),
    "infinite-loop": (8, {"timeout"}),
    "kernel-exit": (8, {"kernel_died", "kill_kernel"}),
    "huge-output": (11, {"huge_output"}),
    "lying-objects": (7, {"lying_object"}),
    "rebound-checker": (7, {"rebind_checker"}),  # its no-op check changes nothing: its wrong ex1 scores 0
    "input-transformer": (7, {"skip_tests"}),  # test cells no longer run in its kernel: nothing to skip
    # its recursive glob of the whole (read-only, course-free) sandbox never ends: ex1 times out
    "reads-hidden-tests": (7, {"read_files", "timeout"}),
    "rebound-builtins": (7, {"rebind_builtins"}),  # its isinstance lies break pint in its own kernel: ex2 too
    "forged-receipt": (7, {"rebind_checker"}),  # was 11 ("flagged only"): the forged receipts earn nothing
}


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_tampered_questions_lose_their_points_and_are_flagged(graded, student):
    """Does each trick cost exactly the tampered questions, and appear in the integrity report?"""
    _, _, sc, fl = graded
    total, tricks = EXPECTED[student]
    assert notebook_total(sc, student, NB) == total, {k[2]: v for k, v in sc.items() if k[:2] == (student, NB)}
    assert tricks <= {f[3] for f in fl if f[0] == student}


def test_untouched_notebook_of_a_broken_student_keeps_its_points(graded):
    """Does a valid notebook keep full points when the same student's other notebook is invalid JSON?"""
    course, _, sc, _ = graded
    assert notebook_total(sc, "invalid-json", "01-two-rank-update") == 4
    assert ("invalid-json", "unreadable_notebook") in {(r[0], r[4]) for r in intake_rows(course)}


def test_tricks_that_were_flagged_only_now_score_zero(graded):
    """Do rebinding builtins, a no-op checker and a forged receipt earn 0 on the questions they tried to fake?"""
    _, _, sc, fl = graded
    for student in ("rebound-builtins", "rebound-checker", "forged-receipt", "input-transformer"):
        assert sc[(student, NB, "test_ex1_send")][0] == 0, student
    assert {f[3] for f in fl if f[0] == "forged-receipt"} >= {"rebind_checker"}
    assert not any(f[3] == "no_receipt" for f in fl)  # every receipt now comes from the grader itself


def test_huge_output_is_cut_and_kernel_death_is_explained(graded):
    """Is a 3 MB output cut in the autograded notebook, and does a dead kernel leave a Chinese message?"""
    course, _, _, _ = graded
    huge = course.autograded / "huge-output" / "lesson" / f"{NB}.ipynb"
    assert huge.stat().st_size < 200_000
    died = json.loads((course.autograded / "kernel-exit" / "lesson" / f"{NB}.ipynb").read_text(encoding="utf-8"))
    errors = [o for c in died["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any(o["ename"] == "KernelDied" and "内核" in o["evalue"] for o in errors)


def test_integrity_report_names_student_and_trick(graded):
    """Does autograde/integrity.csv list the student, the notebook, the cell and the trick in Chinese?"""
    course, _, _, _ = graded
    with open(course.integrity_csv, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    row = next(r for r in rows if r["student_id"] == "input-transformer" and r["trick"] == "skip_tests")
    assert row["notebook"] == NB and "测试单元不执行" in row["what"]
