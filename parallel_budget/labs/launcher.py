"""Launch a lab as real processes: ``run_lab("two_rank_update", ranks=2)``.

Modelled on ``torch.distributed.elastic``:

* :class:`LaunchConfig` is validated in ``__post_init__`` (Chinese ``ValueError``
  naming the field);
* rendezvous without a fixed port and without a bind-then-close race: the
  launcher itself hosts a ``torch.distributed.TCPStore`` on port 0, keeps it
  bound for the whole run and passes the port the kernel chose as
  ``MASTER_PORT`` (workers join as clients, ``TORCHELASTIC_USE_AGENT_STORE=True``,
  exactly as under torchrun);
* each rank is ``python -m parallel_budget.labs.<lab>`` with
  ``start_new_session=True``, env ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
  ``MASTER_ADDR=127.0.0.1``, ``MASTER_PORT``, ``OMP_NUM_THREADS=1``; its stdout and
  stderr go to ``<log_dir>/<run_id>/<rank>/``, a directory that is deleted after a
  successful run and kept after a failure, a timeout, or with ``keep_logs=True``
  (or ``PB_LAB_KEEP_LOGS=1``);
* one ``time.monotonic()`` deadline; on failure, timeout or KeyboardInterrupt
  every process group gets SIGTERM, then SIGKILL after a grace period, and is
  reaped, in ``try/finally``;
* a failure raises :class:`LabError` quoting the failing rank's stderr tail;
* every result records the torch version, backend and device the ranks used.
"""

from __future__ import annotations

import importlib
import json
import math
import numbers
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pint

from ..model.units import Q_, fmt
from .report import Report, render_html, render_text
from .runtime import LEDGER_NS, RESULT_KEY, STORE_PREFIX, TIME_KEY, validate_options

# name -> what the student sees it for
LABS = {
    "two_rank_update": "两个 rank 的一次 DDP 更新等于单进程更新(以及三个常见错误)",
    "ring_allreduce": "用 send/recv 手写 ring all-reduce:结果、每 rank 发送字节、时间下界",
    "overlap": "DDP 的 bucket_cap_mb 与计算/通信重叠:隐藏与暴露的通信",
    "zero_state": "ZeroRedundancyOptimizer 与普通 Adam:每 rank 优化器状态字节",
    "tp_pp": "列并行/行并行线性层等于完整矩阵乘;两阶段流水线的空闲与气泡公式",
    "late_rank": "一个 rank 晚到:其他 rank 在集体通信里等多久,归因给谁",
    "hang": "四种挂起:跳过、顺序不同、提前退出、数据先用完;检测与修复",
    "checkpoint": "分片 checkpoint:混合步数被拒绝,从所有分片共有的最新步恢复",
}
# The benchmark's floor: two processes that import torch, join a gloo group, exit.
EXTRA = {"floor": "基准:导入 torch、加入 gloo 进程组、退出"}

MAX_RANKS = 8
MAX_TIMEOUT = 3600.0
TAIL_LINES = 15


def lab_module(name: str):
    return importlib.import_module(f"{__package__}.{name}")


def default_log_dir() -> Path:
    return Path(os.environ.get("PB_LAB_LOG_DIR") or Path(tempfile.gettempdir()) / "parallel_budget_labs")


@dataclass(frozen=True)
class LaunchConfig:
    """Everything a run needs; checked before any process starts."""

    lab: str
    ranks: int | None = None  # None: the lab's DEFAULT_RANKS (2 unless the lab needs more)
    timeout: float = 60.0
    options: dict = field(default_factory=dict)
    log_dir: Path | None = None
    run_id: str | None = None
    grace: float = 3.0  # seconds between SIGTERM and SIGKILL
    keep_logs: bool = False  # keep <log_dir>/<run_id> after a successful run too

    def __post_init__(self):
        known = {**LABS, **EXTRA}
        if not isinstance(self.lab, str) or self.lab not in known:
            raise ValueError(
                f"LaunchConfig 的字段 lab 不认识 {self.lab!r}。可用的实验:{', '.join(LABS)}。"
                '例如 run_lab("two_rank_update", ranks=2)'
            )
        module = lab_module(self.lab)
        r = getattr(module, "DEFAULT_RANKS", 2) if self.ranks is None else self.ranks
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or not 1 <= r <= MAX_RANKS:
            raise ValueError(
                f"LaunchConfig 的字段 ranks 需要 1 到 {MAX_RANKS} 之间的整数(进程数),收到 {r!r}。"
                f'例如 run_lab("{self.lab}", ranks=2)'
            )
        for name, upper in (("timeout", MAX_TIMEOUT), ("grace", 60.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not 0 < v <= upper:
                raise ValueError(
                    f"LaunchConfig 的字段 {name} 需要 0 到 {upper:g} 之间的秒数,收到 {v!r}。"
                    f'例如 run_lab("{self.lab}", {name}=60)'
                )
        if not isinstance(self.options, dict):
            raise ValueError(f"LaunchConfig 的字段 options 需要 dict,收到 {type(self.options).__name__}。")
        if not isinstance(self.keep_logs, bool):
            raise ValueError(f"LaunchConfig 的字段 keep_logs 需要 True 或 False,收到 {self.keep_logs!r}。")
        if os.environ.get("PB_LAB_KEEP_LOGS") == "1":
            object.__setattr__(self, "keep_logs", True)
        opts = validate_options(self.lab, module.OPTIONS, self.options)
        if hasattr(module, "validate"):  # checks that depend on the number of ranks
            module.validate(opts, int(r))
        object.__setattr__(self, "options", opts)
        object.__setattr__(self, "ranks", int(r))
        object.__setattr__(self, "timeout", float(self.timeout))
        object.__setattr__(self, "log_dir", Path(self.log_dir) if self.log_dir is not None else default_log_dir())
        if self.run_id is None:
            stamp = time.strftime("%Y%m%d-%H%M%S")
            object.__setattr__(self, "run_id", f"{self.lab}-{stamp}-{uuid.uuid4().hex[:6]}")
        elif not isinstance(self.run_id, str) or not self.run_id or "/" in self.run_id or self.run_id.startswith("."):
            raise ValueError(f"LaunchConfig 的字段 run_id 需要不含 / 的非空名字,收到 {self.run_id!r}。")

    @property
    def run_dir(self) -> Path:
        return self.log_dir / self.run_id


@dataclass(frozen=True)
class LabResult:
    """One run: per-rank results and logs, predicted-vs-measured rows, wall time.

    ``return_values[rank]`` is what that rank's ``worker()`` published;
    ``failures[rank]`` a message for each rank that failed.  In a notebook the
    result shows as a table (``_repr_html_``); ``text()`` is the same table as
    plain text and ``table()`` returns the rows.
    """

    lab: str
    ranks: int
    options: dict
    run_id: str
    run_dir: Path
    master_port: int
    pids: tuple  # process ids of the ranks (all reaped when the result exists)
    wall_time: pint.Quantity
    returncodes: tuple
    return_values: tuple
    rank_times: tuple  # per rank {"join": s, "work": s} (None if it did not finish)
    stdouts: tuple  # last lines of each rank's stdout
    stderrs: tuple
    failures: dict
    timed_out: bool
    report: Report | None
    environment: dict = field(default_factory=dict)  # torch version, backend, device (from rank 0)
    logs_kept: bool = True  # False: run_dir was deleted after the successful run

    def is_failed(self) -> bool:
        return bool(self.failures) or self.timed_out

    @property
    def rows(self) -> tuple:
        return self.report.rows if self.report else ()

    @property
    def facts(self) -> dict:
        return self.report.facts if self.report else {}

    def table(self) -> list:
        """The rows as dicts with the Chinese column names (for pandas or a test)."""
        from .report import HEADERS

        return [dict(zip(HEADERS, r.cells())) for r in self.rows]

    def environment_line(self) -> str:
        return environment_line(self.environment)

    def _headline(self) -> str:
        state = "失败" if self.is_failed() else "完成"
        logs = f"日志:{self.run_dir}" if self.logs_kept else "日志已删除(run_lab(..., keep_logs=True) 可保留)"
        return (
            f"{self.ranks} 个 rank,{state},墙钟时间 {fmt(self.wall_time, 's', 3)}\uff1b{self.environment_line()};{logs}"
        )

    def text(self) -> str:
        title = self.report.title if self.report else f"实验 {self.lab}"
        notes = self.report.notes if self.report else ()
        body = render_text(title, self.rows, notes, extra=self._headline())
        if self.failures:
            body += "\n" + "\n".join(self.failures.values())
        return body

    def _repr_html_(self) -> str:
        title = self.report.title if self.report else f"实验 {self.lab}"
        notes = self.report.notes if self.report else ()
        return render_html(title, self.rows, notes, extra=self._headline())

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return (
            f"LabResult(lab={self.lab!r}, ranks={self.ranks}, failed={self.is_failed()}, "
            f"wall_time={fmt(self.wall_time, 's', 3)}, rows={len(self.rows)})"
        )


def environment_line(env: dict) -> str:
    """``torch 2.13.0+cpu,后端 gloo,设备 cpu``: what the source lesson asks to pin and report."""
    if not env:
        return "环境未知(没有 rank 报告)"
    return f"torch {env.get('torch', '?')},后端 {env.get('backend', '?')},设备 {env.get('device', '?')}"


class LabError(RuntimeError):
    """A lab run failed; ``.result`` holds what was collected (logs, return codes)."""

    def __init__(self, message: str, result: LabResult):
        super().__init__(message)
        self.result = result


class LabTimeout(LabError, TimeoutError):
    """The overall timeout passed; every process was killed."""


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
    root = str(Path(__file__).resolve().parents[2])  # the package this launcher belongs to
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


def launch(cfg: LaunchConfig, check: bool = True) -> LabResult:
    """Run ``cfg`` and return its :class:`LabResult` (raise :class:`LabError` on failure if ``check``)."""
    import torch.distributed as dist  # the store; ~1-2 s the first time in a process

    module = lab_module(cfg.lab)
    from .runtime import options_to_argv

    argv = [sys.executable, "-m", module.__name__, *options_to_argv(cfg.options)]
    store = dist.TCPStore("127.0.0.1", 0, None, is_master=True, wait_for_workers=False)
    port = store.port
    view = dist.PrefixStore(STORE_PREFIX, store)
    procs, files, exit_order = [], [], []
    timed_out = False
    start = time.monotonic()
    deadline = start + cfg.timeout
    try:
        for rank in range(cfg.ranks):
            rdir = cfg.run_dir / str(rank)
            rdir.mkdir(parents=True, exist_ok=True)
            out = open(rdir / "stdout.log", "wb")
            err = open(rdir / "stderr.log", "wb")
            files += [out, err]
            procs.append(subprocess.Popen(
                argv, env=_worker_env(cfg, rank, port), stdout=out, stderr=err,
                stdin=subprocess.DEVNULL, start_new_session=True, cwd=rdir,
            ))
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
            f"rank {r} {_describe_exit(codes[r])}。它的 stderr 最后几行:\n{stderrs[r] or '(空)'}"
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
        master_port=port, pids=tuple(p.pid for p in procs), wall_time=Q_(wall, "s"), returncodes=codes, return_values=tuple(values),
        rank_times=tuple(times),        stdouts=stdouts, stderrs=stderrs, failures=failures, timed_out=timed_out, report=report,
        environment=env, logs_kept=keep,
    )
    if check and timed_out:
        waiting = ";".join(f"rank {r} 最后进入:{c}" for r, c in last_calls.items()) or "没有 rank 记录过集体通信"
        raise LabTimeout(
            f"实验 {cfg.lab} 超过 timeout={cfg.timeout:g} s 仍未结束,已终止全部 {cfg.ranks} 个进程。"
            f"{waiting}。日志在 {cfg.run_dir}。如果它只是需要更久,可以写 "
            f'run_lab("{cfg.lab}", timeout={2 * cfg.timeout:g})。',
            result,
        )
    if check and failures:
        first = exit_order[0]
        raise LabError(
            f"实验 {cfg.lab} 失败:{failures[first]}\n其余 rank 已被终止。日志在 {cfg.run_dir}。",
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
        if f"{__package__}." not in " ".join(p.info["cmdline"] or ()):
            continue
        try:
            if p.environ().get("PB_LAB_RUN_ID") == run_id and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def run_lab(name: str, ranks: int | None = None, timeout: float = 60.0, *, log_dir=None, run_id=None,
            check: bool = True, keep_logs: bool = False, **options) -> LabResult:
    """Run lab ``name`` on ``ranks`` local processes (gloo on CPU) and return the result.

    ``ranks=None`` takes the lab's default (2; 4 for ``ring_allreduce``, where
    2 ranks would make 2(R-1)/R = 1 and prove nothing).  Logs are deleted after
    a successful run unless ``keep_logs=True``; after a failure they are kept.

    ``options`` are the lab's own (see ``parallel_budget.labs.<name>.OPTIONS``).
    The whole run is bounded by ``timeout`` seconds; on timeout, failure or
    KeyboardInterrupt every process is killed.  With ``check=False`` a failed
    run returns its :class:`LabResult` instead of raising :class:`LabError`.

    >>> run_lab("two_rank_update", ranks=2)       # doctest: +SKIP
    """
    cfg = LaunchConfig(lab=name, ranks=ranks, timeout=timeout, options=options, log_dir=log_dir, run_id=run_id,
                       keep_logs=keep_logs)
    return launch(cfg, check=check)
