"""The course gradebook: the base for a run, merging one student's shard, CSV export.

nbgrader's gradebook is one SQLite file and not safe for concurrent writers, so
every student is graded against a copy (a *shard*, :mod:`.shard`) and the
finished shards are merged here, one student at a time, keeping the manual
scores and comments an instructor entered.  The course's own tables
``pb_submission`` (digest of what was graded) and ``pb_integrity`` (findings)
live in the same file.
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

PB_TABLES = (
    "CREATE TABLE IF NOT EXISTS pb_submission (student_id TEXT NOT NULL, assignment TEXT NOT NULL,"
    " digest TEXT NOT NULL, PRIMARY KEY (student_id, assignment))",
    "CREATE TABLE IF NOT EXISTS pb_integrity (student_id TEXT NOT NULL, assignment TEXT NOT NULL,"
    " notebook TEXT, cell TEXT, trick TEXT NOT NULL, detail TEXT)",
)
SUBMISSION_TABLES = ("submitted_assignment", "submitted_notebook", "grade", "comment")


def connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(str(path), timeout=30)
    for stmt in PB_TABLES:
        con.execute(stmt)
    return con


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "none"


def _columns(con, table, schema="main"):
    return [row[1] for row in con.execute(f"PRAGMA {schema}.table_info({table})")]


def _delete_submission(con, student: str, assignment_name: str) -> None:
    sub = ("SELECT sa.id FROM submitted_assignment sa JOIN assignment a ON sa.assignment_id = a.id "
           "WHERE sa.student_id = ? AND a.name = ?")
    nbs = f"SELECT id FROM submitted_notebook WHERE assignment_id IN ({sub})"
    con.execute(f"DELETE FROM grade WHERE notebook_id IN ({nbs})", (student, assignment_name))
    con.execute(f"DELETE FROM comment WHERE notebook_id IN ({nbs})", (student, assignment_name))
    con.execute(f"DELETE FROM submitted_notebook WHERE assignment_id IN ({sub})", (student, assignment_name))
    con.execute("DELETE FROM submitted_assignment WHERE id IN (" + sub + ")", (student, assignment_name))
    con.execute("DELETE FROM pb_integrity WHERE student_id = ? AND assignment = ?", (student, assignment_name))
    con.execute("DELETE FROM pb_submission WHERE student_id = ? AND assignment = ?", (student, assignment_name))


def _manual_marks(con, student, assignment_name):
    """Manual scores, extra credit and manual comments an instructor entered, keyed by (notebook, cell)."""
    q = ("SELECT n.name, {t}.cell_id, {cols} FROM {t} JOIN submitted_notebook sn ON {t}.notebook_id = sn.id "
         "JOIN notebook n ON sn.notebook_id = n.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
         "JOIN assignment a ON sa.assignment_id = a.id WHERE sa.student_id = ? AND a.name = ?")
    grades = con.execute(q.format(t="grade", cols="grade.manual_score, grade.extra_credit"), (student, assignment_name)).fetchall()
    comments = con.execute(q.format(t="comment", cols="comment.manual_comment"), (student, assignment_name)).fetchall()
    return grades, comments


def _restore_marks(con, student, assignment_name, grades, comments):
    target = ("(SELECT sn.id FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
              "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN assignment a ON sa.assignment_id = a.id "
              "WHERE sa.student_id = ? AND a.name = ? AND n.name = ?)")
    for nb, cell, manual, extra in grades:
        if manual is not None or extra is not None:
            con.execute(f"UPDATE grade SET manual_score = ?, extra_credit = ? WHERE cell_id = ? AND notebook_id = {target}",
                        (manual, extra, cell, student, assignment_name, nb))
    for nb, cell, text in comments:
        if text:
            con.execute(f"UPDATE comment SET manual_comment = ? WHERE cell_id = ? AND notebook_id = {target}",
                        (text, cell, student, assignment_name, nb))


def merge_shard(con: sqlite3.Connection, shard_db: Path, student: str, assignment_name: str) -> None:
    """Replace ``student``'s submission in ``con`` by the one graded in ``shard_db``."""
    grades, comments = _manual_marks(con, student, assignment_name)
    _delete_submission(con, student, assignment_name)
    con.execute("ATTACH DATABASE ? AS s", (str(shard_db),))
    try:
        cols = ", ".join(_columns(con, "student"))
        con.execute(f"INSERT OR IGNORE INTO student ({cols}) SELECT {cols} FROM s.student WHERE id = ?", (student,))
        sub = ("SELECT sa.id FROM s.submitted_assignment sa JOIN s.assignment a ON sa.assignment_id = a.id "
               "WHERE sa.student_id = ? AND a.name = ?")
        where = {
            "submitted_assignment": f"id IN ({sub})",
            "submitted_notebook": f"assignment_id IN ({sub})",
            "grade": f"notebook_id IN (SELECT id FROM s.submitted_notebook WHERE assignment_id IN ({sub}))",
            "comment": f"notebook_id IN (SELECT id FROM s.submitted_notebook WHERE assignment_id IN ({sub}))",
        }
        for table in SUBMISSION_TABLES:
            cols = ", ".join(_columns(con, table))
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM s.{table} WHERE {where[table]}",
                        (student, assignment_name))
        for table in ("pb_submission", "pb_integrity"):
            cols = ", ".join(_columns(con, table))
            con.execute(f"INSERT INTO {table} ({cols}) SELECT {cols} FROM s.{table} WHERE student_id = ? AND assignment = ?",
                        (student, assignment_name))
        con.commit()
    finally:
        con.execute("DETACH DATABASE s")
    _restore_marks(con, student, assignment_name, grades, comments)
    con.commit()


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
    key = hashlib.sha256(f"{file_digest(course.gradebook)}:{source_digest}:{assignment}".encode()).hexdigest()[:16]
    folder = course.work / "base" / key
    if (folder / "template.db").exists():
        return key, folder
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    base = folder / "base.db"
    if course.gradebook.exists():
        shutil.copy(course.gradebook, base)
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
    for table in ("grade", "comment", "submitted_notebook", "submitted_assignment", "student", "pb_integrity", "pb_submission"):
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
