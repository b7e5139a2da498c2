"""A bubblewrap sandbox for everything a submission runs: its kernels and its functions.

Every grading kernel runs inside ``bwrap`` (Debian's ``bubblewrap``) with

* no network: its own network namespace (loopback only, nothing listens);
  the grader reaches the kernel over jupyter_client's ``ipc`` transport, Unix
  sockets in the sandbox's own ``/tmp``, through ``/proc/<pid>/root``;
* a read-only view of the system (``/usr``, ``/etc``, the Python installation,
  the virtualenv and the ``parallel_budget`` package, nothing else: no course
  repository, no ``solutions/``, no gradebook, no other student, no home);
* one writable place, a size-capped tmpfs ``/tmp`` (the kernel's working
  folder, home and sockets), and a capped ``/dev/shm``;
* its own PID, IPC and UTS namespaces: it sees and can signal only its own
  processes, and its first process (the fork server) is PID 1, which the
  kernels cannot kill;
* limits (:class:`Limits`, set as hard rlimits before any student code runs):
  address space (2 GB default), CPU seconds, processes, open files, the size
  of one written file; the kernel's wall time is enforced by the fork server
  and the cell timeout;
* no privileges: run by root, bwrap keeps only ``CAP_SETUID``/``CAP_SETGID``
  for the payload's first line, which switches to an unprivileged uid of its
  own (``1000000 + worker pid``) and so drops every capability; run by an
  ordinary user, bwrap uses an unprivileged user namespace.

:func:`unavailable` says, in Chinese, why no sandbox can be had here and how
to enable one; the grade command then refuses unless ``--no-sandbox``.
"""

from __future__ import annotations

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
ENV = {  # set for the fork server and every kernel, over the grader's environment
    "HOME": HOME, "TMPDIR": SCRATCH, "IPYTHONDIR": HOME + "/.ipython", "MPLCONFIGDIR": HOME + "/.matplotlib",
    "JUPYTER_RUNTIME_DIR": HOME + "/runtime", "JUPYTER_DATA_DIR": HOME + "/data", "JUPYTER_CONFIG_DIR": HOME + "/config",
    "XDG_CACHE_HOME": HOME + "/.cache", "PYTHONDONTWRITEBYTECODE": "1",
}
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
    return Path(__file__).resolve().parents[1]


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


def sandbox_uid(owner_pid: int | None = None) -> int:
    return UID_BASE + (owner_pid or os.getpid()) % 1_000_000


def enter(limits: Limits, uid: int | None) -> None:
    """First lines of every sandbox payload: drop privileges, set hard limits, become unkillable by kernels' tricks."""
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
    try:  # under memory pressure the kernel's OOM killer takes sandboxed processes first
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write("1000")
    except OSError:
        pass
    for path in (HOME, WORK, os.path.dirname(IPC)):
        os.makedirs(path, exist_ok=True)


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
