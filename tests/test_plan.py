"""Does the plan builder put the course's formulas together as the papers state them?

Outside checks, each citing its source (the chapter cites the same):
* ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054), Table 1: 7.5B parameters, Nd = 4, 64, 1024;
  section 7: ZeRO-3 moves 1.5× the data of DDP (all-gather in forward and backward, reduce-scatter).
* Korthikanti et al. 2022 (arXiv:2205.05198), Table 2, all six rows: activation bytes per layer;
  section 5: MFU counts the model's FLOPs, HFU the hardware's (with recomputation).
* PaLM (Chowdhery et al. 2022), appendix B: MFU = model FLOPs per token × tokens/s ÷ peak.
* Megatron-LM (Shoeybi et al. 2019, arXiv:1909.08053), section 3: two all-reduces in forward and two in
  backward per layer; Korthikanti section 4.2.2: sequence parallelism turns each into an all-gather and a
  reduce-scatter of the same volume; section 5: full recomputation repeats the forward's.
* Llama 2 (Touvron et al. 2023, Table 1 and config.json): 6,738,415,616 and 68,976,648,192 parameters.
"""

from __future__ import annotations

import dataclasses

import pytest

import parallel_budget as pb
from parallel_budget.model import planterms as T

LLAMA = dict(model="llama2-7b", cluster="a100-40gb")
BASE = dict(**LLAMA, global_batch=32)


def gb(q):
    return q.to("GB").magnitude


# ZeRO paper, Table 1 (7.5B model, K = 12): per-device GB for DP baseline, Pos, Pos+g, Pos+g+p.
ZERO_TABLE_1 = {4: (120, 52.5, 41.3, 30), 64: (120, 31.4, 16.6, 1.88), 1024: (120, 30.1, 15.1, 0.12)}


@pytest.mark.parametrize("nd", sorted(ZERO_TABLE_1))
def test_zero_paper_table_1(nd):
    """Do the model states of a 7.5B model on Nd = 4, 64, 1024 replicas match the ZeRO paper's Table 1?"""
    for stage, paper in enumerate(ZERO_TABLE_1[nd]):
        b = pb.plan_budget(**{**BASE, "global_batch": nd}, params=7.5e9, dp=nd, zero_stage=stage)
        # The paper prints three significant digits.
        assert gb(b.memory.states) == pytest.approx(paper, rel=0.006, abs=0.006), (nd, stage)


def korthikanti(row, s, b, h, a, t):
    """Table 2 of Korthikanti et al. 2022, typed from the paper, independently of the package."""
    return {
        "no parallelism": s * b * h * (34 + 5 * a * s / h),
        "tensor parallel (baseline)": s * b * h * (10 + 24 / t + 5 * a * s / (h * t)),
        "tensor + sequence parallel": s * b * h * (34 / t + 5 * a * s / (h * t)),
        "tensor parallel + selective recomputation": s * b * h * (10 + 24 / t),
        "tensor + sequence parallel + selective recomputation": s * b * h * 34 / t,
        "full recomputation": s * b * h * 2,
    }[row]


TABLE_2 = {  # row -> (tp, sequence_parallel, recompute)
    "no parallelism": (1, False, "none"),
    "tensor parallel (baseline)": (8, False, "none"),
    "tensor + sequence parallel": (8, True, "none"),
    "tensor parallel + selective recomputation": (8, False, "selective"),
    "tensor + sequence parallel + selective recomputation": (8, True, "selective"),
    "full recomputation": (8, False, "full"),
}


@pytest.mark.parametrize("row", TABLE_2)
def test_korthikanti_table_2(row):
    """Is one layer's activation memory the row of Korthikanti's Table 2 (GPT-3 175B: s=2048, h=12288, a=96)?"""
    t, sp, rc = TABLE_2[row]
    r = pb.activation_memory(2048, 1, 12288, 96, tp=t, sequence_parallel=sp, recompute=rc)
    assert r.per_layer.to("B").magnitude == pytest.approx(korthikanti(row, 2048, 1, 12288, 96, t))


def test_activation_options_follow_their_documented_terms():
    """Do no dropout, a gated MLP of width f, FlashAttention and grouped K/V change exactly their terms?"""
    s, b, h, a, f = 4096, 2, 4096, 32, 11008
    sbh = s * b * h
    per = lambda **kw: pb.activation_memory(s, b, h, a, **kw).per_layer.magnitude  # noqa: E731
    assert per(dropout=False) == pytest.approx(sbh * (32 + 2 * a * s / h))  # no masks; softmax output once
    assert per(ffn=f, gated=True) == pytest.approx(sbh * (18 + 6 * f / h + 5 * a * s / h))
    assert per(ffn=f) == pytest.approx(sbh * (18 + 4 * f / h + 5 * a * s / h))  # 4h: the paper's 34
    assert per(flash_attention=True) == pytest.approx(sbh * 34 + 4 * a * s * b)  # softmax statistics, fp32
    assert per(kv_heads=8) == pytest.approx(sbh * (34 - 4 + 4 * 8 / a + 5 * a * s / h))
    llama = per(ffn=f, gated=True, dropout=False, flash_attention=True)
    assert llama == pytest.approx(sbh * (8 + 4 + 4 + 6 * f / h) + 4 * a * s * b)
    full = pb.activation_memory(s, b, h, a, ffn=f, gated=True, dropout=False, flash_attention=True, recompute="full")
    assert full.per_layer.magnitude == 2 * sbh and full.working.magnitude == pytest.approx(llama)


def test_the_llama_example_uses_llamas_options():
    """Does the llama2-7b preset have no dropout, a SwiGLU MLP of 11008 and FlashAttention, so 3.25 GB → 0.54 GB?"""
    assert pb.MODELS["llama2-7b"] | {"dropout": False, "flash_attention": True, "gated": True} == pb.MODELS["llama2-7b"]
    paper = pb.activation_memory(4096, 1, 4096, 32).per_layer  # the paper's layer with Llama's shape
    llama = pb.activation_memory(4096, 1, 4096, 32, ffn=11008, gated=True, dropout=False, flash_attention=True)
    assert pb.fmt(paper) == "3.25 GB" and pb.fmt(llama.per_layer) == "0.539 GB"
    b = pb.plan_budget(**BASE, dp=16, zero_stage=3)
    assert b.memory.activations.magnitude == pytest.approx(32 * llama.per_layer.magnitude)


@pytest.mark.parametrize("name, count", [("llama2-7b", 6_738_415_616), ("llama2-70b", 68_976_648_192)])
def test_params_from_the_llama_shapes(name, count):
    """Is each preset's count from its shape within 0.01% of the released model (norms ignored)?"""
    b = pb.plan_budget(model=name, cluster="h100-80gb", global_batch=64, dp=8, pp=8 if "70" in name else 1,
                       zero_stage=1)
    assert b.params == pytest.approx(count, rel=1e-4)


def test_zero_dp_volume_per_stage_and_zero3_is_one_and_a_half_ddp():
    """Per step, is ZeRO-1's DP traffic DDP's, ZeRO-2's (m+1)/2 of it, ZeRO-3's 3m/2 (1.5× for one microbatch)?"""
    sent = lambda gb_, st: sum(c.bytes.magnitude for c in pb.plan_budget(  # noqa: E731
        **{**BASE, "global_batch": gb_}, dp=16, zero_stage=st).comm)
    for m in (1, 4):
        ddp = sent(16 * m, 0)
        assert ddp == pytest.approx(pb.ring_allreduce(16, pb.MODELS and pb.plan_budget(
            **BASE, dp=16).params * 2, "1 GB/s").send_per_rank.magnitude)
        assert sent(16 * m, 1) == pytest.approx(ddp)
        assert sent(16 * m, 2) == pytest.approx(ddp * (m + 1) / 2)
        assert sent(16 * m, 3) == pytest.approx(ddp * 3 * m / 2)
    zc = pb.zero_communication(pb.plan_budget(**BASE, dp=16).params, 16, 3)
    assert zc.relative_to_ddp == pytest.approx(1.5)


def test_megatron_tp_collectives_per_layer():
    """Per layer and microbatch: 4 all-reduces of b·s·h·2 B (8 calls with SP, same bytes), 6 under full recompute?"""
    kw = {**BASE, "sequence_parallel": False}
    layers, m = 32 // 2, 32 // (2 * 2)
    payload = 2 * 4096 * 4096 * 2
    for rc, per in (("none", 4), ("selective", 4), ("full", 6)):
        b = pb.plan_budget(**{**kw, "recompute": rc}, dp=2, tp=4, pp=2, micro_batch=2)
        (tp,) = [c for c in b.comm if c.group == "tp"]
        assert tp.calls == per * layers * m and tp.name == "TP all-reduce" and tp.link == "intra"
        assert tp.bytes.magnitude == pytest.approx(per * layers * m * payload * 2 * 3 / 4)
        sp = [c for c in pb.plan_budget(**{**BASE, "recompute": rc}, dp=2, tp=4, pp=2, micro_batch=2).comm
              if c.group == "tp"][0]
        assert sp.calls == 2 * tp.calls and sp.bytes == tp.bytes and sp.name == "TP all-gather + reduce-scatter"
        assert tp.exposed.magnitude == pytest.approx(tp.time.magnitude)  # between the layers' matmuls: nothing hides it
    wide = pb.plan_budget(**BASE, dp=1, tp=16, pp=1, micro_batch=1, devices_per_node=8, zero_stage=0)
    assert [c.link for c in wide.comm if c.group == "tp"] == ["inter"]
    assert "tp_inter" in pb.model.planreport.verdict_codes(wide)


def test_mfu_and_hfu_are_korthikanti_and_palm():
    """Is MFU model FLOPs / (step·devices·peak), HFU with recomputation, and efficiency = MFU / input hfu?"""
    for rc in ("none", "selective", "full"):
        b = pb.plan_budget(**BASE, dp=16, zero_stage=3, recompute=rc)
        model, run, _ = T.train_flops(b.params, 32 * 4096, 32, 4096, 4096, rc)
        peak = 312e12
        assert b.mfu == pytest.approx(model / (b.step.magnitude * 16 * peak))
        assert b.hfu == pytest.approx(run / (b.step.magnitude * 16 * peak))
        assert b.efficiency == pytest.approx(b.mfu / 0.4)
        assert (b.mfu == pytest.approx(b.hfu)) == (rc == "none")
    palm = 6 * b.params + 12 * 32 * 4096 * 4096  # PaLM appendix B: model FLOPs per token
    assert b.mfu == pytest.approx(palm * b.tokens_per_s.magnitude / (16 * 312e12))
    measured = pb.plan_budget(**{**BASE, "peak_flops": None}, compute="160 s", dp=16, zero_stage=3)
    assert measured.mfu is None and measured.ideal.to("s").magnitude == pytest.approx(10)


def test_step_is_compute_plus_exposed_plus_bubble():
    """Is the step read off the timeline the sum of busy compute, exposed communication and bubble?"""
    for split in ((2, 2, 4, 1, 2), (16, 1, 1, 3, 1), (4, 4, 1, 0, 2), (1, 2, 8, 0, 1), (2, 1, 8, 1, 1)):
        dp, tp, pp, st, mb = split
        b = pb.plan_budget(**BASE, dp=dp, tp=tp, pp=pp, zero_stage=st, micro_batch=mb, recompute="selective")
        assert b.step.magnitude == pytest.approx((b.compute + b.exposed_comm + b.bubble).magnitude, rel=1e-12)
        assert b.exposed_comm.magnitude == pytest.approx(sum(c.exposed.magnitude for c in b.comm))
        assert b.tokens_per_s.magnitude == pytest.approx(32 * 4096 / b.step.magnitude)
        assert b.compute > b.ideal and b.efficiency == pytest.approx((b.ideal / b.step).magnitude)
        for c in b.comm:  # α-β time of its calls, read back off the timeline
            rounds = {"DP all-reduce": 2 * (c.ranks - 1), "PP send/recv": 1}.get(c.name, c.ranks - 1)
            if c.name == "TP all-reduce":
                rounds = 2 * (c.ranks - 1)
            stride = {"dp": tp, "tp": 1}.get(c.group)  # a send uses one port
            first = T.boundary_links(tp, dp, pp, 8)[0]  # 1F1B: the first rank hears only from rank 1
            bw = T.group_bandwidth(stride, c.ranks, 8, 300e9, 25e9) if stride else (300e9 if first == "intra" else 25e9)
            assert c.time.magnitude == pytest.approx(c.calls * rounds * 5e-6 + c.bytes.magnitude / bw)
            assert 0 <= c.exposed <= c.time * (1 + 1e-12)


def test_bits_and_bytes_give_the_same_plan_and_the_verdict_says_bytes():
    """Is "200 Gb/s" read as 25 GB/s, and does the verdict state the unit it used?"""
    a = pb.plan_budget(**BASE, inter_bw="25 GB/s", dp=16, zero_stage=3)
    b = pb.plan_budget(**BASE, inter_bw="200 Gb/s", dp=16, zero_stage=3)
    assert a.step == b.step and a.comm == b.comm
    assert any("25 GB/s" in r and "200 Gb/s" in r for r in b.verdict)
    slow = pb.plan_budget(**BASE, inter_bw="25 Gb/s", dp=16, zero_stage=3)
    assert slow.comm[0].bytes == a.comm[0].bytes and slow.step > a.step and slow.exposed_comm > 5 * a.exposed_comm
    for x, y in zip(a.comm, slow.comm):  # the bandwidth term eightfold, the latency term unchanged
        latency = x.calls * (x.ranks - 1) * 5e-6
        assert y.time.magnitude - latency == pytest.approx(8 * (x.time.magnitude - latency))


def test_global_batch_is_unchanged_and_stated():
    """Does the plan keep the global batch (dp × micro_batch × microbatches) and refuse a split that cannot?"""
    b = pb.plan_budget(**BASE, dp=4, tp=2, pp=2, micro_batch=2)
    assert b.dp * b.micro_batch * b.microbatches == 32
    assert any("32 = dp 4 × micro_batch 2 × 微批次数 4" in r for r in b.verdict)
    with pytest.raises(ValueError, match="global_batch=32 不是 dp×micro_batch=3×1"):
        pb.plan_budget(**BASE, dp=3)


@pytest.mark.parametrize("kw, words", [
    ({"layers": "x"}, "参数 layers"),
    ({"inter_bw": "25 GB"}, "参数 inter_bw 需要带宽"),
    ({"device_memory": "80 GB/s"}, "参数 device_memory 需要数据量"),
    ({"zero_stage": 4}, "zero_stage 只能是 0、1、2、3"),
    ({"schedule": "zigzag"}, 'schedule 只能是 "gpipe"、"1f1b"、"interleaved"'),
    ({"recompute": "half"}, "recompute 只能是"),
    ({"tp": 3}, "tp=3 不能整除 heads=32"),
    ({"pp": 3}, "pp=3 不能整除 layers=32"),
    ({"cluster": None, "peak_flops": None}, "需要 compute"),
    ({"hfu": 1.5}, "参数 hfu 需要 0 到 1"),
    ({"mfu": 0.4}, "没有参数 mfu：计算速度的输入是 hfu"),
    ({"overlap": 1}, "没有参数 overlap"),
    ({"latency": -1}, "参数 latency 不能为负数"),
    ({"model": "llama3-8b"}, "参数 model 不认识 'llama3-8b'。可用：\"llama2-7b\"、\"llama2-70b\""),
    ({"cluster": "tpu-v5"}, "参数 cluster 不认识 'tpu-v5'"),
    ({"pp": 2, "zero_stage": 2}, "zero_stage=2 不能与 pp=2 同用"),
    ({"pp": 2, "zero_stage": 3}, "DeepSpeed 的流水线引擎因此只接受 ZeRO-0/1"),
    ({"pp": 4, "schedule": "interleaved", "virtual_stages": 3}, "layers=32 能被 pp×virtual_stages=4×3=12 整除"),
    ({"pp": 4, "schedule": "interleaved", "virtual_stages": 1}, "至少要有 2 个虚拟阶段"),
    ({"pp": 2, "virtual_stages": 2}, "virtual_stages=2 只用于 schedule=\"interleaved\""),
    ({"kv_heads": 5}, "kv_heads=5 整除"),
    ({"bucket": 0}, "参数 bucket 必须大于 0"),
])
def test_bad_input_is_a_chinese_message_naming_the_argument(kw, words):
    """Does each bad input raise one ValueError in Chinese that names the argument and what is accepted?"""
    with pytest.raises(ValueError) as e:
        pb.plan_budget(**{**BASE, "dp": 16 // kw.get("pp", 1), "zero_stage": 0, **kw})
    assert words in str(e.value)
    assert "plan_budget()" in str(e.value)


def test_interleaved_rounds_are_torchs_rule():
    """Does interleaved 1F1B refuse m not a multiple of max(1, m // p), as ScheduleInterleaved1F1B does?"""
    with pytest.raises(ValueError, match="ScheduleInterleaved1F1B"):  # m = 11 microbatches, 4 stages
        pb.plan_budget(**{**BASE, "global_batch": 11}, dp=1, pp=4, tp=4, schedule="interleaved")
    ok = pb.plan_budget(**{**BASE, "global_batch": 10}, dp=1, pp=4, tp=4, schedule="interleaved")
    assert ok.virtual_stages == 2 and ok.microbatches == 10


def test_preset_is_a_copy_and_keywords_override_it():
    """Are presets copies, and does an explicit keyword win over the preset's?"""
    p = pb.preset("model", "llama2-7b")
    p["layers"] = 1
    assert pb.MODELS["llama2-7b"]["layers"] == 32
    b = pb.plan_budget(**BASE, dp=16, zero_stage=3, device_memory="80 GiB")
    assert b.settings["device_memory"] == 80 * 2**30 and b.settings["peak_flops"] == 312e12


def test_results_are_frozen_quantities():
    """Are the budget and its parts frozen dataclasses of pint Quantities of the course registry?"""
    b = pb.plan_budget(**BASE, dp=2, tp=2, pp=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.step = 0
    for q in (b.memory.states, b.memory.activations, b.memory.temporary, b.memory.total, b.compute,
              b.exposed_comm, b.bubble, b.step, *(c.bytes for c in b.comm), *(c.time for c in b.comm),
              *(c.exposed for c in b.comm)):
        assert isinstance(q, pb.ureg.Quantity)
    assert isinstance(b.fits, bool) and all(isinstance(r, str) for r in b.verdict + b.assumptions)


def test_zero3_temporary_buffers_are_two_layers_and_one_layer_of_gradients():
    """Does ZeRO-3 hold two gathered layers and one layer's full gradients (this TP shard), others none?"""
    z3 = pb.plan_budget(**BASE, dp=8, tp=2, zero_stage=3)
    z2 = pb.plan_budget(**BASE, dp=8, tp=2, zero_stage=2)
    assert z3.memory.gather.magnitude == pytest.approx((2 * 2 + 2) * z3.params / 2 / 32)
    assert z2.memory.gather.magnitude == 0


@pytest.mark.parametrize("split", [(16, 1, 1, 3, 1), (16, 1, 1, 0, 1), (2, 2, 4, 1, 1)])
def test_verdict_never_contradicts_itself(split):
    """Do the sentences agree: fits with ≤, the largest overhead named, and "全是计算" naming the recomputation?"""
    dp, tp, pp, st, mb = split
    for rc in ("none", "selective"):
        b = pb.plan_budget(**{**BASE, "inter_bw": "1000 GB/s", "intra_bw": "10000 GB/s"}, dp=dp, tp=tp, pp=pp,
                           zero_stage=st, micro_batch=mb, recompute=rc)
        text = " ".join(b.verdict)
        assert ("放得下" in text) == b.fits and ("放不下" in text) != b.fits
        if "全是" in text:
            assert pb.fmt_percent(b.efficiency) in text
            assert ("重算" in text) == (b.efficiency < 1 - 1e-9)
        assert "NaN" not in text and "None" not in text


def test_a_group_across_nodes_uses_a_port_per_device_in_each_node():
    """Does a ring across nodes get g ports' bandwidth (g devices of it per node), capped by the node's links?

    DGX A100/H100 nodes have one InfiniBand port per GPU, and NCCL's rings (channels) leave a node through
    different ports: bus bandwidth = channels × per-channel speed (NCCL src/graph/tuning.cc); 4 HDR ports
    per node give about 100 GB/s bus bandwidth (NVIDIA/nccl-tests issues 100, 152).
    """
    gbw = lambda stride, size: T.group_bandwidth(stride, size, 8, 300e9, 25e9)  # noqa: E731
    assert gbw(1, 8) == 300e9  # inside a node
    assert gbw(1, 16) == 200e9 and gbw(2, 8) == 100e9 and gbw(8, 2) == 25e9 and gbw(16, 4) == 25e9
    assert T.group_bandwidth(1, 16, 8, 300e9, 50e9) == 300e9  # 8 × 50 GB/s is more than NVLink carries
    for (dp, tp), bw in {(16, 1): 200e9, (8, 2): 100e9, (2, 8): 25e9}.items():
        b = pb.plan_budget(**BASE, dp=dp, tp=tp, zero_stage=1)
        ag = next(c for c in b.comm if c.name == "DP all-gather")
        assert ag.link == "inter"
        assert ag.time.magnitude == pytest.approx(ag.calls * (dp - 1) * 5e-6 + ag.bytes.magnitude / bw)
    h100 = pb.plan_budget(model="llama2-7b", cluster="h100-80gb", global_batch=32, dp=16, zero_stage=1)
    ag = next(c for c in h100.comm if c.name == "DP all-gather")
    assert ag.time.magnitude == pytest.approx(ag.calls * 15 * 5e-6 + ag.bytes.magnitude / 400e9)


def test_latency_per_ring_step_is_close_to_nccls_cost_model():
    """Is the default α per ring step within 30 % of NCCL's own latency model for the chapter's rings?

    NCCL src/graph/tuning.cc, Simple protocol: ring latency = 8.4 µs + (steps − inter-node steps) × 3.4 µs
    (NVLink) + inter-node steps × 9.6 µs; steps 2(R−1) for all-reduce, R−1 for reduce-scatter and all-gather.
    """
    alpha = pb.plan_budget(**BASE, dp=16).settings["latency"]
    assert alpha == pytest.approx(5e-6)

    def nccl(collective, ranks, nodes):
        steps, inter = (2 * (ranks - 1), 2 * (nodes - 1)) if collective == "all-reduce" else (ranks - 1, nodes - 1)
        return 8.4e-6 + (steps - inter) * 3.4e-6 + inter * 9.6e-6

    for collective in ("all-reduce", "reduce-scatter", "all-gather"):
        for ranks, nodes in ((16, 2), (8, 1)):
            ours = T.call_time(collective, ranks, alpha, 0.0, 1.0)
            assert 0.7 < ours / nccl(collective, ranks, nodes) < 1.3
