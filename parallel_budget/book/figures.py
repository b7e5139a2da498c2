"""Build-time matplotlib figures of the chapters, one function per figure.

Each function takes results the package already computed (a ring schedule, a
:class:`StepTime`, a :class:`ZeroTable`, a :class:`PipelineSchedule`, a
:class:`CollectiveCheck`) and only draws them: no formula is evaluated here.
Every function configures the CJK font through
:func:`parallel_budget.book.pages.use_cjk_font` and draws the canvas before
returning, so a glyph missing from the font raises inside the cell that asked
for the figure and fails the book build instead of drawing boxes.
"""

from __future__ import annotations

from .pages import use_cjk_font
from ..model.units import fmt, fmt_count, fmt_percent

# One palette for the whole book (colour-blind safe, Okabe-Ito), shared with the
# in-page calculators: each colour has one meaning in every figure and in
# book/_static/calc/calc.css (tests/test_figures.py compares the two).
BLUE, ORANGE, GREEN, VERMILION, PURPLE, GREY = "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#BBBBBB"
SKY = "#56B4E9"
PALETTE = {
    "compute": BLUE,  # computation (and every other microbatch of a pipeline)
    "compute_alt": SKY,  # the alternate microbatches of a pipeline
    "hidden": GREEN,  # communication hidden behind compute; calls that agree
    "exposed": ORANGE,  # time the step pays for: exposed communication, waiting
    "error": VERMILION,  # a wrong result or the rank whose calls diverge
    "param": SKY,  # ZeRO bars: parameters
    "grad": PURPLE,  # ZeRO bars: gradients
    "optim": BLUE,  # ZeRO bars: optimizer state
}
#: The calculators' SVG classes (calc.css) and the palette role each must use.
CSS_CLASSES = {"pb-c": "compute", "pb-c2": "compute_alt", "pb-h": "hidden", "pb-x": "exposed",
               "pb-p": "param", "pb-g": "grad", "pb-o": "optim"}


#: Resolution of every figure, and the smallest font any of them uses: 8.5 pt at 110 dpi is 13 px, so a
#: figure shown at 85 % of its size or more (course.js keeps it so on a phone) has no text under 11 px.
DPI = 110
MIN_FONT_PT = 8.5


def _luminance(hex_colour: str) -> float:
    """WCAG relative luminance of ``"#RRGGBB"``."""
    def channel(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def ink(fill: str) -> str:
    """The text colour on a box of colour ``fill``: white or black, whichever contrasts more.

    White on the palette's sky blue, orange or green is under 3:1; black on them is over 7:1.
    """
    lum = _luminance(fill)
    return "white" if (1.05 / (lum + 0.05)) >= ((lum + 0.05) / 0.05) else "black"


def _new(width, height):
    use_cjk_font()
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig, ax


def _done(fig):
    import matplotlib.pyplot as plt

    fig.canvas.draw()  # render now: a missing glyph raises here, inside the calling cell
    plt.close(fig)  # shown once, as the cell's value, not again by the inline backend
    return fig


def update_outcomes_figure(updates):
    """Weights after one data-parallel step under different reductions.

    ``updates`` are :class:`DataParallelUpdate` results for the same ``w``,
    grads and lr; the single-process reference is the dashed line.
    """
    fig, ax = _new(6.4, 0.7 * len(updates) + 1.4)
    labels = {"mean": "求平均（正确）", "sum": "只求和，没除以 R", "mean_twice": "平均做了两次"}
    ref = updates[0].reference
    for i, u in enumerate(updates):
        color = PALETTE["hidden"] if u.matches_reference else PALETTE["error"]
        ax.barh(i, u.weights[0], color=color, height=0.55)
        ax.text(u.weights[0] + 0.02, i, f"w = {u.weights[0]:.3g}（聚合梯度 {u.aggregated_grad:.3g}）", va="center", fontsize=9)
    ax.axvline(ref, color=GREY, linestyle="--", linewidth=1.2)
    ax.text(ref, len(updates) - 0.45, f"单进程参考 {ref:.3g}", ha="center", fontsize=9, color="#555555")
    ax.set_yticks(range(len(updates)), [labels.get(u.reduction, u.reduction) for u in updates])
    ax.set_ylim(len(updates) - 0.3, -0.6)
    ax.set_xlim(0, max(max(u.weights[0] for u in updates), ref, updates[0].w0) * 1.45)
    ax.set_xlabel("更新后的参数 w（每个 rank 相同）")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    grads = "、".join(f"{g:g}" for g in updates[0].grads)
    ax.set_title(f"w 从 {updates[0].w0:g} 出发，本地梯度 {grads}，学习率 {updates[0].lr:g}", fontsize=10.5)
    return _done(fig)


def ring_rounds_figure(schedule, ring=None):
    """Rounds of a ring all-reduce: which chunk each rank sends, per round.

    ``schedule`` is :func:`parallel_budget.ring_schedule`'s result; ``ring``
    (optional :class:`RingAllReduce` of the same rank count) adds the chunk
    size and per-rank send volume to the title.  One panel per phase.
    """
    use_cjk_font()
    import matplotlib.pyplot as plt

    ranks = len(schedule[0])
    phases = [("reduce-scatter", BLUE, "边传边加"), ("all-gather", PURPLE, "只复制，分发结果")]
    per_phase = len(schedule) // 2
    fig, axes = plt.subplots(2, 1, figsize=(1.3 * per_phase + 1.5, 2 * (0.55 * ranks + 0.6) + 0.9),
                             dpi=DPI, layout="constrained")
    for ax, (phase, color, what) in zip(axes, phases):
        rounds = [rnd for rnd in schedule if rnd[0].phase == phase]
        for col, rnd in enumerate(rounds):
            for t in rnd:
                ax.add_patch(_box(col, t.src, color))
                ax.text(col + 0.5, t.src + 0.5, f"块 {t.chunk} → {t.dst}", ha="center", va="center",
                        color=ink(color), fontsize=9.5)
        ax.set_xlim(0, per_phase)
        ax.set_ylim(ranks, 0)
        ax.set_xticks([c + 0.5 for c in range(per_phase)], [f"第 {rnd[0].round + 1} 轮" for rnd in rounds])
        ax.set_yticks([r + 0.5 for r in range(ranks)], [f"rank {r}" for r in range(ranks)])
        ax.tick_params(length=0, labelsize=9.5)
        for side in ax.spines.values():
            side.set_visible(False)
        ax.set_title(f"{phase}：{len(rounds)} 轮，{what}", fontsize=10.5, color=color, loc="left")
    title = f"ring all-reduce，{ranks} 个 rank，每轮每个 rank 向右邻发一块"
    if ring is not None:
        title += f"\n每块 {fmt(ring.chunk)}，共 {ring.steps} 轮，每 rank 发送 {fmt(ring.send_per_rank)}"
    fig.suptitle(title, fontsize=11)
    return _done(fig)


def _box(x, y, color, width=1.0, height=1.0, pad=0.06, **kw):
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((x + pad, y + pad), width - 2 * pad, height - 2 * pad,
                          boxstyle="round,pad=0,rounding_size=0.08", facecolor=color, edgecolor="none", **kw)


def step_timeline_figure(no_overlap, overlap):
    """Timelines of one step: one device, R ranks without overlap, R ranks with overlap.

    Both arguments are :class:`StepTime` results for the same compute and
    communication; the exposed communication (the part that lengthens the
    step) is hatched.
    """
    fig, ax = _new(6.6, 3.2)
    ms = lambda q: q.to("ms").magnitude  # noqa: E731 (unit conversion only)
    rows = [
        ("单卡", [(0, ms(no_overlap.compute_single), BLUE, "计算", None)], no_overlap.compute_single),
    ]
    for label, st in ((f"{no_overlap.ranks} 卡，不重叠", no_overlap), (f"{overlap.ranks} 卡，分桶重叠", overlap)):
        c0 = ms(st.compute_per_rank)
        comm_start = c0 - ms(st.hidden_comm)
        segs = [(0, c0, BLUE, "计算", None)]
        if ms(st.hidden_comm) > 0:
            segs.append((comm_start, ms(st.hidden_comm), PALETTE["hidden"], "隐藏", None))
        if ms(st.exposed_comm) > 0:
            segs.append((c0, ms(st.exposed_comm), PALETTE["exposed"], "暴露", "//"))
        rows.append((label, segs, st.step))
    for i, (label, segs, total) in enumerate(rows):
        y = len(rows) - 1 - i
        for start, width, color, text, hatch in segs:
            lane = y + (0.0 if color == BLUE else -0.28)
            h = 0.5 if color == BLUE else 0.26
            ax.barh(lane, width, left=start, height=h, color=color,
                    hatch=hatch, edgecolor="white" if hatch else None, linewidth=0)
            if width > 0.09 * ms(no_overlap.compute_single):
                ax.text(start + width / 2, lane, text, ha="center", va="center", color=ink(color), fontsize=9,
                        bbox={"facecolor": color, "edgecolor": "none", "pad": 1.0} if hatch else None)
        ax.text(ms(total) + 4, y, f"步时 {fmt(total)}", va="center", fontsize=9)
    ax.set_yticks(range(len(rows)), [r[0] for r in reversed(rows)])
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=PALETTE["compute"], label="计算"), Patch(color=PALETTE["hidden"], label="被反向遮住的通信"),
                       Patch(facecolor=PALETTE["exposed"], hatch="//", edgecolor="white", label="暴露的通信")],
              loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, frameon=False, fontsize=9)
    ax.set_xlabel("时间（ms）")
    ax.set_xlim(0, ms(no_overlap.compute_single) * 1.28)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("同一个全局 batch 的一步：只有暴露的通信拉长步时", fontsize=10.5)
    return _done(fig)


def zero_bars_figure(table, device_memory=None):
    """Stacked bars of resident model state per device for the four ZeRO rows.

    ``table`` is :func:`parallel_budget.zero_table`'s result; ``device_memory``
    (optional, e.g. ``"8 GB"``) draws a dashed line at a device's capacity.
    """
    from ..model.units import as_bytes

    fig, ax = _new(6.4, 3.8)
    gb = lambda q: q.to("GB").magnitude  # noqa: E731 (unit conversion only)
    names = [row.name for row in table]
    parts = [("参数", "param_state", PALETTE["param"]), ("梯度", "grad_state", PALETTE["grad"]),
             ("优化器状态（FP32 主副本 + Adam）", "optim_state", PALETTE["optim"])]
    bottoms = [0.0] * len(names)
    for label, field, color in parts:
        vals = [gb(getattr(row, field)) for row in table]
        ax.bar(names, vals, bottom=bottoms, color=color, label=label, width=0.6)
        bottoms = [b + v for b, v in zip(bottoms, vals)]
    for i, row in enumerate(table):
        ax.text(i, gb(row.total) * 1.02, fmt(row.total), ha="center", va="bottom", fontsize=9.5)
    if device_memory is not None:
        cap = gb(as_bytes(device_memory, arg="device_memory", func="zero_bars_figure"))
        ax.axhline(cap, color=GREY, linestyle="--", linewidth=1)
        ax.text(len(names) - 0.5, cap, f"每卡 {fmt(as_bytes(device_memory))}", ha="right", va="bottom", fontsize=8.5)
    ax.set_ylabel("每卡常驻模型状态（GB）")
    ax.set_ylim(0, gb(table[0].total) * 1.18)
    ax.legend(frameon=False, fontsize=9, loc="upper right")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    count = _count_zh(table[0].params)
    count += " " if count[-1].isdigit() else ""  # "10 亿个参数", "5000 个参数"
    ax.set_title(f"{count}个参数，D = {table[0].dp}：只画常驻的参数、梯度和优化器状态", fontsize=10.5)
    return _done(fig)


def _count_zh(n: float) -> str:
    """1e9 -> '10 亿', 3.5e7 -> '3500 万' (a label, not a formula)."""
    return fmt_count(n, 4)


def pipeline_gantt_figure(schedule, title=None):
    """Gantt chart of a :class:`PipelineSchedule`: stages as rows, microbatches as boxes."""
    stages = len(schedule.stage_times)
    fig, ax = _new(6.6, 0.55 * stages + 1.5)
    ms = lambda s: 1e3 * s  # noqa: E731 (seconds to ms)
    times = [t.to("ms").magnitude for t in schedule.stage_times]
    palette = [PALETTE["compute"], PALETTE["compute_alt"]]
    for i, row in enumerate(schedule.starts):
        ax.barh(i, ms(schedule.makespan.to("s").magnitude), color="#F2F2F2", height=0.7)
        for j, start in enumerate(row):
            ax.barh(i, times[i], left=ms(start), height=0.7, color=palette[j % len(palette)], edgecolor="white")
            ax.text(ms(start) + times[i] / 2, i, str(j + 1), ha="center", va="center",
                    color=ink(palette[j % len(palette)]), fontsize=9)
    ax.set_ylim(stages - 0.5, -0.5)
    ax.set_yticks(range(stages), [f"阶段 {i + 1}" for i in range(stages)])
    ax.set_xlabel("时间（ms）；方块里的数字是微批次编号，浅灰为空闲")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    head = title or f"{stages} 个阶段、{schedule.microbatches} 个微批次的前向流水线"
    ax.set_title(f"{head}：总时长 {fmt(schedule.makespan)}，空闲占 "
                 f"{fmt_percent(schedule.idle_fraction)}", fontsize=10.5)
    return _done(fig)


def hang_sequence_figure(check):
    """Per-rank collective sequences of a :class:`CollectiveCheck`, with the first mismatch marked."""
    ranks = len(check.calls)
    longest = max(len(s) for s in check.calls)
    fig, ax = _new(1.35 * longest + 1.6, 0.62 * ranks + 1.3)
    for r, seq in enumerate(check.calls):
        for k in range(longest):
            if k < len(seq):
                bad = not check.consistent and k >= check.mismatch_at
                color = PALETTE["error"] if (bad and r in check.diverged) else (PALETTE["exposed"] if bad else PALETTE["hidden"])
                ax.add_patch(_box(k, r, color))
                ax.text(k + 0.5, r + 0.5, seq[k], ha="center", va="center", color=ink(color), fontsize=9)
            elif not check.consistent and k == check.mismatch_at:
                ax.add_patch(_box(k, r, "white", linestyle="--", linewidth=1.2))
                ax.patches[-1].set_edgecolor(VERMILION)
                ax.text(k + 0.5, r + 0.5, "已退出 /\n无调用", ha="center", va="center", color=VERMILION, fontsize=9)
    if not check.consistent:
        ax.axvline(check.mismatch_at, color=VERMILION, linewidth=1.5)
    ax.set_xlim(0, longest)
    ax.set_ylim(ranks, 0)
    ax.set_xticks([k + 0.5 for k in range(longest)], [f"第 {k + 1} 次" for k in range(longest)])
    ax.set_yticks([r + 0.5 for r in range(ranks)], [f"rank {r}" for r in range(ranks)])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    verdict = {None: "各 rank 次数与顺序一致", "block": "从红线起，已进入的 rank 等到超时（挂起）",
               "silent": "从红线起，错位的调用悄悄配对，结果出错", "mismatch": "从红线起，操作或形状对不上",
               "unknown": "从红线起调用错位（形状未知）"}[check.outcome]
    ax.set_title(f"每个 rank 依次进入的集合通信：{verdict}", fontsize=10.5)
    return _done(fig)
