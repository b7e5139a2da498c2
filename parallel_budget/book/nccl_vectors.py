"""Shared vectors for the plan builder's nccl-tests reader (``book/_static/calc/nccltests.js``).

Each case is a text a reader might paste and what :func:`parallel_budget.fit_nccl_tests`
makes of it: the fit (collective, ranks, α, bus bandwidth, points, largest
relative error, α per ring round) or the refusal (its message and the line it
names, 0 when it names none).  ``plans``: the verdict's sentence on what was
measured, for builder inputs with and without fits; ``overlaps``: the layout of
the builder's overlap figure (:func:`.overlapfigure.overlap_layout`); ``hfus``: the HFU and MFU that
:func:`parallel_budget.hfu_from_step` solves from a measured step or tokens/s (or its refusal).  ``python -m parallel_budget.book.nccl_vectors``
writes ``tests/vectors/nccltests.json``; ``tests/test_calibration.py`` checks it
is fresh and ``tests/js/nccltests.test.mjs`` that the JavaScript agrees.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..model.calibration import fit_nccl_tests, nccl_tests_text
from ..model.hfufit import hfu_from_step
from ..model.planreport import verdict_codes
from ..model.units import Q_
from .vectors import write

OUT = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "nccltests.json"

#: the head and three rows of an all_reduce_perf run on 2 × 8 H100 (the shape of public nccl-tests output)
SAMPLE = """\
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


def _edit(text: str, prefix: str, old: str, new: str) -> str:
    return "\n".join(x.replace(old, new) if x.startswith(prefix) else x for x in text.splitlines())


def _drop(text: str, needle: str) -> str:
    return "\n".join(x for x in text.splitlines() if needle not in x)


def texts() -> list:
    """(name, text) of every case: model tables, the sample, and broken ones."""
    out = [(f"{c} {r} ranks", nccl_tests_text(c, r, a, bw, dtype=t))
           for c, r, a, bw, t in (("all-reduce", 16, "23 us", "87 GB/s", "float"),
                                  ("all-reduce", 8, "9 us", "230 GB/s", "bfloat16"),
                                  ("all-gather", 16, "14 us", "41 GB/s", "half"),
                                  ("all-gather", 2, "6 us", "300 GB/s", "float"),
                                  ("reduce-scatter", 8, "11 us", "180 GB/s", "float"),
                                  ("reduce-scatter", 16, "30 us", "22 GB/s", "double"))]
    s = SAMPLE
    out += [
        ("sample", s), ("sample, CRLF", s.replace("\n", "\r\n")),
        ("validation off (N/A)", re.sub(r"(\s)0(\s+\d)", r"\1N/A\2", s)),
        ("no nThread line", _drop(s, "# nThread")),
        ("no rank lines", _drop(s, "Rank")),
        ("unknown type", _edit(s, "     1048576", "float", "floaty")),
        ("no reduction on an all-reduce", _edit(s, "     1048576", "     sum", "    none")),
        ("cut row", "\n".join(x[:60] if x.startswith("   268435456") else x for x in s.splitlines())),
        ("wrong elements", _edit(s, "   268435456", "91.13      0", "91.13      3")),
        ("rooted", _edit(s, "   268435456", "-1   5523.1", " 0   5523.1")),
        ("ranks do not match busbw", _drop(_drop(s, "Rank 15"), "Rank 14")),
        ("no column header", _drop(s, "#       size")),
        ("one size", "\n".join(x for x in s.splitlines() if not x.startswith(("     1048576", "   268435456")))),
        ("rank line after the table", s + "#  Rank 16 Group  0 Pid   1 on host-2 device  0 [0000:04:00] X\n"),
        ("a broadcast", nccl_tests_text("all-reduce", 8, "9 us", "200 GB/s").replace(" sum ", " none")),
        ("a log line", "NCCL INFO Bootstrap : Using eth0\n" + s),
        ("empty", "   \n"), ("words", "hello"),
    ]
    return out


def _case(name: str, text: str) -> dict:
    try:
        f = fit_nccl_tests(text)
    except ValueError as e:
        m = re.search(r"读不懂第 (\d+) 行", str(e))
        return {"name": name, "text": text, "error": str(e), "line": int(m.group(1)) if m else 0}
    return {"name": name, "text": text, "fit": {
        "collective": f.collective, "ranks": f.ranks, "alpha": f.alpha.to("s").magnitude,
        "bus_bandwidth": f.bus_bandwidth.to("B/s").magnitude, "points": f.points, "max_error": f.max_error,
        "step_latency": f.step_latency.to("s").magnitude}}


PLANS = [
    {},
    {"zero_stage": "3", "dp_nccl": nccl_tests_text("all-reduce", 16, "60 us", "150 GB/s")},
    {"dp": "2", "tp": "8", "zero_stage": "1", "dp_nccl": nccl_tests_text("reduce-scatter", 2, "20 us", "20 GB/s"),
     "tp_nccl": nccl_tests_text("all-reduce", 8, "15 us", "200 GB/s", dtype="bfloat16")},
    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "dp_nccl": nccl_tests_text("all-gather", 2, "9 us", "40 GB/s")},
    {"compute": "160", "dp_nccl": nccl_tests_text("all-reduce", 16, "60 us", "150 GB/s")},
    {"measured_step": "8.2"}, {"zero_stage": "3", "dp_nccl": nccl_tests_text("all-reduce", 16, "60 us", "150 GB/s"),
                               "measured_tokens": "30000"},
]


#: the builder's measured step (s) and throughput (tokens/s): plan.js's nccltests STEP fields
STEP = ("measured_step", "measured_tokens")


def fitted(inputs: dict):
    """(budget, HfuFit or None) of the builder's inputs: with a measured step or tokens/s, the budget at the
    hfu that reproduces it (:func:`parallel_budget.hfu_from_step`), as plan.js's evaluate does."""
    from . import plan_vectors

    kw, split, b, _, _ = plan_vectors._plan(inputs)
    t, n = (str(inputs.get(k, "")).strip() for k in STEP)
    if not (t or n):
        return b, None
    f = hfu_from_step(Q_(float(t), "s") if t else None, tokens_per_s=float(n) if n else None, **kw, **split)
    return f.budget, f


def _plan_case(inputs: dict) -> dict:
    """The builder's inputs (plan_vectors' form) and the verdict's sentence on what was measured."""
    b, _ = fitted(inputs)
    return {"input": inputs, "measured": next(v for c, v in zip(verdict_codes(b), b.verdict) if c == "measured")}


_AR16 = nccl_tests_text("all-reduce", 16, "60 us", "150 GB/s")
HFUS = [  # builder inputs with a measured step and/or tokens/s: solved, or refused with hfu_from_step's message
    {"measured_step": "8.2"}, {"measured_tokens": "20000"}, {"measured_step": "6.5536", "measured_tokens": "20000"},
    {"measured_step": "3.1862592405782246"}, {"zero_stage": "3", "dp_nccl": _AR16, "measured_step": "5"},
    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "interleaved", "measured_step": "7.25"},
    {"recompute": "full", "measured_tokens": "12345"},
    {"measured_step": "8", "measured_tokens": "20000"}, {"measured_step": "1.5"}, {"measured_step": "0.0001"},
    {"measured_tokens": "1e9"}, {"compute": "160", "measured_step": "12"},
]


def _hfu_case(inputs: dict) -> dict:
    try:
        _, f = fitted(inputs)
    except ValueError as e:
        return {"input": inputs, "error": str(e)}
    return {"input": inputs, "fit": {"step": f.step.to("s").magnitude, "hfu": f.hfu, "mfu": f.mfu, "hfu_step": f.hfu_step}}


OVERLAPS = PLANS + [{"zero_stage": "0"}, {"zero_stage": "3", "inter_unit": "Gb/s"}, {"recompute": "full"},
                    {"zero_stage": "1", "overlap_param_gather": "yes"}, {"dp": "1", "tp": "16", "zero_stage": "0"},
                    {"dp": "2", "tp": "2", "pp": "4", "zero_stage": "1", "schedule": "interleaved"},
                    {"zero_stage": "2", "grad_reduce_dtype": "fp32"}]  # fp32 reduce: 4 B per gradient on the wire


def _overlap_case(inputs: dict) -> dict:
    """The builder's inputs and the overlap figure's layout (overlapfigure.overlap_layout)."""
    from .overlapfigure import overlap_layout

    return {"input": inputs, "layout": overlap_layout(fitted(inputs)[0])}


def build() -> dict:
    return {"about": "Generated by `python -m parallel_budget.book.nccl_vectors`; do not edit. α in s, busbw in B/s.",
            "cases": [_case(n, t) for n, t in texts()], "plans": [_plan_case(p) for p in PLANS],
            "overlaps": [_overlap_case(p) for p in OVERLAPS], "hfus": [_hfu_case(p) for p in HFUS]}


def dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def main(argv=None) -> int:
    return write(build, dumps, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
