"""The plan builder's drawings as matplotlib figures, for chapter 6 and JupyterLab.

Each function draws a layout of :mod:`.planlayout` (the same data the site's
SVG draws, ``book/_static/calc/planview.js``): a step's timeline, the memory bar
against the device's memory, the scaling curve.  No formula is evaluated here.
Colours follow :data:`.figures.PALETTE`, plus the roles of :data:`PLAN_PALETTE`,
which ``book/_static/calc/plan.css`` uses for the same classes
(``tests/test_planfigures.py`` compares them).

Every figure has a phone variant (``phone=True``): :data:`PHONE_WIDTH` inches
wide, so that on a 390 px screen it is shown whole at its own size (text as
large as on a desktop), with fewer labels inside the bars, legends in more
rows and long titles on two lines.  :func:`for_screens` puts both into one
``<picture>`` that the browser picks from by width (chapter 6).
"""

from __future__ import annotations

import base64
import html
import io

from ..model.units import Q_, fmt, fmt_percent
from .figures import DPI, MIN_FONT_PT, PALETTE, _done, _new, ink
from .planlayout import t_

#: Width of the phone variants (inches): 330 px at figures.DPI, inside the 358 px a 390 px screen gives a figure.
PHONE_WIDTH = 3.0
#: Below this viewport width (CSS px) the page shows the phone variant.
PHONE_MEDIA = "(max-width: 720px)"

PLAN_PALETTE = {
    "forward": PALETTE["compute"],
    "backward": PALETTE["compute_alt"],
    "weight": PALETTE["grad"],  # zero-bubble schedules: the weight-gradient half of a backward (W)
    "comm": PALETTE["hidden"],  # communication beside compute
    "exposed": PALETTE["exposed"],  # communication compute waits for
    "idle": "#DDDDDD",  # the bubble
    "activation": "#F0E442",
    "temporary": "#999999",
    "working": "#555555",
}
#: plan.css classes and the palette role each must use.
PLAN_CSS = {"pb-f": "forward", "pb-b": "backward", "pb-w": "weight", "pb-cm": "comm", "pb-ex": "exposed", "pb-id": "idle",
            "pb-ac": "activation", "pb-tm": "temporary", "pb-wk": "working"}
MEMORY_COLOURS = {"param_state": PALETTE["param"], "grad_state": PALETTE["grad"], "optim_state": PALETTE["optim"],
                  "activations": PLAN_PALETTE["activation"], "gather": PLAN_PALETTE["temporary"],
                  "working": PLAN_PALETTE["working"], "logits": PLAN_PALETTE["exposed"]}
BLOCK = {"F": "forward", "B": "backward", "W": "weight", "C": "forward", "O": "working", "dp": "comm", "tp": "exposed",
         "pp": "comm"}


def _clean(ax):
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _wrap(title: str, phone: bool) -> str:
    """A long title on two lines on a phone, after its colon."""
    return title.replace("：", "：\n", 1) if phone and len(title) > 14 else title


def _draw_timeline(ax, layout, scale: float, unit: str, phone: bool = False) -> None:
    n = len(layout["lanes"])
    y = {i: n - 1 - i for i in range(n)}
    step = layout["step"] * scale
    groups = {}  # one broken_barh per lane and colour: thousands of blocks draw in one call each
    for b in layout["blocks"]:
        groups.setdefault((b["lane"], BLOCK[b["kind"]], 2), []).append(b)
    for mk in layout["marks"]:
        groups.setdefault((mk["lane"], mk["kind"], 3 if mk["kind"] == "exposed" else 1), []).append(mk)
    for (lane, role, z), items in groups.items():
        h = 0.7 if layout["lanes"][lane]["stream"] == "compute" and role != "exposed" else 0.5
        least = 0.0015 * step  # a block shorter than a pixel still shows
        ax.broken_barh([(x["start"] * scale, max((x["end"] - x["start"]) * scale, least)) for x in items],
                       (y[lane] - h / 2, h),
                       facecolors=PLAN_PALETTE[role], hatch="//" if z == 3 else None, edgecolor="white",
                       linewidth=0, zorder=z)
    for b in layout["blocks"]:
        w = (b["end"] - b["start"]) * scale
        if b["label"] and w > (0.1 if phone else 0.045) * step:
            ax.text(b["start"] * scale + w / 2, y[b["lane"]], b["label"], ha="center", va="center", fontsize=MIN_FONT_PT,
                    color=ink(PLAN_PALETTE[BLOCK[b["kind"]]]), zorder=4)  # black on the light blue
    for mk in layout["marks"]:
        w = (mk["end"] - mk["start"]) * scale
        exposed = mk["kind"] == "exposed"
        if w > (0.26 if phone else 0.12) * step:
            ax.text(mk["start"] * scale + w / 2, y[mk["lane"]] + (0.42 if exposed else 0), mk["title"].split("：")[1],
                    ha="center", va="bottom" if exposed else "center", fontsize=MIN_FONT_PT)
    ax.set_yticks(range(n), [lane["label"] for lane in reversed(layout["lanes"])],
                  fontsize=MIN_FONT_PT if phone else None)
    if phone:
        ax.xaxis.set_major_locator(_few_ticks())
    ax.set_xlim(0, step * 1.02)
    ax.set_ylim(-0.6, n - 0.4)
    _clean(ax)


def _few_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(4)


def _legend(fig, phone: bool = False, weight: bool = False):
    from matplotlib.patches import Patch

    handles = [Patch(color=PLAN_PALETTE["forward"], label="前向"), Patch(color=PLAN_PALETTE["backward"], label="输入梯度 I" if weight else "反向"),
               *([Patch(color=PLAN_PALETTE["weight"], label="权重梯度 W")] if weight else []),
               Patch(color=PLAN_PALETTE["comm"], label="通信"),
               Patch(facecolor=PLAN_PALETTE["exposed"], hatch="//", edgecolor="white", label="暴露的通信"),
               Patch(color=PLAN_PALETTE["idle"], label="等待（气泡）")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2 if phone else len(handles), frameon=False,
               fontsize=MIN_FONT_PT)


def timelines_figure(panels, unit: str | None = None, phone: bool = False):
    """One or more step timelines (``[(title, timeline_layout), …]``) on one time axis, the longest step first."""
    longest = max(layout["step"] for _, layout in panels)
    unit = unit or ("s" if longest >= 1 else "ms")
    scale = 1.0 if unit == "s" else 1e3
    lanes = [len(layout["lanes"]) for _, layout in panels]
    fig, axes = _new(PHONE_WIDTH if phone else 7.0,  # <= 7 in: 85 % of it fits the page column
                     (1.2 if phone else 0.9) + sum(0.32 * n + 0.45 for n in lanes))
    fig.clear()
    grid = fig.add_gridspec(len(panels), 1, height_ratios=[n + 1.2 for n in lanes])
    first = None
    for i, (title, layout) in enumerate(panels):
        ax = fig.add_subplot(grid[i], sharex=first)
        first = first or ax
        _draw_timeline(ax, layout, scale, unit, phone)
        ax.set_title(f"{title}：步时 {t_(layout['step'])}", fontsize=9.5, loc="left")
        if i < len(panels) - 1:
            ax.tick_params(labelbottom=False)
    first.set_xlim(0, longest * scale * 1.02)
    fig.axes[-1].set_xlabel(f"时间（{unit}）")
    _legend(fig, phone, any(b["kind"] == "W" for _, layout in panels for b in layout["blocks"]))
    return _done(fig)


def timeline_figure(layout, title: str = "一步的时间线", phone: bool = False):
    """One step's timeline: a lane per stream for a few ranks, exposed communication hatched, the bubble grey."""
    return timelines_figure([(title, layout)], phone=phone)


def memory_figure(layout, title: str = "每卡显存", phone: bool = False):
    """The memory bar: parameters, gradients, optimizer state, activations, temporary buffers, working set."""
    fig, ax = _new(PHONE_WIDTH, 3.1) if phone else _new(7.0, 1.9)
    gb = lambda x: Q_(x, "B").to("GB").magnitude  # noqa: E731 (unit conversion only)
    x = 0.0
    for part in layout["parts"]:
        w = gb(part["bytes"])
        ax.barh(0, w, left=x, height=0.6, color=MEMORY_COLOURS[part["key"]], label=f"{part['label']} {fmt(Q_(part['bytes'], 'B'))}")
        x += w
    cap = gb(layout["capacity"])
    ax.axvline(cap, color="black", linestyle="--", linewidth=1)
    ax.text(cap, 0.42, f"显存 {fmt(Q_(layout['capacity'], 'B'))} ", ha="right", va="bottom", fontsize=MIN_FONT_PT)
    verdict = "放得下" if layout["fits"] else "放不下"
    ax.text(x, -0.42, f"共 {fmt(Q_(layout['total'], 'B'))}（{verdict}）", ha="right" if x > cap * 0.6 else "left",
            va="top", fontsize=MIN_FONT_PT)
    ax.set_xlim(0, max(x, cap) * 1.05)
    ax.set_ylim(-0.9, 0.9)
    ax.set_yticks([])
    ax.set_xlabel("GB")
    fig.legend(loc="outside lower center", ncol=1 if phone else 3, frameon=False, fontsize=MIN_FONT_PT)
    ax.set_title(_wrap(title, phone), fontsize=10, loc="left")
    _clean(ax)
    return _done(fig)


def scaling_figure(layout, title: str | None = None, phone: bool = False):
    """Speedup (against one device's model compute alone) and efficiency against devices or bandwidth."""
    fig, ax = _new(PHONE_WIDTH, 3.4) if phone else _new(6.4, 3.2)
    pts = layout["points"]
    by_devices = layout["over"] == "devices"
    xs = [p["x"] if by_devices else Q_(p["x"], "B/s").to("GB/s").magnitude for p in pts]
    ax.plot(xs, [p["speedup"] for p in pts], color=PALETTE["compute"], linewidth=1.5)
    for i, (x, p) in enumerate(zip(xs, pts)):
        ax.scatter([x], [p["speedup"]], s=28, color=PALETTE["compute"] if p["fits"] else "white",
                   edgecolor=PALETTE["compute"], zorder=3)
        below = phone and i % 2  # on a phone, every other label under its point: neighbours do not touch
        ax.annotate(fmt_percent(p["efficiency"]), (x, p["speedup"]), textcoords="offset points",
                    xytext=(0, -6 if below else 6), va="top" if below else "baseline", ha="center", fontsize=MIN_FONT_PT)
    if by_devices:
        ax.plot(xs, xs, color=PALETTE["exposed"], linestyle="--", linewidth=1, label="理想：卡数倍")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("卡数")
        ax.legend(frameon=False, fontsize=MIN_FONT_PT, loc="upper left")
    else:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("跨节点单向带宽，每卡（GB/s）")
    ax.set_xticks(xs, [f"{x:g}" for x in xs])
    if by_devices:
        ax.set_yticks(xs, [f"{x:g}" for x in xs])
    ax.minorticks_off()
    ax.set_ylabel("加速比（实心：放得下）")
    ax.set_title(_wrap(title or "加速比与效率（点上标的是效率）", phone), fontsize=10, loc="left")
    _clean(ax)
    return _done(fig)


def _png(fig) -> str:
    """The figure as the notebook's inline backend crops it, in 64 colours (a third of the bytes, the same look:
    the drawings use a handful of flat colours and their anti-aliased edges), base64 for a data URL."""
    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    flat = Image.open(buf).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    flat.save(out, format="PNG", optimize=True)
    return base64.b64encode(out.getvalue()).decode("ascii")


class ForScreens:
    """A figure in two variants, wide and phone, that a page shows by its width (``<picture>``).

    Both are PNGs inside the page (data URLs): the site and JupyterLab show them with nothing to fetch.
    """

    def __init__(self, alt: str, wide, phone):
        self.alt, self.wide, self.phone = alt, wide, phone

    def _repr_html_(self) -> str:
        return (f'<picture class="pb-figure"><source media="{PHONE_MEDIA}" srcset="data:image/png;base64,{_png(self.phone)}">'
                f'<img src="data:image/png;base64,{_png(self.wide)}" alt="{html.escape(self.alt)}"></picture>')

    def __repr__(self) -> str:
        return f"<figure: {self.alt}>"


def for_screens(alt: str, draw, *args, **kw) -> ForScreens:
    """``draw(*args, **kw)`` twice, wide and with ``phone=True``, as one figure that picks by screen width."""
    return ForScreens(alt, draw(*args, **kw), draw(*args, phone=True, **kw))
