"""The in-page calculators' form model: fields, limits, and what they compute.

The static site's calculators (``book/_static/calc/model.js``) take the strings
a reader types into a form.  This module says, for each calculator kind, which
fields exist, what each accepts (the form's limits are stricter than the
package's: absurdly large values are refused so nothing overflows or freezes
the page), and turns valid strings into one call of the package.  The test
vectors (:mod:`.vectors`) are produced by :func:`evaluate`; the JavaScript is
held to them, so the page and the book give the same numbers.

``evaluate(kind, inputs)`` returns ``{"errors": [...fields...]}`` when any
field is invalid (every invalid field, in field order), else ``{"out": {...}}``
with plain floats in SI base units (bytes, bytes/s, seconds).
"""

from __future__ import annotations

import math
import re

from ..model.communication import ring_allreduce
from ..model.memory import zero_communication, zero_table
from ..model.parallelism import pipeline_bubble, pipeline_schedule, tp_allreduce
from ..model.steptime import step_time
from ..model.units import as_params, parse
from ..model.update import REDUCTIONS, data_parallel_update

NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
# Between list items: spaces, ASCII and full-width commas and semicolons, the enumeration comma.
LIST_SEP = re.compile(r"[\s,，、;；]+")


def _f(name, kind, default, lo=None, hi=None, *, lo_open=False, options=None, unit=None, optional=False, qty=None):
    field = {
        "name": name, "kind": kind, "default": default, "min": lo, "max": hi,
        "min_open": lo_open, "options": options, "unit": unit, "optional": optional,
    }
    return {**field, "qty": qty} if qty else field  # only quantity fields carry "qty" (plan_vectors shares _f)


# kind: "int", "num", "list" (numbers separated by commas/spaces), "params", "select", "qty".
# A "qty" field is a quantity of kind ``qty`` (units.parse: "25 Gb/s", "0.5 TB", "120 ms"); a bare
# number is in ``unit``: the value of the select field of that name, or that unit itself ("ms").
# Its limits are in SI base units (B, B/s, s): beyond them no real link, model or step is meant.
FIELDS = {
    "update": [
        _f("grads", "list", "2, 6", -1e12, 1e12, options=[2, 8]),  # options: how many ranks
        _f("lr", "num", "0.1", 0, 1e3, lo_open=True),
        _f("w0", "num", "1", -1e12, 1e12),
        _f("reduction", "select", "mean", options=list(REDUCTIONS)),
    ],
    "ring": [
        _f("ranks", "int", "4", 1, 100000),
        _f("grad", "qty", "2", 0, 1e15, unit="grad_unit", qty="bytes"),
        _f("grad_unit", "select", "GB", options=["GB", "GiB", "MB"]),
        _f("bandwidth", "qty", "25", 1e6, 1e14, unit="bw_unit", qty="bandwidth"),  # 1 MB/s to 100 TB/s
        _f("bw_unit", "select", "GB/s", options=["GB/s", "Gb/s"]),
        _f("compute", "qty", "400", 0, 1e4, lo_open=True, unit="ms", qty="time"),  # on one device
        _f("overlap", "num", "0", 0, 1),
        _f("backward_ratio", "num", "2", 0, 1e3),  # backward / forward time; share = r / (1 + r), 2 -> 2/3
        _f("last_bucket", "qty", "0", 0, 1e4, unit="ms", qty="time"),  # always exposed
    ],
    "zero": [
        _f("params", "params", "1B", 0, 1e15, lo_open=True),
        _f("dp", "int", "4", 1, 1000000),
        _f("param_bytes", "num", "2", 0, 64),
        _f("grad_bytes", "num", "2", 0, 64),
        _f("optim_bytes", "num", "12", 0, 64),
        _f("memory", "qty", "80", 1e6, 1e15, unit="memory_unit", qty="bytes"),
        _f("memory_unit", "select", "GB", options=["GB", "GiB"]),
    ],
    "pipeline": [
        _f("stages", "int", "4", 1, 16),
        _f("microbatches", "int", "8", 1, 64),
        _f("stage_times", "list", "", 0, 1e6, lo_open=True, optional=True),  # ms per stage
    ],
    "tp": [
        _f("batch", "int", "8", 1, 100000),  # the chapter's example: pb.tp_allreduce(8, 2048, 4096, 4, 32)
        _f("seq", "int", "2048", 1, 10000000),
        _f("hidden", "int", "4096", 1, 1000000),
        _f("tp", "int", "4", 1, 1024),
        _f("layers", "int", "32", 1, 10000),
        _f("bytes_per_elem", "num", "2", 0, 16, lo_open=True),
    ],
}

EQUAL_STAGE_MS = 10.0  # stage time used when no per-stage times are given
SELECTS = {f["name"]: f for fields in FIELDS.values() for f in fields if f["kind"] == "select"}


def _in_range(x: float, f: dict) -> bool:
    lo, hi = f["min"], f["max"]
    if lo is not None and (x <= lo if f["min_open"] else x < lo):
        return False
    return hi is None or x <= hi


def _number(text: str, f: dict):
    if not NUMBER.match(text):
        return None
    x = float(text)
    if not math.isfinite(x) or not _in_range(x, f):
        return None
    if f["kind"] == "int" and not x.is_integer():
        return None
    return x


def _field_value(f: dict, raw: dict):
    """The parsed value of one field, or None when it is invalid."""
    text = str(raw.get(f["name"], f["default"])).strip()
    kind = f["kind"]
    if kind == "select":
        return text if text in f["options"] else None
    if kind == "list":
        items = [t for t in LIST_SEP.split(text) if t]
        if not items:
            return [] if f["optional"] else None
        values = [_number(t, f) for t in items]
        if any(v is None for v in values):
            return None
        if f["options"] and not f["options"][0] <= len(values) <= f["options"][1]:
            return None
        return values
    if kind == "params":
        try:
            n = as_params(text)
        except ValueError:
            return None
        return n if _in_range(n, f) else None
    if kind == "qty":
        return _quantity(f, text, raw)
    return _number(text, f)


def _quantity(f: dict, text: str, raw: dict):
    """A quantity field in SI base units: "25 Gb/s" as typed, or a bare number in the field's unit; None if invalid."""
    if NUMBER.match(text):
        unit, select = f["unit"], SELECTS.get(f["unit"])
        if select is not None:
            unit = str(raw.get(unit, select["default"])).strip()
            if unit not in select["options"]:
                return None
        text = f"{text} {unit}"
    try:
        x = parse(text, f["qty"], arg=f["name"]).magnitude
    except ValueError:
        return None
    return x if _in_range(x, f) else None


def _update(v):
    r = data_parallel_update(v["w0"], v["grads"], v["lr"], v["reduction"])
    return {
        "ranks": len(r.grads), "aggregated_grad": r.aggregated_grad, "weights": list(r.weights),
        "reference": r.reference, "matches_reference": r.matches_reference,
    }


def _ring(v):
    grad, bw = v["grad"], v["bandwidth"]
    r = ring_allreduce(int(v["ranks"]), grad, bw)
    s = step_time(v["compute"], r.ranks, r.lower_bound, v["overlap"],
                  v["backward_ratio"] / (1 + v["backward_ratio"]), v["last_bucket"])
    return {
        "grad": grad, "bandwidth": bw, "chunk": r.chunk.magnitude, "rounds": r.steps,
        "send_per_rank": r.send_per_rank.magnitude, "recv_per_rank": r.recv_per_rank.magnitude,
        "total_sent": r.total_sent.magnitude, "lower_bound": r.lower_bound.magnitude,
        "compute_per_rank": s.compute_per_rank.magnitude, "backward": s.backward.magnitude,
        "hidden_comm": s.hidden_comm.magnitude,
        "exposed_comm": s.exposed_comm.magnitude, "step": s.step.magnitude,
        "speedup": s.speedup, "efficiency": s.efficiency, "comm_bound": s.is_comm_bound(),
    }


def _zero(v):
    memory = v["memory"]
    t = zero_table(v["params"], int(v["dp"]), v["param_bytes"], v["grad_bytes"], v["optim_bytes"])
    rows = [
        {
            "stage": r.stage, "param_state": r.param_state.magnitude, "grad_state": r.grad_state.magnitude,
            "optim_state": r.optim_state.magnitude, "total": r.total.magnitude, "fits": r.fits(memory),
            "send_per_rank": c.send_per_rank.magnitude, "relative_to_ddp": c.relative_to_ddp,
        }
        for r, c in ((r, zero_communication(v["params"], int(v["dp"]), r.stage, v["param_bytes"],
                                            v["grad_bytes"])) for r in t)
    ]
    return {"params": v["params"], "memory": memory, "rows": rows, "smallest_fitting_stage": t.smallest_fitting_stage(memory)}


def _pipeline(v):
    p, m = int(v["stages"]), int(v["microbatches"])
    b = pipeline_bubble(p, m)
    ms = v["stage_times"] or [EQUAL_STAGE_MS] * p
    s = pipeline_schedule([t / 1000 for t in ms], m)
    return {
        "idle_fraction": b.idle_fraction, "bubble_over_ideal": b.bubble_over_ideal,
        "stage_times": [t.magnitude for t in s.stage_times], "starts": [list(r) for r in s.starts],
        "makespan": s.makespan.magnitude, "idle_per_stage": list(s.idle_per_stage),
        "schedule_idle_fraction": s.idle_fraction,
    }


def _tp(v):
    r = tp_allreduce(*(int(v[k]) for k in ("batch", "seq", "hidden", "tp", "layers")), v["bytes_per_elem"])
    return {
        "message": r.message.magnitude, "allreduces_per_layer": r.allreduces_per_layer,
        "per_layer": r.per_layer.magnitude, "per_step": r.per_step.magnitude,
        "send_per_rank_per_layer": r.send_per_rank_per_layer.magnitude,
        "send_per_rank_per_step": r.send_per_rank_per_step.magnitude,
    }


_COMPUTE = {"update": _update, "ring": _ring, "zero": _zero, "pipeline": _pipeline, "tp": _tp}
_ARG = re.compile(r"参数 ([A-Za-z_]+)")


def evaluate(kind: str, inputs: dict) -> dict:
    """Validate the form strings of calculator ``kind`` and compute its outputs.

    Missing fields take their default.  Errors the package itself raises (say,
    ``hidden`` not divisible by ``tp``) are reported on the argument it names.
    """
    if kind not in FIELDS:
        raise ValueError(f"evaluate() 的参数 kind 只能是 {'、'.join(FIELDS)}，收到 {kind!r}。")
    values, errors = {}, []
    for f in FIELDS[kind]:
        value = _field_value(f, inputs)
        if value is None:
            errors.append(f["name"])
        values[f["name"]] = value
    if kind == "pipeline" and not errors and values["stage_times"] and len(values["stage_times"]) != values["stages"]:
        errors.append("stage_times")
    if errors:
        return {"errors": errors}
    try:
        return {"out": _COMPUTE[kind](values)}
    except ValueError as exc:
        m = _ARG.search(str(exc))
        return {"errors": [m.group(1) if m else kind]}
