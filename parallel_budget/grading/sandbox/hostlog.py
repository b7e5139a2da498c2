"""What sandboxed processes may write into the grader's logs, and how long the logs stay (issue 22).

A sandbox (its fork server, kernels and function hosts) used to inherit the
grading worker's stdout and stderr: whatever a student's code wrote to file
descriptor 2 landed in ``autograde/.work/logs/worker-<pid>.log`` (up to the
sandbox's 64 MB file limit, per process) or on the instructor's terminal, and
the logs were never removed.

* :class:`BoundedSink` is a pipe the sandbox gets as stdout and stderr; a
  thread of the worker copies the first :data:`SANDBOX_BYTES` into the worker's
  own stderr (its log) and drains the rest, noting once how much it dropped.
* :func:`prune` runs at the start of every grade run: it removes the worker
  and per-student logs of earlier runs (a student who failed then is graded
  again now and gets a fresh log) and keeps the newest :data:`KEEP_COMMAND_LOGS`
  command logs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

SANDBOX_BYTES = 256 * 1024  # of one sandbox's output kept in the worker's log
KEEP_COMMAND_LOGS = 20


class BoundedSink:
    """A pipe whose write end a sandbox gets; its first ``limit`` bytes go to ``dest`` (a file descriptor)."""

    def __init__(self, limit: int = SANDBOX_BYTES, dest: int = 2):
        self.limit, self.dest = limit, dest
        self._read, self.fd = os.pipe()
        self.thread = threading.Thread(target=self._copy, name="sandbox-output", daemon=True)
        self.thread.start()

    def _copy(self) -> None:
        kept = dropped = 0
        try:
            while chunk := os.read(self._read, 65536):
                room = max(0, self.limit - kept)
                if room:
                    self._write(chunk[:room])
                kept += min(room, len(chunk))
                if len(chunk) > room and not dropped:
                    self._write(f"\n[sandbox output: more than {self.limit} bytes; the rest is dropped]\n".encode())
                dropped += len(chunk) - min(room, len(chunk))
        except OSError:
            pass
        finally:
            os.close(self._read)
        if dropped:
            self._write(f"[sandbox output: {dropped} bytes dropped]\n".encode())

    def _write(self, data: bytes) -> None:
        try:
            os.write(self.dest, data)
        except OSError:
            pass

    def close_writer(self) -> None:
        """Close this process's copy of the write end (after the sandbox process got its own)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def prune(folder: Path) -> None:
    """Remove earlier runs' worker and student logs; keep the newest command logs (``command-*.log``)."""
    if not folder.is_dir():
        return
    commands = sorted(folder.glob("command-*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
    stale = [p for p in folder.glob("*.log") if not p.name.startswith("command-")] + commands[KEEP_COMMAND_LOGS:]
    for path in stale:
        try:
            path.unlink()
        except OSError:
            pass
