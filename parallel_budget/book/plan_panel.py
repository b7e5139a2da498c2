"""The plan builder as an ipywidgets panel for JupyterLab (the site uses plan.js instead).

:func:`plan_panel` follows :class:`.widgets.Panel`: inputs by argument name, an
HTML result recomputed by :func:`parallel_budget.plan_budget` on every change,
the package's Chinese message on bad input; below it the three drawings of
:mod:`.planfigures` (timeline, memory bar, scaling curve) for the same plan.
Inputs come in groups, as on the site: model, batch, cluster, plan, and the
advanced ones folded.  Models and clusters are presets (:mod:`parallel_budget.model.presets`);
memory and bandwidths may be overridden as text with units ("80 GiB",
"200 Gb/s"), so bits and bytes are both accepted and the verdict says which it read.
``search_rows`` lists the fastest fitting splits of ``devices``.  A measured step (or tokens per second) gives
the HFU that reproduces it (:func:`parallel_budget.hfu_from_step`): the plan, its drawings and the verdict are
then those at that HFU, and the verdict marks HFU as measured.
"""

from __future__ import annotations

import ipywidgets as widgets

from ..model.hfufit import hfu_from_step
from ..model.plan import plan_budget
from ..model.plansearch import search_plans
from ..model.presets import CLUSTERS, MODELS
from ..model.scaling import plan_scaling
from ..model.units import fmt, fmt_percent
from . import planfigures, planlayout
from .widgets import Panel, _int, _QuantityText, _text

GROUPS = (("模型", ("model",)), ("batch", ("global_batch", "micro_batch")), ("集群", ("cluster", "device_memory", "inter_bw", "hbm_bw")),
          ("方案", ("dp", "tp", "pp", "zero_stage", "schedule", "recompute")),
          ("高级", ("overlap_param_gather", "overlap_grad_reduce", "grad_reduce_dtype", "logits", "devices", "dp_nccl", "step",
                   "tokens_per_s")))


def _kw(model, cluster, global_batch, recompute, schedule, device_memory, inter_bw, overlap_param_gather,
        overlap_grad_reduce, grad_reduce_dtype="bf16", hbm_bw="", logits=True, dp_nccl="") -> dict:
    kw = dict(model=model, cluster=cluster, global_batch=global_batch, recompute=recompute, schedule=schedule,
              overlap_param_gather=overlap_param_gather, overlap_grad_reduce=overlap_grad_reduce,
              grad_reduce_dtype=grad_reduce_dtype, logits=logits)
    for k, v in (("device_memory", device_memory), ("inter_bw", inter_bw), ("hbm_bw", hbm_bw)):
        if str(v).strip():
            kw[k] = v
    if str(dp_nccl).strip():  # nccl-tests output of the DP group: its fitted α and bus bandwidth
        kw["dp_nccl"] = dp_nccl
    return kw


def _render(model, cluster, global_batch, micro_batch, device_memory, inter_bw, dp, tp, pp, zero_stage, schedule,
            recompute, overlap_param_gather, overlap_grad_reduce, devices, grad_reduce_dtype="bf16", hbm_bw="",
            logits=True, dp_nccl="", step="", tokens_per_s=""):
    kw = _kw(model, cluster, global_batch, recompute, schedule, device_memory, inter_bw, overlap_param_gather,
             overlap_grad_reduce, grad_reduce_dtype, hbm_bw, logits, dp_nccl)
    split = dict(dp=dp, tp=tp, pp=pp, zero_stage=zero_stage, micro_batch=micro_batch)
    fit = _hfu_fit(step, tokens_per_s, kw, split)
    b = plan_budget(**kw, **split) if fit is None else fit.budget
    m = b.memory
    t_ = planlayout.t_
    rows = [
        ("每卡显存：状态 + 激活 + 临时缓冲 + 重算工作区（最后一个阶段另有 logits）",
         f"{fmt(m.states)} + {fmt(m.activations)} + {fmt(m.gather)} + {fmt(m.working)}（logits {fmt(m.logits)}）"
         f"，最多的一张卡 {fmt(m.total)}"),
        ("放得下吗", "放得下" if b.fits else "放不下"),
        ("步时：计算 / 暴露的通信 / 气泡", f"{t_(b.step.magnitude)}：{t_(b.compute.magnitude)} / "
                                      f"{t_(b.exposed_comm.magnitude)} / {t_(b.bubble.magnitude)}"),
        ("其中优化器步（按显存带宽）", t_(b.optimizer.magnitude)),
        ("效率 / MFU / HFU", f"{fmt_percent(b.efficiency)} / {fmt_percent(b.mfu)} / {fmt_percent(b.hfu)}"),
    ]
    rows += [(f"{c.name}（{c.what}，{c.ranks} 卡，{'节点内' if c.link == 'intra' else '跨节点'}）",
              f"每卡每步 {fmt(c.bytes)}，{c.calls} 次，{t_(c.time.magnitude)}，暴露 {t_(c.exposed.magnitude)}")
             for c in b.comm]
    if fit is not None:
        rows.append(("实测步时 → HFU / MFU", f"{t_(fit.step.magnitude)} → {fmt_percent(fit.hfu)} / {fmt_percent(fit.mfu)}"))
    rows += [(f"结论 {i}", v) for i, v in enumerate(b.verdict, 1)]
    return rows + search_rows(devices, **kw), b, plan_scaling(**kw, **split)


def _hfu_fit(step, tokens_per_s, kw, split):
    """hfu_from_step of the panel's measured step ("8.2 s") and/or tokens per second, or None when both are empty."""
    step, tokens = str(step).strip(), str(tokens_per_s).strip()
    if not (step or tokens):
        return None
    try:
        n = float(tokens) if tokens else None
    except ValueError:
        raise ValueError(f"参数 tokens_per_s 需要一个正数（每秒词元数，如 20000），收到 {tokens!r}。") from None
    return hfu_from_step(step or None, tokens_per_s=n, **kw, **split)


def search_rows(devices, top=5, **kw) -> list:
    """The ``top`` fastest fitting splits of ``devices`` as (label, text) rows."""
    r = search_plans(devices=devices, **kw)
    rows = [(f"搜索 {devices} 张卡", f"试了 {r.candidates} 种切分，放得下 {len(r)} 种")]
    for i, p in enumerate(r[:top], 1):
        rows.append((f"第 {i} 名", f"DP={p.dp} TP={p.tp} PP={p.pp} ZeRO-{p.zero_stage} 微批次 {p.micro_batch}："
                                   f"步时 {planlayout.t_(p.step.magnitude)}，每卡 {fmt(p.memory.total)}"))
    return rows


class PlanPanel(Panel):
    """:class:`.widgets.Panel` with grouped inputs (advanced folded) and the three drawings below the result."""

    def __init__(self, title, controls, render, drawings=True):
        self.drawings = widgets.Output()
        self._draw = drawings
        self._last = None
        super().__init__(title, controls, self._rows(render))
        boxes = [widgets.VBox([controls[k] for k in keys]) for _, keys in GROUPS]
        folded = widgets.Accordion(children=[boxes[-1]], titles=(GROUPS[-1][0],))
        self.children = (self.children[0], *[widgets.VBox([widgets.HTML(f"<b>{name}</b>"), box])
                                             for (name, _), box in zip(GROUPS[:-1], boxes[:-1])],
                         folded, self.result, self.drawings)

    def _rows(self, render):
        def rows(**values):
            out, self._last, self._scaling = render(**values)
            return out
        return rows

    def refresh(self, _change=None) -> str:
        self._last = None
        value = super().refresh(_change)
        if hasattr(self, "drawings"):
            self._show()
        return value

    def _show(self) -> None:
        import io

        from IPython.display import Image

        self.drawings.outputs = ()
        if not (self._draw and self._last is not None):
            return
        for fig in (planfigures.timeline_figure(planlayout.timeline_layout(self._last)),
                    planfigures.memory_figure(planlayout.memory_layout(self._last)),
                    planfigures.scaling_figure(planlayout.scaling_layout(self._scaling))):
            png = io.BytesIO()
            fig.savefig(png, format="png")
            self.drawings.append_display_data(Image(data=png.getvalue()))


def plan_panel(model="llama2-7b", cluster="a100-40gb", global_batch=32, micro_batch=1, device_memory="", inter_bw="",
               dp=16, tp=1, pp=1, zero_stage=2, schedule="1f1b", recompute="none", overlap_param_gather=False,
               overlap_grad_reduce=True, devices=16, drawings=True, grad_reduce_dtype="bf16", hbm_bw="",
               logits=True, dp_nccl="", step="", tokens_per_s="") -> Panel:
    """A panel for one plan of a preset model and cluster, the search's best splits and the three drawings."""
    def dropdown(options, value, label):
        return widgets.Dropdown(options=options, value=value, description=label)

    controls = {
        "model": dropdown(list(MODELS), model, "模型预设"),
        "global_batch": _int(global_batch, 1, 65536, "全局 batch（序列数）"),
        "micro_batch": _int(micro_batch, 1, 65536, "微批次大小"),
        "cluster": dropdown(list(CLUSTERS), cluster, "集群预设"),
        "device_memory": _text(device_memory, "每卡显存（留空按预设）"),
        "inter_bw": _text(inter_bw, "跨节点带宽，每卡（留空按预设）"),
        "dp": _int(dp, 1, 4096, "DP"), "tp": _int(tp, 1, 4096, "TP"), "pp": _int(pp, 1, 4096, "PP"),
        "zero_stage": dropdown([0, 1, 2, 3], zero_stage, "ZeRO 阶段"),
        "schedule": dropdown(["1f1b", "gpipe", "interleaved", "interleaved_zb", "zbv"], schedule, "流水线调度"),
        "recompute": dropdown(["none", "selective", "full"], recompute, "重算"),
        "overlap_param_gather": widgets.Checkbox(value=overlap_param_gather, description="参数 all-gather 与下一步前向重叠"),
        "overlap_grad_reduce": widgets.Checkbox(value=overlap_grad_reduce, description="梯度归约跟在反向后面"),
        "devices": _int(devices, 1, 4096, "搜索的卡数"),
        "grad_reduce_dtype": dropdown(["bf16", "fp32"], grad_reduce_dtype, "梯度归约精度"),
        "hbm_bw": _text(hbm_bw, "显存带宽（留空按预设）"),
        "logits": widgets.Checkbox(value=logits, description="计入最后一个阶段的 logits"),
        "dp_nccl": widgets.Textarea(value=dp_nccl, description="DP 组 nccl-tests 输出（可留空）",
                                    style={"description_width": "initial"}, layout=widgets.Layout(width="100%")),
        "step": _QuantityText(step, "实测步时（可留空）", "time"),
        "tokens_per_s": _text(tokens_per_s, "实测每秒词元数（可留空）"),
    }
    return PlanPanel("方案构建器：显存、通信与一步的时间线", controls, _render, drawings)
