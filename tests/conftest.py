"""Shared fixtures: one book build per test session, shared by pytest-xdist workers."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def build_book(out: Path, *, timeout: float = 900) -> Path:
    """Build the book with -W into ``out`` (incrementally if it was built there before); return its html root.

    A failed build removes its Sphinx environment, so the next build reads every page again and reports
    the same warnings instead of passing on a half-updated environment.
    """
    proc = subprocess.run(
        [sys.executable, "-m", "parallel_budget.book.build", str(ROOT), "--path-output", str(out), "-W", "--keep-going"],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1"),
    )
    html = out / "_build" / "html"
    assert proc.returncode == 0, f"book build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    assert (html / "index.html").exists()
    return html


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The built site's html root.

    `make test` builds the book once (incrementally, into _build/test) and sets PB_SITE to it; set
    PB_SITE=<path to _build/html> yourself to reuse a build made by `make book`.  Without PB_SITE the
    first xdist worker to get here builds into a folder all workers share, under a file lock.
    """
    given = os.environ.get("PB_SITE")
    if given:
        return Path(given)
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the base all workers of this run share
    out = shared / "book"
    with open(shared / "book.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if the build fails
        done = out / "_build" / "html" / "index.html"
        if done.exists() and (out / "built.ok").exists():
            return done.parent
        html = build_book(out)
        (out / "built.ok").write_text("ok\n")
        return html


def pytest_collection_modifyitems(config, items):
    """Spread the longest tests (the labs' 20x stress runs, minutes each) evenly through the run.

    pytest-xdist hands each worker a contiguous share of the list (then idle workers steal from the
    end of busy ones); with the stress runs together they would queue on one worker or form the tail.
    They go in between modules, so no module-scoped fixture is set up twice.
    """
    long = [i for i in items if "stress" in i.nodeid]
    rest = [i for i in items if "stress" not in i.nodeid]
    if not long or not rest:
        return
    boundaries = [k for k in range(len(rest) + 1)
                  if k in (0, len(rest)) or rest[k - 1].module is not rest[k].module]
    step = len(rest) / len(long)
    slots = [min(boundaries, key=lambda b: abs(b - n * step)) for n in range(len(long))]
    ordered = []
    for k, item in enumerate(rest):
        ordered += [long[n] for n, slot in enumerate(slots) if slot == k]
        ordered.append(item)
    ordered += [long[n] for n, slot in enumerate(slots) if slot == len(rest)]
    items[:] = ordered
