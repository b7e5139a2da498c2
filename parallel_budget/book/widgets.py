"""ipywidgets recompute panels for the chapters, for use in JupyterLab.

Each ``*_panel()`` returns a :class:`Panel`: input widgets plus an HTML result
that is recomputed by calling the package whenever an input changes.  The
panels do no maths of their own.  Text fields take quantities with units
(``"2 GB"``, ``"25 Gb/s"``), so a bits-for-bytes slip or a wrong unit shows the
package's Chinese message instead of a number.

On the static site the chapters run these panels in hidden cells (so the build
tests them) and point readers to the in-page JavaScript calculators instead.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

from ..model.communication import ring_allreduce
from ..model.memory import zero_table
from ..model.parallelism import pipeline_bubble, pipeline_schedule, tp_allreduce
from ..model.steptime import step_time
from ..model.protocol import check_collectives
from ..model.units import fmt, fmt_percent
from ..model.update import REDUCTIONS, data_parallel_update

_STYLE = {"description_width": "11em"}
_LAYOUT = widgets.Layout(width="28em")


class Panel(widgets.VBox):
    """Inputs (``controls``, by argument name) above a result (``result``, an HTML widget)."""

    def __init__(self, title: str, controls: dict, render):
        self.controls = controls
        self.result = widgets.HTML()
        self._render = render
        super().__init__([widgets.HTML(f"<b>{html.escape(title)}</b>"), *controls.values(), self.result])
        for w in controls.values():
            w.observe(self.refresh, names="value")
        self.refresh()

    @property
    def values(self) -> dict:
        return {name: w.value for name, w in self.controls.items()}

    def refresh(self, _change=None) -> str:
        """Recompute from the current inputs; a bad input shows the package's message."""
        try:
            rows = self._render(**self.values)
            body = "".join(f"<tr><td>{html.escape(k)}</td><td><b>{html.escape(v)}</b></td></tr>" for k, v in rows)
            self.result.value = f"<table>{body}</table>"
        except ValueError as exc:
            self.result.value = f'<p style="color:#D55E00">输入有误：{html.escape(str(exc))}</p>'
        return self.result.value

    @property
    def ok(self) -> bool:
        return "输入有误" not in self.result.value


def _text(value, label):
    return widgets.Text(value=value, description=label, style=_STYLE, layout=_LAYOUT)


def _int(value, low, high, label):
    return widgets.BoundedIntText(value=value, min=low, max=high, description=label, style=_STYLE, layout=_LAYOUT)


def _float(value, label, step=0.1):
    return widgets.FloatText(value=value, step=step, description=label, style=_STYLE, layout=_LAYOUT)


def _numbers(text, arg):
    try:
        return [float(x) for x in str(text).replace(",", ",").split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"参数 {arg} 需要用逗号分隔的数字，收到 {text!r}。例如“2, 6”") from None


# ---------------------------------------------------------------- chapter 1

def _render_update(w, grads, lr, reduction):
    u = data_parallel_update(w, _numbers(grads, "grads"), lr, reduction)
    return [
        ("聚合后的梯度", f"{u.aggregated_grad:.6g}"),
        ("每个 rank 更新后的参数", ", ".join(f"{x:.6g}" for x in u.weights)),
        ("单进程全批次参考值", f"{u.reference:.6g}"),
        ("与单进程一致？", "是" if u.matches_reference else "否：检查求和/平均的约定"),
    ]


def update_panel(w=1.0, grads="2, 6", lr=0.1, reduction="mean") -> Panel:
    """Chapter 1: one data-parallel update; try ``reduction='sum'`` and ``'mean_twice'``."""
    controls = {
        "w": _float(w, "初始参数 w"),
        "grads": _text(grads, "各 rank 本地梯度"),
        "lr": _float(lr, "学习率 lr", 0.01),
        "reduction": widgets.Dropdown(options=[(v, k) for k, v in REDUCTIONS.items()], value=reduction,
                                      description="归约方式", style=_STYLE, layout=_LAYOUT),
    }
    return Panel("两个 rank，同一次更新", controls, _render_update)


# ---------------------------------------------------------------- chapter 2

def _render_ring(ranks, grad, bandwidth, compute_single, overlap):
    r = ring_allreduce(ranks, grad, bandwidth)
    s = step_time(compute_single, ranks, r.lower_bound, overlap)
    return [
        ("每 rank 发送（接收同样多）", fmt(r.send_per_rank)),
        ("全网发送总量（不是每 rank）", fmt(r.total_sent)),
        ("通信下界", fmt(r.lower_bound, digits=4)),
        ("暴露的通信", fmt(s.exposed_comm, digits=4)),
        ("步时", fmt(s.step, digits=4)),
        ("加速比", f"{s.speedup:.3g} 倍"),
        ("效率", fmt_percent(s.efficiency)),
    ]


def ring_panel(ranks=4, grad="2 GB", bandwidth="25 GB/s", compute_single="400 ms", overlap=0.0) -> Panel:
    """Chapter 2: ring all-reduce traffic and the step time it leads to."""
    controls = {
        "ranks": _int(ranks, 1, 1024, "rank 数 R"),
        "grad": _text(grad, "梯度总量 G"),
        "bandwidth": _text(bandwidth, "单向有效带宽"),
        "compute_single": _text(compute_single, "单卡计算时间"),
        "overlap": widgets.FloatSlider(value=overlap, min=0.0, max=1.0, step=0.05, description="可重叠比例",
                                       style=_STYLE, layout=_LAYOUT),
    }
    return Panel("ring all-reduce 与步时", controls, _render_ring)


# ---------------------------------------------------------------- chapter 3

def _render_zero(params, dp, device_memory):
    table = zero_table(params, dp)
    rows = [(row.name, fmt(row.total)) for row in table]
    stage = table.smallest_fitting_stage(device_memory)
    verdict = "都放不下：还需要 TP/PP 或 offload" if stage is None else table[stage].name
    rows.append((f"每卡 {device_memory} 时最低可行方案（只看常驻状态）", verdict))
    return rows


def zero_panel(params="1e9", dp=4, device_memory="8 GB") -> Panel:
    """Chapter 3: the four rows of the ZeRO table (resident model state only)."""
    controls = {
        "params": _text(params, "参数个数 P"),
        "dp": _int(dp, 1, 4096, "数据并行度 D"),
        "device_memory": _text(device_memory, "每卡可用显存"),
    }
    return Panel("ZeRO 每卡常驻模型状态", controls, _render_zero)


# ---------------------------------------------------------------- chapter 4

def _render_pipeline(stage_times, microbatches):
    times = [t.strip() for t in str(stage_times).replace(",", ",").split(",") if t.strip()]
    sched = pipeline_schedule(times, microbatches)
    equal = pipeline_bubble(len(times), microbatches)
    return [
        ("一步总时长", fmt(sched.makespan)),
        ("空闲比例（按给定阶段时间）", fmt_percent(sched.idle_fraction)),
        ("阶段均衡时的空闲比例 (p-1)/(m+p-1)", fmt_percent(equal.idle_fraction)),
    ]


def pipeline_panel(stage_times="10 ms, 10 ms, 10 ms, 10 ms", microbatches=8) -> Panel:
    """Chapter 4: pipeline fill/drain bubble and stage imbalance."""
    controls = {
        "stage_times": _text(stage_times, "各阶段每微批次时间"),
        "microbatches": _int(microbatches, 1, 1024, "微批次数 m"),
    }
    return Panel("流水线气泡", controls, _render_pipeline)


def _render_tp(batch, seq, hidden, tp, layers, bandwidth):
    c = tp_allreduce(batch, seq, hidden, tp, layers)
    one = ring_allreduce(tp, c.message, bandwidth)
    return [
        ("每次 all-reduce 的消息", fmt(c.message, "MB")),
        ("每层 all-reduce 次数（前向+反向）", str(c.allreduces_per_layer)),
        ("每 TP rank 每层发送", fmt(c.send_per_rank_per_layer, "MB")),
        ("每 TP rank 每步发送", fmt(c.send_per_rank_per_step)),
        ("每次 all-reduce 的传输下界", fmt(one.lower_bound)),
    ]


def tp_panel(batch=8, seq=2048, hidden=4096, tp=4, layers=32, bandwidth="100 GB/s") -> Panel:
    """Chapter 4: Megatron-style tensor-parallel all-reduce volume."""
    controls = {
        "batch": _int(batch, 1, 1 << 20, "微批次样本数 b"),
        "seq": _int(seq, 1, 1 << 22, "序列长度 s"),
        "hidden": _int(hidden, 1, 1 << 20, "隐藏维度 h"),
        "tp": _int(tp, 1, 1024, "张量并行度 t"),
        "layers": _int(layers, 1, 4096, "层数"),
        "bandwidth": _text(bandwidth, "单向有效带宽"),
    }
    return Panel("张量并行的层内通信", controls, _render_tp)


# ---------------------------------------------------------------- chapter 5

def _render_hang(**ranks):
    calls = [[c.strip() for c in str(text).replace(",", ",").split(",") if c.strip()] for text in ranks.values()]
    check = check_collectives(calls)
    return [("诊断", check.explain())]


def hang_panel(calls=("all_reduce, all_reduce, all_reduce", "all_reduce, all_reduce, all_reduce",
                      "all_reduce, all_reduce", "all_reduce, all_reduce, all_reduce")) -> Panel:
    """Chapter 5: type each rank's collectives in order; see where the group would hang."""
    controls = {f"rank{r}": _text(text, f"rank {r} 的集合通信") for r, text in enumerate(calls)}
    return Panel("各 rank 的集合通信序列", controls, _render_hang)
