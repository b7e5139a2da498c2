"""Rank side of the labs: options, joining the group, a call ledger.

Every lab module ends with ``if __name__ == "__main__": main(sys.modules[__name__])``
(:func:`.cli.main`).
:func:`main` then works in three situations without any change to the lab:

* started by :func:`parallel_budget.labs.run_lab` (env ``PB_LAB_RUN_ID`` set):
  the rank joins the group, runs ``worker()``, stores its result in the
  launcher's TCPStore and exits; the launcher summarizes;
* started by ``torchrun`` / ``python -m torch.distributed.run``: the same, and
  rank 0 collects every rank's result from the store and prints the table;
* started by plain ``python -m parallel_budget.labs.<lab>`` (no ``RANK``): it
  becomes the launcher itself and runs ``--ranks`` workers.

Rendezvous follows torch's own ``env://`` rule: with
``TORCHELASTIC_USE_AGENT_STORE=True`` (torchrun, and our launcher) every rank is
a client of the store at ``MASTER_ADDR:MASTER_PORT``; otherwise rank 0 hosts it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from datetime import timedelta

STORE_PREFIX = "pb_lab"
RESULT_KEY = "result/{rank}"
TIME_KEY = "time/{rank}"  # seconds to join the group and to run worker()
LEDGER_NS = "ledger"


# ------------------------------------------------------------------ options

@dataclass(frozen=True)
class Option:
    """One lab option: default, type, allowed values and a Chinese description."""

    default: object
    help: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None

    @property
    def kind(self) -> type:
        return tuple if isinstance(self.default, tuple) else type(self.default)


def _describe(name: str, opt: Option) -> str:
    if opt.choices:
        return f"{name}：{'、'.join(map(str, opt.choices))} 之一（默认 {opt.default!r}）"
    return f"{name}：{opt.help}（默认 {opt.default!r}）"


def validate_options(lab: str, spec: dict, given: dict) -> dict:
    """Options ``given`` merged over the defaults of ``spec``; Chinese ValueError on a bad one."""
    unknown = sorted(set(given) - set(spec))
    if unknown:
        accepted = "；".join(_describe(k, v) for k, v in spec.items()) or "（这个实验没有选项）"
        raise ValueError(f"实验 {lab} 没有选项 {'、'.join(unknown)}。可用的选项：{accepted}")
    out = {}
    for name, opt in spec.items():
        value = given.get(name, opt.default)
        out[name] = _check(lab, name, opt, value)
    return out


def _check(lab: str, name: str, opt: Option, value):
    where = f"实验 {lab} 的选项 {name}"
    example = f"例如 run_lab({lab!r}, {name}={opt.default!r})"
    kind = opt.kind
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where} 需要 True 或 False，收到 {value!r}。{example}")
        return value
    if kind is tuple:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = (value,)
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ValueError(f"{where} 需要一串正数，收到 {value!r}。{example}")
        items = tuple(value)
        if not items or any(isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 for v in items):
            raise ValueError(f"{where} 需要一串正数，收到 {value!r}。{example}")
        return tuple(float(v) for v in items)
    if kind is str:
        if value not in opt.choices:
            raise ValueError(f"{where} 只能是 {'、'.join(map(repr, opt.choices))}，收到 {value!r}。{example}")
        return value
    # int or float
    ok_type = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        ok_type = ok_type and float(value).is_integer()
    if not ok_type or value != value:
        need = "整数" if kind is int else "数"
        raise ValueError(f"{where} 需要{need}({opt.help})，收到 {value!r}。{example}")
    if opt.minimum is not None and value < opt.minimum or opt.maximum is not None and value > opt.maximum:
        raise ValueError(f"{where} 需要在 {opt.minimum} 到 {opt.maximum} 之间，收到 {value!r}。{example}")
    return kind(value)


def options_to_argv(options: dict) -> list:
    """``{"bucket_caps_mb": (1.0, 25.0)}`` -> ``["--bucket-caps-mb", "1.0,25.0"]``."""
    argv = []
    for name, value in options.items():
        if isinstance(value, tuple):
            value = ",".join(repr(v) for v in value)
        argv += [f"--{name.replace('_', '-')}", str(value)]
    return argv


def _parse_value(opt: Option, text: str):
    kind = opt.kind
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise argparse.ArgumentTypeError(f"需要 true 或 false，收到 {text!r}")
        return text.lower() in ("true", "1")
    if kind is tuple:
        return tuple(float(x) for x in text.split(",") if x.strip())
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    return text


def parse_cli(module, argv=None):
    """Command line of a lab: its options plus --ranks/--timeout for standalone use."""
    p = argparse.ArgumentParser(prog=f"python -m {module.__name__}", description=module.TITLE)
    for name, opt in module.OPTIONS.items():
        p.add_argument(
            f"--{name.replace('_', '-')}", dest=name, default=opt.default,
            type=lambda t, o=opt: _parse_value(o, t), help=opt.help,
        )
    p.add_argument("--ranks", type=int, default=getattr(module, "DEFAULT_RANKS", 2),
                   help="不经 torchrun 直接运行时启动的进程数")
    p.add_argument("--keep-logs", action="store_true", help="成功时也保留日志目录（失败时总会保留）")
    p.add_argument("--timeout", type=float, default=None,
                   help="不经 torchrun 直接运行时的总超时（秒；默认按实验而定，一般 60）")
    args = p.parse_args(argv)
    opts = {name: getattr(args, name) for name in module.OPTIONS}
    return args, validate_options(module.NAME, module.OPTIONS, opts)


# ------------------------------------------------------------------ noise

# Warnings PyTorch's parallel stack prints on every run of these labs that tell a student nothing:
# the labs' modules are built so that each is harmless (see the lab that raises it).
QUIET_WARNINGS = (
    r"FSDP2-wrapped module .* returned a view tensor",  # fsdp: the root returns a block's output unchanged
    r"Full backward hook is firing when gradients are computed with respect to module outputs",  # CommDebugMode
)


def quiet_torch_warnings() -> None:
    """Hide :data:`QUIET_WARNINGS` in this rank (other warnings still show)."""
    import warnings

    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


# ------------------------------------------------------------------ joining

class HangDetected(RuntimeError):
    """A collective that would hang: some rank is missing or called something else."""


class Context:
    """What a lab's ``worker()`` gets: rank, world size, device, the store, a clock."""

    def __init__(self, collective_timeout: float = 30.0):
        import torch
        import torch.distributed as dist

        try:
            self.rank = int(os.environ["RANK"])
            self.world_size = int(os.environ["WORLD_SIZE"])
            self.local_rank = int(os.environ.get("LOCAL_RANK", self.rank))
            addr = os.environ["MASTER_ADDR"]
            port = int(os.environ["MASTER_PORT"])
        except (KeyError, ValueError) as exc:
            raise SystemExit(
                f"缺少或无效的环境变量 {exc}：请用 run_lab()、torchrun 或 python -m torch.distributed.run 启动。"
            ) from None
        self.timeout = timedelta(seconds=collective_timeout)
        if torch.cuda.is_available():
            self.backend = "nccl"
            self.device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(self.device)
        else:
            self.backend = "gloo"
            self.device = torch.device("cpu")
        use_agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
        base = dist.TCPStore(
            addr, port, self.world_size, is_master=(not use_agent and self.rank == 0),
            timeout=self.timeout, wait_for_workers=False, multi_tenant=not use_agent,
        )
        self._base = base
        self.store = dist.PrefixStore(STORE_PREFIX, base)
        dist.init_process_group(
            self.backend, store=dist.PrefixStore("pg", self.store),
            rank=self.rank, world_size=self.world_size, timeout=self.timeout,
        )
        # gloo's init returns on a rank before every peer has finished connecting its mesh: a rank
        # that then leaves at once (the floor lab) makes a slow peer fail with "Connection closed
        # by peer". One barrier here means every rank has joined before any rank can leave.
        dist.barrier()
        self.dist = dist
        self.torch = torch
        self._ledgers = []

    def environment(self) -> dict:
        """What a report must record: torch version, backend, device."""
        return {"torch": self.torch.__version__, "backend": self.backend, "device": str(self.device)}

    def now(self) -> float:
        """Seconds on the system-wide monotonic clock (comparable across ranks of one machine).

        On CUDA it first waits for queued GPU work, so a timed interval covers the work itself.
        """
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)
        return time.monotonic()

    def ledger(self, namespace: str, timeout: float) -> "CallLedger":
        led = CallLedger(self.store, self.rank, self.world_size, timeout, namespace)
        self._ledgers.append(led)
        return led

    def log(self, message: str) -> None:
        print(f"[rank {self.rank}] {message}", flush=True)

    def publish(self, result: dict) -> None:
        self.store.set(RESULT_KEY.format(rank=self.rank), json.dumps(result))

    def exit_early(self, result: dict, code: int = 0):
        """Leave the job now, as a crashing or impatient rank would (no goodbye to the group)."""
        self.publish(result)
        for led in self._ledgers:
            led.mark_exit()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    def close(self) -> None:
        for led in self._ledgers:
            led.mark_exit()
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


class CallLedger:
    """Own bookkeeping of collective calls, checked through the store before each call.

    Before its k-th collective a rank writes ``call/k/<rank> = label`` and waits
    (at most ``timeout`` s) until every other rank has written ``call/k/*``.
    A missing rank or a different label raises :class:`HangDetected` naming the
    ranks and the calls, *before* anyone enters the real collective, so the
    process group stays usable and nothing blocks.
    """

    def __init__(self, store, rank, world_size, timeout, namespace):
        self.store, self.rank, self.world_size = store, rank, world_size
        self.timeout = float(timeout)
        self.ns = f"{LEDGER_NS}/{namespace}"
        self.count = 0
        self.calls = []  # labels this rank entered, in order (for check_collectives)
        self.last = "（尚未调用集合通信）"

    def _key(self, k, r):
        return f"{self.ns}/call/{k}/{r}"

    def enter(self, label: str) -> None:
        k = self.count
        self.count += 1
        self.calls.append(label)
        self.last = f"第 {k + 1} 次调用 {label}"
        self.store.set(self._key(k, self.rank), label)
        self.store.set(f"{self.ns}/last/{self.rank}", self.last)
        self.store.set(f"{LEDGER_NS}/last/{self.rank}", self.last)
        others = [r for r in range(self.world_size) if r != self.rank]
        t0 = time.monotonic()
        try:
            self.store.wait([self._key(k, r) for r in others], timedelta(seconds=self.timeout))
        except RuntimeError:
            missing = [r for r in others if not self.store.check([self._key(k, r)])]
            waited = time.monotonic() - t0
            where = []
            for r in missing:
                exited = self.store.check([f"{self.ns}/exit/{r}"])
                last = self.store.get(f"{self.ns}/last/{r}").decode() if self.store.check(
                    [f"{self.ns}/last/{r}"]) else "（没有任何记录）"
                state = "已退出，不会再来" if exited else "仍在运行"
                where.append(f"rank {r}({state}，它最后一次记录：{last})")
            raise HangDetected(
                f"检测到挂起：rank {self.rank} 在{self.last}前等了 {waited:.2f} s，"
                f"rank {'、'.join(map(str, missing))} 没有到达。{'；'.join(where)}。"
            ) from None
        differ = []
        for r in others:
            theirs = self.store.get(self._key(k, r)).decode()
            if theirs != label:
                differ.append(f"rank {r} 是 {theirs}")
        if differ:
            raise HangDetected(
                f"集合通信顺序不一致：第 {k + 1} 次调用，rank {self.rank} 是 {label}，{'；'.join(differ)}。"
                "各 rank 必须以相同的次数和顺序进入相同的集合通信。"
            )

    def mark_exit(self) -> None:
        self.store.set(f"{self.ns}/exit/{self.rank}", str(self.count))
