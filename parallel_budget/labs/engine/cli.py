"""Command-line entry of every lab: ``if __name__ == "__main__": main(sys.modules[__name__])``.

:func:`main` works in the three situations described in :mod:`.runtime`: under
our launcher, under ``torchrun`` (rank 0 prints the table), or started by hand
without ``RANK`` (it becomes the launcher).  It lives apart from :mod:`.runtime`
so that the rank side never imports the launcher and the launcher imports only
the rank side's constants: no import circle.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

from .launcher import run_lab
from .result import LabError, environment_line
from .report import render_text
from .runtime import RESULT_KEY, TIME_KEY, Context, parse_cli
from .zygoterank import exit_without_teardown


def collect_results(store, world_size: int, timeout: float) -> list:
    """Every rank's published result (None for a rank that published nothing)."""
    out = []
    deadline = time.monotonic() + timeout
    for r in range(world_size):
        key = RESULT_KEY.format(rank=r)
        while not store.check([key]) and time.monotonic() < deadline:
            time.sleep(0.02)
        out.append(json.loads(store.get(key)) if store.check([key]) else None)
    return out


def main(module, argv=None) -> None:
    """Entry point of every lab module (see the module docstring)."""
    try:
        args, opts = parse_cli(module, argv)
        if "RANK" in os.environ and hasattr(module, "validate"):
            module.validate(opts, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError as exc:  # a bad option: say so, no traceback
        print(exc, file=sys.stderr)
        sys.exit(2)
    if "RANK" not in os.environ:
        try:
            result = run_lab(module.NAME, ranks=args.ranks, timeout=args.timeout, keep_logs=args.keep_logs, **opts)
        except (ValueError, LabError) as exc:
            print(exc, file=sys.stderr)
            sys.exit(1)
        print(result.text())
        return
    t_start = time.monotonic()
    if hasattr(module, "before_join"):  # while this rank has one thread (e.g. fork helpers: the drill's agents)
        module.before_join(opts)
    ctx = Context(collective_timeout=float(opts.get("collective_timeout", 30.0)))
    t_joined = time.monotonic()
    status = 0
    try:
        value = module.worker(ctx, opts)
        ctx.store.set(TIME_KEY.format(rank=ctx.rank), json.dumps(
            {"join": t_joined - t_start, "work": time.monotonic() - t_joined, "env": ctx.environment()}))
        ctx.publish(value)
    except Exception:
        traceback.print_exc()
        status = 1
    if status == 0 and ctx.rank == 0 and not os.environ.get("PB_LAB_RUN_ID"):
        # torchrun: rank 0 prints the table the launcher would have shown.
        results = collect_results(ctx.store, ctx.world_size, timeout=ctx.timeout.total_seconds())
        report = module.summarize(results, opts, ctx.world_size)
        print(render_text(report.title, report.rows, report.notes, extra=environment_line(ctx.environment()),
                          figure=report.figure), flush=True)
    ctx.close()
    sys.stdout.flush()
    end_rank(status)


def end_rank(status: int) -> None:
    """End a rank after ``ctx.close()``: atexit handlers and flushed streams, but no interpreter teardown.

    ``destroy_process_group()`` does not stop gloo's threads when something still holds the backend: after
    DDP, its C++ reducer does (gloo has no ``shutdown()``; in torch 2.13 two ``pt_gloo_runloop`` threads and
    ``gloo_tcp_loop`` outlive ``destroy_process_group()`` and ``gc.collect()``).  A ``python -m`` rank that
    then tears its interpreter and C++ statics down beside live gloo threads once died with "terminate called
    without an active exception".  So every rank ends as the zygote's forked ranks always have
    (:func:`.zygoterank.exit_without_teardown`).  A worker forked by torchrun's multiprocessing start method
    ends with ``sys.exit``: multiprocessing then leaves by ``os._exit`` itself, after its own bookkeeping,
    and the agent's atexit handlers must not run in its child.
    """
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        sys.exit(status)
    exit_without_teardown(status)
