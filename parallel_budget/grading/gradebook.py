"""The course gradebook: the base for a run, CSV export.

nbgrader's gradebook is one SQLite file and not safe for concurrent writers, so
every student is graded against a copy (a *shard*, :mod:`.shard`) made from the
*template* built here, and the finished shards are merged into the live file
by :mod:`.merge`.  The course's own tables ``pb_submission`` (digest of what
was graded), ``pb_integrity`` (findings) and ``pb_run`` (merges that
committed) live in the same file.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

from .course import Course, load_config, quiet_app_logs
from .merge import PB_TABLES, definitions_digest


def connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), timeout=30)
    for stmt in PB_TABLES:
        con.execute(stmt)
    return con


def snapshot(src: Path, dest: Path) -> None:
    """A consistent copy of a gradebook that formgrader may be writing (SQLite's backup API)."""
    a, b = sqlite3.connect(str(src), timeout=60), sqlite3.connect(str(dest))
    try:
        a.backup(b)
    finally:
        b.close()
        a.close()


def graded_digests(course: Course, assignment: str) -> dict:
    if not course.gradebook.exists():
        return {}
    con = sqlite3.connect(str(course.gradebook))
    try:
        return dict(con.execute("SELECT student_id, digest FROM pb_submission WHERE assignment = ?", (assignment,)))
    except sqlite3.OperationalError:
        return {}
    finally:
        con.close()


def prepare_base(course: Course, assignment: str) -> tuple[str, Path]:
    """Key and folder of the base gradebook (course gradebook + assignment) and its template."""
    source_digest = course.source_digest(assignment)
    defs = definitions_digest(course.gradebook)  # marks saved in formgrader do not change the base
    key = hashlib.sha256(f"{defs}:{source_digest}:{assignment}".encode()).hexdigest()[:16]
    folder = course.work / "base" / key
    if (folder / "template.db").exists():
        return key, folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    base = folder / "base.db"
    if course.gradebook.exists():
        snapshot(course.gradebook, base)
    from nbgrader.converters import GenerateAssignment
    from nbgrader.coursedir import CourseDirectory

    cfg = load_config(course)
    cfg.CourseDirectory.db_url = "sqlite:///" + str(base)
    cfg.CourseDirectory.release_directory = str((folder / "release").relative_to(course.root))
    coursedir = CourseDirectory(config=cfg)
    coursedir.assignment_id = assignment
    app = GenerateAssignment(coursedir=coursedir, config=cfg)
    app.force = True
    quiet_app_logs()
    app.start()
    con = connect(base)
    con.commit()
    con.close()
    template = folder / "template.tmp"
    shutil.copy(base, template)
    con = connect(template)
    for table in ("grade", "comment", "submitted_notebook", "submitted_assignment", "student", "pb_integrity",
                  "pb_submission", "pb_run"):
        con.execute(f"DELETE FROM {table}")
    con.commit()
    con.execute("VACUUM")
    con.close()
    os.replace(template, folder / "template.db")
    return key, folder


def release_cells(base: Path, assignment: str) -> dict:
    """{notebook: {grade_id: (source, is_test)}} of the release generated with the base gradebook."""
    out: dict = {}
    for path in sorted((base / "release" / assignment).glob("*.ipynb")):
        cells = {}
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade_id"):
                src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                cells[meta["grade_id"]] = (src, bool(meta.get("grade")) and not meta.get("solution"))
        out[path.stem] = cells
    return out


def export(course: Course) -> None:
    """Write autograde/grades.csv (nbgrader's CSV export) and autograde/integrity.csv."""
    if not course.gradebook.exists():
        return
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    from .integrity import TRICKS

    tmp = course.grades_csv.with_suffix(".tmp")
    plugin = CsvExportPlugin(config=load_config(course))
    plugin.to = str(tmp)
    with Gradebook("sqlite:///" + str(course.gradebook)) as gb:
        plugin.export(gb)
    os.replace(tmp, course.grades_csv)
    con = connect(course.gradebook)
    rows = con.execute("SELECT student_id, assignment, notebook, cell, trick, detail FROM pb_integrity "
                       "ORDER BY student_id, assignment, notebook, cell, trick, detail").fetchall()
    con.close()
    tmp = course.integrity_csv.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["student_id", "assignment", "notebook", "cell", "trick", "what", "evidence"])
        for student, assignment, nb, cell, trick, detail in rows:
            w.writerow([student, assignment, nb, cell, trick, TRICKS.get(trick, trick), detail])
    os.replace(tmp, course.integrity_csv)
