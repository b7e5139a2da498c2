"""The local pool's workers are forked from one fork server that has imported the grading stack (pool.py):
reused while nothing changed, started again when the environment changes, so a worker always sees the
environment ``grade`` was called with."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pytest

from parallel_budget.grading.fleet import pool

pytestmark = pytest.mark.slow


def _ask(fn, *args):
    """``fn(*args)`` in a fresh one-worker pool made as grade makes it."""
    ex = ProcessPoolExecutor(max_workers=1, mp_context=pool._context())
    try:
        return ex.submit(fn, *args).result(timeout=180)
    finally:
        ex.shutdown(wait=True)


def test_workers_share_a_warm_fork_server_that_follows_the_environment(monkeypatch):
    """Same server (the parent of each worker) while os.environ is unchanged; a new one, and the new
    variable in the worker, after it changed; the stack already imported when a worker starts?"""
    monkeypatch.delenv("PB_TEST_POOL_ENV", raising=False)
    first, again = _ask(os.getppid), _ask(os.getppid)
    assert first == again != os.getpid()
    assert _ask(_env, "PB_TEST_POOL_ENV") is None
    monkeypatch.setenv("PB_TEST_POOL_ENV", "changed")
    assert _ask(_env, "PB_TEST_POOL_ENV") == "changed"
    assert _ask(os.getppid) != first
    assert _ask(_loaded, "nbgrader.converters") and _ask(_loaded, "parallel_budget.grading.fleet.shard")


def _loaded(name: str) -> bool:
    import sys

    return name in sys.modules


def _env(name: str):
    return os.environ.get(name)
