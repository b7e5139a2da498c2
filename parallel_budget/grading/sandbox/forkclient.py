"""The grader's side of the fork server (:mod:`.forkserver`): start it, launch kernels, watch them.

:class:`ForkServer` starts one fork server (inside a bubblewrap sandbox when
given :class:`.bwrap.Limits`) and asks it for kernels; each comes back as a
:class:`ForkedKernel`, a pidfd-backed stand-in for :class:`subprocess.Popen`.
:func:`server` keeps one warm server per grading process, role and sandbox setting
and starts a new one when a student's kernel has killed the old one; :func:`new_student` stops them all
between students (each student's kernels and function hosts get new sandboxes under new uids), and
:func:`launch` replaces a failed server by one in a fresh sandbox once.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import itertools
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

from ...pidfd import PidfdChild, stop_server
from . import bwrap
from .hostlog import BoundedSink
from .forkserver import KERNEL_ENV, MAX_MESSAGE, MODULES, PER_KERNEL_ENV, SERVER_CWD, SERVER_ENV

REQUEST_TIMEOUT = 10.0  # seconds a launch or status request may take before the server is given up
log = logging.getLogger("parallel_budget.grading")


class ForkedKernel(PidfdChild):
    """The part of :class:`subprocess.Popen` that jupyter_client's LocalProvisioner uses."""

    stdin = stdout = stderr = None
    what = "kernel"

    def __init__(self, server: "ForkServer", pid: int, pidfd: int):
        super().__init__(pid, pidfd)
        self._server = server
        self.host_pid = pid
        try:  # the pid as this process sees it (differs inside a sandbox's PID namespace)
            for line in open(f"/proc/self/fdinfo/{pidfd}"):
                if line.startswith("Pid:"):
                    self.host_pid = int(line.split()[1])
        except (OSError, ValueError):
            pass

    def _status(self) -> int:
        return self._server.status(self.pid)

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


def _json(msg: bytes) -> dict:
    try:
        value = json.loads(msg or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ForkServerError(RuntimeError):
    """The fork server could not be started or stopped answering."""


class ForkServer:
    """One fork server, owned by the process that started it; sandboxed when ``limits`` is given."""

    def __init__(self, timeout: float = 60.0, limits: bwrap.Limits | None = None, preload: bool = True):
        self.owner = os.getpid()
        self.sandboxed, self.preload = limits is not None, preload
        self._lock = threading.Lock()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**SERVER_ENV, **os.environ}  # each kernel gets its own environment back at fork
        self.env = {k: v for k, v in os.environ.items() if k not in PER_KERNEL_ENV}
        spec = {"preload": preload, "sandbox": self.sandboxed}
        argv = [sys.executable, "-m", "parallel_budget.grading.sandbox.forkserver", str(theirs.fileno())]
        fds, info_r = [theirs.fileno()], None
        if self.sandboxed:
            self.uid = bwrap.sandbox_uid(serial=next(_serials)) if os.geteuid() == 0 else None  # its own uid
            spec.update(limits=json.loads(limits.to_json()), uid=self.uid)
            env = bwrap.clean_env(env, keep=KERNEL_ENV)  # its /proc/<pid>/environ is what its kernels can read
            info_r, info_w = os.pipe()
            fds.append(info_w)
            argv = bwrap.command(argv + [json.dumps(spec)], limits, info_fd=info_w)
        else:
            argv.append(json.dumps(spec))
        sink = BoundedSink()  # what the server and its kernels write to fd 1/2 reaches the worker's log, bounded
        self.process = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL, stdout=sink.fd, stderr=sink.fd,
                                        cwd=SERVER_CWD, env=env)
        sink.close_writer()
        theirs.close()
        self.root = ""  # prefix that turns a path inside the sandbox into one the grader can open
        if info_r is not None:
            os.close(info_w)
            info = b""
            while select.select([info_r], [], [], timeout)[0]:  # bwrap writes its JSON, then closes
                chunk = os.read(info_r, 4096)
                if not chunk:
                    break
                info += chunk
            os.close(info_r)
            self.root = f"/proc/{bwrap.child_pid(info)}/root"
        self._sock = mine
        self._sock.settimeout(timeout)
        try:
            hello = json.loads(self._sock.recv(MAX_MESSAGE) or b"{}")
        except (OSError, ValueError) as exc:
            self.close()
            raise ForkServerError(f"fork server did not start: {exc}") from exc
        if not hello.get("ready"):
            self.close()
            raise ForkServerError(f"fork server exited with {self.process.wait()}")
        self.threads = hello["threads"]
        for problem in hello.get("problems", []):
            log.warning("Sandbox set-up incomplete: %s", problem)
        self._sock.settimeout(REQUEST_TIMEOUT)

    def accepts(self, cmd: list, env: dict) -> bool:
        """Whether ``cmd``/``env`` is a kernel this server can fork (else launch it normally)."""
        return (len(cmd) >= 3 and cmd[0] == sys.executable and cmd[1] == "-m" and cmd[2] in MODULES
                and {k: v for k, v in env.items() if k not in PER_KERNEL_ENV} == self.env)

    def launch(self, cmd: list, env: dict, cwd, connection: dict | None = None, fd: int | None = None) -> ForkedKernel:
        request = {"op": "launch", "argv": list(cmd), "env": dict(env), "cwd": str(cwd) if cwd else None,
                   "connection": connection}
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], [fd] if fd is not None else [])
            msg, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1)
        if not msg or not fds:
            dirty = _json(msg).get("dirty")
            raise ForkServerError(f"sandbox not clean after clear-up: {dirty}" if dirty else
                                  "fork server did not answer a launch request")
        return ForkedKernel(self, json.loads(msg)["pid"], fds[0])

    def status(self, pid: int) -> int:
        try:
            with self._lock:
                self._sock.send(json.dumps({"op": "status", "pid": pid}).encode())
                status = json.loads(self._sock.recv(MAX_MESSAGE))["status"]
        except (OSError, ValueError, KeyError):
            status = None
        return -signal.SIGKILL if status is None else status

    def close(self) -> None:
        """End the fork server (EOF on its socket) and reap it; it kills the kernels it still runs."""
        stop_server(self._sock, self.process)


_servers: dict = {}
_serials = itertools.count()  # each sandbox this process starts gets the next uid (sandbox.sandbox_uid)
# Keys whose server failed to start, with when: later kernels of the same shard fall back (or fail) at once
# instead of waiting for another start; after RETRY_SECONDS, or at the next shard (forget_failures), a new
# attempt is made, so one bad moment never costs the rest of the worker's students (issue 22).
_failed: dict = {}
RETRY_SECONDS = 30.0
launches: collections.Counter = collections.Counter()  # kernels graded in this process: "forked" / "fresh"


def server(limits: bwrap.Limits | None = None, role: str = "kernels") -> ForkServer | None:
    """This process's warm fork server for ``role`` and sandbox setting, started on first use; None if it cannot run.

    ``role="functions"`` is a second server, in a sandbox of its own, for the trusted checker's
    function hosts (:mod:`.fnhost`): a sandboxed server clears its sandbox before every launch.
    """
    key = (role, None if limits is None else limits.to_json())
    srv = _servers.get(key)
    if srv is not None and srv.owner == os.getpid():
        if srv.process.poll() is None:
            return srv
        srv.close()  # it died (a student's kernel may have killed it): start another
    _servers.pop(key, None)
    if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
        return None
    if key in _failed and time.monotonic() - _failed[key] < RETRY_SECONDS:
        return None
    try:
        srv = ForkServer(limits=limits)
    except (ForkServerError, OSError) as exc:
        _failed[key] = time.monotonic()
        log.warning("Warm kernels unavailable (%s); starting every kernel from scratch.", exc)
        return None
    if srv.threads > 1 and limits is None:
        log.warning("The fork server has %d threads after preloading; forking it may be unsafe.", srv.threads)
    _failed.pop(key, None)
    atexit.register(srv.close)
    _servers[key] = srv
    return srv


def new_student() -> None:
    """A student's grading starts or ends: stop every sandbox of this process, so the next gets new ones.

    Nothing an earlier student's code did (files it could not be made to give up, processes, IPC, a uid's
    process count) can be in a sandbox the next student's kernels or function hosts use: their fork
    servers are new bubblewrap sandboxes (fresh ``/tmp``, home and ``/dev/shm``) under new uids.
    """
    close_all()
    forget_failures()


def launch(limits: bwrap.Limits | None, role: str, cmd: list, env: dict, cwd=None, **kw) -> ForkedKernel:
    """Launch ``cmd`` from this process's fork server for ``role``; if that server fails (it died, or its
    sandbox could not be cleared), once more from a new server in a fresh sandbox.

    Raises :class:`ForkServerError` only when the fresh sandbox failed too, before any of the student's code
    ran in it: then the machinery is at fault (see ``autograde/README.md`` §5).
    """
    srv = server(limits, role)
    if srv is not None:
        try:
            return srv.launch(cmd, env, cwd, **kw)
        except (ForkServerError, OSError, ValueError) as exc:
            log.warning("Fork server for %s failed (%s); starting a fresh sandbox.", role, exc)
            discard(limits, role)
            forget_failures()
            srv = server(limits, role)
    if srv is None:
        raise ForkServerError(f"no fork server for {role}")
    return srv.launch(cmd, env, cwd, **kw)


def forget_failures() -> None:
    """Let the next kernel try to start a fork server again (called when a shard starts)."""
    _failed.clear()


def close_all() -> None:
    """Stop every fork server this process started (the grader's own, after the preflight)."""
    for key in list(_servers):
        srv = _servers.pop(key)
        if srv.owner == os.getpid():
            srv.close()


def discard(limits: bwrap.Limits | None = None, role: str = "kernels") -> None:
    """Stop this process's fork server (it failed); the next kernel starts a new one."""
    srv = _servers.pop((role, None if limits is None else limits.to_json()), None)
    if srv is not None and srv.owner == os.getpid():
        srv.process.kill()
        srv.close()
