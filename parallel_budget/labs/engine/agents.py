"""Start torchrun agents as if on separate nodes, and make sure everything they started ends.

Used by :mod:`.restart_drill`.  ``torchrun`` starts its workers in sessions of
their own (``start_new_session=True``), so killing an agent's process group
does not reach them, and a killed agent leaves its workers to the init
process.  :func:`become_subreaper` makes the calling process adopt every orphan
below it instead; :func:`sweep` finds what is left by an environment marker
the agents pass on to their workers, kills it and reaps it.  Linux only (the
labs' launcher is too).

An agent is either a new interpreter (:func:`start`: ``python -m ...forkrun``,
which imports torch and the workers' modules, about 3.5 CPU-s) or, when the
caller is a rank forked by the labs' zygote, a fork of the caller
(:func:`fork_waiting`, then :meth:`ForkedAgent.go`), which costs milliseconds: forked while the caller
still has one thread, before it joins its group, it waits on a pipe for its
command line and environment, then becomes what ``start`` would have started:
a session of its own, the log as stdout and stderr, the environment (in ``/proc``
too, so :func:`marked` finds it and every worker it forks), ``SIGTERM`` when
the caller dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from ...pidfd import PidfdChild

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


class ForkedAgent(PidfdChild):
    """An agent forked by :func:`fork_waiting`, waiting for :meth:`go`; :class:`subprocess.Popen`'s part we use."""

    what = "agent"

    def __init__(self, pid: int, pidfd: int, pipe: int):
        super().__init__(pid, pidfd)
        self._pipe = pipe

    def _status(self) -> int:
        _, status = os.waitpid(self.pid, 0)  # our own child: nothing else reaps it before stop() waited for it
        return os.waitstatus_to_exitcode(status)

    def go(self, argv: list, env: dict, log: Path, own: tuple) -> "ForkedAgent":
        """Send the agent its command line (``python -m <module> ...``), environment and log; it starts at once.

        ``own`` names the variables shown in its ``/proc/<pid>/environ`` (those :func:`marked` looks for)."""
        with os.fdopen(self._pipe, "w") as pipe:
            self._pipe = -1
            pipe.write(json.dumps({"argv": argv, "env": env, "log": str(log), "own": list(own)}) + "\n")
        return self

    def abandon(self) -> None:
        """Never sent :meth:`go`: the agent reads end-of-file and exits without starting."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1


def can_fork_agents() -> bool:
    """Whether agents can be forked from this process: a zygote rank (its /proc identity is ours to rewrite)
    that still has only one thread (``fork()`` of a threaded process is not safe)."""
    from . import zygoterank

    return zygoterank.SHOWN and zygoterank.thread_count() == 1


def fork_waiting(count: int, run) -> list:
    """Fork ``count`` agents that wait for :meth:`ForkedAgent.go`; each then calls ``run()`` with its
    ``sys.argv`` set from the command line it was sent, and exits."""
    prctl = _prctl()  # resolved before fork: the child only makes the call
    agents = []
    for _ in range(count):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _agent_child(r, prctl, run)  # never returns
        os.close(r)
        agents.append(ForkedAgent(pid, os.pidfd_open(pid), w))
    return agents


def _agent_child(r: int, prctl, run) -> None:
    """In the forked agent: wait for the command line, become the agent, run, exit (never return)."""
    code = 1
    try:
        parent = os.getppid()
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)  # the caller died before prctl took effect
        with os.fdopen(r, "rb") as pipe:
            data = pipe.readline()  # one line: a later agent holds a copy of this pipe's write end until it starts
        if not data:  # abandoned (or the caller died): nothing started
            os._exit(0)
        request = json.loads(data)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # the caller's files, earlier agents' pipes and pidfds
        os.environ.clear()
        os.environ.update(request["env"])
        from .zygoterank import show_identity

        argv = request["argv"]
        show_identity(argv, request["env"], tuple(request["own"]))
        sys.argv = [argv[2], *argv[3:]]
        run()
        code = 0
    except SystemExit as exc:
        from .zygoterank import exit_code

        code = exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - printed, exit code 1: never return into the caller's code
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code & 0xFF)
