"""Exposed DP communication against tokens per microbatch, the closed-form threshold marked (chapter 6, builder).

:func:`overlap_layout` sweeps the tokens of one microbatch (the sequence length,
micro_batch kept) of a plan from a quarter of its threshold
(:func:`parallel_budget.model.overlapcriteria.plan_threshold`) to four times it and
reads the exposed DP communication of the gradient phase off each step's
timeline (ZeRO-1/2's end-of-step parameter all-gather, exposed at any batch, is
left out).  ``book/_static/calc/nccltests.js`` computes the same layout
(held to it by ``tests/vectors/nccltests.json``); :func:`overlap_figure` draws it.
"""

from __future__ import annotations

import math

from ..model import plan as _plan
from ..model.overlapcriteria import plan_threshold
from .figures import MIN_FONT_PT, PALETTE, _done, _new
from .planfigures import PHONE_WIDTH, _wrap

POINTS = 25


def _gradient_exposed(rows, stage: int, gather_overlapped: bool) -> float:
    """Exposed seconds of the DP rows, less ZeRO-1/2's end-of-step all-gather (exposed whatever the batch)."""
    return sum(r[10] for r in rows if r[3] == "dp" and not (stage in (1, 2) and r[1] == "DP all-gather"
                                                              and not gather_overlapped))


def self_consistent_threshold(b) -> float:
    """The threshold in tokens when the sequence is what varies: attention FLOPs grow with it (a fixed point)."""
    th = plan_threshold(b).tokens
    for _ in range(20):
        th = plan_threshold(b, seq=th / b.micro_batch).tokens
    return th


def overlap_layout(b, points: int = POINTS) -> dict:
    """{threshold, tokens: [...], exposed: [...] (s), stage, dp} of plan ``b``; empty lists when dp = 1."""
    s = dict(b.settings)
    if b.dp == 1:
        return {"threshold": None, "tokens": [], "exposed": [], "stage": b.zero_stage, "dp": 1}
    th = self_consistent_threshold(b)
    tokens, exposed = [], []
    for i in range(points):
        seq = max(1, math.floor(th * 2 ** (-2 + 4 * i / (points - 1)) / b.micro_batch + 0.5))
        if tokens and seq * b.micro_batch == tokens[-1]:
            continue
        c = _plan._time({**s, "seq": seq}, b.dp, b.tp, b.pp, b.zero_stage, b.micro_batch)
        tokens.append(seq * b.micro_batch)
        exposed.append(_gradient_exposed(c["rows"], b.zero_stage, s["overlap_param_gather"]))
    return {"threshold": th, "tokens": tokens, "exposed": exposed, "stage": b.zero_stage, "dp": b.dp}


def overlap_figure(layouts, title: str = "暴露的 DP 梯度通信：随每个微批次的词元数", phone: bool = False):
    """One line per ``(label, overlap_layout)``, each threshold a dashed vertical line in its colour.

    ``phone``: :data:`.planfigures.PHONE_WIDTH` wide and taller, every other power of two on the axis, the legend
    below the axes and the title on two lines (:func:`.planfigures.for_screens` shows it on narrow screens)."""
    fig, ax = _new(PHONE_WIDTH, 3.6) if phone else _new(6.4, 3.2)
    colours = (PALETTE["compute"], PALETTE["exposed"], PALETTE["compute_alt"], PALETTE["hidden"])
    for (label, L), colour in zip(layouts, colours):
        ax.plot(L["tokens"], [x * 1e3 for x in L["exposed"]], color=colour, linewidth=1.5, marker="o", markersize=3,
                label=label)
        ax.axvline(L["threshold"], color=colour, linestyle="--", linewidth=1)
        ax.annotate(f"阈值 {L['threshold']:,.0f}", (L["threshold"], 0), textcoords="offset points", xytext=(3, 4),
                    fontsize=MIN_FONT_PT, color=colour, rotation=90, va="bottom")
    ax.set_xscale("log", base=2)
    lo = min(t for _, L in layouts for t in L["tokens"])
    hi = max(t for _, L in layouts for t in L["tokens"])
    ticks = [2 ** k for k in range(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)][::2 if phone else 1]
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("每个微批次的词元数（每卡）")
    ax.set_ylabel("暴露的梯度通信（ms）")
    if phone:
        fig.legend(loc="outside lower center", ncol=1, frameon=False, fontsize=MIN_FONT_PT)
    else:
        ax.legend(frameon=False, fontsize=MIN_FONT_PT)
    ax.set_title(_wrap(title, phone), fontsize=10, loc="left")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _done(fig)
