"""Launch a lab as real processes: ``run_lab("two_rank_update", ranks=2)``.

Modelled on ``torch.distributed.elastic``:

* :class:`LaunchConfig` is validated in ``__post_init__`` (Chinese ``ValueError``
  naming the field);
* rendezvous without a fixed port and without a bind-then-close race: the
  launcher itself hosts a ``torch.distributed.TCPStore`` on port 0, keeps it
  bound for the whole run and passes the port the kernel chose as
  ``MASTER_PORT`` (workers join as clients, ``TORCHELASTIC_USE_AGENT_STORE=True``,
  exactly as under torchrun);
* each rank is ``python -m parallel_budget.labs.<lab>`` in a session of its own,
  env ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR=127.0.0.1``,
  ``MASTER_PORT``, ``OMP_NUM_THREADS=1``; its stdout and stderr go to
  ``<log_dir>/<run_id>/<rank>/``, a directory that is deleted after a successful
  run and kept after a failure, a timeout, or with ``keep_logs=True`` (or
  ``PB_LAB_KEEP_LOGS=1``).  By default the rank is forked from this process's
  zygote (:mod:`.zygote`), which has imported torch once, instead of starting a
  fresh interpreter: the same program, environment, logs and return codes, about
  1.5 s of CPU less per rank.  ``PB_LAB_ZYGOTE=0`` or ``LaunchConfig(zygote=False)``
  starts each rank with :class:`subprocess.Popen`, as torchrun would;
* one ``time.monotonic()`` deadline; on failure, timeout or KeyboardInterrupt
  every process group gets SIGTERM, then SIGKILL after a grace period, and is
  reaped, in ``try/finally``;
* a failure raises :class:`LabError` quoting the failing rank's stderr tail;
* every result records the torch version, backend and device the ranks used.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from ...model.units import Q_
from . import cache, zygoteclient
from .config import LABS, LABS_PACKAGE, TAIL_LINES, LaunchConfig, lab_module
from .result import LabError, LabResult, LabTimeout
from .runtime import LEDGER_NS, RESULT_KEY, STORE_PREFIX, TIME_KEY

__all__ = ["LABS", "LabError", "LabResult", "LabTimeout", "LaunchConfig", "launch", "live_processes", "run_lab"]

def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"被信号 {signal.Signals(-code).name} 终止"
        except ValueError:
            return f"被信号 {-code} 终止"
    return f"退出码 {code}"


def _terminate(procs: list, grace: float) -> None:
    """SIGTERM every process group, wait up to ``grace`` s, SIGKILL, reap."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    end = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        # The group may outlive its leader (a helper process it started): kill it too.
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for p in procs:
        p.wait()


def _worker_env(cfg: LaunchConfig, rank: int, port: int) -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # the package this launcher belongs to
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(cfg.ranks),
        LOCAL_WORLD_SIZE=str(cfg.ranks),
        GROUP_RANK="0",
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        OMP_NUM_THREADS="1",
        TORCHELASTIC_USE_AGENT_STORE="True",
        PB_LAB_RUN_ID=cfg.run_id,
        PB_LAB_RUN_DIR=str(cfg.run_dir),
        PYTHONUNBUFFERED="1",
    )
    env.pop("TORCHELASTIC_RUN_ID", None)
    return env


def _start_rank(channel, argv: list, env: dict, rdir: Path, out, err):
    """Fork the rank from the zygote if it can serve it exactly, else start ``python -m`` the ordinary way."""
    if zygoteclient.serves(channel, argv, env):
        try:
            return channel.spawn(argv, env, rdir, out, err)
        except zygoteclient.ZygoteError:
            pass
    return subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=rdir)


def launch(cfg: LaunchConfig, check: bool = True) -> LabResult:
    """Run ``cfg`` and return its :class:`LabResult` (raise :class:`LabError` on failure if ``check``)."""
    module = lab_module(cfg.lab)
    from .runtime import options_to_argv

    argv = [sys.executable, "-m", module.__name__, *options_to_argv(cfg.options)]
    start = time.monotonic()
    deadline = start + cfg.timeout
    # Started first (once per process), so that it imports torch while this process imports the store.
    zygote = zygoteclient.zygote_for(_worker_env(cfg, 0, 0)) if cfg.zygote else None
    import torch.distributed as dist  # the store; ~1-2 s the first time in a process

    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False)
    port = store.port
    view = dist.PrefixStore(STORE_PREFIX, store)
    procs, files, exit_order = [], [], []
    timed_out = False
    channel = None
    try:
        channel = zygoteclient.open_channel(zygote, min(zygoteclient.HELLO_TIMEOUT, max(1.0, deadline - time.monotonic())))
        for rank in range(cfg.ranks):
            rdir = cfg.run_dir / str(rank)
            rdir.mkdir(parents=True, exist_ok=True)
            out = open(rdir / "stdout.log", "wb")
            err = open(rdir / "stderr.log", "wb")
            files += [out, err]
            procs.append(_start_rank(channel, argv, _worker_env(cfg, rank, port), rdir, out, err))
        while True:
            codes = [p.poll() for p in procs]
            for r, c in enumerate(codes):
                if c is not None and c != 0 and r not in exit_order:
                    exit_order.append(r)
            if exit_order or all(c == 0 for c in codes):
                break
            if time.monotonic() >= deadline:
                timed_out = True
                break
            time.sleep(0.01)
    finally:
        _terminate(procs, cfg.grace)
        if channel is not None:
            channel.close()  # and whatever an interrupt kept us from knowing about is killed with it
        for f in files:
            f.close()
    wall = time.monotonic() - start
    codes = tuple(p.returncode for p in procs)
    values = []
    for r in range(cfg.ranks):
        key = RESULT_KEY.format(rank=r)
        values.append(json.loads(view.get(key)) if view.check([key]) else None)
    times = []
    for r in range(cfg.ranks):
        key = TIME_KEY.format(rank=r)
        times.append(json.loads(view.get(key)) if view.check([key]) else None)
    last_calls = {}
    for r in range(cfg.ranks):
        key = f"{LEDGER_NS}/last/{r}"
        if view.check([key]):
            last_calls[r] = view.get(key).decode()
    del view, store  # closes the rendezvous port
    stdouts = tuple(_tail(cfg.run_dir / str(r) / "stdout.log") for r in range(cfg.ranks))
    stderrs = tuple(_tail(cfg.run_dir / str(r) / "stderr.log") for r in range(cfg.ranks))
    for r, v in enumerate(values):
        if v is not None:
            (cfg.run_dir / str(r) / "result.json").write_text(json.dumps(v, ensure_ascii=False, indent=1))
    failures = {}
    for r in exit_order:
        failures[r] = (
            f"rank {r} {_describe_exit(codes[r])}。它的 stderr 最后几行：\n{stderrs[r] or '（空）'}"
        )
    report = None
    if not failures and not timed_out:
        report = module.summarize(values, cfg.options, cfg.ranks)
    env = next((t.get("env", {}) for t in times if t), {})
    keep = cfg.keep_logs or bool(failures) or timed_out
    if not keep:
        shutil.rmtree(cfg.run_dir, ignore_errors=True)
    result = LabResult(
        lab=cfg.lab, ranks=cfg.ranks, options=cfg.options, run_id=cfg.run_id, run_dir=cfg.run_dir,
        master_port=port, pids=tuple(p.pid for p in procs), wall_time=Q_(wall, "s"), returncodes=codes,
        return_values=tuple(values), rank_times=tuple(times), stdouts=stdouts, stderrs=stderrs, failures=failures,
        timed_out=timed_out, report=report, environment=env, logs_kept=keep,
        forked=tuple(isinstance(p, zygoteclient.ForkedRank) for p in procs),
    )
    if check and timed_out:
        waiting = "；".join(f"rank {r} 最后进入：{c}" for r, c in last_calls.items()) or "没有 rank 记录过集合通信"
        raise LabTimeout(
            f"实验 {cfg.lab} 超过 timeout={cfg.timeout:g} s 仍未结束，已终止全部 {cfg.ranks} 个进程。"
            f"{waiting}。日志在 {cfg.run_dir}。如果它只是需要更久，可以写 "
            f'run_lab("{cfg.lab}", timeout={2 * cfg.timeout:g})。',
            result,
        )
    if check and failures:
        first = exit_order[0]
        raise LabError(
            f"实验 {cfg.lab} 失败：{failures[first]}\n其余 rank 已被终止。日志在 {cfg.run_dir}。",
            result,
        )
    return result


def live_processes(run_id: str) -> list:
    """Live (non-zombie) processes started for ``run_id``, found by their environment.

    Empty after every ``run_lab`` -- success, failure, timeout or interrupt;
    the tests and the benchmark check it after each run.  Needs psutil.
    """
    import psutil

    found = []
    for p in psutil.process_iter(["cmdline"]):
        if f"{LABS_PACKAGE}." not in " ".join(p.info["cmdline"] or ()):
            continue
        try:
            if p.environ().get("PB_LAB_RUN_ID") == run_id and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def run_lab(name: str, ranks: int | None = None, timeout: float | None = None, *, log_dir=None, run_id=None,
            check: bool = True, keep_logs: bool = False, **options) -> LabResult:
    """Run lab ``name`` on ``ranks`` local processes (gloo on CPU) and return the result.

    ``ranks=None`` takes the lab's default (2; 4 for ``ring_allreduce``, where
    2 ranks would make 2(R-1)/R = 1 and prove nothing).  Logs are deleted after
    a successful run unless ``keep_logs=True``; after a failure they are kept.

    ``options`` are the lab's own (see ``parallel_budget.labs.<name>.OPTIONS``).
    The whole run is bounded by ``timeout`` seconds (None: the lab's ``DEFAULT_TIMEOUT``, else 60); on timeout, failure or
    KeyboardInterrupt every process is killed.  With ``check=False`` a failed
    run returns its :class:`LabResult` instead of raising :class:`LabError`.

    >>> run_lab("two_rank_update", ranks=2)       # doctest: +SKIP
    """
    cfg = LaunchConfig(lab=name, ranks=ranks, timeout=timeout, options=options, log_dir=log_dir, run_id=run_id,
                       keep_logs=keep_logs)
    reused = cache.load(cfg)  # only in the book build (PB_LAB_CACHE)
    if reused is not None:
        return reused
    result = launch(cfg, check=check)
    cache.store(cfg, result)
    return result
