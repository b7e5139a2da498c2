"""The plan builder's drawings as matplotlib figures, for chapter 6 and JupyterLab.

Each function draws a layout of :mod:`.planlayout` (the same data the site's
SVG draws, ``book/_static/calc/planview.js``): a step's timeline, the memory bar
against the device's memory, the scaling curve.  No formula is evaluated here.
Colours follow :data:`.figures.PALETTE`, plus the roles of :data:`PLAN_PALETTE`,
which ``book/_static/calc/plan.css`` uses for the same classes
(``tests/test_planfigures.py`` compares them).
"""

from __future__ import annotations

from ..model.units import Q_, fmt, fmt_percent
from .figures import MIN_FONT_PT, PALETTE, _done, _new, ink
from .planlayout import t_

PLAN_PALETTE = {
    "forward": PALETTE["compute"],
    "backward": PALETTE["compute_alt"],
    "comm": PALETTE["hidden"],  # communication beside compute
    "exposed": PALETTE["exposed"],  # communication compute waits for
    "idle": "#DDDDDD",  # the bubble
    "activation": "#F0E442",
    "temporary": "#999999",
    "working": "#555555",
}
#: plan.css classes and the palette role each must use.
PLAN_CSS = {"pb-f": "forward", "pb-b": "backward", "pb-cm": "comm", "pb-ex": "exposed", "pb-id": "idle",
            "pb-ac": "activation", "pb-tm": "temporary", "pb-wk": "working"}
MEMORY_COLOURS = {"param_state": PALETTE["param"], "grad_state": PALETTE["grad"], "optim_state": PALETTE["optim"],
                  "activations": PLAN_PALETTE["activation"], "gather": PLAN_PALETTE["temporary"],
                  "working": PLAN_PALETTE["working"], "logits": PLAN_PALETTE["exposed"]}
BLOCK = {"F": "forward", "B": "backward", "C": "forward", "O": "working", "dp": "comm", "tp": "exposed", "pp": "comm"}


def _clean(ax):
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _draw_timeline(ax, layout, scale: float, unit: str) -> None:
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
        if b["label"] and w > 0.045 * step:
            ax.text(b["start"] * scale + w / 2, y[b["lane"]], b["label"], ha="center", va="center", fontsize=MIN_FONT_PT,
                    color=ink(PLAN_PALETTE[BLOCK[b["kind"]]]), zorder=4)  # black on the light blue
    for mk in layout["marks"]:
        w = (mk["end"] - mk["start"]) * scale
        exposed = mk["kind"] == "exposed"
        if w > 0.12 * step:
            ax.text(mk["start"] * scale + w / 2, y[mk["lane"]] + (0.42 if exposed else 0), mk["title"].split("：")[1],
                    ha="center", va="bottom" if exposed else "center", fontsize=MIN_FONT_PT)
    ax.set_yticks(range(n), [lane["label"] for lane in reversed(layout["lanes"])])
    ax.set_xlim(0, step * 1.02)
    ax.set_ylim(-0.6, n - 0.4)
    _clean(ax)


def _legend(fig):
    from matplotlib.patches import Patch

    handles = [Patch(color=PLAN_PALETTE["forward"], label="前向"), Patch(color=PLAN_PALETTE["backward"], label="反向"),
               Patch(color=PLAN_PALETTE["comm"], label="通信"),
               Patch(facecolor=PLAN_PALETTE["exposed"], hatch="//", edgecolor="white", label="暴露的通信"),
               Patch(color=PLAN_PALETTE["idle"], label="等待（气泡）")]
    fig.legend(handles=handles, loc="outside lower center", ncol=5, frameon=False, fontsize=MIN_FONT_PT)


def timelines_figure(panels, unit: str | None = None):
    """One or more step timelines (``[(title, timeline_layout), …]``) on one time axis, the longest step first."""
    longest = max(layout["step"] for _, layout in panels)
    unit = unit or ("s" if longest >= 1 else "ms")
    scale = 1.0 if unit == "s" else 1e3
    lanes = [len(layout["lanes"]) for _, layout in panels]
    fig, axes = _new(7.0, 0.9 + sum(0.32 * n + 0.45 for n in lanes))  # <= 7 in: 85 % of it fits the page column
    fig.clear()
    grid = fig.add_gridspec(len(panels), 1, height_ratios=[n + 1.2 for n in lanes])
    first = None
    for i, (title, layout) in enumerate(panels):
        ax = fig.add_subplot(grid[i], sharex=first)
        first = first or ax
        _draw_timeline(ax, layout, scale, unit)
        ax.set_title(f"{title}：步时 {t_(layout['step'])}", fontsize=9.5, loc="left")
        if i < len(panels) - 1:
            ax.tick_params(labelbottom=False)
    first.set_xlim(0, longest * scale * 1.02)
    fig.axes[-1].set_xlabel(f"时间（{unit}）")
    _legend(fig)
    return _done(fig)


def timeline_figure(layout, title: str = "一步的时间线"):
    """One step's timeline: a lane per stream for a few ranks, exposed communication hatched, the bubble grey."""
    return timelines_figure([(title, layout)])


def memory_figure(layout, title: str = "每卡显存"):
    """The memory bar: parameters, gradients, optimizer state, activations, temporary buffers, working set."""
    fig, ax = _new(7.0, 1.9)
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
    fig.legend(loc="outside lower center", ncol=3, frameon=False, fontsize=MIN_FONT_PT)
    ax.set_title(title, fontsize=10, loc="left")
    _clean(ax)
    return _done(fig)


def scaling_figure(layout, title: str | None = None):
    """Speedup (against one device's model compute alone) and efficiency against devices or bandwidth."""
    fig, ax = _new(6.4, 3.2)
    pts = layout["points"]
    by_devices = layout["over"] == "devices"
    xs = [p["x"] if by_devices else Q_(p["x"], "B/s").to("GB/s").magnitude for p in pts]
    ax.plot(xs, [p["speedup"] for p in pts], color=PALETTE["compute"], linewidth=1.5)
    for x, p in zip(xs, pts):
        ax.scatter([x], [p["speedup"]], s=28, color=PALETTE["compute"] if p["fits"] else "white",
                   edgecolor=PALETTE["compute"], zorder=3)
        ax.annotate(fmt_percent(p["efficiency"]), (x, p["speedup"]), textcoords="offset points", xytext=(0, 6),
                    ha="center", fontsize=MIN_FONT_PT)
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
    ax.set_title(title or "加速比与效率（点上标的是效率）", fontsize=10, loc="left")
    _clean(ax)
    return _done(fig)
