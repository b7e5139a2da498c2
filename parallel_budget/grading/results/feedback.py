"""Feedback HTML: complete (current manual marks), private, in Chinese, formulas offline (issue 17).

A shard (:mod:`.shard`) writes a student's feedback right after grading.  The
runner hands it the manual marks the live gradebook holds for the student,
each with a digest of the answer cell it was given for (read from the
previously autograded notebook, i.e. what formgrader showed).  Marks whose
answer is unchanged are written into the shard's gradebook before
``generate_feedback`` runs, so the feedback shows them; marks whose answer
changed are left out and reported in ``<shard>/marks.json`` (:mod:`.merge`
then clears them).  When the marks in the live gradebook end up different
from the ones the shard used (a mark saved during the run), the runner
rewrites that student's feedback from the live gradebook with
:func:`course_feedback`.

Every feedback file uses the template in ``templates/pb_feedback`` (nbgrader's
feedback template with Chinese labels and MathJax loaded from
``autograde/feedback/_mathjax/``, a copy of the MathJax the book vendors),
:class:`.privacy.StudentView` and :mod:`.inert` (the student's Markdown and
outputs sanitized with nh3: a feedback page runs no script but MathJax), and
:mod:`.csp` (a ``<meta http-equiv>`` Content-Security-Policy: only the page's own
nonced scripts run; MathJax with its ``ui/safe`` extension).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from pathlib import Path

from ..course import Course, load_config, quiet_app_logs
from .merge import apply_marks, read_marks

TEMPLATES = Path(__file__).resolve().parent / "templates"
MATHJAX_DIR = "_mathjax"  # under autograde/feedback/; not a valid student id, so never a student's folder
MATHJAX_FILES = ("tex-chtml.js", "ui/safe.js", "input/tex/extensions", "output/chtml/fonts/woff-v2")


def mathjax_source() -> Path:
    """The MathJax 3 the book vendors (package sphinx-mathjax-offline)."""
    from importlib.metadata import distribution

    path = Path(distribution("sphinx-mathjax-offline").locate_file("sphinx-mathjax-offline/static/mathjax"))
    if not (path / "tex-chtml.js").is_file():
        raise FileNotFoundError(f"MathJax not found at {path}")
    return path


def install_mathjax(feedback_root: Path) -> Path:
    """Copy the MathJax files feedback pages load into ``feedback_root/_mathjax`` (once)."""
    dest = feedback_root / MATHJAX_DIR
    if all((dest / rel).exists() for rel in MATHJAX_FILES):
        return dest
    src = mathjax_source()
    tmp = feedback_root / (MATHJAX_DIR + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel in MATHJAX_FILES:
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        if (src / rel).is_dir():
            shutil.copytree(src / rel, tmp / rel)
        else:
            shutil.copy(src / rel, tmp / rel)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


def answer_digests(notebook: Path) -> dict:
    """{grade_id: digest of the source} of every answer (solution) cell in a notebook file."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    out = {}
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("solution") and meta.get("grade_id"):
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            out[meta["grade_id"]] = hashlib.sha256(src.strip().encode()).hexdigest()[:16]
    return out


def task_marks(course: Course, student: str, assignment: str) -> dict:
    """{"notebook/cell": {"mark": [score, extra, comment], "answer": digest or None}} for a shard task."""
    marks = read_marks(course.gradebook, student, assignment)
    digests: dict = {}
    out = {}
    for k, mark in marks.items():
        nb, cell = k.split("/", 1)
        if nb not in digests:
            digests[nb] = answer_digests(course.autograded / student / assignment / f"{nb}.ipynb")
        out[k] = {"mark": mark, "answer": digests[nb].get(cell)}
    return out


def split_marks(marks: dict, autograded: Path) -> tuple[dict, dict]:
    """(marks to keep, marks whose answer cell changed) against the newly autograded notebooks."""
    keep, cleared, digests = {}, {}, {}
    for k, info in sorted(marks.items()):
        nb, cell = k.split("/", 1)
        if nb not in digests:
            digests[nb] = answer_digests(autograded / f"{nb}.ipynb")
        old = info.get("answer")
        if old is not None and digests[nb].get(cell) != old:
            cleared[k] = info["mark"]
        else:
            keep[k] = info["mark"]
    return keep, cleared


def feedback_config(cfg):
    """``cfg`` with the course's feedback template and the student-view preprocessor."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import GetGrades

    from .inert import FeedbackPolicy, InertOutputs, configure
    from .privacy import StudentView

    nbgrader_templates = Path(__import__("nbgrader").__file__).parent / "server_extensions" / "formgrader" / "templates"
    cfg.HTMLExporter.template_name = "pb_feedback"
    cfg.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), str(nbgrader_templates)]
    cfg.GenerateFeedback.preprocessors = [StudentView, InertOutputs, GetGrades, CSSHTMLHeaderPreprocessor,
                                         FeedbackPolicy]
    return configure(cfg)


def _generate(cfg, student: str, assignment: str) -> None:
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    quiet_app_logs()
    cfg = feedback_config(cfg)
    coursedir = CourseDirectory(config=cfg)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    fb = GenerateFeedback(coursedir=coursedir, config=cfg)
    fb.force = True
    fb.start()


def write_feedback(cfg, shard: Path, student: str, assignment: str, marks: dict | None = None) -> None:
    """Write ``<shard>/autograde/feedback/<student>/<assignment>/*.html``, with the kept manual marks."""
    autograded = shard / "autograde" / "autograded" / student / assignment
    keep, cleared = split_marks(marks or {}, autograded)
    con = sqlite3.connect(str(shard / "gradebook.db"))
    try:
        apply_marks(con, student, assignment, keep)
        con.commit()
    finally:
        con.close()
    (shard / "marks.json").write_text(json.dumps({"applied": keep, "cleared": cleared}, ensure_ascii=False),
                                      encoding="utf-8")
    if any(autograded.glob("*.ipynb")):
        _generate(cfg, student, assignment)


def course_feedback(course: Course, student: str, assignment: str) -> None:
    """Rewrite one student's feedback in ``autograde/feedback`` from the live gradebook."""
    if any((course.autograded / student / assignment).glob("*.ipynb")):
        _generate(load_config(course), student, assignment)

