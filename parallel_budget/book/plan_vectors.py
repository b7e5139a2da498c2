"""The plan builder's form model and the test vectors that hold its JavaScript twin to Python.

The site's plan builder (``book/_static/calc/plan.js`` and its step timeline
``plantimeline.js``, drawn by ``planview.js``) reads the strings a reader types
into :data:`FIELDS`; :func:`evaluate` turns valid strings into one call of
:func:`parallel_budget.plan_budget` (with its
scaling curve, and with ``devices`` the ten fastest splits of
:func:`parallel_budget.search_plans`) and returns plain floats in SI units
(bytes, bytes/s, seconds); :func:`layouts` gives the three drawings' data
(:mod:`.planlayout`).  ``python -m parallel_budget.book.plan_vectors`` writes
``tests/vectors/plan.json``; ``tests/test_plan_vectors.py`` checks it is fresh
and ``tests/js/plan.test.mjs`` checks the JavaScript gives the same numbers,
verdict codes, search, layouts and flags the same fields.

The ``model`` and ``cluster`` selects are presets (:mod:`parallel_budget.model.presets`):
choosing one fills the fields below it; the computation reads the fields.  Field
limits are stricter than the package's, so no input overflows a float product
or freezes the page (a search over at most 4096 devices).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..model.calibration import nccl_tests_text
from ..model.plan import plan_budget
from ..model.planreport import verdict_codes
from ..model.plansearch import search_plans
from ..model.scaling import plan_scaling
from ..model.schedule import MULTI, schedule_problem
from ..model.units import parse
from . import planlayout
from .calculators import _f, _field_value
from .vectors import write

OUT = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "plan.json"
#: the builder's calibration inputs (nccl-tests text per group; not form fields, plan.js CALIBRATION)
CALIBRATION = ("dp_nccl", "tp_nccl")
YN = ["yes", "no"]

# Defaults: the chapter's example, Llama 2 7B on 2 × 8 A100 40GB (presets llama2-7b, a100-40gb).
FIELDS = [
    _f("model", "select", "llama2-7b", options=["llama2-7b", "llama2-70b", "custom"]),
    _f("layers", "int", "32", 1, 1024), _f("hidden", "int", "4096", 1, 65536), _f("heads", "int", "32", 1, 1024),
    _f("kv_heads", "int", "32", 1, 1024), _f("seq", "int", "4096", 1, 131072), _f("vocab", "int", "32000", 1, 1000000),
    _f("ffn", "int", "11008", 1, 262144), _f("gated", "select", "yes", options=YN),
    _f("dropout", "select", "no", options=YN), _f("flash_attention", "select", "yes", options=YN),
    _f("params", "params", "", 0, 1e15, lo_open=True, optional=True),
    _f("global_batch", "int", "32", 1, 65536), _f("micro_batch", "int", "1", 1, 65536),
    _f("cluster", "select", "a100-40gb", options=["a100-40gb", "h100-80gb", "custom"]),
    _f("devices_per_node", "int", "8", 1, 1024),
    _f("device_memory", "num", "40", 0, 1e6, lo_open=True, unit="memory_unit"),
    _f("memory_unit", "select", "GiB", options=["GB", "GiB"]),
    _f("intra_bw", "num", "300", 0, 1e6, lo_open=True, unit="intra_unit"),
    _f("intra_unit", "select", "GB/s", options=["GB/s", "Gb/s"]),
    _f("inter_bw", "num", "25", 0, 1e6, lo_open=True, unit="inter_unit"),
    _f("inter_unit", "select", "GB/s", options=["GB/s", "Gb/s"]),
    _f("peak_tflops", "num", "312", 0, 1e6, lo_open=True),
    _f("dp", "int", "16", 1, 4096), _f("tp", "int", "1", 1, 4096), _f("pp", "int", "1", 1, 4096),
    _f("zero_stage", "select", "2", options=["0", "1", "2", "3"]),
    _f("schedule", "select", "1f1b", options=["1f1b", "gpipe", "interleaved", "interleaved_zb", "zbv"]),
    _f("virtual_stages", "int", "2", 1, 64),
    _f("recompute", "select", "none", options=["none", "selective", "full"]),
    _f("sequence_parallel", "select", "yes", options=YN),
    _f("hfu", "num", "0.4", 0, 1, lo_open=True),
    _f("latency", "num", "5", 0, 1e6),  # microseconds per ring round
    _f("bucket", "num", "25", 0, 1e6, lo_open=True),  # MiB per gradient bucket
    _f("param_bytes", "num", "2", 0, 64, lo_open=True), _f("grad_bytes", "num", "", 0, 64, lo_open=True, optional=True),
    _f("optim_bytes", "num", "12", 0, 64),
    _f("compute", "num", "", 0, 1e7, lo_open=True, optional=True),  # seconds, one device, whole batch
    _f("overlap_grad_reduce", "select", "yes", options=YN), _f("overlap_param_gather", "select", "no", options=YN),
    _f("devices", "int", "16", 1, 4096),  # the search's device count
    # third edition: gradient precision, optimizer step, logits (empty grad_bytes: from grad_reduce_dtype)
    _f("grad_reduce_dtype", "select", "bf16", options=["bf16", "fp32"]),
    _f("hbm_bw", "num", "1555", 0, 1e6, lo_open=True),  # GB/s of the card's memory
    _f("optimizer_traffic", "num", "28", 0, 1e3),  # bytes moved per parameter updated
    _f("logits", "select", "yes", options=YN),
]
OPTIONAL = {"params", "compute", "grad_bytes"}
SPLIT = ("dp", "tp", "pp", "zero_stage", "micro_batch")
_ARG = re.compile(r"参数 ([A-Za-z_]+)")


def _values(inputs: dict):
    values, errors = {}, []
    for f in FIELDS:
        raw = inputs.get(f["name"], f["default"])
        if raw is True or raw is False:
            raw = "yes" if raw else "no"
        text = str(raw).strip()
        if f["name"] in OPTIONAL and not text:
            values[f["name"]] = None
            continue
        v = _field_value(f, {f["name"]: text})
        if v is None:
            errors.append(f["name"])
        values[f["name"]] = v
    return values, errors


def _kwargs(v: dict) -> dict:
    """plan_budget's keywords (without the split) from validated form values."""
    kw = {k: int(v[k]) for k in ("layers", "hidden", "heads", "kv_heads", "seq", "vocab", "ffn", "global_batch",
                                 "devices_per_node")}
    kw.update({k: v[k] == "yes" for k in ("gated", "dropout", "flash_attention", "sequence_parallel",
                                          "overlap_grad_reduce", "overlap_param_gather")})
    kw.update(
        schedule=v["schedule"], recompute=v["recompute"], param_bytes=v["param_bytes"],
        grad_reduce_dtype=v["grad_reduce_dtype"], hbm_bw=v["hbm_bw"] * 1e9, optimizer_traffic=v["optimizer_traffic"],
        logits=v["logits"] == "yes", optim_bytes=v["optim_bytes"], latency=v["latency"] * 1e-6, bucket=v["bucket"] * 2 ** 20, hfu=v["hfu"],
        device_memory=parse(f"{v['device_memory']!r} {v['memory_unit']}", "bytes").magnitude,
        intra_bw=parse(f"{v['intra_bw']!r} {v['intra_unit']}", "bandwidth").magnitude,
        inter_bw=parse(f"{v['inter_bw']!r} {v['inter_unit']}", "bandwidth").magnitude,
    )
    if v["schedule"] in MULTI:
        kw["virtual_stages"] = int(v["virtual_stages"])
    if v["params"] is not None:
        kw["params"] = v["params"]
    if v["grad_bytes"] is not None:
        kw["grad_bytes"] = v["grad_bytes"]
    if v["compute"] is not None:
        kw["compute"] = v["compute"]
    else:
        kw["peak_flops"] = v["peak_tflops"] * 1e12
    return kw


def _split_errors(v: dict) -> list:
    """Fields that make the split impossible (the same checks, in the same order, as plan.js read())."""
    errors = []
    dp, tp, pp, mb = (int(v[k]) for k in ("dp", "tp", "pp", "micro_batch"))
    if v["hidden"] % v["heads"]:
        errors.append("heads")
    elif v["heads"] % v["kv_heads"]:
        errors.append("kv_heads")
    if v["heads"] % tp or v["kv_heads"] % tp:
        errors.append("tp")
    if v["layers"] % pp:
        errors.append("pp")
    if v["global_batch"] % (dp * mb):
        errors.append("micro_batch")
    elif pp > 1 and dp > 1 and int(v["zero_stage"]) >= 2:
        errors.append("zero_stage")
    elif pp > 1 and v["schedule"] in MULTI and schedule_problem(
            v["schedule"], int(v["layers"]), pp, int(v["virtual_stages"]), int(v["global_batch"]) // (dp * mb)):
        errors.append("virtual_stages")
    return errors


def budget_out(b, scaling) -> dict:
    """plan.js core()'s numbers of one plan, with its verdict codes and scaling curve."""
    m = b.memory
    return {
        "params": b.params, "microbatches": b.microbatches, "in_flight": m.in_flight, "fits": b.fits,
        "memory": {k: getattr(m, k).magnitude for k in ("param_state", "grad_state", "optim_state", "states",
                                                         "activations", "gather", "working", "temporary", "total",
                                                         "logits")},
        "comm": [[c.name, c.what, c.group, c.ranks, c.link, c.calls, c.bytes.magnitude, c.overlappable,
                  c.time.magnitude, c.exposed.magnitude] for c in b.comm],
        **{k: getattr(b, k).magnitude for k in ("compute", "ideal", "hidden_comm", "exposed_comm", "bubble", "step",
                                                "tokens_per_s")},
        "efficiency": b.efficiency, "mfu": b.mfu, "hfu": b.hfu, "zero_stage": b.zero_stage,
        "optimizer": b.optimizer.magnitude,
        "split": [b.dp, b.tp, b.pp, b.zero_stage, b.micro_batch],
        "codes": list(verdict_codes(b)), "scaling": planlayout.scaling_layout(scaling),
    }


def _plan(inputs: dict):
    """(keywords, split, budget, scaling) of valid inputs, or the list of fields in error."""
    values, errors = _values(inputs)
    if not errors:
        errors = _split_errors(values)
    if errors:
        return errors
    kw = _kwargs(values)
    kw.update({k: inputs[k] for k in CALIBRATION if str(inputs.get(k, "")).strip()})  # nccl-tests text per group
    split = {k: int(values[k]) for k in SPLIT}
    try:
        return kw, split, plan_budget(**kw, **split), plan_scaling(**kw, **split), int(values["devices"])
    except ValueError as exc:
        m = _ARG.search(str(exc))
        return [m.group(1) if m else "dp"]


def evaluate(inputs: dict, search: bool = False) -> dict:
    """``{"errors": [fields]}`` or ``{"out": {...}}`` (with ``search`` also ``out["search"]``: the ten fastest)."""
    r = _plan(inputs)
    if isinstance(r, list):
        return {"errors": r}
    kw, _, b, scaling, devices = r
    out = budget_out(b, scaling)
    if search:
        found = search_plans(devices=devices, **kw)
        top = found.top(10)
        out["search"] = {"candidates": found.candidates, "fits": len(found), "timed": found.timed,
                         "plans": [[*split, c["step"], c["total"]] for split, c in top]}
    return {"out": out}


def layouts(inputs: dict) -> dict:
    """The three drawings' data for valid inputs (planlayout)."""
    _, _, b, scaling, _ = _plan(inputs)
    return {"timeline": planlayout.timeline_layout(b), "memory": planlayout.memory_layout(b),
            "scaling": planlayout.scaling_layout(scaling)}


LAYOUT_CASES = [
    {}, {"zero_stage": "0"}, {"zero_stage": "1", "overlap_param_gather": "yes"}, {"zero_stage": "3"},
    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1"},
    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "0", "schedule": "interleaved"},
    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "interleaved_zb"},
    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "zbv"},
    {"dp": "1", "tp": "2", "pp": "8", "zero_stage": "0", "schedule": "gpipe", "global_batch": "8"},
]


def _cases():
    cases = [
        ({}, True),
        ({"recompute": "selective"}, True),
        ({"recompute": "full", "global_batch": "64", "devices": "64"}, True),
        ({"devices": "64", "global_batch": "512"}, True),
        ({"schedule": "interleaved", "devices": "32", "global_batch": "64"}, True),
        ({"overlap_param_gather": "yes", "inter_bw": "5"}, True),
        ({"inter_bw": "50"}, False),  # 8 ports × 50 GB/s is more than the node's 300 GB/s links: capped
        ({"inter_unit": "Gb/s", "inter_bw": "200"}, False),
        ({"inter_unit": "Gb/s"}, False),
        ({"memory_unit": "GB", "device_memory": "80"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "gpipe"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "1f1b"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "interleaved"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "interleaved", "virtual_stages": "4"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "interleaved_zb"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "0", "schedule": "interleaved_zb", "virtual_stages": "4"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "zbv"}, False),
        ({"dp": "1", "tp": "4", "pp": "4", "zero_stage": "0", "schedule": "zbv", "recompute": "full"}, False),
        ({"dp": "2", "tp": "1", "pp": "8", "zero_stage": "1", "schedule": "zbv", "global_batch": "64"}, False),
        ({"schedule": "zbv", "devices": "32", "global_batch": "64"}, True),
        ({"schedule": "interleaved_zb", "devices": "16", "global_batch": "32"}, True),
        ({"dp": "1", "tp": "8", "pp": "2", "zero_stage": "0", "sequence_parallel": "no"}, False),
        ({"dp": "1", "tp": "16", "pp": "1", "zero_stage": "0"}, False),
        ({"dp": "8", "tp": "2", "zero_stage": "3", "micro_batch": "2"}, False),
        ({"zero_stage": "0", "overlap_grad_reduce": "no"}, False),
        ({"zero_stage": "3", "overlap_grad_reduce": "no"}, False),
        ({"zero_stage": "1", "overlap_param_gather": "yes"}, False),
        ({"grad_reduce_dtype": "fp32"}, True), ({"grad_reduce_dtype": "fp32", "zero_stage": "0"}, False),
        ({"grad_bytes": "3"}, False), ({"logits": "no"}, True), ({"optimizer_traffic": "0", "zero_stage": "0"}, False),
        ({"optimizer_traffic": "0", "dp": "1", "zero_stage": "0"}, False),
        ({"hbm_bw": "3350", "zero_stage": "1"}, False), ({"global_batch": "1024", "devices": "16"}, True),
        ({"dp": "1", "tp": "2", "pp": "8", "zero_stage": "0", "global_batch": "8"}, False),
        ({"dp": "4", "tp": "1", "pp": "4", "zero_stage": "1"}, False),
        ({"grad_reduce_dtype": "fp16"}, False), ({"hbm_bw": "0"}, False), ({"optimizer_traffic": "-1"}, False),
        ({"compute": "160"}, False), ({"compute": "160", "peak_tflops": "x"}, False),
        ({"dp": "1", "zero_stage": "0"}, False), ({"params": "7.5B"}, False), ({"gated": "no", "ffn": "16384"}, False), ({"dropout": "yes"}, False),
        ({"flash_attention": "no", "recompute": "selective"}, False), ({"latency": "0"}, False),
        ({"bucket": "1000"}, False), ({"hfu": "0.55", "recompute": "full"}, False),
        ({"model": "llama2-70b", "layers": "80", "hidden": "8192", "heads": "64", "kv_heads": "8", "ffn": "28672",
          "cluster": "h100-80gb", "device_memory": "80", "intra_bw": "450", "inter_bw": "50", "peak_tflops": "989",
          "global_batch": "64", "dp": "4", "tp": "8", "pp": "4", "zero_stage": "1", "devices": "128"}, True),
        ({"layers": "2", "hidden": "64", "heads": "4", "kv_heads": "4", "seq": "16", "vocab": "100", "ffn": "256",
          "global_batch": "8", "dp": "2", "tp": "2", "pp": "2", "zero_stage": "1", "devices": "8"}, True),
        ({"zero_stage": "3", "dp_nccl": nccl_tests_text("all-reduce", 16, "60 us", "150 GB/s")}, False),
        ({"dp": "2", "tp": "8", "zero_stage": "1", "dp_nccl": nccl_tests_text("reduce-scatter", 2, "20 us", "20 GB/s"),
          "tp_nccl": nccl_tests_text("all-reduce", 8, "15 us", "200 GB/s", dtype="bfloat16")}, False),
        ({"dp_nccl": "hello"}, False), ({"tp": "8", "dp": "2", "tp_nccl": "# nThread 1 nGpus 1\n"}, False),
        # invalid fields
        ({"layers": "0"}, False), ({"hidden": "4097"}, False), ({"kv_heads": "5"}, False), ({"tp": "3"}, False),
        ({"kv_heads": "8", "tp": "16"}, False), ({"pp": "5"}, False), ({"micro_batch": "3"}, False),
        ({"dp": "0"}, False), ({"zero_stage": "4"}, False), ({"pp": "2", "dp": "8", "zero_stage": "3"}, False),
        ({"pp": "4", "dp": "4", "zero_stage": "1", "schedule": "interleaved", "virtual_stages": "3"}, False),
        ({"pp": "4", "dp": "4", "zero_stage": "1", "schedule": "interleaved", "virtual_stages": "1"}, False),
        ({"pp": "4", "dp": "4", "zero_stage": "1", "schedule": "zbv", "virtual_stages": "3"}, False),
        ({"pp": "4", "dp": "4", "zero_stage": "0", "schedule": "interleaved_zb", "virtual_stages": "3"}, False),
        ({"pp": "4", "dp": "2", "zero_stage": "1", "schedule": "interleaved_zb", "global_batch": "22"}, False),
        ({"schedule": "zigzag"}, False), ({"recompute": "half"}, False), ({"inter_bw": "0"}, False),
        ({"inter_unit": "GB"}, False), ({"device_memory": "-1"}, False), ({"hfu": "0"}, False),
        ({"hfu": "1.5"}, False), ({"params": "lots"}, False), ({"latency": "abc"}, False),
        ({"devices": "0"}, False), ({"seq": "1e9"}, False), ({"compute": "0"}, False), ({"bucket": "0"}, False),
        ({"model": "llama3-8b"}, False), ({"cluster": "tpu"}, False), ({"global_batch": "", "vocab": "x"}, False),
    ]
    for dp, tp, pp in ((16, 1, 1), (8, 2, 1), (4, 4, 1), (4, 2, 2), (2, 8, 1), (1, 8, 2), (2, 2, 4), (1, 4, 4)):
        for stage in ("0", "1", "2", "3"):
            if pp > 1 and stage in ("2", "3"):
                continue
            for rc in ("none", "full"):
                cases.append(({"dp": str(dp), "tp": str(tp), "pp": str(pp), "zero_stage": stage, "recompute": rc}, False))
    return cases


def build() -> dict:
    return {
        "about": "Generated by `python -m parallel_budget.book.plan_vectors`; do not edit. Values in B, B/s, s.",
        "fields": FIELDS,
        "cases": [{"input": inputs, "search": search, **evaluate(inputs, search)} for inputs, search in _cases()],
        "layouts": [{"input": inputs, **layouts(inputs)} for inputs in LAYOUT_CASES],
    }


def dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=None, sort_keys=True, separators=(",", ":")).replace(
        '},{"input"', '},\n{"input"') + "\n"


def main(argv=None) -> int:
    return write(build, dumps, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
