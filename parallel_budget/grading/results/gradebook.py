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
import re
import shutil
import sqlite3
from pathlib import Path

from ..course import Course, ask_schema_head_once, load_config, quiet_app_logs
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
    ask_schema_head_once()
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


def max_scores(db: Path, assignment: str) -> dict:
    """{notebook: {grade_id: points}} of every graded cell of ``assignment`` in a gradebook."""
    con = sqlite3.connect(str(db))
    try:
        rows = con.execute("SELECT n.name, bc.name, gc.max_score FROM grade_cells gc JOIN base_cell bc ON gc.id = bc.id "
                           "JOIN notebook n ON bc.notebook_id = n.id JOIN assignment a ON n.assignment_id = a.id "
                           "WHERE a.name = ?", (assignment,)).fetchall()
    except sqlite3.OperationalError:
        rows = []
    finally:
        con.close()
    out: dict = {}
    for nb, gid, points in rows:
        out.setdefault(nb, {})[gid] = float(points)
    return out


# A spreadsheet (Excel, LibreOffice, Google Sheets) reads a CSV cell that starts with one of these as a
# formula (OWASP "CSV injection"); the full-width forms too, which some IMEs turn into the ASCII ones.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def spreadsheet_safe(value) -> str:
    """A CSV cell that a spreadsheet shows as the text it is.

    A cell that starts like a formula gets a leading apostrophe (``'=HYPERLINK(...)``), which spreadsheets
    hide and read as "this is text".  A plain number (``-2.5``, ``+1e3``) is left alone, so a negative score
    stays a number: it cannot be a formula.  Everything the grader writes to a CSV passes through here.
    """
    text = "" if value is None else str(value)
    if text.startswith(FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def _write_csv(path: Path, rows) -> None:
    """Write ``rows`` to ``path`` atomically, every cell through :func:`spreadsheet_safe`."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        for row in rows:
            w.writerow([spreadsheet_safe(cell) for cell in row])
    os.replace(tmp, path)


def export(course: Course) -> None:
    """Write autograde/grades.csv (nbgrader's CSV export) and autograde/integrity.csv, safe for spreadsheets.

    integrity.csv also holds what collection kept aside or refused (:func:`.collect.intake_rows`).
    """
    from ..intake.collect import intake_rows

    header = ["student_id", "assignment", "notebook", "cell", "trick", "what", "evidence"]
    if not course.gradebook.exists():
        if intake_rows(course):
            _write_csv(course.integrity_csv, [header] + intake_rows(course))
        return
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    from ..scoring.integrity import TRICKS

    raw = course.grades_csv.with_suffix(".raw")
    plugin = CsvExportPlugin(config=load_config(course))
    plugin.to = str(raw)
    with Gradebook("sqlite:///" + str(course.gradebook)) as gb:
        plugin.export(gb)
    with open(raw, newline="", encoding="utf-8") as fh:
        _write_csv(course.grades_csv, list(csv.reader(fh)))
    raw.unlink()
    con = connect(course.gradebook)
    rows = con.execute("SELECT student_id, assignment, notebook, cell, trick, detail FROM pb_integrity "
                       "ORDER BY student_id, assignment, notebook, cell, trick, detail").fetchall()
    con.close()
    _write_csv(course.integrity_csv, [header] + [[student, assignment, nb, cell, trick, TRICKS.get(trick, trick), detail]
                                                 for student, assignment, nb, cell, trick, detail in rows]
               + intake_rows(course))
