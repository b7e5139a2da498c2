"""Issue 31, item 6: nothing in a student's feedback names a path of the grading machine, by any channel."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat

from parallel_budget.grading.results import privacy

CHECKOUT = str(Path(privacy.__file__).resolve().parents[2])


def _cell(outputs):
    return nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.from_dict(o) for o in outputs])


def test_machine_paths_are_hidden_in_every_output_form():
    """Paths of the checkout and the venv glued to text, in file:// links, in HTML/SVG/JSON/LaTeX data, in
    metadata, in an error: is any of them (or any part of the checkout's path) left in the student's view?"""
    venv, home = sys.prefix, CHECKOUT
    outputs = [
        {"output_type": "stream", "name": "stdout", "text": f"x{venv}/lib\nfile://{home}/solutions/a.ipynb\n{home}\n"},
        {"output_type": "display_data", "metadata": {"filenames": {"image/png": f"{home}/x.png"}},
         "data": {"text/html": f"<a href='file://{venv}/bin/python'>v</a>", "image/svg+xml": f"<svg><text>{home}</text></svg>",
                  "application/json": {"where": [venv, {"deep": home + "/autograde"}]}, "text/latex": f"\\texttt{{{venv}}}",
                  "text/plain": f"'{sys.executable}'"}},
        {"output_type": "error", "ename": "OSError", "evalue": f"no such file: {home}/gradebook.db", "traceback": [home]},
    ]
    nb = nbformat.v4.new_notebook(cells=[_cell(outputs)])
    seen, _ = privacy.StudentView().preprocess(nb, {})
    text = json.dumps(seen, ensure_ascii=False)
    assert CHECKOUT not in text and venv not in text and "/wt/" not in text.replace(privacy.HIDDEN_PATH, ""), text
    assert privacy.HIDDEN_PATH in text  # the control: the paths were there and were replaced


def test_ordinary_text_and_the_sandbox_paths_stay_readable():
    assert privacy.scrub("ratio 3/4 and /tmp/work") == "ratio 3/4 and work"  # the regex's cut, as before
    assert privacy.hide_machine_paths("/tmp/work/x.txt") == "/tmp/work/x.txt"
    assert "/" not in privacy.machine_paths() and "/tmp" not in privacy.machine_paths()
