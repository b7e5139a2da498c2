"""How long a student waits in JupyterLab: double-click a chapter to numbers in its prose, and Run All of an
exercise notebook (issue 25; targets: <= 10 s and <= 5 s on a 2-core machine).

A real JupyterLab from this venv (isolated folders, tests/jupyterlab_server.py) serves a copy of book/ and
exercises/; Debian's chromium, driven by Playwright, acts as the student:

* chapter: double-click ``book/ring-allreduce.md`` in the file browser, choose 运行 → 运行所有单元格 as soon
  as the kernel is ready, and wait until the prose reads "每 rank 发送 3 GB" with no ``{eval}`` name left.
  Printed: double-click -> kernel ready, Run All -> numbers, double-click -> numbers (the figure);
* exercise: double-click ``exercises/lesson/02-ring-allreduce.ipynb``, Run All when the kernel is ready, and
  wait until no cell is queued or running.  Printed: Run All -> done, and how many code cells ran (an
  unanswered part that raises stops Run All there; the released notebooks' answer contract decides that).

Beside each wall time: the CPU seconds the notebook's kernel used, the CPU seconds of everything the wait
depends on (server, kernels, browser), and the load average, because the machine is shared: wall times rise
with the others' load, CPU seconds much less (on an idle 2-core machine the wall time is at least half the
CPU seconds).  It prints figures; it asserts nothing.

    python benchmarks/bench_jupyterlab.py [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from jupyterlab_server import (NOTEBOOK, NO_WINDOWING, _counts, jupyterlab, kernel_status, menu,  # noqa: E402
                               open_by_double_click, prose)
from serve import Tab, launch  # noqa: E402


def _cpu(processes) -> float:
    total = 0.0
    for p in processes:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return total


def kernel_cpu(lab) -> float:
    """CPU seconds used so far by the server's kernels."""
    kernels = []
    for p in psutil.Process(lab.process.pid).children(recursive=True):
        try:
            if "ipykernel_launcher" in " ".join(p.cmdline()):
                kernels.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return _cpu(kernels)


def all_cpu(lab) -> float:
    """CPU seconds used so far by everything the student's wait depends on: the server, its kernels, and the
    browser (this process's children: Playwright's driver and chromium)."""
    me = psutil.Process()
    return _cpu([psutil.Process(lab.process.pid), *psutil.Process(lab.process.pid).children(recursive=True),
                 *me.children(recursive=True)])


def wait(page, predicate, timeout: float, what: str) -> float:
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        page.wait_for_timeout(50)
    return time.monotonic()


def numbers_shown(page) -> bool:
    text = prose(page)
    return "每 rank 发送 3 GB" in text and "ch2_" not in text


def chapter(page, lab) -> dict:
    page.goto(f"{lab.url}/lab/tree/book", wait_until="domcontentloaded")
    page.wait_for_selector(".jp-DirListing-item", timeout=90_000)
    page.wait_for_timeout(1000)  # the page settles: its own start is not the student's wait for a chapter
    everything = all_cpu(lab)
    clicked = time.monotonic()
    open_by_double_click(page, lab, "book", "ring-allreduce.md", navigate=False)
    ready = wait(page, lambda: kernel_status(page) == "idle", 120, "chapter kernel")
    cpu = kernel_cpu(lab)
    run = time.monotonic()
    menu(page, "运行", "运行所有单元格")
    shown = wait(page, lambda: numbers_shown(page), 120, "chapter numbers")
    return {"kernel ready": ready - clicked, "Run All -> numbers": shown - run,
            "double-click -> numbers": shown - clicked, "kernel CPU s, Run All": kernel_cpu(lab) - cpu,
            "all CPU s, double-click -> numbers": all_cpu(lab) - everything}


def idle_and_nothing_queued(page) -> bool:
    queued = page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]
        .some(e => e.textContent.includes('*'))""")
    return not queued and kernel_status(page) == "idle"


def exercise(page, lab) -> dict:
    open_by_double_click(page, lab, "exercises/lesson", "02-ring-allreduce.ipynb")
    wait(page, lambda: kernel_status(page) == "idle", 120, "exercise kernel")
    cpu, everything = kernel_cpu(lab), all_cpu(lab)
    run = time.monotonic()
    menu(page, "运行", "运行所有单元格")
    wait(page, lambda: any(_counts(page)), 60, "exercise start")
    done = wait(page, lambda: idle_and_nothing_queued(page), 120, "exercise Run All")
    counts = _counts(page)
    return {"Run All -> done": done - run, "kernel CPU s, Run All": kernel_cpu(lab) - cpu,
            "all CPU s, Run All": all_cpu(lab) - everything,
            "code cells run": f"{sum(1 for c in counts if c)}/{len(counts)}"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1,
                        help="fresh browser contexts and kernels (default 1; each takes 1-4 min on the loaded machine)")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())} on {os.cpu_count()} cores "
          "(a shared machine: wall times rise with the others' load)")
    with tempfile.TemporaryDirectory(prefix="bench-jupyterlab-") as tmp:
        root = Path(tmp) / "root"
        for folder in ("book", "exercises"):
            shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        rows: dict[str, list] = {}
        with jupyterlab(root, Path(tmp) / "user", user_settings=NO_WINDOWING) as lab, sync_playwright() as pw:
            browser = launch(pw)
            try:
                for i in range(args.repeat):
                    for name, step in (("chapter", chapter), ("exercise", exercise)):
                        tab = Tab(browser, lab.url, viewport={"width": 1400, "height": 1000})
                        try:
                            for key, value in step(tab.page, lab).items():
                                rows.setdefault(f"{name}: {key}", []).append(value)
                        finally:
                            tab.context.close()
                        wait_for_no_kernels(lab)
            finally:
                browser.close()
    print(f"{'':42} {'median':>8} {'max':>8}   ({args.repeat} runs)")
    for key, values in rows.items():
        if isinstance(values[0], str):
            print(f"{key:42} {values[0]:>8}")
        else:
            print(f"{key:42} {statistics.median(values):8.2f} {max(values):8.2f}")
    print("targets: chapter double-click -> numbers <= 10 s; exercise Run All -> done <= 5 s")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


def wait_for_no_kernels(lab, timeout: float = 120) -> None:
    """Each run starts a fresh kernel: shut down what the closed page left (JupyterLab's API)."""
    import urllib.request

    for kernel in lab.api("kernels"):
        request = urllib.request.Request(f"{lab.url}/api/kernels/{kernel['id']}", method="DELETE")
        try:
            urllib.request.urlopen(request, timeout=30).close()
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while lab.api("kernels") and time.monotonic() < deadline:
        time.sleep(0.5)


if __name__ == "__main__":
    sys.exit(main())
