"""Do the chapter figures draw the package's results, in Chinese, and fail on a missing glyph?"""

import warnings

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import parallel_budget as pb  # noqa: E402
from parallel_budget.book import figures  # noqa: E402
from parallel_budget.model.units import fmt  # noqa: E402


def texts(fig):
    out = []
    for ax in fig.axes:
        out += [t.get_text() for t in ax.texts]
        out += [ax.get_title(), ax.get_title("left"), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels()]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return "\n".join(out)


def has_cjk(s):
    return any("\u4e00" <= ch <= "\u9fff" for ch in s)


def lesson_figures():
    ring = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    plain = pb.step_time("400 ms", 4, ring.lower_bound)
    overlap = pb.step_time("400 ms", 4, ring.lower_bound, overlap=0.5)
    table = pb.zero_table(1e9, 4)
    sched = pb.pipeline_schedule(["10 ms", "10 ms", "10 ms", "15 ms"], 8)
    hang = pb.check_collectives([["all_reduce"] * 3, ["all_reduce"] * 2])
    updates = [pb.data_parallel_update(1, [2, 6], 0.1, r) for r in ("mean", "sum", "mean_twice")]
    return {
        "update": (figures.update_outcomes_figure(updates), ["w = 0.6", "w = 0.2", "w = 0.8", "单进程参考 0.6"]),
        "ring": (figures.ring_rounds_figure(pb.ring_schedule(4), ring), [fmt(ring.send_per_rank), fmt(ring.chunk), "第 6 轮"]),
        "timeline": (figures.step_timeline_figure(plain, overlap), [f"步时 {fmt(plain.step)}", f"步时 {fmt(overlap.step)}"]),
        "zero": (figures.zero_bars_figure(table, "8 GB"), [fmt(r.total) for r in table] + ["10 亿"]),
        "gantt": (figures.pipeline_gantt_figure(sched), [fmt(sched.makespan), pb.fmt_percent(sched.idle_fraction)]),
        "hang": (figures.hang_sequence_figure(hang), ["已退出", "挂起"]),
    }


def test_every_figure_shows_the_package_numbers_in_chinese():
    """Does each figure carry the numbers its model result holds, with Chinese labels?"""
    for name, (fig, expected) in lesson_figures().items():
        text = texts(fig)
        assert has_cjk(text), name
        for e in expected:
            assert e in text, f"{name}: {e!r} not drawn; drawn text:\n{text}"
        assert fig.get_size_inches()[0] <= 7.5, f"{name} too wide for a phone screen"


def test_figures_are_closed_so_they_show_once():
    """Is no figure left open in pyplot (which would display it a second time in a notebook)?"""
    import matplotlib.pyplot as plt

    lesson_figures()
    assert plt.get_fignums() == []


def test_timeline_draws_exposed_comm_where_step_time_says():
    """Does the hatched bar of the overlap row end exactly at the step time?"""
    ring = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    plain = pb.step_time("400 ms", 4, ring.lower_bound)
    overlap = pb.step_time("400 ms", 4, ring.lower_bound, overlap=0.5)
    fig = figures.step_timeline_figure(plain, overlap)
    hatched = [p for p in fig.axes[0].patches if p.get_hatch() and p.get_width() > 0]
    ends = sorted(round(p.get_x() + p.get_width(), 6) for p in hatched)
    assert ends == sorted(round(s.step.to("ms").magnitude, 6) for s in (plain, overlap))


def test_missing_glyph_fails_instead_of_drawing_boxes():
    """After use_cjk_font(), does a glyph no font has raise rather than draw a box?"""
    from parallel_budget.book.pages import use_cjk_font

    use_cjk_font()
    import matplotlib.pyplot as plt

    fig = plt.figure()
    fig.text(0.5, 0.5, "\U000E0100\U0010FFFD")  # private-use / variation selector: in no font
    try:
        with pytest.raises(UserWarning, match="missing from"):
            fig.canvas.draw()
    finally:
        plt.close(fig)


def test_no_cjk_font_is_a_clear_error(monkeypatch):
    """Without any CJK font, is the message about installing fonts-noto-cjk?"""
    from parallel_budget.book import pages

    monkeypatch.setattr(pages, "CJK_FONTS", ("No Such Font",))
    with warnings.catch_warnings(), pytest.raises(RuntimeError, match="fonts-noto-cjk"):
        pages.use_cjk_font()


def test_calculators_use_the_figures_palette():
    """Does every calculator colour class in calc.css use the figures' colour for the same meaning?"""
    import re
    from pathlib import Path

    css = (Path(__file__).resolve().parents[1] / "book" / "_static" / "calc" / "calc.css").read_text(encoding="utf-8")
    fills = {m.group(1): m.group(2).upper() for m in re.finditer(r"\.(pb-[a-z0-9]+)\s*\{\s*fill:\s*(#[0-9A-Fa-f]{6})", css)}
    assert set(figures.CSS_CLASSES) <= set(fills), set(figures.CSS_CLASSES) - set(fills)
    for cls, role in figures.CSS_CLASSES.items():
        assert fills[cls] == figures.PALETTE[role].upper(), (cls, role)
    # orange means one thing: time the step pays for (exposed communication, waiting)
    assert [r for r, c in figures.PALETTE.items() if c == figures.ORANGE] == ["exposed"]


def test_timeline_colours_hidden_and_exposed_by_role():
    """Hidden communication is drawn in the 'hidden' colour, exposed in orange, in the figure too."""
    from matplotlib.colors import to_hex

    ring = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    fig = figures.step_timeline_figure(pb.step_time("400 ms", 4, ring.lower_bound),
                                       pb.step_time("400 ms", 4, ring.lower_bound, overlap=1))
    colours = {to_hex(p.get_facecolor()).upper() for p in fig.axes[0].patches if p.get_width() > 0}
    assert figures.PALETTE["hidden"].upper() in colours and figures.PALETTE["exposed"].upper() in colours
    hatched = {to_hex(p.get_facecolor()).upper() for p in fig.axes[0].patches if p.get_hatch()}
    assert hatched == {figures.ORANGE.upper()}


def test_no_figure_text_is_smaller_than_the_phone_layout_assumes():
    """Is every text of every figure at least figures.MIN_FONT_PT (the site keeps it >= 11 px on a phone)?"""
    from matplotlib.text import Text

    for name, (fig, _) in lesson_figures().items():
        assert fig.dpi == figures.DPI, name
        sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
        assert sizes and min(sizes) >= figures.MIN_FONT_PT, f"{name}: {min(sizes)} pt"


def test_text_on_a_coloured_box_is_black_or_white_by_contrast():
    """Is the ink on each palette colour the one of black and white with the higher contrast (>= 4.5:1 here)?"""
    def ratio(a, b):
        hi, lo = max(a, b), min(a, b)
        return (hi + 0.05) / (lo + 0.05)

    for colour in figures.PALETTE.values():
        lum = figures._luminance(colour)
        on = ratio(lum, 1.0 if figures.ink(colour) == "white" else 0.0)
        assert on >= 4.5, colour
    assert figures.ink(figures.SKY) == "black" and figures.ink(figures.BLUE) == "white"
