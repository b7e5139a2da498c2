"""Infrastructure failures are never grades (issue 22, items 4, 6, 8): preflight, not-graded students, dead workers, batches.

A one-notebook course and a class of four: ``a`` (right), ``b`` (wrong), ``dies``
(its own code kills its kernel: still a grade) and ``slow`` (an answer cell that
sleeps, so the others finish first).  Every run is the real grade command.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from grading_helpers import course_copy, flags, scores

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.sandbox import forkclient, bwrap
from parallel_budget.grading.__main__ import main
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
ONE = ("05-debugging",)
SLOW_SECONDS = 15
# Breaks the kernel start of one student inside the spawned grading workers (a sitecustomize on PYTHONPATH,
# which the sandbox never sees): the sandboxed fork server is "unavailable" while that student is graded.
BREAKER = '''
import os
_target = os.environ.get("PB_TEST_BREAK_KERNELS_OF")
if _target:
    import parallel_budget.grading.fleet.shard as _shard
    from parallel_budget.grading.sandbox import warmkernels as _wk
    _real, _server = _shard.grade_student, _wk.server

    def grade_student(task):
        _wk.server = (lambda *a, **k: None) if task["student"] == _target else _server
        try:
            return _real(task)
        finally:
            _wk.server = _server

    _shard.grade_student = grade_student
'''


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _students(db: Path) -> set:
    if not db.exists():
        return set()
    con = sqlite3.connect(str(db), timeout=30)
    try:
        return {row[0] for row in con.execute("SELECT student_id FROM submitted_assignment")}
    except sqlite3.OperationalError:
        return set()
    finally:
        con.close()


@pytest.fixture(scope="module")
def class_dir(tmp_path_factory):
    course = Course(course_copy(tmp_path_factory.mktemp("template"), ONE))
    folder = tmp_path_factory.mktemp("class")
    synthetic.write_student(folder, "a", "lesson", synthetic.submission(course, "lesson"))
    synthetic.write_student(folder, "b", "lesson", synthetic.submission(course, "lesson", {"answer_hang": "hang_rank = 0\nhang_cause = 'C'"}))
    synthetic.write_student(folder, "dies", "lesson", synthetic.submission(course, "lesson", {"answer_late": "import os\nos._exit(1)"}))
    slow = f"import time\ntime.sleep({SLOW_SECONDS})\nhang_rank = 2\nhang_cause = 'B'"
    synthetic.write_student(folder, "slow", "lesson", synthetic.submission(course, "lesson", {"answer_hang": slow}))
    return folder


@pytest.fixture(scope="module")
def clean(tmp_path_factory, class_dir):
    """A clean run with --jobs 2, batches every 0.5 s; who reached the gradebook before ``slow`` finished."""
    course = Course(course_copy(tmp_path_factory.mktemp("clean"), ONE))
    early, stop = set(), threading.Event()

    def watch():
        while not stop.is_set():
            if not (course.work / "shards" / "slow" / "done.json").exists():
                present = _students(course.gradebook)
                if "slow" not in present:
                    early.update(present)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        summary = grade(class_dir, root=course.root, jobs=2, timeout=60, quiet=True, batch_seconds=0.5)
    finally:
        stop.set()
        watcher.join()
    return course, summary, early


def test_batches_merge_students_before_a_slow_one_finishes(clean):
    """Is a finished student's grade in the live gradebook while a slow student is still being graded?"""
    course, summary, early = clean
    assert summary["graded"] == ["a", "b", "dies", "slow"] and not summary["failed"], summary
    assert early & {"a", "b", "dies"}, "no student was merged before the slow one finished"
    assert summary["batches"] >= 2
    assert not (course.work / "journal.json").exists() and not list((course.work / "shards").iterdir())


def test_a_students_own_dying_kernel_is_still_a_grade(clean):
    """Does a kernel killed by the student's own code cost that cell (a grade), not mark the student not graded?"""
    course, summary, _ = clean
    sc = scores(course.gradebook)
    assert sc[("dies", "05-debugging", "test_late_step")][0] == 0
    assert sc[("dies", "05-debugging", "test_hang_rank")] == (1.0, 1.0)
    assert ("dies", "05-debugging", "answer_late", "kernel_died") in flags(course.gradebook)


def test_preflight_refuses_when_the_sandbox_cannot_import_the_package(tmp_path, monkeypatch, capsys, class_dir, clean):
    """Broken course package in the sandbox: exit 3, a Chinese cause, nothing collected, gradebook unchanged?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    shutil.copy(clean[0].gradebook, course.gradebook)
    before = _digest(course.gradebook)
    package = str(bwrap._package_dir())
    real = bwrap._read_only_paths
    monkeypatch.setattr(bwrap, "_read_only_paths", lambda: [p for p in real() if p != package])
    assert main(["--root", str(course.root), "grade", str(class_dir), "--jobs", "1"]) == 3
    err = capsys.readouterr().err
    assert "沙箱里的内核无法导入课程包 parallel_budget" in err and "No module named 'parallel_budget'" in err, err
    assert _digest(course.gradebook) == before
    assert not course.submitted.exists() and not course.grades_csv.exists()


def test_infrastructure_failure_mid_run_is_not_a_grade(tmp_path, monkeypatch, capsys, clean):
    """One student's kernels cannot start during a --force run: not graded, earlier grade kept, exit 1; a plain rerun grades them."""
    source, _, _ = clean
    shutil.copytree(source.root, tmp_path / "course", ignore=shutil.ignore_patterns(".work"))
    course = Course(tmp_path / "course")
    graded_before = scores(course.gradebook)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(BREAKER, encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hook), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PB_TEST_BREAK_KERNELS_OF", "b")
    code = main(["--root", str(course.root), "grade", "--force", "--jobs", "2", "--timeout", "60"])
    out = capsys.readouterr().out
    assert code == 1
    assert "未评分 1 人（b：评分环境故障" in out and "其余 3 人已评分，不受影响" in out, out
    assert "评分 3 人" in out
    assert scores(course.gradebook) == graded_before  # b's earlier grade untouched, the others the same again
    monkeypatch.delenv("PB_TEST_BREAK_KERNELS_OF")
    summary = grade(None, root=course.root, jobs=2, timeout=60, quiet=True)
    assert summary["graded"] == ["b"] and not summary["failed"] and summary["skipped"] == 3, summary
    assert scores(course.gradebook) == graded_before


def _workers() -> list[int]:
    """This process's grading workers (children of its multiprocessing fork server), never anything else."""
    procs = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmd = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        procs.append((int(entry.name), ppid, cmd))
    servers = {pid for pid, ppid, cmd in procs if ppid == os.getpid() and b"multiprocessing.forkserver" in cmd}
    return [pid for pid, ppid, _ in procs if ppid in servers]


def test_killed_worker_students_are_regraded_alone_with_the_same_scores(tmp_path, class_dir, clean):
    """SIGKILL of a worker mid-run (the OOM killer): is every student graded, with the clean run's scores?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    killed = []

    def killer():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            shards = course.work / "shards"
            busy = [p for p in shards.glob("*") if not (p / "done.json").exists()] if shards.exists() else []
            workers = _workers()
            if busy and workers:
                time.sleep(1.0)  # let it get into the student's kernels
                os.kill(workers[0], signal.SIGKILL)
                killed.append(workers[0])
            time.sleep(0.2)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    summary = grade(class_dir, root=course.root, jobs=2, timeout=60, quiet=True)
    thread.join()
    assert killed, "no worker was killed"
    assert summary["graded"] == ["a", "b", "dies", "slow"] and not summary["failed"], summary
    assert summary["retried"], summary
    assert scores(course.gradebook) == scores(clean[0].gradebook)
    assert not _workers()


def test_a_failed_fork_server_start_is_tried_again_by_the_next_shard(monkeypatch):
    """Is a fork-server start failure forgotten for the next shard (not remembered for the rest of the worker)?"""
    starts = []

    class Flaky:
        def __init__(self, limits=None):
            starts.append(limits)
            if len(starts) == 1:
                raise forkclient.ForkServerError("first start fails")
            self.owner, self.threads = os.getpid(), 1
            self.process = type("P", (), {"poll": staticmethod(lambda: None)})()

        def close(self):
            pass

    monkeypatch.setattr(forkclient, "ForkServer", Flaky)
    monkeypatch.setattr(forkclient, "_servers", {})
    monkeypatch.setattr(forkclient, "_failed", {})
    assert forkclient.server(role="test") is None
    assert forkclient.server(role="test") is None and len(starts) == 1  # same shard: no second wait
    forkclient.forget_failures()  # what grade_student does first
    srv = forkclient.server(role="test")
    assert isinstance(srv, Flaky) and len(starts) == 2
    forkclient._servers.clear()
