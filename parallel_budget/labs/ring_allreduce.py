"""Lab 2: a chunked ring all-reduce written with send/recv.

The gradient (``numel`` float32 values, split into R equal chunks) goes through
R-1 reduce-scatter rounds and R-1 all-gather rounds; in every round each rank
sends one chunk to its right neighbour and receives one from its left, in the
order of the package's ``ring_schedule(R)``.  The
lab counts the bytes each rank hands to ``isend`` and checks them against the
package's ``ring_allreduce(R, G, bandwidth).send_per_rank`` = 2(R-1)/R x G
exactly; the result is compared with ``dist.all_reduce`` (integer-valued
floats, so the sums are exact in any order).

For time, the one-way bandwidth is measured by rank 0 sending the whole
gradient to rank 1 alone (fastest of ``repeats``), and the package turns it
into the lower bound; the hand ring and ``dist.all_reduce`` are timed beside it.
"""

from __future__ import annotations

import statistics
import sys

from .engine.report import Report, Row, fmt_diff
from .engine.cli import main
from .engine.runtime import Option

NAME = "ring_allreduce"
# With R = 2 the factor 2(R-1)/R is exactly 1: "sends G" would pass for the wrong
# formula too.  Four ranks give 1.5 G, which only the ring formula predicts.
DEFAULT_RANKS = 4
TITLE = "实验 2：用 send/recv 手写 ring all-reduce"
OPTIONS = {
    # 840 * 1024 is divisible by every rank count from 1 to 8.
    "numel": Option(840 * 1024, "梯度元素个数（float32），必须能被 rank 数整除", minimum=1, maximum=64 * 2**20),
    "repeats": Option(5, "计时重复次数（取中位数）", minimum=1, maximum=50),
}


def validate(opts, ranks: int) -> None:
    """Refuse chunks of unequal size before any process starts."""
    n = opts["numel"]
    if n % ranks:
        raise ValueError(f"实验 ring_allreduce 的选项 numel={n} 不能被 ranks={ranks} 整除：每块必须等大。例如 numel={840 * 1024}")


def ring_allreduce_sendrecv(dist, tensor, rank, world):
    """Sum ``tensor`` over all ranks in place with a ring; return (bytes sent, bytes received, rounds).

    Which chunk goes where in each round comes from the package's
    :func:`~parallel_budget.model.communication.ring_schedule`: rank r sends its
    scheduled chunk to r+1 and receives, from r-1, the chunk r-1 is scheduled to send.
    """
    import torch

    from ..model.communication import ring_schedule

    chunks = tensor.view(world, -1)
    buf = torch.empty_like(chunks[0])
    left = (rank - 1) % world
    sent = received = rounds = 0
    for transfers in (ring_schedule(world) if world > 1 else ()):
        mine, theirs = transfers[rank], transfers[left]
        req = dist.isend(chunks[mine.chunk], mine.dst)
        if mine.phase == "reduce-scatter":  # add the neighbour's partial sum into ours
            dist.recv(buf, theirs.src)
            chunks[theirs.chunk] += buf
        else:  # all-gather: the neighbour's chunk is complete; take it as is
            dist.recv(chunks[theirs.chunk], theirs.src)
        req.wait()
        sent += chunks[mine.chunk].numel() * chunks[mine.chunk].element_size()
        received += buf.numel() * buf.element_size()
        rounds += 1
    return sent, received, rounds


def worker(ctx, opts) -> dict:
    import torch

    dist, R, rank = ctx.dist, ctx.world_size, ctx.rank
    n = opts["numel"]
    gen = torch.Generator().manual_seed(1234 + rank)
    grad = torch.randint(-1000, 1000, (n,), generator=gen).to(torch.float32).to(ctx.device)

    mine = grad.clone()
    sent, received, rounds = ring_allreduce_sendrecv(dist, mine, rank, R)
    ref = grad.clone()
    dist.all_reduce(ref)
    diff = float((mine - ref).abs().max()) if n else 0.0

    def timed(fn, best=False):
        times = []
        for _ in range(opts["repeats"]):
            t = grad.clone()
            dist.barrier()
            t0 = ctx.now()
            fn(t)
            times.append(ctx.now() - t0)
        return min(times) if best else statistics.median(times)

    t_ring = timed(lambda t: ring_allreduce_sendrecv(dist, t, rank, R))
    t_lib = timed(lambda t: dist.all_reduce(t))
    # One-way bandwidth: the whole gradient from rank 0 to rank 1, nobody else sending.
    def one_way(t):
        if rank == 0 and R > 1:
            dist.send(t, 1)
        elif rank == 1:
            dist.recv(t, 0)

    t_p2p = timed(one_way, best=True)
    return {
        "bytes": n * 4, "sent": sent, "received": received, "rounds": rounds, "max_abs_diff": diff,
        "t_ring": t_ring, "t_allreduce": t_lib, "t_p2p": t_p2p,
    }


def summarize(results, opts, ranks) -> Report:
    from ..model.communication import ring_allreduce, ring_send_factor
    from ..model.units import Q_, fmt

    G = results[0]["bytes"]
    t_p2p = results[1]["t_p2p"] if ranks > 1 else 0.0
    bw = Q_(G / t_p2p, "B/s") if t_p2p > 0 else Q_(1e9, "B/s")
    model = ring_allreduce(ranks, Q_(G, "B"), bw)
    want = model.send_per_rank.to("B").magnitude
    sent = [r["sent"] for r in results]
    recv = [r["received"] for r in results]
    diff = max(r["max_abs_diff"] for r in results)
    t_ring = max(r["t_ring"] for r in results)
    t_lib = max(r["t_allreduce"] for r in results)
    bound = model.lower_bound.to("s").magnitude
    factor = ring_send_factor(ranks)
    rows = (
        Row("结果与 dist.all_reduce 相比", "完全相同（最大差 0）", f"最大绝对差 {fmt_diff(diff)}", "一致" if diff == 0 else "不一致",
            diff == 0),
        Row("每 rank 发送字节", f"{want:.0f} B = {factor:g} × G(G = {G} B)",
            " / ".join(f"{s} B" for s in sent), "逐字节相等" if all(s == want for s in sent) else "不相等",
            all(s == want for s in sent)),
        Row("每 rank 接收字节", f"{model.recv_per_rank.to('B').magnitude:.0f} B",
            " / ".join(f"{s} B" for s in recv), "逐字节相等" if all(s == want for s in recv) else "不相等",
            all(s == want for s in recv)),
        Row("通信轮数", f"{model.steps} 轮（2(R-1)）", " / ".join(str(r["rounds"]) for r in results),
            "相等" if all(r["rounds"] == model.steps for r in results) else "不相等",
            all(r["rounds"] == model.steps for r in results)),
        Row("时间", f"下界 {fmt(model.lower_bound, 'ms', 3)}" + (
            f"（单向带宽 {fmt(bw, 'GB/s', 3)}，实测）" if ranks > 1 else "（1 个 rank 不需要发送）"),
            f"手写 ring {t_ring * 1e3:.3g} ms；dist.all_reduce {t_lib * 1e3:.3g} ms",
            "不低于下界" if t_ring >= bound else "低于下界：带宽估计偏低", t_ring >= bound),
    )
    notes = (
        f"G = {fmt(Q_(G, 'B'), 'MB', 4)}（float32 整数值，求和顺序不同也完全相等），{ranks} 个 rank，每块 {fmt(model.chunk, 'MB', 4)}。",
        "发送字节在每次 isend 前按张量大小累加，和 parallel_budget.ring_allreduce 的 send_per_rank 比较。",
        "单向带宽取 rank 0 独自把整个梯度发给 rank 1 的最快一次；下界 = 每 rank 发送量 ÷ 这个带宽，忽略逐轮启动、归约计算和多个 rank 同时发送的竞争，所以实测时间更长。",
        "这里的 gloo 走本机回环：能核对协议和字节数，测不出跨机器网络的快慢。",
    )
    facts = {"bytes": G, "sent": sent, "received": recv, "predicted_send": want, "max_abs_diff": diff,
             "t_ring": t_ring, "t_allreduce": t_lib, "lower_bound": bound, "bandwidth": bw.to("B/s").magnitude}
    return Report(TITLE, rows, notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
