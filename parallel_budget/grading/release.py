"""Release: ``solutions/<assignment>`` -> ``exercises/<assignment>`` with nbgrader, and a staleness check.

The release is generated with a throw-away gradebook, so releasing never
touches the course gradebook.  :func:`stale_notebooks` generates into a
temporary folder and compares notebook by notebook with the committed
``exercises/``.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from .course import Course, load_config


def generate(course: Course, assignment: str, dest: Path) -> Path:
    """Run nbgrader's generate_assignment for ``assignment`` into ``dest/<assignment>``."""
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    with tempfile.TemporaryDirectory(prefix="pb-release-") as tmp:
        cfg = load_config(course)
        cfg.CourseDirectory.db_url = "sqlite:///" + str(Path(tmp) / "gradebook.db")
        out = Path(tmp) / "release"
        cfg.CourseDirectory.release_directory = str(out)
        coursedir = CourseDirectory(config=cfg)
        coursedir.assignment_id = assignment
        app = GenerateAssignment(coursedir=coursedir, config=cfg)
        app.force = True
        app.start()
        target = dest / assignment
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(out / assignment, target)
    return target


def _canonical(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return json.dumps(nb, sort_keys=True, ensure_ascii=False)


def stale_notebooks(course: Course, assignment: str) -> list[str]:
    """Names of released notebooks that differ from a fresh generation (missing or extra ones too)."""
    with tempfile.TemporaryDirectory(prefix="pb-check-") as tmp:
        fresh = generate(course, assignment, Path(tmp))
        committed = course.release / assignment
        names = {p.name for p in fresh.glob("*.ipynb")} | {p.name for p in committed.glob("*.ipynb")}
        stale = []
        for name in sorted(names):
            a, b = fresh / name, committed / name
            if not (a.exists() and b.exists()) or _canonical(a) != _canonical(b):
                stale.append(name)
        return stale
