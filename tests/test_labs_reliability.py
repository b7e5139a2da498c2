"""Does the launcher always clean up: after success, failure, a killed rank, a timeout, an interrupt, under stress?

"Survivors" are processes of the run still alive after ``run_lab`` returned or
raised.  The 20x stress runs the two cheapest labs here; set
``PB_LABS_FULL_STRESS=1`` to run every lab 20 times (about 10 minutes on 2 cores),
or use ``benchmarks/bench_labs.py --stress 20``.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from parallel_budget.labs import LABS, LabError, LabTimeout, live_processes, run_lab

pytestmark = pytest.mark.slow
STRESS = 20
# The full stress (every lab 20 times, about 8 minutes on 2 cores) runs in CI (CI=true) and on
# request; a local `make test` runs the 20x stress of the two cheapest labs and says it skipped the rest.
FULL = os.environ.get("PB_LABS_FULL_STRESS") == "1" or os.environ.get("CI", "").lower() == "true"


def no_children_left() -> bool:
    """No live lab process among this test process's descendants."""
    for p in psutil.Process().children(recursive=True):
        try:
            if "parallel_budget.labs." in " ".join(p.cmdline()) and p.status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def test_failing_rank_is_quoted_and_the_stalled_one_killed(tmp_path):
    """Does a failing rank raise LabError quoting its stderr, and is the stalled rank killed?"""
    t0 = time.monotonic()
    with pytest.raises(LabError) as info:
        run_lab("floor", fail_rank=1, stall_rank=0, timeout=60, log_dir=tmp_path, run_id="fail")
    assert time.monotonic() - t0 < 50  # well before the 60 s timeout: the failure ended the run, on a loaded machine too
    msg = str(info.value)
    assert "rank 1 退出码 1" in msg and "故意失败" in msg and "其余 rank 已被终止" in msg
    assert info.value.result.returncodes[0] in (-signal.SIGTERM, -signal.SIGKILL)
    assert live_processes("fail") == [] and no_children_left()


def test_forced_timeout_kills_everything(tmp_path):
    """Does a run that never ends stop at the timeout with every process gone?"""
    t0 = time.monotonic()
    with pytest.raises(LabTimeout) as info:
        run_lab("floor", stall_rank=-2, timeout=6, log_dir=tmp_path, run_id="timeout")
    elapsed = time.monotonic() - t0
    assert 6 <= elapsed < 6 + 3 + 5  # timeout + SIGTERM grace + slack
    assert "timeout=6" in str(info.value) and "已终止全部 2 个进程" in str(info.value)
    assert info.value.result.timed_out
    assert live_processes("timeout") == [] and no_children_left()


def test_real_hang_without_bookkeeping_is_cut_by_the_timeout(tmp_path):
    """With guard=False, does a genuinely mismatched job end by the timeout or gloo's error, never hang?"""
    t0 = time.monotonic()
    with pytest.raises(LabError):
        run_lab("hang", variant="data", guard=False, collective_timeout=60.0, timeout=6, log_dir=tmp_path,
                run_id="realhang")
    assert time.monotonic() - t0 < 6 + 3 + 5
    assert live_processes("realhang") == [] and no_children_left()


def test_killed_rank_fails_the_run_and_the_rest_are_reaped(tmp_path):
    """If a rank is killed with SIGKILL, does run_lab report it and clean up the others?"""
    box = {}

    def target():
        try:
            run_lab("floor", stall_rank=-2, timeout=60, log_dir=tmp_path, run_id="killed")
        except LabError as exc:
            box["error"] = exc

    th = threading.Thread(target=target)
    th.start()
    victim = None
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        for p in live_processes("killed"):
            env = p.environ()
            if env.get("RANK") == "1" and (tmp_path / "killed" / "1" / "stdout.log").read_text().strip():
                victim = p  # rank 1 has joined the group and reports it is stalled
        time.sleep(0.1)
    assert victim is not None
    victim.send_signal(signal.SIGKILL)
    th.join(60)
    assert not th.is_alive()
    msg = str(box["error"])
    assert "rank 1 被信号 SIGKILL 终止" in msg
    assert live_processes("killed") == [] and no_children_left()


def test_keyboard_interrupt_cleans_up(tmp_path):
    """Does Ctrl-C in the notebook (KeyboardInterrupt) kill every rank before it propagates?"""

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 4.0)
        with pytest.raises(KeyboardInterrupt):
            run_lab("floor", stall_rank=-2, timeout=60, log_dir=tmp_path, run_id="interrupt")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert live_processes("interrupt") == [] and no_children_left()


def _stress(name, tmp_path, **options):
    ports, failures = [], []
    for i in range(STRESS):
        r = run_lab(name, log_dir=tmp_path, run_id=f"{name}-{i}", check=False, **options)
        if r.is_failed():
            failures.append(r.text())
        assert live_processes(r.run_id) == [], f"run {i} left processes"
        assert not any("Address already in use" in e or "EADDRINUSE" in e for e in r.stderrs)
        ports.append(r.master_port)
    assert failures == []
    assert no_children_left()
    return ports


@pytest.mark.parametrize("name, options", [
    ("checkpoint", {}),
    ("tp_pp", {"microbatches": 2, "stage_ms": 5.0}),
])
def test_stress_twenty_runs_in_a_row(name, options, tmp_path):
    """Do 20 runs in a row all succeed, with no port collision and nothing left behind?"""
    _stress(name, tmp_path, **options)


@pytest.mark.skipif(not FULL, reason="full stress runs in CI (CI=true) or with PB_LABS_FULL_STRESS=1")
@pytest.mark.parametrize("name", list(LABS))
def test_full_stress_every_lab(name, tmp_path):
    """(Opt-in) Does every lab survive 20 runs in a row?"""
    _stress(name, tmp_path)


def test_two_labs_at_once(tmp_path):
    """Do two labs launched at the same time both succeed on distinct ports, twice over?"""
    pairs = [("hang", {"variant": "skip"}), ("late_rank", {"delay_ms": 50.0, "steps": 1})]
    for i in range(2):
        with ThreadPoolExecutor(2) as pool:
            futs = [pool.submit(run_lab, n, log_dir=tmp_path, run_id=f"pair{i}-{n}", **o) for n, o in pairs]
            results = [f.result() for f in futs]
        assert all(not r.is_failed() for r in results)
        assert results[0].master_port != results[1].master_port
        for r in results:
            assert live_processes(r.run_id) == []
    assert no_children_left()
