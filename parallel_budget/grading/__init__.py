"""Autograding of the course's nbgrader exercises, in rooms along its flow.

An upload comes in and is split into one submission per student (:mod:`.intake`); each
student's notebooks run in kernels inside a bubblewrap sandbox (:mod:`.sandbox`); their test
cells are judged by trusted code on the answers' plain values (:mod:`.scoring`, with
:mod:`parallel_budget.answers`); scores go into the gradebook and out as feedback
(:mod:`.results`); the fleet carries every student through these stages on a local pool
or a Dask cluster (:mod:`.fleet`).  A stage imports only from stages before it.

At the top: :mod:`.course` (layout and nbgrader configuration) and :mod:`.bounds` (every
limit of a run), which every stage may use; :mod:`.runner` (the one ``grade`` command),
:mod:`.release` (``solutions/`` -> ``exercises/``) and ``python -m parallel_budget.grading
--help``, which use the stages.
"""

# A notebook released before the answer readers moved to parallel_budget.answers (December
# 2026) says ``from parallel_budget.grading import checks, diagnose`` in its test and practice
# cells; those two names still resolve, lazily, so such a release still grades and self-checks
# (scoring/integrity.py reads that import line as today's).
MOVED = {"checks": "parallel_budget.answers.checks", "diagnose": "parallel_budget.answers.diagnose"}


def __getattr__(name: str):
    if name in MOVED:
        import importlib

        return importlib.import_module(MOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
