"""Warm grading kernels: fork each notebook's kernel from a process that has already imported them.

A fresh ``python -m ipykernel_launcher`` spends about a second of CPU importing
ipykernel, IPython and (in the first test cell) this package with pint, before it
runs one line of a student's notebook; with five notebooks per student that import
time dominates grading.  This module starts one *fork server* per grading process.
The fork server imports all of that once and never runs student code.  For every
kernel nbclient asks for, it ``fork()``\\ s a child that becomes what
``python -m ipykernel_launcher -f <connection file>`` would have been: its own
process, session and working directory, the kernel's environment (plus what the
preloaded imports wrote into theirs), a freshly seeded RNG.
Nothing flows back from a child to the fork server, so one notebook cannot affect
the next one (copy-on-write memory; the server's socket is closed in the child).

Lifetimes are tied together: the fork server exits as soon as its socket to the
grading process reaches end-of-file, which happens when that process exits for
any reason, ``kill -9`` included; every kernel it forked has ``PR_SET_PDEATHSIG``
and is killed with it.  So a grader that dies leaves no kernel behind.

Sandboxed (:mod:`.bwrap`), the fork server is the first process of a
bubblewrap sandbox (PID 1 of its PID namespace, which its kernels cannot
signal).  Before each launch it kills every process left in the sandbox,
empties the sandbox's ``/tmp`` and ``/dev/shm`` and removes its System V IPC
objects, so a kernel finds nothing of the one before it; its environment is
an allow-list (:func:`.bwrap.clean_env`), never the grader's; it kills a kernel that outlives ``Limits.wall_seconds``.  The child writes
the kernel's connection file (``ipc`` transport) into its own ``/tmp``.

nbgrader uses it through :mod:`.warmkernels` (the jupyter_client glue), which
:class:`.preprocessors.ResilientExecute` selects unless
``c.ResilientExecute.fork_kernels = False``.  Any kernel command that is not this
interpreter's ``-m ipykernel_launcher`` with the fork server's own environment
(apart from the per-kernel ``JPY_*`` variables) is launched the ordinary way, so
no preloaded module can have read a setting the kernel would see differently.
BLAS libraries are single-threaded in the fork server and hence in its kernels.

Run as ``python -m parallel_budget.grading.sandbox.forkserver <fd> <spec>`` by :class:`ForkServer` only.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import signal
import socket
import sys
import threading
import time

from . import bwrap

# Everything ``ipykernel.kernelapp`` imports, but not that module itself: its class
# attributes read JPY_PARENT_PID from the environment at import time, which must be
# the kernel's.  Then the course package the exercises' test cells import.
PRELOAD = (
    "zmq", "zmq.eventloop.zmqstream", "tornado.ioloop", "jupyter_core.paths",
    "jupyter_client.connect", "jupyter_client.session",
    "IPython.core.application", "IPython.core.profiledir", "IPython.core.shellapp",
    "ipykernel.connect", "ipykernel.control", "ipykernel.heartbeat", "ipykernel.iostream",
    "ipykernel.ipkernel", "ipykernel.parentpoller", "ipykernel.shellchannel", "ipykernel.zmqshell",
    # imported while a kernel starts (IPython's shell, ipykernel's debugger)
    "ipykernel.debugger", "IPython.core.debugger", "IPython.core.oinspect", "IPython.core.completerlib",
    "IPython.core.logger", "IPython.extensions.storemagic", "tornado.platform.asyncio", "tornado.queues",
    "psutil", "sqlite3", "numpy.random",
    "parallel_budget", "parallel_budget.answers.checks", "parallel_budget.answers.diagnose",
)
NOT_PRELOADED = ("ipykernel.kernelapp", "ipykernel_launcher")
# What a forked child may become: a kernel, or the trusted checker's function host.
MODULES = ("ipykernel_launcher", "parallel_budget.grading.sandbox.fnhost")
# Environment variables set per kernel, which no preloaded module reads at import time.
PER_KERNEL_ENV = ("JPY_PARENT_PID", "JPY_SESSION_NAME", "JPY_INTERRUPT_EVENT", "IPY_INTERRUPT_EVENT")
# Single-threaded BLAS while preloading, so the fork server has no thread to lose at fork().
SERVER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
# What a sandboxed fork server and its kernels take from the environment they are given (sandbox.clean_env).
KERNEL_ENV = (*PER_KERNEL_ENV, *SERVER_ENV, "PYDEVD_DISABLE_FILE_VALIDATION")
MAX_MESSAGE = 1 << 20
SERVER_CWD = "/"  # nothing importable from the caller's folder shadows the preloaded modules
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the EOF on the socket still ends the server
        pass


# ------------------------------------------------------------- server side

def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _clear_sandbox() -> list[str]:
    """PID 1 of a sandbox, before a launch: kill every other process in it, empty /tmp and /dev/shm, remove SysV IPC.

    Returns what is still there afterwards (:func:`.bwrap.leftovers`): anything means this sandbox is
    not fit for another kernel.
    """
    if os.getpid() != 1:  # never outside a PID namespace: kill(-1) would reach the grader's processes
        return []
    try:
        os.kill(-1, signal.SIGKILL)  # everything in this PID namespace except PID 1
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    bwrap.empty_folder(bwrap.SCRATCH, keep=bwrap.scratch_mounts())
    bwrap.empty_folder(bwrap.SHM)  # POSIX shared memory and named semaphores (multiprocessing.Lock)
    bwrap.clear_ipc()  # System V segments outlive their processes
    left = bwrap.leftovers(keep=bwrap.scratch_mounts())
    for path in (bwrap.HOME, bwrap.WORK, os.path.dirname(bwrap.IPC)):
        os.makedirs(path, exist_ok=True)
    return left


def _serve(sock: socket.socket, spec: dict) -> dict | None:
    """The fork server's loop. Returns only in a forked child, with its launch request."""
    statuses: dict[int, int] = {}
    sandboxed = spec.get("sandbox", False)
    wall = spec.get("limits", {}).get("wall_seconds")
    deadline = None  # when the current sandboxed kernel has run too long

    def reap(*_):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            statuses[pid] = os.waitstatus_to_exitcode(status)

    signal.signal(signal.SIGCHLD, reap)
    while True:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not select.select([sock], [], [], timeout)[0]:
            _clear_sandbox()  # the kernel outlived its wall time: it and all it started are killed
            deadline = None
            continue
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 1)
        except ConnectionResetError:
            data, fds = b"", []
        if not data:
            return None  # the grading process closed its end or died: stop (our kernels get SIGKILL)
        request = json.loads(data)
        if request["op"] == "status":
            pid = request["pid"]
            if pid not in statuses:
                try:
                    _, status = os.waitpid(pid, 0)  # it has exited (its pidfd said so): this does not block
                    statuses[pid] = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    pass  # reaped by the handler meanwhile
            sock.send(json.dumps({"status": statuses.pop(pid, None)}).encode())
            continue
        if sandboxed:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                left = _clear_sandbox()
            except OSError as exc:  # e.g. /tmp made unreadable
                left = [str(exc)]
            if left:  # the clear-up was blocked: this sandbox serves no one again (the grader starts a new one)
                sock.send(json.dumps({"dirty": left[:20]}).encode())
                return None
            statuses.clear()
            signal.signal(signal.SIGCHLD, reap)
            deadline = time.monotonic() + wall if wall else None
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sock.close()
            _die_with_parent()
            if os.getppid() != server_pid:  # the server died before prctl took effect
                os._exit(1)
            request["fd"] = fds[0] if fds else None
            return request
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)


def _become(request: dict, env_changes: dict, sandboxed: bool) -> None:
    """In the forked child: turn into ``python -m <module> <args>`` run in ``cwd``."""
    import random
    import runpy

    os.setsid()  # own process group, as jupyter_client's launcher gives a kernel
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    argv = list(request["argv"][3:])
    cwd = request["cwd"] or os.getcwd()
    env = dict(request["env"])
    if sandboxed:
        cwd = bwrap.WORK
        env = bwrap.clean_env(env, keep=KERNEL_ENV)
        env["JPY_PARENT_PID"] = "1"  # the fork server is PID 1 here: no parent poller (PDEATHSIG ends us)
        if request.get("connection"):  # the kernel's connection file, in the sandbox's own /tmp
            info = dict(request["connection"], transport="ipc", ip=bwrap.IPC)
            path = os.path.join(os.path.dirname(bwrap.IPC), "kernel.json")
            with open(path, "w") as fh:
                json.dump(info, fh)
            argv = [path if i and argv[i - 1] == "-f" else a for i, a in enumerate(argv)]
    if request.get("fd") is not None:
        env["PB_CHANNEL_FD"] = str(request["fd"])
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    for name, value in env_changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if sys.path and sys.path[0] == SERVER_CWD:
        sys.path[0] = os.getcwd()  # what ``python -m`` puts first
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    module = request["argv"][2]
    sys.argv = [module, *argv]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    spec = json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    sandboxed = spec.get("sandbox", False)
    problems = []
    if sandboxed:
        problems = bwrap.enter(bwrap.Limits(**spec["limits"]), spec.get("uid"))
        _prctl(4, 0)  # PR_SET_DUMPABLE 0: no kernel may read or trace this process
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(signum, signal.SIG_DFL)  # PID 1 ignores what its namespace sends it
    before = dict(os.environ)
    for name in PRELOAD if spec.get("preload", True) else ():
        importlib.import_module(name)
    # What the imports did to the environment (debugpy sets PYDEVD_USE_FRAME_EVAL): a fresh
    # kernel would see the same, so each forked kernel gets it on top of its own environment.
    env_changes = {k: os.environ.get(k) for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
    leaked = [name for name in NOT_PRELOADED if name in sys.modules]
    if leaked:
        sys.exit(f"fork server: preloading imported {leaked}, whose import-time settings must be the kernel's")
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
    sock.send(json.dumps({"ready": True, "threads": threads, "problems": problems}).encode())
    request = _serve(sock, spec)
    if request is None:
        sys.exit(0)
    _become(request, env_changes, sandboxed)


if __name__ == "__main__":
    main()
