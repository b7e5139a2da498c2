"""How long from an input event to updated calculator outputs or practice feedback, in headless Chromium?

Prints the median, 99th percentile and maximum over N input events (default
1000) on the calculators page, per calculator and overall, then over N answers
submitted to the practice boxes of the ring all-reduce chapter (issue 14: the
answer read, checked against the expected value and its mistakes, feedback and
progress written), and the total size of the JavaScript and CSS the site ships for
the calculators, the practice boxes and the plan builder (minified at build time,
parallel_budget/book/minified.py; the readable sources' size beside it).  Targets:
max <= 16 ms (one frame), and shipped JS + CSS within minified.BUDGET (96 000 bytes, plan builder included).
It prints figures; it asserts nothing.

Each event runs in its own task (as typed keys do): it sets a field's value,
dispatches ``input`` and forces a layout (``offsetHeight``), so the time covers
validation, the formulas, the DOM and SVG rewrite, style and layout, but not
painting.  Chromium rounds ``performance.now()`` to 0.1 ms.

    python benchmarks/bench_calculators.py [--site _build/html] [--events 1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from serve import launch, serve  # noqa: E402

ASSETS = ROOT / "book" / "_static" / "calc"

# (calculator, field, values cycled through); the last pipeline entry is the
# largest chart the form allows (16 stages x 64 microbatches).
EVENTS = [
    ("ring", "grad", ["2", "4", "1.5", "350", "0.5 TB"]),
    ("ring", "bandwidth", ["25", "25 Gb/s", "100 GB/s", "1e-300"]),
    ("ring", "bw_unit", ["Gb/s", "GB/s"]),
    ("ring", "overlap", ["0", "0.5", "1"]),
    ("update", "grads", ["2, 6", "1 2 3 4 5 6 7 8", "-1, 3, 5"]),
    ("zero", "params", ["7B", "1.3e9", "350M", "70B"]),
    ("tp", "layers", ["32", "80", "1"]),
    ("pipeline", "microbatches", ["8", "64", "1"]),
    ("pipeline", "stages", ["16", "4"]),
]

JS = """async ([events, n]) => {
  const times = [];
  for (let i = 0; i < n; i++) {
    await new Promise((r) => setTimeout(r, 0));  // each event in its own task, like typing
    const [kind, field, values] = events[i % events.length];
    const el = document.getElementById(`pb-${kind}-${field}`);
    el.value = values[Math.floor(i / events.length) % values.length];
    const box = el.closest('.pb-calc');
    const t0 = performance.now();
    el.dispatchEvent(new Event('input', { bubbles: true }));
    void box.offsetHeight;
    times.push([kind, performance.now() - t0]);
    if (box.querySelector('.pb-results').textContent.includes('NaN')) throw new Error('NaN in outputs');
  }
  return times;
}"""


# Answers typed into the practice boxes: right, a named mistake, a unit slip, garbage, a wrong dimension.
PRACTICE_ANSWERS = ["145", "0.145 s", "215", "abc", "3 GB", "4.138", "51.72%", "95", "", "1e999"]

PRACTICE_JS = """async ([answers, n]) => {
  const boxes = [...document.querySelectorAll('.pb-practice[data-q] form')];
  const times = [];
  for (let i = 0; i < n; i++) {
    await new Promise((r) => setTimeout(r, 0));
    const form = boxes[i % boxes.length], input = form.querySelector('input');
    input.value = answers[Math.floor(i / boxes.length) % answers.length];
    const box = form.closest('.pb-practice'), fb = box.querySelector('.pb-q-fb');
    const t0 = performance.now();
    form.requestSubmit();
    void box.offsetHeight;
    times.push(performance.now() - t0);
    if (/NaN|undefined/.test(fb.textContent) || !fb.textContent) throw new Error('bad feedback: ' + fb.textContent);
  }
  return times;
}"""

# The same answers through PBPractice.check alone (reading, expected value, mistakes, wording; no DOM).
CHECK_JS = """([answers, n]) => {
  const bank = JSON.parse(document.getElementById('pb-bank').textContent), P = window.PBPractice, times = [];
  for (let i = 0; i < n; i++) {
    const q = bank.questions[i % bank.questions.length], params = P.generate(q, i % 7);
    const t0 = performance.now();
    P.check(q, params, answers[i % answers.length], bank);
    times.push(performance.now() - t0);
  }
  return times;
}"""


def asset_bytes(site: Path) -> dict:
    """{name: bytes} of the calculator assets the built site serves (the minified twins)."""
    from parallel_budget.book import minified

    return minified.shipped_sizes(site)


def ensure_site(site: Path | None) -> Path:
    if site is not None:
        return site
    default = ROOT / "_build" / "html"
    if (default / "book" / "calculators.html").exists():
        return default
    out = Path(tempfile.mkdtemp(prefix="pb-bench-"))
    print(f"building the book into {out} (no _build/html yet) ...", flush=True)
    jb = Path(sys.executable).with_name("jupyter-book")
    subprocess.run([str(jb), "build", str(ROOT), "--path-output", str(out)], check=True, capture_output=True)
    return out / "_build" / "html"


def summary(ms: list) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    return f"median {statistics.median(ms):6.3f} ms   p99 {p99:6.3f} ms   max {ms[-1]:6.3f} ms   (n={len(ms)})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", type=Path, default=None, help="built site (default: _build/html, else build one)")
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=2, help="independent runs, each in a fresh page")
    args = ap.parse_args(argv)
    from playwright.sync_api import sync_playwright

    print("load average (1, 5, 15 min): %.2f %.2f %.2f on %d CPUs" % (*os.getloadavg(), os.cpu_count()))
    site = ensure_site(args.site)
    sizes = asset_bytes(site)
    readable = sum(p.stat().st_size for p in ASSETS.iterdir() if p.suffix in (".js", ".css"))
    print("shipped calculator assets:", ", ".join(f"{k} {v} B" for k, v in sizes.items()))
    from parallel_budget.book.minified import BUDGET

    print(f"total JS + CSS shipped (calculators, practice and plan builder, minified): {sum(sizes.values())} B "
          f"(budget {BUDGET} B; readable sources {readable} B)")
    with serve(site) as url, sync_playwright() as p:
        browser = launch(p)
        try:
            for run in range(1, args.repeat + 1):
                page = browser.new_page()
                page.goto(f"{url}/book/calculators.html")
                page.wait_for_selector('.pb-calc[data-calc="tp"] [data-out="per_step"]')
                times = page.evaluate(JS, [EVENTS, args.events])
                page.close()
                print(f"run {run}: input event -> updated outputs, {args.events} events")
                print(f"  all       {summary([t for _, t in times])}")
                for kind in dict.fromkeys(k for k, _, _ in EVENTS):
                    print(f"  {kind:<9} {summary([t for k, t in times if k == kind])}")
                worst = max(t for _, t in times)
                print(f"  target max <= 16 ms: {'met' if worst <= 16 else 'NOT met'}")
                page = browser.new_page()
                page.goto(f"{url}/book/ring-allreduce.html")
                page.wait_for_selector('.pb-practice[data-q] .pb-q-src')
                times = page.evaluate(PRACTICE_JS, [PRACTICE_ANSWERS, args.events])
                checks = page.evaluate(CHECK_JS, [PRACTICE_ANSWERS, args.events])
                page.close()
                print(f"run {run}: practice answer -> feedback, {args.events} submits")
                print(f"  practice  {summary(times)}")
                print(f"  check()   {summary(checks)}   (the twin alone, no DOM)")
                print(f"  target max <= 16 ms: {'met' if max(times) <= 16 else 'NOT met'}")
        finally:
            browser.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
