"""A deadline and a memory bound on the grader's own work with one test cell's student data.

The trusted checks (:mod:`.trusted`) run the instructor's test cell in the grader, unsandboxed, on
values a student's kernel sent (:mod:`.plain`).  Text is read by a grammar, never evaluated
(:mod:`parallel_budget.model.unit_text`), and every value is bounded in size, so an honest check
takes milliseconds.  Whatever remains is bounded here, so that a value nobody thought of costs only
its cell:

* **deadline**: :data:`CHECK_CPU_S` seconds of the process's CPU (``ITIMER_PROF``; waiting for a
  student's function in its own sandbox, :mod:`.fnhost`, does not count).  On expiry
  :class:`Overrun` is raised inside the check; it derives from ``BaseException`` so that an
  ``except Exception`` in a check does not swallow it, and it is raised again every
  :data:`REPEAT_S` until the check has stopped;
* **memory**: the soft ``RLIMIT_AS`` is lowered to what the process holds now plus
  :data:`CHECK_MEMORY_BYTES` for the duration of the check, then restored; an allocation past it is a
  ``MemoryError`` in the check.

Either way the cell gets an error output whose ename is :data:`OVERRUN` (0 points) and
:func:`.integrity.runtime_findings` writes a ``check_overrun`` row; the next cell, notebook and
student are graded as usual.  Both bounds need the main thread (signals, a process-wide limit): a
check run on another thread (a Dask worker's task thread) keeps the grammar's and :mod:`.plain`'s
bounds only.
"""

from __future__ import annotations

import contextlib
import resource
import signal
import threading

CHECK_CPU_S = 10.0  # CPU seconds of one test cell's trusted checks (honest ones: a few milliseconds)
REPEAT_S = 0.5  # the deadline fires again this often until the check has stopped
CHECK_MEMORY_BYTES = 512 * 2**20  # address space a check may add to the grading process
OVERRUN = "TrustedCheckOverrun"  # the ename of a cell whose check ran past a bound
UNREAD = "UnreadAnswer"  # the ename of a cell whose answer text was an expression (refused by the grammar, unread)


class Overrun(BaseException):
    """The trusted check of one cell ran past its deadline or memory bound."""


def _address_space() -> int:
    """Bytes of address space this process holds now (``VmSize``), or 0 when it cannot be read."""
    try:
        with open("/proc/self/statm", encoding="ascii") as fh:
            return int(fh.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


_active = [False]  # raise only inside bounded(): a SIGPROF already delivered when it ends is ignored


def _raise(signum, frame):
    if _active[0]:
        raise Overrun("deadline")


@contextlib.contextmanager
def bounded(cpu_s: float = CHECK_CPU_S, memory_bytes: int = CHECK_MEMORY_BYTES):
    """Run the block under a CPU deadline and an address-space bound (main thread only; else unbounded here)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    held = _address_space()
    cap = held + memory_bytes if held else resource.RLIM_INFINITY
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and (cap == resource.RLIM_INFINITY or soft < cap):
        cap = soft  # an outer bound (the sandbox, ulimit) that is tighter stays
    previous = signal.signal(signal.SIGPROF, _raise)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        _active[0] = True
        signal.setitimer(signal.ITIMER_PROF, cpu_s, REPEAT_S)
        yield
    finally:
        while True:  # the deadline may fire while it is being disarmed: disarm again
            try:
                _active[0] = False
                signal.setitimer(signal.ITIMER_PROF, 0)
                break
            except Overrun:
                continue
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGPROF, previous)
