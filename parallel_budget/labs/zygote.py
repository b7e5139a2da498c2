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
``python -m`` does; its exit code or signal is the process's own.

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

Run as ``python -c "from parallel_budget.labs import zygote; zygote.main()" <fd> <parent pid> <idle s> <pad>``
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

# Imported once in the zygote: what the ranks of every lab import (the lab modules themselves
# run as __main__ in the rank, and a preloaded copy would make runpy warn).
PRELOAD = (
    "torch", "torch.distributed", "torch.nn", "torch.nn.parallel", "torch.utils.data",
    "torch.distributed.algorithms.join", "statistics", "argparse",
    "parallel_budget", "parallel_budget.labs.cli", "parallel_budget.labs.runtime", "parallel_budget.labs.report",
)
# Imported before the first fork of one lab only (ZeroRedundancyOptimizer pulls in FSDP and sympy: 1.1 s).
LAB_PRELOAD = {"parallel_budget.labs.zero_state": ("torch.distributed.optim",)}
LAB_MODULE = "parallel_budget.labs.{name}"
# Set per rank or per run: the only variables in which a rank's environment may differ from the zygote's.
PER_RANK_ENV = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", "PB_LAB_RUN_ID", "PB_LAB_RUN_DIR",
)
ENV_PAD = "PB_LAB_ZYGOTE_PAD"  # the last variable of the zygote's environment: room for a rank's own
ENV_PAD_BYTES = 4096
ARG_PAD_BYTES = 2048  # room for a rank's command line
CODE = "from parallel_budget.labs import zygote; zygote.main()"
MAX_MESSAGE = 1 << 20
CWD = "/"  # nothing in the caller's folder can shadow a preloaded module
_PR_SET_PDEATHSIG = 1


def thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def _die_with_parent() -> None:
    """SIGKILL this process when the thread that forked it ends (Linux)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


# ------------------------------------------------------------ identity in /proc

def _areas() -> tuple:
    """(arg_start, arg_end, env_start, env_end) of this process (``man 5 proc``, fields 48-51)."""
    with open("/proc/self/stat", "rb") as fh:
        data = fh.read()
    return tuple(int(x) for x in data[data.rindex(b")") + 2:].split()[45:49])


def _pad_entry() -> bytes:
    return f"{ENV_PAD}={'x' * ENV_PAD_BYTES}".encode() + b"\0"


def identity_room() -> bool:
    """Whether this zygote can show a rank's command line and environment (checked once, at start)."""
    try:
        a0, a1, e0, e1 = _areas()
        return (a1 - a0 > ARG_PAD_BYTES and ctypes.string_at(a0, a1 - a0).endswith(b" " * ARG_PAD_BYTES + b"\0")
                and ctypes.string_at(e0, e1 - e0).endswith(_pad_entry()))
    except (OSError, ValueError, IndexError):
        return False


def rank_env_block(env: dict) -> bytes:
    """The per-rank variables as they go into the padding (RANK and PB_LAB_RUN_ID first)."""
    keys = sorted((k for k in env if k in PER_RANK_ENV), key=lambda k: (k not in ("RANK", "PB_LAB_RUN_ID"), k))
    return b"".join(os.fsencode(f"{k}={env[k]}") + b"\0" for k in keys)


def fits(argv: list, env: dict) -> bool:
    """Whether a rank's command line and own variables fit in the room the zygote reserved."""
    return (len(b"\0".join(map(os.fsencode, argv))) < ARG_PAD_BYTES
            and len(rank_env_block(env)) < ENV_PAD_BYTES)


def _show_identity(argv: list, env: dict) -> None:
    """In a forked rank: make /proc/self/cmdline and /proc/self/environ the rank's.

    Only bytes nothing references any more are written: the arguments (sys.argv is
    Python's copy) and the padding variable, which the zygote removed from its
    C environment at start.  The zygote's other variables, the rank's too, stay where they are.
    """
    a0, a1, e0, e1 = _areas()
    args = b"\0".join(map(os.fsencode, argv)) + b"\0"
    ctypes.memmove(a0, args.ljust(a1 - a0, b"\0"), a1 - a0)
    room = len(_pad_entry())
    ctypes.memmove(e1 - room, rank_env_block(env).ljust(room, b"\0"), room)


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
    """One run: its socket, the live ranks forked through it, the exit codes not yet asked for."""

    def __init__(self, sock):
        self.sock, self.live, self.codes = sock, {}, {}


def _serve(main_sock: socket.socket, idle: float):
    """The zygote's loop.  Returns only in a forked child, with its request."""
    channels: dict = {}  # fileno -> _Channel
    owner: dict = {}  # child pidfd -> _Channel
    me = os.getpid()
    while True:
        socks = [main_sock] + [c.sock for c in channels.values()]
        timeout = None if channels or owner else idle
        ready = select.select(socks + list(owner), [], [], timeout)[0]
        if not ready:
            return None  # idle with nothing running
        for fd in [r for r in ready if isinstance(r, int)]:  # pidfds: a child exited
            chan = owner.pop(fd)
            pid = chan.live.pop(fd)
            with contextlib.suppress(ChildProcessError):
                chan.codes[pid] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            os.close(fd)
        if main_sock in ready:
            try:
                data, fds, _, _ = socket.recv_fds(main_sock, MAX_MESSAGE, 1)
            except (ConnectionResetError, OSError):
                data, fds = b"", []
            if not data:  # the launcher closed its end or died: kill what is left and stop
                for chan in channels.values():
                    _kill_and_reap(chan.live)
                return None
            for fd in fds:  # a new run's channel
                chan = _Channel(socket.socket(fileno=fd))
                channels[chan.sock.fileno()] = chan
        for chan in [c for c in channels.values() if c.sock in ready]:
            try:
                data, fds, _, _ = socket.recv_fds(chan.sock, MAX_MESSAGE, 2)
            except (ConnectionResetError, OSError):
                data, fds = b"", []
            request = json.loads(data) if data else {"op": "close"}
            op = request.get("op")
            if op == "close":  # the run is over: nothing it started may survive it
                for fd in chan.live:
                    owner.pop(fd, None)
                _kill_and_reap(chan.live)
                if data:
                    with contextlib.suppress(OSError):
                        chan.sock.send(json.dumps({"closed": True}).encode())
                del channels[chan.sock.fileno()]
                chan.sock.close()
            elif op == "status":
                pid = request["pid"]
                if pid not in chan.codes and pid in chan.live.values():
                    with contextlib.suppress(ChildProcessError):
                        got, status = os.waitpid(pid, os.WNOHANG)
                        if got:
                            chan.codes[pid] = os.waitstatus_to_exitcode(status)
                            fd = next(f for f, p in chan.live.items() if p == pid)
                            del chan.live[fd], owner[fd]
                            os.close(fd)
                chan.sock.send(json.dumps({"pid": pid, "code": chan.codes.pop(pid, None)}).encode())
            elif op == "spawn":
                with contextlib.suppress(ImportError):
                    for name in LAB_PRELOAD.get(request["argv"][2], ()):
                        importlib.import_module(name)
                threads = thread_count()
                if threads != 1 or len(fds) != 2:  # fork() of a threaded process is not safe
                    for fd in fds:
                        os.close(fd)
                    chan.sock.send(json.dumps({"error": f"zygote has {threads} threads, {len(fds)} fds"}).encode())
                    continue
                ready_r, ready_w = os.pipe()
                pid = os.fork()
                if pid == 0:
                    try:
                        os.close(ready_r)
                        _die_with_parent()
                        if os.getppid() != me:
                            os._exit(1)  # the zygote died before prctl took effect
                        main_sock.close()
                        for c in channels.values():
                            c.sock.close()
                        for fd in owner:
                            os.close(fd)
                        _setup_rank(request, fds)
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
                owner[pidfd] = chan
                socket.send_fds(chan.sock, [json.dumps({"pid": pid, "threads": threads}).encode()], [pidfd])


def _setup_rank(request: dict, fds: list) -> None:
    """In the forked child: the session, streams, environment, identity and folder of ``python -m``."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, target in zip(fds, (1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    argv, env = request["argv"], request["env"]
    os.environ.clear()
    os.environ.update(env)
    _show_identity(argv, env)
    os.chdir(request["cwd"])
    if sys.path and sys.path[0] in ("", CWD):
        sys.path[0] = os.getcwd()  # what ``python -m`` puts first


def _become(request: dict) -> None:
    """In the forked child, set up by :func:`_setup_rank`: run the lab module as ``python -m`` would, then exit."""
    import random
    import runpy

    argv = request["argv"]
    random.seed()
    if "numpy" in sys.modules:  # a fresh interpreter seeds it from the OS
        sys.modules["numpy"].random.seed()
    sys.argv = [argv[2], *argv[3:]]
    try:
        runpy._run_module_as_main(argv[2], alter_argv=True)  # what ``python -m`` itself calls
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - printed and exit code 1, as the interpreter does
        sys.excepthook(*sys.exc_info())
        code = 1
    _exit(code)


def _exit_code(code) -> int:
    """The exit status ``python`` gives ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _exit(code: int) -> None:
    """End a forked rank as a fork()ed multiprocessing child ends: without the interpreter's teardown.

    What an interpreter does before it exits is kept -- non-daemon threads are
    joined, atexit handlers run, stdout and stderr are flushed -- but not the
    teardown of every module, which in a copy of a process that imported torch
    touches (and so copies) most of its memory: 0.2-0.8 s of CPU per rank.  An
    uncaught KeyboardInterrupt ends by SIGINT, as in Python since 3.8.
    """
    import atexit
    import threading

    with contextlib.suppress(BaseException):
        threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)


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
    got = _serve(sock, idle)
    if got is None:
        sys.exit(0)
    _become(got)


def _lab_names() -> set:
    return set(importlib.import_module("parallel_budget.labs.config").LABS) | {"floor"}
