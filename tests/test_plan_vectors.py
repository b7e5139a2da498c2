"""Is the plan builder's form model right, and are its shared vectors fresh for the JavaScript twin?

tests/js/plan.test.mjs (run by tests/test_vectors.py::test_javascript_agrees_with_the_vectors with every
node test) holds book/_static/calc/plan.js to tests/vectors/plan.json.
"""

from __future__ import annotations

import json

import pytest

import parallel_budget as pb
from conftest import ROOT
from parallel_budget.book import plan_vectors as pv

VECTORS = ROOT / "tests" / "vectors" / "plan.json"


def test_vector_file_is_not_stale():
    """Is tests/vectors/plan.json what `python -m parallel_budget.book.plan_vectors` writes now?"""
    assert VECTORS.read_text(encoding="utf-8") == pv.dumps(pv.build()), (
        "tests/vectors/plan.json is stale: run `python -m parallel_budget.book.plan_vectors`"
    )


def test_generator_writes_the_same_file(tmp_path):
    """Does the module's main() write the committed JSON to a path it is given?"""
    out = tmp_path / "plan.json"
    assert pv.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == VECTORS.read_text(encoding="utf-8")


def test_cases_cover_valid_invalid_and_searches():
    """Has the file valid plans, invalid fields and searches, including 64 devices?"""
    cases = json.loads(VECTORS.read_text(encoding="utf-8"))["cases"]
    assert len(cases) >= 100
    assert sum("errors" in c for c in cases) >= 20
    searches = [c for c in cases if c["search"] and "out" in c]
    assert any(c["input"].get("devices") == "64" for c in searches)
    codes = {code for c in cases if "out" in c for code in c["out"]["codes"]}
    assert {"fits", "too_big", "tp_inter", "worst_none", "worst_dp", "worst_tp", "worst_bubble"} <= codes


def test_default_form_is_the_chapter_example():
    """Do the form's defaults give plan_budget's numbers for the Llama-2-7B shape on 2 x 8 devices?"""
    out = pv.evaluate({})["out"]
    b = pb.plan_budget(**pb.SHAPES["llama2-7b"], global_batch=32, dp=16, zero_stage=2, recompute="selective",
                       peak_flops=312e12, mfu=0.4, inter_bw="25 GB/s", intra_bw="150 GB/s")
    assert out["step"] == b.step.magnitude and out["memory"]["total"] == b.memory.total.magnitude
    assert out["fits"] is b.fits is True


def test_bits_change_the_time_not_the_bytes():
    """Does switching the inter-node unit to Gb/s keep the bytes and make DP traffic 8x slower?"""
    a, b = pv.evaluate({})["out"], pv.evaluate({"inter_unit": "Gb/s"})["out"]
    assert [c[5] for c in a["comm"]] == [c[5] for c in b["comm"]]
    assert b["comm"][0][6] == pytest.approx(8 * a["comm"][0][6], rel=1e-3)


@pytest.mark.parametrize("inputs, field", [
    ({"tp": "3"}, "tp"), ({"pp": "5"}, "pp"), ({"micro_batch": "3"}, "micro_batch"), ({"hidden": "4097"}, "heads"),
    ({"inter_unit": "GB"}, "inter_unit"), ({"mfu": "0"}, "mfu"), ({"params": "lots"}, "params"),
])
def test_invalid_inputs_name_their_field(inputs, field):
    """Is a bad or impossible input reported on its own field, with nothing computed?"""
    assert pv.evaluate(inputs) == {"errors": [field]}


def test_search_output_is_search_plans():
    """Is the form's search the package's search_plans, in its order?"""
    out = pv.evaluate({"devices": "16"}, search=True)["out"]["search"]
    r = pb.search_plans(devices=16, **pb.SHAPES["llama2-7b"], global_batch=32, recompute="selective", peak_flops=312e12)
    assert out["candidates"] == r.candidates
    assert [p[:5] for p in out["plans"]] == [[p.dp, p.tp, p.pp, p.zero_stage, p.micro_batch] for p in r]
