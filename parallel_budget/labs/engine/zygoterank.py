"""What a rank forked by the zygote (:mod:`.zygote`) does: become ``python -m parallel_budget.labs.<lab>``.

:func:`setup_rank` gives the child the session, streams, environment, folder and
-- in ``/proc``, for ``ps`` and psutil -- the command line and environment of the
plain process; :func:`become` runs the lab module as ``__main__`` and ends the
process as a fork()ed multiprocessing child ends (:func:`exit_without_teardown`, which
:func:`.cli.main` uses for every other rank too).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

# Set per rank or per run: the only variables in which a rank's environment may differ from the zygote's.
PER_RANK_ENV = (
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_USE_AGENT_STORE", "PB_LAB_RUN_ID", "PB_LAB_RUN_DIR",
)
ENV_PAD = "PB_LAB_ZYGOTE_PAD"  # the last variable of the zygote's environment: room for a rank's own
ENV_PAD_BYTES = 4096
ARG_PAD_BYTES = 2048  # room for a rank's command line
CWD = "/"  # the zygote's folder: nothing in the caller's folder can shadow a preloaded module
SHOWN = False  # this process is a forked rank whose /proc identity was rewritten (so a fork of it can rewrite its own)


def thread_count() -> int:
    """Threads of this process (``fork()`` is safe only with one)."""
    return len(os.listdir("/proc/self/task"))


def _areas() -> tuple:
    """(arg_start, arg_end, env_start, env_end) of this process (``man 5 proc``, fields 48-51)."""
    with open("/proc/self/stat", "rb") as fh:
        data = fh.read()
    return tuple(int(x) for x in data[data.rindex(b")") + 2:].split()[45:49])


def _pad_entry() -> bytes:
    return f"{ENV_PAD}={'x' * ENV_PAD_BYTES}".encode() + b"\0"


def identity_room() -> bool:
    """Whether this zygote can show a rank's command line and environment (checked once, at start)."""
    try:
        a0, a1, e0, e1 = _areas()
        return (a1 - a0 > ARG_PAD_BYTES and ctypes.string_at(a0, a1 - a0).endswith(b" " * ARG_PAD_BYTES + b"\0")
                and ctypes.string_at(e0, e1 - e0).endswith(_pad_entry()))
    except (OSError, ValueError, IndexError):
        return False


def rank_env_block(env: dict, own: tuple = PER_RANK_ENV) -> bytes:
    """The variables of ``own`` as they go into the padding (RANK and PB_LAB_RUN_ID first)."""
    keys = sorted((k for k in env if k in own), key=lambda k: (k not in ("RANK", "PB_LAB_RUN_ID"), k))
    return b"".join(os.fsencode(f"{k}={env[k]}") + b"\0" for k in keys)


def fits(argv: list, env: dict, own: tuple = PER_RANK_ENV) -> bool:
    """Whether a command line and its own variables fit in the room the zygote reserved."""
    return (len(b"\0".join(map(os.fsencode, argv))) < ARG_PAD_BYTES
            and len(rank_env_block(env, own)) < ENV_PAD_BYTES)


def show_identity(argv: list, env: dict, own: tuple = PER_RANK_ENV) -> None:
    """In a forked rank (or a fork of one, :data:`SHOWN`): make /proc/self/cmdline and /proc/self/environ its own.

    Only bytes nothing references any more are written: the arguments (sys.argv is
    Python's copy) and the padding variable, which the zygote removed from its
    C environment at start.  The zygote's other variables, the rank's too, stay where they are.
    """
    global SHOWN
    a0, a1, e0, e1 = _areas()
    args = b"\0".join(map(os.fsencode, argv)) + b"\0"
    ctypes.memmove(a0, args.ljust(a1 - a0, b"\0"), a1 - a0)
    room = len(_pad_entry())
    ctypes.memmove(e1 - room, rank_env_block(env, own).ljust(room, b"\0"), room)
    SHOWN = True


def setup_rank(request: dict, fds: list) -> None:
    """In the forked child: the session, streams, environment, identity and folder of ``python -m``."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, target in zip(fds, (1, 2)):
        os.dup2(fd, target)
        os.close(fd)
    argv, env = request["argv"], request["env"]
    os.environ.clear()
    os.environ.update(env)
    show_identity(argv, env)
    os.chdir(request["cwd"])
    if sys.path and sys.path[0] in ("", CWD):
        sys.path[0] = os.getcwd()  # what ``python -m`` puts first


def become(request: dict) -> None:
    """In the forked child, set up by :func:`setup_rank`: run the lab module as ``python -m`` would, then exit."""
    import random
    import runpy

    argv = request["argv"]
    random.seed()
    if "numpy" in sys.modules:  # a fresh interpreter seeds it from the OS
        sys.modules["numpy"].random.seed()
    sys.argv = [argv[2], *argv[3:]]
    try:
        runpy._run_module_as_main(argv[2], alter_argv=True)  # what ``python -m`` itself calls
        code = 0
    except SystemExit as exc:
        code = exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:  # noqa: BLE001 - printed and exit code 1, as the interpreter does
        sys.excepthook(*sys.exc_info())
        code = 1
    exit_without_teardown(code)


def exit_code(code) -> int:
    """The exit status ``python`` gives ``SystemExit(code)``."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def exit_without_teardown(code: int) -> None:
    """End a forked rank as a fork()ed multiprocessing child ends: without the interpreter's teardown.

    What an interpreter does before it exits is kept -- non-daemon threads are
    joined, atexit handlers run, stdout and stderr are flushed -- but not the
    teardown of every module, which in a copy of a process that imported torch
    touches (and so copies) most of its memory: 0.2-0.8 s of CPU per rank.  An
    uncaught KeyboardInterrupt ends by SIGINT, as in Python since 3.8.
    """
    import atexit
    import threading

    with contextlib.suppress(BaseException):
        threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(code & 0xFF)
