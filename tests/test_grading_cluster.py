"""Does `grade --cluster` (Dask) give the local `--jobs` result, and lose nothing when a worker or the client dies?

A one-notebook course and a class of four (right, wrong, a kernel that dies,
right), graded on ``LocalCluster``s of two worker processes.
"""

from __future__ import annotations

import io
import os
import re
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time

import pytest

from grading_helpers import ROOT, course_copy, scores
from test_grading_parallel import _class, _outputs

from parallel_budget.grading.fleet import cluster as gcluster
from parallel_budget.grading.fleet.shipping import UnsafeArchive, pack, unpack
from parallel_budget.grading.course import Course, CourseError
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
ONE = ("05-debugging",)
STUDENTS = [f"c{i}" for i in range(4)]


@pytest.fixture(scope="module")
def incoming(tmp_path_factory):
    root = course_copy(tmp_path_factory.mktemp("template"), ONE)
    folder = tmp_path_factory.mktemp("class")
    _class(Course(root), folder, STUDENTS)
    return folder


@pytest.fixture(scope="module")
def reference(tmp_path_factory, incoming):
    """The local pool's result (``--jobs 2``)."""
    course = Course(course_copy(tmp_path_factory.mktemp("local"), ONE))
    summary = grade(incoming, root=course.root, jobs=2, timeout=5, quiet=True)
    assert summary["graded"] == STUDENTS
    return _outputs(course)


@pytest.fixture(scope="module")
def scheduler():
    """A LocalCluster reached by address, as a real scheduler is; a shard gets one retry after a dead worker."""
    from distributed import Client

    with gcluster.local_cluster(2) as cluster, Client(cluster, set_as_default=False) as client:
        yield cluster.scheduler_address, client


def test_local_cluster_grades_like_local_jobs(tmp_path, incoming, reference):
    """Are scores, comments, flags, the CSVs and every feedback file the same with --cluster local:2 as with --jobs 2?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    summary = grade(incoming, root=course.root, cluster="local:2", timeout=5, quiet=True)
    assert summary["graded"] == STUDENTS and not summary["failed"]
    assert summary["kernels"]["forked"] >= len(STUDENTS) and summary["kernels"]["fresh"] == 0  # warm per worker
    got = _outputs(course)
    assert got.keys() == reference.keys() and len([k for k in got if k.endswith(".html")]) == len(STUDENTS)
    for key in reference:
        assert got[key] == reference[key], key
    assert not list((course.work / "cluster").glob("*"))  # every worker scratch folder removed


def test_killed_worker_shard_is_retried_on_another(tmp_path, incoming, reference, scheduler):
    """kill -9 of the worker process grading a shard: is every student graded once, with the local scores?"""
    address, client = scheduler
    course = Course(course_copy(tmp_path / "course", ONE))
    out: dict = {}
    run = threading.Thread(target=lambda: out.update(grade(incoming, root=course.root, cluster=address, timeout=5,
                                                           quiet=True)))
    run.start()
    scratch, killed, deadline = course.work / "cluster", None, time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and run.is_alive():
        for folder in scratch.glob(f"{socket.gethostname()}-*-*"):  # a worker is grading a shard right now
            killed = int(folder.name[len(socket.gethostname()) + 1:].split("-")[0])
            os.kill(killed, signal.SIGKILL)
            break
        time.sleep(0.05)
    run.join(timeout=300)
    assert killed is not None, "no shard was seen in progress"
    assert not run.is_alive() and out["graded"] == STUDENTS and not out["failed"], out
    assert scores(course.gradebook) == reference["scores"]
    assert _outputs(course)["csv"] == reference["csv"]
    client.wait_for_workers(2, timeout=60)  # the nanny restarted the killed worker


def test_killed_client_then_rerun_grades_each_student_once(tmp_path, incoming, reference):
    """kill -9 of the whole grade command mid-run: gradebook untouched; does a re-run grade only the rest?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "grade",
                             str(incoming), "--cluster", "local:2", "--timeout", "5"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shards, deadline = course.work / "shards", time.monotonic() + 180
    while time.monotonic() < deadline and not list(shards.glob("*/done.json")) and proc.poll() is None:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    received = sorted(p.parent.name for p in shards.glob("*/done.json"))
    assert received and len(received) < len(STUDENTS), received
    assert not course.gradebook.exists()  # nothing merged
    summary = grade(incoming, root=course.root, cluster="local:2", timeout=5, quiet=True)
    assert summary["graded"] == STUDENTS and not summary["failed"]
    assert scores(course.gradebook) == reference["scores"]


def test_unreachable_scheduler_is_named_within_ten_seconds(tmp_path, incoming):
    """A scheduler address nobody listens on: a Chinese message with the address and how to start one, in < 10 s."""
    course = Course(course_copy(tmp_path / "course", ONE))
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    started = time.monotonic()
    with pytest.raises(CourseError) as err:
        grade(incoming, root=course.root, cluster=address, timeout=5, quiet=True)
    assert time.monotonic() - started < 10
    text = str(err.value)
    assert address in text and "dask scheduler" in text and "dask worker" in text and "连不上" in text
    assert not course.gradebook.exists()
    with pytest.raises(ValueError, match="local:N"):
        gcluster.parse_target("local:0")


def test_worker_without_bubblewrap_is_refused_before_grading(tmp_path, incoming, scheduler):
    """A worker that cannot find bwrap joins: is the run refused, naming it, with no grade written?"""
    address, client = scheduler
    course = Course(course_copy(tmp_path / "course", ONE))
    before = set(client.scheduler_info()["workers"])
    bare = tmp_path / "no-bwrap"
    bare.mkdir()
    env = dict(os.environ, PATH=str(bare), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                               "--no-nanny", "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        client.wait_for_workers(len(before) + 1, timeout=60)
        (bad,) = set(client.scheduler_info()["workers"]) - before
        with pytest.raises(CourseError) as err:
            grade(incoming, root=course.root, cluster=address, timeout=5, quiet=True)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    text = str(err.value)
    assert bad in text and "bwrap" in text and "没有评任何学生" in text
    assert all(w not in text for w in before)  # the good workers are not blamed
    assert not course.gradebook.exists() and not list((course.work / "shards").glob("*/done.json"))


def _started(argv: list, env: dict, pattern: str) -> tuple:
    """A Dask command started, and the first match of ``pattern`` in what it logs (within 60 s)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline, seen = time.monotonic() + 60, ""
    while time.monotonic() < deadline and proc.poll() is None:
        seen += proc.stderr.readline()
        if match := re.search(pattern, seen):
            return proc, match.group(1)
    proc.kill()
    raise AssertionError(f"{argv[2]} did not start: {seen[-500:]}")


def test_scheduler_going_away_stops_the_run_and_a_rerun_grades_the_rest(tmp_path, incoming, reference):
    """kill -9 of the scheduler mid-run: does grade stop at once with the gradebook untouched, and a re-run finish?"""
    course = Course(course_copy(tmp_path / "course", ONE))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    scheduler, address = _started([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                   "--port", "0", "--no-dashboard", "--dashboard-address", "127.0.0.1:0"], env,
                                  r"Scheduler at:\s+(tcp://\S+)")
    worker = None
    try:
        worker, _ = _started([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                              "--no-nanny"], env, r"Registered to:\s+(tcp://\S+)")
        err: list = []

        def run():
            try:
                grade(incoming, root=course.root, cluster=address, timeout=5, quiet=True)
            except CourseError as exc:
                err.append(exc)
        thread = threading.Thread(target=run)
        thread.start()
        shards, deadline = course.work / "shards", time.monotonic() + 120
        while time.monotonic() < deadline and not list(shards.glob("*/done.json")) and thread.is_alive():
            time.sleep(0.05)
        scheduler.kill()
        stopped = time.monotonic()
        thread.join(timeout=60)
        assert not thread.is_alive() and time.monotonic() - stopped < 15
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                proc.kill()
                proc.wait()
    assert err and "调度器的连接断开" in str(err[0]), err
    assert not course.gradebook.exists()
    received = sorted(p.parent.name for p in (course.work / "shards").glob("*/done.json"))
    assert received and len(received) < len(STUDENTS)
    summary = grade(incoming, root=course.root, cluster="local:2", timeout=5, quiet=True)
    assert summary["graded"] == STUDENTS and not summary["failed"]
    assert scores(course.gradebook) == reference["scores"]


def _tar(**members) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, kind in members.items():
            info = tarfile.TarInfo(name.replace("__", "/").replace("UP", ".."))
            if kind == "link":
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(kind)
                tar.addfile(info, io.BytesIO(kind))
    return buf.getvalue()


@pytest.mark.parametrize("members", [{"UP__escape.txt": b"x"}, {"ok.txt": b"x", "link": "link"},
                                     {"__abs.txt": b"x"}])
def test_a_workers_result_cannot_write_outside_its_shard(tmp_path, members):
    """A shard archive with ``..``, a link or an absolute path: refused, and the shard folder left as it was?"""
    dest = tmp_path / "shards" / "s1"
    dest.mkdir(parents=True)
    (dest / "done.json").write_text("{}")
    with pytest.raises(UnsafeArchive):
        unpack(_tar(**members), dest)
    assert [p.name for p in dest.iterdir()] == ["done.json"]
    assert not (tmp_path / "shards" / "escape.txt").exists() and not list((tmp_path / "shards").glob(".*incoming"))
    res = gcluster.receive({"student": "someone-else", "ok": True, "shard": _tar(**members), "worker": "w1"},
                           {"student": "s1", "shard": str(dest)})
    assert res["student"] == "s1" and not res["ok"] and res["infra"] and "w1" in res["errors"][0]
    good = tmp_path / "good"
    (good / "autograde").mkdir(parents=True)
    (good / "autograde" / "a.txt").write_text("成绩")
    unpack(pack(good), dest)
    assert (dest / "autograde" / "a.txt").read_text() == "成绩" and not (dest / "done.json").exists()
