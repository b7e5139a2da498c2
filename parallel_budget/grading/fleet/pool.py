"""Grading students on this machine's worker processes (``grade --jobs N``).

The contract every way of running shards honours (this module's :func:`run_local`,
and a cluster's ``run_cluster(tasks, address, report, log_dir)``):

* ``tasks`` is a list of dicts, one per student, as :func:`.runner.grade` builds them
  (``student``, ``shard``, ``digest``, ...); each is graded by :func:`.shard.grade_student`.
* Each result is the dict ``grade_student`` returns: ``student``, ``ok``, ``seconds``,
  ``errors``; when ``ok`` is false, ``reason`` (a Chinese line) and ``infra`` (true when
  the grading machinery failed, not the student's code).  Results of students graded
  on a second attempt carry ``retried: True``.
* ``report(result)`` is called once per student, in the calling thread, as soon as
  that student's final result is known (the runner merges in batches from it).
* The return value is the list of every final result, one per task.
* No student is reported failed because of another: a worker that dies (the OOM
  killer, a crash) fails every student it had in flight, so each of those is graded
  again *alone*, on a fresh worker of its own, before any is reported failed; a
  student whose grading hit an infrastructure failure gets the same second attempt.
* Every worker process ends, also on Ctrl-C or an error (workers ignore SIGINT), and also when
  ``grade`` itself is killed (:mod:`.lifeline`: parent-death signal and watchdog; each worker is
  registered in ``autograde/.work/workers`` and a re-run ends any that survived).

At most ``jobs`` students are in flight at any time, so every student a dead worker's
pool had accepted was really being graded (a queued student is never blamed).

Workers are forked from multiprocessing's *fork server*, a child of the grading process that has
imported the grading stack (nbgrader, nbconvert, jupyter_client: about 1.5 s of CPU) once, instead of
each worker importing it again as a freshly spawned interpreter.  The server keeps the environment it
was started with, so it is started again when ``os.environ`` has changed since; it exits with the
grading process (end of file on its pipe), and its workers with it (:func:`.lifeline.bind`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

from . import lifeline
from .shard import grade_student, worker_init

DIED_ALONE = "评分进程在单独重试这名学生时也意外退出（例如被系统因内存不足杀死）"


def registry(log_dir: Path) -> Path:
    """Where local workers register themselves (:mod:`.lifeline`): ``autograde/.work/workers``."""
    return Path(log_dir).parent / "workers"


# What the fork server imports before it forks the first worker (the rest of a worker's imports are small).
PRELOAD = ["parallel_budget.grading.fleet.shard", "parallel_budget.grading.scoring.preprocessors",
           "parallel_budget.grading.results.feedback", "nbgrader.converters", "nbgrader.coursedir", "nbgrader.api",
           "nbconvert.exporters", "jupyter_client"]
_server_lock = threading.Lock()
_server_started_with: tuple | None = None


def _context():
    """The fork server context; the server is stopped (and started again on first use) when the environment
    or ``sys.path`` (which the server imported ``PRELOAD`` from) differ from those it was started with.  The
    working folder needs no restart: multiprocessing sets each child's, as it does ``sys.path``."""
    global _server_started_with
    from multiprocessing import forkserver

    now = (tuple(sorted(os.environ.items())), tuple(sys.path))
    with _server_lock:
        if _server_started_with is not None and _server_started_with != now:
            forkserver._forkserver._stop()
        _server_started_with = now
        ctx = get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx


def _worker_start(log_dir: str, grading: int) -> None:
    """Every local worker: die with its fork server, hence with ``grade`` (:func:`.lifeline.bind`), register,
    then the shard set-up.  A worker whose grading process is already gone ends at once."""
    lifeline.bind(os.getppid(), grading)
    lifeline.register(registry(Path(log_dir)))
    worker_init(log_dir)


def _executor(workers: int, log_dir: Path) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=workers, mp_context=_context(),
                               initializer=_worker_start, initargs=(str(log_dir), os.getpid()))


def _stop(executors) -> None:
    """End every worker now (an error or Ctrl-C in the grader)."""
    for ex in executors:
        for proc in list((getattr(ex, "_processes", None) or {}).values()):
            with contextlib.suppress(Exception):
                proc.terminate()
        ex.shutdown(wait=False, cancel_futures=True)


def died(task: dict, reason: str) -> dict:
    """The result of a student whose worker died on their second, solo attempt."""
    return {"student": task["student"], "ok": False, "infra": True, "reason": reason,
            "errors": [reason], "seconds": 0.0, "retried": True}


def run_local(tasks: list, jobs: int, report, log_dir: Path) -> list[dict]:
    """Grade ``tasks`` on up to ``jobs`` local worker processes; see the module docstring for the contract."""
    jobs = max(1, int(jobs))
    queue, solo = deque(tasks), deque()
    running: dict = {}  # future -> (task, executor, alone)
    shared, done_with = None, []
    results = []
    try:
        while queue or solo or running:
            while solo and len(running) < jobs:  # second attempts first, each on a fresh worker of its own
                task = solo.popleft()
                ex = _executor(1, log_dir)
                running[ex.submit(grade_student, task)] = (task, ex, True)
            while queue and not solo and len(running) < jobs:
                if shared is None:
                    shared = _executor(min(jobs, len(queue) + len(running)), log_dir)
                task = queue.popleft()
                running[shared.submit(grade_student, task)] = (task, shared, False)
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in finished:
                task, ex, alone = running.pop(fut)
                try:
                    res = fut.result()
                except BrokenProcessPool:
                    res = None
                    if ex is shared:  # every student it had in flight fails with it: each gets a solo retry
                        shared = None
                        done_with.append(ex)
                if alone:
                    done_with.append(ex)
                if res is None and not alone:
                    solo.append(task)
                    continue
                if res is None:
                    res = died(task, DIED_ALONE)
                elif not res["ok"] and res.get("infra") and not alone:
                    solo.append(task)
                    continue
                elif alone:
                    res = dict(res, retried=True)
                results.append(res)
                report(res)
            while done_with:
                done_with.pop().shutdown(wait=True)
    except BaseException:
        _stop([ex for _, ex, _ in running.values()] + ([shared] if shared else []) + done_with)
        raise
    if shared is not None:
        shared.shutdown(wait=True)
    return results
