"""Do the plan builder's drawings (layouts and matplotlib figures) show the package's numbers, in Chinese?"""

from __future__ import annotations

import re

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import parallel_budget as pb  # noqa: E402
from conftest import ROOT  # noqa: E402
from parallel_budget.book import planfigures, planlayout  # noqa: E402
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
