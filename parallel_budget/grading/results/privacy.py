"""What a student may see in feedback: the check's message, never hidden tests, tracebacks or machine paths.

:class:`StudentView` is an nbconvert preprocessor run by ``generate_feedback``
(see :mod:`.feedback`).  In the autograded notebook a test cell holds its
hidden tests again (nbgrader restores them from the gradebook) and an error
output holds a traceback through the grading package, with this machine's
paths.  The student gets:

* test cells without the ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``
  regions (a one-line note says there are hidden tests);
* every error as one line, ``ExceptionName: message`` -- for a failed check the
  message is the course's Chinese explanation from :mod:`.checks`;
* every output with absolute paths cut to the file name;
* every path of the grading machine (the checkout, the virtualenv, the Python installation, home, the
  working folder: :func:`machine_paths`) replaced by :data:`HIDDEN_PATH` wherever it occurs in any string
  of an output (every MIME type, ``file://`` links, glued to other text) or of its metadata.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Unicode

PATH = re.compile(r"(?<![\w/.:])(?:/[\w.@+-]+){2,}")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
HIDDEN_NOTE = "#（这里还有隐藏测试，评分时运行，不显示）"


HIDDEN_PATH = "<评分机路径>"
# Folders whose name says nothing about this machine: never replaced on their own (a kernel's /tmp/work stays).
COMMON = {"/", "/usr", "/usr/local", "/usr/lib", "/tmp", "/opt", "/home", "/root", "/var", "/etc", "/bin", "/lib"}


@functools.cache
def machine_paths() -> tuple[str, ...]:
    """This machine's own folders that a student's output could carry, longest first (real and given spellings)."""
    import site
    import sys
    import tempfile

    checkout = Path(__file__).resolve().parents[3]
    found = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable), str(checkout),
             os.path.expanduser("~"), os.getcwd(), tempfile.gettempdir(), *site.getsitepackages()}
    found |= {os.path.realpath(p) for p in found}
    return tuple(sorted((p.rstrip("/") for p in found if p and p.rstrip("/") not in COMMON and p.count("/") >= 2),
                        key=len, reverse=True))


def hide_machine_paths(text: str) -> str:
    """``text`` with every :func:`machine_paths` folder, wherever it occurs, replaced by :data:`HIDDEN_PATH`."""
    for path in machine_paths():
        if path in text:
            text = text.replace(path, HIDDEN_PATH)
    return text


def _hide_everywhere(value):
    """Every string in a JSON-like value (an output, its data of any MIME type, its metadata) without machine paths."""
    if isinstance(value, str):
        return hide_machine_paths(value)
    if isinstance(value, list):
        return [_hide_everywhere(v) for v in value]
    if isinstance(value, dict):
        return type(value)({k: _hide_everywhere(v) for k, v in value.items()})
    return value


def scrub(text: str) -> str:
    """``text`` with this machine's folders hidden and absolute paths replaced by their last part
    (``/a/b/checks.py`` -> ``checks.py``)."""
    return PATH.sub(lambda m: m.group(0).rsplit("/", 1)[-1], ANSI.sub("", hide_machine_paths(text)))


def strip_hidden(source: str, begin: str, end: str) -> str:
    out, hidden, noted = [], False, False
    for line in source.splitlines():
        if begin in line:
            hidden = True
            if not noted:
                out.append(line[: len(line) - len(line.lstrip())] + HIDDEN_NOTE)
                noted = True
            continue
        if end in line:
            hidden = False
            continue
        if not hidden:
            out.append(line)
    return "\n".join(out)


def _is_test(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


class StudentView(Preprocessor):
    """Hide hidden tests, tracebacks and paths from the feedback a student reads."""

    enabled = Bool(True).tag(config=True)  # a plain nbconvert preprocessor is off by default
    begin_hidden = Unicode("BEGIN HIDDEN TESTS").tag(config=True)
    end_hidden = Unicode("END HIDDEN TESTS").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if _is_test(cell):
            cell.source = strip_hidden(cell.source, self.begin_hidden, self.end_hidden)
        cell["outputs"] = [_hide_everywhere(out) for out in cell.get("outputs", [])]
        for out in cell["outputs"]:
            if out.get("output_type") == "error":
                out["traceback"] = [f"{out.get('ename', 'Error')}: {scrub(str(out.get('evalue', '')))}"]
                out["evalue"] = scrub(str(out.get("evalue", "")))
            elif out.get("output_type") == "stream":
                out["text"] = scrub(out.get("text", ""))
            for mime in ("text/plain", "text/html", "text/markdown"):
                data = out.get("data", {})
                if isinstance(data.get(mime), str):
                    data[mime] = scrub(data[mime])
        return cell, resources
