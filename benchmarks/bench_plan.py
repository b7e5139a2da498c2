"""How long does a search over every split of N devices take, in Python, in node and in Chromium?

Targets (issue 15): ``search_plans`` over every split of 64 devices <= 200 ms in
Python and <= 50 ms in the browser.  Prints the median, minimum and maximum of
``--repeat`` runs, cold (package caches cleared) and warm for Python; node and
headless Debian chromium run ``book/_static/calc/plan.js``'s ``search`` on the
calculator's default inputs (the chapter's Llama-2-7B shape) with the
benchmark's devices and global batch.  It prints figures; it asserts nothing.

    python benchmarks/bench_plan.py [--devices 64] [--global-batch 512] [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))
from serve import launch  # noqa: E402

import parallel_budget as pb  # noqa: E402
from parallel_budget.model import planterms  # noqa: E402

CALC = ROOT / "book" / "_static" / "calc"
JS_RUN = """
const t = [];
let r = null;
for (let i = 0; i < REPEAT; i++) {
  const t0 = performance.now();
  r = PBPlan.search(s, DEVICES);
  t.push(performance.now() - t0);
}
return { times: t, candidates: r.candidates, fits: r.plans.length };
"""


def line(name: str, times_ms: list, extra: str = "") -> None:
    print(f"{name:<34} median {statistics.median(times_ms):7.2f} ms   min {min(times_ms):7.2f}   "
          f"max {max(times_ms):7.2f}   {extra}")


def python(devices: int, batch: int, repeat: int) -> None:
    kw = dict(**pb.SHAPES["llama2-7b"], global_batch=batch, recompute="selective", peak_flops=312e12)
    cold, warm, wrapped = [], [], []
    for _ in range(repeat):
        planterms.cache_clear()
        t0 = time.perf_counter()
        r = pb.search_plans(devices=devices, **kw)
        cold.append(1e3 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        r = pb.search_plans(devices=devices, **kw)
        warm.append(1e3 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        r.plans  # every fitting plan as a PlanBudget of Quantities
        wrapped.append(1e3 * (time.perf_counter() - t0))
    extra = f"{r.candidates} splits, {len(r)} fit"
    line(f"Python search_plans({devices}) cold", cold, extra + " (package caches cleared)")
    line(f"Python search_plans({devices}) warm", warm, extra)
    line(f"  + all {len(r)} plans as Quantities", wrapped, "(first read of .plans)")
    both = [c + w for c, w in zip(cold, wrapped)]
    line("  cold search + all plans", both, "")


def _js_body(devices: int, batch: int, repeat: int) -> str:
    setup = f"const ev = PBPlan.evaluate({{ global_batch: '{batch}' }}); const s = ev.s;"
    return setup + JS_RUN.replace("REPEAT", str(repeat)).replace("DEVICES", str(devices))


def node(devices: int, batch: int, repeat: int) -> None:
    exe = shutil.which("node")
    if not exe:
        print("node: not installed, skipped")
        return
    script = (f"globalThis.PBModel = require({json.dumps(str(CALC / 'model.js'))});"
              f"const PBPlan = require({json.dumps(str(CALC / 'plan.js'))});"
              f"console.log(JSON.stringify((() => {{ {_js_body(devices, batch, repeat)} }})()));")
    out = subprocess.run([exe, "-e", script], capture_output=True, text=True, timeout=300, check=True).stdout
    r = json.loads(out)
    line(f"node plan.js search({devices})", r["times"], f"{r['candidates']} splits, {r['fits']} fit")


def browser(devices: int, batch: int, repeat: int) -> None:
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        b = launch(p)
        try:
            ctx = b.new_context()
            ctx.route("**/*", lambda route: route.abort())  # nothing leaves the machine
            page = ctx.new_page()
            page.set_content("<!doctype html><meta charset=utf-8><body></body>")
            for js in ("model.js", "plan.js"):
                page.add_script_tag(content=(CALC / js).read_text(encoding="utf-8"))
            r = page.evaluate(f"() => {{ {_js_body(devices, batch, repeat)} }}")
            line(f"chromium plan.js search({devices})", r["times"], f"{r['candidates']} splits, {r['fits']} fit")
        finally:
            b.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=64)
    ap.add_argument("--global-batch", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args(argv)
    print(f"search over every (dp, tp, pp, zero_stage, micro_batch) split: Llama-2-7B shape, "
          f"global batch {a.global_batch}, {a.devices} devices; targets: Python <= 200 ms, browser <= 50 ms")
    python(a.devices, a.global_batch, a.repeat)
    node(a.devices, a.global_batch, a.repeat)
    browser(a.devices, a.global_batch, a.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
