"""How long does the plan builder take: a search over every split of N devices, and drawing a timeline?

Targets (issue 23): ``search_plans`` on 64 devices <= 1 s in Python and <= 50 ms in the browser.
Prints the median, minimum and maximum of ``--repeat`` runs:

* Python: ``search_plans`` and its ten fastest plans (what the chapter and the page show), cold
  (package caches cleared) and warm, and every fitting plan timed (``.plans``, the full sort);
* node and headless Debian chromium: ``plan.js``'s ``search`` (the ten fastest) on the calculator's
  default inputs (the chapter's Llama-2-7B shape) with the benchmark's devices and global batch;
* the timeline draw time: chromium's layout + SVG of the chapter's default plan and of a 4-stage
  pipeline with 256 microbatches, and Python's layout + matplotlib figure of the same plans.

It prints figures; it asserts nothing.  On a shared machine the figures include other people's load.

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
from parallel_budget.book.sphinxext import PLAN_JS  # noqa: E402
from parallel_budget.model import planterms  # noqa: E402

CALC = ROOT / "book" / "_static" / "calc"
KW = dict(model="llama2-7b", cluster="a100-40gb")
PIPELINE = {"global_batch": "512", "dp": "2", "tp": "2", "pp": "4", "zero_stage": "1"}
JS_SEARCH = """
const t = [];
let r = null;
for (let i = 0; i < REPEAT; i++) {
  const t0 = performance.now();
  r = PBPlan.search(s, DEVICES);
  t.push(performance.now() - t0);
}
return { times: t, candidates: r.candidates, fits: r.fits, timed: r.timed };
"""


def line(name: str, times_ms: list, extra: str = "") -> None:
    print(f"{name:<42} median {statistics.median(times_ms):8.2f} ms   min {min(times_ms):8.2f}   "
          f"max {max(times_ms):8.2f}   {extra}")


def python(devices: int, batch: int, repeat: int) -> None:
    kw = dict(**KW, global_batch=batch)
    cold, warm, full, full_cpu = [], [], [], []
    for i in range(repeat):
        planterms.cache_clear()
        t0 = time.perf_counter()
        r = pb.search_plans(devices=devices, **kw)
        r.top(10)
        cold.append(1e3 * (time.perf_counter() - t0))
        t0 = time.perf_counter()
        r = pb.search_plans(devices=devices, **kw)
        top = r[:10]
        warm.append(1e3 * (time.perf_counter() - t0))
        if i < max(1, repeat // 5):  # the full sort times every fitting plan: a few runs suffice
            planterms.cache_clear()
            t0, c0 = time.perf_counter(), time.process_time()
            pb.search_plans(devices=devices, **kw).plans
            full.append(1e3 * (time.perf_counter() - t0))
            full_cpu.append(1e3 * (time.process_time() - c0))
    extra = f"{r.candidates} splits, {len(r)} fit, {len(top)} given out"
    line(f"Python search_plans({devices}) ten fastest, cold", cold, extra + " (caches cleared)")
    line(f"Python search_plans({devices}) ten fastest, warm", warm, extra)
    line(f"Python search_plans({devices}).plans, cold", full, f"every fitting plan timed: {len(r)} timelines")
    line("  the same, CPU seconds", full_cpu, "what the wall clock shows on a quiet machine")


def _js_body(devices: int, batch: int, repeat: int) -> str:
    setup = f"const ev = PBPlan.evaluate({{ global_batch: '{batch}' }}); const s = ev.s;"
    return setup + JS_SEARCH.replace("REPEAT", str(repeat)).replace("DEVICES", str(devices))


def node(devices: int, batch: int, repeat: int) -> None:
    exe = shutil.which("node")
    if not exe:
        print("node: not installed, skipped")
        return
    script = (f"globalThis.PBModel = require({json.dumps(str(CALC / 'model.js'))});"
              f"const PBPlan = require({json.dumps(str(CALC / 'plan.js'))});"
              f"console.log(JSON.stringify((() => {{ {_js_body(devices, batch, repeat)} }})()));")
    r = json.loads(subprocess.run([exe, "-e", script], capture_output=True, text=True, timeout=300, check=True).stdout)
    line(f"node plan.js search({devices})", r["times"], f"{r['candidates']} splits, {r['fits']} fit, {r['timed']} timed")


DRAW = """(inputs) => {
  const el = document.createElement('div');
  el.style.width = '720px';
  document.body.appendChild(el);
  const t = [];
  for (let i = 0; i < REPEAT; i++) {
    const r = PBPlan.evaluate(inputs);
    const t0 = performance.now();
    const L = PBPlan.layouts(r);
    el.innerHTML = PBPlanView.timelineSvg(L.timeline, 720);
    el.getBoundingClientRect();
    t.push(performance.now() - t0);
  }
  return { times: t, blocks: el.querySelectorAll('rect').length };
}"""


def browser(devices: int, batch: int, repeat: int) -> None:
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        b = launch(p)
        try:
            ctx = b.new_context()
            ctx.route("**/*", lambda route: route.abort())  # nothing leaves the machine
            page = ctx.new_page()
            page.set_content("<!doctype html><meta charset=utf-8><body></body>")
            for js in ("calc/model.js", *PLAN_JS):  # the plan page's scripts, in its order
                page.add_script_tag(content=(CALC.parent / js).read_text(encoding="utf-8"))
            r = page.evaluate(f"() => {{ {_js_body(devices, batch, repeat)} }}")
            line(f"chromium plan.js search({devices})", r["times"], f"{r['candidates']} splits, {r['fits']} fit, {r['timed']} timed")
            for name, inputs in (("default plan", {}), ("pipeline, 256 microbatches", PIPELINE)):
                d = page.evaluate(DRAW.replace("REPEAT", str(repeat)), inputs)
                line(f"chromium timeline layout + SVG, {name}", d["times"], f"{d['blocks']} rects")
        finally:
            b.close()


def figures(repeat: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from parallel_budget.book import plan_vectors, planfigures, planlayout

    for name, inputs in (("default plan", {}), ("pipeline, 256 microbatches", PIPELINE)):
        _, _, b, _, _ = plan_vectors._plan(inputs)
        lay, fig = [], []
        for _ in range(max(1, repeat // 5)):
            t0 = time.perf_counter()
            layout = planlayout.timeline_layout(b)
            t1 = time.perf_counter()
            planfigures.timeline_figure(layout)
            t2 = time.perf_counter()
            lay.append(1e3 * (t1 - t0))
            fig.append(1e3 * (t2 - t1))
        line(f"Python timeline layout, {name}", lay, f"{len(layout['blocks'])} blocks")
        line(f"Python matplotlib timeline figure, {name}", fig, "")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", type=int, default=64)
    ap.add_argument("--global-batch", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=20)
    a = ap.parse_args(argv)
    print(f"search over every (dp, tp, pp, zero_stage, micro_batch) split: Llama-2-7B, A100 40GB nodes, "
          f"global batch {a.global_batch}, {a.devices} devices; targets: Python <= 1 s, browser <= 50 ms")
    python(a.devices, a.global_batch, a.repeat)
    node(a.devices, a.global_batch, a.repeat)
    browser(a.devices, a.global_batch, a.repeat)
    figures(a.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
