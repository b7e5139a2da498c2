"""Trusted checking: a test cell's checks run in the grader, on plain data, never in the student's kernel.

At autograde, :class:`.preprocessors.ResilientExecute` does not send a test
cell (nbgrader ``grade`` without ``solution``, its source restored from the
gradebook, hidden tests included) to the kernel.  Instead:

1. :func:`free_names` lists the variables the cell reads (``updated_w``,
   ``consistent_checkpoint``), without the names it binds or imports itself
   (the answer contract: :mod:`.read`; an unanswered ``...`` fails here,
   :func:`.checks.strict`);
2. the kernel is asked for exactly those names, as plain data
   (:func:`export_expression`, :mod:`.plain`): the request holds variable
   names only, never the test's source;
3. :func:`run` executes the cell's source here, in a fresh namespace holding
   the real ``checks``/``diagnose``/``parallel_budget`` and the rebuilt
   values, and returns the cell's outputs (the receipt lines, or an
   ``AssertionError`` with the check's Chinese message), which nbgrader
   scores, stores and renders into feedback as usual;
4. a function answer is a :class:`FunctionAnswer`: calling it replays the
   student's own cells in a fresh sandboxed interpreter (:mod:`.fnhost`,
   forked from a fork server of its own, in a sandbox of its own), calls the
   function there on the arguments and returns the result as plain data.

A patched checker, a forged receipt, rebound builtins or input transformers
change only the student's own kernel, which no longer checks anything.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import socket

from nbformat.notebooknode import NotebookNode

from ..sandbox import channel
from . import overrun
from ...answers import plain

TRUSTED_NAMES = ("checks", "diagnose", "pb", "parallel_budget")
FAILED = "AssertionError"


def is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def free_names(source: str) -> list[str]:
    """Names the cell loads but does not bind itself (nor import, nor get from builtins)."""
    tree = ast.parse(source)
    bound, loaded = set(TRUSTED_NAMES), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.append(node.id)
            else:
                bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    seen, out = set(), []
    for name in loaded:
        if name not in bound and not hasattr(builtins, name) and name not in seen:
            seen.add(name)
            out.append(name)
    return out


def export_expression(names) -> str:
    """The user expression the kernel evaluates: names only, nothing of the test."""
    return f"__import__('parallel_budget.answers.plain', fromlist=['dump']).dump(globals(), {list(names)!r})"


def read_export(reply_content: dict) -> dict:
    """``{name: value}`` from an execute_reply's ``user_expressions`` (anything malformed reads as nothing)."""
    try:
        shown = reply_content["user_expressions"]["answers"]["data"]["text/plain"]
        text = ast.literal_eval(shown) if len(shown) <= plain.MAX_JSON + 1000 else None
    except (KeyError, TypeError, ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return plain.load(text)


def _error(message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=FAILED, evalue=message, traceback=[f"{FAILED}: {message}"])


def run(source: str, values: dict, names, function_host=None, swap=None) -> list:
    """Execute a test cell's source here; its outputs as nbformat output nodes.

    ``swap`` (per-student numbers, :class:`.student_numbers.Swap`) replaces the cell's expected values by the student's.
    """
    from ...answers import checks

    namespace = {"__builtins__": builtins, "__name__": "__trusted_check__"}
    missing = []
    for name in names:
        if name not in values:
            missing.append(name)
        elif isinstance(values[name], plain.Function):
            namespace[name] = FunctionAnswer(name, function_host)
        else:
            namespace[name] = values[name]
    out = io.StringIO()
    outputs = []
    try:
        if missing:
            raise NameError(missing[0])
        code = compile(source, "<test cell>", "exec")
        with contextlib.redirect_stdout(out), checks.swapped(swap), checks.strict(), overrun.bounded():  # unanswered: 0
            exec(code, namespace)  # noqa: S102 -- the instructor's test, on the student's plain values
    except (overrun.Overrun, MemoryError) as exc:  # a value nobody thought of costs this cell, never the class
        what = "内存" if isinstance(exc, MemoryError) else f"{overrun.CHECK_CPU_S:g} 秒 CPU"
        outputs.append(NotebookNode(output_type="error", ename=overrun.OVERRUN, evalue=f"检查你的答案超过了上限（{what}），"
                                    "这个单元记 0 分。请按题目要求写一个数，或一个数加一个单位，例如 \"3 GB\"。",
                                    traceback=[f"{overrun.OVERRUN}: {what}"]))
    except checks.Unread as exc:  # an expression typed as an answer: never evaluated, 0, and an integrity row
        outputs.append(NotebookNode(output_type="error", ename=overrun.UNREAD, evalue=str(exc),
                                    traceback=[f"{FAILED}: {exc}"]))
    except AssertionError as exc:
        outputs.append(_error(str(exc)))
    except NameError as exc:
        outputs.append(_error(f"变量 {exc.name if getattr(exc, 'name', None) else exc} 没有定义："
                              "请先运行定义它的单元，并保持题目要求的变量名。"))
    except FunctionFailed as exc:
        outputs.append(_error(str(exc)))
    except Exception as exc:  # e.g. a student's value of a type the check cannot use
        outputs.append(_error(f"检查无法使用你的答案（{type(exc).__name__}）：请按题目要求的类型作答。"))
    if out.getvalue():
        outputs.insert(0, NotebookNode(output_type="stream", name="stdout", text=out.getvalue()))
    return outputs


class FunctionFailed(AssertionError):
    """A student's function raised, timed out or died when the grader called it."""


class FunctionAnswer:
    """A student's function, callable by the trusted check; runs in :mod:`.fnhost`, in a sandbox."""

    def __init__(self, name: str, host):
        self._name, self._host = name, host

    def __call__(self, *args):
        if self._host is None:
            raise FunctionFailed(f"无法调用 {self._name}：函数答案需要沙箱。")
        return self._host.call(self._name, list(args))


class FunctionHost:
    """The grader's end of one :mod:`.fnhost` process: the student's cells replayed, then calls."""

    def __init__(self, launch, cells: list, timeout: float):
        """``launch(fd)`` starts a host connected to ``fd``; ``cells`` the student's code, in order."""
        self._launch, self._cells, self._timeout = launch, cells, timeout
        self._sock = self._process = None

    def _start(self):
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._process = self._launch(theirs.fileno())
        finally:
            theirs.close()
        self._sock = mine
        channel.send(self._sock, {"cells": self._cells}, self._timeout)  # any size: framed (:mod:`.channel`)

    def _exchange(self, name: str, args: list):
        if self._sock is None:
            self._start()
        channel.send(self._sock, {"call": name, "args": [plain.encode(a) for a in args]}, self._timeout)
        return channel.receive(self._sock, plain.MAX_JSON, self._timeout)

    def call(self, name: str, args: list):
        try:
            reply = self._exchange(name, args)
        except TimeoutError:
            self.close()
            raise FunctionFailed(f"函数运行超过 {self._timeout:.0f} 秒，判为失败。") from None
        except (ValueError, OSError, RecursionError) as exc:
            self.close()
            raise FunctionFailed(f"无法读取 {name} 的结果（{type(exc).__name__}）。") from None
        if reply is None:
            self.close()
            raise FunctionFailed("运行函数的进程意外退出（例如调用了 os._exit 或用尽了资源）。")
        if not isinstance(reply, dict) or "error" in reply or "result" not in reply:
            why = reply.get("error") if isinstance(reply, dict) else None
            raise FunctionFailed(f"调用 {name} 时出错：{str(why)[:300] if why else '没有结果'}。")
        try:
            return plain.decode(reply["result"])
        except (ValueError, RecursionError):
            raise FunctionFailed(f"{name} 的结果不是普通数据。") from None

    def close(self):
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._process is not None:
            with contextlib.suppress(Exception):
                self._process.kill()
                self._process.wait(5)
            self._process = None
