"""The plan builder's form model and the test vectors that hold its JavaScript twin to Python.

The site's plan builder (``book/_static/calc/plan.js``) reads the strings a
reader types into :data:`FIELDS`; :func:`evaluate` turns valid strings into one
call of :func:`parallel_budget.plan_budget` (and, with ``devices``, of
:func:`parallel_budget.search_plans`) and returns plain floats in SI units
(bytes, bytes/s, seconds).  ``python -m parallel_budget.book.plan_vectors``
writes ``tests/vectors/plan.json``; ``tests/test_plan_vectors.py`` checks it is
fresh and ``tests/js/plan.test.mjs`` checks the JavaScript gives the same numbers,
the same verdict codes, the same search order and flags the same fields.

Field limits are stricter than the package's, so no input overflows a float
product or freezes the page (a search over at most 4096 devices).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..model.plan import plan_budget
from ..model.plansearch import search_plans
from ..model.planreport import verdict_codes
from ..model.units import parse
from .calculators import _f, _field_value
from .vectors import write

OUT = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "plan.json"

# The chapter's example: a Llama-2-7B shape on 2 nodes x 8 devices (A100-like).
FIELDS = [
    _f("layers", "int", "32", 1, 1024), _f("hidden", "int", "4096", 1, 65536), _f("heads", "int", "32", 1, 1024),
    _f("seq", "int", "4096", 1, 131072), _f("vocab", "int", "32000", 1, 1000000),
    _f("ffn", "int", "11008", 1, 262144), _f("gated", "select", "yes", options=["yes", "no"]),
    _f("params", "params", "", 0, 1e15, lo_open=True, optional=True),
    _f("global_batch", "int", "32", 1, 65536), _f("micro_batch", "int", "1", 1, 65536),
    _f("dp", "int", "16", 1, 4096), _f("tp", "int", "1", 1, 4096), _f("pp", "int", "1", 1, 4096),
    _f("zero_stage", "select", "2", options=["0", "1", "2", "3"]),
    _f("schedule", "select", "1f1b", options=["1f1b", "gpipe"]),
    _f("recompute", "select", "selective", options=["none", "selective", "full"]),
    _f("sequence_parallel", "select", "yes", options=["yes", "no"]),
    _f("param_bytes", "num", "2", 0, 64, lo_open=True), _f("grad_bytes", "num", "2", 0, 64, lo_open=True),
    _f("optim_bytes", "num", "12", 0, 64),
    _f("devices_per_node", "int", "8", 1, 1024),
    _f("device_memory", "num", "80", 0, 1e6, lo_open=True, unit="memory_unit"),
    _f("memory_unit", "select", "GB", options=["GB", "GiB"]),
    _f("intra_bw", "num", "150", 0, 1e6, lo_open=True, unit="intra_unit"),
    _f("intra_unit", "select", "GB/s", options=["GB/s", "Gb/s"]),
    _f("inter_bw", "num", "25", 0, 1e6, lo_open=True, unit="inter_unit"),
    _f("inter_unit", "select", "GB/s", options=["GB/s", "Gb/s"]),
    _f("latency", "num", "10", 0, 1e6),  # microseconds per ring round
    _f("peak_tflops", "num", "312", 0, 1e6, lo_open=True), _f("mfu", "num", "0.4", 0, 1, lo_open=True),
    _f("compute", "num", "", 0, 1e7, lo_open=True, optional=True),  # seconds, one device, whole batch
    _f("overlap", "num", "1", 0, 1),
    _f("devices", "int", "16", 1, 4096),  # the search's device count
]
OPTIONAL = {"params", "compute"}
SPLIT = ("dp", "tp", "pp", "zero_stage", "micro_batch")
_ARG = re.compile(r"参数 ([A-Za-z_]+)")


def _values(inputs: dict):
    values, errors = {}, []
    for f in FIELDS:
        text = str(inputs.get(f["name"], f["default"])).strip()
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
    kw = {k: int(v[k]) for k in ("layers", "hidden", "heads", "seq", "vocab", "ffn", "global_batch", "devices_per_node")}
    kw.update(
        gated=v["gated"] == "yes", schedule=v["schedule"], recompute=v["recompute"],
        sequence_parallel=v["sequence_parallel"] == "yes", param_bytes=v["param_bytes"], grad_bytes=v["grad_bytes"],
        optim_bytes=v["optim_bytes"], latency=v["latency"] * 1e-6, overlap=v["overlap"],
        device_memory=parse(f"{v['device_memory']!r} {v['memory_unit']}", "bytes").magnitude,
        intra_bw=parse(f"{v['intra_bw']!r} {v['intra_unit']}", "bandwidth").magnitude,
        inter_bw=parse(f"{v['inter_bw']!r} {v['inter_unit']}", "bandwidth").magnitude,
    )
    if v["params"] is not None:
        kw["params"] = v["params"]
    if v["compute"] is not None:
        kw["compute"] = v["compute"]
    else:
        kw.update(peak_flops=v["peak_tflops"] * 1e12, mfu=v["mfu"])
    return kw


def _split_errors(v: dict) -> list:
    """Fields that make the split impossible (same order of checks as plan._split_error)."""
    errors = []
    if v["hidden"] % v["heads"]:
        errors.append("heads")
    if v["heads"] % v["tp"]:
        errors.append("tp")
    if v["layers"] % v["pp"]:
        errors.append("pp")
    if v["global_batch"] % (v["dp"] * v["micro_batch"]):
        errors.append("micro_batch")
    return errors


def budget_out(b) -> dict:
    m = b.memory
    return {
        "params": b.params, "microbatches": b.microbatches, "in_flight": m.in_flight,
        "memory": {k: getattr(m, k).magnitude for k in ("param_state", "grad_state", "optim_state", "states",
                                                         "activations", "gather", "working", "temporary", "total")},
        "comm": [[c.name, c.group, c.ranks, c.link, c.calls, c.bytes.magnitude, c.time.magnitude, c.overlappable]
                 for c in b.comm],
        **{k: getattr(b, k).magnitude for k in ("compute", "ideal", "hidden_comm", "exposed_comm", "bubble", "step",
                                                "tokens_per_s")},
        "efficiency": b.efficiency, "fits": b.fits, "codes": list(verdict_codes(b)),
    }


def evaluate(inputs: dict, search: bool = False) -> dict:
    """``{"errors": [fields]}`` or ``{"out": {...}}`` (with ``search`` also ``out["search"]``)."""
    values, errors = _values(inputs)
    if not errors:
        errors = _split_errors(values)
    if errors:
        return {"errors": errors}
    kw = _kwargs(values)
    try:
        out = budget_out(plan_budget(**kw, **{k: int(values[k]) for k in SPLIT}))
        if search:
            r = search_plans(devices=int(values["devices"]), **kw)
            out["search"] = {
                "candidates": r.candidates,
                "plans": [[p.dp, p.tp, p.pp, p.zero_stage, p.micro_batch, p.step.magnitude, p.memory.total.magnitude]
                          for p in r],
            }
    except ValueError as exc:
        m = _ARG.search(str(exc))
        return {"errors": [m.group(1) if m else "dp"]}
    return {"out": out}


def _cases():
    llama = {}
    cases = [
        (llama, True),
        ({"recompute": "none"}, True),
        ({"recompute": "full", "global_batch": "64", "devices": "64"}, True),
        ({"devices": "64", "global_batch": "512"}, True),
        ({"inter_unit": "Gb/s", "inter_bw": "200"}, False),
        ({"inter_unit": "Gb/s"}, False),
        ({"memory_unit": "GiB"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "schedule": "gpipe"}, False),
        ({"dp": "2", "tp": "2", "pp": "4", "schedule": "1f1b"}, False),
        ({"dp": "1", "tp": "8", "pp": "2", "sequence_parallel": "no"}, False),
        ({"dp": "1", "tp": "16", "pp": "1"}, False),
        ({"dp": "8", "tp": "2", "zero_stage": "3", "micro_batch": "2"}, False),
        ({"dp": "16", "zero_stage": "0", "recompute": "none"}, False),
        ({"dp": "16", "zero_stage": "1", "overlap": "0"}, False),
        ({"compute": "160"}, False), ({"compute": "160", "peak_tflops": "x"}, False),
        ({"params": "7.5B", "dp": "16"}, False),
        ({"gated": "no", "ffn": "16384"}, False),
        ({"latency": "0"}, False),
        ({"layers": "96", "hidden": "12288", "heads": "96", "seq": "2048", "vocab": "50257", "ffn": "49152",
          "gated": "no", "global_batch": "1536", "dp": "8", "tp": "8", "pp": "16", "devices": "1024"}, True),
        ({"layers": "2", "hidden": "64", "heads": "4", "seq": "16", "vocab": "100", "ffn": "256",
          "global_batch": "8", "dp": "2", "tp": "2", "pp": "2", "devices": "8"}, True),
        # invalid fields
        ({"layers": "0"}, False), ({"hidden": "4097"}, False), ({"tp": "3"}, False), ({"pp": "5"}, False),
        ({"micro_batch": "3"}, False), ({"dp": "0"}, False), ({"zero_stage": "4"}, False),
        ({"schedule": "zigzag"}, False), ({"recompute": "half"}, False), ({"inter_bw": "0"}, False),
        ({"inter_unit": "GB"}, False), ({"device_memory": "-1"}, False), ({"mfu": "0"}, False),
        ({"mfu": "1.5"}, False), ({"params": "lots"}, False), ({"latency": "abc"}, False),
        ({"devices": "0"}, False), ({"seq": "1e9"}, False), ({"compute": "0"}, False),
        ({"overlap": "2"}, False), ({"global_batch": "", "vocab": "x"}, False),
    ]
    for dp, tp, pp in ((16, 1, 1), (8, 2, 1), (4, 4, 1), (4, 2, 2), (2, 8, 1), (1, 8, 2), (2, 2, 4), (1, 4, 4)):
        for stage in ("0", "1", "2", "3"):
            for rc in ("none", "selective"):
                cases.append(({"dp": str(dp), "tp": str(tp), "pp": str(pp), "zero_stage": stage, "recompute": rc}, False))
    return cases


def build() -> dict:
    cases = []
    for inputs, search in _cases():
        cases.append({"input": inputs, "search": search, **evaluate(inputs, search)})
    return {
        "about": "Generated by `python -m parallel_budget.book.plan_vectors`; do not edit. Values in B, B/s, s.",
        "fields": FIELDS,
        "cases": cases,
    }


def dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=None, sort_keys=True, separators=(",", ":")).replace(
        '},{"input"', '},\n{"input"') + "\n"


def main(argv=None) -> int:
    return write(build, dumps, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
