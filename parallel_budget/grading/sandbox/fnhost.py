"""The function host: replays a student's cells in a fresh sandboxed interpreter and calls their function.

Forked by a fork server of its own (:mod:`.forkserver`, in a bubblewrap
sandbox separate from the student's kernel) as ``python -m
parallel_budget.grading.sandbox.fnhost``; its channel to the grader is the stream socket in
``PB_CHANNEL_FD``, carrying length-prefixed JSON (:mod:`.channel`, so a notebook of
any size under the cap fits).  The first message holds the student's code cells (never
a test cell); each later one ``{"call": name, "args": [...]}`` is answered
with ``{"result": plain}`` or ``{"error": text}``.  The arguments are the
hidden test's cases; they reach this throw-away process only, which the
student's kernel cannot see, and nothing it prints reaches anyone.
"""

from __future__ import annotations

import os
import socket
import sys

from .. import bounds
from . import channel
from ...answers import plain

FIRST_LIMIT = 2 * bounds.MAX_NOTEBOOK_BYTES  # the cells of a notebook under the cap, as JSON


def _shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance(history_length=0, colors="NoColor")


def main() -> None:
    sock = socket.socket(fileno=int(os.environ["PB_CHANNEL_FD"]))
    devnull = open(os.devnull, "w")
    sys.stdout = sys.stderr = devnull  # the student's prints go nowhere
    os.dup2(devnull.fileno(), 1)
    os.dup2(devnull.fileno(), 2)
    first = channel.receive(sock, FIRST_LIMIT) or {}
    shell = _shell()
    for source in first.get("cells", []):
        shell.run_cell(source, store_history=False, silent=True)
    while True:
        request = channel.receive(sock, plain.MAX_JSON)
        if not isinstance(request, dict):
            return
        function = shell.user_ns.get(request.get("call"))
        try:
            if not callable(function):
                raise TypeError(f"{request.get('call')} 不是函数")
            args = [plain.decode(a) for a in request.get("args", [])]
            reply = {"result": plain.encode(function(*args))}
        except BaseException as exc:  # noqa: BLE001 -- the student's exception is the answer
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        channel.send(sock, reply)


if __name__ == "__main__":
    main()
