"""What runs on a Dask worker (issue 28): the readiness check and one student's shard.

A worker grades in its own course checkout (``$PB_COURSE_ROOT``, else the
client's course root, which is the same folder on a ``LocalCluster``), in a
scratch folder ``autograde/.work/cluster/<host>-<pid>-<id>/`` made for each
student and removed afterwards.  The submission arrives as bytes, the
template gradebook as bytes shared by the run; :func:`.shard.grade_student`
runs exactly as in the local pool (same sandbox, limits, and this process's
warm fork server), and the graded shard goes back as bytes.

:func:`check` answers, for :meth:`distributed.Client.run` before any student
is graded, whether this worker can grade: the course package and nbgrader
import, the course checkout is there and is the client's version (same
source digest, which covers the grading code), and a bubblewrap sandbox works.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import uuid
from pathlib import Path

from ..sandbox import bwrap
from ..course import Course, CourseError
from .shipping import pack, unpack

ROOT_ENV = "PB_COURSE_ROOT"
SCRATCH = Path("autograde") / ".work" / "cluster"
NOT_SHIPPED = ("autograde/submitted",)  # the client has the submission already
_LOCK = threading.Lock()  # one shard at a time per process: the shard code keeps per-process state
_CHECK_LOCK = threading.Lock()
_checked: dict = {}  # (root, assignment, source, sandbox) -> problem or None, per process


class WorkerUnfit(RuntimeError):
    """This worker cannot grade (a late-joining worker that the start-up check never saw)."""


def course_root(default: str) -> Path:
    return Path(os.environ.get(ROOT_ENV) or default)


def _setup(course: Course) -> None:
    """Once per process: the venv's tools first on PATH, kernel chatter to a log file, not the terminal."""
    import warnings

    here = os.path.dirname(sys.executable)  # nbgrader runs alembic: a worker started as .venv/bin/dask finds it
    os.environ["PATH"] = os.pathsep.join(dict.fromkeys([here, *os.environ.get("PATH", "").split(os.pathsep)]))
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    warnings.filterwarnings("ignore")
    logs = course.work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    fd = os.open(logs / f"worker-{os.getpid()}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)


def _prune_scratch(course: Course) -> None:
    """Scratch folders this host's dead worker processes left (a worker killed mid-shard)."""
    host = socket.gethostname()
    for folder in (course.root / SCRATCH).glob(f"{host}-*-*"):
        pid = folder.name[len(host) + 1:].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def _problem(default_root: str, assignment: str, source: str, sandboxed: bool) -> str | None:
    try:
        import nbformat  # noqa: F401
        import nbgrader  # noqa: F401
    except ImportError as exc:
        return f"缺少评分所需的包（{exc}）；请在课程的虚拟环境里启动 dask worker。"
    root = course_root(default_root)
    try:
        course = Course(root)
        mine = course.source_digest(assignment)
    except (CourseError, OSError) as exc:
        return f"在 {root} 找不到可用的课程仓库（{exc}）；请检出课程仓库，并用环境变量 {ROOT_ENV} 指向它。"
    if mine != source:
        return (f"{root} 的课程仓库或评分代码与发起评分的机器不是同一版本（作业 {assignment} 的摘要 {mine}，"
                f"应为 {source}）；请检出同一版本。")
    if sandboxed and (why := bwrap.unavailable()):
        return "无法建立评分沙箱：" + why
    _prune_scratch(course)
    _setup(course)
    from .preflight import PreflightError, check as preflight

    try:  # the same check the client runs without a cluster: a kernel started the shards' way grades one cell
        preflight(course, None, sandboxed)
    except PreflightError as exc:
        return str(exc)
    return None


def check(default_root: str, assignment: str, source: str, sandboxed: bool = True) -> str | None:
    """None when this worker can grade ``assignment`` of the client's course version; else why not, in Chinese."""
    key = (str(course_root(default_root)), assignment, source, sandboxed)
    with _CHECK_LOCK:
        if key not in _checked:
            _checked[key] = _problem(default_root, assignment, source, sandboxed)
        return _checked[key]


def grade_shipped(task: dict, submission: bytes, template: bytes, source: str) -> dict:
    """Grade one student from shipped bytes; the result dict of :func:`.shard.grade_student` plus ``shard`` (bytes)."""
    from .shard import grade_student

    problem = check(task["root"], task["assignment"], source, task.get("sandbox", True))
    if problem:
        raise WorkerUnfit(f"{socket.gethostname()}：{problem}")
    root = course_root(task["root"])
    scratch = root / SCRATCH / f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    with _LOCK:
        try:
            scratch.mkdir(parents=True)
            unpack(submission, scratch / "submission")
            (scratch / "template.db").write_bytes(template)
            local = dict(task, root=str(root), shard=str(scratch / "shard"), template=str(scratch / "template.db"),
                         submission=str(scratch / "submission"))
            result = grade_student(local)
            result["shard"] = pack(scratch / "shard", NOT_SHIPPED) if result["ok"] else b""
            result["worker"] = f"{socket.gethostname()}:{os.getpid()}"
            return result
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            sys.stderr.flush()
