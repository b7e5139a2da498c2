"""Lab 1: one DDP step equals one single-process step, unless the data or the scaling is wrong.

The model is the lesson's single weight ``w`` (start 1, learning rate 0.1) with
per-sample loss ``(w*x - y)**2 / 2``.  The data are chosen so that with a
``DistributedSampler`` the mean local gradients of the ranks are 2, 6, 10, ...
(2 and 6 for two ranks, as in the lesson).  Each variant runs one real DDP step
on gloo and compares the weight with

* the package's prediction, ``data_parallel_update(w0, <measured local grads>, lr, reduction)``;
* a single-process step on the whole intended global batch.

Variants: ``correct``; ``duplicated`` (no DistributedSampler: every rank reads
the same first samples); ``average_twice`` (DDP averages, the script divides by
R again); ``uneven_tail`` (the last global batch is one sample short, so the
ranks' local means weigh samples unequally); ``sum`` (a hand-written
all-reduce that sums and never divides).
"""

from __future__ import annotations

import sys

from .engine.report import Report, Row, fmt_diff
from .engine.cli import main
from .engine.runtime import Option

NAME = "two_rank_update"
TITLE = "实验 1：两个 rank 的一次更新 = 单进程的一次更新？"
VARIANTS = ("correct", "duplicated", "average_twice", "uneven_tail", "sum")
OPTIONS = {
    "variant": Option("all", "要运行的情形", choices=("all",) + VARIANTS),
    "lr": Option(0.1, "学习率", minimum=1e-6, maximum=10.0),
}
LABEL = {
    "correct": "正确：DistributedSampler + DDP",
    "duplicated": "错误 1：没有 DistributedSampler，样本重复",
    "average_twice": "错误 2：DDP 已平均，又除以 R",
    "uneven_tail": "错误 3：尾批不等大，各 rank 先各自平均",
    "sum": "错误 4：手写 all-reduce 求和，没有除以 R",
}
REDUCTION = {"correct": "mean", "duplicated": "mean", "average_twice": "mean_twice", "uneven_tail": "mean", "sum": "sum"}
W0 = 1.0
SAMPLES_PER_RANK = 2


def dataset(ranks: int, tail: bool = False):
    """(x, y) pairs; with x = 1 the gradient of sample i at w = 1 is 1 - y_i.

    Sample i belongs to rank i % R under DistributedSampler; rank r's two
    samples have gradients 2+4r-1 and 2+4r+1 (mean 2+4r).  ``tail`` drops the
    last sample, leaving the last rank one sample short.
    """
    grads = []
    for i in range(SAMPLES_PER_RANK * ranks):
        r, k = i % ranks, i // ranks
        grads.append(2 + 4 * r + (-1 if k == 0 else 1))
    if tail:
        grads = grads[:-1]
    return [(1.0, 1.0 - g) for g in grads]


def worker(ctx, opts) -> dict:
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler

    dist = ctx.dist
    R, rank = ctx.world_size, ctx.rank
    lr = opts["lr"]
    variants = VARIANTS if opts["variant"] == "all" else (opts["variant"],)

    class Scalar(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([W0], dtype=torch.float64))

        def forward(self, x):
            return self.w * x

    def loss_fn(model, batch):
        x = torch.tensor([b[0] for b in batch], dtype=torch.float64, device=ctx.device)
        y = torch.tensor([b[1] for b in batch], dtype=torch.float64, device=ctx.device)
        return ((model(x) - y) ** 2 / 2).mean()

    out = {}
    for v in variants:
        data = dataset(R, tail=(v == "uneven_tail"))
        if v == "duplicated":
            loader = DataLoader(data, batch_size=SAMPLES_PER_RANK, shuffle=False, collate_fn=list)
        elif v == "uneven_tail":
            loader = [[data[i] for i in range(rank, len(data), R)]]
        else:
            sampler = DistributedSampler(data, num_replicas=R, rank=rank, shuffle=False)
            loader = DataLoader(data, batch_size=SAMPLES_PER_RANK, sampler=sampler, collate_fn=list)
        local = next(iter(loader))

        # The local gradient, measured on a plain copy before any communication.
        probe = Scalar().to(ctx.device)
        (g_local,) = torch.autograd.grad(loss_fn(probe, local), probe.w)

        model = Scalar().to(ctx.device)
        if v == "sum":
            loss_fn(model, local).backward()
            dist.all_reduce(model.w.grad)  # sums; nobody divides by R
            stepper = model
        else:
            stepper = DDP(model)
            loss_fn(stepper, local).backward()  # DDP averages the gradients here
            if v == "average_twice":
                model.w.grad /= R
        with torch.no_grad():
            model.w -= lr * model.w.grad

        # One process, the whole intended global batch, one step.
        ref = Scalar().to(ctx.device)
        loss_fn(ref, data).backward()
        with torch.no_grad():
            ref.w -= lr * ref.w.grad
        out[v] = {
            "local_grad": g_local.item(),
            "samples": len(local),
            "w": model.w.detach().item(),
            "reference": ref.w.detach().item(),
        }
    return out


def summarize(results, opts, ranks) -> Report:
    from ..model.update import data_parallel_update

    lr = opts["lr"]
    rows, facts = [], {}
    for v in results[0]:
        per = [res[v] for res in results]
        grads = [p["local_grad"] for p in per]
        pred = data_parallel_update(W0, grads, lr, REDUCTION[v])
        weights = [p["w"] for p in per]
        ref = per[0]["reference"]
        spread = max(weights) - min(weights)
        diff_pred = max(abs(w - pred.weights[0]) for w in weights)
        diff_ref = max(abs(w - ref) for w in weights)
        same = diff_ref < 1e-12
        local = "、".join(f"{g:g}" for g in grads)
        counts = "/".join(str(p["samples"]) for p in per)
        rows.append(Row(
            LABEL[v],
            f"w = {pred.weights[0]:.6g}（本地梯度 {local},reduction={REDUCTION[v]!r}）",
            f"w = {weights[0]:.6g}；单进程参考 {ref:.6g}；差 {fmt_diff(diff_ref)}",
            ("与单进程一致" if same else "与单进程不同（这就是该错误的后果）") + f"；与包的预测差 {fmt_diff(diff_pred)}",
            same,
        ))
        facts[v] = {
            "local_grads": grads, "samples": counts, "weights": weights, "predicted": pred.weights[0],
            "reference": ref, "max_abs_diff_reference": diff_ref, "max_abs_diff_predicted": diff_pred,
            "max_abs_diff_ranks": spread,
        }
    notes = (
        f"起点 w = {W0:g}，学习率 {lr:g}，{ranks} 个 rank，每个 rank 的本地损失按样本取平均。",
        "“预测”列由 parallel_budget.data_parallel_update 根据实测的本地梯度算出；“实测”列是真实 DDP 一步之后的权重。",
        "样本重复和尾批不等大时，包的预测与 DDP 仍然一致：错的不是归约，而是每个 rank 拿到的数据。",
        "DistributedSampler 默认会把不够整除的数据用重复样本补齐，同样会让尾批的权重不均；drop_last 或按全局样本数缩放可以避免。",
    )
    return Report(TITLE, tuple(rows), notes, facts)


if __name__ == "__main__":
    main(sys.modules[__name__])
