"""ipywidgets recompute panels for the chapters, for use in JupyterLab.

Each ``*_panel()`` returns a :class:`Panel`: input widgets plus an HTML result
that is recomputed by calling the package whenever an input changes.  The
panels do no maths of their own.  Text fields take quantities with units
(``"2 GB"``, ``"25 Gb/s"``), so a bits-for-bytes slip or a wrong unit shows the
package's Chinese message instead of a number; a field left without its unit
is refused (a bare ``25`` would silently be 25 B/s).  A message names the field
as the panel labels it (``“单向有效带宽”``), never the package's function and
argument names.

A panel offers what its chapter's calculator on the site offers (the prose names
those controls): the ring panel has the backward/forward ratio and the last
bucket, the ZeRO panel each stage's per-rank traffic.

On the static site the chapters run these panels in hidden cells (so the build
tests them) and point readers to the in-page JavaScript calculators instead.
"""

from __future__ import annotations

import html
import re

import ipywidgets as widgets

from ..model.communication import ring_allreduce
from ..model.memory import zero_communication, zero_table
from ..model.parallelism import pipeline_bubble, pipeline_schedule, tp_allreduce
from ..model.protocol import check_collectives
from ..model.steptime import step_time
from ..model.units import KINDS, fmt, fmt_percent
from ..model.update import REDUCTIONS, data_parallel_update

_STYLE = {"description_width": "13em"}
_LAYOUT = widgets.Layout(width="30em")
_BARE_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
# "ring_allreduce() 的参数 bandwidth" or "参数 bandwidth": the package's way to name an argument.
_ARGUMENT = re.compile(r"(?:[\w.]+\(\) 的)?参数 (\w+) ?")
# The package also accepts a bare number in SI units; a panel's field does not (see _require_units).
_BARE_NUMBER_ADVICE = re.compile(r"[;；]也可给纯数字[,，]按 \S+ 理解")


class Head(tuple):
    """A header row of a panel's result table."""


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
        """Recompute from the current inputs; a bad input shows the package's message in the panel's words."""
        try:
            _require_units(self.controls)
            self.result.value = _table(self._render(**self.values))
        except ValueError as exc:
            message = in_panel_words(str(exc), self.controls)
            self.result.value = f'<p style="color:#D55E00">输入有误：{html.escape(message)}</p>'
        return self.result.value

    @property
    def ok(self) -> bool:
        return "输入有误" not in self.result.value


def _table(rows) -> str:
    def cells(row, tag):
        return "".join(f"<{tag}>{html.escape(str(v))}</{tag}>" for v in row)

    body = []
    for row in rows:
        if isinstance(row, Head):
            body.append(f"<tr>{cells(row, 'th')}</tr>")
        else:
            label, *values = row
            body.append(f"<tr><td>{html.escape(label)}</td>"
                        + "".join(f"<td><b>{html.escape(v)}</b></td>" for v in values) + "</tr>")
    return f"<table>{''.join(body)}</table>"


def in_panel_words(message: str, controls: dict) -> str:
    """The package's message with each argument it names replaced by that field's label (“单向有效带宽”), and
    without its advice that a bare number is read in SI units (a panel's field needs the unit)."""

    def label(m):
        w = controls.get(m.group(1))
        return f"“{w.description}”" if w is not None else f"参数 {m.group(1)}"

    return _BARE_NUMBER_ADVICE.sub("", _ARGUMENT.sub(label, message))


class _QuantityText(widgets.Text):
    """A text field for a quantity of ``kind`` ('bytes', 'bandwidth', 'time'): it must carry its unit."""

    def __init__(self, value, label, kind):
        super().__init__(value=value, description=label, placeholder=f"例如 {_example(kind)}", style=_STYLE,
                         layout=_LAYOUT)
        self.kind = kind


def _example(kind: str) -> str:
    return KINDS[kind]["example"].strip('"')


def _require_units(controls: dict) -> None:
    for name, w in controls.items():
        if isinstance(w, _QuantityText) and _BARE_NUMBER.match(str(w.value)):
            raise ValueError(f"参数 {name} 要写上单位，收到 {w.value!r}。例如 {_example(w.kind)}")


def _text(value, label):
    return widgets.Text(value=value, description=label, style=_STYLE, layout=_LAYOUT)


def _int(value, low, high, label):
    return widgets.BoundedIntText(value=value, min=low, max=high, description=label, style=_STYLE, layout=_LAYOUT)


def _float(value, label, step=0.1):
    return widgets.FloatText(value=value, step=step, description=label, style=_STYLE, layout=_LAYOUT)


def _items(text) -> list:
    """Items of a list typed with ASCII or full-width commas (or 、)."""
    return [x.strip() for x in re.split(r"[,，、]", str(text)) if x.strip()]


def _numbers(text, arg):
    try:
        return [float(x) for x in _items(text)]
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

def _render_ring(ranks, grad, bandwidth, compute_single, overlap, backward_ratio, last_bucket):
    r = ring_allreduce(ranks, grad, bandwidth)
    # The site's calculator takes the same ratio: backward = ratio x forward, so backward's share is r/(1+r).
    s = step_time(compute_single, ranks, r.lower_bound, overlap, backward_ratio / (1 + backward_ratio), last_bucket)
    return [
        ("每 rank 发送（接收同样多）", fmt(r.send_per_rank)),
        ("全网发送总量（不是每 rank）", fmt(r.total_sent)),
        ("通信下界", fmt(r.lower_bound, digits=4)),
        ("每卡反向（能藏通信的窗口）", fmt(s.backward, digits=4)),
        ("藏住的通信", fmt(s.hidden_comm, digits=4)),
        ("暴露的通信", fmt(s.exposed_comm, digits=4)),
        ("步时", fmt(s.step, digits=4)),
        ("加速比", f"{s.speedup:.3g} 倍"),
        ("效率", fmt_percent(s.efficiency)),
    ]


def ring_panel(ranks=4, grad="2 GB", bandwidth="25 GB/s", compute_single="400 ms", overlap=0.0,
               backward_ratio=2.0, last_bucket="0 ms") -> Panel:
    """Chapter 2: ring all-reduce traffic and the step time it leads to (the site's ring calculator)."""
    controls = {
        "ranks": _int(ranks, 1, 100000, "rank 数 R"),
        "grad": _QuantityText(grad, "梯度总量 G", "bytes"),
        "bandwidth": _QuantityText(bandwidth, "单向有效带宽", "bandwidth"),
        "compute_single": _QuantityText(compute_single, "单卡计算时间", "time"),
        "overlap": widgets.FloatSlider(value=overlap, min=0.0, max=1.0, step=0.05, description="可重叠比例",
                                       style=_STYLE, layout=_LAYOUT),
        "backward_ratio": widgets.BoundedFloatText(value=backward_ratio, min=0.0, max=1000.0, step=0.5,
                                                   description="反向耗时是前向的几倍", style=_STYLE, layout=_LAYOUT),
        "last_bucket": _QuantityText(last_bucket, "最后一个桶的通信时间", "time"),
    }
    return Panel("ring all-reduce 与步时", controls, _render_ring)


# ---------------------------------------------------------------- chapter 3

def _render_zero(params, dp, device_memory):
    table = zero_table(params, dp)
    rows = [Head(("方案", "每卡常驻模型状态", "每 rank 每步发送", "与 DDP 相比"))]
    for row in table:
        c = zero_communication(params, dp, row.stage)
        relative = "—" if c.relative_to_ddp is None else f"{c.relative_to_ddp:.3g} 倍"
        rows.append((row.name, fmt(row.total), fmt(c.send_per_rank), relative))
    stage = table.smallest_fitting_stage(device_memory)
    verdict = "都放不下：还需要 TP/PP 或 offload" if stage is None else table[stage].name
    rows.append((f"每卡 {device_memory} 时最低可行方案（只看常驻状态）", verdict))
    return rows


def zero_panel(params="1e9", dp=4, device_memory="8 GB") -> Panel:
    """Chapter 3: the four rows of the ZeRO table (resident model state) and each one's per-rank traffic."""
    controls = {
        "params": _text(params, "参数个数 P"),
        "dp": _int(dp, 1, 4096, "数据并行度 D"),
        "device_memory": _QuantityText(device_memory, "每卡可用显存", "bytes"),
    }
    return Panel("ZeRO 每卡常驻模型状态与通信", controls, _render_zero)


# ---------------------------------------------------------------- chapter 4

def _render_pipeline(stage_times, microbatches):
    times = _items(stage_times)
    bare = [t for t in times if _BARE_NUMBER.match(t)]
    if bare:
        raise ValueError(f"参数 stage_times 的每个时间都要写上单位，收到 {bare[0]!r}。例如 10 ms, 10 ms, 15 ms")
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
        "bandwidth": _QuantityText(bandwidth, "单向有效带宽", "bandwidth"),
    }
    return Panel("张量并行的层内通信", controls, _render_tp)


# ---------------------------------------------------------------- chapter 5

def _render_hang(**ranks):
    check = check_collectives([_items(text) for text in ranks.values()])
    return [("诊断", check.explain())]


def hang_panel(calls=("all_reduce, all_reduce, all_reduce", "all_reduce, all_reduce, all_reduce",
                      "all_reduce, all_reduce", "all_reduce, all_reduce, all_reduce")) -> Panel:
    """Chapter 5: type each rank's collectives in order; see where the group would hang."""
    controls = {f"rank{r}": _text(text, f"rank {r} 的集合通信") for r, text in enumerate(calls)}
    return Panel("各 rank 的集合通信序列", controls, _render_hang)
