"""Start torchrun agents as if on separate nodes, and make sure everything they started ends.

Used by :mod:`.restart_drill`.  ``torchrun`` starts its workers in sessions of
their own (``start_new_session=True``), so killing an agent's process group
does not reach them, and a killed agent leaves its workers to the init
process.  :func:`become_subreaper` makes the calling process adopt every orphan
below it instead; :func:`sweep` finds what is left by an environment marker
the agents pass on to their workers, kills it and reaps it.  Linux only (the
labs' launcher is too).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphans among this process's descendants are re-parented here, not to init (so they can be reaped)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def marked(key: str, value: str) -> list:
    """Pids of live processes (not this one) whose environment has ``key=value``."""
    want = f"{key}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if want in (entry / "environ").read_bytes().split(b"\0"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            pass
    return found


def reap_children() -> None:
    """Collect every exited child (adopted orphans included) without blocking."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


_PR_SET_PDEATHSIG = 1


def _prctl():
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL(None, use_errno=True).prctl
    return None


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Get ``sig`` when the parent (the thread that started this process) ends (Linux; a no-op elsewhere)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def start(argv: list, env: dict, log: Path) -> subprocess.Popen:
    """One agent, in a session of its own, output to ``log``; SIGTERM (torchrun then stops its workers) if we die."""
    prctl = _prctl()  # resolved here: the forked child only makes the call (no dlopen between fork and exec)

    def pdeathsig():
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    with open(log, "wb") as out:
        return subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=pdeathsig)


def stop(procs: list, key: str, value: str, grace: float) -> list:
    """End the agents (SIGTERM: torchrun then stops its workers), then anything still marked; returns what had to be killed."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGTERM)
    end = time.monotonic() + grace
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, end - time.monotonic()))
    for p in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    killed = []
    for _ in range(50):  # bounded: a few rounds of kill and reap until nothing marked is alive
        left = marked(key, value)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed += left
        time.sleep(0.05)
        reap_children()
    reap_children()
    return sorted(set(killed))
