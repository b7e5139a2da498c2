"""The exercises as a student meets them: prompts that do not give the answer away, the practice
self-check in the release, and a graded release without it that grades the same way."""

from __future__ import annotations

import builtins
import json
import re

import pytest

import parallel_budget as pb
from grading_helpers import ROOT
from parallel_budget.grading import diagnose
from parallel_budget.grading.release import PRACTICE_TAG, add_practice_checks, practice_source

# a number and its unit; not a digit of a fraction like 2/3 or of an identifier
NUMBER = re.compile(r"(?<![\w./])(\d+(?:\.\d+)?)(?![\d/])\s*(%|GB/s|Gb/s|GiB|GB|MB|kB|ms|s\b|B\b)?")


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(cell):
    return "".join(cell["source"])


def _is_test(cell):
    m = cell.get("metadata", {}).get("nbgrader", {})
    return m.get("grade") and not m.get("solution") and cell["cell_type"] == "code"


class _Answers(dict):
    """Answer variables for running a test cell without a student: every unknown name is a dummy."""

    def __missing__(self, key):
        if key in ("checks", "diagnose", "pb") or hasattr(builtins, key):
            raise KeyError(key)  # found in the globals or the builtins
        return lambda *a, **k: None


class _Recorder:
    """Stands in for ``checks`` and keeps what each value check expects."""

    def __init__(self):
        self.expected = []

    def value(self, name, given, expected, kind=None):
        self.expected.append((name, expected))

    def __getattr__(self, name):
        return lambda *a, **k: None


def expected_values(source_nb: list) -> list:
    """(variable, Expected) of every ``checks.value`` call in a source notebook's test cells."""
    rec = _Recorder()
    for cell in source_nb:
        if _is_test(cell):
            code = "\n".join(line for line in _text(cell).splitlines() if not line.startswith(("from ", "import ")))
            exec(code, {"checks": rec, "diagnose": diagnose, "pb": pb}, _Answers())
    return rec.expected


def _hint_matches(expected, number: float, unit: str | None) -> bool:
    if hasattr(expected.value, "units"):
        if unit in (None, "%"):
            q = pb.Q_(number, expected.unit) if unit is None and expected.unit else None
        else:
            q = pb.Q_(number, unit.replace("s\b", "s"))
        if q is None or q.dimensionality != expected.value.dimensionality:
            return False
        return expected.matches(q)
    if unit not in (None, "%"):
        return False
    return expected.matches(number / 100 if unit == "%" else number)


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "solutions" / "lesson").glob("*.ipynb")))
def test_no_number_in_a_prompt_is_an_answer(name):
    """Does no number written in a released notebook's text (format hints, examples) pass as an answer?"""
    expected = expected_values(_cells(ROOT / "solutions" / "lesson" / f"{name}.ipynb"))
    assert expected, name
    text = "\n".join(_text(c) for c in _cells(ROOT / "exercises" / "lesson" / f"{name}.ipynb")
                     if c["cell_type"] == "markdown")
    text = re.sub(r"\d+ 分|练习 \d", "", text)  # points and exercise numbers are no hints
    found = [(var, m.group(0)) for var, e in expected for m in NUMBER.finditer(text)
             if _hint_matches(e, float(m.group(1)), m.group(2))]
    assert not found, f"{name}: the text gives these answers away: {found}"


def test_the_hint_check_catches_a_hint_that_is_the_answer():
    """Would the scan above have caught NB04's old format hint "22.6%" and an intro's `x_GB = 3`?"""
    bubble = diagnose.bubble(8, 24)
    send = diagnose.ring_send(4, "2 GB", "12.5 GB/s")
    assert _hint_matches(bubble, 22.6, "%") and not _hint_matches(bubble, 12.5, "%")
    assert _hint_matches(send, 3, None) and _hint_matches(send, 3000, "MB") and not _hint_matches(send, 1.5, None)


def _run(nb: dict) -> dict:
    """Execute a notebook as a student would (Run All in a fresh kernel); errors are kept, not raised."""
    import os

    import nbformat
    from nbclient import NotebookClient

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    node = nbformat.reads(json.dumps(nb), as_version=4)
    NotebookClient(node, timeout=60, kernel_name="python3", allow_errors=True).execute()
    return node


def _outputs(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o["output_type"] == "stream")


def _practice_cells(nb):
    return [c for c in nb["cells"] if PRACTICE_TAG in c["metadata"].get("tags", []) and c["cell_type"] == "code"]


@pytest.fixture(scope="module")
def course():
    from parallel_budget.grading.course import Course

    return Course(ROOT)


@pytest.mark.slow
def test_practice_checks_pass_on_the_solutions(course):
    """Run All on every released notebook answered with the solutions: does each practice cell print a tick?"""
    from parallel_budget.grading import classroom

    for name, nb in classroom.submission(course, "lesson").items():
        ran = _run(nb)
        cells = _practice_cells(ran)
        assert cells, name
        for cell in (c for c in ran.cells if c.cell_type == "code"):
            assert not [o for o in cell.outputs if o.output_type == "error" or o.get("name") == "stderr"], (name, cell.source)
        for cell in cells:
            out = _outputs(cell)
            assert "✔ 练习自测" in out and "✘" not in out, (name, cell.source, out)


@pytest.mark.slow
def test_bits_for_bytes_gets_the_named_mistake_in_the_notebook(course):
    """Answer exercise 1 with bits for bytes and Run All: does the practice check name it in 2-3 lines, no traceback?"""
    from parallel_budget.grading import classroom

    nb = classroom.submission(course, "lesson", {"answer_ex1": "send_per_rank_GB = 24\nlower_bound_ms = 1920",
                                                 "answer_ex2": 'send_per_rank_GB = 7\nlower_bound_ms = "3 GB"'})
    ran = _run(nb["02-ring-allreduce"])
    texts = [_outputs(c) for c in _practice_cells(ran)]
    bits = [t for t in texts if "lower_bound_ms = 1920 ms 不对" in t]
    assert bits and "把比特当成了字节" in bits[0] and 2 <= len(bits[0].strip().splitlines()) <= 3
    assert any("send_per_rank_GB = 24 GB 不对" in t and "把比特当成了字节" in t for t in texts)
    # the visible test of the wrong dimension fails with its message only: no frame of the package
    errors = [o for c in ran.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert len(errors) == 1
    shown = "\n".join(errors[0].traceback)
    assert "需要时间" in shown and "按变量名后缀的 ms 理解" in shown
    assert "File " not in shown and "parallel_budget/" not in shown and len(errors[0].traceback) <= 3


def test_practice_cell_is_made_from_the_hidden_tests():
    """Is a practice cell the hidden tests of its test cell under checks.practice, without grading imports?"""
    source = ('"""检查 x_ms。"""\nfrom parallel_budget.grading import checks, diagnose\nimport parallel_budget as pb\n'
              'checks.visible("x_ms", x_ms)\n### BEGIN HIDDEN TESTS\nc = pb.Q_(1, "s")\n'
              'checks.value("x_ms", x_ms, diagnose.Expected(c))\n### END HIDDEN TESTS')
    cell = practice_source(source)
    assert "import parallel_budget as pb\nwith checks.practice('x_ms'):\n    c = pb.Q_" in cell
    assert "parallel_budget.grading" not in cell and "checks.visible" not in cell
    assert practice_source('"""检查 y。"""\nchecks.exact("y", y, 2)') is None
    released = {"cells": [{"cell_type": "code", "source": "...", "metadata": {"nbgrader": {"grade_id": "t"}}}]}
    src_nb = {"cells": [{"cell_type": "code", "source": source,
                         "metadata": {"nbgrader": {"grade_id": "t", "grade": True, "solution": False}}}]}
    cells = add_practice_checks(released, src_nb)["cells"]
    assert [c["metadata"].get("tags") for c in cells] == [None, [PRACTICE_TAG]]
    assert "nbgrader" not in cells[1]["metadata"]  # an ordinary cell: nbgrader neither scores nor restores it


def _without_practice(nb: dict) -> dict:
    return dict(nb, cells=[c for c in nb["cells"] if PRACTICE_TAG not in c.get("metadata", {}).get("tags", [])])


def _canonical(nb: dict) -> str:
    import nbformat

    node = nbformat.reads(json.dumps(nb), as_version=4)
    return json.dumps(node, sort_keys=True, ensure_ascii=False)


@pytest.mark.slow
def test_graded_release_is_the_practice_release_without_practice_cells(tmp_path):
    """With c.PracticeCheck.enabled = False, is the release nbgrader's own, i.e. the committed one minus practice cells?"""
    from grading_helpers import course_copy
    from parallel_budget.grading.course import Course
    from parallel_budget.grading.release import generate

    root = course_copy(tmp_path / "course")
    config = root / "autograde" / "nbgrader_config.py"
    text = config.read_text(encoding="utf-8")
    assert "c.PracticeCheck.enabled = True" in text  # the one documented setting
    config.write_text(text.replace("c.PracticeCheck.enabled = True", "c.PracticeCheck.enabled = False"), encoding="utf-8")
    graded = generate(Course(root), "lesson", tmp_path / "graded")
    for path in sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")):
        practice = json.loads(path.read_text(encoding="utf-8"))
        plain = json.loads((graded / path.name).read_text(encoding="utf-8"))
        assert not [c for c in plain["cells"] if PRACTICE_TAG in c["metadata"].get("tags", [])], path.name
        assert len(practice["cells"]) > len(plain["cells"]), path.name
        assert _canonical(_without_practice(practice)) == _canonical(plain), path.name


@pytest.mark.slow
def test_both_releases_grade_the_same(tmp_path):
    """Do the same answers get the same scores, comments and flags whether handed in on the practice or the graded release?"""
    from grading_helpers import comments, course_copy, flags, scores
    from parallel_budget.grading import classroom
    from parallel_budget.grading.course import Course
    from parallel_budget.grading.runner import grade

    notebook = "02-ring-allreduce"
    course = Course(course_copy(tmp_path / "course", [notebook]))
    right = classroom.submission(course, "lesson")[notebook]
    slips = classroom.submission(course, "lesson", {
        "answer_ex1": "send_per_rank_GB = 24\nlower_bound_ms = 0.24",
        "answer_overlap": "overlap_step_ms = 85"})[notebook]
    incoming = tmp_path / "in"
    for name, nb in (("pright", right), ("gright", _without_practice(right)),
                     ("pslips", slips), ("gslips", _without_practice(slips))):
        classroom.write_student(incoming, name, "lesson", {notebook: nb})
    summary = grade(incoming, root=course.root, jobs=2, timeout=10, quiet=True)
    assert not summary["failed"]
    sc, cm, fl = scores(course.gradebook), comments(course.gradebook), flags(course.gradebook)

    def of(table, student):
        return {k[1:]: v for k, v in table.items() if k[0] == student}

    for kind in ("right", "slips"):
        assert of(sc, "p" + kind) == of(sc, "g" + kind) and of(cm, "p" + kind) == of(cm, "g" + kind)
        assert {f[1:] for f in fl if f[0] == "p" + kind} == {f[1:] for f in fl if f[0] == "g" + kind} == set()
    assert all(v[0] == v[1] for k, v in of(sc, "pright").items() if k[1].startswith("test_"))
    assert of(sc, "pslips")[(notebook, "test_ex1_bound")][0] == 0
    assert of(sc, "pslips")[(notebook, "test_overlap_step")][0] == 0
    # the feedback HTML shows the message, not the package's source lines
    html = (course.feedback / "gslips" / "lesson" / f"{notebook}.html").read_text(encoding="utf-8")
    assert "按 s 算是对的" in html and "反向传播" in html
    assert "checks.py" not in html and "_fail(" not in html and "raise CheckFailed" not in html


def test_every_released_notebook_starts_with_how_to_get_the_package():
    """Does the first cell of every released notebook say how to install the package offline (wheel) and from a clone?"""
    for path in sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")):
        first = _text(_cells(path)[0])
        assert "pip install parallel_budget-*.whl" in first and "pip install -e ." in first, path.name
        assert "Restart Kernel and Run All Cells…" in first, path.name  # JupyterLab 4's menu name


ASCII_NEXT_TO_HAN = re.compile(r"[\u4e00-\u9fff][,;:?!()]|[,;:?!()][\u4e00-\u9fff]")
TERMS = [r"互联", r"微批(?!次)", r"(?<![(（])\bhang\b(?![)）_])"]


def test_exercise_text_is_typeset_like_the_book():
    """Does no released notebook's text put ASCII , ; : ? ! ( ) next to Chinese, or use a term the book replaced?"""
    found = []
    for path in sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")):
        for cell in _cells(path):
            if cell["cell_type"] != "markdown":
                continue
            prose = re.sub(r"```.*?```|`[^`]*`|\$[^$]*\$", "", _text(cell), flags=re.S)
            found += [(path.name, prose[max(0, m.start() - 10): m.end() + 10]) for m in ASCII_NEXT_TO_HAN.finditer(prose)]
            found += [(path.name, m.group(0)) for t in TERMS for m in re.finditer(t, prose)]
    assert not found, found
