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

    `make test` builds the book once (`make book`, incrementally) and sets PB_SITE to it; set
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


@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium (one per test module)."""
    from playwright import sync_api
    from serve import launch

    with sync_api.sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def base_url(built_site):
    """The built site served on an ephemeral localhost port."""
    from serve import serve

    with serve(built_site) as url:
        yield url


@pytest.fixture
def tab(browser, base_url):
    """A :class:`serve.Tab` on the built site; the test fails on any off-site request or console error."""
    from serve import Tab

    t = Tab(browser, base_url)
    yield t
    t.check()


@pytest.fixture
def disk_tab(browser, built_site):
    """A :class:`serve.Tab` on the built site opened straight from disk (file:// URLs), as a reader may."""
    from serve import Tab

    t = Tab(browser, built_site.resolve().as_uri())
    yield t
    t.check()


# The slowest modules, slowest first (seconds of their tests, `make test` on a 2-core machine, `--durations`,
# 2026-12-07).  `make test` gives each xdist worker whole modules in collection order (--dist loadscope), so
# these go first: the long ones start at once instead of forming the tail.  Order only affects wall time.
HEAVY = (
    "test_grading_infra.py",  # ~350 s: preflight, a fault mid-run, a killed worker, batch merges (real grade runs)
    "test_grading_parallel.py",  # ~200 s: four real grade runs of a class
    "test_grading_isolation.py",  # ~150 s: a class alone and beside one hostile student per trick
    "test_grading_cluster.py",  # ~130 s: a LocalCluster and real dask scheduler/worker processes
    "test_site_walk.py",  # ~120 s: every page at two widths in two colour schemes, axe-core on each
    "test_grading_bounds.py",  # ~95 s: 5 MB and 50 MB notebooks, a slow walk cut at the student budget
    "test_instructor.py",  # ~90 s
    "test_formgrader.py",  # ~85 s: formgrader in a browser beside the grade command
    "test_pathological_answers.py",  # ~80 s
    "test_build_deps.py",  # ~75 s: six builds of a three-page copy of the book
    "test_selfcheck.py",  # ~60 s
    "test_grading_hostile.py",
    "test_grading_lifeline.py",  # kill -9 of a real grade run, then a re-run
    "test_grading_residue.py",  # two real grade runs, a poisoner before its classmates
    "test_grading_intake_owner.py",
    "test_grading_old_release.py",
    "test_grading_output_bound.py",  # a kernel printing 4 x 400 MB
    "test_jupyterlab.py",  # three browser tests on one JupyterLab (a chapter, its labs, the glossary)
    "test_csp.py",  # a graded class, formgrader and its feedback in a browser, every script channel tried
    "test_grading_intake.py",
    "test_labs_reliability.py",
    "test_browser.py",
    "test_questions.py",
    "test_practice_site.py",
    "test_forkserver.py",
    "test_labs.py",
)
# The labs' 20x stress runs, slowest first (seconds per 20 runs, idle 2-core machine): the second pass hands
# items out in collection order (--dist load), so the drill starts at once instead of last (it was last in
# LABS order, and the pass waited ~90 s on it alone).
STRESS_HEAVY = ("restart_drill", "checkpoint", "hang", "overlap", "two_rank_update", "fsdp")  # ~180, 65, 55, 45, 25, 25 s


def _stress_rank(item) -> int:
    name = getattr(getattr(item, "callspec", None), "params", {}).get("name")
    return STRESS_HEAVY.index(name) if name in STRESS_HEAVY and item.get_closest_marker("stress") else len(STRESS_HEAVY)


def pytest_collection_modifyitems(config, items):
    """Put the modules of HEAVY first, in that order, and the heaviest stress runs first within their module;
    the rest keep pytest's order (stable sort)."""
    rank = {name: k for k, name in enumerate(HEAVY)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(HEAVY)), _stress_rank(item)))
