"""torchrun whose workers are forks of an agent that already imported torch: the restart drill's agents.

Started as ``python -m parallel_budget.labs.engine.forkrun <torchrun options> --start-method=fork --run-path
<this file> <lab> <lab options>``, this module is the agent: it imports what the workers will need
(:data:`PRELOAD`) and then calls :func:`torch.distributed.run.main`, that is torchrun itself (the same
argument parser, c10d rendezvous, ``LocalElasticAgent``, monitoring and restarts).  torchrun's own
``--run-path`` makes its entrypoint a Python function (``runpy.run_path`` of a script), and torchrun
starts function entrypoints with ``multiprocessing`` and ``--start-method``; with ``fork`` each worker is
a fork of the agent, started in milliseconds instead of a new interpreter that imports torch (about
1.5 CPU-s; the drill starts eight workers on a two-core machine).  Once torchrun's ``main()`` returned
(workers done, rendezvous closed) the agent leaves with ``os._exit(0)``: the interpreter's teardown of
torch costs about a second of CPU and has nothing left to do.  A failure still raises, as torchrun does.

Run through ``--run-path`` in a worker (``TORCHELASTIC_RUN_ID`` set), the same file runs the rank side
of ``<lab>`` (the restart drill), :func:`.cli.main`, as ``python -m parallel_budget.labs.<lab>`` would, with
Python's default signal handlers instead of the agent's, and ``SIGKILL`` when the agent ends.  Its ``sys.exit(0)`` is fine: torchrun's
``record`` turns a clean ``SystemExit`` of a ``--run-path`` entrypoint into a return.  Absolute imports
only (``runpy.run_path`` runs the file outside its package), and the lab by name: the drill imports this
module, not the other way round.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys

from parallel_budget.labs.engine import zygote

# What a worker imports (torch._dynamo and DCP's fsspec layer on first use), imported once by the agent: what a
# zygote preloads for the drill (whose driver forks the agents from it; the list lives there), and the lab.
PRELOAD = (*zygote.PRELOAD, *(m for m in zygote.LAB_PRELOAD[zygote.LAB_MODULE.format(name="restart_drill")]
                              if m != "parallel_budget.labs.engine.forkrun"), "parallel_budget.labs.restart_drill")
AGENT_PID = "PB_FORKRUN_AGENT_PID"  # set by the agent: a worker checks that its parent is still it
# The agent's handlers (torchrun turns these signals into SignalException); a worker gets Python's defaults.
_AGENT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def agent() -> None:
    """Import :data:`PRELOAD`, then be torchrun (``sys.argv[1:]`` are torchrun's arguments)."""
    for name in PRELOAD:
        importlib.import_module(name)
    from torch.distributed.run import main

    os.environ[AGENT_PID] = str(os.getpid())
    main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def worker() -> None:
    """One worker, forked by the agent: the rank side of the lab named by ``sys.argv[1]``."""
    from parallel_budget.labs.engine import agents
    from parallel_budget.labs.engine.cli import main
    from parallel_budget.labs.engine.config import LABS, lab_module

    agents.die_with_parent()  # before anything that can block: never outlive the agent
    if str(os.getppid()) != os.environ.get(AGENT_PID, str(os.getppid())):
        os._exit(1)  # the agent died before the line above
    for sig in _AGENT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name not in LABS:
        raise SystemExit(f"forkrun 的第一个参数要是实验名（收到 {name!r}）。可接受：{'、'.join(LABS)}，例如 restart_drill")
    main(lab_module(name), sys.argv[2:])


if __name__ == "__main__":
    worker() if os.environ.get("TORCHELASTIC_RUN_ID") else agent()
