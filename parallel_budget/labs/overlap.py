"""Lab 3: DDP buckets and overlap -- how much communication hides behind backward.

A small MLP is trained with DDP for a few steps for each ``bucket_cap_mb``, in
two halves (``mode="both"``; ``"emulated"`` or ``"gloo"`` runs one):

* **an emulated link** of ``bandwidth_gbps`` GB/s (:mod:`.emulatedlink`).  A
  DDP communication hook runs the real all-reduce, then completes the bucket's
  future only when the bucket has also crossed a serial link: it starts when the
  bucket is ready and the link is free and takes ``ring_allreduce(R, bucket,
  bandwidth).lower_bound``, on a timer thread that sleeps.  Communication then costs wall time but no CPU,
  as on a GPU whose copy engines move data while the SMs compute;
* **the real gloo all-reduce**, whose threads compete with the backward pass for
  the same two CPU cores.

Per configuration the lab measures, as medians over ``steps``:

* compute: forward + backward under ``no_sync()`` (no communication at all),
  and the forward alone, which gives the measured backward share;
* communication alone: the same buckets sent back to back (as DDP launches
  them), no compute;
* the DDP step: forward + backward with DDP's bucketed all-reduce;
* waiting: from the launch of the last bucket (backward has just finished its
  compute) until ``backward()`` returns -- the communication left exposed.

The comm hook records each bucket's size, launch time and whether it holds the
first layer's parameters.  The package predicts
the two ends with ``step_time``: no overlap (``overlap=0``) and full overlap
(``overlap=1`` with the measured backward share and the last bucket's share of
the communication as ``last_bucket``, which is always exposed).  A measured step
outside that range (with a 10 % margin) is flagged, not ticked, and the report
says why.  The exposed communication is ``step - compute`` but at most the
standalone communication time; anything beyond it is reported apart as a
slowdown that is not communication (the gloo threads and DDP's bucket copies
compete with compute for the same CPU cores -- the model assumes communication
never slows compute).

On the emulated link each row instead decomposes one step from its own time
stamps, as the rank whose backward ended last saw it.  The end of backward's
compute is taken from a clock DDP does not drive: autograd's hook after the
gradients of the first layer (the last ones backward computes) have landed.
The link's busy time before that moment was hidden, after it exposed; "模拟步时"
= compute + exposed lies inside the predicted range by construction and is shown
beside the measured DDP step (which includes the real all-reduce's tail).  What
can fail there is what the model claims: small buckets hide at least a fifth of
what full overlap could (``step_time``'s hidden time; that they hide no more
holds by construction, and the row says so), one bucket hides nothing, and the
last bucket DDP launches holds the first layer's parameters and its link time is
exposed.
"""

from __future__ import annotations

import statistics
import sys
import time

from .engine.report import Report, Row
from .engine.cli import main
from .engine.emulatedlink import Link, step_parts, straggler_step
from .engine.runtime import Option

NAME = "overlap"
TITLE = "实验 3：DDP 分桶与重叠：多少通信藏在反向传播后面？"
MODES = ("both", "emulated", "gloo")
STRESS_OPTIONS = {"batch": 64, "steps": 2}  # the 20x stress checks processes, not timings: a lighter run
OPTIONS = {
    "mode": Option("both", "通信方式：emulated 是模拟的链路，gloo 是真实的 gloo all-reduce，both 两者都跑", choices=MODES),
    "bandwidth_gbps": Option(0.25, "模拟链路的单向有效带宽（GB/s）", minimum=0.001, maximum=1000.0),
    "bucket_caps_mb": Option((0.25, 1.0, 25.0), "要比较的 bucket_cap_mb 值（MiB：PyTorch 按 2^20 字节计）"),
    "width": Option(256, "MLP 每层宽度", minimum=8, maximum=4096),
    "layers": Option(8, "MLP 层数", minimum=1, maximum=32),
    "batch": Option(256, "每个 rank 的 batch 大小", minimum=1, maximum=4096),
    "steps": Option(5, "每种配置计时的步数（取中位数）", minimum=1, maximum=100),
}


def _modes(mode: str) -> tuple:
    return ("emulated", "gloo") if mode == "both" else (mode,)


def worker(ctx, opts) -> dict:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist, R, now = ctx.dist, ctx.world_size, ctx.now
    torch.manual_seed(0)
    w, L = opts["width"], opts["layers"]
    layers = []
    for _ in range(L):
        layers += [torch.nn.Linear(w, w), torch.nn.ReLU()]
    x = torch.randn(opts["batch"], w, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    out = {"params": None, "configs": []}
    for mode in _modes(opts["mode"]):
        link = Link(dist, R, opts["bandwidth_gbps"] * 1e9 if mode == "emulated" else None)
        try:
            for cap in opts["bucket_caps_mb"]:
                out["configs"].append(dict(_measure(torch, DDP, ctx, layers, x, cap, link, opts["steps"], now),
                                           mode=mode))
        finally:
            link.close()
        out["params"] = sum(p.numel() for p in torch.nn.Sequential(*layers).parameters())
    return out


def _measure(torch, DDP, ctx, layers, x, cap, link, steps, now) -> dict:
    dist, R = ctx.dist, ctx.world_size
    model = torch.nn.Sequential(*layers).to(ctx.device)
    ddp = DDP(model, bucket_cap_mb=cap)
    record, ended = [], []
    first = list(model[0].parameters())  # autograd computes their gradients last: backward's compute ends there
    first_ptrs = {p.data_ptr() for p in first}
    # The end of backward by a clock DDP does not drive: autograd's hook after each first-layer gradient lands.
    handles = [p.register_post_accumulate_grad_hook(lambda _p: ended.append(time.monotonic())) for p in first]

    def hook(state, bucket):
        entry = {"launch": time.monotonic(), "numel": bucket.buffer().numel(),  # no CUDA sync in backward
                 "first_layer": any(t.data_ptr() in first_ptrs for t in bucket.parameters())}
        record.append(entry)
        fut = link.launch(bucket.buffer().div_(R), entry)

        def done(f):
            entry["done"] = time.monotonic()
            return f.value()

        return fut.then(done)

    ddp.register_comm_hook(None, hook)

    def step(sync: bool):
        ddp.zero_grad(set_to_none=True)
        dist.barrier()
        t0 = now()
        if sync:
            loss = ddp(x).square().mean()
            t_fwd = now()
            loss.backward()
        else:
            with ddp.no_sync():
                loss = ddp(x).square().mean()
                t_fwd = now()
                loss.backward()
        return t0, t_fwd, now()

    for _ in range(2):  # warm-up; DDP rebuilds its buckets after the first step
        step(True)
    compute, forward, ddp_step, waiting, buckets, timeline, inside = [], [], [], [], [], [], []
    for _ in range(steps):
        t0, t_fwd, t1 = step(False)
        compute.append(t1 - t0)
        forward.append(t_fwd - t0)
        record.clear()
        ended.clear()
        t0, t_fwd, t1 = step(True)
        ddp_step.append(t1 - t0)
        waiting.append(t1 - record[-1]["launch"])
        if "link" in record[-1]:
            inside.append(step_parts(t0, t_fwd, t1, record, max(ended)))
        buckets = [e["numel"] for e in record]
        timeline = [[e["launch"] - t0, e.get("done", t1) - t0] for e in record] + [[t1 - t0, t1 - t0]]
    flat = [torch.zeros(n, device=ctx.device) for n in buckets]
    comm = []
    for _ in range(steps):
        dist.barrier()
        t0 = now()
        futures = [link.launch(t) for t in flat]  # launched back to back, as DDP does
        for f in futures:
            f.wait()
        comm.append(now() - t0)
    for h in handles:
        h.remove()
    del ddp
    return {
        "cap_mb": cap, "buckets": buckets, "bucket_bytes": [n * 4 for n in buckets],
        "compute": statistics.median(compute), "forward": statistics.median(forward),
        "step": statistics.median(ddp_step), "waiting": statistics.median(waiting), "comm": statistics.median(comm),
        "timeline": timeline,  # the last DDP step: [launch, done] of each bucket (s from its start), then [end, end]
        "inside": inside,  # emulated link: every timed DDP step, decomposed from its own time stamps (step_parts)
    }


MARGIN = 0.10  # timing noise allowed around the predicted range before a step is flagged


def judge(step: float, full: float, none: float) -> tuple:
    """(ok, verdict) for a measured step (s) against the predicted range [full, none] (s)."""
    lo, hi = full * (1 - MARGIN), none * (1 + MARGIN)
    if step > hi:
        return False, (
            f"超出预测上限：比完全不重叠还慢 {(step - none) * 1e3:.3g} ms。模型假设通信不拖慢计算；"
            "这里 gloo 的通信线程、DDP 的桶拷贝和 hook 与反向计算抢同一批 CPU 核，计算本身变慢了。"
            "多出的时间记为“通信之外的变慢”，不算暴露的通信"
        )
    if step < lo:
        return False, (
            f"低于预测下限 {full * 1e3:.3g} ms：计时噪声，或无通信的计算单测偏慢；"
            "增大 steps 再测一次"
        )
    return True, "在预测范围内"


LABEL = {"emulated": "模拟链路", "gloo": "真实 gloo"}


def summarize(results, opts, ranks) -> Report:
    from ..model.communication import ring_allreduce
    from ..model.steptime import step_time
    from ..model.units import Q_, fmt, fmt_percent

    rows, facts = [], []
    n_params = results[0]["params"]
    bw = Q_(opts.get("bandwidth_gbps", 1.0), "GB/s")
    for i, cfg in enumerate(results[0]["configs"]):
        mode = cfg.get("mode", "gloo")
        per = [r["configs"][i] for r in results]
        buckets = cfg["buckets"]
        # on the emulated link: the last bucket's own time there, as the emulator charges it
        link_last = ring_allreduce(ranks, Q_(buckets[-1] * 4, "B"), bw).lower_bound.to("s").magnitude
        waiting = max(c["waiting"] for c in per)
        inside = straggler_step(per)
        if inside:  # emulated: one step decomposed from its own time stamps, as the slowest rank saw it
            compute, forward, comm = inside["compute"], inside["forward"], inside["comm"]
            hidden, last, exposed = inside["hidden"], inside["last"], inside["exposed"]
            extra = max(0.0, inside["wait"] - exposed)  # waiting beyond the link: the real all-reduce's tail
            step = compute + exposed  # the step on the emulated link; the tail is reported apart
            measured_step = inside["step"]  # what backward() took in wall time, the tail included
        else:  # gloo: compute, communication and the DDP step timed apart (medians)
            compute = max(c["compute"] for c in per)
            forward = min(max(c.get("forward", 0.0) for c in per), compute)
            comm = max(c["comm"] for c in per)
            step = max(c["step"] for c in per)
            last = comm * buckets[-1] / sum(buckets) if buckets and sum(buckets) else 0.0  # its share of the bytes
            slower = max(0.0, step - compute)  # everything DDP added to the no-communication step
            exposed = min(slower, comm)  # exposed communication can not exceed the communication itself
            extra = slower - exposed  # slowdown that is not communication
            hidden = max(0.0, comm - exposed)
        back_share = (compute - forward) / compute if compute > 0 else 0.0
        none = step_time(Q_(compute * ranks, "s"), ranks, Q_(comm, "s"), overlap=0.0)
        full = step_time(Q_(compute * ranks, "s"), ranks, Q_(comm, "s"), overlap=1.0,
                         backward_share=back_share, last_bucket=Q_(min(last, comm), "s"))
        lo_s, hi_s = full.step.to("s").magnitude, none.step.to("s").magnitude
        share = hidden / comm if comm > 0 else 0.0
        ok, verdict = judge(step, lo_s, hi_s)
        if inside:  # compute + the link's exposure lies in the range by construction: the rows below decide
            ok, verdict = None, "由构造成立，不是检验：模拟步时 = 计算 + 链路暴露，总在范围内；是否符合模型看下面两行"
        nb = len(buckets)
        if inside:
            measured = (f"模拟步时 {step * 1e3:.3g} ms = 计算 {compute * 1e3:.3g} + 链路暴露 {exposed * 1e3:.3g}"
                        f"；链路上共 {comm * 1e3:.3g} ms；实测 DDP 步时 {measured_step * 1e3:.3g} ms"
                        f"（含真实 all-reduce 收尾 {extra * 1e3:.3g} ms，模拟之外）")
        else:
            measured = (f"步时 {step * 1e3:.3g} ms = 计算 {compute * 1e3:.3g} + 暴露通信 {exposed * 1e3:.3g}"
                        + (f" + 通信之外的变慢 {extra * 1e3:.3g}" if extra > 0 else "")
                        + f"；通信单测 {comm * 1e3:.3g} ms；末尾等待 {waiting * 1e3:.3g} ms")
        where = LABEL[mode] + (f" {fmt(bw, 'GB/s', 3)}" if mode == "emulated" else "")
        rows.append(Row(
            f"{where}，bucket_cap_mb={cfg['cap_mb']:g}（{nb} 个桶）",
            f"{fmt(full.step, 'ms', 3)} 到 {fmt(none.step, 'ms', 3)}（完全重叠 … 不重叠）",
            measured,
            f"{verdict}；隐藏 {hidden * 1e3:.3g} ms（通信的 {fmt_percent(share, 2)}）",
            ok,
        ))
        fact = {"mode": mode, "cap_mb": cfg["cap_mb"], "buckets": nb, "compute": compute, "forward": forward,
                "backward_share": back_share, "last_bucket": last, "comm": comm, "step": step,
                "waiting": waiting, "exposed": exposed, "extra": extra, "hidden": hidden,
                "within_range": ok, "predicted_hidden": full.hidden_comm.to("s").magnitude, "link_last": link_last,
                "predicted_no_overlap": hi_s, "predicted_full_overlap": lo_s}
        if inside:
            fact.update(measured_step=measured_step, last_launch=inside["last_launch"],
                        last_has_first=inside["last_has_first"])
        if mode == "emulated":
            rows.extend(_emulated_rows(fact))
        facts.append(fact)
    return Report(TITLE, tuple(rows), _notes(opts, n_params, bw), {"configs": facts, "params": n_params})


HIDDEN_SHARE = 0.2  # on the emulated link, small buckets must hide at least this share of what full overlap could


def _emulated_rows(f: dict) -> list:
    """What the emulated link must show: hidden time with several buckets, none with one, the last bucket exposed.

    The end of backward comes from autograd's hook on the first layer's gradients, not from DDP's launches:
    the lower bound of the hidden time, "one bucket hides nothing" and the last-bucket row can each fail.
    The upper bound of the hidden time is not a check, and the verdict says so: the link can hide only what
    lies inside backward (by construction), and whether the last bucket lies after it is the next row's test.
    """
    most = f["predicted_hidden"]
    if most > 0:
        ok = f["hidden"] >= HIDDEN_SHARE * most
        pred = f"0 < 隐藏 ≤ {most * 1e3:.3g} ms（step_time 的完全重叠）"
        verdict = (f"下限一致（至少 {HIDDEN_SHARE:.0%}）" if ok else f"不一致：不到完全重叠的 {HIDDEN_SHARE:.0%}") + (
            "；上限不是检验：藏住的只能是反向期间的链路时间（由构造成立），最后一个桶是否落在反向之后由下一行检验")
    else:
        ok = f["hidden"] <= MARGIN * f["comm"] + 1e-3
        pred = "0 ms：只有一个桶，反向算完才发出，无处可藏"
        verdict = "一致" if ok else "不一致：桶在反向算完之前就上了链路"
    rows = [Row("  └ 藏在反向后面的通信", pred, f"{f['hidden'] * 1e3:.3g} ms（反向结束取自第一层梯度的钩子）", verdict, ok)]
    ok = f["last_has_first"] and f["exposed"] >= (1 - MARGIN) * f["link_last"]
    where = "含" if f["last_has_first"] else "不含"
    rows.append(Row(
        "  └ 最后一个桶（反向结束才就绪）",
        f"DDP 按反向顺序分桶：含第一层参数的桶最后发出；反向算完后至少暴露它在链路上的 {f['link_last'] * 1e3:.3g} ms",
        f"最后发出的桶{where}第一层参数，在反向算完后 {f['last_launch'] * 1e3:.2g} ms 发出；"
        f"反向算完后链路上还剩 {f['exposed'] * 1e3:.3g} ms",
        "一致" if ok else "不一致", ok))
    return rows


def _notes(opts, n_params, bw) -> tuple:
    from ..model.units import fmt

    grad_mib = n_params * 4 / 2**20  # in MiB, the unit of bucket_cap_mb
    modes = _modes(opts.get("mode", "gloo"))
    notes = [
        f"MLP {opts['layers']} 层 × {opts['width']} 宽，{n_params} 个 float32 参数，梯度 {grad_mib:.3g} MiB"
        f"（与 bucket_cap_mb 同一单位）；每 rank batch {opts['batch']}。",
        "预测列是 parallel_budget.step_time 给出的范围：下端是完全重叠（overlap=1，只能藏在实测的反向时间里，"
        "最后一个桶按它占的字节比例算作总是暴露），上端是不重叠（overlap=0）。"
        f"实测落在范围外（留 {MARGIN:.0%} 余量）时标 ✗，并写出原因。",
    ]
    if "emulated" in modes:
        notes.append(
            f"模拟链路：DDP 通信钩子先做真实的 all-reduce（它算出结果），再让这个桶在一条 {fmt(bw, 'GB/s', 3)} 的串行链路上"
            "“传输” ring_allreduce(R, bucket_bytes, bandwidth).lower_bound 那么久，由一个睡眠的计时线程到点完成它的 future。"
            "通信于是占墙钟时间、不占 CPU，就像 GPU 上由拷贝引擎搬数据、SM 照常计算；链路时间来自模型，"
            "实测的是反向计算能把它藏掉多少。"
        )
        notes.append(
            "模拟链路的每一行取自同一步自己的时间戳（各步中位的那一步，反向最晚算完的 rank）。反向算完的时刻不看 DDP "
            "何时发桶，而取自 autograd 在第一层参数的梯度写好后调用的钩子（反向最后算的就是第一层）；每个桶在链路上的起止"
            "时刻已知，落在这一时刻之前的部分藏了起来，之后的部分暴露。“模拟步时” = 计算 + 链路暴露，由构造落在预测范围内，"
            "所以不打 ✓；旁边给出实测的 DDP 步时。真实 all-reduce 只为算出结果，它在反向算完后的收尾要用 CPU（机器忙时更久），"
            "单独列出，不算进模拟步时。"
        )
    if "gloo" in modes:
        notes.append(
            "真实 gloo 的每一行把三样分开测（各取中位数）：无通信的一步、单独的通信、带通信的 DDP 一步。"
            "暴露通信 = DDP 步时 − 无通信步时，但不超过通信单测；超出的部分不是通信，单列为“通信之外的变慢”。"
            "隐藏 = 通信单测 − 暴露通信；末尾等待是从最后一个桶发出到 backward() 返回的时间。"
            "在 2 核 CPU 上，gloo 的通信线程和计算抢同一批核心，隐藏的比例比 GPU 上小得多，甚至为 0，"
            "步时还可能比不重叠的预测更长。"
        )
    notes.append("桶越大，第一个桶越晚凑满，能与反向重叠的部分越少；桶太小则每次通信的固定开销变多。")
    return tuple(notes)


if __name__ == "__main__":
    main(sys.modules[__name__])
