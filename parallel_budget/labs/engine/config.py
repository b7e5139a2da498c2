"""What a lab run is: the labs, their limits and :class:`LaunchConfig` (validated before any process starts)."""

from __future__ import annotations

import importlib
import math
import numbers
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .runtime import validate_options

# name -> what the student sees it for
LABS = {
    "two_rank_update": "两个 rank 的一次 DDP 更新等于单进程更新（以及三个常见错误）",
    "ring_allreduce": "用 send/recv 手写 ring all-reduce：结果、每 rank 发送字节、时间下界",
    "overlap": "DDP 的 bucket_cap_mb 与计算/通信重叠：隐藏与暴露的通信",
    "zero_state": "ZeroRedundancyOptimizer 与普通 Adam：每 rank 优化器状态字节",
    "tp_pp": "列并行/行并行线性层等于完整矩阵乘；两阶段流水线的空闲与气泡公式",
    "late_rank": "一个 rank 晚到：其他 rank 在集合通信里等多久，归因给谁",
    "hang": "四种挂起：跳过、顺序不同、提前退出、数据先用完；检测与修复",
    "checkpoint": "分布式 checkpoint（DCP）：保存途中死掉一个 rank，元数据没提交的被拒绝，从最新的完整一份在更少的 rank 上恢复",
    "fsdp": "FSDP2（ZeRO-3）：每 rank 的参数、梯度、Adam 状态字节与每次集合通信的字节，对照 zero_memory 与 zero_communication",
    "tensor_parallel": "DTensor 张量并行与序列并行：CommDebugMode 数出的集合通信次数与字节，对照 tp_allreduce；结果等于不切分的层",
    "pipeline_schedule": "torch.distributed.pipelining 的 GPipe 与 1F1B：气泡、每阶段持有的微批次、实际的时间线，对照 pipeline_bubble 与 pipeline_in_flight",
    "restart_drill": "torchrun 故障演练：两个代理扮演两个节点，杀掉一个 worker，torchrun 重启整组，从最新的完整 DCP checkpoint 继续",
}
# The benchmark's floor: two processes that import torch, join a gloo group, exit.
EXTRA = {"floor": "基准：导入 torch、加入 gloo 进程组、退出"}

MAX_RANKS = 8
MAX_TIMEOUT = 3600.0
DEFAULT_TIMEOUT = 60.0
TAIL_LINES = 15
# The labs are modules of the package above this engine, run by name: ``python -m parallel_budget.labs.<lab>``.
LABS_PACKAGE = __package__.rpartition(".")[0]


def lab_module(name: str):
    return importlib.import_module(f"{LABS_PACKAGE}.{name}")


def default_log_dir() -> Path:
    return Path(os.environ.get("PB_LAB_LOG_DIR") or Path(tempfile.gettempdir()) / "parallel_budget_labs")


@dataclass(frozen=True)
class LaunchConfig:
    """Everything a run needs; checked before any process starts."""

    lab: str
    ranks: int | None = None  # None: the lab's DEFAULT_RANKS (2 unless the lab needs more)
    timeout: float | None = None  # None: the lab's DEFAULT_TIMEOUT (60 s unless the lab needs more)
    options: dict = field(default_factory=dict)
    log_dir: Path | None = None
    run_id: str | None = None
    grace: float = 3.0  # seconds between SIGTERM and SIGKILL
    keep_logs: bool = False  # keep <log_dir>/<run_id> after a successful run too
    zygote: bool | None = None  # fork ranks from the zygote (None: unless PB_LAB_ZYGOTE=0)

    def __post_init__(self):
        known = {**LABS, **EXTRA}
        if not isinstance(self.lab, str) or self.lab not in known:
            raise ValueError(
                f"LaunchConfig 的字段 lab 不认识 {self.lab!r}。可用的实验：{'、'.join(LABS)}。"
                '例如 run_lab("two_rank_update", ranks=2)'
            )
        module = lab_module(self.lab)
        r = getattr(module, "DEFAULT_RANKS", 2) if self.ranks is None else self.ranks
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or not 1 <= r <= MAX_RANKS:
            raise ValueError(
                f"LaunchConfig 的字段 ranks 需要 1 到 {MAX_RANKS} 之间的整数（进程数），收到 {r!r}。"
                f'例如 run_lab("{self.lab}", ranks=2)'
            )
        if self.timeout is None:
            object.__setattr__(self, "timeout", float(getattr(module, "DEFAULT_TIMEOUT", DEFAULT_TIMEOUT)))
        for name, upper in (("timeout", MAX_TIMEOUT), ("grace", 60.0)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not 0 < v <= upper:
                raise ValueError(
                    f"LaunchConfig 的字段 {name} 需要 0 到 {upper:g} 之间的秒数，收到 {v!r}。"
                    f'例如 run_lab("{self.lab}", {name}=60)'
                )
        if not isinstance(self.options, dict):
            raise ValueError(f"LaunchConfig 的字段 options 需要 dict，收到 {type(self.options).__name__}。")
        if not isinstance(self.keep_logs, bool):
            raise ValueError(f"LaunchConfig 的字段 keep_logs 需要 True 或 False，收到 {self.keep_logs!r}。")
        if os.environ.get("PB_LAB_KEEP_LOGS") == "1":
            object.__setattr__(self, "keep_logs", True)
        if self.zygote is None:
            object.__setattr__(self, "zygote", os.environ.get("PB_LAB_ZYGOTE", "1") != "0")
        elif not isinstance(self.zygote, bool):
            raise ValueError(f"LaunchConfig 的字段 zygote 需要 True、False 或 None，收到 {self.zygote!r}。")
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
            raise ValueError(f"LaunchConfig 的字段 run_id 需要不含 / 的非空名字，收到 {self.run_id!r}。")

    @property
    def run_dir(self) -> Path:
        return self.log_dir / self.run_id
