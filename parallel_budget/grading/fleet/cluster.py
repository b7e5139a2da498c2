"""Grading a class's shards on a Dask cluster (issue 28): ``grade SUBMISSIONS --cluster ADDRESS|local:N``.

:func:`run_cluster` keeps the local pool's contract (one task dict per
student in, one result dict per student out, ``report(result)`` as each
arrives), so the runner merges exactly as it does after a local run.

* ``local:N`` starts a ``LocalCluster`` of N worker processes (one thread
  each, no dashboard, no fixed ports) and closes it on every path; any other
  value is a scheduler address (``dask scheduler`` prints it).
* Before any student is graded every worker runs :func:`.clusterworker.check`;
  one that cannot grade (no bubblewrap, no course package or checkout, another
  version of the course) refuses the run, naming the worker.
* Nothing relies on a shared filesystem: a task carries the student's
  submission folder as bytes, the template gradebook travels once per worker
  (the result of one task, which Dask recomputes if every worker holding it dies), and the graded shard comes back as bytes that the client
  unpacks (:func:`.shipping.unpack`, guarded) into ``autograde/.work/shards/<student>/``.
* Faults: a worker that dies mid-shard has its shard rescheduled by Dask on
  another worker; a shard that fails twice (``retries=1``, or a second dead
  worker: ``KilledWorker``) is reported as an infrastructure failure for that
  student, never as a grade.  A scheduler that goes away stops the run as soon
  as the client sees the connection lost (Dask then cancels every future); the
  shards already received keep their ``done.json``, so a re-run grades only the rest.
* At most :data:`WINDOW` tasks per worker thread are in flight, so a class of
  50 000 is never all in the client's memory at once.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from concurrent.futures import CancelledError
from pathlib import Path

from ..course import Course, CourseError
from .shipping import UnsafeArchive, pack, unpack

CONNECT_SECONDS = 5  # an unreachable scheduler is reported within this (the issue asks for 10 s)
WORKERS_SECONDS = 60  # how long a scheduler without workers is waited for
WINDOW = 2
POLL_SECONDS = 0.2
HOW_TO_START = ("启动调度器：在一台机器上运行 dask scheduler（它打印地址，例如 tcp://10.0.0.5:8786）；"
                "在每台评分机器的课程仓库里用课程的虚拟环境运行 dask worker 地址 --nthreads 1；"
                "或者用 `--cluster local:N` 在本机启动 N 个 worker（autograde/README.md 第 7 节）。")


def parse_target(text: str) -> str:
    """``local:N`` (N >= 1) or a scheduler address; a ValueError with a Chinese sentence otherwise."""
    text = (text or "").strip()
    if text.startswith("local:"):
        n = text[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"`--cluster local:N` 需要正整数 N（本机 worker 进程数），收到 {text!r}。例如 `--cluster local:4`")
        return f"local:{int(n)}"
    if not text or any(c.isspace() for c in text):
        raise ValueError(f"--cluster 需要调度器地址（例如 tcp://10.0.0.5:8786）或 `local:N`，收到 {text!r}。")
    return text


def unreachable(address: str, why: str) -> str:
    return f"连不上 Dask 调度器 {address}（{why}，等了 {CONNECT_SECONDS} 秒）。" + HOW_TO_START


def require_reachable(target: str) -> None:
    """A CourseError naming the address, within CONNECT_SECONDS, when no scheduler answers there (before any work)."""
    import asyncio

    from distributed.comm import connect

    target = parse_target(target)
    if target.startswith("local:"):
        return

    async def probe():
        comm = await connect(target, timeout=CONNECT_SECONDS)
        await comm.close()

    try:
        asyncio.run(probe())
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise CourseError(unreachable(target, f"{type(exc).__name__}: {str(exc)[:160]}")) from None


def local_cluster(workers: int):
    """A ``LocalCluster`` of ``workers`` processes, one thread each, on loopback, no dashboard, no fixed port."""
    import dask
    from distributed import LocalCluster

    # a shard whose worker died is tried on one more worker, then reported (Dask's default allows 3);
    # a worker is handed its next shard only when it is free (the default queues two per thread: uneven at the end)
    with dask.config.set({"distributed.scheduler.allowed-failures": 1, "distributed.scheduler.worker-saturation": 1.0}):
        return LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, host="127.0.0.1",
                            scheduler_port=0, dashboard_address=None, silence_logs=logging.ERROR,
                            # the scheduler's health/metrics HTTP server would otherwise try port 8787 first
                            scheduler_kwargs={"dashboard": False, "dashboard_address": "127.0.0.1:0"})


@contextlib.contextmanager
def connected(target: str):
    """A Client for ``target``; a ``local:N`` cluster is started here and closed on every path."""
    from distributed import Client

    target = parse_target(target)
    with contextlib.ExitStack() as stack:
        if target.startswith("local:"):
            cluster = stack.enter_context(local_cluster(int(target[len("local:"):])))
            client = stack.enter_context(Client(cluster, set_as_default=False))
        else:
            try:
                client = Client(target, timeout=CONNECT_SECONDS, set_as_default=False)
            except (OSError, TimeoutError, ValueError, TypeError) as exc:
                raise CourseError(unreachable(target, f"{type(exc).__name__}: {str(exc)[:160]}")) from None
            stack.callback(client.close)
        yield client


def refuse_unfit(client, task: dict, source: str) -> int:
    """Run the readiness check on every worker; raise a CourseError naming each unfit one. Returns the worker count."""
    from .clusterworker import check

    try:
        client.wait_for_workers(1, timeout=WORKERS_SECONDS)
    except TimeoutError:
        raise CourseError(f"调度器 {client.scheduler.address} 上 {WORKERS_SECONDS} 秒内没有 worker。" + HOW_TO_START) from None
    answers = client.run(check, task["root"], task["assignment"], source, task.get("sandbox", True),
                         on_error="return")
    bad = {}
    for worker, answer in sorted(answers.items()):
        if isinstance(answer, BaseException):  # the function did not even load: no course package there
            answer = (f"无法运行课程的检查（{type(answer).__name__}: {str(answer)[:160]}）；"
                      "请在课程仓库里用课程的虚拟环境启动 dask worker。")
        if answer:
            bad[worker] = answer
    if bad:
        lines = "\n".join(f"  worker {w}：{why}" for w, why in bad.items())
        raise CourseError(f"有 {len(bad)} 个 worker 不能评分，没有评任何学生，成绩册未动：\n{lines}")
    return len(answers)


def infrastructure_failure(student: str, why: str) -> dict:
    reason = f"基础设施故障，不是学生的问题，没有记分：这份提交在集群上评了两次都没有完成（{why}）。再次运行同一命令会重评它。"
    return {"student": student, "ok": False, "infra": True, "reason": reason, "seconds": 0.0, "errors": [reason]}


def receive(res: dict, task: dict) -> dict:
    """Unpack a worker's graded shard into the client's shard folder; the result as the runner expects it."""
    res = dict(res, student=task["student"])  # the worker's word on who it graded is not taken
    data = res.pop("shard", b"")
    if res.get("ok"):
        try:
            unpack(data, Path(task["shard"]))
        except UnsafeArchive as exc:
            return infrastructure_failure(task["student"], f"worker {res.get('worker', '?')} 送回的结果被拒收：{exc}")
    return res


SCHEDULER_LOST = ("与 Dask 调度器的连接断开，评分已停止；已经送回的结果保存在 autograde/.work/shards/，成绩册未动。"
                  "调度器恢复后再次运行同一命令，只评剩下的学生。")


def _stop_if_lost(client) -> None:
    """Stop the run (a CourseError) once the client is no longer connected: Dask has cancelled every future."""
    if client.status != "running":
        raise CourseError(SCHEDULER_LOST)


def run_cluster(tasks: list, address: str, report, log_dir: Path) -> list:
    """Grade ``tasks`` on the cluster ``address`` (or ``local:N``); the local pool's contract. ``log_dir`` is the client's."""
    if not tasks:
        return []
    from .clusterworker import grade_shipped

    first = tasks[0]
    source = Course(first["root"]).source_digest(first["assignment"])
    results: list = []
    with connected(address) as client:
        refuse_unfit(client, first, source)
        # the template as a task's result, not scattered data: if the workers holding it die, Dask recomputes it
        template = client.submit(bytes, Path(first["template"]).read_bytes(), pure=False,
                                 key=f"template-{uuid.uuid4().hex[:12]}")
        queue, running = list(reversed(tasks)), {}
        try:
            while queue or running:
                _stop_if_lost(client)
                try:  # the window follows the cluster's size (a Slurm cluster may grow during the run)
                    room = WINDOW * max(1, sum(client.nthreads().values())) if queue else 0
                except OSError:
                    raise CourseError(SCHEDULER_LOST) from None
                while queue and len(running) < room:
                    task = queue.pop()
                    submission = pack(Course(task["root"]).submitted / task["student"] / task["assignment"])
                    running[client.submit(grade_shipped, task, submission, template, source, retries=1,
                                          pure=False, key=f"grade-{task['student']}-{uuid.uuid4().hex[:12]}")] = task
                done = [fut for fut in running if fut.done()]
                if not done:
                    time.sleep(POLL_SECONDS)
                for fut in done:
                    task = running.pop(fut)
                    try:
                        res = receive(fut.result(), task)
                    except CancelledError:  # the client lost the scheduler: nothing of this run is graded there any more
                        raise CourseError(SCHEDULER_LOST) from None
                    except Exception as exc:  # KilledWorker (a second dead worker), the late check, a second exception
                        res = infrastructure_failure(task["student"], f"{type(exc).__name__}: {str(exc)[:300]}")
                    results.append(res)
                    report(res)
        finally:
            with contextlib.suppress(Exception):
                client.cancel(list(running))
    return results
