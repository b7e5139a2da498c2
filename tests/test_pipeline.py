"""Does the pipeline timeline schedule GPipe and 1F1B as PyTorch runs them, and agree with the one-number formulas?"""

from __future__ import annotations

import pytest

import parallel_budget as pb
from parallel_budget.model.pipeline import pipeline_timeline


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("stages", [2, 3, 4, 8])
@pytest.mark.parametrize("microbatches", [1, 2, 3, 4, 8, 16])
def test_timeline_idles_the_bubble_and_holds_in_flight(schedule, stages, microbatches):
    """With equal stage times, is the idle share (p-1)/(m+p-1) and the peak held per stage pipeline_in_flight's?"""
    t = pipeline_timeline(stages, microbatches, schedule, "10 ms", "20 ms")
    assert t.idle_fraction == pytest.approx(pb.pipeline_bubble(stages, microbatches).idle_fraction)
    assert t.in_flight == pb.pipeline_in_flight(stages, microbatches, schedule).per_stage
    assert t.makespan.to("ms").magnitude == pytest.approx((microbatches + stages - 1) * 30)


def test_each_stage_runs_the_schedules_order():
    """Are a stage's timed actions schedule.pipeline_order's (torch's runtime order, held to torch in test_schedule)?"""
    from parallel_budget.model.schedule import pipeline_order

    for key in ("gpipe", "1f1b"):
        t = pipeline_timeline(4, 8, key, "1 ms", "2 ms")
        assert [tuple((a.stage, a.kind, a.microbatch) for a in st) for st in t.actions] == list(pipeline_order(key, 4, 8))


def test_every_action_waits_for_its_input():
    """Does no forward start before the previous stage's, and no backward before the next stage's, has ended?"""
    t = pipeline_timeline(4, 6, "1f1b", "1 ms", "3 ms")
    end = {(a.kind, a.stage, a.microbatch): a.end for st in t.actions for a in st}
    for st in t.actions:
        for a in st:
            dep = ("F", a.stage - 1, a.microbatch) if a.kind == "F" else ("B", a.stage + 1, a.microbatch)
            if dep in end:
                assert a.start >= end[dep] - 1e-12
        assert all(x.end <= y.start + 1e-12 for x, y in zip(st, st[1:]))  # one action at a time


@pytest.mark.parametrize("call, arg", [
    (lambda: pipeline_timeline(4, 8, "zero-bubble"), "schedule"),
    (lambda: pipeline_timeline(0, 8), "stages"),
    (lambda: pipeline_timeline(4, 8, "1f1b", "0 ms"), "forward"),
    (lambda: pipeline_timeline(4, 0), "microbatches"),
])
def test_bad_input_is_named_in_chinese(call, arg):
    """Is a bad argument refused with a Chinese message naming it?"""
    with pytest.raises(ValueError, match=arg) as info:
        call()
    assert any("\u4e00" <= ch <= "\u9fff" for ch in str(info.value))
