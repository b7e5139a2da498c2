"""Is the plan builder's form model right, and are its shared vectors fresh for the JavaScript twin?

tests/js/plan.test.mjs (run by tests/test_vectors.py::test_javascript_agrees_with_the_vectors with every
node test) holds book/_static/calc/plan.js to tests/vectors/plan.json: numbers, verdict codes, search and
the three drawings' layouts.
"""

from __future__ import annotations

import json

import pytest

import parallel_budget as pb
from conftest import ROOT
from parallel_budget.book import plan_vectors as pv

VECTORS = ROOT / "tests" / "vectors" / "plan.json"
KW = dict(model="llama2-7b", cluster="a100-40gb", global_batch=32)


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


def test_cases_cover_valid_invalid_searches_and_layouts():
    """Has the file valid plans, invalid fields, searches (64 devices too), every verdict code and layouts?"""
    data = json.loads(VECTORS.read_text(encoding="utf-8"))
    cases = data["cases"]
    assert len(cases) >= 100 and sum("errors" in c for c in cases) >= 20
    searches = [c for c in cases if c["search"] and "out" in c]
    assert any(c["input"].get("devices") == "64" for c in searches)
    codes = {code for c in cases if "out" in c for code in c["out"]["codes"]}
    assert {"fits", "too_big", "tp_inter", "gather", "flops", "worst_none", "worst_dp", "worst_tp",
            "worst_bubble", "worst_optimizer"} <= codes
    layouts = data["layouts"]
    assert {lane["stream"] for x in layouts for lane in x["timeline"]["lanes"]} == {"compute", "tp", "dp", "pp"}
    assert {b["kind"] for x in layouts for b in x["timeline"]["blocks"]} >= {"F", "B", "dp", "tp", "pp"}
    assert {m["kind"] for x in layouts for m in x["timeline"]["marks"]} == {"exposed", "idle"}


def test_fields_match_the_presets():
    """Are the form's defaults the llama2-7b and a100-40gb presets, and do both lists name the same presets?"""
    fields = {f["name"]: f for f in pv.FIELDS}
    assert fields["model"]["options"][:-1] == list(pb.MODELS) and fields["cluster"]["options"][:-1] == list(pb.CLUSTERS)
    m, c = pb.MODELS["llama2-7b"], pb.CLUSTERS["a100-40gb"]
    assert all(fields[k]["default"] == str(m[k]) for k in ("layers", "hidden", "heads", "seq", "vocab", "ffn"))
    assert [fields[k]["default"] for k in ("gated", "dropout", "flash_attention")] == ["yes", "no", "yes"]
    assert f"{fields['device_memory']['default']} {fields['memory_unit']['default']}" == c["device_memory"]
    assert f"{fields['inter_bw']['default']} {fields['inter_unit']['default']}" == c["inter_bw"]
    assert float(fields["peak_tflops"]["default"]) * 1e12 == c["peak_flops"]


def test_default_form_is_the_chapter_example():
    """Do the form's defaults give plan_budget's numbers for the chapter's ZeRO-2 plan on 2 × 8 A100 40GB?"""
    out = pv.evaluate({})["out"]
    b = pb.plan_budget(**KW, dp=16, zero_stage=2)
    assert out["step"] == b.step.magnitude and out["memory"]["total"] == b.memory.total.magnitude
    assert out["fits"] is b.fits is True and "gather" in out["codes"]


def test_bits_change_the_time_not_the_bytes():
    """Does switching the inter-node unit to Gb/s keep the bytes and slow the DP traffic eightfold?"""
    a, b = pv.evaluate({})["out"], pv.evaluate({"inter_unit": "Gb/s"})["out"]
    assert [c[6] for c in a["comm"]] == [c[6] for c in b["comm"]]
    calls, ranks = a["comm"][1][5], a["comm"][1][3]
    alpha = float(next(f for f in pv.FIELDS if f["name"] == "latency")["default"]) * 1e-6
    latency = calls * (ranks - 1) * alpha  # α per ring step, unchanged
    assert b["comm"][1][8] - latency == pytest.approx(8 * (a["comm"][1][8] - latency))


@pytest.mark.parametrize("inputs, field", [
    ({"tp": "3"}, "tp"), ({"pp": "5", "zero_stage": "1"}, "pp"), ({"micro_batch": "3"}, "micro_batch"), ({"hidden": "4097"}, "heads"),
    ({"inter_unit": "GB"}, "inter_unit"), ({"hfu": "0"}, "hfu"), ({"params": "lots"}, "params"),
    ({"pp": "2", "dp": "8"}, "zero_stage"), ({"model": "llama3-8b"}, "model"),
    ({"pp": "4", "dp": "4", "zero_stage": "1", "schedule": "interleaved", "virtual_stages": "3"}, "virtual_stages"),
])
def test_invalid_inputs_name_their_field(inputs, field):
    """Is a bad or impossible input reported on its own field, with nothing computed?"""
    assert pv.evaluate(inputs) == {"errors": [field]}


def test_search_output_is_search_plans():
    """Is the form's search the package's search_plans, its ten fastest in its order?"""
    out = pv.evaluate({"devices": "16"}, search=True)["out"]["search"]
    r = pb.search_plans(devices=16, **KW)
    assert out["candidates"] == r.candidates and out["fits"] == len(r)
    assert [p[:5] for p in out["plans"]] == [[p.dp, p.tp, p.pp, p.zero_stage, p.micro_batch] for p in r[:10]]
