"""Where the course lives, and nbgrader configured for it or for one shard.

The repository root holds ``solutions/`` (source), ``exercises/`` (release)
and ``autograde/`` (``nbgrader_config.py``, submissions, gradebook).  A
*shard* is a throw-away nbgrader course in ``autograde/.work/`` that grades
one student against its own copy of the gradebook (:mod:`.shard`); :mod:`.gradebook`
merges shards back into the course gradebook.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

CONFIG = Path("autograde") / "nbgrader_config.py"


class CourseError(RuntimeError):
    """A problem with the course layout or the input, explained in Chinese."""


def find_root(start=None) -> Path:
    """The repository root: the first folder upwards holding ``autograde/nbgrader_config.py``."""
    here = Path(start or os.getcwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG).is_file():
            return folder
    package_root = Path(__file__).resolve().parents[2]
    if (package_root / CONFIG).is_file():
        return package_root
    raise CourseError(f"在 {here} 及其上级目录里找不到 {CONFIG}；请在课程仓库里运行，或用 --root 指定仓库根目录。")


class Course:
    """Paths of one course checkout."""

    def __init__(self, root=None):
        self.root = find_root(root) if root is None else Path(root).resolve()
        if not (self.root / CONFIG).is_file():
            raise CourseError(f"{self.root} 不是课程仓库：缺少 {CONFIG}。")
        self.autograde = self.root / "autograde"
        self.config_file = self.root / CONFIG
        self.source = self.root / "solutions"
        self.release = self.root / "exercises"
        self.submitted = self.autograde / "submitted"
        self.autograded = self.autograde / "autograded"
        self.feedback = self.autograde / "feedback"
        self.gradebook = self.autograde / "gradebook.db"
        self.grades_csv = self.autograde / "grades.csv"
        self.integrity_csv = self.autograde / "integrity.csv"
        self.work = self.autograde / ".work"

    def assignments(self) -> list[str]:
        return sorted(p.name for p in self.source.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))

    def notebooks(self, assignment: str) -> list[str]:
        folder = self.source / assignment
        if not folder.is_dir():
            raise CourseError(f"没有作业 {assignment!r}：{folder} 不存在。可用：{'、'.join(self.assignments())}")
        return sorted(p.stem for p in folder.glob("*.ipynb"))

    def source_digest(self, assignment: str) -> str:
        """Changes whenever the source notebooks or the grading code change."""
        h = hashlib.sha256()
        for path in sorted((self.source / assignment).rglob("*")) + [self.config_file]:
            if path.is_file():
                h.update(path.name.encode())
                h.update(path.read_bytes())
        for path in sorted(Path(__file__).parent.glob("*.py")):
            h.update(path.read_bytes())
        return h.hexdigest()[:16]


def load_config(course: Course, **overrides):
    """The course's traitlets Config, with ``CourseDirectory`` overrides (root, db_url, ...)."""
    from traitlets.config.loader import PyFileConfigLoader

    loader = PyFileConfigLoader(course.config_file.name, path=str(course.config_file.parent))
    cfg = loader.load_config()
    for key, value in overrides.items():
        section, _, name = key.rpartition("__")
        cfg[section or "CourseDirectory"][name] = value
    return cfg


def shard_config(course: Course, shard: Path, timeout: int | None = None, sandbox: bool = True):
    """Config of a one-student shard course rooted at ``shard`` (kernels sandboxed unless ``sandbox=False``)."""
    cfg = load_config(course)
    cfg.ResilientExecute.sandbox = sandbox
    cfg.CourseDirectory.root = str(shard)
    cfg.CourseDirectory.db_url = "sqlite:///" + str(shard / "gradebook.db")
    if timeout is not None:
        cfg.Execute.timeout = timeout
    return cfg


def quiet_app_logs() -> None:
    """nbgrader's converters log every step at INFO; the grade command prints its own summary."""
    for name in ("traitlets", "nbgrader", "GenerateAssignment", "Autograde", "GenerateFeedback"):
        logging.getLogger(name).setLevel(logging.WARNING)


def ask_schema_head_once() -> None:
    """nbgrader asks the ``alembic`` command for its schema's head revision every time it creates a
    gradebook (a new Python process, 1-3 s of CPU); the answer is a constant of the installed nbgrader,
    so this process asks once and remembers it (the first gradebook still needs ``alembic`` on PATH)."""
    import functools

    from nbgrader import api

    if not hasattr(api.get_alembic_version, "cache_info"):
        api.get_alembic_version = functools.lru_cache(maxsize=1)(api.get_alembic_version)
