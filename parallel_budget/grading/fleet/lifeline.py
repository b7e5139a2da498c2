"""Grading workers live no longer than the ``grade`` command, and a re-run ends what a killed run left.

* :func:`bind` (first thing in every local worker): ``PR_SET_PDEATHSIG`` = SIGKILL, so the kernel kills the
  worker when the process that started it dies (the pool's fork server); a watchdog thread checks every
  :data:`WATCH_SECONDS` that ``grade`` is still alive (``kill -9`` included) and that the parent is still
  the one it was started by (Linux sends the signal when the *thread* that forked the worker ends); once its
  workers are gone the fork server reads end of file on its pipe and exits.  A worker's sandboxes die
  with it (bubblewrap's ``--die-with-parent``, and the fork servers end at EOF on their socket).
* :func:`register` writes ``<registry>/<pid>`` holding the worker's start time (``/proc/<pid>/stat``
  field 22), so that a pid reused by another process is never taken for a worker.
* :func:`end_leftovers` (``grade``, under the course lock, before anything else): every registered worker
  still alive is killed, at most :data:`WAIT_SECONDS` are spent waiting for it to be gone, the registry
  is emptied.  Returns how many were ended (the command says so).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import threading
import time
from pathlib import Path

WATCH_SECONDS = 0.5
WAIT_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1


def start_time(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat`` field 22); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the command name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def bind(parent: int, grading: int | None = None) -> None:
    """Die when ``parent`` (the pool's fork server) or ``grading`` (the grade command) does: parent-death
    signal, and a watchdog for the grade command and the thread case; a worker whose parent or grade
    command is already gone ends at once."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    born = start_time(grading) if grading is not None else None
    if os.getppid() != parent or (grading is not None and born is None):
        os._exit(1)  # it died before the signal was armed

    def watch():
        # the grade command too: every worker holds the fork server's own pipe end (multiprocessing passes it
        # to each child), so the server sees end of file only once its workers are gone
        while os.getppid() == parent and (grading is None or start_time(grading) == born):
            time.sleep(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()


def register(registry: Path) -> None:
    """Record this worker (pid and start time) so that a later run can end it if ``grade`` was killed."""
    registry.mkdir(parents=True, exist_ok=True)
    me = os.getpid()
    (registry / str(me)).write_text(start_time(me) or "")


def end_leftovers(registry: Path, wait: float = WAIT_SECONDS) -> int:
    """Kill every registered worker that still runs (same pid *and* start time); empty the registry."""
    if not registry.is_dir():
        return 0
    ended = []
    for entry in registry.iterdir():
        if entry.name.isdigit():
            pid, born = int(entry.name), entry.read_text().strip()
            if born and start_time(pid) == born:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    ended.append((pid, born))
        entry.unlink(missing_ok=True)
    deadline = time.monotonic() + wait
    while any(start_time(pid) == born for pid, born in ended) and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(ended)
