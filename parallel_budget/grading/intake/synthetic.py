"""Synthetic submissions for tests and benchmarks: a class of students made from the release.

:func:`submission` fills the released notebooks' answer cells with the source
solution (or with given code) and lets a caller edit the notebook to play a
hostile student; :func:`write_class` writes ``<folder>/<student>/<assignment>/``.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

from ..course import Course


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _answers(source_nb: dict) -> dict:
    return {c["metadata"]["nbgrader"]["grade_id"]: c["source"]
            for c in source_nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")}


def submission(course: Course, assignment: str, answers: dict | None = None, empty: bool = False,
               release: Path | None = None) -> dict:
    """{notebook name: notebook dict} of a student who answers with the solutions.

    ``answers`` maps a grade_id to replacement source; ``empty=True`` leaves the
    release untouched (the stubs), i.e. a student who answered nothing; ``release``
    is the folder of the released notebooks the student got (default: the course's).
    """
    out = {}
    for path in sorted((release or course.release / assignment).glob("*.ipynb")):
        nb = _load(path)
        sol = _answers(_load(course.source / assignment / path.name))
        for cell in nb["cells"]:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if answers and gid in answers:
                cell["source"] = answers[gid]
            elif gid in sol and not empty:
                cell["source"] = sol[gid]
        out[path.stem] = nb
    return out


def cell(nb: dict, grade_id: str) -> dict:
    """The cell with ``grade_id`` (for editing a notebook in place)."""
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return c
    raise KeyError(grade_id)


def insert_code(nb: dict, before_grade_id: str, source: str) -> None:
    """Insert a student's own code cell before the cell ``before_grade_id``."""
    index = nb["cells"].index(cell(nb, before_grade_id))
    nb["cells"].insert(index, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                               "source": source})


def write_student(folder: Path, student: str, assignment: str, notebooks: dict, raw: dict | None = None) -> Path:
    """Write one student's notebooks; ``raw`` maps names to raw text (e.g. invalid JSON)."""
    dest = Path(folder) / student / assignment
    dest.mkdir(parents=True, exist_ok=True)
    for name, nb in notebooks.items():
        (dest / f"{name}.ipynb").write_text(json.dumps(nb, ensure_ascii=False, indent=1), encoding="utf-8")
    for name, text in (raw or {}).items():
        (dest / f"{name}.ipynb").write_text(text, encoding="utf-8")
    return dest


def write_class(course: Course, assignment: str, folder: Path, n: int, prefix: str = "s") -> list[str]:
    """``n`` students: most answer right; every fifth makes classic slips, every seventh leaves stubs."""
    right = submission(course, assignment)
    slips = submission(course, assignment, {
        "answer_ex1": "ex1_send_per_rank_GB = '24 GB'\nex1_lower_bound_ms = 480",
        "answer_updated_w": "updated_w = 0.85",
        "answer_zero2": "zero2_GB = '24.45 GiB'",
    })
    blank = submission(course, assignment, empty=True)
    names = []
    for i in range(n):
        name = f"{prefix}{i:03d}"
        nbs = blank if i % 7 == 6 else slips if i % 5 == 4 else right
        write_student(folder, name, assignment, copy.deepcopy(nbs))
        names.append(name)
    return names


def answer_line(q, right) -> str:
    """``name = ...`` giving the right answer ``right`` (the bank's expected value) of question ``q``."""
    from ...questions import core

    if q.kind == "int":
        return f"{q.answer} = {right!r}"
    value = core.magnitude(right.value)
    if q.kind == "fraction":
        return f"{q.answer} = {value!r}"
    unit = core.answer_unit(q)
    return f"{q.answer} = {value / core.per_unit(unit)!r}" if unit else f"{q.answer} = {value!r}"


def own_numbers(course: Course, assignment: str, student: str, notebooks: dict, course_id: str = "parallel-budget") -> dict:
    """``notebooks`` with every varied answer set right for ``student``'s per-student numbers (in place).

    The line goes at the end of the answer cell before the test cell that assigns the variable, after the
    book's solution.
    """
    from ...questions import variants

    for name, nb in notebooks.items():
        for scenario in variants.SCENARIOS.get(name, ()):
            for test, qid in scenario.tests:
                q = variants._bank()[qid]
                line = answer_line(q, variants.expected(course_id, assignment, name, student, qid))
                before = nb["cells"][:nb["cells"].index(cell(nb, test))]
                for c in reversed(before):  # the answer cell this test cell checks
                    src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                    if c.get("metadata", {}).get("nbgrader", {}).get("solution") and f"{q.answer} =" in src:
                        c["source"] = src.rstrip("\n") + "\n" + line + "\n"
                        break
    return notebooks
