"""Does the plan builder put the course's formulas together as the papers state them?

Outside checks, each citing its source:
* ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054), Table 1: 7.5B parameters, Nd = 4, 64, 1024.
* Korthikanti et al. 2022 (arXiv:2205.05198), Table 2: activation bytes per layer.
* Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053), section 3: two all-reduces in forward and two in
  backward per transformer layer, each of b·s·h activations.
"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

import parallel_budget as pb
from parallel_budget.model import plan as P

LLAMA = P.SHAPES["llama2-7b"]
BASE = dict(**LLAMA, global_batch=32, peak_flops=312e12, recompute="selective")


def gb(q):
    return q.to("GB").magnitude


# ZeRO paper, Table 1 (7.5B model, K = 12): per-device GB for DP baseline, Pos, Pos+g, Pos+g+p.
ZERO_TABLE_1 = {4: (120, 52.5, 41.3, 30), 64: (120, 31.4, 16.6, 1.88), 1024: (120, 30.1, 15.1, 0.12)}


@pytest.mark.parametrize("nd", sorted(ZERO_TABLE_1))
def test_zero_paper_table_1(nd):
    """Do the model states of a 7.5B model on Nd = 4, 64, 1024 replicas match the ZeRO paper's Table 1?"""
    for stage, paper in enumerate(ZERO_TABLE_1[nd]):
        b = pb.plan_budget(**{**BASE, "global_batch": nd}, params=7.5e9, dp=nd, zero_stage=stage)
        ours = gb(b.memory.states)
        # The paper prints three significant digits.
        assert ours == pytest.approx(paper, rel=0.006, abs=0.006), (nd, stage, ours, paper)


def korthikanti(s, b, h, a, t=1, sp=False, recompute="none"):
    """Table 2 of Korthikanti et al. 2022, typed independently of the package."""
    if recompute == "full":
        return 2 * s * b * h / (t if sp else 1)
    if recompute == "selective":
        return 34 * s * b * h / t if sp else s * b * h * (10 + 24 / t)
    if sp:
        return s * b * h * (34 + 5 * a * s / h) / t
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


@pytest.mark.parametrize("t, sp, recompute", [
    (1, False, "none"), (8, False, "none"), (8, True, "none"), (8, False, "selective"), (8, True, "selective"),
    (1, False, "full"), (4, True, "full"), (1, False, "selective"),
])
def test_korthikanti_table_2(t, sp, recompute):
    """Is one layer's activation memory Korthikanti's Table 2 (GPT-3 175B shape: s=2048, h=12288, a=96)?"""
    r = pb.activation_memory(2048, 1, 12288, 96, tp=t, sequence_parallel=sp, recompute=recompute)
    assert r.per_layer.to("B").magnitude == pytest.approx(korthikanti(2048, 1, 12288, 96, t, sp, recompute))


def test_korthikanti_no_parallelism_is_34_plus_5as_over_h():
    """Without parallelism, is it s·b·h·(34 + 5·a·s/h) bytes per layer?"""
    s, b, h, a = 4096, 2, 4096, 32
    r = pb.activation_memory(s, b, h, a)
    assert r.per_layer.magnitude == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    assert pb.activation_memory(s, b, h, a, recompute="selective").per_layer.magnitude == pytest.approx(34 * s * b * h)
    assert pb.activation_memory(s, b, h, a, recompute="full").per_layer.magnitude == pytest.approx(2 * s * b * h)


def test_in_flight_microbatches_per_schedule():
    """Does GPipe keep all m microbatches and 1F1B at most p (Korthikanti's L·34sbh/t for the first 1F1B stage)?"""
    kw = {**BASE, "sequence_parallel": True}
    one = pb.activation_memory(4096, 1, 4096, 32, tp=2, sequence_parallel=True, recompute="selective").per_layer
    f1b = pb.plan_budget(**kw, dp=2, tp=2, pp=4, micro_batch=1, schedule="1f1b")  # m = 16
    gpipe = pb.plan_budget(**kw, dp=2, tp=2, pp=4, micro_batch=1, schedule="gpipe")
    assert (f1b.memory.in_flight, gpipe.memory.in_flight) == (4, 16)
    assert f1b.memory.activations.magnitude == pytest.approx(one.magnitude * 32)  # L/p layers x p microbatches
    assert gpipe.memory.activations.magnitude == pytest.approx(one.magnitude * 8 * 16)
    assert f1b.step == gpipe.step  # same bubble, different memory


def test_megatron_tp_volume_on_the_intra_node_link():
    """Are TP's collectives 4 per layer and microbatch of b·s·h·2 bytes, ring-sent 2(t-1)/t, inside a node?"""
    b = pb.plan_budget(**{**BASE, "sequence_parallel": False}, dp=2, tp=4, pp=2, micro_batch=2)
    (tp,) = [c for c in b.comm if c.group == "tp"]
    layers, m = 32 // 2, 32 // (2 * 2)
    payload = 2 * 4096 * 4096 * 2  # b·s·h·2 bytes
    assert tp.calls == 4 * layers * m
    assert tp.bytes.magnitude == pytest.approx(4 * layers * m * payload * 2 * 3 / 4)
    assert tp.link == "intra" and tp.name == "TP all-reduce"
    wide = pb.plan_budget(**BASE, dp=1, tp=16, pp=1, micro_batch=1, devices_per_node=8)
    assert [c.link for c in wide.comm if c.group == "tp"] == ["inter"]
    assert "tp_inter" in P.verdict_codes(wide)


def test_dp_traffic_all_reduce_rs_ag_and_zero3():
    """Is DDP's traffic one ring all-reduce of the gradients, ZeRO-1/2 the same volume as RS + AG, ZeRO-3 1.5x?"""
    kw = {**BASE, "global_batch": 16}
    vol = {s: sum(c.bytes.magnitude for c in pb.plan_budget(**kw, dp=16, zero_stage=s).comm) for s in range(4)}
    grads = P.T.model_params(32, 4096, 11008, True, 32000, False) * 2
    assert vol[0] == pytest.approx(pb.ring_allreduce(16, grads, "1 GB/s").send_per_rank.magnitude)
    assert vol[1] == pytest.approx(vol[0]) and vol[2] == pytest.approx(vol[0])
    assert vol[3] == pytest.approx(1.5 * vol[0])  # one microbatch per replica here
    names = [c.name for c in pb.plan_budget(**kw, dp=16, zero_stage=2).comm]
    assert names == ["DP reduce-scatter", "DP all-gather"]


def test_pp_point_to_point_and_alpha_beta():
    """Does PP send each microbatch's activation and gradient (b·s·h·2 B), timed as calls·α + bytes/β?"""
    kw = {**BASE, "sequence_parallel": False, "latency": "10 us", "inter_bw": "25 GB/s"}
    b = pb.plan_budget(**kw, dp=1, tp=8, pp=2, micro_batch=1)
    (pp,) = [c for c in b.comm if c.group == "pp"]
    m = 32
    assert pp.link == "inter" and pp.calls == 2 * m
    assert pp.bytes.magnitude == pytest.approx(2 * m * 4096 * 4096 * 2)
    assert pp.time.magnitude == pytest.approx(2 * m * 10e-6 + pp.bytes.magnitude / 25e9)


def test_step_is_compute_plus_exposed_plus_bubble():
    """Is step = compute + exposed communication + bubble, bubble = (p-1)/m of the stage's work?"""
    b = pb.plan_budget(**BASE, dp=2, tp=2, pp=4, micro_batch=2)
    tp_time = sum(c.time for c in b.comm if c.group == "tp")
    assert b.bubble.magnitude == pytest.approx(pb.pipeline_bubble(4, 8).bubble_over_ideal * (b.compute + tp_time).magnitude)
    assert b.step.magnitude == pytest.approx((b.compute + b.exposed_comm + b.bubble).magnitude)
    assert b.tokens_per_s.magnitude == pytest.approx(32 * 4096 / b.step.magnitude)
    assert b.efficiency == pytest.approx((b.ideal / b.step).magnitude)
    assert b.compute > b.ideal  # selective recomputation costs time


def test_overlap_is_bounded_by_the_last_microbatch_backward():
    """Does DDP's all-reduce hide at most behind 2/3 of one microbatch's compute, and nothing with overlap=0?"""
    kw = {**BASE, "global_batch": 64, "inter_bw": "5 GB/s"}
    b = pb.plan_budget(**kw, dp=16, zero_stage=1, micro_batch=1)  # m = 4
    dp_time = sum(c.time for c in b.comm)
    assert b.hidden_comm.magnitude == pytest.approx(2 / 3 * b.compute.magnitude / 4)
    assert b.exposed_comm.magnitude == pytest.approx((dp_time - b.hidden_comm).magnitude)
    none = pb.plan_budget(**kw, overlap=0, dp=16, zero_stage=1, micro_batch=1)
    assert none.hidden_comm.magnitude == 0 and none.exposed_comm == dp_time


def test_bits_and_bytes_give_the_same_plan_and_the_verdict_says_bytes():
    """Is "200 Gb/s" read as 25 GB/s, and does the verdict state the unit it used?"""
    a = pb.plan_budget(**BASE, inter_bw="25 GB/s", dp=16, zero_stage=1)
    b = pb.plan_budget(**BASE, inter_bw="200 Gb/s", dp=16, zero_stage=1)
    assert a.step == b.step and a.comm == b.comm
    assert any("25 GB/s" in r and "200 Gb/s" in r for r in b.verdict)
    slow = pb.plan_budget(**BASE, inter_bw="25 Gb/s", dp=16, zero_stage=1)
    assert slow.comm[0].time.magnitude == pytest.approx(8 * a.comm[0].time.magnitude, rel=1e-3)


def test_global_batch_is_unchanged_and_stated():
    """Does the plan keep the global batch (dp × micro_batch × microbatches) and refuse a split that cannot?"""
    b = pb.plan_budget(**BASE, dp=4, tp=2, pp=2, micro_batch=2)
    assert b.dp * b.micro_batch * b.microbatches == 32
    assert any("全局 batch 不变" in r and "32 = dp 4 × micro_batch 2 × 微批次数 4" in r for r in b.verdict)
    with pytest.raises(ValueError, match="global_batch=32 不是 dp×micro_batch=3×1"):
        pb.plan_budget(**BASE, dp=3)


def test_params_from_the_llama_shape():
    """Is Llama 2 7B's count from its shape within 0.01% of its 6,738,415,616 parameters (norms ignored)?"""
    b = pb.plan_budget(**BASE, dp=16)
    assert b.params == pytest.approx(6_738_415_616, rel=1e-4)
    assert pb.plan_budget(**BASE, params="7B", dp=16).params == 7e9


@pytest.mark.parametrize("kw, words", [
    ({"layers": "x"}, "参数 layers"),
    ({"inter_bw": "25 GB"}, "参数 inter_bw 需要带宽"),
    ({"device_memory": "80 GB/s"}, "参数 device_memory 需要数据量"),
    ({"zero_stage": 4}, "zero_stage 只能是 0、1、2、3"),
    ({"schedule": "zigzag"}, 'schedule 只能是 "gpipe"、"1f1b"'),
    ({"recompute": "half"}, "recompute 只能是"),
    ({"tp": 3}, "tp=3 不能整除 heads=32"),
    ({"pp": 3}, "pp=3 不能整除 layers=32"),
    ({"peak_flops": None}, "需要 compute"),
    ({"mfu": 1.5}, "参数 mfu 需要 0 到 1"),
    ({"latency": -1}, "参数 latency 不能为负数"),
])
def test_bad_input_is_a_chinese_message_naming_the_argument(kw, words):
    """Does each bad input raise one ValueError in Chinese that names the argument and what is accepted?"""
    with pytest.raises(ValueError) as e:
        pb.plan_budget(**{**BASE, "dp": 16, **kw})
    assert words in str(e.value)
    assert "plan_budget()" in str(e.value)


def test_measured_compute_instead_of_flops():
    """Does a measured one-device compute time split over the devices (selective recompute adds attention)?"""
    b = pb.plan_budget(**{**BASE, "peak_flops": None}, compute="160 s", dp=16)
    assert b.ideal.to("s").magnitude == pytest.approx(10)
    assert 10 < b.compute.to("s").magnitude < 11


def test_results_are_frozen_quantities():
    """Are the budget and its parts frozen dataclasses of pint Quantities of the course registry?"""
    b = pb.plan_budget(**BASE, dp=2, tp=2, pp=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.step = 0
    for q in (b.memory.states, b.memory.activations, b.memory.temporary, b.memory.total, b.compute,
              b.exposed_comm, b.bubble, b.step, *(c.bytes for c in b.comm), *(c.time for c in b.comm)):
        assert isinstance(q, pb.ureg.Quantity)
    assert isinstance(b.fits, bool) and all(isinstance(r, str) for r in b.verdict + b.assumptions)


def test_zero3_temporary_gather_is_two_layers():
    """Does ZeRO-3 add two layers' gathered parameters (this TP shard) to the temporary memory, others none?"""
    z3 = pb.plan_budget(**BASE, dp=8, tp=2, zero_stage=3)
    z2 = pb.plan_budget(**BASE, dp=8, tp=2, zero_stage=2)
    layer = P.T.layer_params(4096, 11008, True)
    assert z3.memory.gather.magnitude == pytest.approx(2 * layer / 2 * 2)
    assert z2.memory.gather.magnitude == 0


def test_search_returns_every_fitting_split_fastest_first():
    """Does search_plans try every split of 16 devices, keep exactly those that fit, ordered by step time?"""
    r = pb.search_plans(devices=16, **BASE)
    every = list(P.splits(P.settings(**BASE), 16))
    assert r.candidates == len(every)
    fitting = [x for x in every if pb.plan_budget(**BASE, **dict(zip(("dp", "tp", "pp", "zero_stage", "micro_batch"), x))).fits]
    assert len(r) == len(fitting) > 0
    steps = [p.step.magnitude for p in r]
    assert steps == sorted(steps) and all(p.fits for p in r)
    best = r.best
    again = pb.plan_budget(**BASE, dp=best.dp, tp=best.tp, pp=best.pp, zero_stage=best.zero_stage, micro_batch=best.micro_batch)
    assert again.step == best.step and again.memory == best.memory
    for dp, tp, pp in itertools.product(range(1, 17), repeat=3):
        if dp * tp * pp == 16 and 32 % tp == 0 and 32 % pp == 0 and 32 % dp == 0:
            assert any(x[:3] == (dp, tp, pp) for x in every)


def test_search_refuses_split_keywords():
    """Does search_plans refuse a dp it is meant to enumerate, in Chinese?"""
    with pytest.raises(ValueError, match="search_plans\\(\\) 自己枚举 dp"):
        pb.search_plans(devices=16, dp=4, **BASE)


from hypothesis import given, settings, strategies as st  # noqa: E402

SPLITS = [x for x in P.splits(P.settings(**BASE), 16)]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SPLITS), st.sampled_from(["none", "selective", "full"]), st.sampled_from(["1f1b", "gpipe"]),
       st.floats(0, 1), st.sampled_from(["25 GB/s", "200 Gb/s", "5 GB/s"]))
def test_budget_invariants(split, recompute, schedule, overlap, inter_bw):
    """For any split: hidden ≤ overlap·DP traffic and ≤ the backward window, step ≥ compute ≥ ideal, parts add up?"""
    dp, tp, pp, stage, mb = split
    b = pb.plan_budget(**{**BASE, "recompute": recompute, "schedule": schedule, "overlap": overlap, "inter_bw": inter_bw},
                       dp=dp, tp=tp, pp=pp, zero_stage=stage, micro_batch=mb)
    dp_time = sum(c.time.magnitude for c in b.comm if c.overlappable)
    window = b.compute.magnitude * (1 if stage == 3 else 1 / b.microbatches) * pb.BACKWARD_SHARE
    assert b.hidden_comm.magnitude <= overlap * dp_time * (1 + 1e-12) + 1e-15
    assert b.hidden_comm.magnitude <= window * (1 + 1e-12)
    assert b.step >= b.compute >= b.ideal
    m = b.memory
    assert m.total.magnitude == pytest.approx((m.states + m.activations + m.temporary).magnitude)
    assert m.states.magnitude == pytest.approx((m.param_state + m.grad_state + m.optim_state).magnitude)
    assert b.fits == (m.total.magnitude <= 80e9)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([s for s in SPLITS if s[0] > 1 and s[3] == 0]))
def test_zero_stages_never_add_state(split):
    """Does each higher ZeRO stage keep or shrink the resident states, for the same split?"""
    dp, tp, pp, _, mb = split
    states = [pb.plan_budget(**BASE, dp=dp, tp=tp, pp=pp, zero_stage=s, micro_batch=mb).memory.states for s in range(4)]
    assert states == sorted(states, reverse=True)
