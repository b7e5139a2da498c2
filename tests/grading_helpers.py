"""Shared set-up for the grading tests: a throw-away copy of the course, and gradebook readers."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FILES = Path(__file__).resolve().parent / "files"


def course_copy(dest: Path, notebooks=None) -> Path:
    """A course checkout in ``dest`` (config, header, solutions, exercises), optionally fewer notebooks."""
    (dest / "autograde").mkdir(parents=True)
    for name in ("nbgrader_config.py", "header.ipynb"):
        shutil.copy(ROOT / "autograde" / name, dest / "autograde" / name)
    for folder in ("solutions", "exercises"):
        for path in sorted((ROOT / folder / "lesson").glob("*.ipynb")):
            if notebooks is None or path.stem in notebooks:
                (dest / folder / "lesson").mkdir(parents=True, exist_ok=True)
                shutil.copy(path, dest / folder / "lesson" / path.name)
    # kernels started by nbgrader must import this checkout's package
    # (once: a PYTHONPATH that grew with every copy would make every run start a new fork server, pool.py)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    return dest


def scores(db: Path) -> dict:
    """{(student, notebook, cell): (score, max_score)} for every grade cell in the gradebook."""
    con = sqlite3.connect(str(db))
    rows = con.execute(
        "SELECT sa.student_id, n.name, bc.name, g.auto_score, g.manual_score, gc.max_score FROM grade g "
        "JOIN submitted_notebook sn ON g.notebook_id = sn.id JOIN notebook n ON sn.notebook_id = n.id "
        "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell bc ON g.cell_id = bc.id "
        "JOIN grade_cells gc ON gc.id = bc.id").fetchall()
    con.close()
    return {(s, n, c): (m if m is not None else a, mx) for s, n, c, a, m, mx in rows}


def flags(db: Path) -> set:
    """{(student, notebook, cell, trick)} from the integrity table."""
    con = sqlite3.connect(str(db))
    rows = con.execute("SELECT student_id, notebook, cell, trick FROM pb_integrity").fetchall()
    con.close()
    return set(rows)


def comments(db: Path) -> dict:
    con = sqlite3.connect(str(db))
    rows = con.execute(
        "SELECT sa.student_id, n.name, bc.name, c.auto_comment, c.manual_comment FROM comment c "
        "JOIN submitted_notebook sn ON c.notebook_id = sn.id JOIN notebook n ON sn.notebook_id = n.id "
        "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell bc ON c.cell_id = bc.id").fetchall()
    con.close()
    return {(s, n, c): (a, m) for s, n, c, a, m in rows}


def notebook_total(sc: dict, student: str, notebook: str) -> float:
    return sum(v[0] or 0 for k, v in sc.items() if k[0] == student and k[1] == notebook and k[2].startswith("test_"))
