"""jupyter_client glue: a kernel manager whose kernels come from the fork server, sandboxed or not.

:func:`kernel_manager_class` returns an ``AsyncKernelManager`` subclass for
nbgrader's ``Execute``.  Sandboxed (given :class:`.bwrap.Limits`), every
kernel uses the ``ipc`` transport: its sockets live in the sandbox's own
``/tmp`` and the grader connects to them through descriptors opened via
``/proc/<pid>/root`` before student code runs (:class:`.bwrap.PinnedSockets`); signals
go through the kernel's pidfd, never to a process group id (a PID inside the
sandbox means another process outside).  A sandboxed kernel is never started
outside the sandbox: ``fresh=True`` starts it from a one-shot, non-preloaded
fork server in a sandbox of its own.
"""

from __future__ import annotations

import functools
import logging
import os
import time
import uuid

from .. import bounds
from . import bwrap
from .forkclient import ForkedKernel, ForkServer, ForkServerError, discard, server

log = logging.getLogger("parallel_budget.grading")


def _plain(info: dict) -> dict:
    return {k: v.decode() if isinstance(v, bytes) else v for k, v in info.items()}


def _provisioner_class(limits, fresh):
    from jupyter_client.provisioning import LocalProvisioner

    class ForkProvisioner(LocalProvisioner):
        """LocalProvisioner that forks python kernels from a fork server."""

        warm = False
        _oneshot = None
        _pins = None  # sandboxed: the kernel's sockets, pinned (sandbox.PinnedSockets)

        async def launch_kernel(self, cmd, **kwargs):
            env = dict(kwargs.get("env") or os.environ)
            env.setdefault("JPY_PARENT_PID", str(os.getpid()))  # as jupyter_client's launcher sets it
            if limits is None:
                srv = None if fresh else server()
                if srv is None or not srv.accepts(cmd, env):
                    return await super().launch_kernel(cmd, **kwargs)
                try:
                    self.process = srv.launch(cmd, env, kwargs.get("cwd"))
                except (ForkServerError, OSError, ValueError) as exc:  # e.g. a student's kernel stopped the server
                    log.warning("Fork server failed (%s); starting this kernel from scratch.", exc)
                    discard()
                    return await super().launch_kernel(cmd, **kwargs)
                self.warm = True
                self.pid = self.pgid = self.process.pid
                self.cwd = kwargs.get("cwd") or os.getcwd()
                return self.connection_info
            if fresh:
                srv = self._oneshot = ForkServer(limits=limits, preload=False)
            else:
                srv = server(limits)
            if srv is not None and not srv.accepts(cmd, env) and not fresh:
                discard(limits)  # the grader's environment changed since it started: a server that matches
                srv = server(limits)
            if srv is None or not srv.accepts(cmd, env):
                raise ForkServerError("no sandboxed fork server for this kernel command")
            connection = _plain(self.connection_info)
            try:
                self.process = srv.launch(cmd, env, None, connection=connection)
            except (ForkServerError, OSError, ValueError):
                discard(limits)  # the sandbox's server is gone: one more try with a new one
                srv = server(limits)
                if srv is None:
                    raise
                self.process = srv.launch(cmd, env, None, connection=connection)
            self.warm = not fresh
            self.pid, self.pgid, self.cwd = self.process.host_pid, None, bwrap.WORK
            ports = [connection[k] for k in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")]
            self._pins = bwrap.PinnedSockets(srv.root, ports, lambda: self.process.poll() is None)
            self.connection_info = dict(self.connection_info, transport="ipc", ip=self._pins.ip)
            return self.connection_info

        async def send_signal(self, signum):
            if isinstance(self.process, ForkedKernel):
                self.process.send_signal(signum)  # the pidfd: never a process group id
                return
            await super().send_signal(signum)

        async def wait(self):
            if isinstance(self.process, ForkedKernel):
                await self.process.exited()
            return await super().wait()

        async def cleanup(self, restart=False):
            await super().cleanup(restart)
            if self._pins is not None:
                self._pins.close()
                self._pins = None
            if self._oneshot is not None:
                self._oneshot.close()
                self._oneshot = None

    return ForkProvisioner


def _client_class():
    from queue import Empty

    import zmq
    from jupyter_client.asynchronous import AsyncKernelClient
    from traitlets import default

    class WarmKernelClient(AsyncKernelClient):
        """AsyncKernelClient that does not idle while a forked kernel comes up.

        * A forked kernel binds its sockets about 30 ms after the fork; a client
          socket that connected earlier retries after ZeroMQ's reconnect
          interval, 100 ms by default.  Here it is 10 ms.
        * Every socket refuses a message over :data:`.bounds.MAX_KERNEL_MESSAGE` (``zmq.MAXMSGSIZE``).
        * jupyter_client ends the handshake by draining IOPub until it has been
          quiet for 0.2 s; nbclient matches IOPub messages to its requests by
          parent id, so draining what has already arrived is enough.
        """

        @default("context")
        def _context_default(self):
            context = super()._context_default()
            context.setsockopt(zmq.RECONNECT_IVL, 10)  # default for the sockets this client creates
            # A frame over the cap is refused by ZeroMQ before it is allocated or decoded (the peer is
            # disconnected and reconnects): a kernel's 400 MB print never reaches the grader's memory.
            context.setsockopt(zmq.MAXMSGSIZE, bounds.MAX_KERNEL_MESSAGE)
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
def kernel_manager_class(limits: bwrap.Limits | None = None, fresh: bool = False):
    """An AsyncKernelManager whose kernels come from a fork server (sandboxed with ``limits``)."""
    from jupyter_client.manager import AsyncKernelManager

    provisioner = _provisioner_class(limits, fresh)
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
            if limits is not None:
                self.transport, self.ip = "ipc", bwrap.IPC  # the path inside the sandbox
            if self.provisioner is None:
                self.kernel_id = self.kernel_id or kw.pop("kernel_id", None) or str(uuid.uuid4())
                self.provisioner = provisioner(kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self)
            return await super()._async_pre_start_kernel(**kw)

        def cleanup_ipc_files(self):
            if limits is None:  # sandboxed sockets vanish with the sandbox's /tmp
                super().cleanup_ipc_files()

    return ForkKernelManager
