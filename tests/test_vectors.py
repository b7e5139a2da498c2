"""Do the shared calculator vectors match the package, and does the JavaScript match them?"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

import parallel_budget as pb
from conftest import ROOT
from parallel_budget.book import vectors
from parallel_budget.book.calculators import FIELDS, evaluate

VECTORS = ROOT / "tests" / "vectors" / "calculators.json"


def test_vector_file_is_not_stale():
    """Is tests/vectors/calculators.json what `python -m parallel_budget.book.vectors` writes now?"""
    assert VECTORS.read_text(encoding="utf-8") == vectors.dumps(vectors.build()), (
        "tests/vectors/calculators.json is stale: run `python -m parallel_budget.book.vectors`"
    )


def test_enough_cases_with_edges_and_invalid_inputs():
    """Are there at least 200 cases, every calculator with valid and invalid inputs?"""
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    assert len(cases) >= 200
    for kind in [*FIELDS, "parse", "params"]:
        mine = [c for c in cases if c["kind"] == kind]
        assert any("errors" in c for c in mine) and any("errors" not in c for c in mine), kind


def test_default_inputs_give_the_lessons_numbers():
    """Do the ring calculator's defaults reproduce the lesson's worked example?"""
    out = evaluate("ring", {})["out"]
    r = pb.ring_allreduce(4, "2 GB", "25 GB/s")
    s = pb.step_time("400 ms", 4, r.lower_bound)
    assert out["send_per_rank"] == r.send_per_rank.to("B").magnitude == 3e9
    assert out["lower_bound"] == pytest.approx(0.12)
    assert out["step"] == pytest.approx(s.step.magnitude) and out["speedup"] == pytest.approx(s.speedup)
    assert [row["total"] for row in evaluate("zero", {})["out"]["rows"]] == [16e9, 7e9, 5.5e9, 4e9]


def test_bits_change_the_time_and_not_the_volume():
    """Does switching GB/s to Gb/s change the lower bound by 8x and leave the volume alone?"""
    a = evaluate("ring", {"bw_unit": "GB/s"})["out"]
    b = evaluate("ring", {"bw_unit": "Gb/s"})["out"]
    assert a["send_per_rank"] == b["send_per_rank"]
    assert b["lower_bound"] == pytest.approx(8 * a["lower_bound"])


@pytest.mark.parametrize(
    "kind, inputs, field",
    [
        ("ring", {"ranks": "0"}, "ranks"),
        ("ring", {"grad": ""}, "grad"),
        ("ring", {"bandwidth": "-3"}, "bandwidth"),
        ("zero", {"params": "lots"}, "params"),
        ("zero", {"dp": "1e9"}, "dp"),
        ("tp", {"hidden": "4097"}, "hidden"),  # raised by the package itself
        ("pipeline", {"stages": "3", "stage_times": "1, 2"}, "stage_times"),
        ("update", {"grads": "7"}, "grads"),
    ],
)
def test_invalid_inputs_name_the_field(kind, inputs, field):
    """Is a bad, empty, negative or absurd input reported on its own field, with nothing computed?"""
    r = evaluate(kind, inputs)
    assert r == {"errors": [field]}


def test_unknown_calculator_is_refused():
    """Does evaluate() refuse a kind it does not know, with a Chinese message?"""
    with pytest.raises(ValueError, match="kind"):
        evaluate("moe", {})


def test_generator_writes_a_file(tmp_path):
    """Does `python -m parallel_budget.book.vectors <path>` write the same JSON there?"""
    out = tmp_path / "v.json"
    assert vectors.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == VECTORS.read_text(encoding="utf-8")


def test_javascript_agrees_with_the_vectors():
    """Does `node --test tests/js/*.test.mjs` pass (the JS calculators give the package's numbers)?"""
    node = shutil.which("node")
    assert node, "node 20 is needed for the JavaScript tests (apt-get install nodejs)"
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "js").glob("*.test.mjs"))
    assert files, "no tests/js/*.test.mjs"
    proc = subprocess.run([node, "--test", *files], cwd=ROOT, capture_output=True, text=True, timeout=300)
    tail = "\n".join(proc.stdout.splitlines()[-30:])
    assert proc.returncode == 0, f"node --test failed:\n{tail}\n{proc.stderr[-2000:]}"
    assert "# fail 0" in proc.stdout


def test_tp_defaults_are_the_chapters_example():
    """Does the TP calculator start from the configuration the TP/PP chapter computes?"""
    import re

    src = (ROOT / "book" / "tp-pp.md").read_text(encoding="utf-8")
    call = re.search(r"pb\.tp_allreduce\(([^)]*)\)", src).group(1)
    chapter = {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", call)}
    defaults = {f["name"]: float(f["default"]) for f in FIELDS["tp"]}
    assert chapter == defaults
    out = evaluate("tp", {})["out"]
    tp = pb.tp_allreduce(**{k: int(v) for k, v in chapter.items()})
    assert out["send_per_rank_per_step"] == pytest.approx(tp.send_per_rank_per_step.to("B").magnitude)


def test_ring_calculator_caps_overlap_at_the_backward_share():
    """Full overlap in the calculator hides only backward (2/3 of compute), as step_time does."""
    out = evaluate("ring", {"overlap": "1"})["out"]
    s = pb.step_time("400 ms", 4, "120 ms", overlap=1)
    assert out["hidden_comm"] == pytest.approx(s.hidden_comm.to("s").magnitude) == pytest.approx(0.4 / 4 * 2 / 3)
    assert out["step"] == pytest.approx(s.step.to("s").magnitude)
    assert out["step"] > 0.12
    last = evaluate("ring", {"overlap": "1", "compute": "4000", "last_bucket": "30"})["out"]
    assert last["exposed_comm"] == pytest.approx(0.03)


def test_zero_calculator_reports_communication():
    """ZeRO-1/2 rows send what DDP sends, ZeRO-3 1.5 times as much."""
    rows = evaluate("zero", {})["out"]["rows"]
    assert [r["send_per_rank"] for r in rows] == pytest.approx([3e9, 3e9, 3e9, 4.5e9])
    assert [r["relative_to_ddp"] for r in rows] == pytest.approx([1, 1, 1, 1.5])
