"""The labs' zygote: a fork server that has imported torch once and forks every rank.

A rank started as ``python -m parallel_budget.labs.<lab>`` spends about 1.5 s of
CPU starting Python and importing torch before it does anything; on two cores
that is most of what a short lab costs.  The zygote pays it once: it imports
torch, ``torch.distributed`` and the labs' own modules (:data:`PRELOAD`, never a
lab module itself, which runs as ``__main__``), checks it has one thread, and
then ``fork()``\\ s each rank the launcher asks for -- what DataLoader workers do
on Linux.  The forked child becomes exactly what ``python -m
parallel_budget.labs.<lab> <options>`` would have been: its own session
(``setsid``), the rank's environment and working directory, stdin from
``/dev/null``, stdout and stderr on the log files the launcher opened, a freshly
seeded ``random``, then the lab module run as ``__main__`` through runpy, as
``python -m`` does; its exit code or signal is the process's own.  Two things
differ, both as in a fork()ed multiprocessing child: the ranks share the zygote's
string-hash seed, and a rank ends without the interpreter's teardown (threads are
joined, atexit handlers run and streams flushed; see :mod:`.zygoterank`).  The zygote
calls ``gc.freeze()`` after importing, so a rank's collector never walks, and so
never copies, the zygote's objects.

What ``ps``, psutil and ``/proc`` show of a forked rank is the rank's, too: the
child rewrites its command line in place (``python -m parallel_budget.labs.<lab>
...``) and the zygote's padding variable :data:`ENV_PAD` (the last of its
environment block) with the rank's own variables (``RANK``, ``PB_LAB_RUN_ID``,
...), so ``live_processes()`` and the tests find a rank the same way whichever
way it started.  The zygote's own command line is ``python -c "from
parallel_budget.labs import zygote; ..."``: it never looks like a lab process.

Lifetime (one zygote per launcher process and environment, see
:mod:`.zygoteclient`):

* each run talks to it over its own *channel* (a socket the launcher sends over
  the zygote's main socket); when a channel closes, every rank forked through it
  that is still alive is killed (its process group) and reaped, so a run that
  ends in any way -- Ctrl-C in the middle of a launch included -- leaves nothing;
* the zygote exits when its main socket reaches end-of-file (the launcher exited,
  ``kill -9`` included), when its parent dies (``PR_SET_PDEATHSIG``), and after
  ``idle`` seconds without a channel; before it exits it kills what it forked,
  and every rank also has ``PR_SET_PDEATHSIG`` on the zygote.

Run as ``python -c "from parallel_budget.labs.engine import zygote; zygote.main()" <fd> <parent pid> <idle s> <pad>``
by :mod:`.zygoteclient` only.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import socket
import sys

from .zygoterank import ENV_PAD, become, identity_room, setup_rank, thread_count

# Imported once in the zygote: what the ranks of every lab import (the lab modules themselves
# run as __main__ in the rank, and a preloaded copy would make runpy warn).
PRELOAD = (
    "torch", "torch.distributed", "torch.nn", "torch.nn.parallel", "torch.utils.data",
    "torch.distributed.algorithms.join", "statistics", "argparse",
    "parallel_budget", "parallel_budget.labs.engine.cli", "parallel_budget.labs.engine.runtime", "parallel_budget.labs.engine.report",
)
# Imported before the first fork of one lab only (ZeroRedundancyOptimizer pulls in FSDP and sympy: 1.1 s).
LAB_PRELOAD = {
    "parallel_budget.labs.zero_state": ("torch.distributed.optim",),
    "parallel_budget.labs.fsdp": ("torch.distributed.fsdp", "torch.distributed.tensor.debug"),
    "parallel_budget.labs.tensor_parallel": ("torch.distributed.tensor.parallel", "torch.distributed.tensor.debug"),
    "parallel_budget.labs.pipeline_schedule": ("torch.distributed.pipelining",),
    "parallel_budget.labs.checkpoint": ("torch.distributed.fsdp", "torch.distributed.checkpoint",
                                        "torch.distributed.checkpoint.state_dict"),
    # the drill's driver forks its two torchrun agents (engine.agents); forkrun.PRELOAD is built from this
    "parallel_budget.labs.restart_drill": (
        "torch.distributed.run", "torch.distributed.fsdp", "torch._dynamo", "torch.distributed.checkpoint",
        "torch.distributed.checkpoint.state_dict", "torch.distributed.checkpoint._fsspec_filesystem",
        "torch.distributed.device_mesh", "parallel_budget.labs.engine.dcptrain", "parallel_budget.labs.engine.dcpcheck",
        "parallel_budget.labs.engine.agents", "parallel_budget.labs.engine.forkrun"),
}
LAB_MODULE = "parallel_budget.labs.{name}"
CODE = "from parallel_budget.labs.engine import zygote; zygote.main()"
MAX_MESSAGE = 1 << 20
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGKILL this process when the thread that forked it ends (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# ------------------------------------------------------------------ the server

def _kill_and_reap(pids: dict) -> None:
    """SIGKILL the process group of every live child in ``pids`` (pidfd -> pid), reap them, close the pidfds."""
    for pid in pids.values():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
    for fd, pid in pids.items():
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(fd)
    pids.clear()


class _Channel:
    """One run: its socket, the live ranks forked through it (pidfd -> pid), the exit codes not yet asked for."""

    def __init__(self, sock):
        self.sock, self.live, self.codes = sock, {}, {}


class _Server:
    """The zygote's state: the main socket, the runs' channels, which channel each live child belongs to."""

    def __init__(self, main_sock: socket.socket):
        self.main = main_sock
        self.channels: dict = {}  # fileno -> _Channel
        self.owner: dict = {}  # child pidfd -> _Channel
        self.pid = os.getpid()

    def serve(self, idle: float):
        """The loop.  Returns None when the zygote should exit, and in a forked child its request."""
        while True:
            socks = [self.main] + [c.sock for c in self.channels.values()]
            timeout = None if self.channels or self.owner else idle
            ready = select.select(socks + list(self.owner), [], [], timeout)[0]
            if not ready:
                return None  # idle with nothing running
            for fd in [r for r in ready if isinstance(r, int)]:  # pidfds: a child exited
                self._reaped(fd)
            if self.main in ready and not self._on_main():
                for chan in self.channels.values():
                    _kill_and_reap(chan.live)
                return None  # the launcher closed its end or died
            for chan in [c for c in self.channels.values() if c.sock in ready]:
                try:
                    request = self._on_channel(chan)
                except (OSError, ValueError, KeyError, TypeError):  # a broken run ends, the zygote does not
                    self._close(chan, reply=False)
                    continue
                if request is not None:
                    return request  # in the forked child

    def _reaped(self, fd: int) -> None:
        chan = self.owner.pop(fd)
        pid = chan.live.pop(fd)
        with contextlib.suppress(ChildProcessError):
            chan.codes[pid] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        os.close(fd)

    def _on_main(self) -> bool:
        """A message on the main socket: a new run's channel.  False at end-of-file."""
        try:
            data, fds, _, _ = socket.recv_fds(self.main, MAX_MESSAGE, 1)
        except OSError:
            return False
        for fd in fds:
            chan = _Channel(socket.socket(fileno=fd))
            self.channels[chan.sock.fileno()] = chan
        return bool(data)

    def _close(self, chan: _Channel, reply: bool) -> None:
        """The run is over: nothing it started may survive it."""
        for fd in chan.live:
            self.owner.pop(fd, None)
        _kill_and_reap(chan.live)
        if reply:
            with contextlib.suppress(OSError):
                chan.sock.send(json.dumps({"closed": True}).encode())
        self.channels.pop(chan.sock.fileno(), None)
        chan.sock.close()

    def _on_channel(self, chan: _Channel):
        fds = []
        try:
            data, fds, _, _ = socket.recv_fds(chan.sock, MAX_MESSAGE, 2)
            request = json.loads(data) if data else {"op": "close"}
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        op = request.get("op")
        if op == "close":
            self._close(chan, reply=bool(data))
        elif op == "status":
            self._status(chan, request["pid"])
        elif op == "spawn":
            return self._spawn(chan, request, fds)
        return None

    def _status(self, chan: _Channel, pid: int) -> None:
        if pid not in chan.codes and pid in chan.live.values():
            with contextlib.suppress(ChildProcessError):
                got, status = os.waitpid(pid, os.WNOHANG)
                if got:
                    chan.codes[pid] = os.waitstatus_to_exitcode(status)
                    fd = next(f for f, p in chan.live.items() if p == pid)
                    del chan.live[fd], self.owner[fd]
                    os.close(fd)
        chan.sock.send(json.dumps({"pid": pid, "code": chan.codes.pop(pid, None)}).encode())

    def _spawn(self, chan: _Channel, request: dict, fds: list):
        missing = [m for m in LAB_PRELOAD.get(request["argv"][2], ()) if m not in sys.modules]
        with contextlib.suppress(ImportError):
            for name in missing:
                importlib.import_module(name)
        if missing:
            gc.freeze()
        threads = thread_count()
        if threads != 1 or len(fds) != 2:  # fork() of a threaded process is not safe
            for fd in fds:
                os.close(fd)
            chan.sock.send(json.dumps({"error": f"zygote has {threads} threads, {len(fds)} fds"}).encode())
            return None
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(ready_r)
                _die_with_parent()
                if os.getppid() != self.pid:
                    os._exit(1)  # the zygote died before prctl took effect
                self.main.close()
                for c in self.channels.values():
                    c.sock.close()
                for fd in self.owner:
                    os.close(fd)
                setup_rank(request, fds)
                os.close(ready_w)  # the zygote answers the launcher once the rank is recognisable
            except BaseException:  # noqa: BLE001 - never run the zygote's loop in a child
                with contextlib.suppress(BaseException):
                    import traceback

                    traceback.print_exc()
                os._exit(1)
            return request
        os.close(ready_w)
        for fd in fds:
            os.close(fd)
        select.select([ready_r], [], [], 10.0)  # EOF: its identity is set (or it died)
        os.close(ready_r)
        pidfd = os.pidfd_open(pid)
        chan.live[pidfd] = pid
        self.owner[pidfd] = chan
        socket.send_fds(chan.sock, [json.dumps({"pid": pid, "threads": threads}).encode()], [pidfd])
        return None


def main() -> None:
    fd, parent, idle = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    _die_with_parent()
    if os.getppid() != parent:
        sys.exit(0)  # the launcher is already gone
    sock = socket.socket(fileno=fd)
    identity = identity_room()
    os.environ.pop(ENV_PAD, None)  # from here on nothing references the padding's bytes
    for name in PRELOAD:
        importlib.import_module(name)
    gc.freeze()  # the ranks' collector never walks (and so never copies) what the zygote loaded
    loaded = sorted(m for m in sys.modules if m.startswith("parallel_budget.labs.") and m.rsplit(".", 1)[1] in _lab_names())
    hello = {"ready": not loaded and identity, "threads": thread_count(), "identity": identity, "labs_loaded": loaded}
    sock.send(json.dumps(hello).encode())
    if not hello["ready"]:
        sys.exit(0)
    got = _Server(sock).serve(idle)
    if got is None:
        os._exit(0)  # nothing to flush; the teardown of torch would only cost CPU
    become(got)


def _lab_names() -> set:
    return set(importlib.import_module("parallel_budget.labs.engine.config").LABS) | {"floor"}
