"""Feedback HTML for one graded student (nbgrader's ``generate_feedback`` in a shard)."""

from __future__ import annotations

from pathlib import Path


def write_feedback(cfg, shard: Path, student: str, assignment: str) -> None:
    """Write ``<shard>/autograde/feedback/<student>/<assignment>/*.html`` for the notebooks autograded there."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    if not any((shard / "autograde" / "autograded" / student / assignment).glob("*.ipynb")):
        return
    coursedir = CourseDirectory(config=cfg)
    coursedir.assignment_id, coursedir.student_id = assignment, student
    fb = GenerateFeedback(coursedir=coursedir, config=cfg)
    fb.force = True
    fb.start()
