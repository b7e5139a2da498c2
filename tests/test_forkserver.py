"""Is a kernel forked from the warm fork server the same as a kernel started from scratch?

Each test drives real kernels through nbclient or jupyter_client, as nbgrader does.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

from parallel_budget.grading.sandbox import forkclient as forkserver
from parallel_budget.grading.sandbox.warmkernels import kernel_manager_class

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, os, random, sys
import numpy
print(json.dumps({
    "cwd": os.getcwd(),
    "env": sorted((k, v) for k, v in os.environ.items() if not k.startswith("JPY_")),
    "ppid": os.getppid(),
    "path": sys.path,
    "own_session": os.getsid(0) == os.getpid(),
    "jpy": sorted(k for k in os.environ if k.startswith("JPY_")),
    "parent_handle": bool(get_ipython().kernel.parent.parent_handle),
    "shell": type(get_ipython()).__name__,
    "stdin_tty": os.isatty(0),
    "random": random.random(),
    "numpy_random": float(numpy.random.random()),
    "pid": os.getpid(),
}))
"""


def _run(cells, manager, cwd, timeout=20):
    """Execute ``cells`` in a new kernel made by ``manager``; return the stdout of each cell."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, kernel_manager_class=manager, timeout=timeout, allow_errors=True,
                            shutdown_kernel="immediate", resources={"metadata": {"path": str(cwd)}})
    client.execute()
    return ["".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream") for cell in nb.cells]


@pytest.fixture
def warm():
    """The warm kernel manager, with a fork server started in this test's environment.

    The server forks only kernels whose environment equals its own, and pytest changes
    PYTEST_CURRENT_TEST for every test; a server from an earlier test would (correctly)
    make every kernel start from scratch, which the tests below would catch.
    """
    forkserver.discard()
    yield kernel_manager_class()
    forkserver.discard()


def test_forked_kernel_sees_what_a_fresh_kernel_sees(tmp_path, warm):
    """Same cwd, sys.path, environment, session and kernel settings; but its own pid and random state."""
    fresh = json.loads(_run([PROBE], AsyncKernelManager, tmp_path)[0])
    one = json.loads(_run([PROBE], warm, tmp_path)[0])
    two = json.loads(_run([PROBE], warm, tmp_path)[0])
    srv = forkserver.server()
    assert srv is not None and srv.threads == 1  # nothing but the main thread is lost at fork()
    assert one["ppid"] == two["ppid"] == srv.process.pid and fresh["ppid"] == os.getpid()  # really forked
    for key in ("cwd", "env", "path", "own_session", "jpy", "parent_handle", "shell", "stdin_tty"):
        assert one[key] == fresh[key], key
    assert one["cwd"] == str(tmp_path) and one["own_session"] and one["parent_handle"]
    assert len({one["pid"], two["pid"], srv.process.pid}) == 3
    assert one["random"] != two["random"] and one["numpy_random"] != two["numpy_random"]


def test_one_kernel_cannot_change_the_next(tmp_path, warm):
    """Monkeypatching the checker or a global in one kernel leaves the next kernel untouched."""
    first = _run(["import os; print(os.getppid())\nimport parallel_budget\nfrom parallel_budget.answers import checks\n"
          "parallel_budget.LEAK = 1\nchecks.visible = None\nimport builtins\nbuiltins.LEAK = 1"], warm, tmp_path)
    assert first == [f"{forkserver.server().process.pid}\n"]
    out = _run(["import builtins, parallel_budget\nfrom parallel_budget.answers import checks\n"
                "print(hasattr(parallel_budget, 'LEAK'), callable(checks.visible), hasattr(builtins, 'LEAK'))"],
               warm, tmp_path)
    assert out == ["False True False\n"]


def test_dead_kernel_reports_its_exit_code_and_interrupt_works(tmp_path, warm):
    """``os._exit(7)`` is seen as exit code 7; SIGINT stops a busy forked kernel like a fresh one."""

    async def scenario():
        km = warm(kernel_name="python3")
        await km.start_kernel(cwd=str(tmp_path))
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=20)
            # stop_on_error=False: after an error reply ipykernel aborts the requests that reach it in the
            # next moment, which on a loaded machine can be the os._exit below (the kernel then stays alive)
            msg_id = kc.execute("while True: pass", stop_on_error=False)
            await asyncio.sleep(0.5)
            await km.interrupt_kernel()
            reply = await kc.get_shell_msg(timeout=10)
            while reply["parent_header"].get("msg_id") != msg_id:
                reply = await kc.get_shell_msg(timeout=10)
            assert reply["content"]["ename"] == "KeyboardInterrupt"
            process = km.provisioner.process
            assert isinstance(process, forkserver.ForkedKernel)
            kc.execute("import os; os._exit(7)")
            deadline = time.monotonic() + 30  # generous: a loaded 2-core machine
            while await km.is_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not await km.is_alive()
            return process.poll()
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    assert asyncio.run(scenario()) == 7


def test_a_kernel_that_breaks_its_fork_server_only_hurts_itself(tmp_path, warm, monkeypatch):
    """A student's kernel kills or stops the fork server: the next kernels still start, from a new server."""
    from nbclient.exceptions import DeadKernelError

    monkeypatch.setattr(forkserver, "REQUEST_TIMEOUT", 2.0)
    forkserver.discard()
    killed = forkserver.server().process.pid
    with pytest.raises(DeadKernelError):  # it dies with its server
        _run(["import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(5)"], warm, tmp_path)
    assert _run(["import os; print(os.getppid())"], warm, tmp_path) == [f"{forkserver.server().process.pid}\n"]
    assert forkserver.server().process.pid != killed

    stopped = forkserver.server().process.pid
    _run(["import os, signal; os.kill(os.getppid(), signal.SIGSTOP)"], warm, tmp_path)
    # the stopped server times out: this kernel starts from scratch, the stopped server is killed
    assert _run(["import os; print(os.getppid())"], warm, tmp_path) == [f"{os.getpid()}\n"]
    assert _state(stopped) in ("gone", "Z")
    assert _run(["import os; print(os.getppid())"], warm, tmp_path) == [f"{forkserver.server().process.pid}\n"]


def test_kernels_it_cannot_reproduce_start_the_usual_way(warm):
    """Another interpreter, another module or another environment: no fork."""
    srv = forkserver.server()
    env = {k: v for k, v in os.environ.items()}
    cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", "x.json"]
    assert srv.accepts(cmd, dict(env, JPY_PARENT_PID="1"))
    assert not srv.accepts(["/usr/bin/python3", *cmd[1:]], env)
    assert not srv.accepts([sys.executable, "-m", "other_kernel", "-f", "x.json"], env)
    assert not srv.accepts(cmd, dict(env, PYTHONPATH="/elsewhere"))
    assert not srv.accepts(cmd, dict(env, MPLBACKEND="agg"))


def _state(pid: int) -> str:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        return "gone"
    return "?"


def test_killing_the_grader_leaves_no_fork_server_or_kernel(tmp_path):
    """kill -9 of the process that owns the fork server ends the server and every kernel it forked."""
    script = textwrap.dedent("""
        import asyncio, json, sys
        from parallel_budget.grading.sandbox import forkclient as forkserver
        from parallel_budget.grading.sandbox.warmkernels import kernel_manager_class
        async def main():
            km = kernel_manager_class()(kernel_name="python3")
            await km.start_kernel(cwd=sys.argv[1])
            print(json.dumps([forkserver.server().process.pid, km.provisioner.pid]), flush=True)
            await asyncio.sleep(600)
        asyncio.run(main())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        server_pid, kernel_pid = json.loads(proc.stdout.readline())
        assert _state(server_pid) not in ("gone", "Z") and _state(kernel_pid) not in ("gone", "Z")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and {_state(server_pid), _state(kernel_pid)} - {"gone", "Z"}:
        time.sleep(0.05)
    assert _state(server_pid) in ("gone", "Z") and _state(kernel_pid) in ("gone", "Z")
