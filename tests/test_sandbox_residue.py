"""Issue 31, item 2: can anything one student's kernel leaves in its sandbox reach the next kernel on the worker?

A poisoner leaves every residue we could think of: startup files (IPython startup, sitecustomize,
usercustomize, .pth, .bashrc/.profile, matplotlibrc), folders made read-only or ``chmod 000`` around
them, a double-forked ``setsid`` daemon that keeps re-planting them, SysV IPC, POSIX shared memory,
Unix sockets (a file and an abstract one), and a marker in every folder it can write.  Then classmates'
kernels on the same worker must see none of it, run none of it, and get a uid of their own.
"""

from __future__ import annotations

import json
import os

import nbformat
import pytest
from nbclient import NotebookClient

from parallel_budget.grading.sandbox import forkclient, bwrap
from parallel_budget.grading.sandbox.warmkernels import kernel_manager_class

pytestmark = pytest.mark.skipif(bwrap.unavailable() is not None and not os.environ.get("CI"),
                                reason=str(bwrap.unavailable()))
LIMITS = bwrap.Limits(memory_bytes=10**9, processes=48, scratch_bytes=32 * 2**20)

POISON = r'''
import os, socket, stat, subprocess, sys, time, ctypes
payload = "import builtins\nbuiltins.POISONED = True\nprint('POISONED')\n"
home = os.environ["HOME"]
site = os.path.join(home, ".local/lib/python%d.%d/site-packages" % sys.version_info[:2])
plants = {
    home + "/.ipython/profile_default/startup/00-evil.py": payload,
    home + "/.ipython/profile_default/ipython_kernel_config.py": "c.InteractiveShellApp.exec_lines = ['POISONED = 1']\n",
    home + "/.bashrc": "echo POISONED\n", home + "/.profile": "echo POISONED\n",
    home + "/.matplotlib/matplotlibrc": "backend: POISONED\n",
    site + "/usercustomize.py": payload, site + "/evil.pth": "import builtins; builtins.POISONED = True\n",
    "/tmp/work/sitecustomize.py": payload, "/tmp/work/parallel_budget.py": payload, "/tmp/work/numpy.py": payload,
    "/tmp/sitecustomize.py": payload,
}
def plant():
    for path, text in plants.items():
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as fh:
                fh.write(text)
        except OSError:
            pass
plant()
marked = []
for top in ("/", "/tmp", "/tmp/work", "/tmp/ipc", home, "/dev", "/dev/shm", "/var/tmp", "/run", "/home", "/root", "/opt"):
    try:
        with open(os.path.join(top, ".pb-poison"), "w") as fh:
            fh.write("x")
        marked.append(top)
    except OSError:
        pass
# folders that resist clean-up: read-only around the startup files, chmod 000 with content
# only the folders holding the files: IPython ignores an IPYTHONDIR it cannot write to
for d in (home + "/.ipython/profile_default/startup", site):
    os.chmod(d, 0o555)
os.makedirs("/tmp/locked/deep", exist_ok=True)
open("/tmp/locked/deep/.pb-poison", "w").write("x")
os.chmod("/tmp/locked/deep", 0)
os.chmod("/tmp/locked", 0)
os.makedirs("/tmp/work/ro", exist_ok=True)
open("/tmp/work/ro/.pb-poison", "w").write("x")
os.chmod("/tmp/work/ro", 0o500)
# Unix sockets: a file one and an abstract one, kept by a daemon
# SysV IPC and POSIX shared memory
libc = ctypes.CDLL(None, use_errno=True)
ipc = [libc.shmget(0x5EED, 2**20, 0o1666), libc.semget(0x5EED, 1, 0o1666), libc.msgget(0x5EED, 0o1666)]
open("/dev/shm/.pb-poison", "wb").write(b"x" * 1024)
# a double-forked, setsid daemon that re-plants everything and holds the sockets
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        s1 = socket.socket(socket.AF_UNIX); s1.bind("/tmp/.pb-poison.sock"); s1.listen()
        s2 = socket.socket(socket.AF_UNIX); s2.bind("\0pb-poison"); s2.listen()
        for _ in range(600):
            plant()
            time.sleep(0.05)
        os._exit(0)
    os._exit(0)
time.sleep(0.3)
print(json.dumps({"uid": os.getuid(), "marked": marked, "ipc": [i >= 0 for i in ipc]}))
'''


CLASSMATE = r'''
import builtins, glob, json, os, socket, sys
found = []
for top in ("/", "/tmp", "/tmp/work", "/tmp/ipc", os.environ["HOME"], "/dev", "/dev/shm", "/var/tmp", "/run", "/home", "/root", "/opt"):
    if os.path.exists(os.path.join(top, ".pb-poison")):
        found.append(top)
scratch = os.stat("/tmp").st_dev
for root, dirs, files in os.walk("/tmp"):
    # read-only binds under /tmp (a checkout or venv that lives there, as a CI clone does) are not the scratch
    dirs[:] = [d for d in dirs if os.lstat(os.path.join(root, d)).st_dev == scratch]
    found += [os.path.join(root, f) for f in files if f.startswith(".pb-poison") or "evil" in f or "customize" in f]
found += [p for p in os.listdir("/dev/shm")]
found += ["pid " + p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid())
          and open("/proc/%s/status" % p).read().find("PPid:\t%d\n" % os.getpid()) < 0]
rows = [open("/proc/sysvipc/" + k).read().splitlines()[1:] for k in ("shm", "sem", "msg")]
found += ["sysv"] * sum(map(len, rows))
try:
    s = socket.socket(socket.AF_UNIX); s.connect("\0pb-poison"); found.append("abstract socket")
except OSError:
    pass
poisoned = bool(getattr(builtins, "POISONED", False)) or "POISONED" in globals() or "sitecustomize" in sys.modules and \
    "POISONED" in open(sys.modules["sitecustomize"].__file__ or "/dev/null").read()
print(json.dumps({"uid": os.getuid(), "found": found, "poisoned": poisoned}))
'''


def _run(cells, timeout=30):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, kernel_name="python3", timeout=timeout, allow_errors=True, shutdown_kernel="immediate",
                   kernel_manager_class=kernel_manager_class(LIMITS)).execute()
    return ["".join(o.get("text", "") or o.get("evalue", "") for o in c.outputs) for c in nb.cells]


def _last_json(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("{")]
    assert lines, text
    return json.loads(lines[-1])


def test_the_poisoner_really_leaves_its_residue():
    """Control: the poisoner's residue exists in its own kernel (so the classmates' checks below can fail)."""
    forkclient.new_student()
    out = _run(["import json\n" + POISON, CLASSMATE])
    planted, seen = _last_json(out[0]), _last_json(out[1])
    assert "/tmp" in planted["marked"] and all(planted["ipc"]), planted
    assert "/tmp" in seen["found"] and "abstract socket" in seen["found"] and "sysv" in seen["found"], seen
    forkclient.new_student()


@pytest.mark.parametrize("new_student", [True, False], ids=["next-student", "same-student-next-kernel"])
def test_classmates_after_a_poisoner_see_and_run_nothing_of_it(new_student):
    """After the poisoner: does the next kernel (a classmate on the same worker: new sandbox; or the same
    student's next kernel: the cleared sandbox, or a new one if clearing was blocked) find any residue, run
    any planted startup file, or share the poisoner's uid?"""
    forkclient.new_student()
    poisoner = _last_json(_run(["import json\n" + POISON])[0])
    for _ in range(2):
        if new_student:
            forkclient.new_student()
        seen = _last_json(_run([CLASSMATE])[0])
        assert seen["found"] == [] and not seen["poisoned"], seen
        if new_student and os.geteuid() == 0:
            assert seen["uid"] != poisoner["uid"]
    forkclient.new_student()


def test_kernels_and_function_hosts_never_share_a_uid():
    """Each sandbox a worker starts (kernels, function hosts, every student's) has a uid of its own."""
    if os.geteuid() != 0:
        pytest.skip("uids are switched only when the grader runs as root")
    forkclient.new_student()
    kernels = forkclient.server(LIMITS)
    functions = forkclient.server(LIMITS, role="functions")
    forkclient.new_student()
    later = forkclient.server(LIMITS)
    uids = [kernels.uid, functions.uid, later.uid]
    forkclient.new_student()
    assert len(set(uids)) == 3, uids


def test_a_sandbox_that_cannot_be_cleared_is_replaced_by_a_fresh_one(monkeypatch):
    """A fork server that answers a launch with ``{"dirty": [...]}`` (its clear-up was blocked) is dropped, and the
    launch goes to a new server in a fresh sandbox; only a failure there reaches the caller (infrastructure)."""
    started = []

    class Fake:
        def __init__(self, limits=None):
            self.owner, self.threads, self.dirty = os.getpid(), 1, not started
            self.process = type("P", (), {"poll": staticmethod(lambda: None), "kill": staticmethod(lambda: None)})()
            started.append(self)

        def launch(self, cmd, env, cwd, **kw):
            if self.dirty:
                raise forkclient.ForkServerError("sandbox not clean after clear-up: ['/tmp/locked']")
            return "kernel"

        def close(self):
            pass

    monkeypatch.setattr(forkclient, "ForkServer", Fake)
    monkeypatch.setattr(forkclient, "_servers", {})
    monkeypatch.setattr(forkclient, "_failed", {})
    assert forkclient.launch(None, "test", ["python"], {}) == "kernel" and len(started) == 2
    monkeypatch.setattr(Fake, "launch", lambda self, *a, **k: (_ for _ in ()).throw(forkclient.ForkServerError("x")))
    forkclient._servers.clear()
    with pytest.raises(forkclient.ForkServerError):
        forkclient.launch(None, "test", ["python"], {})
    assert len(started) == 4  # the used one, then one fresh sandbox: never more than one retry
    forkclient._servers.clear()
