"""A bubblewrap sandbox for everything a submission runs: its kernels and its functions.

Every grading kernel runs inside ``bwrap`` (Debian's ``bubblewrap``) with

* no network: its own network namespace (loopback only, nothing listens);
  the grader reaches the kernel over jupyter_client's ``ipc`` transport, Unix
  sockets in the sandbox's own ``/tmp``, each pinned by a descriptor opened
  through ``/proc/<pid>/root`` before student code runs (:class:`PinnedSockets`:
  a symlink the kernel plants later is never followed);
* a read-only view of the system (``/usr``, ``/etc``, the Python installation,
  the virtualenv and the ``parallel_budget`` package, nothing else: no course
  repository, no ``solutions/``, no gradebook, no other student, no home);
* one writable place, a size-capped tmpfs ``/tmp`` (the kernel's working
  folder, home and sockets), and a capped ``/dev/shm``;
* its own PID, IPC and UTS namespaces: it sees and can signal only its own
  processes, and its first process (the fork server) is PID 1, which the
  kernels cannot kill; before each kernel the fork server resets permissions,
  empties ``/tmp`` and ``/dev/shm``, removes every System V IPC object
  (:func:`clear_ipc`) and checks that nothing is left (:func:`leftovers`;
  if anything is, the grader starts a new sandbox); and every student gets
  new sandboxes anyway (:func:`.forkclient.new_student`), so nothing of one
  student reaches the next;
* an environment from an allow-list (:func:`clean_env`), never the grader's;
* limits (:class:`Limits`, set as hard rlimits before any student code runs):
  address space (2 GB default), CPU seconds, processes, open files, the size
  of one written file; the kernel's wall time is enforced by the fork server
  and the cell timeout;
* no privileges: run by root, bwrap keeps only ``CAP_SETUID``/``CAP_SETGID``
  for the payload's first line, which switches to an unprivileged uid of its
  own (:func:`sandbox_uid`: per worker and sandbox, so kernels, function hosts
  and each student's sandboxes never share a uid or its process count) and so drops every capability (its
  ``oom_score_adj`` is raised to 1000 first); run by an ordinary user, bwrap
  uses an unprivileged user namespace.

:func:`unavailable` says, in Chinese, why no sandbox can be had here and how
to enable one; the grade command then refuses unless ``--no-sandbox``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import resource
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

SCRATCH = "/tmp"
IPC = "/tmp/ipc/kernel"  # jupyter_client ipc "ip": sockets are <IPC>-<port>
WORK = "/tmp/work"  # the kernel's working folder
HOME = "/tmp/home"
ENV = {  # part of the environment of the fork server and every kernel (see clean_env)
    "HOME": HOME, "TMPDIR": SCRATCH, "IPYTHONDIR": HOME + "/.ipython", "MPLCONFIGDIR": HOME + "/.matplotlib",
    "JUPYTER_RUNTIME_DIR": HOME + "/runtime", "JUPYTER_DATA_DIR": HOME + "/data", "JUPYTER_CONFIG_DIR": HOME + "/config",
    "XDG_CACHE_HOME": HOME + "/.cache", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
}
# Variables a sandboxed process may take from the grader's environment: where Python finds the course package,
# and nbgrader's NBGRADER_EXECUTION ("autograde"), which tells the checks that an unanswered part (`...`) fails
# here (answers/checks.py: without it they only show a line, as in a student's own notebook).
# Everything else (cloud keys, JUPYTERHUB_API_TOKEN, the instructor's JUPYTERHUB_USER...) stays outside.
PASS_THROUGH = ("PYTHONPATH", "NBGRADER_EXECUTION")
OOM_SCORE_ADJ = 1000  # under memory pressure the OOM killer takes sandboxed processes first
UID_BASE = 1_000_000
HOW_TO_ENABLE = (
    "请安装 bubblewrap（Debian/Ubuntu：sudo apt-get install bubblewrap；或运行 scripts/setup.sh），"
    "并允许非特权用户命名空间（sudo sysctl -w kernel.unprivileged_userns_clone=1 或 user.max_user_namespaces=10000）；"
    "容器里需要允许 unshare/clone 命名空间。实在不能隔离时可以加 --no-sandbox（不隔离地评分，会在摘要和报告里醒目标出）。"
)


@dataclass(frozen=True)
class Limits:
    """Per-sandbox limits (hard rlimits and tmpfs sizes); defaults suit the course's notebooks."""

    memory_bytes: int = 2 * 10**9  # address space of each process
    cpu_seconds: int = 300  # CPU time of each process
    processes: int = 64  # processes and threads of the sandbox's uid
    open_files: int = 512
    file_bytes: int = 64 * 10**6  # the largest file a process may write
    scratch_bytes: int = 256 * 10**6  # the writable /tmp
    wall_seconds: int = 900  # lifetime of one kernel (the fork server kills it after that)

    @classmethod
    def from_config(cls, values: dict | None) -> "Limits":
        values = dict(values or {})
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"sandbox_limits: unknown keys {sorted(unknown)}; known: {sorted(cls.__dataclass_fields__)}")
        return cls(**{k: int(v) for k, v in values.items()})

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def bwrap() -> str | None:
    """Path of the bwrap binary: on PATH, or next to this interpreter (a pip-installed one)."""
    return shutil.which("bwrap") or shutil.which("bwrap", path=os.path.dirname(sys.executable))


def _package_dir() -> Path:
    return Path(__file__).resolve().parents[2]


def _read_only_paths() -> list[str]:
    """What a sandboxed Python needs to see: the interpreter, the venv, the package, the system."""
    paths = ["/usr", "/etc"]
    for p in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable)), str(_package_dir())):
        p = os.path.realpath(p)
        if not any(p == q or p.startswith(q + "/") for q in paths):
            paths.append(p)
    return paths


def scratch_mounts() -> set[str]:
    """Names in the scratch folder that hold read-only binds (a venv under /tmp): never emptied."""
    return {Path(p).relative_to(SCRATCH).parts[0] for p in _read_only_paths() if p.startswith(SCRATCH + "/")}


def _parents(path: str, made: set) -> list[str]:
    """``--dir`` arguments (mode 0755) for every missing ancestor, so that no parent's mode hides the path."""
    args = []
    parts = Path(path).parts
    for i in range(2, len(parts)):
        parent = str(Path(*parts[:i]))
        if parent not in made:
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args


def command(argv: list, limits: Limits, info_fd: int | None = None, *, privileged: bool | None = None,
            read_only: list | None = None) -> list:
    """The ``bwrap ...`` command line that runs ``argv`` (a sandbox payload) in a fresh sandbox.

    ``privileged`` (default: running as root) picks root's way (the payload drops to its own uid)
    or an ordinary user's (an unprivileged user namespace); ``read_only`` replaces the mounted paths.
    """
    exe = bwrap()
    if exe is None:
        raise FileNotFoundError("bwrap")
    args = [exe, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--as-pid-1", "--new-session", "--hostname", "sandbox"]
    if os.geteuid() == 0 if privileged is None else privileged:  # the payload switches uid first (enter())
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--disable-userns"]
    # The scratch tmpfs first: a venv or a checkout that lives under /tmp (a CI clone) is then
    # bound read-only inside it instead of being hidden by it.
    args += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(limits.scratch_bytes), "--tmpfs", SCRATCH,
             "--perms", "1777", "--size", str(16 * 2**20), "--tmpfs", "/dev/shm", "--chdir", SCRATCH]
    made: set = {SCRATCH}
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = "/" + name
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for path in _read_only_paths() if read_only is None else read_only:
        args += _parents(path, made) + ["--ro-bind", path, path]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    return args + ["--", *argv]


def clean_env(given: dict, keep=()) -> dict:
    """The whole environment of a sandboxed process: an allow-list, never the grader's environment.

    ``PATH`` is this interpreter's folder and the system's, ``LANG`` is C.UTF-8, ``HOME`` and the
    Jupyter/IPython/matplotlib folders are in the sandbox's ``/tmp`` (:data:`ENV`); from ``given`` only
    :data:`PASS_THROUGH` and the names in ``keep`` (the kernel's own ``JPY_*`` variables, BLAS threads).
    """
    env = {"PATH": os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])),
           **ENV}
    for name in (*PASS_THROUGH, *keep):
        if name in given:
            env[name] = given[name]
    return env


UIDS_PER_PROCESS = 64  # sandboxes one grading process starts before a uid comes round again


def sandbox_uid(owner_pid: int | None = None, serial: int = 0) -> int:
    """The uid of one sandbox: its own per (grading process, sandbox serial), never another sandbox's.

    Kernels and function hosts, and each student's sandboxes, run under different uids, so a per-uid
    limit (``RLIMIT_NPROC`` counts every process of the uid on the machine) that one exhausts is not
    the other's.  A uid comes round again only after :data:`UIDS_PER_PROCESS` sandboxes of the same
    process, long after the sandbox that had it (and, with its PID namespace, all it ran) was gone.
    """
    return UID_BASE + ((owner_pid or os.getpid()) % 2**22) * UIDS_PER_PROCESS + serial % UIDS_PER_PROCESS


def _oom_score_adj() -> str | None:
    """Raise this process's ``oom_score_adj`` to :data:`OOM_SCORE_ADJ`; None, or why it could not be set."""
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(OOM_SCORE_ADJ))
        with open("/proc/self/oom_score_adj") as fh:
            value = int(fh.read())
    except (OSError, ValueError) as exc:
        return f"oom_score_adj: {exc}"
    return None if value == OOM_SCORE_ADJ else f"oom_score_adj is {value}, not {OOM_SCORE_ADJ}"


def enter(limits: Limits, uid: int | None) -> list[str]:
    """First lines of every sandbox payload: drop privileges, set hard limits, become unkillable by kernels' tricks.

    Returns what could not be set up (the fork server reports it to the grader, which logs it).
    ``oom_score_adj`` is written before the uid switch: afterwards the process is no longer dumpable,
    its ``/proc/self`` files belong to root and the write fails.
    """
    problems = [p for p in [_oom_score_adj()] if p]
    if os.geteuid() == 0:
        if uid is None:
            raise SystemExit("sandbox: running as root without a uid to switch to")
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to another uid: every capability is gone
    for what, value in ((resource.RLIMIT_AS, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_seconds),
                        (resource.RLIMIT_NPROC, limits.processes), (resource.RLIMIT_NOFILE, limits.open_files),
                        (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0)):
        resource.setrlimit(what, (value, value))
    for path in (HOME, WORK, os.path.dirname(IPC)):
        os.makedirs(path, exist_ok=True)
    return problems


SHM = "/dev/shm"
_IPC_RMID = 0


def clear_ipc() -> int:
    """Remove every System V shared-memory segment, semaphore set and message queue of this IPC namespace.

    Run by the fork server (PID 1) after it killed the sandbox's other processes: the sandbox's IPC
    namespace lives as long as the fork server, so without this one kernel's segments (kept alive past
    its death, outside its address-space limit) are there for the next student's kernel.  Returns how
    many objects were removed.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    remove = {"shm": lambda i: libc.shmctl(i, _IPC_RMID, None), "sem": lambda i: libc.semctl(i, 0, _IPC_RMID),
              "msg": lambda i: libc.msgctl(i, _IPC_RMID, None)}
    removed = 0
    for kind, rm in remove.items():
        try:
            with open(f"/proc/sysvipc/{kind}") as fh:
                rows = fh.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 1 and fields[1].isdigit() and rm(int(fields[1])) == 0:
                removed += 1
    return removed


def _open_up(path: str) -> None:
    """Give every folder under ``path`` (never through a symlink) mode 0700, so nothing in it resists removal.

    A kernel runs under the same uid as the fork server that empties its scratch, so it can make a folder
    read-only or ``chmod 000`` (``rmtree`` then fails inside it); as the owner the fork server can undo that.
    """
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700, follow_symlinks=False)
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_dir(follow_symlinks=False):
                _open_up(entry.path)


def empty_folder(folder: str, keep=()) -> None:
    """Remove everything in ``folder`` (a sandbox tmpfs) except the names in ``keep``; never follows a symlink.

    Permissions are reset first (:func:`_open_up`); what still cannot be removed is left for
    :func:`leftovers` to find (the fork server then refuses to launch and the grader starts a new sandbox).
    """
    for entry in os.scandir(folder):
        if entry.name in keep:
            continue
        if entry.is_dir(follow_symlinks=False):
            _open_up(entry.path)
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def leftovers(keep=()) -> list[str]:
    """What a cleared sandbox still holds: names in ``/tmp`` (but ``keep``) or ``/dev/shm``, processes, SysV IPC.

    Run by the fork server (PID 1) after clearing: anything listed means the clear-up was blocked, and the
    sandbox is not used for another kernel.
    """
    found = [f"{SCRATCH}/{n}" for n in os.listdir(SCRATCH) if n not in keep]
    found += [f"{SHM}/{n}" for n in os.listdir(SHM)]
    found += [f"pid {n}" for n in os.listdir("/proc") if n.isdigit() and n != str(os.getpid())]
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as fh:
            found += [f"sysv {kind}"] * len(fh.read().splitlines()[1:])
    return found


class PinnedSockets:
    """A kernel's ipc sockets as the grader reaches them: never by a name the sandbox can change.

    The grader used to connect to ``/proc/<pid>/root/tmp/ipc/kernel-<port>``; a kernel that replaced a
    socket (or ``/tmp/ipc``) by an absolute symlink made the grader's ZeroMQ (re)connect to that path
    *outside* the sandbox, since the kernel resolves absolute links from the grader's root.  Here each
    socket is opened once, ``O_PATH | O_NOFOLLOW`` component by component, right after the kernel bound
    it and before any student code ran; the grader connects through a private folder of links to those
    descriptors (``<folder>/kernel-<port>`` -> ``/proc/self/fd/<fd>``), i.e. to the socket itself.
    """

    def __init__(self, root: str, ports, alive, timeout: float = 60.0):
        import stat
        import tempfile
        import time

        self.fds: list[int] = []
        self.folder = tempfile.mkdtemp(prefix="pb-ipc-")
        nofollow = os.O_PATH | os.O_NOFOLLOW
        dirs = [os.open(root, os.O_PATH | os.O_DIRECTORY)]
        try:
            for part in Path(IPC).parent.relative_to("/").parts:
                dirs.append(os.open(part, nofollow | os.O_DIRECTORY, dir_fd=dirs[-1]))
            deadline = time.monotonic() + timeout
            for port in ports:
                name = f"{os.path.basename(IPC)}-{port}"
                while True:
                    try:
                        fd = os.open(name, nofollow, dir_fd=dirs[-1])
                        break
                    except FileNotFoundError:
                        if not alive() or time.monotonic() > deadline:
                            raise RuntimeError(f"Kernel died before binding its socket {name}") from None
                        time.sleep(0.005)
                self.fds.append(fd)
                if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                    raise RuntimeError(f"Kernel socket {name} is not a socket")
                os.symlink(f"/proc/self/fd/{fd}", os.path.join(self.folder, name))
        except BaseException:
            self.close()
            raise
        finally:
            for fd in dirs:
                os.close(fd)

    @property
    def ip(self) -> str:
        """jupyter_client's ``ip`` for the ipc transport (it appends ``-<port>``)."""
        return os.path.join(self.folder, os.path.basename(IPC))

    def close(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []
        shutil.rmtree(self.folder, ignore_errors=True)


def child_pid(info: bytes) -> int | None:
    """The host pid of the sandbox's PID 1, from bwrap's ``--info-fd`` output."""
    m = re.search(rb'"child-pid"\s*:\s*(\d+)', info)
    return int(m.group(1)) if m else None


@functools.cache
def unavailable() -> str | None:
    """None when a sandbox works here; else a Chinese sentence saying why and how to enable one."""
    if not sys.platform.startswith("linux"):
        return f"沙箱需要 Linux(bubblewrap)，这台机器是 {sys.platform}。" + HOW_TO_ENABLE
    if bwrap() is None:
        return "找不到 bwrap(bubblewrap)。" + HOW_TO_ENABLE
    probe = [sys.executable, "-c", "import socket\ntry:\n socket.create_connection(('127.0.0.1', 9), 0.5)\n"
             "except OSError: pass\nelse: raise SystemExit('network reachable')\nopen('/tmp/probe', 'w').write('ok')"]
    try:
        done = subprocess.run(command(probe, Limits()), capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap 无法运行（{exc}）。" + HOW_TO_ENABLE
    if done.returncode != 0:
        why = (done.stderr or b"").decode(errors="replace").strip().splitlines()[-1:] or [f"退出码 {done.returncode}"]
        return f"bwrap 无法建立沙箱（{why[0]}）。" + HOW_TO_ENABLE
    return None
