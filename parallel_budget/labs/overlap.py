"""Lab 3: DDP buckets and overlap -- how much communication hides behind backward.

A small MLP is trained with DDP for a few steps for each ``bucket_cap_mb``.
Per configuration the lab measures, as medians over ``steps``:

* compute: forward + backward under ``no_sync()`` (no communication at all),
  and the forward alone, which gives the measured backward share;
* communication alone: the same buckets all-reduced asynchronously back to
  back (as DDP launches them), no compute;
* the DDP step: forward + backward with DDP's bucketed all-reduce;
* waiting: from the launch of the last bucket (backward has just finished its
  compute) until ``backward()`` returns -- the communication left exposed.

A DDP comm hook (the default all-reduce, with time stamps) records each
bucket's size and launch time.  The package predicts the two ends with
``step_time``: no overlap (``overlap=0``) and full overlap (``overlap=1`` with the
measured backward share and the last bucket's share of the communication as
``last_bucket``, which is always exposed).  A measured step outside that range
(with a 10 % margin) is flagged, not ticked, and the report says why.  The
exposed communication is ``step - compute`` but at most the standalone
communication time; anything beyond it is reported apart as a slowdown that is
not communication (the gloo threads and DDP's bucket copies compete with compute
for the same CPU cores -- the model assumes communication never slows compute).
"""

from __future__ import annotations

import statistics
import sys
import time

from .report import Report, Row
from .cli import main
from .runtime import Option

NAME = "overlap"
TITLE = "实验 3：DDP 分桶与重叠：多少通信藏在反向传播后面？"
OPTIONS = {
    "bucket_caps_mb": Option((0.25, 1.0, 25.0), "要比较的 bucket_cap_mb 值（MiB：PyTorch 按 2^20 字节计）"),
    "width": Option(256, "MLP 每层宽度", minimum=8, maximum=4096),
    "layers": Option(8, "MLP 层数", minimum=1, maximum=32),
    "batch": Option(64, "每个 rank 的 batch 大小", minimum=1, maximum=4096),
    "steps": Option(3, "每种配置计时的步数（取中位数）", minimum=1, maximum=100),
}


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
    for cap in opts["bucket_caps_mb"]:
        model = torch.nn.Sequential(*layers).to(ctx.device)
        out["params"] = sum(p.numel() for p in model.parameters())
        ddp = DDP(model, bucket_cap_mb=cap)
        record = []

        def hook(state, bucket, record=record):
            entry = {"launch": time.monotonic(), "numel": bucket.buffer().numel()}  # no CUDA sync inside backward
            record.append(entry)
            fut = dist.all_reduce(bucket.buffer().div_(R), async_op=True).get_future()

            def done(f):
                entry["done"] = time.monotonic()
                return f.value()[0]

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
        compute, forward, ddp_step, waiting, buckets = [], [], [], [], []
        for _ in range(opts["steps"]):
            t0, t_fwd, t1 = step(False)
            compute.append(t1 - t0)
            forward.append(t_fwd - t0)
            record.clear()
            t0, _, t1 = step(True)
            ddp_step.append(t1 - t0)
            waiting.append(t1 - record[-1]["launch"])
            buckets = [e["numel"] for e in record]
        flat = [torch.zeros(n, device=ctx.device) for n in buckets]
        comm = []
        for _ in range(opts["steps"]):
            dist.barrier()
            t0 = now()
            works = [dist.all_reduce(t, async_op=True) for t in flat]  # launched back to back, as DDP does
            for work in works:
                work.wait()
            comm.append(now() - t0)
        out["configs"].append({
            "cap_mb": cap, "buckets": buckets,
            "compute": statistics.median(compute), "forward": statistics.median(forward),
            "step": statistics.median(ddp_step),
            "waiting": statistics.median(waiting), "comm": statistics.median(comm),
        })
        del ddp
    return out


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


def summarize(results, opts, ranks) -> Report:
    from ..model.steptime import step_time
    from ..model.units import Q_, fmt, fmt_percent

    rows, facts = [], []
    n_params = results[0]["params"]
    for i, cfg in enumerate(results[0]["configs"]):
        per = [r["configs"][i] for r in results]
        compute = max(c["compute"] for c in per)
        forward = min(max(c.get("forward", 0.0) for c in per), compute)
        comm = max(c["comm"] for c in per)
        step = max(c["step"] for c in per)
        waiting = max(c["waiting"] for c in per)
        buckets = cfg["buckets"]
        back_share = (compute - forward) / compute if compute > 0 else 0.0
        last = comm * buckets[-1] / sum(buckets) if buckets and sum(buckets) else 0.0
        none = step_time(Q_(compute * ranks, "s"), ranks, Q_(comm, "s"), overlap=0.0)
        full = step_time(Q_(compute * ranks, "s"), ranks, Q_(comm, "s"), overlap=1.0,
                         backward_share=back_share, last_bucket=Q_(last, "s"))
        lo_s, hi_s = full.step.to("s").magnitude, none.step.to("s").magnitude
        slower = max(0.0, step - compute)  # everything DDP added to the no-communication step
        exposed = min(slower, comm)  # exposed communication can not exceed the communication itself
        extra = slower - exposed  # slowdown that is not communication
        hidden = max(0.0, comm - exposed)
        share = hidden / comm if comm > 0 else 0.0
        ok, verdict = judge(step, lo_s, hi_s)
        nb = len(buckets)
        measured = (f"步时 {step * 1e3:.3g} ms = 计算 {compute * 1e3:.3g} + 暴露通信 {exposed * 1e3:.3g}"
                    + (f" + 通信之外的变慢 {extra * 1e3:.3g}" if extra > 0 else "")
                    + f"；通信单测 {comm * 1e3:.3g} ms；末尾等待 {waiting * 1e3:.3g} ms")
        rows.append(Row(
            f"bucket_cap_mb={cfg['cap_mb']:g}（{nb} 个桶）",
            f"{fmt(full.step, 'ms', 3)} 到 {fmt(none.step, 'ms', 3)}（完全重叠 … 不重叠）",
            measured,
            f"{verdict}；隐藏 {hidden * 1e3:.3g} ms（通信的 {fmt_percent(share, 2)}）",
            ok,
        ))
        facts.append({"cap_mb": cfg["cap_mb"], "buckets": nb, "compute": compute, "forward": forward,
                      "backward_share": back_share, "last_bucket": last, "comm": comm, "step": step,
                      "waiting": waiting, "exposed": exposed, "extra": extra, "hidden": hidden,
                      "within_range": ok,
                      "predicted_no_overlap": hi_s, "predicted_full_overlap": lo_s})
    grad_mib = n_params * 4 / 2**20  # in MiB, the unit of bucket_cap_mb
    notes = (
        f"MLP {opts['layers']} 层 × {opts['width']} 宽，{n_params} 个 float32 参数，梯度 {grad_mib:.3g} MiB（与 bucket_cap_mb 同一单位）；每 rank batch {opts['batch']}。",
        "预测列是 parallel_budget.step_time 给出的范围：下端是完全重叠（overlap=1，只能藏在实测的反向时间里，"
        "最后一个桶按它占通信量的比例算作总是暴露），上端是不重叠（overlap=0）。"
        f"实测落在范围外（留 {MARGIN:.0%} 余量）时标 ✗，并写出原因。",
        "暴露通信 = DDP 步时 − 无通信步时，但不超过通信单测；超出的部分不是通信，单列为“通信之外的变慢”。"
        "隐藏 = 通信单测 − 暴露通信；末尾等待是从最后一个桶发出到 backward() 返回的时间。",
        "桶越大，第一个桶越晚凑满，能与反向重叠的部分越少；桶太小则每次通信的固定开销变多。",
        "在 2 核 CPU 上，gloo 的通信线程和计算抢同一批核心，隐藏的比例比 GPU 上小得多，甚至为 0，"
        "步时还可能比不重叠的预测更长。",
    )
    return Report(TITLE, tuple(rows), notes, {"configs": facts, "params": n_params})


if __name__ == "__main__":
    main(sys.modules[__name__])
