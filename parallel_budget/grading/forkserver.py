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

nbgrader uses it through :class:`ForkKernelManager`, which
:class:`.preprocessors.ResilientExecute` selects unless
``c.ResilientExecute.fork_kernels = False``.  Any kernel command that is not this
interpreter's ``-m ipykernel_launcher`` with the fork server's own environment
(apart from the per-kernel ``JPY_*`` variables) is launched the ordinary way, so
no preloaded module can have read a setting the kernel would see differently.
BLAS libraries are single-threaded in the fork server and hence in its kernels.

Run as ``python -m parallel_budget.grading.forkserver <fd>`` by :class:`ForkServer` only.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import ctypes
import functools
import importlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid

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
    "parallel_budget", "parallel_budget.grading.checks", "parallel_budget.grading.diagnose",
)
NOT_PRELOADED = ("ipykernel.kernelapp", "ipykernel_launcher")
# Environment variables set per kernel, which no preloaded module reads at import time.
PER_KERNEL_ENV = ("JPY_PARENT_PID", "JPY_SESSION_NAME", "JPY_INTERRUPT_EVENT", "IPY_INTERRUPT_EVENT")
# Single-threaded BLAS while preloading, so the fork server has no thread to lose at fork().
_SERVER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_MAX_MESSAGE = 1 << 20
REQUEST_TIMEOUT = 10.0  # seconds a launch or status request may take before the server is given up
_SERVER_CWD = "/"  # nothing importable from the caller's folder shadows the preloaded modules
_PR_SET_PDEATHSIG = 1
log = logging.getLogger("parallel_budget.grading")


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the EOF on the socket still ends the server
        pass


# ------------------------------------------------------------- server side

def _serve(sock: socket.socket) -> dict | None:
    """The fork server's loop. Returns only in a forked child, with its launch request."""
    statuses: dict[int, int] = {}

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
        try:
            data = sock.recv(_MAX_MESSAGE)
        except ConnectionResetError:
            data = b""
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
        server_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            sock.close()
            _die_with_parent()
            if os.getppid() != server_pid:  # the server died before prctl took effect
                os._exit(1)
            return request
        pidfd = os.pidfd_open(pid)
        try:
            socket.send_fds(sock, [json.dumps({"pid": pid}).encode()], [pidfd])
        finally:
            os.close(pidfd)


def _become_kernel(request: dict, env_changes: dict) -> None:
    """In the forked child: turn into ``python -m ipykernel_launcher <args>`` run in ``cwd``."""
    import random
    import runpy

    os.setsid()  # own process group, as jupyter_client's launcher gives a kernel
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    cwd = request["cwd"] or os.getcwd()
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(request["env"])
    for name, value in env_changes.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if sys.path and sys.path[0] == _SERVER_CWD:
        sys.path[0] = os.getcwd()  # what ``python -m`` puts first
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    sys.argv = ["ipykernel_launcher", *request["argv"][3:]]
    runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    before = dict(os.environ)
    for name in PRELOAD:
        importlib.import_module(name)
    # What the imports did to the environment (debugpy sets PYDEVD_USE_FRAME_EVAL): a fresh
    # kernel would see the same, so each forked kernel gets it on top of its own environment.
    env_changes = {k: os.environ.get(k) for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
    leaked = [name for name in NOT_PRELOADED if name in sys.modules]
    if leaked:
        sys.exit(f"fork server: preloading imported {leaked}, whose import-time settings must be the kernel's")
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
    sock.send(json.dumps({"ready": True, "threads": threads, "preloaded": list(PRELOAD)}).encode())
    request = _serve(sock)
    if request is None:
        sys.exit(0)
    _become_kernel(request, env_changes)


# ------------------------------------------------------------- client side

class ForkedKernel:
    """The part of :class:`subprocess.Popen` that jupyter_client's LocalProvisioner uses."""

    stdin = stdout = stderr = None

    def __init__(self, server: "ForkServer", pid: int, pidfd: int):
        self._server, self.pid, self._pidfd, self.returncode = server, pid, pidfd, None

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = self._server.status(self.pid)
            os.close(self._pidfd)
            self._pidfd = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"kernel {self.pid}", timeout)
            select.select([self._pidfd], [], [], 0.05)
        return self.returncode

    async def exited(self) -> int:
        """Wait without polling: a pidfd becomes readable when the process exits."""
        if self.poll() is None:
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            loop.add_reader(self._pidfd, lambda: done.done() or done.set_result(None))
            try:
                await done
            finally:
                loop.remove_reader(self._pidfd)
        return self.poll()

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def __del__(self):
        if getattr(self, "_pidfd", -1) >= 0:
            os.close(self._pidfd)


class ForkServerError(RuntimeError):
    """The fork server could not be started or stopped answering."""


class ForkServer:
    """One fork server, owned by the process that started it."""

    def __init__(self, timeout: float = 60.0):
        self.owner = os.getpid()
        self._lock = threading.Lock()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**_SERVER_ENV, **os.environ}  # each kernel gets its own environment back at fork
        self.env = {k: v for k, v in os.environ.items() if k not in PER_KERNEL_ENV}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "parallel_budget.grading.forkserver", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, cwd=_SERVER_CWD, env=env)
        theirs.close()
        self._sock = mine
        self._sock.settimeout(timeout)
        try:
            hello = json.loads(self._sock.recv(_MAX_MESSAGE) or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise ForkServerError(f"fork server did not start: {exc}") from exc
        if not hello.get("ready"):
            self.close()
            raise ForkServerError(f"fork server exited with {self.process.wait()}")
        self.threads = hello["threads"]
        self._sock.settimeout(REQUEST_TIMEOUT)

    def accepts(self, cmd: list, env: dict) -> bool:
        """Whether ``cmd``/``env`` is a kernel this server can fork (else launch it normally)."""
        return (len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1:3] == ["-m", "ipykernel_launcher"]
                and {k: v for k, v in env.items() if k not in PER_KERNEL_ENV} == self.env)

    def launch(self, cmd: list, env: dict, cwd) -> ForkedKernel:
        request = {"op": "launch", "argv": list(cmd), "env": dict(env), "cwd": str(cwd) if cwd else None}
        with self._lock:
            self._sock.send(json.dumps(request).encode())
            msg, fds, _, _ = socket.recv_fds(self._sock, _MAX_MESSAGE, 1)
        if not msg or not fds:
            raise ForkServerError("fork server did not answer a launch request")
        return ForkedKernel(self, json.loads(msg)["pid"], fds[0])

    def status(self, pid: int) -> int:
        try:
            with self._lock:
                self._sock.send(json.dumps({"op": "status", "pid": pid}).encode())
                status = json.loads(self._sock.recv(_MAX_MESSAGE))["status"]
        except (OSError, ValueError, KeyError):
            status = None
        return -signal.SIGKILL if status is None else status

    def close(self) -> None:
        self._sock.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


_server: ForkServer | None = None
_server_failed = False
launches: collections.Counter = collections.Counter()  # kernels graded in this process: "forked" / "fresh"


def server() -> ForkServer | None:
    """This process's fork server, started on first use; None if it cannot run here."""
    global _server, _server_failed
    if _server is not None and _server.owner == os.getpid():
        if _server.process.poll() is None:
            return _server
        _server.close()  # it died (a student's kernel may have killed it): start another
    if _server_failed or not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
        return None
    try:
        _server = ForkServer()
    except (ForkServerError, OSError) as exc:
        _server_failed = True
        log.warning("Warm kernels unavailable (%s); starting every kernel from scratch.", exc)
        return None
    if _server.threads > 1:
        log.warning("The fork server has %d threads after preloading; forking it may be unsafe.", _server.threads)
    atexit.register(_server.close)
    return _server


def discard() -> None:
    """Stop this process's fork server (it failed); the next kernel starts a new one."""
    global _server
    if _server is not None and _server.owner == os.getpid():
        _server.process.kill()
        _server.close()
    _server = None


# ------------------------------------------------------- jupyter_client glue

def _provisioner_class():
    from jupyter_client.provisioning import LocalProvisioner

    class ForkProvisioner(LocalProvisioner):
        """LocalProvisioner that forks python kernels from the fork server."""

        async def launch_kernel(self, cmd, **kwargs):
            srv = server()
            env = dict(kwargs.get("env") or os.environ)
            env.setdefault("JPY_PARENT_PID", str(os.getpid()))  # as jupyter_client's launcher sets it
            if srv is None or not srv.accepts(cmd, env):
                return await super().launch_kernel(cmd, **kwargs)
            try:
                self.process = srv.launch(cmd, env, kwargs.get("cwd"))
            except (ForkServerError, OSError, ValueError) as exc:  # e.g. a student's kernel stopped the server
                log.warning("Fork server failed (%s); starting this kernel from scratch.", exc)
                discard()
                return await super().launch_kernel(cmd, **kwargs)
            self.pid = self.pgid = self.process.pid
            self.cwd = kwargs.get("cwd") or os.getcwd()
            return self.connection_info

        async def wait(self):
            if isinstance(self.process, ForkedKernel):
                await self.process.exited()
            return await super().wait()

    return ForkProvisioner


def _client_class():
    from queue import Empty

    import zmq
    from jupyter_client.asynchronous import AsyncKernelClient
    from traitlets import default

    class WarmKernelClient(AsyncKernelClient):
        """AsyncKernelClient that does not idle while a forked kernel comes up.

        * A forked kernel binds its ports about 30 ms after the fork; a client
          socket that connected earlier retries after ZeroMQ's reconnect
          interval, 100 ms by default.  Here it is 10 ms.
        * jupyter_client ends the handshake by draining IOPub until it has been
          quiet for 0.2 s; nbclient matches IOPub messages to its requests by
          parent id, so draining what has already arrived is enough.
        """

        @default("context")
        def _context_default(self):
            context = super()._context_default()
            context.setsockopt(zmq.RECONNECT_IVL, 10)  # default for the sockets this client creates
            return context

        async def _async_wait_for_ready(self, timeout=None):
            deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
            while True:
                self.kernel_info()
                try:
                    msg = await self.shell_channel.get_msg(timeout=1)
                except Empty:
                    msg = None
                if msg is not None and msg["msg_type"] == "kernel_info_reply":
                    try:  # IOPub connected too (the kernel welcomes every subscriber)?
                        await self.iopub_channel.get_msg(timeout=0.2)
                    except Empty:
                        pass
                    else:
                        self._handle_kernel_info_reply(msg)
                        break
                if not await self._async_is_alive():
                    raise RuntimeError("Kernel died before replying to kernel_info")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")
            while True:
                try:
                    await self.iopub_channel.get_msg(timeout=0)
                except Empty:
                    break

        wait_for_ready = _async_wait_for_ready  # the base class binds the name to its own function

    return WarmKernelClient


@functools.cache
def kernel_manager_class():
    """An AsyncKernelManager whose kernels come from :func:`server`."""
    from jupyter_client.manager import AsyncKernelManager

    provisioner = _provisioner_class()
    client = _client_class()

    class ForkKernelManager(AsyncKernelManager):
        client_factory = client

        async def _async_wait(self, pollinterval=0.1):
            process = getattr(self.provisioner, "process", None)
            if isinstance(process, ForkedKernel):
                await process.exited()
            else:
                await super()._async_wait(pollinterval)

        async def _async_pre_start_kernel(self, **kw):
            if self.provisioner is None:
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
                self.provisioner = provisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
            return await super()._async_pre_start_kernel(**kw)

    return ForkKernelManager


if __name__ == "__main__":
    main()
