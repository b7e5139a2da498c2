"""Are the grader's CSV exports safe to open in a spreadsheet? (parallel_budget.grading.results.gradebook)

The whole export (nbgrader's grades.csv, the course's integrity.csv) runs in tests/test_formgrader.py with a
student-chosen cell id ``=HYPERLINK(...)``; these check the rule itself.
"""

from __future__ import annotations

import pytest

from parallel_budget.grading.results.gradebook import spreadsheet_safe


@pytest.mark.parametrize("text", ['=HYPERLINK("http://x","y")', "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\r=1",
                                  "=1", "-", "+", "-cmd|' /C calc'!A0", "＝1+1", "＋1", "－1", "＠SUM(A1)"])
def test_formula_like_cells_become_text(text):
    """Does a cell that starts like a formula (OWASP's =, +, -, @, tab, CR, and full-width forms) get a leading '?"""
    assert spreadsheet_safe(text) == "'" + text


@pytest.mark.parametrize("text", ["-2.5", "+1", "-1e3", "0.75", "38.0", "s001", "test_ex1_send", "", "带宽", "2026-12-01"])
def test_plain_values_and_numbers_stay_as_they_are(text):
    """Does a real number (a negative score too) stay a number, and ordinary text stay unchanged?"""
    assert spreadsheet_safe(text) == text


def test_none_is_an_empty_cell():
    assert spreadsheet_safe(None) == ""


def test_the_schema_head_is_asked_of_alembic_once_per_process(monkeypatch):
    """nbgrader runs the ``alembic`` command for every new gradebook: after ask_schema_head_once, is it run once?"""
    from nbgrader import api

    from parallel_budget.grading.course import ask_schema_head_once

    calls = []
    monkeypatch.setattr(api, "get_alembic_version", lambda: calls.append(1) or "e43177bfe90b")
    ask_schema_head_once()
    ask_schema_head_once()  # a second run in the same process keeps the remembered answer
    assert [api.get_alembic_version() for _ in range(3)] == ["e43177bfe90b"] * 3
    assert calls == [1]
