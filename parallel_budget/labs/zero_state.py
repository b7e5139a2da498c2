"""Lab 4: ZeroRedundancyOptimizer vs plain Adam -- optimizer-state bytes per rank.

A stack of ``layers`` square fp32 linear layers (no bias, so every parameter
tensor has the same size) is trained for ``steps`` steps twice from the same
start: once with plain ``torch.optim.Adam`` on every rank, once with
``ZeroRedundancyOptimizer(Adam)``, gradients averaged with ``all_reduce`` in
both.  Then each rank counts the bytes of the Adam moments it holds
(``exp_avg`` and ``exp_avg_sq``) and of its parameters and gradients.

The package predicts them with fp32 bytes per parameter (4 for parameters,
4 for gradients, 8 for the two Adam moments; there is no separate master copy
in pure fp32): ``zero_memory(P, dp=R, stage=0/1, 4, 4, 8)``.
ZeroRedundancyOptimizer shards whole tensors, so the split is exact only when
the tensors can be dealt out evenly to the ranks.
"""

from __future__ import annotations

import sys

from .engine.report import Report, Row, fmt_diff
from .engine.cli import main
from .engine.runtime import Option

NAME = "zero_state"
TITLE = "实验 4：ZeroRedundancyOptimizer 与普通 Adam：每个 rank 存多少优化器状态？"
OPTIONS = {
    "width": Option(256, "每层的宽度（参数张量为 width × width）", minimum=2, maximum=4096),
    "layers": Option(8, "层数（能被 rank 数整除时分片最均匀）", minimum=1, maximum=64),
    "steps": Option(2, "训练步数", minimum=1, maximum=100),
}
FP32 = {"param_bytes": 4, "grad_bytes": 4, "optim_bytes": 8}


def _state_bytes(optimizer) -> tuple:
    """Bytes of Adam moments and of step counters held in ``optimizer.state``."""
    moments = counters = 0
    for st in optimizer.state.values():
        for name, t in st.items():
            if hasattr(t, "element_size"):
                n = t.numel() * t.element_size()
                if name in ("exp_avg", "exp_avg_sq"):
                    moments += n
                else:
                    counters += n
    return moments, counters


def worker(ctx, opts) -> dict:
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer

    dist, R = ctx.dist, ctx.world_size
    w, L = opts["width"], opts["layers"]

    def build():
        torch.manual_seed(0)
        return torch.nn.Sequential(*[torch.nn.Linear(w, w, bias=False) for _ in range(L)]).to(ctx.device)

    x = torch.randn(16, w, generator=torch.Generator().manual_seed(ctx.rank)).to(ctx.device)
    out = {}
    finals = {}
    for kind in ("adam", "zero1"):
        model = build()
        if kind == "adam":
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        else:
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
        for _ in range(opts["steps"]):
            opt.zero_grad(set_to_none=False)
            model(x).square().mean().backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
                p.grad /= R
            opt.step()
        local = opt.optim if kind == "zero1" else opt
        moments, counters = _state_bytes(local)
        params = sum(p.numel() for p in model.parameters())
        out[kind] = {
            "moments": moments,
            "counters": counters,
            "param_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "grad_bytes": sum(p.grad.numel() * p.grad.element_size() for p in model.parameters()),
            "owned_tensors": len(local.state),
        }
        finals[kind] = torch.cat([p.detach().flatten() for p in model.parameters()])
    out["params"] = params
    out["max_abs_diff"] = float((finals["adam"] - finals["zero1"]).abs().max())
    return out


def summarize(results, opts, ranks) -> Report:
    from ..model.memory import zero_memory
    from ..model.units import Q_, fmt

    P = results[0]["params"]
    rows, facts = [], {"params": P}
    for kind, stage, label in (("adam", 0, "普通 Adam"), ("zero1", 1, "ZeroRedundancyOptimizer(ZeRO-1)")):
        pred = zero_memory(P, ranks, stage, **FP32)
        want = pred.optim_state.to("B").magnitude
        got = [r[kind]["moments"] for r in results]
        total = [r[kind]["moments"] + r[kind]["param_bytes"] + r[kind]["grad_bytes"] for r in results]
        exact = all(g == want for g in got)
        rows.append(Row(
            f"{label}：每 rank 的 Adam 动量",
            f"{fmt(pred.optim_state, 'MB', 4)}({pred.optim_state.to('B').magnitude:.0f} B)",
            " / ".join(fmt(Q_(g, "B"), "MB", 4) for g in got),
            "逐字节相等" if exact else "不相等：张量无法平均分给各 rank", exact,
        ))
        rows.append(Row(
            f"{label}：参数 + 梯度 + 动量",
            fmt(pred.total, "MB", 4),
            " / ".join(fmt(Q_(t, "B"), "MB", 4) for t in total),
            "相等" if all(t == pred.total.to("B").magnitude for t in total) else "不相等",
            all(t == pred.total.to("B").magnitude for t in total),
        ))
        facts[kind] = {"predicted_moments": want, "moments": got, "predicted_total": pred.total.to("B").magnitude,
                       "total": total, "counters": [r[kind]["counters"] for r in results]}
    diff = max(r["max_abs_diff"] for r in results)
    rows.append(Row("训练后参数：ZeRO-1 与普通 Adam", "相同", f"最大绝对差 {fmt_diff(diff)}",
                    "一致" if diff <= 1e-6 else "不一致", diff <= 1e-6))
    facts["max_abs_diff"] = diff
    counters = facts["zero1"]["counters"]
    notes = (
        f"{opts['layers']} 层 {opts['width']}×{opts['width']} 的 fp32 线性层，P = {P} 个参数，{ranks} 个 rank，训练 {opts['steps']} 步。",
        "预测由 parallel_budget.zero_memory(P, dp=R, stage, param_bytes=4, grad_bytes=4, optim_bytes=8) 给出：纯 fp32 没有额外主副本，Adam 两个动量共 8 B/参数。",
        f"Adam 另有每个张量一个 step 计数器（ZeRO-1 下每 rank {' / '.join(map(str, counters))} B），可以忽略，不计入上表。",
        "ZeRO-1 只分摊优化器状态：参数和梯度每个 rank 仍是完整一份，所以总量远没有除以 R。",
    )
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
