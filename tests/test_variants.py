"""Per-student numbers (c.Variants.enabled): a stable rule, the notebook shows them, the grader uses the folder's id.

One real grade run of a class of three on a variant release of NB02 (module fixture):
alice and bob answer their own numbers, heidi hands in bob's notebook, bob's id typed in it too.
"""

from __future__ import annotations

import copy
import json

import pytest

from grading_helpers import ROOT, course_copy, flags, scores
from test_questions import NOTEBOOK_QUESTIONS, hidden_checks

from parallel_budget import questions
from parallel_budget.answers import checks
from parallel_budget.grading.intake import synthetic, student_numbers
from parallel_budget.grading.course import Course, load_config
from parallel_budget.grading.release import generate
from parallel_budget.questions import core, variants

COURSE, A = "parallel-budget", "lesson"
NB = "02-ring-allreduce"

# Committed golden values: the rule must give these on any machine, forever (changing them re-numbers a class).
GOLDEN_SEED = 813357  # seed("parallel-budget", "lesson", "02-ring-allreduce", "s001", "ring.ex2_send")
GOLDEN = {
    "01-two-rank-update": {"update.nb01_updated_w": {"w": 2, "grads": [4, 2, 1, 5], "lr": 0.05},
                           "update.nb01_buggy_w": {"w": 2, "grads": [4, 2, 1, 5], "lr": 0.05}},
    "02-ring-allreduce": {"ring.ex2_send": {"ranks": 16, "grad": 8, "bw": 12.5},
                          "ring.ex2_bound": {"ranks": 16, "grad": 8, "bw": 12.5},
                          "ring.nb02_step": {"compute": 600, "ranks": 4, "grad": 4, "bw": 50},
                          "ring.nb02_speedup": {"compute": 600, "ranks": 4, "grad": 4, "bw": 50},
                          "ring.nb02_efficiency": {"compute": 600, "ranks": 4, "grad": 4, "bw": 50},
                          "ring.nb02_overlap": {"compute": 600, "ranks": 4, "grad": 4, "bw": 50, "last": 10}},
    "03-zero-memory": {"zero.nb03_zero2": {"params": 13, "dp": 4},
                       "zero.nb03_peak": {"params": 13, "dp": 4, "act": 6},
                       "zero.nb03_smallest": {"params": 13, "dp": 4, "act": 6, "memory": 40},
                       "zero.nb03_zero3_send": {"params": 13, "dp": 4}},
    "04-tp-pp": {"tppp.nb04_bubble": {"stages": 16, "micro": 8},
                 "tppp.nb04_tp_send": {"batch": 4, "seq": 1024, "hidden": 8192, "tp": 4}},
    # the first draw, [130, 115, 130, 195] (rank 3 late), was the book's slow_rank: rejected, the next seed is used
    "05-debugging": {"debugging.nb05_slow_rank": {"arrivals": [100, 160, 115, 100]},
                     "debugging.nb05_late_step": {"arrivals": [100, 160, 115, 100], "comm": 80},
                     "debugging.nb05_rank0_wait": {"arrivals": [100, 160, 115, 100], "comm": 80}},
}


def test_the_rule_gives_the_committed_numbers():
    """Does a fixed id give the committed seed and parameters (sha256, never hash()), in every notebook?"""
    assert variants.seed(COURSE, A, NB, "s001", "ring.ex2_send") == GOLDEN_SEED
    for nb, expected in GOLDEN.items():
        assert variants.params(COURSE, A, nb, "s001") == expected, nb


def test_a_refused_draw_moves_to_the_next_seed(monkeypatch):
    """If the model refuses a scenario's draw, does the rule take the next seed (and only then)?

    No question of today's bank refuses a draw (tests/test_questions.py checks that), so the
    refusal is made here: the overlap question refuses s003's first seed.
    """
    scenario = next(sc for sc in variants.SCENARIOS[NB] if "ring.nb02_overlap" in dict(sc.tests).values())
    first = variants.seed(COURSE, A, NB, "s003", scenario.lead)
    refused = variants._draw(questions.QUESTIONS, scenario, first)["ring.nb02_overlap"]
    real = variants._expected

    def expected(qid, frozen):
        if qid == "ring.nb02_overlap" and frozen == refused:
            raise ValueError("refused for the test")
        return real(qid, frozen)

    monkeypatch.setattr(variants, "_expected", expected)
    uncached = variants._params.__wrapped__
    mine = dict(uncached(COURSE, A, NB, "s003"))["ring.nb02_overlap"]
    assert mine != refused
    after = first % core.SEED_MAX + 1
    while variants._draw(questions.QUESTIONS, scenario, after) is None:  # the book rule may reject some too
        after = after % core.SEED_MAX + 1
    assert mine == variants._draw(questions.QUESTIONS, scenario, after)["ring.nb02_overlap"]
    assert dict(dict(uncached(COURSE, A, NB, "s001"))["ring.nb02_overlap"]) == GOLDEN[NB]["ring.nb02_overlap"]


def _seed_where(qid, want) -> int:
    """The first seed whose raw draw of question ``qid`` satisfies ``want(params, expected)``."""
    q = questions.get(qid)
    return next(s for s in range(1, 5000) if want(q.generate(s), q.expected(q.generate(s))))


def test_a_draw_that_is_the_books_answer_is_rejected():
    """Are the issue's two draws rejected: NB04's bubble at the book's own 8 stages / 24 microbatches, and an NB03
    peak within 1% of the book's 32.25 GB (32.125 GB); and a draw whose answer is one of the book's named slips?"""
    from parallel_budget.model.units import Q_

    bank = questions.QUESTIONS
    own = _seed_where("tppp.nb04_bubble", lambda ps, e: ps == {"stages": 8, "micro": 24})
    assert variants._draw(bank, variants.SCENARIOS["04-tp-pp"][0], own) is None
    close = _seed_where("zero.nb03_peak", lambda ps, e: ps != {"params": 7, "dp": 8, "act": 6}
                        and abs(core.magnitude(e.value) / 32.25e9 - 1) < 0.01)
    assert variants.near_book("zero.nb03_peak", questions.get("zero.nb03_peak").expected(
        questions.get("zero.nb03_peak").generate(close)))
    assert variants._draw(bank, variants.SCENARIOS["03-zero-memory"][0], close) is None
    slip = _seed_where("ring.ex2_send", lambda ps, e: e.matches(Q_(14, "GB")))  # the book's "recv" slip, 2 x 7 GB
    assert variants._draw(bank, variants.SCENARIOS[NB][0], slip) is None
    late = _seed_where("debugging.nb05_slow_rank", lambda ps, e: e == 3)  # an integer answer: equal is the book's
    assert variants._draw(bank, variants.SCENARIOS["05-debugging"][0], late) is None
    mine = variants.params(COURSE, A, NB, "s001")["ring.ex2_send"]
    assert not variants.near_book("ring.ex2_send", questions.get("ring.ex2_send").expected(mine))


@pytest.mark.parametrize("notebook", sorted(variants.SCENARIOS))
def test_no_students_right_answer_is_a_book_answer(notebook):
    """For 80 ids, is every varied right answer away from the book's answer and the book's named slips?"""
    for i in range(80):
        for qid, ps in variants.params(COURSE, A, notebook, f"s{i:03d}").items():
            mine = variants._expected(qid, tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in ps.items()))
            assert not variants.near_book(qid, mine), (notebook, i, qid, ps)


def test_different_ids_and_courses_give_different_numbers():
    """Do 40 ids get 40 different sets of numbers, does each scenario spread, and does the course id count?"""
    ids = [f"s{i:03d}" for i in range(40)]
    whole = {json.dumps([variants.params(COURSE, A, nb, s) for nb in variants.SCENARIOS], sort_keys=True) for s in ids}
    assert len(whole) == len(ids)
    for nb, scenarios in variants.SCENARIOS.items():
        for scenario in scenarios:
            drawn = {json.dumps(variants.params(COURSE, A, nb, s)[scenario.lead], sort_keys=True) for s in ids}
            assert len(drawn) >= 10, (nb, scenario.lead, len(drawn))
    assert variants.params("another-course", A, NB, "s001") != variants.params(COURSE, A, NB, "s001")
    assert variants.params(COURSE, A, NB, "S001") != variants.params(COURSE, A, NB, "s001")  # ids are exact


def test_scenarios_agree_with_the_notebooks_and_the_bank():
    """Does every varied test cell exist, check its question's variable with the same kind, and sit under its prompt?"""
    for nb, scenarios in variants.SCENARIOS.items():
        cells = json.loads((ROOT / "solutions" / A / f"{nb}.ipynb").read_text(encoding="utf-8"))["cells"]
        order = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in cells]
        for scenario in scenarios:
            for prompt, pairs in scenario.parts:
                for test, qid in pairs:
                    assert qid in NOTEBOOK_QUESTIONS[nb] and order.index(prompt) < order.index(test), (nb, test)
                    src = "".join(cells[order.index(test)]["source"])
                    call = src.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
                    q = questions.get(qid)
                    assert f'"{q.answer}"' in call, (nb, test)
                    assert ('"fraction"' in call) == (q.kind == "fraction"), (nb, test)
                    assert ("checks.exact" in call) == (q.kind == "int"), (nb, test)
        # the questions of one scenario see one set-up: shared parameter names have one value
        for s in ("s001", "s002", "zz"):
            mine = variants.params(COURSE, A, nb, s)
            for scenario in scenarios:
                seen = {}
                for _, qid in scenario.tests:
                    for k, val in mine[qid].items():
                        assert seen.setdefault(k, val) == val, (nb, qid, k)
    assert len(hidden_checks(NB)) == len(NOTEBOOK_QUESTIONS[NB])


@pytest.mark.parametrize("student", ["s001", "s003", "alice", "学生甲", "x" * 64])
def test_every_variant_is_usable_and_its_right_answer_passes(student):
    """For each varied question, does the student's expected value exist and does its right answer pass the check?"""
    for nb in variants.SCENARIOS:
        for qid, ps in variants.params(COURSE, A, nb, student).items():
            q = questions.get(qid)
            e = variants.expected(COURSE, A, nb, student, qid)
            right = ("None" if e is None else str(e)) if q.kind == "int" else core.show(core.magnitude(e.value), core.answer_unit(q))
            assert core.check(q, ps, right)["ok"], (nb, qid, right)


@pytest.fixture()
def kernel(monkeypatch):
    """The notebook side's state as a fresh student kernel has it."""
    monkeypatch.setattr(variants, "_state", {"who": None, "where": None, "graded": None})
    monkeypatch.delenv(variants.ENV, raising=False)


def test_the_notebook_says_in_chinese_what_is_missing(kernel, capsys, monkeypatch):
    """Without an id, with a bad one, with a number, or before the id cell: a Chinese message, no traceback?"""
    assert variants.use("", COURSE, A, NB) is None
    assert "MY_STUDENT_ID 是空的" in capsys.readouterr().out
    variants.use("a b", COURSE, A, NB)
    assert "不合规" in capsys.readouterr().out
    variants.use(123, COURSE, A, NB)
    assert "需要写成字符串" in capsys.readouterr().out
    variants.show("prompt_ex2")
    variants.check("test_ex2_send", 1.0)
    out = capsys.readouterr().out
    assert out.count("还不知道你的学生编号") == 2 and "Traceback" not in out
    monkeypatch.setenv(variants.ENV, "hub-user")
    assert variants.use("", COURSE, A, NB) == "hub-user" and "JupyterHub 登录名" in capsys.readouterr().out
    assert variants.use("s001", COURSE, A, NB) == "s001" and "与 JupyterHub 登录名 hub-user 不同" in capsys.readouterr().out


def test_the_notebook_shows_the_students_numbers_and_checks_them(kernel, capsys):
    """Does the "你的数字" cell print the bank's prompts with s001's numbers, and the practice check use them?"""
    variants.use("s001", COURSE, A, NB)
    capsys.readouterr()
    variants.show("prompt_ex2")
    out = capsys.readouterr().out
    assert "学生编号 s001" in out and "16 个 rank，每个 rank 有 8 GB 梯度，单向有效带宽 12.5 GB/s" in out
    assert "1. 每个 rank 发送多少数据？（变量 ex2_send_per_rank_GB）" in out
    right = core.magnitude(variants.expected(COURSE, A, NB, "s001", "ring.ex2_send").value) / 1e9
    with checks.practice("ex2_send_per_rank_GB"):
        variants.check("test_ex2_send", right)
    with checks.practice("ex2_send_per_rank_GB"):
        variants.check("test_ex2_send", 7.0)  # the book's answer, 2 x 7/8 x 4 GB: wrong for s001
    out = capsys.readouterr().out
    assert "✔ 练习自测：ex2_send_per_rank_GB 的数值正确" in out and "✘ 练习自测（ex2_send_per_rank_GB）" in out
    assert "这是书中数字（正文里的例子）的答案" in out  # the named slip of answering with the prose's numbers
    variants.graded_as("s002")  # what the grader runs first in a grading kernel
    variants.use("s001", COURSE, A, NB)
    assert "评分时按提交文件夹的编号 s002（notebook 里填的是 s001）" in capsys.readouterr().out


def test_swap_expects_the_students_numbers_and_names_the_copied_classmate():
    """Does the grader's hook replace the book's expected value, and record a copy only when a classmate's fits?"""
    found = []
    swap = student_numbers.Swap(COURSE, A, NB, "alice", "test_ex2_send", ["alice", "bob", "heidi"], found)
    book = questions.get("ring.ex2_send").expected(questions.get("ring.ex2_send").defaults())
    mine = swap.value("ex2_send_per_rank_GB", 1.0, book, None)
    assert mine == variants.expected(COURSE, A, NB, "alice", "ring.ex2_send") and mine != book
    value = {s: core.magnitude(variants.expected(COURSE, A, NB, s, "ring.ex2_send").value) for s in ("alice", "bob", "heidi")}
    assert value["alice"] == value["bob"] != value["heidi"]  # alice and bob differ only in bandwidth
    swap.value("ex2_send_per_rank_GB", f"{value['heidi']} B", book, None)
    swap.value("ex2_send_per_rank_GB", f"{value['bob']} B", book, None)  # right for alice too: nothing recorded
    swap.value("ex2_send_per_rank_GB", f"{2 * value['alice']} B", book, None)  # a named slip (receive counted): nothing
    swap.value("other_name", 1.0, book, None)  # a check of another variable is left alone
    assert found == [{"notebook": NB, "cell": "test_ex2_send", "answer": "ex2_send_per_rank_GB", "peers": ["heidi"]}]
    swap.value("ex2_send_per_rank_GB", "7 GB", book, None)  # the book's answer (8 ranks, 4 GB): its own row
    assert found[1:] == [{"notebook": NB, "cell": "test_ex2_send", "answer": "ex2_send_per_rank_GB", "trick": "book_answer"}]
    assert [student_numbers.trick_of(f) for f in found] == ["possible_copying", "book_answer"]
    assert "等于书中数字的答案" in student_numbers.finding_detail(found[1])
    assert student_numbers.Swap(COURSE, A, NB, "alice", "test_ex1_send").value("ex1_send_per_rank_GB", 1.0, book, None) is book


def test_release_cells_only_with_the_setting(tmp_path):
    """Does the setting default to off, and does a variant release add the id, numbers and own-variant practice cells?"""
    root = course_copy(tmp_path / "c", (NB,))
    assert student_numbers.enabled(load_config(Course(root))) is False
    committed = json.loads((root / "exercises" / A / f"{NB}.ipynb").read_text(encoding="utf-8"))
    assert not any(c.get("id", "").startswith("variant") for c in committed["cells"])
    out = student_numbers.add_variant_cells(copy.deepcopy(committed), COURSE, A, NB)
    ids = [c.get("id") for c in out["cells"]]
    assert ids.index("variant-id") == ids.index("practice-note") + 2
    assert [i for i in ids if i.startswith("variant-prompt")] == ["variant-prompt_ex2", "variant-prompt_step", "variant-prompt_overlap"]
    practice = {c["id"]: "".join(c["source"]) for c in out["cells"] if c.get("id", "").startswith("practice-test")}
    assert "variants.check('test_ex2_send', ex2_send_per_rank_GB)" in practice["practice-test_ex2_send"]
    assert "diagnose.ring_send(4, \"2 GB\", \"12.5 GB/s\")" in practice["practice-test_ex1_send"]  # part A: the book's
    assert not any("nbgrader" in c["metadata"] for c in out["cells"] if c.get("id", "").startswith("variant"))
    assert student_numbers.add_variant_cells(committed, COURSE, A, "no-such-notebook") is committed


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A variant release of NB02 graded once: alice and bob right for themselves, heidi hands in bob's notebook,
    carol the book's answers."""
    root = course_copy(tmp_path_factory.mktemp("variants"), (NB,))
    with open(root / "autograde" / "nbgrader_config.py", "a", encoding="utf-8") as fh:
        fh.write("\nc.Variants.enabled = True\n")
    course = Course(root)
    generate(course, A, course.release)
    base = synthetic.submission(course, A)
    folder = tmp_path_factory.mktemp("class")
    for name in ("alice", "bob"):
        nbs = synthetic.own_numbers(course, A, name, copy.deepcopy(base))
        for c in nbs[NB]["cells"]:
            if c.get("id") == "variant-id":
                c["source"] = "".join(c["source"]).replace('MY_STUDENT_ID = ""', f'MY_STUDENT_ID = "{name}"')
        synthetic.write_student(folder, name, A, nbs)
        if name == "bob":
            synthetic.write_student(folder, "heidi", A, copy.deepcopy(nbs))  # bob's id typed in it too
    synthetic.write_student(folder, "carol", A, {NB: copy.deepcopy(base[NB])})  # the book's answers (solutions/)
    from parallel_budget.grading.runner import grade

    summary = grade(folder, root=root, jobs=2, timeout=10, quiet=True)
    assert sorted(summary["graded"]) == ["alice", "bob", "carol", "heidi"], summary
    return course


VARIED = [gid for s in variants.SCENARIOS[NB] for gid, _ in s.tests]


@pytest.mark.slow
def test_own_numbers_score_full_points(graded):
    """Do alice and bob, each right for their own numbers, get every automatic point, with no integrity row?"""
    sc = scores(graded.gradebook)
    for student in ("alice", "bob"):
        mine = {k[2]: v for k, v in sc.items() if k[0] == student and k[2].startswith("test_")}
        assert len(mine) == 8 and all(v[0] == v[1] for v in mine.values()), (student, mine)
    assert not {f for f in flags(graded.gradebook) if f[0] in ("alice", "bob")}


@pytest.mark.slow
def test_copied_answers_score_zero_and_are_flagged_naming_both(graded):
    """Does heidi get 0 on every varied cell (bob's numbers, bob's id typed in), full on part A, and a row naming bob?"""
    from parallel_budget.answers.diagnose import diagnose
    from parallel_budget.grading.intake.student_numbers import _matches

    for qid in variants.params(COURSE, A, NB, "bob"):  # the pair is chosen so that no answer coincides
        mine, bobs = variants.expected(COURSE, A, NB, "heidi", qid), variants.expected(COURSE, A, NB, "bob", qid)
        assert not _matches(mine, bobs.value) and not diagnose(mine, bobs.value), qid
    sc = scores(graded.gradebook)
    for gid in VARIED:
        assert sc[("heidi", NB, gid)][0] == 0, gid
    assert sc[("heidi", NB, "test_ex1_send")] == (2.0, 2.0) and sc[("heidi", NB, "test_ex1_bound")] == (2.0, 2.0)
    assert {f for f in flags(graded.gradebook) if f[0] == "heidi"} == {("heidi", NB, gid, "possible_copying") for gid in VARIED}
    rows = [line for line in graded.integrity_csv.read_text(encoding="utf-8").splitlines() if "possible_copying" in line]
    assert len(rows) == len(VARIED) and all(r.startswith("heidi,") and "bob 的数字的正确答案" in r for r in rows)


@pytest.mark.slow
def test_the_books_answers_score_zero_on_varied_cells_and_get_a_row(graded):
    """Does carol, who hands in the book's answers, get 0 on every varied cell, full on part A, a "book_answer" row
    per varied cell (and no possible_copying), and feedback saying these are the book's numbers' answers?"""
    sc = scores(graded.gradebook)
    assert all(sc[("carol", NB, gid)][0] == 0 for gid in VARIED)
    assert sc[("carol", NB, "test_ex1_send")] == (2.0, 2.0) and sc[("carol", NB, "test_ex1_bound")] == (2.0, 2.0)
    assert {f for f in flags(graded.gradebook) if f[0] == "carol"} == {("carol", NB, gid, "book_answer") for gid in VARIED}
    rows = [line for line in graded.integrity_csv.read_text(encoding="utf-8").splitlines() if line.startswith("carol,")]
    assert len(rows) == len(VARIED) and all("与书中公开答案一致" in r and "等于书中数字的答案" in r for r in rows)
    html = (graded.feedback / "carol" / A / f"{NB}.html").read_text(encoding="utf-8")
    assert html.count("这是书中数字（正文里的例子）的答案") >= len(VARIED) - 1  # speedup/efficiency may share a cell's text


@pytest.mark.slow
def test_the_graded_notebook_shows_the_folders_numbers(graded):
    """Do heidi's graded notebook and feedback show heidi's numbers (her folder's id), not bob's that she typed?"""
    nb = json.loads((graded.autograded / "heidi" / A / f"{NB}.ipynb").read_text(encoding="utf-8"))
    out = {c.get("id"): "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                                for o in c.get("outputs", [])) for c in nb["cells"]}
    assert "评分时按提交文件夹的编号 heidi（notebook 里填的是 bob）" in out["variant-id"]
    shown = variants.shown(variants.prompts(COURSE, A, NB, "heidi", "prompt_ex2"))
    assert shown in out["variant-prompt_ex2"] and shown != variants.shown(variants.prompts(COURSE, A, NB, "bob", "prompt_ex2"))
    assert "✘ 练习自测" in out["practice-test_ex2_send"]
    html = (graded.feedback / "heidi" / A / f"{NB}.html").read_text(encoding="utf-8")
    assert "学生编号 heidi" in html and "学生编号 bob" not in html


def test_the_numbers_command_prints_a_students_parts(capsys):
    """Does `python -m parallel_budget.grading numbers s001` print s001's parts, say the setting is off, and refuse a bad id?"""
    from parallel_budget.grading.__main__ import main

    assert main(["--root", str(ROOT), "numbers", "s001"]) == 0
    out = capsys.readouterr().out
    assert "没有打开（c.Variants.enabled = False" in out and "== s001 ==" in out
    assert "[02-ring-allreduce / prompt_ex2]\n16 个 rank，每个 rank 有 8 GB 梯度，单向有效带宽 12.5 GB/s。" in out
    assert out.count("[") == sum(len(s.parts) for ss in variants.SCENARIOS.values() for s in ss)
    assert main(["--root", str(ROOT), "numbers", "a/b"]) == 2 and "不合规" in capsys.readouterr().err


def test_copies_are_compared_with_the_run_and_the_gradebook(tmp_path):
    """Are the classmates compared with everyone in this run plus every student already in the gradebook?"""
    import sqlite3

    from parallel_budget.grading.runner import class_ids

    con = sqlite3.connect(str(tmp_path / "base.db"))
    con.execute("CREATE TABLE student (id TEXT PRIMARY KEY)")
    con.executemany("INSERT INTO student VALUES (?)", [("earlier",), ("bob",)])
    con.commit()
    con.close()
    assert class_ids(tmp_path, ["bob", "alice"]) == ["alice", "bob", "earlier"]
    (tmp_path / "empty").mkdir()
    sqlite3.connect(str(tmp_path / "empty" / "base.db")).close()
    assert class_ids(tmp_path / "empty", ["alice"]) == ["alice"]
