"""Lab 11: GPipe vs 1F1B with torch.distributed.pipelining -- bubble, microbatches held, the schedule that ran.

Every rank is one stage (``PipelineStage``) of a ``ranks``-stage pipeline; one
training step of ``microbatches`` microbatches runs with ``ScheduleGPipe`` and
then with ``Schedule1F1B``, real forward and backward through autograd, real
activations and gradients sent between the stages.  A stage is a linear layer
and ``tanh`` followed by a custom autograd function that stands for the
accelerator's compute: it sleeps ``forward_ms`` in forward and ``backward_ms``
in backward (a 2-core laptop cannot run four CPU-bound stages side by side; the
lab is about the schedule, not about the CPU).  It also records when each
forward and backward ran.  A saved-tensor hook counts the activation bytes that
autograd keeps for backward, live, on every stage.

From the time stamps each stage's order of actions and its idle share are
measured, and the most microbatches it held (forward done, backward not yet) is
derived from that order (a row without a tick: the saved-tensor bytes are the
independent check of what a stage holds); the
package predicts them with ``schedule.pipeline_order``/``pipeline_timeline``,
``pipeline_bubble(p, m)`` and ``pipeline_in_flight(p, m, schedule)``.  The
schedule that ran is drawn from the time stamps beside the predicted one.
The gradients of both schedules are compared with the whole model run on the
whole batch in one process.
"""

from __future__ import annotations

import sys
import time

from .engine.cli import main
from .engine.report import Report, Row, fmt_diff
from .engine.runtime import Option, quiet_torch_warnings

NAME = "pipeline_schedule"
TITLE = "实验 11：torch.distributed.pipelining 的 GPipe 与 1F1B：气泡、每阶段持有的微批次、实际的时间线"
DEFAULT_RANKS = 4
MAX_STAGES = 8
OPTIONS = {
    "stages": Option(0, "流水线阶段数 p（每个进程一个阶段；0 表示等于进程数）", minimum=0, maximum=MAX_STAGES),
    "microbatches": Option(8, "微批次数 m（1F1B 要求 m ≥ p）", minimum=1, maximum=32),
    "forward_ms": Option(20.0, "每个阶段一次前向的时长（毫秒，用 sleep 代表加速器在算）", minimum=2.0, maximum=500.0),
    "backward_ms": Option(40.0, "每个阶段一次反向的时长（毫秒）", minimum=2.0, maximum=1000.0),
}
STRESS_OPTIONS = {"forward_ms": 2.0, "backward_ms": 4.0, "microbatches": 4}  # the 20x stress: shorter waits
SCHEDULES = (("gpipe", "GPipe"), ("1f1b", "1F1B"))
HIDDEN, ROWS = 32, 2  # stage width, rows per microbatch
BUBBLE_TOL = 0.08  # measured idle share within this of (p-1)/(m+p-1): scheduling and send/recv overhead
TOL = 1e-5


def validate(opts, ranks: int) -> None:
    p = opts["stages"] or ranks
    if opts["stages"] and opts["stages"] != ranks:
        raise ValueError(
            f"实验 pipeline_schedule 的选项 stages={opts['stages']} 与进程数 ranks={ranks} 不符：每个进程正好是一个阶段。"
            f"可接受：stages=0（等于进程数）或 stages={ranks}；要 {opts['stages']} 个阶段，就用 ranks={opts['stages']} 启动，"
            f"例如 run_lab(\"pipeline_schedule\", ranks={min(max(opts['stages'], 2), MAX_STAGES)})"
        )
    if not 2 <= p <= MAX_STAGES:
        raise ValueError(
            f"实验 pipeline_schedule 需要 2 到 {MAX_STAGES} 个阶段（每个进程一个），收到 ranks={ranks}。"
            "例如 run_lab(\"pipeline_schedule\", ranks=4)"
        )
    if opts["microbatches"] < p:
        raise ValueError(
            f"实验 pipeline_schedule 的选项 microbatches={opts['microbatches']} 小于阶段数 {p}：PyTorch 的 Schedule1F1B "
            f"要求微批次数不少于阶段数。可接受：{p} 到 32，例如 microbatches={2 * p}"
        )


def _stage_module(torch, stage: int, record: dict, now, fwd: float, bwd: float):
    class Busy(torch.autograd.Function):
        """Identity whose forward and backward each take a fixed time (the accelerator at work)."""

        @staticmethod
        def forward(ctx_, x):
            t = now()
            time.sleep(max(0.0, fwd - (now() - t)))
            record["F"].append((t, now()))
            return x.clone()

        @staticmethod
        def backward(ctx_, g):
            t = now()
            time.sleep(max(0.0, bwd - (now() - t)))
            record["B"].append((t, now()))
            return g

    class Stage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(HIDDEN, HIDDEN)

        def forward(self, x):
            return Busy.apply(torch.tanh(self.lin(x)))

    torch.manual_seed(stage)
    return Stage()


class _Held:
    """What autograd keeps of one saved activation; its death (after backward) lowers the live count."""

    __slots__ = ("tensor", "meter", "size")

    def __init__(self, tensor, meter, size):
        self.tensor, self.meter, self.size = tensor, meter, size
        meter["live"] += size
        meter["peak"] = max(meter["peak"], meter["live"])

    def __del__(self):
        self.meter["live"] -= self.size


def _activation_meter(torch, module, meter):
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}

    def pack(t):
        if t.untyped_storage().data_ptr() in params:  # a weight, not an activation
            return t
        size = t.numel() * t.element_size()
        meter["total"] += size
        return _Held(t, meter, size)

    def unpack(h):
        return h.tensor if isinstance(h, _Held) else h

    return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def worker(ctx, opts) -> dict:
    import torch
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    quiet_torch_warnings()
    p, i, m = ctx.world_size, ctx.rank, opts["microbatches"]
    fwd, bwd = opts["forward_ms"] / 1e3, opts["backward_ms"] / 1e3
    g = torch.Generator().manual_seed(1)
    x = torch.randn(m * ROWS, HIDDEN, generator=g).to(ctx.device)
    y = torch.randn(m * ROWS, HIDDEN, generator=g).to(ctx.device)

    def loss_fn(out, target):
        return (out - target).square().mean()

    # The whole model on the whole batch in one process: every rank builds it (it is tiny).
    whole = torch.nn.Sequential(*[_stage_module(torch, s, {"F": [], "B": []}, ctx.now, 0.0, 0.0) for s in range(p)])
    whole.to(ctx.device)
    loss_fn(whole(x), y).backward()
    want = [q.grad for q in whole[i].parameters()]

    out = {"runs": {}}
    for key, cls in ((k, {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[k]) for k, _ in SCHEDULES):
        record = {"F": [], "B": []}
        module = _stage_module(torch, i, record, ctx.now, fwd, bwd).to(ctx.device)
        # Shapes given up front (no shape-inference round); a received activation needs its gradient sent back.
        def example(grad=False):
            return torch.empty(ROWS, HIDDEN, device=ctx.device, requires_grad=grad)

        stage = PipelineStage(module, i, p, ctx.device, input_args=(example(i > 0),), output_args=example(),
                              input_grads=(example() if i > 0 else None,), output_grads=example())
        schedule = cls(stage, n_microbatches=m, loss_fn=loss_fn)
        meter = {"live": 0, "peak": 0, "total": 0}
        ctx.dist.barrier()
        with _activation_meter(torch, module, meter):
            losses = []
            if i == 0:
                schedule.step(x)
            elif i == p - 1:
                schedule.step(target=y, losses=losses)
            else:
                schedule.step()
        ctx.dist.barrier()
        per_mb = meter["total"] // m  # every microbatch saves the same tensors
        actions = sorted([("F", j, s, e) for j, (s, e) in enumerate(record["F"])]
                         + [("B", j, s, e) for j, (s, e) in enumerate(record["B"])], key=lambda a: a[2])
        diff = max(float((q.grad - w).abs().max()) for q, w in zip(module.parameters(), want))
        out["runs"][key] = {"actions": actions, "peak_bytes": meter["peak"], "bytes_per_microbatch": per_mb,
                            "grad_diff": diff}
    return out


def _lanes(actions_per_stage) -> dict:
    return {f"阶段 {s}": acts for s, acts in enumerate(actions_per_stage)}


def summarize(results, opts, ranks) -> Report:
    from ..model.parallelism import pipeline_bubble, pipeline_in_flight
    from ..model.pipeline import pipeline_timeline
    from ..model.schedule import in_flight, pipeline_order
    from ..model.units import Q_, fmt, fmt_percent
    from .engine.gantt import draw

    p, m = ranks, opts["microbatches"]
    f_ms, b_ms = opts["forward_ms"], opts["backward_ms"]
    bubble = pipeline_bubble(p, m)
    rows, facts, figures = [], {"runs": {}, "bubble": bubble.idle_fraction}, []
    for key, label in SCHEDULES:
        runs = [r["runs"][key] for r in results]
        acts = [[tuple(a) for a in r["actions"]] for r in runs]
        order = tuple(tuple((stage, a[0], a[1]) for a in st) for stage, st in enumerate(acts))
        want_order = pipeline_order(key, p, m)
        ok = order == want_order
        rows.append(Row(f"{label}：每个阶段的执行顺序", "与 pipeline_order 相同" + ("（先做完 m 次前向）" if key == "gpipe"
                        else "（stage i 先做 p−i 次前向，再一反一正）"),
                        "相同" if ok else "不同：" + "；".join(" ".join(k + str(j) for _, k, j in st) for st in order),
                        "一致" if ok else "不一致", ok))
        t0 = min(a[2] for st in acts for a in st)
        makespan = max(a[3] for st in acts for a in st) - t0
        busy = [sum(a[3] - a[2] for a in st) for st in acts]
        idle = 1 - sum(busy) / (p * makespan)
        ok = abs(idle - bubble.idle_fraction) <= BUBBLE_TOL
        rows.append(Row(f"{label}：所有阶段的空闲比例（气泡）", f"{fmt_percent(bubble.idle_fraction)} = (p−1)/(m+p−1)，p={p}，m={m}",
                        f"{fmt_percent(idle)}（一步 {makespan * 1e3:.0f} ms）",
                        f"相差 {abs(idle - bubble.idle_fraction) * 100:.2g} 个百分点", ok))
        # Derived, not measured: in_flight() of the order the first row already compared with pipeline_order.
        # It adds no evidence and gets no tick; the saved-tensor bytes below are the independent measurement.
        held = [in_flight(st) for st in order]
        pred = pipeline_in_flight(p, m, key)
        same = tuple(held) == pred.per_stage
        rows.append(Row(f"{label}：每个阶段最多持有的微批次（阶段 0 … {p - 1}，由实测顺序推出）",
                        f"{' / '.join(map(str, pred.per_stage))}" + ("（都是 m）" if key == "gpipe" else "（min(p−i, m)，不超过 p）"),
                        " / ".join(map(str, held)),
                        ("相同" if same else "不同") + "；推导，不是独立测量：由第一行的执行顺序数出，检验看下一行的激活字节",
                        None))
        per_mb = runs[0]["bytes_per_microbatch"]
        pred_b = pipeline_in_flight(p, m, key, activation_per_microbatch=Q_(per_mb, "B"))
        got_b = runs[0]["peak_bytes"]
        ok = got_b == pred_b.activations.to("B").magnitude and per_mb > 0
        rows.append(Row(f"{label}：阶段 0 为反向保存的激活峰值", f"{pred_b.peak} × {per_mb} B = {fmt(pred_b.activations, 'kB', 4)}",
                        f"{fmt(Q_(got_b, 'B'), 'kB', 4)}（saved-tensor 钩子实时计数，独立测量）", "一致" if ok else "不一致", ok))
        diff = max(r["grad_diff"] for r in runs)
        rows.append(Row(f"{label}：各阶段的梯度 vs 单进程整模型", "相同（只差浮点求和顺序）", f"最大绝对差 {fmt_diff(diff)}",
                        "一致" if diff < TOL else "不一致", diff < TOL))
        timeline = pipeline_timeline(p, m, key, Q_(f_ms, "ms"), Q_(b_ms, "ms"))
        unit = f_ms / 2e3
        predicted = {k: [(a.kind, a.microbatch, a.start, a.end) for a in st] for k, st in
                     zip(_lanes(range(p)), timeline.actions)}
        figures.append(draw(f"{label}，预测（pipeline_timeline，一步 {fmt(timeline.makespan, 'ms', 3)}）：", predicted, 0.0, unit))
        figures.append(draw(f"{label}，实测（各阶段的时间戳，一步 {makespan * 1e3:.0f} ms）：", _lanes(acts), t0, unit))
        facts["runs"][key] = {"order_ok": order == want_order, "idle_fraction": idle, "makespan": makespan,
                              "predicted_makespan": timeline.makespan.to("s").magnitude, "in_flight": held,
                              "predicted_in_flight": list(pred.per_stage), "peak_bytes": got_b,
                              "bytes_per_microbatch": per_mb, "grad_diff": diff}
    figure = "\n\n".join(figures) + (f"\n（每个字符 {f_ms / 2:g} ms；F3 是微批次 3 的前向，B3== 是它的反向，. 是空闲）")
    notes = (
        f"{p} 个阶段（每个进程一个 PipelineStage），{m} 个微批次，每个微批次 {ROWS} 行；一次前向 {f_ms:g} ms、一次反向 {b_ms:g} ms。",
        "阶段的计算是真的（线性层、tanh、autograd 反向、阶段之间真实发送激活和梯度），时长则用 sleep 代表加速器在算："
        "两核的笔记本跑不了四个同时满负荷的 CPU 阶段，这个实验检验的是调度，不是算力。",
        "持有的微批次：某阶段做完一个微批次的前向、还没做完它的反向，它的激活就得留着。GPipe 先做完全部 m 次前向，"
        "每个阶段都要留 m 份；1F1B 的阶段 i 只先做 p−i 次前向，之后一反一正，最多留 p−i 份。激活字节由 autograd 的 "
        "saved_tensors_hooks 实时计数，不含权重。表中“持有的微批次”一行只是把实测的执行顺序再数一遍，是推导，不打 ✓；"
        "独立的测量是激活字节那一行：峰值字节 = 持有的份数 × 每份字节。",
        f"两种调度的气泡相同，都是 (p−1)/(m+p−1)；实测还包含发送、接收与进程调度的开销，允许相差 {BUBBLE_TOL * 100:g} 个百分点。",
        "时间戳来自同一台机器的单调时钟；多台机器上各自的时钟不可比，时间线只在单机上画得准。",
    )
    return Report(TITLE, tuple(rows), notes, facts, figure=figure)


if __name__ == "__main__":
    main(sys.modules[__name__])
