"""Does search_plans find every split that fits, in the order a full sort gives, timing only what it must?"""

from __future__ import annotations

import itertools

import pytest

import parallel_budget as pb
from parallel_budget.model import plansearch as PS
from parallel_budget.model import planterms as T
from parallel_budget.model.plansettings import settings

BASE = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32)
SPLIT = ("dp", "tp", "pp", "zero_stage", "micro_batch")


def key(p):
    return (p.step.magnitude, sum(c.bytes.magnitude for c in p.comm), p.memory.total.magnitude,
            (p.dp, p.tp, p.pp, p.zero_stage, p.micro_batch))


@pytest.mark.parametrize("extra", [{}, {"recompute": "full"}, {"schedule": "interleaved"}, {"schedule": "zbv"},
                                   {"schedule": "interleaved_zb", "recompute": "full"},
                                   {"inter_bw": "5 GB/s", "overlap_param_gather": True}])
def test_best_first_is_the_full_sort_of_every_fitting_split(extra):
    """Is the search every fitting split of 16 devices, in (step, bytes, memory, split) order, each as plan_budget?"""
    kw = {**BASE, **extra}
    r = pb.search_plans(devices=16, **kw)
    every = list(T.splits(settings(**kw), 16))
    assert r.candidates == len(every)
    budgets = [pb.plan_budget(**kw, **dict(zip(SPLIT, x))) for x in every]
    fitting = sorted((b for b in budgets if b.fits), key=key)
    assert len(r) == len(fitting) > 0
    assert [key(p) for p in r.plans] == [key(p) for p in fitting]
    assert r.best.step == fitting[0].step and r[3].memory == fitting[3].memory


def test_lower_bound_never_exceeds_the_step():
    """Is every candidate's lower bound at most its step read off the timeline (what makes best-first exact)?"""
    for extra in ({}, {"recompute": "full", "overlap_grad_reduce": False}, {"schedule": "gpipe"},
                  {"schedule": "interleaved", "virtual_stages": 4}, {"inter_bw": "2 GB/s"},
                  {"schedule": "interleaved_zb"}, {"schedule": "zbv", "recompute": "full"}):
        kw = {**BASE, **extra}
        s = settings(**kw)
        for split in T.splits(s, 16):
            b = pb.plan_budget(**kw, **dict(zip(SPLIT, split)))
            assert PS._lower_bound(s, *split) <= b.step.magnitude * (1 + 1e-12), (extra, split)


def test_the_first_plans_time_few_candidates():
    """Does giving out the ten fastest of 64 devices time far fewer splits than fit?"""
    r = pb.search_plans(devices=64, **{**BASE, "global_batch": 512})
    top = r.top(10)
    assert len(top) == 10 and r.timed < len(r) / 4
    assert [x[1]["step"] for x in top] == sorted(x[1]["step"] for x in top)


def test_splits_skip_what_the_plan_refuses():
    """Are ZeRO-2/3 with a pipeline, and interleaved splits of layers not divisible by p·v, never candidates?"""
    s = settings(**{**BASE, "schedule": "interleaved", "layers": 40})  # two virtual stages per rank
    every = list(T.splits(s, 16))
    assert all(not (pp > 1 and st >= 2) for _, _, pp, st, _ in every)
    assert {pp for _, _, pp, _, _ in every} == {1, 2, 4}  # pp = 8 divides 40 layers, 8 × 2 does not
    for dp, tp, pp in itertools.product((1, 2, 4, 8, 16), repeat=3):
        if dp * tp * pp == 16 and pp == 1 and 32 % dp == 0:
            assert any(x[:3] == (dp, tp, pp) for x in every)


def test_search_refuses_split_keywords():
    """Does search_plans refuse a dp it is meant to enumerate, in Chinese?"""
    with pytest.raises(ValueError, match="search_plans\\(\\) 自己枚举 dp"):
        pb.search_plans(devices=16, dp=4, **BASE)


def test_scaling_curve_is_devices_times_efficiency():
    """Does plan_scaling keep the split but dp, with speedup = devices × efficiency of that plan_budget?"""
    r = pb.plan_scaling(**BASE, dp=16, zero_stage=3)
    assert [p.dp for p in r.points] == [1, 2, 4, 8, 16, 32]
    for p in r.points:
        b = pb.plan_budget(**BASE, dp=p.dp, zero_stage=p.zero_stage)
        assert p.speedup == pytest.approx(p.devices * b.efficiency) and p.fits == b.fits
        assert p.step == b.step.magnitude
    assert r.points[0].zero_stage == 0 and r.points[-1].speedup < 32
    bw = pb.plan_scaling(**BASE, dp=16, zero_stage=1, over="inter_bw")
    assert [p.x for p in bw.points] == [25e9 * f for f in (0.125, 0.25, 0.5, 1, 2, 4, 8)]
    assert [p.efficiency for p in bw.points] == sorted(p.efficiency for p in bw.points)
    with pytest.raises(ValueError, match='over 只能是 "devices" 或 "inter_bw"'):
        pb.plan_scaling(**BASE, dp=16, over="nodes")
