"""Lab 9: ZeRO-3 with PyTorch's FSDP2 -- bytes per rank and bytes per collective, counted by PyTorch.

A stack of ``layers`` transformer-style MLP blocks (LayerNorm, Linear w->4w,
GELU, Linear 4w->w, residual; fp32) is wrapped the way FSDP2 is used in
practice: ``fully_shard`` on every block, then on the whole model, and trained
with Adam for ``steps`` steps, once with ``reshard_after_forward=True``
(ZeRO-3) and once with ``False``.  Every rank then measures:

* the bytes of parameters, gradients and Adam moments it holds, from the local
  shards of the DTensors (``p.to_local()``, ``p.grad.to_local()``, the
  optimizer's ``exp_avg``/``exp_avg_sq``);
* every collective of the last step and its payload, with PyTorch's
  ``CommDebugMode`` (:mod:`.commcount`, which also records sizes);
* the unsharded parameters still held between forward and backward.

The package predicts the bytes with ``zero_memory(P, R, stage=3, 4, 4, 8)``
and the traffic with ``zero_communication(P, R, stage=3, 4, 4)``: a forward
all-gather, a backward all-gather and a reduce-scatter of the gradients, each
moving (R-1)/R of the payload per rank in a ring.  ``reshard_after_forward=False``
keeps the gathered parameters until backward: one all-gather fewer, and the
whole model's parameters resident in between (``zero_memory(P, R, 0)``'s).
"""

from __future__ import annotations

import sys

from .engine.cli import main
from .engine.report import Report, Row, fmt_diff
from .engine.runtime import Option, quiet_torch_warnings

NAME = "fsdp"
TITLE = "实验 9：FSDP2（ZeRO-3）：每个 rank 存多少字节、每次集合通信搬多少字节？"
OPTIONS = {
    "width": Option(128, "模型宽度 w（须能被 rank 数整除，分片才均匀）", minimum=8, maximum=2048),
    "layers": Option(4, "块数（每块各自 fully_shard）", minimum=1, maximum=32),
    "batch": Option(8, "每个 rank 的 batch 大小", minimum=1, maximum=1024),
    "steps": Option(2, "训练步数（计数的是最后一步）", minimum=1, maximum=20),
}
FP32 = {"param_bytes": 4, "grad_bytes": 4}
ADAM = {"optim_bytes": 8}  # two fp32 moments, no separate master copy in pure fp32
TOL = 1e-5


def validate(opts, ranks: int) -> None:
    w = opts["width"]
    if w % ranks:
        ok = [v for v in (64, 128, 256, 512) if v % ranks == 0] or [ranks * 16]
        raise ValueError(
            f"实验 fsdp 的选项 width={w} 不能被 ranks={ranks} 整除：FSDP2 按第 0 维把每个参数均分给各 rank，"
            f"除不尽时会补零，字节数就不再是 1/R。可接受：{ranks} 的倍数（8 到 2048），例如 width={ok[0]}"
        )


def _model(torch, w: int, layers: int, device):
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = torch.nn.LayerNorm(w)
            self.up = torch.nn.Linear(w, 4 * w)
            self.down = torch.nn.Linear(4 * w, w)

        def forward(self, x):
            return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(0)
    return torch.nn.Sequential(*[Block() for _ in range(layers)]).to(device)


def _local_bytes(t) -> int:
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def _moments(optimizer) -> int:
    return sum(_local_bytes(v) for st in optimizer.state.values() for k, v in st.items()
               if k in ("exp_avg", "exp_avg_sq"))


def worker(ctx, opts) -> dict:
    import torch
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    from .engine.commcount import comm_counter

    quiet_torch_warnings()
    dist, R, rank = ctx.dist, ctx.world_size, ctx.rank
    w, L, batch = opts["width"], opts["layers"], opts["batch"]
    data = torch.randn(R * batch, w, generator=torch.Generator().manual_seed(1))
    x = data[rank * batch:(rank + 1) * batch].to(ctx.device)

    # Single-process reference on the global batch (every rank computes it: the model is small).
    ref = _model(torch, w, L, ctx.device)
    ref(data.to(ctx.device)).square().mean().backward()
    want = [p.grad for p in ref.parameters()]  # the first step's gradient of the global batch

    out = {"params": sum(p.numel() for p in ref.parameters()), "runs": {}}
    finals = {}
    for reshard in (True, False):
        model = _model(torch, w, L, ctx.device)
        for block in model:
            fully_shard(block, reshard_after_forward=reshard)
        fully_shard(model, reshard_after_forward=reshard)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        mode = comm_counter()
        for step in range(opts["steps"]):
            last = step == opts["steps"] - 1
            opt.zero_grad()
            if last:
                mode.__enter__()
            try:
                loss = model(x).square().mean()
                # Between forward and backward: unsharded parameters are plain tensors, sharded ones DTensors.
                held = sum(p.numel() * p.element_size() for p in model.parameters() if not isinstance(p, DTensor))
                loss.backward()
                opt.step()
            finally:
                if last:
                    mode.__exit__(None, None, None)
            if step == 0:  # the averaged gradient, gathered outside the counted step
                diff = max(float((p.grad.full_tensor() - g).abs().max()) for p, g in zip(model.parameters(), want))
        params = list(model.parameters())
        finals[reshard] = [p.full_tensor().detach() for p in params]
        out["runs"]["reshard" if reshard else "keep"] = {
            "param_bytes": sum(_local_bytes(p) for p in params),
            "grad_bytes": sum(_local_bytes(p.grad) for p in params),
            "moment_bytes": _moments(opt),
            "held_after_forward": held,
            "comm": mode.summary(),
            "counts": {str(k): v for k, v in mode.get_comm_counts().items()},
            "grad_diff": diff,
        }
    out["reshard_diff"] = max(float((a - b).abs().max()) for a, b in zip(finals[True], finals[False]))
    return out


def _count(comm: dict, phase: str, kind: str) -> tuple:
    return tuple(comm[phase].get(kind, (0, 0)))


def summarize(results, opts, ranks) -> Report:
    from ..model.memory import zero_communication, zero_memory
    from ..model.units import Q_, fmt

    P = results[0]["params"]
    L = opts["layers"]
    mem = zero_memory(P, ranks, 3, **FP32, **ADAM)
    full = zero_memory(P, ranks, 0, **FP32, **ADAM)
    comm = zero_communication(P, ranks, 3, **FP32)
    ring = (ranks - 1) / ranks  # what the ring sends per byte of an all-gather or reduce-scatter payload
    rows, facts = [], {"params": P, "ranks": ranks}

    def byte_row(label, pred, key):
        want = pred.to("B").magnitude
        got = [r["runs"]["reshard"][key] for r in results]
        ok = all(g == want for g in got)
        rows.append(Row(f"每 rank 的{label}", f"{fmt(pred, 'MB', 4)}({want:.0f} B)",
                        " / ".join(f"{g} B" for g in got), "逐字节相等" if ok else "不相等", ok))
        facts[key] = {"predicted": want, "measured": got}

    byte_row("参数分片", mem.param_state, "param_bytes")
    byte_row("梯度分片", mem.grad_state, "grad_bytes")
    byte_row(" Adam 动量分片", mem.optim_state, "moment_bytes")

    run = results[0]["runs"]["reshard"]["comm"]
    expected = (("forward", "all-gather", comm.collectives[0]), ("backward", "all-gather", comm.collectives[1]),
                ("backward", "reduce-scatter", comm.collectives[2]))
    sent_total = 0.0
    facts["collectives"] = []
    for phase, kind, (_, what, send) in expected:
        n, payload = _count(run, phase, kind)
        sent = payload * ring
        sent_total += sent
        want = send.to("B").magnitude
        ok = n == L and abs(sent - want) < 0.5
        rows.append(Row(
            f"{'前向' if phase == 'forward' else '反向'} {kind}（{what}）",
            f"{L} 次（每块 1 次），每 rank 发送 {fmt(send, 'MB', 4)}",
            f"{n} 次，载荷 {fmt(Q_(payload, 'B'), 'MB', 4)}，× (R−1)/R = {fmt(Q_(sent, 'B'), 'MB', 4)}",
            "一致" if ok else "不一致", ok,
        ))
        facts["collectives"].append({"phase": phase, "kind": kind, "count": n, "payload": payload,
                                     "sent": sent, "predicted_sent": want})
    others = sum(c for k, c in results[0]["runs"]["reshard"]["counts"].items()) - sum(
        _count(run, p, k)[0] for p, k, _ in expected)
    want_total = comm.send_per_rank.to("B").magnitude
    ok = abs(sent_total - want_total) < 0.5 and others == 0
    rows.append(Row("一步合计（每 rank 发送）", f"{fmt(comm.send_per_rank, 'MB', 4)}，是 DDP 的 {comm.relative_to_ddp:g} 倍",
                    f"{fmt(Q_(sent_total, 'B'), 'MB', 4)}；其他集合通信 {others} 次", "一致" if ok else "不一致", ok))
    facts["send_per_rank"] = {"predicted": want_total, "measured": sent_total, "other_calls": others}

    keep = results[0]["runs"]["keep"]["comm"]
    n_bwd, _ = _count(keep, "backward", "all-gather")
    kept_send = sum(_count(keep, p, k)[1] for p in ("forward", "backward") for k in ("all-gather", "reduce-scatter")) * ring
    want_keep = want_total - comm.collectives[1][2].to("B").magnitude
    ok = n_bwd == 0 and abs(kept_send - want_keep) < 0.5
    rows.append(Row("reshard_after_forward=False：反向 all-gather", f"0 次；每 rank 发送 {fmt(Q_(want_keep, 'B'), 'MB', 4)}"
                    "（少一次 all-gather）", f"{n_bwd} 次；每 rank 发送 {fmt(Q_(kept_send, 'B'), 'MB', 4)}",
                    "一致" if ok else "不一致", ok))
    held = {k: [r["runs"][k]["held_after_forward"] for r in results] for k in ("reshard", "keep")}
    want_held = {"reshard": 0.0, "keep": full.param_state.to("B").magnitude}
    for key, label in (("reshard", "True"), ("keep", "False")):
        ok = all(h == want_held[key] for h in held[key])
        pred = (f"{fmt(Q_(want_held[key], 'B'), 'MB', 4)}（完整参数，zero_memory(stage=0) 的参数项）" if want_held[key]
                else "0 B（已释放，只剩分片）")
        rows.append(Row(f"reshard_after_forward={label}：前向后反向前多持有的完整参数", pred,
                        " / ".join(f"{h} B" for h in held[key]), "一致" if ok else "不一致", ok))
    facts["held_after_forward"] = {"measured": held, "predicted": want_held}
    diff = max(r["runs"][k]["grad_diff"] for r in results for k in ("reshard", "keep"))
    rows.append(Row("第 1 步的梯度（reduce-scatter 之后拼回）vs 单进程完整模型（全局 batch）", "相同（只差浮点求和顺序）",
                    f"最大绝对差 {fmt_diff(diff)}", "一致" if diff < TOL else "不一致", diff < TOL))
    same = max(r["reshard_diff"] for r in results)
    rows.append(Row("训练后的参数：reshard_after_forward=True vs False", "完全相同（只是何时释放不同）",
                    f"最大绝对差 {fmt_diff(same)}", "一致" if same == 0 else "不一致", same == 0))
    facts["grad_diff"], facts["reshard_diff"] = diff, same
    notes = (
        f"{L} 个块，每块 LayerNorm + Linear({opts['width']}→{4 * opts['width']}) + GELU + Linear(→{opts['width']}) + 残差，"
        f"fp32，P = {P} 个参数；{ranks} 个 rank，每个 rank batch {opts['batch']}，Adam 训练 {opts['steps']} 步。",
        "每块各自 fully_shard，再对整个模型 fully_shard：FSDP2 一次 all-gather 一个块的参数，用完即释放（ZeRO-3）。",
        "字节数取自各 rank 的本地分片（DTensor.to_local()）；集合通信由 PyTorch 的 CommDebugMode 计数，"
        "载荷取自它看到的张量（all-gather 的输出、reduce-scatter 的输入），统计最后一步的前向、反向和优化器。",
        "预测：zero_memory(P, R, stage=3, 4, 4, 8) 与 zero_communication(P, R, stage=3, 4, 4)。"
        "每 rank 发送量按环形算法的 (R−1)/R 从载荷折算；gloo 实际用的算法不同，搬的总字节也可能不同。",
        f"Adam 另有每个张量一个 step 计数器，不计入；reshard_after_forward=False 时前向与反向之间多持有整模型的参数"
        f"（{fmt(full.param_state, 'MB', 4)}），换来少一次 all-gather。",
    )
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
