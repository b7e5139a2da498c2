"""The launcher's side of the zygote (:mod:`.zygote`): start it, open a run's channel, fork ranks.

One zygote per launcher process and worker environment, started by the first
``run_lab`` (while the launcher imports ``torch.distributed`` itself, so the two
imports overlap), reused by every later run and by runs in other threads, each
over its own :class:`Channel`.  A different worker environment (a variable the
notebook changed) gets a zygote of its own, so no preloaded module has read a
setting a rank would see differently; so does a package whose files changed on
disk since the zygote imported them, so no rank runs stale code.  :class:`ForkedRank` is a pidfd-backed
stand-in for the part of :class:`subprocess.Popen` the launcher uses, with the
same return codes (negative for a signal).

``PB_LAB_ZYGOTE=0`` (or ``LaunchConfig(zygote=False)``) launches every rank as
its own ``python -m`` process instead; so does every platform without pidfds.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

from ...pidfd import PidfdChild, stop_server
from .zygote import CODE, MAX_MESSAGE
from .zygoterank import ARG_PAD_BYTES, CWD, ENV_PAD, ENV_PAD_BYTES, PER_RANK_ENV, fits

IDLE_S = 60.0  # a zygote without a run for this long exits (PB_LAB_ZYGOTE_IDLE overrides)
HELLO_TIMEOUT = 120.0  # importing torch on a loaded machine
REQUEST_TIMEOUT = 30.0


class ZygoteError(RuntimeError):
    """The zygote could not be started or stopped answering (the launcher then starts ranks itself)."""


def supported() -> bool:
    """Linux with pidfds and file-descriptor passing."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(socket, "send_fds")


def enabled() -> bool:
    """Whether a run forks its ranks by default (``PB_LAB_ZYGOTE=0`` says no)."""
    return os.environ.get("PB_LAB_ZYGOTE", "1") != "0" and supported()


def base_env(env: dict) -> dict:
    """A rank's environment without the variables set per rank or per run: what its zygote must have."""
    return {k: v for k, v in env.items() if k not in PER_RANK_ENV}


class ForkedRank(PidfdChild):
    """A rank forked by the zygote: ``pid``, ``poll()``, ``wait(timeout)``, ``returncode``."""

    what = "rank"

    def __init__(self, channel: "Channel", pid: int, pidfd: int, threads: int):
        super().__init__(pid, pidfd)
        self._channel = channel
        self.threads_at_fork = threads

    def _status(self) -> int:
        return self._channel.status(self.pid)


class Channel:
    """One run's connection to the zygote.  Closing it kills whatever the run left alive."""

    def __init__(self, zygote: "Zygote", sock: socket.socket):
        self.zygote, self._sock = zygote, sock
        self._sock.settimeout(REQUEST_TIMEOUT)

    def spawn(self, argv: list, env: dict, cwd, stdout, stderr) -> ForkedRank:
        request = {"op": "spawn", "argv": list(argv), "env": dict(env), "cwd": str(cwd)}
        try:
            socket.send_fds(self._sock, [json.dumps(request).encode()], [stdout.fileno(), stderr.fileno()])
            msg, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1)
        except OSError as exc:
            raise ZygoteError(f"zygote did not answer: {exc}") from None
        reply = json.loads(msg or b"{}")
        if not fds:
            raise ZygoteError(reply.get("error", "zygote closed the channel"))
        return ForkedRank(self, reply["pid"], fds[0], reply["threads"])

    def status(self, pid: int) -> int | None:
        """Exit code of a rank whose pidfd said it exited (-SIGKILL if the zygote is gone)."""
        try:
            self._sock.send(json.dumps({"op": "status", "pid": pid}).encode())
            while True:
                msg, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1)
                for fd in fds:  # a reply to a launch that an interrupt cut short: not ours
                    os.close(fd)
                reply = json.loads(msg or b'{"code": null}')
                if reply.get("pid", pid) == pid:
                    break
        except (OSError, ValueError):
            reply = {"code": None}
        return -signal.SIGKILL if reply.get("code") is None else reply["code"]

    def close(self) -> None:
        """Ask the zygote to kill and reap every rank of this run still alive, and wait until it has."""
        try:
            self._sock.send(b'{"op": "close"}')
            while True:
                msg, fds, _, _ = socket.recv_fds(self._sock, MAX_MESSAGE, 1)
                for fd in fds:
                    os.close(fd)
                if not msg or json.loads(msg).get("closed"):
                    break
        except (OSError, ValueError):
            pass  # the zygote is gone, and with it (PR_SET_PDEATHSIG) every rank it forked
        finally:
            self._sock.close()
            self.zygote.release()


_starter: dict = {}  # pid -> the executor whose one thread starts zygotes


def _start_in_lasting_thread(fn):
    """Run ``fn`` in a thread that lives as long as this process.

    PR_SET_PDEATHSIG fires when the *thread* that forked the zygote ends, not the
    process: a zygote started from a short-lived thread (ThreadPoolExecutor) would die with it.
    """
    pool = _starter.get(os.getpid())
    if pool is None:
        pool = _starter[os.getpid()] = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="pb-lab-zygote")
    return pool.submit(fn).result()


class Zygote:
    """One zygote process for one worker environment, owned by the process that started it."""

    def __init__(self, env: dict, idle: float):
        self.owner, self.env, self.idle = os.getpid(), dict(env), idle
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        zenv = dict(env)
        zenv.pop(ENV_PAD, None)
        zenv[ENV_PAD] = "x" * ENV_PAD_BYTES  # last: the block a rank rewrites with its own variables
        argv = [sys.executable, "-c", CODE, str(theirs.fileno()), str(os.getpid()), repr(idle), " " * ARG_PAD_BYTES]
        try:
            self.process = _start_in_lasting_thread(lambda: subprocess.Popen(
                argv, pass_fds=[theirs.fileno()], env=zenv, cwd=CWD, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, start_new_session=True,
            ))
        except BaseException:
            self._sock.close()
            raise
        finally:
            theirs.close()
        self.hello = None
        self.last_used = time.monotonic()
        self.channels = 0  # runs using it now
        self._lock = threading.Lock()

    def ready(self, timeout: float) -> bool | None:
        """Wait (at most ``timeout`` s) for the zygote's hello: True, False if it failed or cannot fork
        safely, None if it is still importing (this run starts its ranks itself, the next one may fork)."""
        with self._lock:
            if self.hello is None:
                self._sock.settimeout(max(0.1, timeout))
                try:
                    self.hello = json.loads(self._sock.recv(MAX_MESSAGE) or b"{}")
                except socket.timeout:
                    return None
                except (OSError, ValueError) as exc:
                    self.hello = {"ready": False, "error": str(exc)}
                finally:
                    self._sock.settimeout(REQUEST_TIMEOUT)
        return bool(self.hello.get("ready")) and self.hello.get("threads") == 1

    def channel(self) -> Channel:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with self._lock:
                socket.send_fds(self._sock, [b"channel"], [theirs.fileno()])
                self.last_used = time.monotonic()
                self.channels += 1
        except OSError as exc:
            mine.close()
            raise ZygoteError(f"zygote is gone: {exc}") from None
        finally:
            theirs.close()
        return Channel(self, mine)

    def release(self) -> None:
        with self._lock:
            self.channels -= 1
            self.last_used = time.monotonic()

    def alive(self) -> bool:
        """Running, and either in use or not about to exit as idle (then it is not handed to a new run)."""
        margin = min(5.0, self.idle / 4)
        return self.process.poll() is None and (self.channels > 0 or time.monotonic() - self.last_used < self.idle - margin)

    def close(self) -> None:
        """End the zygote (EOF on its socket) and reap it; it kills anything it still runs."""
        stop_server(self._sock, self.process)


_zygotes: dict = {}  # (frozen worker environment, package stamp) -> Zygote
_failed: set = set()  # (pid, environment) whose zygote could not start: no second try in this process
_lock = threading.Lock()


def package_stamp() -> int:
    """Newest modification time of the package's files: an edited module means a new zygote, never stale code."""
    root = Path(__file__).resolve().parents[2]
    return max((p.stat().st_mtime_ns for p in root.rglob("*.py")), default=0)


def zygote_for(env: dict) -> Zygote | None:
    """This process's zygote for worker environment ``env`` and the package as it is on disk now
    (started now if needed, without waiting)."""
    if not supported():
        return None
    key = (frozenset(base_env(env).items()), package_stamp())
    idle = float(os.environ.get("PB_LAB_ZYGOTE_IDLE") or IDLE_S)
    with _lock:
        if (os.getpid(), key) in _failed:
            return None
        z = _zygotes.get(key)
        if z is not None and z.owner == os.getpid() and z.alive():
            return z
        _zygotes.pop(key, None)
        if z is not None and z.owner == os.getpid():
            z.close()
        for other, old in list(_zygotes.items()):  # the same environment and older code: of no more use
            if other[0] == key[0] and old.owner == os.getpid() and old.channels == 0:
                del _zygotes[other]
                old.close()
        try:
            z = _zygotes[key] = Zygote(base_env(env), idle)
            z.stamp = key[1]
        except OSError as exc:
            _failed.add((os.getpid(), key))
            warnings.warn(f"labs: cannot start the zygote ({exc}); starting every rank as its own process",
                          RuntimeWarning, stacklevel=3)
            return None
        return z


def open_channel(zygote: Zygote | None, timeout: float) -> Channel | None:
    """A channel for one run, or None (start ranks the ordinary way) if the zygote cannot serve it."""
    if zygote is None:
        return None
    ready = zygote.ready(timeout)
    if ready is None:
        return None
    if not ready:
        warnings.warn(f"labs: zygote unavailable ({zygote.hello}); starting every rank as its own process",
                      RuntimeWarning, stacklevel=3)
        with _lock:
            _failed.add((os.getpid(), (frozenset(zygote.env.items()), zygote.stamp)))
        discard(zygote)
        return None
    try:
        return zygote.channel()
    except ZygoteError:  # it exited as idle just now: one fresh try
        discard(zygote)
        fresh = zygote_for(zygote.env)
        if fresh is None or fresh.ready(timeout) is not True:
            return None
        try:
            return fresh.channel()
        except ZygoteError:
            return None


def serves(channel: Channel | None, argv: list, env: dict) -> bool:
    """Whether ``channel``'s zygote can fork this rank exactly as ``python -m`` would start it."""
    return (channel is not None and argv[:2] == [sys.executable, "-m"] and base_env(env) == channel.zygote.env
            and fits(argv, env))


def discard(zygote: Zygote) -> None:
    with _lock:
        for key, z in list(_zygotes.items()):
            if z is zygote:
                del _zygotes[key]
    if zygote.owner == os.getpid():
        zygote.close()


def close_all() -> None:
    """End every zygote of this process and reap it (the benchmark's CPU count then includes them)."""
    with _lock:
        zs = [z for z in _zygotes.values() if z.owner == os.getpid()]
        _zygotes.clear()
    for z in zs:
        z.close()


def live_zygotes() -> list:
    """Process ids of this process's live zygotes."""
    with _lock:
        return [z.process.pid for z in _zygotes.values() if z.owner == os.getpid() and z.process.poll() is None]
