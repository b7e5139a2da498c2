"""Lab 6: one rank arrives late; the others wait inside the collective.

Each step every rank "loads" its batch and computes, then all-reduces its
gradient.  Rank ``slow_rank`` reads from slow storage: its load takes
``delay_ms`` longer.  Each rank records, on the machine-wide monotonic clock,
when it reached the all-reduce and when the all-reduce returned.

The package predicts the waits from the ranks' own pre-collective times:
``straggler_wait(arrivals, comm)`` -- rank r waits ``max(arrivals) - arrivals[r]``
and everybody waits for the slowest rank.  The lab attributes the wait to the
rank that arrived last in each step.
"""

from __future__ import annotations

import statistics
import sys
import time

from .engine.report import Report, Row
from .engine.cli import main
from .engine.runtime import Option

NAME = "late_rank"
TITLE = "实验 6：一个 rank 晚到，其他 rank 在集合通信里等多久？"
OPTIONS = {
    "slow_rank": Option(-1, "被拖慢的 rank（-1 表示最后一个）", minimum=-1, maximum=63),
    "delay_ms": Option(150.0, "慢存储让这个 rank 多花的读取时间（毫秒）", minimum=0.0, maximum=5000.0),
    "compute_ms": Option(10.0, "每个 rank 每步的计算时间（毫秒）", minimum=0.0, maximum=5000.0),
    "steps": Option(3, "步数", minimum=1, maximum=100),
}


def validate(opts, ranks: int) -> None:
    slow_rank_of(opts, ranks)


def slow_rank_of(opts, ranks: int) -> int:
    s = opts["slow_rank"]
    s = ranks - 1 if s == -1 else s
    if not 0 <= s < ranks:
        raise ValueError(f"实验 late_rank 的选项 slow_rank={opts['slow_rank']} 超出范围：只有 rank 0 到 {ranks - 1}。例如 slow_rank=-1")
    return s


def worker(ctx, opts) -> dict:
    import torch

    dist, rank, now = ctx.dist, ctx.rank, ctx.now
    slow = slow_rank_of(opts, ctx.world_size)
    grad = torch.ones(256 * 1024, device=ctx.device)
    # Communication alone, everybody present.
    comm = []
    for _ in range(3):
        dist.barrier()
        t0 = now()
        dist.all_reduce(grad)
        comm.append(now() - t0)
    steps = []
    for _ in range(opts["steps"]):
        dist.barrier()
        t0 = now()
        time.sleep((opts["delay_ms"] if rank == slow else 0.0) / 1e3)  # reading the batch
        time.sleep(opts["compute_ms"] / 1e3)  # forward and backward
        arrive = now()
        dist.all_reduce(grad)
        done = now()
        steps.append({"start": t0, "arrive": arrive, "done": done})
    return {"comm": statistics.median(comm), "steps": steps}


def summarize(results, opts, ranks) -> Report:
    from ..model.steptime import straggler_wait
    from ..model.units import Q_, fmt

    slow = slow_rank_of(opts, ranks)
    comm = max(r["comm"] for r in results)
    n = len(results[0]["steps"])
    preds, waits, last = [], [[] for _ in range(ranks)], []
    for k in range(n):
        per = [r["steps"][k] for r in results]
        # Arrivals on the one machine-wide clock, from the step's earliest start: a rank that left the
        # barrier late (a busy machine) arrives late by that much too, which durations alone would miss.
        t0 = min(p["start"] for p in per)
        pred = straggler_wait([Q_(p["arrive"] - t0, "s") for p in per], Q_(comm, "s"))
        preds.append(pred)
        arrivals = [p["arrive"] for p in per]
        last.append(arrivals.index(max(arrivals)))
        for r, p in enumerate(per):
            waits[r].append(p["done"] - p["arrive"])
    rows = []
    for r in range(ranks):
        p_wait = statistics.median(pr.waits[r].to("s").magnitude for pr in preds)
        m_wait = statistics.median(waits[r])
        role = "慢存储" if r == slow else "正常"
        rows.append(Row(
            f"rank {r}（{role}）在 all_reduce 里的时间",
            f"等待 {p_wait * 1e3:.3g} ms + 通信 {comm * 1e3:.3g} ms",
            f"{m_wait * 1e3:.3g} ms",
            f"相差 {abs(m_wait - p_wait - comm) * 1e3:.2g} ms",
            None,
        ))
    blamed = max(set(last), key=last.count)
    rows.append(Row(
        "大家在等谁（最后到达的 rank）",
        f"rank {preds[0].slowest}(straggler_wait)",
        "、".join(f"第 {k + 1} 步 rank {r}" for k, r in enumerate(last)),
        f"归因于 rank {blamed}", blamed == slow,
    ))
    step = statistics.median(max(s["done"] for s in (r["steps"][k] for r in results)) -
                             min(s["start"] for s in (r["steps"][k] for r in results)) for k in range(n))
    p_step = statistics.median(pr.step.to("s").magnitude for pr in preds)
    rows.append(Row("每步时间（所有 rank 相同）", fmt(Q_(p_step, "s"), "ms", 3), f"{step * 1e3:.3g} ms",
                    f"相差 {abs(step - p_step) * 1e3:.2g} ms", None))
    notes = (
        f"{ranks} 个 rank，rank {slow} 每步读数据多花 {opts['delay_ms']:g} ms，其余 rank 只计算 {opts['compute_ms']:g} ms。",
        "预测列由 parallel_budget.straggler_wait（各 rank 从本步开始到到达 all_reduce 的用时，通信）给出：集合通信要等最后一个 rank 到达才能完成。",
        "实测列是 all_reduce 从调用到返回的时间；快的 rank 把慢 rank 的读取时间花在了“通信”里，看起来像网络慢，其实是存储慢。",
        "所有进程在同一台机器上，time.monotonic() 是同一个时钟，所以能比较各 rank 的到达时刻。",
    )
    facts = {"slow_rank": slow, "blamed": blamed, "last": last,
             "waits": [statistics.median(w) for w in waits],
             "predicted_waits": [statistics.median(pr.waits[r].to("s").magnitude for pr in preds) for r in range(ranks)],
             "comm": comm}
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
