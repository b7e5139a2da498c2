"""Book kernels talk over Unix sockets, not TCP ports.

myst-nb's inline executor starts one kernel per page through nbclient, and
jupyter_client picks the kernel's five TCP ports by binding and releasing
them.  With pages executed in parallel, and other programs on the machine
doing the same (the test suite, JupyterLab, grading), two kernels can be
handed the same port: one dies with "Address already in use", or a client
reaches the wrong kernel ("Invalid Signature"), and the build fails on a page
that is fine.

jupyter_client's ``ipc`` transport has no ports: each kernel's sockets are
files in a private temporary directory, so there is nothing to collide on.
:func:`install` makes myst-nb's notebook client start its kernels that way.
myst-nb builds that client itself without any configuration hook, so this
swaps in a subclass whose ``kernel_manager_class`` defaults to
:class:`IpcKernelManager`; the kernel, its messages and its outputs are
exactly those of a TCP kernel.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from jupyter_client import AsyncKernelManager
from traitlets import default


class IpcKernelManager(AsyncKernelManager):
    """An ``AsyncKernelManager`` whose kernel listens on Unix sockets in its own temporary directory."""

    @default("transport")
    def _transport_default(self) -> str:
        return "ipc"

    @default("ip")
    def _ip_default(self) -> str:
        self._socket_dir = tempfile.mkdtemp(prefix="pb-kernel-")
        return str(Path(self._socket_dir) / "kernel")

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and getattr(self, "_socket_dir", None):
            shutil.rmtree(self._socket_dir, ignore_errors=True)


def install() -> None:
    """Make myst-nb's inline notebook client start :class:`IpcKernelManager` kernels."""
    from myst_nb.core.execute import inline

    if getattr(inline.ModifiedNotebookClient, "_pb_ipc", False):
        return

    class IpcNotebookClient(inline.ModifiedNotebookClient):
        _pb_ipc = True

        @default("kernel_manager_class")
        def _kernel_manager_class_default(self):
            return IpcKernelManager

    # start_client() looks the class up in its module each time it runs.
    inline.ModifiedNotebookClient = IpcNotebookClient
