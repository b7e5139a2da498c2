"""Does the nccl-tests fit read the real table, recover α and bus bandwidth, refuse anything else, and feed the plan?"""

import pytest

import parallel_budget as pb
from parallel_budget.model.calibration import nccl_tests_text

KW = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32)

# The head and three rows of an all_reduce_perf run on 2 × 8 H100 (the shape of public nccl-tests output).
REAL = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
""" + "".join(f"#  Rank {r:2d} Group  0 Pid {6899 + r:6d} on host-{r // 8} device {r % 8:2d} [0000:04:00] NVIDIA H100 80GB HBM3\n"
              for r in range(16)) + """\
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    107.5    9.75   18.29      0    106.9    9.81   18.39      0
   268435456      67108864     float     sum      -1   5523.1   48.60   91.13      0   5520.4   48.63   91.18      0
  8589934592    2147483648     float     sum      -1   166012   51.74   97.02      0   165950   51.76   97.05      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 68.8
#
"""


@pytest.mark.parametrize("coll", ["all-reduce", "all-gather", "reduce-scatter"])
@pytest.mark.parametrize("ranks", [2, 8, 16])
def test_fit_recovers_alpha_and_bandwidth_of_a_table_made_by_the_model(coll, ranks):
    """Does the fit of a table the α-β model printed (nccl-tests' rounding) give back α and busbw within 2 %?"""
    text = nccl_tests_text(coll, ranks, "23 us", "87 GB/s")
    fit = pb.fit_nccl_tests(text)
    assert (fit.collective, fit.ranks) == (coll, ranks)
    assert fit.alpha.to("us").magnitude == pytest.approx(23, rel=0.02)
    assert fit.bus_bandwidth.to("GB/s").magnitude == pytest.approx(87, rel=0.02)
    assert fit.max_error < 0.01


def test_fit_reads_a_real_table():
    """Does a real all_reduce_perf output (16 ranks) give its busbw at large messages and a latency of tens of µs?"""
    fit = pb.fit_nccl_tests(REAL)
    assert (fit.collective, fit.ranks, fit.points) == ("all-reduce", 16, 6)
    assert 90 < fit.bus_bandwidth.to("GB/s").magnitude < 100
    assert 0 < fit.alpha.to("us").magnitude < 100
    # time = α + 2(R−1)/R · size / busbw reproduces the table
    assert fit.time(pb.Q_(268435456, "B")).to("us").magnitude == pytest.approx(5523.1, rel=0.1)


def _edited(edit):
    return "\n".join(edit(REAL.splitlines()))


def _row(prefix, old, new):
    return lambda ls: [x.replace(old, new) if x.startswith(prefix) else x for x in ls]


@pytest.mark.parametrize("edit, named", [
    (lambda ls: [x for x in ls if not x.startswith("# nThread")], "nThread"),
    (lambda ls: [x for x in ls if "Rank" not in x], "Rank"),
    (_row("     1048576", "float", "floaty"), "第 24 行"),
    (_row("     1048576", "     sum", "    none"), "第 24 行"),
    (lambda ls: [x[:60] if x.startswith("   268435456") else x for x in ls], "第 25 行"),
    (_row("   268435456", "91.13      0", "91.13      3"), "#wrong"),
    (_row("   268435456", "-1   5523.1", " 0   5523.1"), "root"),
    (lambda ls: [x for x in ls if "Rank 15" not in x and "Rank 14" not in x], "busbw/algbw"),
    (lambda ls: [x for x in ls if not x.startswith("#       size")], "表头"),
])
def test_malformed_tables_are_refused_naming_the_line(edit, named):
    """Is each broken table refused with a Chinese message that names what is wrong (the line, when there is one)?"""
    with pytest.raises(ValueError, match="fit_nccl_tests") as e:
        pb.fit_nccl_tests(_edited(edit))
    assert named in str(e.value)
    assert "nccl-tests" in str(e.value)


@pytest.mark.parametrize("bad", ["", "hello", 42, "# nThread 1 nGpus 1\n#  Rank  0 Group  0 Pid 1 on a device  0 [0x0] X\n"])
def test_other_inputs_are_refused(bad):
    """Is text that is no nccl-tests output (or no text) refused with a message, never a traceback of its own?"""
    with pytest.raises(ValueError, match="fit_nccl_tests"):
        pb.fit_nccl_tests(bad)


def test_plan_uses_the_fitted_group():
    """Does a DP fit replace the DP group's α and bandwidth, change the step, and mark dp_nccl as measured?"""
    base = pb.plan_budget(**KW, dp=16, zero_stage=1)
    text = nccl_tests_text("reduce-scatter", 16, "100 us", "20 GB/s")
    slow = pb.fit_nccl_tests(text)
    b = pb.plan_budget(**KW, dp=16, zero_stage=1, dp_nccl=slow)
    assert b.settings["measured"] == ("dp_nccl",)
    ag = next(c for c in b.comm if c.name == "DP all-gather")
    # the gather's K calls: K · α + bytes sent / busbw
    k = ag.calls
    assert ag.time.to("s").magnitude == pytest.approx(k * 100e-6 + ag.bytes.to("B").magnitude / 20e9, rel=1e-3)
    assert b.step > base.step
    assert pb.plan_budget(**KW, dp=16, zero_stage=1, dp_nccl=text).step == b.step  # the same fit, as text


def test_tp_fit_changes_only_tp():
    """Does a TP fit change the TP collectives' time and leave DP's alone?"""
    base = pb.plan_budget(**KW, dp=2, tp=8, zero_stage=1)
    fit = pb.fit_nccl_tests(nccl_tests_text("all-reduce", 8, "10 us", "100 GB/s"))
    b = pb.plan_budget(**KW, dp=2, tp=8, zero_stage=1, tp_nccl=fit)
    tp0, tp1 = (next(c for c in x.comm if c.group == "tp") for x in (base, b))
    assert tp1.time > tp0.time
    assert [c.time for c in b.comm if c.group == "dp"] == [c.time for c in base.comm if c.group == "dp"]
    assert b.settings["measured"] == ("tp_nccl",)


def test_measured_names_are_checked():
    """Is an unknown name in measured= refused, and a known one kept?"""
    assert pb.plan_budget(**KW, dp=16, zero_stage=3, measured=("hfu",)).settings["measured"] == ("hfu",)
    with pytest.raises(ValueError, match="measured"):
        pb.plan_budget(**KW, dp=16, zero_stage=3, measured=("vibes",))
    with pytest.raises(ValueError, match="dp_nccl"):
        pb.plan_budget(**KW, dp=16, zero_stage=3, dp_nccl=3.5)


def test_hfu_from_step_recovers_the_hfu_that_made_the_step():
    """Does a step made at hfu 0.33 give back 0.33, with the plan's MFU, from the step or from tokens per second?"""
    kw = dict(KW, dp=16, zero_stage=3)
    b = pb.plan_budget(**kw, hfu=0.33)
    for fit in (pb.hfu_from_step(b.step, **kw), pb.hfu_from_step(tokens_per_s=b.tokens_per_s.magnitude, **kw)):
        assert fit.hfu == pytest.approx(0.33, rel=1e-6)
        assert fit.mfu == pytest.approx(b.mfu, rel=1e-6)
        assert fit.budget.settings["measured"] == ("hfu",)
    assert pb.hfu_from_step(b.step, hfu=0.9, **kw).hfu == pytest.approx(0.33, rel=1e-6)  # a given hfu is replaced


def test_hfu_from_step_refuses_impossible_steps():
    """Is a step shorter than the model allows at hfu 1, or one that disagrees with tokens/s, refused?"""
    kw = dict(KW, dp=16, zero_stage=3)
    with pytest.raises(ValueError, match="hfu=1"):
        pb.hfu_from_step("0.1 s", **kw)
    with pytest.raises(ValueError, match="2%"):
        pb.hfu_from_step("10 s", tokens_per_s=1000, **kw)
    with pytest.raises(ValueError, match="step"):
        pb.hfu_from_step(**kw)


def test_nccl_vectors_are_fresh():
    """Is tests/vectors/nccltests.json (held to nccltests.js by tests/js/nccltests.test.mjs) what the generator writes?"""
    from conftest import ROOT
    from parallel_budget.book import nccl_vectors as nv

    path = ROOT / "tests" / "vectors" / "nccltests.json"
    assert path.read_text(encoding="utf-8") == nv.dumps(nv.build()), (
        "tests/vectors/nccltests.json is stale: run `python -m parallel_budget.book.nccl_vectors`")
    assert nv.SAMPLE == REAL  # the sample the JS is held to is the one tested here
