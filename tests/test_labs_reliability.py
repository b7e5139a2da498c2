"""Does the launcher always clean up: after success, failure, a killed rank, a timeout, an interrupt, under stress?

"Survivors" are processes of the run still alive after ``run_lab`` returned or
raised.  The 20x stress runs every lab in CI (``CI=true``) or with
``PB_LABS_FULL_STRESS=1``, and the two cheapest labs otherwise (the others are
reported as skipped); a lab may lighten its runs (``STRESS_OPTIONS``) or run fewer
(``STRESS_RUNS``); ``benchmarks/bench_labs.py --stress 20``
runs it with figures.
Ranks are forked from the launcher's zygote unless a test says otherwise; the
last tests hold the zygote to what a plain ``python -m`` rank would be.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from parallel_budget.labs import LABS, LabError, LabTimeout, LaunchConfig, live_processes, run_lab
from parallel_budget.labs.engine import zygote, zygoteclient, zygoterank
from parallel_budget.labs.engine.launcher import launch

pytestmark = pytest.mark.slow
STRESS = 20
# Every lab 20 times with its default options in CI (CI=true) and on request; a local `make test`
# runs the two cheapest and reports the rest as skipped.
FULL = os.environ.get("PB_LABS_FULL_STRESS") == "1" or os.environ.get("CI", "").lower() == "true"
CHEAP = ("tensor_parallel", "tp_pp")
# The stress is about processes (all end, no port collides), not about the numbers: a lab module may name
# lighter STRESS_OPTIONS (pipeline_schedule waits on purpose) and fewer STRESS_RUNS (none does today: the torchrun
# drill forks its workers from its agents, ~8 CPU-s a run); benchmarks/bench_labs.py --stress uses the same.


def stress_plan(name: str) -> tuple:
    from parallel_budget.labs.engine.config import lab_module

    module = lab_module(name)
    return getattr(module, "STRESS_RUNS", STRESS), getattr(module, "STRESS_OPTIONS", {})
ROOT = Path(__file__).resolve().parents[1]


def _is_zygote(p: psutil.Process) -> bool:
    return zygote.CODE in p.cmdline()


def no_children_left() -> bool:
    """No live lab process among this test process's descendants.

    A lab process is one whose command line names a lab module, or any child of a
    zygote (whatever its command line says); the zygote itself is not one.
    """
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() == psutil.STATUS_ZOMBIE or _is_zygote(p):
                continue
            parent = p.parent()
            if "parallel_budget.labs." in " ".join(p.cmdline()) or (parent is not None and _is_zygote(parent)):
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


def _stress(name, tmp_path, runs=STRESS, **options):
    ports, failures = [], []
    for i in range(runs):
        r = run_lab(name, log_dir=tmp_path, run_id=f"{name}-{i}", check=False, **options)
        if r.is_failed():
            failures.append(r.text())
        assert all(f == zygoteclient.enabled() for f in r.forked), r.forked  # the default launch path ran
        assert live_processes(r.run_id) == [], f"run {i} left processes"
        assert not any("Address already in use" in e or "EADDRINUSE" in e for e in r.stderrs)
        ports.append(r.master_port)
    assert failures == []
    assert no_children_left()
    return ports


@pytest.mark.stress
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if FULL or n in CHEAP else pytest.mark.skip(
        reason="the 20x stress of every lab runs in CI (CI=true) or with PB_LABS_FULL_STRESS=1"))
    for n in LABS
])
def test_stress_twenty_runs_in_a_row(name, tmp_path):
    """Do 20 runs in a row of the lab (STRESS_OPTIONS, STRESS_RUNS) all succeed, no port collision, nothing left behind?"""
    runs, options = stress_plan(name)
    _stress(name, tmp_path, runs, **options)


def _run_environ(p: psutil.Process) -> str:
    """PB_LAB_RUN_ID of a process ("" when gone or unreadable)."""
    try:
        return p.environ().get("PB_LAB_RUN_ID", "")
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return ""


def test_a_torchrun_drill_cut_by_the_timeout_leaves_nothing(tmp_path):
    """When the launcher's timeout ends the restart drill (its agents and workers mid-run), does every torchrun
    agent and worker end too?"""
    run_id = f"drill-cut-{os.getpid()}"  # other sessions on this machine may run the same test
    t0 = time.monotonic()
    # 50 steps with a checkpoint each take ~9 s on an idle two-core machine (the default drill ~5 s now that its
    # agents are forked): 6 s cuts it mid-run, agents and workers alive
    with pytest.raises(LabTimeout):
        run_lab("restart_drill", timeout=6, log_dir=tmp_path, run_id=run_id, steps=50, save_every=1, kill_step=50)
    assert time.monotonic() - t0 < 6 + 3 + 10
    deadline = time.monotonic() + 15  # the agents' SIGTERM handling stops their workers; bounded
    while live_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert live_processes(run_id) == []
    assert not [p for p in psutil.process_iter(["cmdline"]) if "pb-drill-" in " ".join(p.info["cmdline"] or ())
                and _run_environ(p) == run_id and p.status() != psutil.STATUS_ZOMBIE]
    assert no_children_left()


def test_forked_drill_agents_look_like_their_command_to_ps_and_carry_the_sweep_marker(tmp_path):
    """Do the drill's agents (forks of the driver) and their workers show the forkrun command line and, in
    /proc/<pid>/environ, the run id and the marker the driver sweeps by?"""
    from parallel_budget.labs.restart_drill import MARK

    run_id, seen, stop = f"drill-id-{os.getpid()}", {}, threading.Event()

    def watch():
        while not stop.is_set():
            for p in psutil.process_iter(["pid", "cmdline"]):
                cmd = " ".join(p.info["cmdline"] or ())
                if "pb-drill-" in cmd and p.info["pid"] not in seen:
                    with contextlib.suppress(psutil.Error):
                        seen[p.info["pid"]] = (cmd, p.environ())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        r = run_lab("restart_drill", log_dir=tmp_path, run_id=run_id)
    finally:
        stop.set()
        watcher.join()
    assert r.facts["agents_forked"]
    assert len(seen) >= 2 + 4, seen  # two agents and at least the first four workers
    for cmd, env in seen.values():
        assert cmd.startswith(f"{sys.executable} -m parallel_budget.labs.engine.forkrun --nnodes=2"), cmd
        assert env.get("PB_LAB_RUN_ID") == run_id and env.get(MARK, "").endswith(run_id), env
    assert live_processes(run_id) == [] and no_children_left()


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


# ------------------------------------------------------------------ the zygote

def _comparable(r):
    rows = [row.cells() for row in r.rows]  # these labs measure no time: every cell must agree
    return r.returncodes, r.facts, rows, r.environment, r.failures


@pytest.mark.parametrize("name, options", [
    ("two_rank_update", {}),
    ("tensor_parallel", {}),
    ("floor", {"fail_rank": 1, "stall_rank": 0}),  # rank 1 fails, rank 0 is killed: SIGTERM in both
])
def test_zygote_and_plain_processes_give_the_same_report(name, options, tmp_path):
    """Does a run forked from the zygote report exactly what a run of plain `python -m` ranks reports?"""
    got = {}
    for forked in (True, False):
        cfg = LaunchConfig(lab=name, options=options, log_dir=tmp_path, run_id=f"{name}-{forked}", zygote=forked,
                           timeout=120)
        r = launch(cfg, check=False)
        assert r.forked == (forked,) * r.ranks
        assert live_processes(r.run_id) == []
        got[forked] = _comparable(r)
    assert got[True] == got[False]
    assert no_children_left()


def test_a_forked_rank_looks_like_python_m_to_ps_and_psutil(tmp_path, monkeypatch):
    """Does a forked rank show the command line, environment, folder and session of `python -m` (and one-thread zygote)?"""
    monkeypatch.setenv("PB_LAB_ZYGOTE", "1")
    box = {}
    th = threading.Thread(target=lambda: box.update(r=run_lab("floor", stall_rank=-2, timeout=20, check=False,
                                                                log_dir=tmp_path, run_id="looks")))
    th.start()
    found, deadline = [], time.monotonic() + 20
    while len(found) < 2 and time.monotonic() < deadline:
        found = [p for p in live_processes("looks")
                 if (tmp_path / "looks" / p.environ()["RANK"] / "stdout.log").read_text().strip()]
        time.sleep(0.1)
    assert len(found) == 2
    for p in found:
        env = p.environ()
        rank = env["RANK"]
        assert [a for a in p.cmdline() if a] == [sys.executable, "-m", "parallel_budget.labs.floor",
                                                 "--stall-rank", "-2", "--fail-rank", "-1"]
        assert env["WORLD_SIZE"] == "2" and env["PB_LAB_RUN_ID"] == "looks" and env["OMP_NUM_THREADS"] == "1"
        assert zygoterank.ENV_PAD not in env and env["PB_LAB_RUN_DIR"] == str(tmp_path / "looks")
        assert p.cwd() == str(tmp_path / "looks" / rank) and os.getsid(p.pid) == p.pid
        assert _is_zygote(p.parent()) and p.parent().num_threads() == 1
        assert p.parent().pid in zygoteclient.live_zygotes()
    assert not no_children_left()  # a running rank counts; its zygote is never one
    first = int(found[0].environ()["RANK"])
    for p in found:
        with contextlib.suppress(psutil.NoSuchProcess):  # the launcher may have stopped and reaped it already
            p.kill()
    th.join(60)
    # the first rank dies of the test's kill; the launcher, seeing it, may stop the other (SIGTERM) before the
    # test's second kill lands: both are reported as the signals they died of
    codes = box["r"].returncodes
    assert codes[first] == -signal.SIGKILL and codes[1 - first] in (-signal.SIGKILL, -signal.SIGTERM), codes
    assert no_children_left() and zygoteclient.live_zygotes()


def test_closing_a_channel_kills_a_rank_the_launcher_lost(tmp_path, monkeypatch):
    """A rank the launcher never learnt about (Ctrl-C mid-launch): is it caught as a leftover, and killed at the run's end?"""
    monkeypatch.setenv("PB_LAB_ZYGOTE", "1")
    env = dict(os.environ, OMP_NUM_THREADS="1", RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT="9",
               PB_LAB_RUN_ID="lost", PB_LAB_RUN_DIR=str(tmp_path))
    z = zygoteclient.zygote_for(env)
    channel = zygoteclient.open_channel(z, 120)
    argv = [sys.executable, "-m", "parallel_budget.labs.floor"]
    try:
        with open(tmp_path / "out", "wb") as out, open(tmp_path / "err", "wb") as err:
            rank = channel.spawn(argv, env, tmp_path, out, err)  # waits for a store that never answers
        assert rank.threads_at_fork == 1
        assert [p.pid for p in live_processes("lost")] == [rank.pid] and not no_children_left()
        del rank  # the launcher lost it
    finally:
        channel.close()
    assert live_processes("lost") == [] and no_children_left()


def test_the_zygote_lives_with_its_launcher_only(tmp_path):
    """Does the zygote outlive the thread that started it, leave when idle, follow the environment, and die with its launcher and ranks?"""
    script = """
import os, threading, time
import psutil
from concurrent.futures import ThreadPoolExecutor
from parallel_budget.labs import run_lab
from parallel_budget.labs.engine import zygoteclient
with ThreadPoolExecutor(1) as pool:  # started from a thread that then ends
    assert pool.submit(run_lab, "floor").result().forked == (True, True)
first = zygoteclient.live_zygotes()
assert run_lab("floor").forked == (True, True) and zygoteclient.live_zygotes() == first, first
time.sleep(4)  # PB_LAB_ZYGOTE_IDLE=2
assert zygoteclient.live_zygotes() == [] and not psutil.pid_exists(first[0])
os.environ["PB_LAB_SOME_SETTING"] = "1"  # another environment: another zygote
threading.Thread(target=run_lab, args=("floor",), kwargs={"stall_rank": -2, "timeout": 300}, daemon=True).start()
while not zygoteclient.live_zygotes():
    time.sleep(0.05)
print(zygoteclient.live_zygotes()[0], flush=True)
time.sleep(300)
"""
    env = dict(os.environ, PB_LAB_ZYGOTE="1", PB_LAB_ZYGOTE_IDLE="2", PB_LAB_LOG_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), proc.communicate(timeout=30)[1][-3000:]
        zyg = psutil.Process(int(line))
        ranks, deadline = [], time.monotonic() + 120
        while len(ranks) < 2 and time.monotonic() < deadline:
            ranks = [p for p in zyg.children() if "parallel_budget.labs.floor" in " ".join(p.cmdline())]
            time.sleep(0.1)
        assert len(ranks) == 2
        proc.kill()  # the launcher dies without cleaning up
        proc.wait(30)
        _, alive = psutil.wait_procs([zyg, *ranks], timeout=30)
        assert alive == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_zygote_forks_only_what_python_m_would_start_identically(capsys):
    """Another environment (beyond the per-rank variables), another command or a command line too long to show: plain python -m."""
    from types import SimpleNamespace

    env = dict(os.environ, OMP_NUM_THREADS="1")
    rank_env = dict(env, RANK="1", WORLD_SIZE="2", PB_LAB_RUN_ID="x", PB_LAB_RUN_DIR="/tmp/x")
    channel = SimpleNamespace(zygote=SimpleNamespace(env=zygoteclient.base_env(env)))
    argv = [sys.executable, "-m", "parallel_budget.labs.floor"]
    assert zygoteclient.serves(channel, argv, rank_env)
    assert not zygoteclient.serves(None, argv, rank_env)
    assert not zygoteclient.serves(channel, argv, dict(rank_env, TORCH_DISTRIBUTED_DEBUG="DETAIL"))
    assert not zygoteclient.serves(channel, ["/usr/bin/python3", *argv[1:]], rank_env)
    assert not zygoteclient.serves(channel, argv + ["--x", "y" * zygoterank.ARG_PAD_BYTES], rank_env)
    assert not zygoteclient.serves(channel, argv, dict(rank_env, PB_LAB_RUN_DIR="/" + "d" * zygoterank.ENV_PAD_BYTES))
    # a forked rank ends with the status `python` gives SystemExit(code)
    assert [zygoterank.exit_code(c) for c in (None, 0, 3, "故障")] == [0, 0, 3, 1]
    assert capsys.readouterr().err == "故障\n"


def test_a_rank_ends_with_atexit_and_flushed_streams_but_no_interpreter_teardown():
    """Does end_rank() run atexit handlers and flush, but skip the teardown in which a plain rank once died
    ("terminate called without an active exception": gloo threads kept alive by DDP's reducer)?"""
    code = ("import atexit, sys\n"
            "from parallel_budget.labs.engine.cli import end_rank\n"
            "class Teardown:\n"
            "    def __del__(self):\n"
            "        print('teardown ran', flush=True)\n"
            "keep = Teardown()\n"
            "atexit.register(lambda: print('atexit ran'))\n"
            "sys.stdout.write('unflushed')\n"
            "end_rank(3)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 3
    assert "unflushed" in done.stdout and "atexit ran" in done.stdout and "teardown ran" not in done.stdout
    plain = subprocess.run([sys.executable, "-c", code.replace("end_rank(3)", "sys.exit(3)")], capture_output=True,
                           text=True, timeout=60, cwd=ROOT)
    assert plain.returncode == 3 and "teardown ran" in plain.stdout  # what the interpreter's teardown would do


def test_an_edited_package_gets_a_fresh_zygote(monkeypatch):
    """After a module of the package changed on disk, do the next ranks fork from a zygote that imported the new code?"""
    monkeypatch.setenv("PB_LAB_ZYGOTE", "1")
    env = dict(os.environ, OMP_NUM_THREADS="1")
    first = zygoteclient.zygote_for(env)
    assert zygoteclient.zygote_for(env) is first
    monkeypatch.setattr(zygoteclient, "package_stamp", lambda: first.stamp + 1)
    fresh = zygoteclient.zygote_for(env)
    assert fresh is not first and first.process.poll() is not None  # the stale one, idle, was ended
    assert fresh.ready(120) and fresh.process.pid in zygoteclient.live_zygotes()
    zygoteclient.discard(fresh)
