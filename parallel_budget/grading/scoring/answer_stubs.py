"""Released answer cells that name their answers and start from the sentinel ``...``.

nbgrader's ``ClearSolutions`` replaces each ``### BEGIN SOLUTION`` ... ``### END
SOLUTION`` region by one fixed stub (``raise NotImplementedError()`` by
default), which stops Run All at the first unanswered part.  :class:`AnswerStubs`
is ``ClearSolutions`` with a stub made for each region:

* a region at the top level of a cell becomes the configured comment
  (``c.ClearSolutions.code_stub``) and one line ``name = ...`` for every answer
  variable the region assigns, in order.  The answer variables are the names the
  notebook's test cells read (:func:`.trusted.free_names`, the same names the
  grader fetches), so ``comm_ms = ...`` of a worked solution is not stubbed but
  ``ex2_send_per_rank_GB`` is;
* an indented region is a function body and becomes the comment and
  ``return ...``, so calling the unanswered function returns the sentinel too.

``...`` is :data:`.checks.UNANSWERED`: every check reports it as "还没有作答";
in the student's own notebook that is a ✘ line and Run All goes on, in grading
the part scores 0 (:mod:`.checks`).  Markdown regions keep nbgrader's
``text_stub``.  ``autograde/nbgrader_config.py`` puts this class in the place
of ``ClearSolutions`` (:func:`release_preprocessors`).
"""

from __future__ import annotations

import ast
import re
import textwrap

from nbgrader.preprocessors import ClearSolutions

from .trusted import free_names, is_test_cell

SENTINEL = "..."


def answer_names(nb) -> set:
    """Every name a test cell of ``nb`` reads: the notebook's answer variables."""
    names: set = set()
    for cell in nb.cells:
        if is_test_cell(cell):
            try:
                names.update(free_names(cell.source))
            except SyntaxError:
                continue
    return names


def assigned(region: str) -> list[str]:
    """Names the region's top-level statements assign, in order, once each."""
    try:
        tree = ast.parse(textwrap.dedent(region))
    except SyntaxError:
        return []
    out: list[str] = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name) and name.id not in out:
                    out.append(name.id)
    return out


def stub(region: str, indent: str, answers: set, comment: list[str]) -> list[str]:
    """The released lines of one solution region."""
    if indent:  # a function body: calling it gives the sentinel back
        body = comment + [f"return {SENTINEL}"]
    else:
        body = comment + [f"{name} = {SENTINEL}" for name in assigned(region) if name in answers]
    return [indent + line for line in body]


class AnswerStubs(ClearSolutions):
    """``ClearSolutions`` whose code stub assigns ``...`` to each answer of the region (module docstring)."""

    def preprocess(self, nb, resources):
        self._answers = answer_names(nb)
        return super().preprocess(nb, resources)

    def _replace_solution_region(self, cell, language: str) -> bool:
        if cell.cell_type != "code":
            return super()._replace_solution_region(cell, language)
        comment = [line for line in self.code_stub[language].split("\n") if line.strip()]
        out, region, indent, replaced = [], None, "", False
        for line in cell.source.split("\n"):
            if self.begin_solution_delimeter in line:
                if region is not None:
                    raise RuntimeError("encountered nested begin solution statements")
                region, indent, replaced = [], re.match(r"\s*", line).group(0), True
            elif self.end_solution_delimeter in line and region is not None:
                out.extend(stub("\n".join(region), indent, getattr(self, "_answers", set()), comment))
                region = None
            elif region is not None:
                region.append(line)
            else:
                out.append(line)
        if region is not None:
            raise RuntimeError("no end solution statement found")
        cell.source = "\n".join(out)
        return replaced


def release_preprocessors() -> list:
    """nbgrader's ``GenerateAssignment.preprocessors`` with :class:`AnswerStubs` in the place of ``ClearSolutions``."""
    from nbgrader.converters import GenerateAssignment

    return [AnswerStubs if p is ClearSolutions else p for p in GenerateAssignment.class_traits()["preprocessors"].default()]
