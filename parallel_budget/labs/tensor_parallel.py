"""Lab 10: tensor parallel with DTensor -- PyTorch counts the collectives, the package predicts them.

One transformer layer (LayerNorm, causal self-attention with ``heads`` heads,
LayerNorm, MLP h -> 4h -> h, residuals; fp32) is parallelised over all ranks
with ``torch.distributed.tensor.parallel.parallelize_module`` on a
``DeviceMesh``, the Megatron way:

* tensor parallel: ``ColwiseParallel`` on q, k, v and on the MLP's first
  linear (each rank computes its heads / its slice of 4h), ``RowwiseParallel``
  on the attention output and the MLP's second linear (partial sums, one
  all-reduce each).  ``PrepareModuleInput`` turns the attention's input into one
  replicated DTensor, so that the three partial input-gradients of q, k and v
  are added before one all-reduce in backward;
* sequence parallel: the same plus ``SequenceParallel`` on both LayerNorms;
  activations between the blocks stay split along the sequence, each
  all-reduce becomes an all-gather before the block and a reduce-scatter after
  it.

PyTorch's ``CommDebugMode`` (:mod:`.commcount`, which also records sizes)
counts the collectives of one forward and backward.  The package predicts them
with ``tp_allreduce(b, s, h, tp=R, layers=1, 4)``: two all-reduces in forward
and two in backward, each of ``b*s*h*4`` bytes, ``2(R-1)/R`` of it sent per rank
in a ring.  With sequence parallelism each all-reduce is one all-gather plus one
reduce-scatter of the same payload, ``(R-1)/R`` each: the same bytes.  The
output, the input's gradient and every weight gradient are compared with the
unsharded layer.
"""

from __future__ import annotations

import sys

from .engine.cli import main
from .engine.report import Report, Row, fmt_diff
from .engine.runtime import Option, quiet_torch_warnings

NAME = "tensor_parallel"
TITLE = "实验 10：DTensor 张量并行：每层几次集合通信、每次多少字节？"
OPTIONS = {
    "batch": Option(2, "batch 大小 b", minimum=1, maximum=64),
    "seq": Option(16, "序列长度 s（序列并行时须能被 rank 数整除）", minimum=1, maximum=1024),
    "hidden": Option(64, "隐藏维度 h（须能被 heads 整除）", minimum=4, maximum=2048),
    "heads": Option(4, "注意力头数（须能被 rank 数整除）", minimum=1, maximum=64),
}
TOL = 1e-4


def validate(opts, ranks: int) -> None:
    h, heads, s = opts["hidden"], opts["heads"], opts["seq"]
    if heads % ranks:
        raise ValueError(
            f"实验 tensor_parallel 的选项 heads={heads} 不能被 ranks={ranks} 整除：列并行按头把注意力分给各 rank。"
            f"可接受：{ranks} 的倍数（1 到 64），例如 heads={ranks * 2}"
        )
    if h % heads:
        raise ValueError(
            f"实验 tensor_parallel 的选项 hidden={h} 不能被 heads={heads} 整除：每个头的宽度是 hidden/heads。"
            f"可接受：{heads} 的倍数（4 到 2048），例如 hidden={heads * 16}"
        )
    if s % ranks:
        raise ValueError(
            f"实验 tensor_parallel 的选项 seq={s} 不能被 ranks={ranks} 整除：序列并行沿序列把激活均分给各 rank。"
            f"可接受：{ranks} 的倍数（1 到 1024），例如 seq={ranks * 8}"
        )


def _layer(torch, h: int, heads: int):
    F = torch.nn.functional

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (torch.nn.Linear(h, h, bias=False) for _ in range(4))

        def forward(self, x):
            b, s, _ = x.shape
            d = h // heads  # a rank holds heads/R of the heads: -1 below is its local count
            q, k, v = (m(x).view(b, s, -1, d).transpose(1, 2) for m in (self.q, self.k, self.v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y.transpose(1, 2).reshape(b, s, -1))

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.up = torch.nn.Linear(h, 4 * h)
            self.down = torch.nn.Linear(4 * h, h)

        def forward(self, x):
            return self.down(F.gelu(self.up(x)))

    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.attn = torch.nn.LayerNorm(h), Attention()
            self.norm2, self.mlp = torch.nn.LayerNorm(h), MLP()

        def forward(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.mlp(self.norm2(x))

    torch.manual_seed(0)
    return Layer()


def _plans(tp):
    from torch.distributed.tensor import Replicate, Shard

    colwise = {"attn.q": tp.ColwiseParallel(), "attn.k": tp.ColwiseParallel(), "attn.v": tp.ColwiseParallel(),
               "mlp.up": tp.ColwiseParallel()}
    plain = {**colwise, "attn": tp.PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),),
                                                       use_local_output=False),
             "attn.o": tp.RowwiseParallel(), "mlp.down": tp.RowwiseParallel()}
    gather = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
    seq = {**colwise, "norm1": tp.SequenceParallel(), "norm2": tp.SequenceParallel(),
           "attn": tp.PrepareModuleInput(**gather), "mlp": tp.PrepareModuleInput(**gather),
           "attn.o": tp.RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
           "mlp.down": tp.RowwiseParallel(output_layouts=Shard(1), use_local_output=False)}
    return {"tp": plain, "sp": seq}


def worker(ctx, opts) -> dict:
    import torch
    import torch.distributed.tensor.parallel as tp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard

    from .engine.commcount import comm_counter

    quiet_torch_warnings()
    R, rank = ctx.world_size, ctx.rank
    b, s, h, heads = opts["batch"], opts["seq"], opts["hidden"], opts["heads"]
    mesh = init_device_mesh(ctx.device.type, (R,))
    x = torch.randn(b, s, h, generator=torch.Generator().manual_seed(1)).to(ctx.device)

    ref = _layer(torch, h, heads).to(ctx.device)
    x_ref = x.clone().requires_grad_(True)
    y_ref = ref(x_ref)
    y_ref.square().sum().backward()
    ref_grads = {n: p.grad for n, p in ref.named_parameters()}

    out = {}
    for name, plan in _plans(tp).items():
        layer = _layer(torch, h, heads).to(ctx.device)
        parallelize_module = tp.parallelize_module
        parallelize_module(layer, mesh, plan)
        if name == "sp":  # this rank's slice of the sequence
            x_in = x.chunk(R, dim=1)[rank].clone().requires_grad_(True)
            feed = DTensor.from_local(x_in, mesh, [Shard(1)])
        else:
            x_in = x.clone().requires_grad_(True)
            feed = x_in
        mode = comm_counter()
        with mode:
            y = layer(feed)
            (y.to_local() if isinstance(y, DTensor) else y).square().sum().backward()
        modules = {m: {ph: {str(k): v for k, v in c.items()} for ph, c in d.items()}
                   for m, d in mode.comm_module_counts.items() if m.split(".")[-1] in ("attn", "mlp")}
        # Compared with the unsharded layer outside the counted region (full_tensor() gathers).
        y_full = y.full_tensor() if isinstance(y, DTensor) else y
        x_grad_want = x_ref.grad.chunk(R, dim=1)[rank] if name == "sp" else x_ref.grad
        w_diff, placements = 0.0, {}
        for n, p in layer.named_parameters():
            g = p.grad
            if isinstance(g, DTensor):
                placements[n] = repr(g.placements[0])
                g = g.full_tensor()
            w_diff = max(w_diff, float((g - ref_grads[n]).abs().max()))
        out[name] = {
            "comm": mode.summary(), "modules": modules,
            "out_diff": float((y_full - y_ref).detach().abs().max()),
            "x_grad_diff": float((x_in.grad - x_grad_want).abs().max()),
            "w_grad_diff": w_diff,
            "norm_grad_placement": placements.get("norm1.weight", "Tensor"),
        }
    return out


def _n(comm, phase, kind) -> tuple:
    return tuple(comm[phase].get(kind, (0, 0)))


def summarize(results, opts, ranks) -> Report:
    from ..model.parallelism import tp_allreduce
    from ..model.units import Q_, fmt

    b, s, h = opts["batch"], opts["seq"], opts["hidden"]
    pred = tp_allreduce(b, s, h, ranks, 1, bytes_per_elem=4)
    msg = pred.message.to("B").magnitude
    half = pred.allreduces_per_layer // 2
    ring_ar, ring_half = 2 * (ranks - 1) / ranks, (ranks - 1) / ranks
    rows, facts = [], {"message": msg, "predicted_send": pred.send_per_rank_per_layer.to("B").magnitude, "runs": {}}
    r0 = results[0]
    plain = r0["tp"]["comm"]
    sent = 0.0
    for phase, label in (("forward", "前向"), ("backward", "反向")):
        n, payload = _n(plain, phase, "all-reduce")
        split = {m.split(".")[-1]: sum(c.get(phase, {}).values()) for m, c in r0["tp"]["modules"].items()}
        others = sum(c for k, (c, _) in plain[phase].items() if k != "all-reduce")
        sent += payload * ring_ar
        ok = n == half and payload == half * msg and others == 0 and split.get("attn") == split.get("mlp") == 1
        rows.append(Row(f"张量并行，{label}：all-reduce", f"{half} 次（注意力 1、MLP 1），每次载荷 {fmt(pred.message, 'kB', 4)}",
                        f"{n} 次（注意力 {split.get('attn', 0)}、MLP {split.get('mlp', 0)}），共 {fmt(Q_(payload, 'B'), 'kB', 4)}"
                        + (f"；其他集合通信 {others} 次" if others else ""),
                        "一致" if ok else "不一致", ok))
    want = pred.send_per_rank_per_layer.to("B").magnitude
    ok = abs(sent - want) < 0.5
    rows.append(Row("张量并行，每层每 rank 发送（环形）", f"{fmt(pred.send_per_rank_per_layer, 'kB', 4)}"
                    f"（tp_allreduce：{pred.allreduces_per_layer} × 载荷 × 2(R−1)/R）", fmt(Q_(sent, "B"), "kB", 4),
                    "一致" if ok else "不一致", ok))
    facts["runs"]["tp"] = {"comm": plain, "sent": sent, "modules": r0["tp"]["modules"]}

    seq = r0["sp"]["comm"]
    sent = 0.0
    for phase, label in (("forward", "前向"), ("backward", "反向")):
        ag, ag_bytes = _n(seq, phase, "all-gather")
        rs, rs_bytes = _n(seq, phase, "reduce-scatter")
        ar, _ = _n(seq, phase, "all-reduce")
        sent += (ag_bytes + rs_bytes) * ring_half
        ok = ag == half and rs == half and ar == 0 and ag_bytes == rs_bytes == half * msg
        rows.append(Row(f"序列并行，{label}：all-gather + reduce-scatter",
                        f"各 {half} 次（代替 {half} 次 all-reduce），每次载荷 {fmt(pred.message, 'kB', 4)}",
                        f"all-gather {ag} 次、reduce-scatter {rs} 次、all-reduce {ar} 次，"
                        f"共 {fmt(Q_(ag_bytes + rs_bytes, 'B'), 'kB', 4)}", "一致" if ok else "不一致", ok))
    ok = abs(sent - want) < 0.5
    rows.append(Row("序列并行，每层每 rank 发送（环形）", f"{fmt(pred.send_per_rank_per_layer, 'kB', 4)}（与 all-reduce 相同）",
                    fmt(Q_(sent, "B"), "kB", 4), "一致" if ok else "不一致", ok))
    facts["runs"]["sp"] = {"comm": seq, "sent": sent, "modules": r0["sp"]["modules"]}

    for name, label in (("tp", "张量并行"), ("sp", "序列并行")):
        d = {k: max(r[name][k] for r in results) for k in ("out_diff", "x_grad_diff", "w_grad_diff")}
        ok = max(d.values()) < TOL
        rows.append(Row(f"{label}：输出、输入梯度、权重梯度 vs 不切分的层", "相同（只差浮点求和顺序）",
                        f"最大绝对差 {fmt_diff(d['out_diff'])} / {fmt_diff(d['x_grad_diff'])} / {fmt_diff(d['w_grad_diff'])}",
                        "一致" if ok else "不一致", ok))
        facts["runs"][name].update(d)
    norm = r0["sp"]["norm_grad_placement"]
    facts["norm_grad_placement"] = norm
    notes = (
        f"一层：LayerNorm → 自注意力（{opts['heads']} 头，因果）→ 残差 → LayerNorm → MLP（{h}→{4 * h}→{h}）→ 残差；"
        f"fp32，b={b}，s={s}，h={h}，{ranks} 个 rank 组成一维 DeviceMesh。",
        "计划：q、k、v 与 MLP 第一层用 ColwiseParallel（每个 rank 算自己的头、自己那段 4h），注意力输出与 MLP 第二层用 "
        "RowwiseParallel（各 rank 得到部分和，一次 all-reduce 相加）。PrepareModuleInput 让 q、k、v 共用一个 DTensor 输入，"
        "反向时三份部分梯度先相加再做一次 all-reduce；不加它，注意力的反向要做三次。",
        "序列并行：两个 LayerNorm 用 SequenceParallel，块与块之间的激活沿序列切开；进块前 all-gather，出块时 reduce-scatter。"
        f"LayerNorm 权重的梯度此时是 {norm}（各 rank 的部分和），优化器用它之前还要再归约一次，不在上面的计数里。",
        "计数来自 PyTorch 的 CommDebugMode（一次前向加反向），载荷取自它看到的张量；预测来自 tp_allreduce(b, s, h, tp=R, "
        "layers=1, bytes_per_elem=4)。每 rank 发送量按环形算法从载荷折算，gloo 实际用的算法可能不同。",
    )
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
