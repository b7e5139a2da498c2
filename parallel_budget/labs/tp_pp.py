"""Lab 5: tensor parallel equals the full matmul; a pipeline idles as the bubble formula says.

Tensor parallel (Megatron style) on R ranks, one weight ``W`` (out x in):

* column parallel: rank r keeps rows r of ``W`` (a slice of the output
  features), computes its slice of ``X W^T``; an all-gather joins them;
* row parallel: rank r keeps columns r of ``W`` and of ``X``; the partial
  products are summed by one all-reduce;
* an MLP block (column-parallel, GELU, row-parallel) needs a single all-reduce.

Pipeline: rank s is stage s of an R-stage pipeline; ``microbatches`` go through
it forward only (fill, steady state, drain).  Each stage is busy for about
``stage_ms`` per microbatch and passes activations on with send/recv.  With
``work="sleep"`` (default) the busy time stands for an accelerator's compute:
a 2-core laptop cannot run four CPU-bound stages at once, and the lab is about
the schedule, not about CPU speed; ``work="matmul"`` burns real CPU instead.  Every stage records when it was busy; idle = makespan - busy.
The package predicts the idle fraction with ``pipeline_bubble(p, m)`` and the
per-stage idle time with ``pipeline_schedule(<measured stage times>, m)``.
"""

from __future__ import annotations

import sys
import time

from .engine.report import Report, Row, fmt_diff
from .engine.cli import main
from .engine.runtime import Option

NAME = "tp_pp"
TITLE = "实验 5：张量并行等于完整矩阵乘；流水线的空闲符合气泡公式吗？"
OPTIONS = {
    "hidden": Option(256, "张量并行的矩阵宽度（须能被 rank 数整除）", minimum=2, maximum=8192),
    "microbatches": Option(4, "流水线微批次数 m", minimum=1, maximum=64),
    "stage_ms": Option(30.0, "每个阶段处理一个微批次的计算时间（毫秒）", minimum=1.0, maximum=1000.0),
    "work": Option("sleep", "阶段的“计算”", choices=("sleep", "matmul")),
}
TOL = 1e-4


def validate(opts, ranks: int) -> None:
    h = opts["hidden"]
    if h % ranks:
        raise ValueError(f"实验 tp_pp 的选项 hidden={h} 不能被 ranks={ranks} 整除：张量并行要均分矩阵。例如 hidden=256")


def worker(ctx, opts) -> dict:
    import torch

    dist, R, rank, now = ctx.dist, ctx.world_size, ctx.rank, ctx.now
    h = opts["hidden"]
    g = torch.Generator().manual_seed(0)  # the same full tensors on every rank
    X = torch.randn(8, h, generator=g).to(ctx.device)
    W = (torch.randn(h, h, generator=g) / h**0.5).to(ctx.device)
    B = (torch.randn(h, h, generator=g) / h**0.5).to(ctx.device)
    k = h // R
    mine = slice(rank * k, (rank + 1) * k)

    full = X @ W.T
    parts = [torch.empty(8, k, device=ctx.device) for _ in range(R)]
    dist.all_gather(parts, X @ W[mine].T)  # column parallel
    col = torch.cat(parts, dim=1)
    row = X[:, mine] @ W[:, mine].T  # row parallel
    dist.all_reduce(row)
    ref_mlp = torch.nn.functional.gelu(X @ W.T) @ B.T
    mlp = torch.nn.functional.gelu(X @ W[mine].T) @ B[:, mine].T  # column then row: one all-reduce
    dist.all_reduce(mlp)
    tp = {
        "column": float((col - full).abs().max()),
        "row": float((row - full).abs().max()),
        "mlp": float((mlp - ref_mlp).abs().max()),
        "message_bytes": mlp.numel() * mlp.element_size(),
    }

    # Pipeline: stage = rank, forward only.
    m, budget = opts["microbatches"], opts["stage_ms"] / 1e3
    act = torch.randn(16, 128, device=ctx.device)
    Wp = torch.randn(128, 128, device=ctx.device) / 128**0.5
    dist.barrier()
    t0 = now()
    busy, pending = [], []
    for j in range(m):
        x = torch.empty(16, 128, device=ctx.device)
        if rank > 0:
            dist.recv(x, rank - 1)
        else:
            x.copy_(act)
        start = now()
        if opts["work"] == "sleep":  # the stage's device is busy; this CPU stays free
            x = torch.tanh(x @ Wp)
            time.sleep(max(0.0, budget - (now() - start)))
        else:
            while now() - start < budget:  # real CPU work for about stage_ms
                x = torch.tanh(x @ Wp)
        busy.append((start, now()))
        if rank < R - 1:
            pending.append(dist.isend(x.contiguous(), rank + 1))
    for req in pending:
        req.wait()
    return {"tp": tp, "t0": t0, "busy": busy}


def summarize(results, opts, ranks) -> Report:
    from ..model.communication import ring_send_factor
    from ..model.parallelism import pipeline_bubble, pipeline_schedule
    from ..model.units import Q_, fmt, fmt_percent

    tp = {k: max(r["tp"][k] for r in results) for k in ("column", "row", "mlp")}
    msg = results[0]["tp"]["message_bytes"]
    rows = [
        Row("列并行（切输出特征）+ all_gather", "等于 X·Wᵀ", f"最大绝对差 {fmt_diff(tp['column'])}",
            "一致" if tp["column"] < TOL else "不一致", tp["column"] < TOL),
        Row("行并行（切输入特征）+ all_reduce", "等于 X·Wᵀ（只差浮点求和顺序）", f"最大绝对差 {fmt_diff(tp['row'])}",
            "一致" if tp["row"] < TOL else "不一致", tp["row"] < TOL),
        Row("MLP：列并行 → GELU → 行并行", f"等于完整 MLP；1 次 all-reduce，每 rank 发送 {ring_send_factor(ranks):g} × {msg} B",
            f"最大绝对差 {fmt_diff(tp['mlp'])}", "一致" if tp["mlp"] < TOL else "不一致", tp["mlp"] < TOL),
    ]
    m = opts["microbatches"]
    t0 = min(r["t0"] for r in results)
    end = max(b[1] for r in results for b in r["busy"])
    makespan = end - t0
    busy = [sum(e - s for s, e in r["busy"]) for r in results]
    idle = [makespan - b for b in busy]
    stage_times = [b / m for b in busy]
    sched = pipeline_schedule([Q_(t, "s") for t in stage_times], m)
    bubble = pipeline_bubble(ranks, m)
    measured_frac = sum(idle) / (ranks * makespan)
    for s in range(ranks):
        rows.append(Row(
            f"流水线阶段 {s} 的空闲时间",
            f"{sched.idle_per_stage[s] * 1e3:.3g} ms(pipeline_schedule，按实测每微批次 {stage_times[s] * 1e3:.3g} ms)",
            f"{idle[s] * 1e3:.3g} ms（忙 {busy[s] * 1e3:.3g} ms，总长 {makespan * 1e3:.3g} ms）",
            f"相差 {abs(idle[s] - sched.idle_per_stage[s]) * 1e3:.2g} ms", None,
        ))
    rows.append(Row(
        "所有阶段的空闲比例",
        f"{fmt_percent(bubble.idle_fraction)} = (p−1)/(m+p−1),p={ranks},m={m}",
        fmt_percent(measured_frac),
        f"相差 {abs(measured_frac - bubble.idle_fraction) * 100:.2g} 个百分点",
        abs(measured_frac - bubble.idle_fraction) < 0.1,
    ))
    notes = (
        f"张量并行：{ranks} 个 rank 各持有 {opts['hidden']}×{opts['hidden']} 矩阵的 1/{ranks}；行并行的部分和要靠 all-reduce 相加。",
        f"流水线：{ranks} 个阶段、{m} 个微批次，只做前向；每个阶段处理一个微批次约 {opts['stage_ms']:g} ms"
        + ("（用 sleep 代表设备在算：核数比阶段少的笔记本跑不出真正并行的 CPU 计算）。" if opts["work"] == "sleep"
           else "（真实 CPU 矩阵乘；阶段数超过核数时会互相抢核）。"),
        "空闲 = 总长 − 该阶段忙的时间：开头的阶段在排空时等，后面的阶段在填充时等；微批次越多，气泡占比越小。",
        f"预测的总长为 {fmt(sched.makespan, 'ms', 3)}；实测还包含 send/recv 与进程调度的开销。",
    )
    facts = {"tp": tp, "makespan": makespan, "idle": idle, "busy": busy,
             "predicted_idle": list(sched.idle_per_stage), "idle_fraction": measured_frac,
             "bubble": bubble.idle_fraction}
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
