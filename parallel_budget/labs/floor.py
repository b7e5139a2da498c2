"""The benchmark's floor: import torch, join a gloo group, leave.

Every lab pays this much before doing anything; ``benchmarks/bench_labs.py``
prints each lab's wall time beside it.
"""

from __future__ import annotations

import sys
import time

from .engine.report import Report, Row
from .engine.cli import main
from .engine.runtime import Option

NAME = "floor"
TITLE = "基准：导入 torch、加入 gloo 进程组、退出"
# Two hooks for the launcher's own tests: a rank that stalls, a rank that fails.
OPTIONS = {
    "stall_rank": Option(-1, "加入进程组后卡住不动的 rank（-1 表示没有，-2 表示全部）", minimum=-2, maximum=63),
    "fail_rank": Option(-1, "加入进程组后抛出异常的 rank（-1 表示没有）", minimum=-1, maximum=63),
}


def worker(ctx, opts) -> dict:
    if ctx.rank == opts["fail_rank"]:
        raise RuntimeError(f"rank {ctx.rank} 按 fail_rank 的要求故意失败")
    if opts["stall_rank"] in (ctx.rank, -2):
        ctx.log("按 stall_rank 的要求卡住")
        while True:  # like a rank stuck reading from a dead file system
            time.sleep(0.1)
    return {"rank": ctx.rank, "backend": ctx.backend}


def summarize(results, opts, ranks) -> Report:
    joined = sum(1 for r in results if r is not None)
    return Report(
        TITLE,
        rows=(Row("加入进程组的 rank 数", str(ranks), str(joined), "全部加入" if joined == ranks else "有 rank 缺席",
                  joined == ranks),),
        facts={"joined": joined},
    )


if __name__ == "__main__":
    main(sys.modules[__name__])
