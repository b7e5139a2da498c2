"""Test vectors shared by Python and the in-page JavaScript calculators.

``python -m parallel_budget.book.vectors`` writes ``tests/vectors/calculators.json``:
every case is an input (the strings a reader types) and what the package makes
of it, computed here by calling :mod:`parallel_budget`.  ``tests/test_vectors.py``
checks the file is not stale; ``tests/js/*.test.mjs`` (``node --test``) checks
the JavaScript gives the same outputs and flags the same invalid fields.

Case kinds: ``update``, ``ring``, ``zero``, ``pipeline``, ``tp`` (see
:mod:`.calculators`), ``parse`` (:func:`.units.parse`), ``params``
(:func:`.units.as_params`) and ``fmt`` (:func:`.units.fmt`).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from .calculators import FIELDS, evaluate
from ..model.units import Q_, ambiguous_unit, as_params, fmt, fmt_auto, fmt_count, parse

OUT = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "calculators.json"

BAD_TEXT = ["", "  ", "abc", "-1", "1e999", "NaN", "Infinity", "1,5", "0x10", "1e400000"]


def _calc_cases():
    """Inputs for the five calculators: the lesson's numbers, grids, edges, bad fields."""
    rnd = random.Random(4)
    cases = [
        ("update", {}),
        ("update", {"grads": "2, 6", "reduction": "sum"}),
        ("update", {"grads": "2 6", "reduction": "mean_twice"}),
        ("update", {"grads": "1,2,3,4,5,6,7,8", "lr": "0.01", "w0": "-3"}),
        ("update", {"grads": "-1e12, 1e12"}),
        ("update", {"grads": "2"}),
        ("update", {"grads": "1 2 3 4 5 6 7 8 9"}),
        ("update", {"grads": "2, x"}),
        ("update", {"lr": "0"}),
        ("update", {"lr": "1e4"}),
        ("update", {"w0": "1e13"}),
        ("update", {"reduction": "max"}),
        ("update", {"grads": "", "lr": "", "w0": "", "reduction": ""}),
        ("ring", {}),
        ("ring", {"bandwidth": "12.5"}),
        ("ring", {"ranks": "8", "grad": "4", "bandwidth": "50"}),
        ("ring", {"bw_unit": "Gb/s"}),
        ("ring", {"grad_unit": "GiB"}),
        ("ring", {"grad": "500", "grad_unit": "MB"}),
        ("ring", {"ranks": "1"}),
        ("ring", {"grad": "0"}),
        ("ring", {"overlap": "1"}),
        ("ring", {"overlap": "0.5"}),
        ("ring", {"overlap": "1", "compute": "10"}),
        ("ring", {"overlap": "1", "backward_ratio": "1000"}),
        ("ring", {"overlap": "1", "backward_ratio": "0"}),
        ("ring", {"overlap": "0.8", "backward_ratio": "1.5"}),
        ("ring", {"overlap": "1", "compute": "4000", "last_bucket": "30"}),
        ("ring", {"overlap": "0.5", "last_bucket": "120"}),
        ("ring", {"last_bucket": "120.5"}),
        ("ring", {"backward_ratio": "1001"}),
        ("ring", {"last_bucket": "-1"}),
        ("ring", {"ranks": "100000", "grad": "1e6", "bandwidth": "1e-3"}),
        ("ring", {"ranks": "0"}),
        ("ring", {"ranks": "2.5"}),
        ("ring", {"ranks": "100001"}),
        ("ring", {"bandwidth": "0"}),
        ("ring", {"compute": "0"}),
        ("ring", {"overlap": "1.5"}),
        ("ring", {"overlap": "-0.1"}),
        ("ring", {"grad_unit": "Gb"}),
        ("ring", {"bw_unit": "GB"}),
        ("ring", {"grad": "2e6"}),
        # a value with its unit in a quantity field (the unit typed wins over the select)
        ("ring", {"bandwidth": "25 Gb/s"}),
        ("ring", {"bandwidth": "25Gbps", "bw_unit": "GB/s"}),
        ("ring", {"bandwidth": "200 MB/s"}),
        ("ring", {"bandwidth": "1 MB/s"}),
        ("ring", {"bandwidth": "0.99 MB/s"}),
        ("ring", {"bandwidth": "1e-300"}),
        ("ring", {"bandwidth": "101 TB/s"}),
        ("ring", {"bandwidth": "25 GB"}),
        ("ring", {"bandwidth": "25 gb/s"}),
        ("ring", {"grad": "0.5 TB"}),
        ("ring", {"grad": "1.5 GiB", "grad_unit": "MB"}),
        ("ring", {"grad": "16 Gb"}),
        ("ring", {"grad": "500 mb"}),
        ("ring", {"grad": "500 mB"}),
        ("ring", {"grad": "2 kb"}),
        ("ring", {"grad": "2 PB"}),
        ("ring", {"grad": "2 s"}),
        ("ring", {"compute": "1.2 s"}),
        ("ring", {"compute": "400ms", "last_bucket": "0.03 s", "overlap": "1"}),
        ("ring", {"compute": "3 h"}),
        ("ring", {"compute": "0 s"}),
        ("ring", {"last_bucket": "120 ms"}),
        ("ring", {"last_bucket": "2 GB"}),
        ("ring", {"ranks": "64", "grad": "10 GB", "bandwidth": "1 MB/s"}),
        ("zero", {}),
        ("zero", {"params": "7B", "dp": "8"}),
        ("zero", {"params": "1.3e9"}),
        ("zero", {"params": "350M", "memory": "16", "memory_unit": "GiB"}),
        ("zero", {"params": "70B", "dp": "64", "memory": "80"}),
        ("zero", {"params": "1B", "dp": "1"}),
        ("zero", {"param_bytes": "0", "grad_bytes": "0", "optim_bytes": "0"}),
        ("zero", {"grad_bytes": "4", "param_bytes": "2"}),
        ("zero", {"grad_bytes": "0"}),
        ("zero", {"params": "1e15", "dp": "1000000"}),
        ("zero", {"params": "7b"}),
        ("zero", {"params": "0"}),
        ("zero", {"params": "-7B"}),
        ("zero", {"params": "1e16"}),
        ("zero", {"params": "7 billion"}),
        ("zero", {"dp": "0"}),
        ("zero", {"optim_bytes": "65"}),
        ("zero", {"memory": "0"}),
        ("zero", {"memory_unit": "TB"}),
        ("zero", {"memory": "80 GiB"}),
        ("zero", {"memory": "0.5 TB", "memory_unit": "GiB"}),
        ("zero", {"memory": "0.5 MB"}),
        ("zero", {"memory": "80 gb"}),
        ("update", {"grads": "2，6"}),
        ("update", {"grads": "1；2；3"}),
        ("update", {"grads": "1、2, 3;4 5"}),
        ("pipeline", {}),
        ("pipeline", {"stages": "1"}),
        ("pipeline", {"microbatches": "1"}),
        ("pipeline", {"stages": "16", "microbatches": "64"}),
        ("pipeline", {"stages": "4", "stage_times": "10, 12, 10, 10"}),
        ("pipeline", {"stages": "3", "microbatches": "5", "stage_times": "5 20 5"}),
        ("pipeline", {"stages": "4", "stage_times": "10, 12"}),
        ("pipeline", {"stages": "2", "stage_times": "10, 0"}),
        ("pipeline", {"stages": "17"}),
        ("pipeline", {"microbatches": "0"}),
        ("pipeline", {"microbatches": "65"}),
        ("tp", {}),
        ("tp", {"tp": "1"}),
        ("tp", {"tp": "8", "layers": "80", "hidden": "8192"}),
        ("tp", {"hidden": "4095"}),
        ("tp", {"tp": "0"}),
        ("tp", {"bytes_per_elem": "0"}),
        ("tp", {"bytes_per_elem": "4", "batch": "1", "seq": "1", "hidden": "1", "tp": "1"}),
    ]
    # Every numeric field with every bad text.
    for kind, fields in FIELDS.items():
        for f in fields:
            if f["kind"] == "select":
                continue
            for bad in BAD_TEXT[2:6]:
                cases.append((kind, {f["name"]: bad}))
    # Grids over the main inputs.
    for ranks in (2, 3, 4, 7, 8, 16, 64, 1024):
        for grad, gu in (("2", "GB"), ("1.5", "GiB"), ("350", "MB")):
            for bw, bu in (("25", "GB/s"), ("200", "Gb/s")):
                cases.append(("ring", {"ranks": str(ranks), "grad": grad, "grad_unit": gu,
                                       "bandwidth": bw, "bw_unit": bu, "overlap": str(rnd.choice([0, 0.3, 1]))}))
    for params in ("125M", "1B", "1.3e9", "7B", "13B", "70B"):
        for dp in (1, 2, 4, 8, 64):
            cases.append(("zero", {"params": params, "dp": str(dp), "memory": str(rnd.choice([16, 24, 40, 80]))}))
    for p in (1, 2, 4, 8):
        for m in (1, 4, 8, 32):
            times = ", ".join(str(rnd.choice([5, 10, 15])) for _ in range(p)) if (p + m) % 3 == 0 else ""
            cases.append(("pipeline", {"stages": str(p), "microbatches": str(m), "stage_times": times}))
    for tp in (1, 2, 4, 8):
        for b, s, h in ((1, 2048, 4096), (8, 4096, 5120), (2, 1024, 12288)):
            cases.append(("tp", {"batch": str(b), "seq": str(s), "hidden": str(h), "tp": str(tp), "layers": "40"}))
    for _ in range(12):
        r = rnd.randint(2, 8)
        grads = ", ".join(f"{rnd.uniform(-10, 10):.3f}" for _ in range(r))
        cases.append(("update", {"grads": grads, "lr": str(rnd.choice([0.1, 0.01, 1])),
                                 "reduction": rnd.choice(["sum", "mean", "mean_twice"])}))
    return cases


PARSE_TEXTS = {
    "bytes": ["2 GB", "2GB", "1.5 GiB", "350 MB", "1 Gb", "512 KiB", "3 kB", "0 B", "1e3 MB", "4 TB",
              "2", "", "abc", "2 GB/s", "2 KB", "-2 GB", "2 XB", "1e400 GB",
              "1006.63 mb", "1006.63 mB", "2 kb", "2kb", "3 gb", "3 tb", "3 pb", "3 Mb", "3 kbit", "2 MiB"],
    "bandwidth": ["25 GB/s", "25 Gb/s", "25 Gbps", "12.5 GB/s", "100 Mb/s", "1 GiB/s", "25", "25 GB",
                  "25 Gb", "x", "-1 GB/s", "25 gb/s", "100 mbps", "8 kb/s", "100 mB/s"],
    "time": ["400 ms", "0.4 s", "120ms", "1 min", "250 us", "400", "3 GB", "-1 ms", "ms", "2 h"],
}
# Pathological text (issue 31): expressions pint would evaluate for hours, nesting, huge exponents and
# lengths, non-ASCII digits, Python-only number spellings.  Both readers refuse each at once (unit_text).
PARSE_TEXTS["bytes"] += ["2**9999999 MB", "9**9**9**9 B", "((((((((1))))))))", "(" * 60 + "1" + ")" * 60 + " MB",
                         "1 MB * 10**10**10", "1" * 31 + " MB", "1." + "0" * 31 + " MB", "1e99999 GB", "1e308 TB",
                         "3 MB" + " MB" * 30, "1 " + "M" * 70 + "B", "\u0661 MB", "1_000 MB", "nan MB", "inf GB",
                         "0x10 MB", "1 MB + 1 MB", "1 MB/s*s", "1 byte", "2 GiB ", "1.5e3MB"]
PARSE_TEXTS["bandwidth"] += ["25 GB / s", "1 GiB/sec", "25 GB/s/s", "25 GB/(1/s)", "25 GB/ms"]
PARSE_TEXTS["time"] += ["400 ms**2", "1e-3 s", "250 µs", "2 hr"]
# fmt_auto: every unit of AUTO_UNITS, its boundaries (999.96 ms rounds to 1 s), zero.
AUTO_VALUES = [(x, "s") for x in (0.0, 1e-9, 5e-5, 0.12, 0.9996, 0.99949, 1.0, 1.06, 120.0, 999.4, 999.96, 3600.0,
                                   59999.0, 7.2e6, 2e9)]
AUTO_VALUES += [(x, "B") for x in (0.0, 12.0, 999.0, 1500.0, 5e5, 1.34e8, 999.96e6, 3e9, 2.5e12, 1e15, 3e18)]
AUTO_VALUES += [(x, "B/s") for x in (1e6, 3.125e9, 25e9, 999.99e9, 1e14)]
PARAMS_TEXTS = ["7B", "1.3e9", "350M", "1e9", "125k", "2T", "1.5G", " 7B ", "7b", "seven", "", "-5M", "0", "7BB"]


def _value(func, *args):
    try:
        return {"value": func(*args)}
    except ValueError:
        return {"errors": ["value"]}


def _parse_case(text: str, kind: str) -> dict:
    """units.parse's verdict; for an ambiguous unit also the two readings both messages must name."""
    case = {"kind": "parse", "input": {"text": text, "as": kind},
            **_value(lambda t, k: parse(t, k).magnitude, text, kind)}
    found = ambiguous_unit(text)
    if found:
        case["readings"] = list(found[1:])
    return case


def build() -> dict:
    """All cases, in a stable order."""
    cases = [{"kind": k, "input": i, **evaluate(k, i)} for k, i in _calc_cases()]
    for kind, texts in PARSE_TEXTS.items():
        cases += [_parse_case(t, kind) for t in texts]
    for t in PARAMS_TEXTS:
        cases.append({"kind": "params", "input": {"text": t}, **_value(as_params, t)})
    fmts = [(3e9, "B", None), (1.2e8, "s", "ms"), (0.12, "s", None), (3.125e9, "B/s", None), (7e9, "B", "GB"),
            (5.5e9, "B", None), (1.234567e-3, "s", "ms"), (123456789.0, "B", "MB"), (0.0, "B", None),
            (2.5e11, "B", "GB"), (1e-7, "s", "ms"), (45.4545, "B", "B"), (999.95, "B", "B")]
    for x, base, unit in fmts:
        cases.append({"kind": "fmt", "input": {"value": x, "base": base, "unit": unit},
                      "text": fmt(Q_(x, base), unit)})
    for x, base in AUTO_VALUES:
        cases.append({"kind": "fmt_auto", "input": {"value": x, "base": base}, "text": fmt_auto(Q_(x, base))})
    for n in (1e9, 6.738e9, 7e10, 3.5e7, 1.25e8, 99999, 512, 0.5, 1e15, 1.3e9, 350e6):
        cases.append({"kind": "fmt_count", "input": {"value": n}, "text": fmt_count(n)})
    return {
        "about": "Generated by `python -m parallel_budget.book.vectors`; do not edit. Values in B, B/s, s.",
        "fields": FIELDS,
        "cases": cases,
    }


def dumps(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def write(build_fn, dumps_fn, default_out: Path, argv=None) -> int:
    """The command line of a vectors module: write ``build_fn()`` to ``argv[0]`` or ``default_out``."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else default_out
    out.parent.mkdir(parents=True, exist_ok=True)
    data = build_fn()
    out.write_text(dumps_fn(data), encoding="utf-8")
    print(f"wrote {len(data['cases'])} cases to {out}")
    return 0


def main(argv=None) -> int:
    return write(build, dumps, OUT, argv)


if __name__ == "__main__":
    raise SystemExit(main())
