"""The plan builder as an ipywidgets panel for JupyterLab (the site uses plan.js instead).

:func:`plan_panel` follows :class:`.widgets.Panel`: inputs by argument name, an
HTML result recomputed by :func:`parallel_budget.plan_budget` on every change,
the package's Chinese message on bad input.  The model shape is one of
:data:`parallel_budget.SHAPES`; bandwidths and memory are text with units
("25 GB/s", "200 Gb/s", "80 GB"), so bits and bytes are both accepted and the
verdict says which it read.  ``search_rows`` lists the fastest fitting splits
of ``devices`` from :func:`parallel_budget.search_plans`.
"""

from __future__ import annotations

import ipywidgets as widgets

from ..model.plan import SHAPES, plan_budget, search_plans
from ..model.units import fmt, fmt_percent
from .widgets import Panel, _float, _int, _text


def _time(q) -> str:
    return fmt(q, "s" if q.to("s").magnitude >= 1 else "ms")


def _kw(shape, global_batch, recompute, schedule, device_memory, intra_bw, inter_bw, peak_flops, mfu):
    return dict(**SHAPES[shape], global_batch=global_batch, recompute=recompute, schedule=schedule,
                device_memory=device_memory, intra_bw=intra_bw, inter_bw=inter_bw, peak_flops=peak_flops, mfu=mfu)


def _render(shape, global_batch, dp, tp, pp, zero_stage, micro_batch, recompute, schedule, device_memory,
            intra_bw, inter_bw, peak_flops, mfu, devices):
    kw = _kw(shape, global_batch, recompute, schedule, device_memory, intra_bw, inter_bw, peak_flops, mfu)
    b = plan_budget(**kw, dp=dp, tp=tp, pp=pp, zero_stage=zero_stage, micro_batch=micro_batch)
    m = b.memory
    rows = [
        ("每卡显存：状态 + 激活 + 临时", f"{fmt(m.states)} + {fmt(m.activations)} + {fmt(m.temporary)} = {fmt(m.total)}"),
        ("放得下吗", "放得下" if b.fits else "放不下"),
        ("步时：计算 / 暴露的通信 / 气泡", f"{_time(b.step)}：{_time(b.compute)} / {_time(b.exposed_comm)} / {_time(b.bubble)}"),
        ("效率", fmt_percent(b.efficiency)),
    ]
    rows += [(f"{c.name}（{c.ranks} 卡，{'节点内' if c.link == 'intra' else '跨节点'}）",
              f"每卡每步 {fmt(c.bytes)}，{_time(c.time)}") for c in b.comm]
    rows += [(f"结论 {i}", v) for i, v in enumerate(b.verdict, 1)]
    return rows + search_rows(devices, **kw)


def search_rows(devices, top=5, **kw) -> list:
    """The ``top`` fastest fitting splits of ``devices`` as (label, text) rows."""
    r = search_plans(devices=devices, **kw)
    rows = [(f"搜索 {devices} 张卡", f"试了 {r.candidates} 种切分，放得下 {len(r)} 种")]
    for i, p in enumerate(r.plans[:top], 1):
        rows.append((f"第 {i} 名", f"DP={p.dp} TP={p.tp} PP={p.pp} ZeRO-{p.zero_stage} 微批次 {p.micro_batch}："
                                   f"步时 {_time(p.step)}，每卡 {fmt(p.memory.total)}"))
    return rows


def plan_panel(shape="llama2-7b", global_batch=32, dp=16, tp=1, pp=1, zero_stage=2, micro_batch=1,
               recompute="selective", schedule="1f1b", device_memory="80 GB", intra_bw="150 GB/s",
               inter_bw="25 GB/s", peak_flops=312e12, mfu=0.4, devices=16) -> Panel:
    """A panel for one plan of a public model shape, with the search's best splits below."""
    dropdown = lambda options, value, label: widgets.Dropdown(options=options, value=value, description=label)  # noqa: E731
    controls = {
        "shape": dropdown(list(SHAPES), shape, "模型形状"),
        "global_batch": _int(global_batch, 1, 65536, "全局 batch"),
        "dp": _int(dp, 1, 4096, "DP"), "tp": _int(tp, 1, 4096, "TP"), "pp": _int(pp, 1, 4096, "PP"),
        "zero_stage": dropdown([0, 1, 2, 3], zero_stage, "ZeRO 阶段"),
        "micro_batch": _int(micro_batch, 1, 65536, "微批次大小"),
        "recompute": dropdown(["none", "selective", "full"], recompute, "重算"),
        "schedule": dropdown(["1f1b", "gpipe"], schedule, "流水线调度"),
        "device_memory": _text(device_memory, "每卡显存"),
        "intra_bw": _text(intra_bw, "节点内带宽"), "inter_bw": _text(inter_bw, "跨节点带宽（每卡）"),
        "peak_flops": _float(peak_flops, "峰值 FLOP/s", step=1e12), "mfu": _float(mfu, "MFU", step=0.05),
        "devices": _int(devices, 1, 4096, "搜索的卡数"),
    }
    return Panel("方案构建器：显存、通信与步时", controls, _render)
