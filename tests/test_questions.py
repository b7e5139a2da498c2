"""Does the question bank hold every numeric question once, agree with the notebooks, and stay fresh?"""

from __future__ import annotations

import json
import math
import re

import pytest

from conftest import ROOT
from parallel_budget import questions
from parallel_budget.answers import diagnose
from parallel_budget.questions import core, site, vectors

# The autograded notebook questions, in the order their hidden tests check them.
NOTEBOOK_QUESTIONS = {
    "01-two-rank-update": ["update.nb01_updated_w", "update.nb01_buggy_w"],
    "02-ring-allreduce": ["ring.ex1_send", "ring.ex1_bound", "ring.ex2_send", "ring.ex2_bound",
                          "ring.nb02_step", "ring.nb02_speedup", "ring.nb02_efficiency", "ring.nb02_overlap"],
    "03-zero-memory": ["zero.nb03_zero2", "zero.nb03_peak", "zero.nb03_smallest", "zero.nb03_zero3_send"],
    "04-tp-pp": ["tppp.nb04_bubble", "tppp.nb04_tp_send"],
    "05-debugging": ["debugging.nb05_slow_rank", "debugging.nb05_late_step", "debugging.nb05_rank0_wait"],
}
# Read off a log, not computed from numbers: not a numeric question (choices and code are not in the bank either).
NOT_NUMERIC = {"hang_rank"}


class Recorder:
    """Stands in for ``checks`` in a hidden test cell: records what each check expects."""

    def __init__(self):
        self.calls = []

    def value(self, name, given, expected, kind=None):
        self.calls.append((name, expected))

    def exact(self, name, given, right, hint="", allow_none=False):
        if (type(right) is int or right is None) and name not in NOT_NUMERIC:
            self.calls.append((name, right))

    def visible(self, *a, **k):
        pass

    kind_is = visible


def hidden_checks(notebook: str) -> list:
    """(answer name, expected) of every numeric hidden check of a solution notebook, in order."""
    import parallel_budget as pb

    nb = json.loads((ROOT / "solutions" / "lesson" / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    rec = Recorder()
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or "### BEGIN HIDDEN TESTS" not in src:
            continue
        hidden = src.split("### BEGIN HIDDEN TESTS")[1].split("### END HIDDEN TESTS")[0]
        if "consistent_checkpoint" in hidden:
            continue
        exec(hidden, {"checks": rec, "diagnose": diagnose, "pb": pb, **{n: None for n in re.findall(r"\b(\w+)\s*,", hidden)},
                      **{a: None for a in re.findall(r'checks\.\w+\("(\w+)"', hidden)}})
    return rec.calls


def _same(a, b):
    if a is None or isinstance(a, int):
        return a == b
    return (math.isclose(core.magnitude(a.value), core.magnitude(b.value), rel_tol=1e-12) and a.rel_tol == b.rel_tol
            and [(k, pytest.approx(core.magnitude(v), rel=1e-12)) for k, v in a.mistakes]
            == [(k, core.magnitude(v)) for k, v in b.mistakes])


@pytest.mark.parametrize("notebook", sorted(NOTEBOOK_QUESTIONS))
def test_notebook_hidden_tests_expect_the_banks_default_answers(notebook):
    """Does each autograded question's hidden test expect exactly what the bank's question expects at the book's numbers?"""
    calls = hidden_checks(notebook)
    ids = NOTEBOOK_QUESTIONS[notebook]
    assert [name for name, _ in calls] == [questions.get(i).answer for i in ids]
    for (name, expected), qid in zip(calls, ids):
        q = questions.get(qid)
        assert _same(expected, q.expected(q.defaults())), f"{notebook}: {name} differs from {qid}"


def test_every_question_has_a_home_and_unique_id():
    """Is every question in a chapter of the bank's index, and are the notebooks' questions all in the bank?"""
    assert len(questions.QUESTIONS) >= 25
    for q in questions.QUESTIONS.values():
        assert q.chapter in questions.CHAPTERS and q.id.split(".")[0] in {"update", "ring", "zero", "tppp", "debugging", "plan"}
    listed = [i for ids in NOTEBOOK_QUESTIONS.values() for i in ids]
    assert len(set(listed)) == len(listed) and set(listed) <= set(questions.QUESTIONS)


@pytest.mark.parametrize("qid", sorted(questions.QUESTIONS))
def test_draws_stay_in_range_and_the_right_answer_passes(qid):
    """Do seeded draws stay within the options, fill every placeholder, and pass the grader with the right value?"""
    q = questions.get(qid)
    options = {p.name: p.options for p in q.params}
    for seed in (0, 1, 5, 77, 4321, questions.SEED_MAX):
        params = q.generate(seed)
        assert params == q.generate(seed)  # reproducible
        if seed:
            for name, value in params.items():
                o = options[name]
                if isinstance(o, dict):
                    assert len(value) in o["len"] and sum(v not in o["each"] for v in value) <= ("late" in o)
                else:
                    assert value in o
        for text in (q.prompt(params), q.solution(params)):
            assert "{" not in text and "}" not in text and "nan" not in text.lower() and "inf" not in text.lower()
        e = q.expected(params)
        right = ("None" if e is None else str(e)) if q.kind == "int" else core.show(core.magnitude(e.value), core.answer_unit(q) or "")
        assert core.check(q, params, right)["ok"], (seed, right)
    assert q.generate(0) == q.defaults()


HAN = "\u4e00-\u9fff"
ASCII_NEXT_TO_HAN = re.compile(rf"[{HAN}][,;:?!()]|[,;:?!()][{HAN}]")


@pytest.mark.parametrize("qid", sorted(questions.QUESTIONS))
def test_prompts_and_solutions_use_full_width_punctuation(qid):
    """Does the bank's own Chinese text (prompt, solution, label) keep ASCII , ; : ? ! ( ) away from Chinese characters?"""
    q = questions.get(qid)
    for seed in (0, 1, 2, 3):
        params = q.generate(seed)
        for text in (q.prompt(params), q.solution(params), site.label(q), q.hint):
            assert not ASCII_NEXT_TO_HAN.search(text), text


def test_messages_come_from_the_grader():
    """Is a named mistake's feedback in the page data worded as diagnose.MISTAKES, and is the bank JSON escaped?"""
    q = questions.get("ring.ex1_send")
    out = core.check(q, q.defaults(), "6")
    assert not out["ok"] and diagnose.MISTAKES["recv"] in out["message"]
    body = site.embed('<div class="pb-practice" data-q="ring.ex1_send"></div>')
    data = json.loads(re.search(r'<script type="application/json" id="pb-bank">(.*)</script>', body).group(1))
    assert data["mistakes"]["recv"] == diagnose.MISTAKES["recv"] and data["questions"][0]["id"] == "ring.ex1_send"
    assert "</" not in body.split('id="pb-bank">')[1][:-len("</script>")]
    with pytest.raises(ValueError, match="题库里没有"):
        site.embed('<div class="pb-practice" data-q="ring.nope"></div>')
    assert site.embed("<p>no practice</p>") == "<p>no practice</p>"


def test_vectors_are_fresh():
    """Is tests/vectors/questions.json what `python -m parallel_budget.questions.vectors` writes now?"""
    assert vectors.PATH.read_text(encoding="utf-8") == vectors.text(), "stale: run python -m parallel_budget.questions.vectors"


# The chapters' "检查自己" answers ({eval} names of the hidden first cell) and how each is shown.
CHAPTER_ANSWERS = [
    ("two-rank-update", "ch1_q3_w", "update.check_weight", lambda v: f"{v:.3g}"),
    ("ring-allreduce", "ch2_q1_send", "ring.check_send", lambda v: fmt(v)),
    ("ring-allreduce", "ch2_q2_factor", "ring.check_factor", lambda v: f"{v:.4g}"),
    ("ring-allreduce", "ch2_full_step", "ring.check_full_overlap", lambda v: fmt(v)),
    ("zero-memory", "ch3_q1_stage", "zero.check_stage", lambda v: f"ZeRO-{v}"),
    ("zero-memory", "ch3_q2_z1", "zero.check_z1", lambda v: fmt(v)),
    ("zero-memory", "ch3_q2_z3", "zero.check_z3", lambda v: fmt(v)),
    ("tp-pp", "ch4_q1_bubble", "tppp.check_bubble", lambda v: fmt_percent(v)),
    ("tp-pp", "ch4_q2_tp1", "tppp.check_tp_step", lambda v: fmt(v)),
    ("plan-builder", "ch6_q1_1f1b", "plan.check_stage_acts", lambda v: fmt(v)),
]


def fmt(v):
    from parallel_budget import fmt as pb_fmt

    return pb_fmt(v)


def fmt_percent(v):
    from parallel_budget import fmt_percent as pb_pct

    return pb_pct(v)


def first_cell_values(page: str) -> dict:
    text = (ROOT / "book" / f"{page}.md").read_text(encoding="utf-8")
    code = re.search(r"```\{code-cell\}[^\n]*\n---\n.*?\n---\n(.*?)\n```", text, flags=re.S).group(1)
    scope: dict = {}
    exec(compile(code, f"{page}.md", "exec"), scope)
    return scope


@pytest.mark.parametrize("page", sorted({c[0] for c in CHAPTER_ANSWERS}))
def test_chapter_answers_equal_the_banks_default_answers(page):
    """Does each "检查自己" dropdown show the answer the bank expects at the book's numbers (one question, one answer)?"""
    scope = first_cell_values(page)
    for _, name, qid, shown in (c for c in CHAPTER_ANSWERS if c[0] == page):
        q = questions.get(qid)
        e = q.expected(q.defaults())
        assert str(scope[name]) == shown(e if q.kind == "int" else e.value), f"{page}: {name} vs {qid}"


class FakeApp:
    def __init__(self):
        self.files = []

    def add_js_file(self, filename, **kwargs):
        self.files.append(filename)

    add_css_file = add_js_file


def loaded(body: str):
    from parallel_budget.book import sphinxext

    app, context = FakeApp(), {"body": body}
    sphinxext._add_tools(app, "p", "page.html", context, None)
    return app.files, context["body"]


def test_practice_assets_and_bank_only_where_mounted_and_within_budget():
    """Does a page with a practice box get model.js before practice.js, its bank, and stay within the JS + CSS budget?"""
    files, body = loaded('<div class="pb-practice" data-q="ring.ex1_send"></div>')
    assert files.index("calc/model.js") < files.index("calc/practice.js") and "calc/practice.css" in files
    assert 'id="pb-bank"' in body and "calc/ui.js" not in files
    files, body = loaded('<div class="pb-calc" data-calc="ring"></div><div class="pb-practice" data-q="ring.nb02_step"></div>')
    assert files.count("calc/model.js") == 1 and files.index("calc/model.js") < files.index("calc/practice.js")
    from parallel_budget.book import minified

    shipped = minified.minified_sizes()  # the site serves the minified twins
    assert sum(shipped[f.removeprefix("calc/")] for f in files) <= minified.BUDGET
    files, body = loaded('<div class="pb-record"></div><div class="pb-practice-summary"></div>')
    assert "calc/practice.js" in files and '"index"' in body
    files, body = loaded("<p>nothing to practise</p>")
    assert "calc/practice.js" not in files and "pb-bank" not in body


def test_practice_mounts_are_plain_html_blocks():
    """Is every practice mount a plain HTML block (rendered on the site, invisible in JupyterLab), never in a {raw} block?"""
    for md in sorted((ROOT / "book").glob("*.md")):
        text = md.read_text(encoding="utf-8")
        assert not re.search(r"```\{raw\} html\n[^`]*pb-practice", text), f"{md.name}: practice mount in a raw block"
        for block in re.findall(r"(?:^<div class=\"pb-practice[^\n]*\n)+", text, flags=re.M):
            start = text.index(block)
            assert text[start - 2:start] == "\n\n" and text[start + len(block):start + len(block) + 1] in ("\n", ""), md.name


def test_pages_with_practice_depend_on_the_bank():
    """Is a page that mounts a practice box re-written when a question, the grader's wording or a formula changes?"""
    from types import SimpleNamespace

    from parallel_budget.book import sphinxext

    def deps(source):
        noted = []
        env = SimpleNamespace(docname="p", note_dependency=noted.append)
        sphinxext._note_package_dependencies(SimpleNamespace(env=env), "p", [source])
        return {p.replace("\\\\", "/").split("/work/")[-1].split("/", 1)[-1] for p in noted}

    box = deps('<div class="pb-practice" data-q="ring.ex1_send"></div>')
    for f in ("parallel_budget/questions/ring.py", "parallel_budget/answers/diagnose.py", "parallel_budget/model/communication.py"):
        assert any(p.endswith(f) for p in box), f
    summary = deps('<div class="pb-practice-summary"></div>')
    assert any(p.endswith("book/tp-pp.md") for p in summary)
    assert not deps("<p>prose only</p>")


def test_stage_activations_and_its_slips_follow_the_plan_builder():
    """Does diagnose.stage_activations expect 1F1B's min(p, m) microbatches of L/p layers, and are its slips
    GPipe's m microbatches, all L layers and no sequence parallelism, as plan_budget computes them?"""
    import parallel_budget as pb

    q = questions.get("plan.check_stage_acts")
    args = q.args(q.defaults())
    plan = {k: v for k, v in args.items()} | {"zero_stage": 1}
    e = diagnose.stage_activations(**plan)
    per_layer = pb.activation_memory(args["seq"], args["micro_batch"], args["hidden"], args["heads"], args["tp"],
                                     sequence_parallel=True, recompute=args["recompute"], ffn=args["ffn"],
                                     gated=args["gated"], dropout=args["dropout"],
                                     flash_attention=args["flash_attention"]).per_layer
    layers, m = args["layers"] // args["pp"], args["global_batch"] // (args["dp"] * args["micro_batch"])
    assert math.isclose(core.magnitude(e.value), core.magnitude(per_layer * layers * min(args["pp"], m)))
    slips = dict(e.mistakes)
    assert math.isclose(core.magnitude(slips["flight_gpipe"]), core.magnitude(per_layer * layers * m))
    assert math.isclose(core.magnitude(slips["all_layers"]), core.magnitude(e.value) * args["pp"])
    assert core.magnitude(slips["no_sp"]) > core.magnitude(e.value)  # TP = 2 without SP keeps 10 sbh whole
    assert set(slips) <= set(diagnose.MISTAKES)
    out = questions.check(q, q.defaults(), f"{core.magnitude(slips['flight_gpipe']) / 1e9:.4g}")
    assert not out["ok"] and diagnose.MISTAKES["flight_gpipe"] in out["message"]


def test_every_draw_of_every_question_is_accepted_by_the_model():
    """Does every draw a practice box or a variant can make give numbers the model accepts (no error page)?

    A question whose options are all plain values is checked on every combination of them, so
    nothing is left to chance; one with list-valued options (arrival times) on 300 seeds.
    """
    import itertools

    for qid, q in questions.QUESTIONS.items():
        if any(isinstance(p.options, dict) for p in q.params):
            draws = (q.generate(seed) for seed in range(300))
        else:
            names = [p.name for p in q.params]
            draws = (dict(zip(names, combo)) for combo in itertools.product(*(p.options for p in q.params)))
        for params in draws:
            q.expected(params)
            assert q.solution(params), (qid, params)
