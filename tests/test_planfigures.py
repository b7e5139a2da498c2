"""Do the plan builder's drawings (layouts and matplotlib figures) show the package's numbers, in Chinese?"""

from __future__ import annotations

import re

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import parallel_budget as pb  # noqa: E402
from conftest import ROOT  # noqa: E402
from parallel_budget.book import overlapfigure, planfigures, planlayout  # noqa: E402
from parallel_budget.model.planstep import ROWS  # noqa: E402
from parallel_budget.model.timeline import exposed_spans  # noqa: E402
from test_figures import has_cjk, texts  # noqa: E402

KW = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32)
PLANS = {"ddp": dict(dp=16), "zero1": dict(dp=16, zero_stage=1), "zero3": dict(dp=16, zero_stage=3),
         "pipeline": dict(dp=2, tp=2, pp=4, zero_stage=1), "wide": dict(dp=2, tp=1, pp=8, zero_stage=1)}


@pytest.mark.parametrize("name", PLANS)
def test_exposed_and_idle_spans_add_up_to_the_reading(name):
    """Are the drawn exposed spans, per collective, and the idle spans the budget's exposed time and bubble?"""
    b = pb.plan_budget(**KW, **PLANS[name])
    spans, idle = exposed_spans(b.timeline, 0)
    rows = {}
    for s, e, r in spans:
        rows[r] = rows.get(r, 0.0) + e - s
    for c in b.comm:
        if c.group != "dp":
            got = sum(v for r, v in rows.items() if ROWS[r] == c.group)
            assert got == pytest.approx(c.exposed.magnitude, abs=1e-9), c.name
    assert sum(rows.values()) == pytest.approx(b.exposed_comm.magnitude, abs=1e-9)
    assert sum(e - s for s, e in idle) == pytest.approx(b.bubble.magnitude, abs=1e-9)


@pytest.mark.parametrize("name", PLANS)
def test_timeline_layout_shows_every_stream_and_stays_small(name):
    """Has the layout a lane per stream for at most four ranks, blocks inside the step, marks of known kinds?"""
    b = pb.plan_budget(**KW, **PLANS[name])
    lay = planlayout.timeline_layout(b)
    devices = {lane["device"] for lane in lay["lanes"]}
    assert devices == set(planlayout.shown_devices(b.pp)) and len(devices) <= 4
    assert all(lane["stream"] in ("compute", "tp", "dp", "pp") for lane in lay["lanes"])
    assert all(0 <= x["start"] <= x["end"] <= lay["step"] * (1 + 1e-12) for x in lay["blocks"] + lay["marks"])
    assert {m["kind"] for m in lay["marks"]} <= {"exposed", "idle"}
    assert len(lay["blocks"]) <= 400 * len(lay["lanes"])
    assert all(re.search(r"：(共 )?[\d.]+ (ms|s)$", x["title"]) for x in lay["blocks"] + lay["marks"])


def test_many_microbatches_merge_into_few_blocks():
    """Do 256 microbatches of a 4-stage pipeline draw as merged blocks, with the count in the hover text?"""
    b = pb.plan_budget(**{**KW, "global_batch": 512}, dp=2, tp=2, pp=4, zero_stage=1)
    lay = planlayout.timeline_layout(b)
    compute = [x for x in lay["blocks"] if lay["lanes"][x["lane"]]["stream"] == "compute"]
    assert len(compute) < 2 * b.microbatches * 4 and any("等" in x["title"] for x in compute)


def test_figures_draw_the_package_numbers_in_chinese():
    """Do the timeline, memory and scaling figures carry the plan's step, memory and efficiency, in Chinese?"""
    b = pb.plan_budget(**KW, dp=16, zero_stage=1)
    sc = pb.plan_scaling(**KW, dp=16, zero_stage=1)
    figs = {
        "timeline": (planfigures.timeline_figure(planlayout.timeline_layout(b)), [f"步时 {planlayout.t_(b.step.magnitude)}"]),
        "memory": (planfigures.memory_figure(planlayout.memory_layout(b)), [f"共 {pb.fmt(b.memory.total)}（放不下）", "临时缓冲"]),
        "scaling": (planfigures.scaling_figure(planlayout.scaling_layout(sc)), [pb.fmt_percent(sc.points[-1].efficiency), "卡数"]),
        "stages": (planfigures.timelines_figure([("DDP", planlayout.timeline_layout(pb.plan_budget(**KW, dp=16))),
                                                 ("ZeRO-1", planlayout.timeline_layout(b))]), ["DDP：步时", "暴露的通信"]),
    }
    for name, (fig, expected) in figs.items():
        text = texts(fig) + "\n".join(t.get_text() for legend in fig.legends for t in legend.get_texts())
        assert has_cjk(text), name
        for e in expected:
            assert e in text, f"{name}: {e!r} not drawn:\n{text}"
        assert fig.get_size_inches()[0] <= 7.5, f"{name} too wide for a phone screen"


def test_plan_css_uses_the_figures_palette():
    """Does plan.css give each drawing class the colour planfigures uses for the same role?"""
    css = (ROOT / "book" / "_static" / "calc" / "plan.css").read_text(encoding="utf-8")
    for cls, role in planfigures.PLAN_CSS.items():
        m = re.search(rf"\.{cls} \{{ fill: (#[0-9A-Fa-f]{{6}});", css)
        assert m and m.group(1).upper() == planfigures.PLAN_PALETTE[role].upper(), (cls, role)


def test_zero3_layers_merge_by_microbatch_not_across_forward_and_backward():
    """Do ZeRO-3's per-layer blocks (each under 1/100 of the step) merge into F0, B0, F1, B1, not one "F0"?"""
    b = pb.plan_budget(**KW, dp=16, zero_stage=3)
    lay = planlayout.timeline_layout(b)
    compute = [x for x in lay["blocks"] if x["lane"] == 0]
    assert [(x["kind"], x["label"]) for x in compute] == [("F", "F0"), ("B", "B0"), ("F", "F1"), ("B", "B1"),
                                                          ("O", "Opt")]  # the optimizer step stays its own block
    assert sum(int(re.search(r"等 (\d+) 段", x["title"]).group(1)) for x in compute if x["kind"] != "O") == 4 * 32


# --- Phones (issue 32 §6): every chapter-6 figure has a phone variant the page picks by width.

PHONE_BOX_PX = 358  # the width a 390-px screen gives a chapter figure (measured on the built site)


def _phone_figures():
    b = pb.plan_budget(**KW, dp=2, tp=2, pp=4, zero_stage=1, schedule="zbv")
    z = pb.plan_budget(**KW, dp=16, zero_stage=3)
    sc = pb.plan_scaling(**KW, dp=16, zero_stage=1)
    return {
        "timelines": (planfigures.timelines_figure, ([("DDP", planlayout.timeline_layout(pb.plan_budget(**KW, dp=16))),
                                                      ("ZeRO-3", planlayout.timeline_layout(z))],)),
        "zbv": (planfigures.timeline_figure, (planlayout.timeline_layout(b), "ZB-V，PP=4")),
        "memory": (planfigures.memory_figure, (planlayout.memory_layout(z), "最快方案：DP=16、TP=1、PP=1、ZeRO-3、微批次大小 2")),
        "scaling": (planfigures.scaling_figure, (planlayout.scaling_layout(sc), "16 卡 ZeRO-1：加速比与效率随跨节点带宽变化")),
        "overlap": (overlapfigure.overlap_figure, ([("ZeRO-3，每卡网卡 25 GB/s", overlapfigure.overlap_layout(z))],)),
    }


@pytest.mark.parametrize("name", ["timelines", "zbv", "memory", "scaling", "overlap"])
def test_phone_variant_fits_a_phone_at_full_size(name):
    """Is each figure's phone variant, as the page shows it (a PNG cropped to everything drawn, legend and labels
    included), narrower than a 390-px screen's figure box, so it is shown at its own size, text >= MIN_FONT_PT?"""
    import base64
    import io

    from matplotlib.text import Text
    from PIL import Image

    draw, args = _phone_figures()[name]
    both = planfigures.for_screens("图", draw, *args)
    html = both._repr_html_()
    phone_b64, wide_b64 = re.findall(r"base64,([A-Za-z0-9+/=]+)", html)
    phone_px = Image.open(io.BytesIO(base64.b64decode(phone_b64))).size[0]
    wide_px = Image.open(io.BytesIO(base64.b64decode(wide_b64))).size[0]
    assert phone_px <= PHONE_BOX_PX < wide_px, (phone_px, wide_px)
    assert both.phone.get_size_inches()[0] == planfigures.PHONE_WIDTH
    sizes = [t.get_fontsize() for t in both.phone.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert min(sizes) >= planfigures.MIN_FONT_PT


def test_for_screens_is_one_picture_with_the_phone_source_first():
    """Is the figure one <picture>: the phone PNG for narrow screens, the wide PNG otherwise, with its alt text?"""
    draw, args = _phone_figures()["zbv"]
    html = planfigures.for_screens("ZB-V 的时间线 <一步>", draw, *args)._repr_html_()
    assert html.startswith('<picture class="pb-figure"><source media="(max-width: 720px)" srcset="data:image/png;base64,')
    assert html.count("data:image/png;base64,") == 2 and html.endswith('alt="ZB-V 的时间线 &lt;一步&gt;"></picture>')


def test_zero_bubble_timeline_draws_w_in_its_own_colour():
    """Does the ZB-V drawing show W blocks (the gradient colour, in the legend) and I blocks as backward?"""
    from matplotlib.colors import to_hex

    b = pb.plan_budget(**KW, dp=2, tp=2, pp=4, zero_stage=1, schedule="zbv")
    lay = planlayout.timeline_layout(b)
    kinds = {x["kind"] for x in lay["blocks"] if lay["lanes"][x["lane"]]["stream"] == "compute"}
    assert {"F", "B", "W"} <= kinds
    assert any("权重梯度 W" in x["title"] for x in lay["blocks"]) and any("输入梯度 I" in x["title"] for x in lay["blocks"])
    fig = planfigures.timeline_figure(lay)
    legend = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert "权重梯度 W" in legend and "输入梯度 I" in legend
    colours = {to_hex(c).upper() for ax in fig.axes for coll in ax.collections for c in coll.get_facecolors()}
    assert planfigures.PLAN_PALETTE["weight"].upper() in colours
    plain = planfigures.timeline_figure(planlayout.timeline_layout(pb.plan_budget(**KW, dp=2, tp=2, pp=4, zero_stage=1)))
    assert "权重梯度 W" not in [t.get_text() for lg in plain.legends for t in lg.get_texts()]


def test_every_chapter_6_figure_has_a_phone_variant():
    """Does every figure cell of chapter 6 draw through planfigures.for_screens (wide and phone)?"""
    md = (ROOT / "book" / "plan-builder.md").read_text(encoding="utf-8")
    cells = re.findall(r"```\{code-cell\}[^\n]*\n(.*?)```", md, re.S)
    drawing = [c for c in cells if re.search(r"planfigures\.\w+_figure", c)]
    assert len(drawing) >= 6
    for c in drawing:
        last = c.rstrip().splitlines()[-1]
        assert last.startswith("planfigures.for_screens("), last
        assert "caption:" in c and "image:" not in c  # the alt text is the picture's own
