"""Issue 31, item 6: grading workers die with ``grade``, and a re-run ends what a killed run left.

``kill -9`` of a real ``grade`` command mid-run: within :data:`BOUND` seconds no worker (nor its sandbox) may
still run and the command's stdout must reach end-of-file (nobody holds it).  Then a worker of a "killed
run" that did survive (a registered process) is ended by the next run before it grades; a registered pid
now used by an unrelated process is never touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grading_helpers import ROOT, course_copy

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.fleet import lifeline
from parallel_budget.grading.course import Course

pytestmark = pytest.mark.slow
ONE = ("05-debugging",)
BOUND = 10.0  # seconds after kill -9 of grade by which every worker and sandbox is gone


def _alive(pid: int) -> bool:
    return lifeline.start_time(pid) is not None


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def _grade(course: Course, folder=None) -> subprocess.Popen:
    args = [sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "grade",
            "--jobs", "2", "--timeout", "60"] + ([str(folder)] if folder else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(course.root))


def test_kill_9_of_grade_leaves_no_worker_and_a_rerun_ends_leftovers(tmp_path):
    course = Course(course_copy(tmp_path / "course", ONE))
    folder = tmp_path / "class"
    slow = "import time\ntime.sleep(60)\nhang_rank = 2\nhang_cause = 'B'"
    for student in ("a", "b"):
        synthetic.write_student(folder, student, "lesson", synthetic.submission(course, "lesson", {"answer_hang": slow}))
    proc = _grade(course, folder)
    registry = course.work / "workers"
    deadline = time.monotonic() + 240
    workers: set[int] = set()
    try:
        while time.monotonic() < deadline and not (len(workers) >= 2 and any("bwrap" in _cmd(p) for p in _descendants(proc.pid))):
            workers = {int(p.name) for p in registry.glob("*")} if registry.is_dir() else set()
            assert proc.poll() is None, "grade ended before its workers were seen"
            time.sleep(0.2)
        tree = _descendants(proc.pid)
        assert workers and workers <= tree and any("bwrap" in _cmd(p) for p in tree), (workers, tree)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    killed = time.monotonic()
    while time.monotonic() - killed < BOUND and any(_alive(p) for p in tree):
        time.sleep(0.1)
    assert not [p for p in tree if _alive(p)], [(p, _cmd(p)) for p in tree if _alive(p)]
    proc.stdout.read()  # end-of-file: no survivor holds the command's stdout
    assert time.monotonic() - killed < BOUND + 1

    # A worker of a killed run that survived (a registered process outside any parent's reach), and a
    # registered pid that now belongs to an unrelated process (its start time differs): only the first is ended.
    survivor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    try:
        time.sleep(0.2)
        registry.mkdir(parents=True, exist_ok=True)
        (registry / str(survivor.pid)).write_text(lifeline.start_time(survivor.pid))
        (registry / str(bystander.pid)).write_text("1")  # not its start time: a recycled pid
        for student in ("a", "b"):  # quick answers now
            synthetic.write_student(folder, student, "lesson", synthetic.submission(course, "lesson"))
        rerun = _grade(course, folder)
        out = rerun.communicate(timeout=300)[0].decode()
        assert survivor.wait(timeout=5) == -signal.SIGKILL
        assert bystander.poll() is None
        assert "结束了上一次被中断的评分留下的 1 个评分进程" in out, out
        assert rerun.returncode == 0, out
    finally:
        for p in (survivor, bystander):
            if p.poll() is None:
                p.kill()
                p.wait()


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
