"""The instructor's day without a browser (issue 17): a shell without the venv, re-grades, feedback, git.

* the grade command run from a PATH without the venv (it must find alembic itself), and a failure
  that prints one line and the log's path, never a traceback;
* the feedback after a re-grade holds the manual mark and comment; a changed answer clears its mark
  and is listed for a manual re-grade; feedback is Chinese, offline and private;
* after stock ``nbgrader collect`` (exchange), ``nbgrader zip_collect`` and the grade command, git
  sees no untracked student file in a checkout with the repository's .gitignore.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grading_helpers import ROOT, comments, course_copy, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
NB = "02-ring-allreduce"
BARE_PATH = "/usr/bin:/bin"  # no .venv/bin: no alembic, no nbgrader, no jupyter
ANSWER = "发送量由算法和 rank 数决定,带宽减半只让下界加倍。"
WRONG_EX1 = "ex1_send_per_rank_GB = '24 GB'\nex1_lower_bound_ms = 480"  # named mistakes (bits for bytes, ...)


def _cli(course: Course, *args, path=BARE_PATH):
    env = dict(os.environ, PATH=path, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), *args],
                          env=env, capture_output=True, text=True, timeout=600)


def _set_mark(db: Path, student: str, cell: str, score, comment) -> None:
    con = sqlite3.connect(str(db))
    q = ("UPDATE {t} SET {c} = ? WHERE id IN (SELECT x.id FROM {t} x JOIN submitted_notebook sn ON x.notebook_id = sn.id "
         "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell bc ON x.cell_id = bc.id "
         "WHERE sa.student_id = ? AND bc.name = ?)")
    con.execute(q.format(t="grade", c="manual_score"), (score, student, cell))
    con.execute(q.format(t="comment", c="manual_comment"), (comment, student, cell))
    con.commit()
    con.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course graded for the first time by the CLI from a PATH that lacks the venv."""
    tmp = tmp_path_factory.mktemp("day")
    course = Course(course_copy(tmp / "course", (NB,)))
    folder = tmp / "in"
    synthetic.write_student(folder, "s1", "lesson", synthetic.submission(course, "lesson", {"explain_ex1": ANSWER}))
    synthetic.write_student(folder, "s2", "lesson", synthetic.submission(course, "lesson", {"answer_ex1": WRONG_EX1}))
    done = _cli(course, "grade", str(folder), "--jobs", "2", "--timeout", "10")
    return course, folder, done


def test_grade_command_works_without_the_venv_on_path(graded):
    """First run (a new gradebook needs alembic) from PATH=/usr/bin:/bin: does it grade both students?"""
    course, _, done = graded
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert {k[0] for k in scores(course.gradebook)} == {"s1", "s2"}
    assert course.grades_csv.exists() and (course.feedback / "s1" / "lesson" / f"{NB}.html").exists()


def test_a_failure_is_one_line_with_the_log_path(graded, tmp_path):
    """A gradebook that is not a database: one line naming the problem and a log file, no traceback?"""
    course = Course(course_copy(tmp_path / "broken", (NB,)))
    course.gradebook.write_bytes(b"this is not an SQLite file" * 100)
    done = _cli(course, "grade", str(graded[1]), "--jobs", "1")
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    log = Path(re.search(r"详情见 (\S+\.log)", lines[0]).group(1))
    assert "Traceback" in log.read_text(encoding="utf-8") and "DatabaseError" in lines[0]


def test_feedback_after_a_regrade_holds_the_manual_mark(graded):
    """`feedback` after manual grading, then a re-grade with the answer unchanged: is the mark in the feedback?"""
    course, folder, _ = graded
    _set_mark(course.gradebook, "s1", "explain_ex1", 1.5, "论证完整,$2(R-1)/R$ 写对了")
    html = course.feedback / "s1" / "lesson" / f"{NB}.html"
    assert "得分：1.5 / 2.0" not in html.read_text(encoding="utf-8")
    done = _cli(course, "feedback", "--student", "s1")  # after manual grading, without a re-grade
    assert done.returncode == 0 and "得分：1.5 / 2.0" in html.read_text(encoding="utf-8"), done.stderr
    summary = grade(folder, root=course.root, jobs=1, timeout=10, quiet=True, students=["s1"])
    assert summary["graded"] == ["s1"] and summary["not_selected"] == 1 and summary["regrade"] == []
    html = (course.feedback / "s1" / "lesson" / f"{NB}.html").read_text(encoding="utf-8")
    assert "得分：1.5 / 2.0" in html and "论证完整" in html
    assert scores(course.gradebook)[("s1", NB, "explain_ex1")] == (1.5, 2.0)


def test_a_changed_answer_clears_its_mark_and_asks_for_a_regrade(graded, capsys):
    """New answer text: is the old mark cleared, the cell listed, and the mark gone from the feedback?"""
    course, folder, _ = graded
    _set_mark(course.gradebook, "s1", "explain_ex1", 1.5, "论证完整")  # the classmate's mark must survive
    _set_mark(course.gradebook, "s2", "explain_ex1", 2.0, "旧答案的评语")
    synthetic.write_student(folder, "s2", "lesson", synthetic.submission(
        course, "lesson", {"answer_ex1": WRONG_EX1, "explain_ex1": "换了一个说法。"}))
    summary = grade(folder, root=course.root, jobs=1, timeout=10)
    assert summary["graded"] == ["s2"] and summary["regrade"] == [("s2", NB, "explain_ex1")]
    assert "需要重新人工评分" in capsys.readouterr().out
    assert scores(course.gradebook)[("s2", NB, "explain_ex1")] == (None, 2.0)
    assert comments(course.gradebook)[("s2", NB, "explain_ex1")][1] is None
    assert scores(course.gradebook)[("s1", NB, "explain_ex1")] == (1.5, 2.0)  # the other student untouched
    html = (course.feedback / "s2" / "lesson" / f"{NB}.html").read_text(encoding="utf-8")
    assert "旧答案的评语" not in html


def test_feedback_is_chinese_offline_and_private(graded):
    """No English labels, no CDN, no hidden-test source, no traceback, no path of this machine; the check's message."""
    course, _, _ = graded
    html = (course.feedback / "s2" / "lesson" / f"{NB}.html").read_text(encoding="utf-8")
    for english in ("Test cell", "Written response", "Student's answer", "Score:", "Comments:"):
        assert english not in html, english
    assert "测试单元" in html and "你的回答" in html
    assert not re.search(r"<script[^>]+src=\"https?://", html) and "cdnjs" not in html
    assert 'src="../../_mathjax/tex-chtml.js"' in html and (course.feedback / "_mathjax" / "tex-chtml.js").is_file()
    assert "BEGIN HIDDEN TESTS" not in html and "隐藏测试，评分时运行" in html
    assert "Traceback (most recent call last)" not in html and "\x1b[" not in html and 'File "' not in html
    for path in (str(course.root), str(ROOT), sys.prefix, "/tmp/"):
        assert path not in html, path
    assert "把比特当成了字节" in html  # the named mistake, as the check wrote it


def _git(cwd: Path, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env=dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
                                   GIT_COMMITTER_EMAIL="t@t")).stdout


def test_no_student_file_is_left_untracked(tmp_path):
    """After exchange collect, zip_collect and grade: does `git status` show no untracked file (and does it see new ones)?"""
    course = Course(course_copy(tmp_path / "repo", (NB,)))
    shutil.copy(ROOT / ".gitignore", course.root / ".gitignore")
    _git(course.root, "init", "-q")
    _git(course.root, "add", "-A")
    _git(course.root, "commit", "-qm", "course")
    answers = synthetic.submission(course, "lesson", {"explain_ex1": ANSWER})
    # stock exchange: <exchange>/<course>/inbound/<student>+<assignment>+<timestamp>+<random>/
    exchange = tmp_path / "exchange"
    synthetic.write_student(tmp_path / "tmp-in", "ex1", "lesson", answers)
    inbound = exchange / "parallel-budget" / "inbound" / "ex1+lesson+2026-12-01 08:00:00.000000 UTC+abc"
    shutil.copytree(tmp_path / "tmp-in" / "ex1" / "lesson", inbound)
    done = _cli(course, "nbgrader", "collect", "lesson", f"--Exchange.root={exchange}")  # as autograde/README.md
    assert done.returncode == 0, done.stdout + done.stderr
    # stock zip_collect: archives in <course root>/downloaded/<assignment>/archive/
    archive_dir = course.root / "downloaded" / "lesson" / "archive"
    archive_dir.mkdir(parents=True)
    with zipfile.ZipFile(archive_dir / "lms.zip", "w") as zf:
        zf.writestr(f"export/zc1_{NB}.ipynb", json.dumps(answers[NB], ensure_ascii=False))
    done = _cli(course, "nbgrader", "zip_collect", "lesson", "--force", "--TopLevelNames.unwrap=True")  # export/
    assert done.returncode == 0, done.stdout + done.stderr
    assert (course.submitted / "ex1" / "lesson" / f"{NB}.ipynb").exists()
    assert (course.submitted / "zc1" / "lesson" / f"{NB}.ipynb").exists()
    folder = tmp_path / "folder"
    synthetic.write_student(folder, "f1", "lesson", answers)
    summary = grade(folder, root=course.root, jobs=2, timeout=10, quiet=True)
    assert summary["graded"] == ["ex1", "f1", "zc1"] and not summary["failed"]
    assert _git(course.root, "status", "--porcelain", "--untracked-files=all") == ""
    (course.source / "lesson" / "new.ipynb").write_text("{}")  # the check can fail: a real new file shows
    assert "?? solutions/lesson/new.ipynb" in _git(course.root, "status", "--porcelain", "--untracked-files=all")
