"""Merging finished students into the live gradebook in batches, as they finish (issue 22, item 8).

A slow student must not hold back the others' grades: :class:`Batcher` collects
finished results and hands them to ``merge`` (one SQLite transaction with its own
journal, :func:`.runner._merge`) every ``size`` students, or ``seconds`` after the
oldest waiting result arrived, whichever comes first.  A timer thread makes the
time rule hold while no result arrives; every merge runs under one lock, so two
batches never overlap.  What is left is merged by :meth:`Batcher.close`.
"""

from __future__ import annotations

import threading
import time

BATCH_STUDENTS = 20  # students per merge at most
BATCH_SECONDS = 30.0  # a finished student waits at most this long (plus one merge) for its grade to be written


class Batcher:
    """Merge results in batches; ``merge(results)`` is called with a non-empty list, never concurrently."""

    def __init__(self, merge, size: int = BATCH_STUDENTS, seconds: float = BATCH_SECONDS):
        self._merge, self.size, self.seconds = merge, max(1, int(size)), max(0.0, float(seconds))
        self._lock = threading.Lock()
        self._waiting: list = []
        self._since = 0.0
        self.merged: list = []  # what each merge returned, in order
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="batch-merge", daemon=True)
        self._thread.start()

    def add(self, result: dict) -> None:
        """A finished student (``ok`` results only): merged now when the batch is full or old enough."""
        with self._lock:
            if not self._waiting:
                self._since = time.monotonic()
            self._waiting.append(result)
            if len(self._waiting) >= self.size or time.monotonic() - self._since >= self.seconds:
                self._flush()

    def _tick(self) -> None:
        while not self._stop.wait(min(1.0, max(0.05, self.seconds / 4))):
            with self._lock:
                if self._waiting and time.monotonic() - self._since >= self.seconds:
                    try:
                        self._flush()
                    except BaseException as exc:  # raised again by close() in the grader's thread
                        self._error = exc
                        return

    def _flush(self) -> None:
        batch, self._waiting = self._waiting, []
        self.merged.append(self._merge(batch))

    def close(self) -> list:
        """Stop the timer, merge what is still waiting; return what every merge returned."""
        self.abandon()
        if self._error is not None:
            raise self._error
        with self._lock:
            if self._waiting:
                self._flush()
        return self.merged

    def abandon(self) -> None:
        """Stop the timer and wait for a merge in progress (on Ctrl-C or an error); waiting results stay unmerged."""
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
