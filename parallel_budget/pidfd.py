"""A forked child watched through a pidfd: the part of :class:`subprocess.Popen` our launchers use.

The grading fork server (:mod:`.grading.forkclient`) and the labs' zygote
(:mod:`.labs.zygoteclient`) both fork children that are not this process's own,
so ``waitpid`` cannot reach them; a pidfd (passed back over a Unix socket) can:
it becomes readable when the child exits, and signals sent through it never
reach a recycled pid.  The exit status comes from whoever reaped the child,
which each subclass asks in :meth:`PidfdChild._status`.  :func:`stop_server`
ends either server (our own child) the same way.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time


class PidfdChild:
    """``pid``, ``returncode``, ``poll()``, ``wait(timeout)``, ``send_signal``, ``terminate``, ``kill``."""

    what = "process"  # how a wait timeout names it

    def __init__(self, pid: int, pidfd: int):
        self.pid, self._pidfd, self.returncode = pid, pidfd, None

    def _status(self) -> int:
        """The exit status (negative signal number as in Popen), from whoever reaped the child."""
        raise NotImplementedError

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self.returncode = self._status()
            os.close(self._pidfd)
            self._pidfd = -1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"{self.what} {self.pid}", timeout)
            select.select([self._pidfd], [], [], 0.5 if left is None else min(left, 0.5))
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            signal.pidfd_send_signal(self._pidfd, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __del__(self):
        if getattr(self, "_pidfd", -1) >= 0:
            os.close(self._pidfd)


def stop_server(sock, process: subprocess.Popen, grace: float = 10.0) -> None:
    """End a fork server or zygote: close its socket (EOF tells it to end what it runs and exit),
    reap it, and kill it if it has not exited after ``grace`` seconds."""
    sock.close()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
