"""The benchmark's floor: import torch, join a gloo group, leave.

Every lab pays this much before doing anything; ``benchmarks/bench_labs.py``
prints each lab's wall time beside it.
"""

from __future__ import annotations

import sys

from .report import Report, Row
from .runtime import main

NAME = "floor"
TITLE = "基准:导入 torch、加入 gloo 进程组、退出"
OPTIONS: dict = {}


def worker(ctx, opts) -> dict:
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
