"""The exercises as a student meets them: prompts that do not give the answer away, the practice
self-check in the release, and a graded release without it that grades the same way."""

from __future__ import annotations

import builtins
import contextlib
import json
import re

import pytest

import parallel_budget as pb
from grading_helpers import ROOT
from parallel_budget.answers import diagnose
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
    """A cell's text: its stdout, and the plain-text side of its displays (the styled self-check lines)."""
    return "".join(o.get("text", "") if o["output_type"] == "stream" else o.get("data", {}).get("text/plain", "") + "\n"
                   for o in cell.get("outputs", []) if o["output_type"] in ("stream", "display_data"))


def _styled(cell) -> list:
    """The HTML of a cell's styled ✔/✘ lines (checks.show_line)."""
    return [o["data"]["text/html"] for o in cell.get("outputs", [])
            if o["output_type"] == "display_data" and "pb-selfcheck" in o.get("data", {}).get("text/html", "")]


def _practice_cells(nb):
    return [c for c in nb["cells"] if PRACTICE_TAG in c["metadata"].get("tags", []) and c["cell_type"] == "code"]


@pytest.fixture(scope="module")
def course():
    from parallel_budget.grading.course import Course

    return Course(ROOT)


@pytest.mark.slow
def test_practice_checks_pass_on_the_solutions(course):
    """Run All on every released notebook answered with the solutions: does each practice cell print a tick?"""
    from parallel_budget.grading.intake import synthetic

    for name, nb in synthetic.submission(course, "lesson").items():
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
    from parallel_budget.grading.intake import synthetic

    nb = synthetic.submission(course, "lesson", {"answer_ex1": "ex1_send_per_rank_GB = 24\nex1_lower_bound_ms = 1920",
                                                 "answer_ex2": 'ex2_send_per_rank_GB = 7\nex2_lower_bound_ms = "3 GB"'})
    ran = _run(nb["02-ring-allreduce"])
    texts = [_outputs(c) for c in _practice_cells(ran)]
    bits = [t for t in texts if "ex1_lower_bound_ms = 1920 ms 不对" in t]
    assert bits and "把比特当成了字节" in bits[0] and 2 <= len(bits[0].strip().splitlines()) <= 3
    assert any("ex1_send_per_rank_GB = 24 GB 不对" in t and "把比特当成了字节" in t for t in texts)
    # the visible test of the wrong dimension fails with its message only: no frame of the package
    errors = [o for c in ran.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert len(errors) == 1
    shown = "\n".join(errors[0].traceback)
    assert "需要时间" in shown and "按变量名后缀的 ms 理解" in shown
    assert "File " not in shown and "parallel_budget/" not in shown and len(errors[0].traceback) <= 3


def test_practice_cell_is_made_from_the_hidden_tests():
    """Is a practice cell the hidden tests of its test cell under checks.practice, without grading imports?"""
    source = ('"""检查 x_ms。"""\nfrom parallel_budget.answers import checks, diagnose\nimport parallel_budget as pb\n'
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
def test_graded_release_is_the_practice_release_without_practice_cells(tmp_path, capsys, monkeypatch):
    """With c.PracticeCheck.enabled = False, does `release` say it writes the graded edition, and is that edition
    nbgrader's own (the committed self-study one minus practice cells) with no expected answer in any cell?
    Does a graded release that would show one refuse, leaving the folder as it was?"""
    from grading_helpers import course_copy
    from parallel_budget.grading import release
    from parallel_budget.grading.__main__ import main

    root = course_copy(tmp_path / "course")
    config = root / "autograde" / "nbgrader_config.py"
    text = config.read_text(encoding="utf-8")
    assert "c.PracticeCheck.enabled = True" in text  # the one documented setting
    config.write_text(text.replace("c.PracticeCheck.enabled = True", "c.PracticeCheck.enabled = False"), encoding="utf-8")
    before = {p.name: p.read_bytes() for p in (root / "exercises" / "lesson").glob("*.ipynb")}
    with monkeypatch.context() as m:
        m.setattr(release, "expected_answers", lambda released, source: ["练习自测单元 x"])
        assert main(["--root", str(root), "release"]) == 1
    assert "正式评分版里有期望答案" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (root / "exercises" / "lesson").glob("*.ipynb")} == before
    assert main(["--root", str(root), "release"]) == 0
    out = capsys.readouterr().out
    assert "已生成正式评分版：没有练习自测，任何单元里都没有期望答案" in out and "仓库里的 exercises/ 是自学版" in out
    graded = root / "exercises" / "lesson"
    for path in sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")):
        practice = json.loads(path.read_text(encoding="utf-8"))
        plain = json.loads((graded / path.name).read_text(encoding="utf-8"))
        source = json.loads((ROOT / "solutions" / "lesson" / path.name).read_text(encoding="utf-8"))
        assert not [c for c in plain["cells"] if PRACTICE_TAG in c["metadata"].get("tags", [])], path.name
        assert len(practice["cells"]) > len(plain["cells"]), path.name
        assert _canonical(_without_practice(practice)) == _canonical(plain), path.name
        assert release.expected_answers(plain, source) == [], path.name
        assert release.expected_answers(practice, source), path.name  # the self-study edition shows them
    shown = "\n".join(release.expected_answers(*(json.loads((ROOT / f / "lesson" / "01-two-rank-update.ipynb").read_text(
        encoding="utf-8")) for f in ("exercises", "solutions"))))
    assert 'checks.exact("fix_choice", fix_choice, "C",' in shown


@pytest.mark.slow
def test_both_releases_grade_the_same(tmp_path):
    """Do the same answers get the same scores, comments and flags whether handed in on the practice or the graded release?"""
    from grading_helpers import comments, course_copy, flags, scores
    from parallel_budget.grading.intake import synthetic
    from parallel_budget.grading.course import Course
    from parallel_budget.grading.runner import grade

    notebook = "02-ring-allreduce"
    course = Course(course_copy(tmp_path / "course", [notebook]))
    right = synthetic.submission(course, "lesson")[notebook]
    slips = synthetic.submission(course, "lesson", {
        "answer_ex1": "ex1_send_per_rank_GB = 24\nex1_lower_bound_ms = 0.24",
        "answer_overlap": "overlap_step_ms = 85"})[notebook]
    blank_b = json.loads(json.dumps(right))  # part B left as released (`... `): 0 there, "还没有作答" in feedback
    synthetic.cell(blank_b, "answer_ex2")["source"] = synthetic.cell(
        synthetic.submission(course, "lesson", empty=True)[notebook], "answer_ex2")["source"]
    incoming = tmp_path / "in"
    for name, nb in (("pright", right), ("gright", _without_practice(right)),
                     ("pslips", slips), ("gslips", _without_practice(slips)), ("blankb", blank_b)):
        synthetic.write_student(incoming, name, "lesson", {notebook: nb})
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
    blank = of(sc, "blankb")
    assert blank[(notebook, "test_ex2_send")][0] == blank[(notebook, "test_ex2_bound")][0] == 0
    assert all(v[0] == v[1] for k, v in blank.items() if k[1].startswith("test_") and not k[1].startswith("test_ex2"))
    html = (course.feedback / "blankb" / "lesson" / f"{notebook}.html").read_text(encoding="utf-8")
    assert "ex2_send_per_rank_GB 还没有作答" in html and "ex2_lower_bound_ms 还没有作答" in html
    assert not {f for f in fl if f[0] == "blankb"}


def test_every_released_notebook_starts_with_how_to_get_the_package():
    """Does the first cell of every released notebook say how to install the package offline (wheel) and from a clone?"""
    for path in sorted((ROOT / "exercises" / "lesson").glob("*.ipynb")):
        first = _text(_cells(path)[0])
        assert "pip install parallel_budget-*.whl" in first and "pip install -e ." in first, path.name
        assert "内核 → 重启并运行所有单元格…" in first, path.name  # the zh-CN JupyterLab menu (jupyterlab-language-pack-zh-cn)


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


# ---- unanswered parts (the sentinel ``...`` of the released answer cells) ------------------------------------

def _unanswered_calls(e):
    from parallel_budget.answers import checks

    return [lambda: checks.visible("ex2_send_per_rank_GB", ...), lambda: checks.value("ex2_lower_bound_ms", ..., e),
            lambda: checks.exact("hang_rank", ..., 2), lambda: checks.kind_is("consistent_checkpoint", ..., callable)]


def test_an_unanswered_part_is_a_styled_line_in_the_notebook_and_a_failure_elsewhere(monkeypatch):
    """Is `...` a ✘ "还没有作答" line (HTML and plain text) in a student's notebook, and a failure in plain Python,
    under nbgrader's validate/autograde, in the grader's strict block, and a ✘ line in a practice cell?"""
    from parallel_budget.answers import checks

    e = diagnose.ring_bound(8, "4 GB", "50 GB/s")
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(checks, "_ipython", lambda: None)  # plain Python
    for call in _unanswered_calls(e):
        with pytest.raises(checks.CheckFailed, match="还没有作答"):
            call()
    shown = []
    monkeypatch.setattr(checks, "_ipython", lambda: object())  # a student's kernel
    monkeypatch.setattr("IPython.display.display", lambda data, raw=False: shown.append(data))
    assert [call() for call in _unanswered_calls(e)] == [None] * 4
    assert len(shown) == 4 and all(d["text/plain"].startswith("✘ ") and "还没有作答" in d["text/plain"] for d in shown)
    assert all('class="pb-selfcheck"' in d["text/html"] and "#c5221f" in d["text/html"] for d in shown)
    assert "ex2_send_per_rank_GB 还没有作答" in shown[0]["text/plain"]
    with checks.practice("ex2_lower_bound_ms"):
        checks.value("ex2_lower_bound_ms", ..., e)
    with checks.practice("ex2_lower_bound_ms"):
        checks.value("ex2_lower_bound_ms", "140 ms", e)
    assert shown[4]["text/plain"].startswith("✘ 练习自测（ex2_lower_bound_ms）：ex2_lower_bound_ms 还没有作答")
    assert shown[5]["text/plain"].startswith("✔ 练习自测") and "#188038" in shown[5]["text/html"]
    for strict in ("validate", "autograde", None):  # nbgrader's kernels, then the grader's trusted checks
        if strict:
            monkeypatch.setenv("NBGRADER_EXECUTION", strict)
        else:
            monkeypatch.delenv("NBGRADER_EXECUTION")
        with checks.strict() if strict is None else contextlib.nullcontext():
            for call in _unanswered_calls(e):
                with pytest.raises(checks.CheckFailed, match="还没有作答"):
                    call()
    assert len(shown) == 6


def test_grading_kernels_know_they_grade():
    """Does a sandboxed kernel keep nbgrader's NBGRADER_EXECUTION (so an unanswered part fails there too, also with
    c.ResilientExecute.trusted_checks = False), and nothing else of the grader's environment?"""
    from parallel_budget.grading.sandbox import bwrap

    env = bwrap.clean_env({"NBGRADER_EXECUTION": "autograde", "AWS_SECRET_ACCESS_KEY": "x"})
    assert env["NBGRADER_EXECUTION"] == "autograde" and "AWS_SECRET_ACCESS_KEY" not in env


def test_every_part_has_names_of_its_own():
    """Does no answer variable belong to two answer cells of a notebook (so no part passes on another's values)?"""
    from parallel_budget.grading.scoring.answer_stubs import answer_names, assigned

    import nbformat

    for path in sorted((ROOT / "solutions" / "lesson").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        answers, owner = answer_names(nb), {}
        for cell in nb.cells:
            if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
                for name in set(assigned(cell.source)) & answers:
                    assert owner.setdefault(name, cell.metadata.nbgrader.grade_id) == cell.metadata.nbgrader.grade_id, (
                        path.name, name)
        assert owner, path.name


def _half_answered(course):
    """Every notebook with its first answer cell answered (the solution) and every later one left as released."""
    from parallel_budget.grading.intake import synthetic

    out = {}
    blank = synthetic.submission(course, "lesson", empty=True)
    right = synthetic.submission(course, "lesson")
    for name, nb in blank.items():
        first = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution") and c["cell_type"] == "code")
        first["source"] = next(c for c in right[name]["cells"] if c.get("id") == first.get("id"))["source"]
        out[name] = nb
    return out


@pytest.mark.slow
def test_run_all_goes_to_the_end_and_names_each_unanswered_part(course):
    """Run All (stopping at the first error, as JupyterLab does) with only part A answered: does every cell run,
    part A's practice line tick, and every later test cell show a styled "还没有作答" line under it?"""
    import nbformat
    from nbclient import NotebookClient

    for name, nb in _half_answered(course).items():
        node = nbformat.reads(json.dumps(nb), as_version=4)
        NotebookClient(node, timeout=60, kernel_name="python3").execute()  # raises on the first error
        cells = node.cells
        answers = [i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("solution") and c.cell_type == "code"]
        tests = [i for i, c in enumerate(cells) if _is_test(c)]
        later = [i for i in tests if i > answers[1]]
        lines = practice = 0
        for i in later:
            if "checks." in _text(cells[i]).split('"""', 2)[-1]:  # a visible check (the release has no hidden one)
                assert "还没有作答" in _outputs(cells[i]) and _styled(cells[i]), (name, cells[i].source)
                lines += 1
            follower = cells[i + 1] if i + 1 < len(cells) else None
            if follower is not None and PRACTICE_TAG in follower.metadata.get("tags", []):  # right under its test
                assert follower.metadata["jupyter"]["source_hidden"] is True
                assert "✘ 练习自测" in _outputs(follower) and "还没有作答" in _outputs(follower), (name, follower.source)
                assert _styled(follower) and "Traceback" not in _outputs(follower)
                practice += 1
        assert lines and practice, (name, lines, practice)
        first_practice = [c for c in cells[answers[0]:answers[1]] if PRACTICE_TAG in c.metadata.get("tags", [])]
        assert all("✔ 练习自测" in _outputs(c) and "✘" not in _outputs(c) for c in first_practice), name


@pytest.mark.slow
def test_validate_fails_an_unanswered_part_b(course, tmp_path):
    """Does nbgrader's Validate report NB02 part B as "还没有作答" when only part A is answered (no pass on A's values)?"""
    import os

    from nbgrader.validator import Validator

    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    path = tmp_path / "02-ring-allreduce.ipynb"
    path.write_text(json.dumps(_half_answered(course)["02-ring-allreduce"], ensure_ascii=False), encoding="utf-8")
    failed = Validator().validate(str(path))["failed"]
    shown = "\n".join(f["raw_error"] for f in failed)
    assert "ex2_send_per_rank_GB 还没有作答" in shown and "ex2_lower_bound_ms 还没有作答" in shown
    assert not any("ex1_" in f["source"] for f in failed)  # part A, answered, passes
