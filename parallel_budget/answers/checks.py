"""The helpers test cells call.  Each check prints one receipt line on success.

Visible tests call :func:`visible` or :func:`kind_is` (type and unit only);
hidden tests call :func:`value` or :func:`exact` with an
:class:`~.diagnose.Expected` or a right value computed by the package.  A
failure raises :class:`CheckFailed` with a Chinese message that names the
variable, what was given (in the unit its name carries) and, when a known slip
explains the value, the likely mistake; nbgrader shows it in the feedback HTML.
In a notebook the failure shows as those few lines only: the exception renders
itself (IPython's ``_render_traceback_``), so no frame of this package appears.
Nothing is written to stderr (nbgrader scores stderr as 0).

:func:`practice` is the practice self-check of the released notebooks: the same
hidden-test calls, run by the student, with the outcome shown as one styled
✔/✘ line (HTML in a notebook, the same text as plain text elsewhere) instead
of raised, so "Run All" goes on and nothing is scored.

**Unanswered parts.**  A released answer cell starts from the sentinel
:data:`UNANSWERED` (``x_GB = ...``; a function stub ``return ...``, written by
:class:`.answer_stubs.AnswerStubs`).  Every check reports a sentinel as "还没有作答".
In the student's own notebook (an IPython kernel that nbgrader is not running)
it shows that as a ✘ line and returns, so Run All goes on to the next part;
everywhere else it fails like any wrong answer: under nbgrader's validate and
autograde (``NBGRADER_EXECUTION`` is set in their kernels), in the grader's
trusted checks (:func:`strict`), in plain Python.  An unanswered part scores 0
and its feedback says "还没有作答".

The receipt ``RECEIPT`` printed on success lets the grader verify afterwards,
outside the student's kernel, that a passing test cell really ran a check
(:mod:`.integrity`).
"""

from __future__ import annotations

import contextlib
import html
import os
import sys

from .read import AnswerError, Unevaluated, describe, read_answer, read_int, unit_of
from .diagnose import Expected, bits_slip, diagnose, unit_slip
from ..model.units import fmt

RECEIPT = "✔ 检查通过"
PRACTICE_OK = "✔ 练习自测"
PRACTICE_FAIL = "✘ 练习自测"
UNANSWERED = ...  # what a released answer cell assigns before the student answers
UNANSWERED_TEXT = "还没有作答"
_print = print
_state = {"practice": False, "swap": None, "strict": False}
# The site's practice-box colours (book/_static/calc/calc.css .pb-ok, .pb-bad), on a light ground.
_STYLE = {True: "color:#188038;background:#e6f4ea;border-left:4px solid #188038",
          False: "color:#c5221f;background:#fce8e6;border-left:4px solid #c5221f"}


class CheckFailed(AssertionError):
    """A test-cell check failed; the message is the student's feedback."""

    def _render_traceback_(self):
        # IPython shows these lines instead of a traceback: the feedback, not the package's frames.
        return [f"\x1b[0;31m✘ 检查未通过\x1b[0m：{line}" if i == 0 else line
                for i, line in enumerate(str(self).split("\n"))]


class Unread(CheckFailed):
    """The answer was an expression or too long: refused unread (:class:`.read.Unevaluated`); an integrity row."""


def _fail(message: str, error=CheckFailed):
    __tracebackhide__ = True
    raise error(message)


def _receipt(text: str) -> None:
    if _state["practice"]:
        show_line(True, f"{PRACTICE_OK}：{text}")
    else:
        _print(f"{RECEIPT}：{text}")


def _ipython():
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None


def show_line(ok: bool, text: str) -> None:
    """One self-check line: styled ✔/✘ HTML in a notebook (``text/plain`` beside it), plain text elsewhere."""
    shell = _ipython()
    if shell is None:
        _print(text)
        return
    from IPython.display import display

    styled = (f'<div class="pb-selfcheck" style="{_STYLE[bool(ok)]};padding:4px 8px;white-space:pre-wrap">'
              f"{html.escape(text)}</div>")
    display({"text/plain": text, "text/html": styled}, raw=True)


def lenient() -> bool:
    """Does an unanswered part show a ✘ line and let Run All go on (only in a student's own notebook)?"""
    if _state["strict"] or _state["practice"] or os.environ.get("NBGRADER_EXECUTION"):
        return False
    return _ipython() is not None


def _unanswered(name: str) -> None:
    """The sentinel is still there: a ✘ line in the student's notebook, a failure everywhere else."""
    __tracebackhide__ = True
    message = f"{name} {UNANSWERED_TEXT}：把答题单元里的 ... 换成你的答案。"
    if lenient():
        show_line(False, f"✘ {message}（后面的单元照常运行；评分时没作答的部分记 0 分）")
        return
    _fail(message)


def _read(name, given, kind):
    __tracebackhide__ = True
    try:
        return read_answer(name, given, kind)
    except AnswerError as exc:
        message, error = str(exc), Unread if isinstance(exc, Unevaluated) else CheckFailed
    _fail(message, error)


def _unit(name, fallback=None):
    spec = unit_of(name)
    return spec[1] if spec else fallback


def _shown(q, unit=None):
    return fmt(q, unit, digits=4) if hasattr(q, "units") else f"{q:.4g}"


def visible(name: str, given, kind: str | None = None) -> None:
    """可见测试：检查 ``given`` 能否按变量名约定读成正确的量纲（不看数值）。"""
    __tracebackhide__ = True
    if given is UNANSWERED:
        return _unanswered(name)
    q = _read(name, given, kind)
    _receipt(f"{name} 读作 {_shown(q, _unit(name))}，类型与单位正确（可见测试不看数值）")


def value(name: str, given, expected: Expected, kind: str | None = None) -> None:
    """检查数值：在容差内等于 ``expected``；否则说出最可能的错误。"""
    __tracebackhide__ = True
    if given is UNANSWERED:
        return _unanswered(name)
    if _state["swap"] is not None:  # per-student numbers: the grader's expected value for this student
        expected = _state["swap"].value(name, given, expected, kind)
    q = _read(name, given, kind)
    unit = _unit(name, expected.unit)
    if hasattr(expected.value, "units") and (not hasattr(q, "units") or q.dimensionality != expected.value.dimensionality):
        _fail(f"{name} 的量纲不对：收到 {describe(given)}，需要和 {_shown(expected.value, unit)} 同类的量。")
    if expected.matches(q):
        _receipt(f"{name} 的数值正确")
        return
    shown = _shown(q, unit)
    why = bits_slip(given, q, expected) or diagnose(expected, q) or unit_slip(name, given, expected)
    if why:
        _fail(f"{name} = {shown} 不对。\n可能的错误：{why}。")
    _fail(f"{name} = {shown} 不对（容差 {expected.rel_tol:.0%}）。\n请对照公式逐项检查单位和系数。")


def _read_int(name, given, allow_none):
    __tracebackhide__ = True
    try:
        return read_int(name, given, allow_none)
    except AnswerError as exc:
        message = str(exc)
    _fail(message)


def exact(name: str, given, right, hint: str = "", allow_none: bool = False) -> None:
    """检查整数、选项字母或 True/False 这类必须完全相同的答案（不调用学生对象的方法）。

    整数答案也接受 ``2.0``、``"2"`` 和 numpy 整数；``allow_none`` 时 ``None`` 是一个可选的答案。
    """
    __tracebackhide__ = True
    if given is UNANSWERED:
        return _unanswered(name)
    if _state["swap"] is not None:
        right, hint = _state["swap"].exact(name, given, right, hint)
    if right is None or type(right) is int:
        ok = _read_int(name, given, allow_none or right is None) == right
    elif type(right) is str:
        if not isinstance(given, str):
            _fail(f"{name} 需要字符串，收到 {describe(given)}。")
        ok = str.__str__(given).strip().upper() == right.upper()
    elif type(right) is bool:
        if type(given) is not bool:
            _fail(f"{name} 需要 True 或 False，收到 {describe(given)}。")
        ok = given is right
    else:
        raise TypeError(f"exact() 不支持 {type(right).__name__}")
    if ok:
        _receipt(f"{name} 正确")
        return
    _fail(f"{name} = {describe(given)} 不对。" + (f"\n{hint}" if hint else ""))


def kind_is(name: str, given, type_: type, allow_none: bool = False) -> None:
    """可见测试：检查答案的类型（整数、字符串、函数），不看对错。"""
    __tracebackhide__ = True
    if given is UNANSWERED:
        return _unanswered(name)
    if type_ is int:
        _read_int(name, given, allow_none)
    else:
        ok = callable(given) if type_ is callable else type(given) is type_ or (allow_none and given is None)
        names = {str: "字符串", bool: "True 或 False", callable: "函数"}
        if not ok:
            _fail(f"{name} 需要{names.get(type_, type_)}，收到 {describe(given)}。")
    _receipt(f"{name} 的类型正确（可见测试不看对错）")


@contextlib.contextmanager
def swapped(swap):
    """Within this block, ``value``/``exact`` ask ``swap`` what to expect.

    ``swap.value(name, given, expected, kind)`` returns the expected value,
    ``swap.exact(name, given, right, hint)`` the right answer and the hint.

    The grader's trusted checks use it for per-student numbers
    (:mod:`.student_numbers`): the test cell's own expected value (the book's numbers)
    is replaced by the one of the student's variant.
    """
    previous = _state["swap"]
    _state["swap"] = swap
    try:
        yield
    finally:
        _state["swap"] = previous


@contextlib.contextmanager
def strict():
    """Within this block an unanswered part fails, as in grading (the grader's trusted checks use it)."""
    previous = _state["strict"]
    _state["strict"] = True
    try:
        yield
    finally:
        _state["strict"] = previous


@contextlib.contextmanager
def practice(name: str):
    """练习自测（不计分）：运行与评分相同的检查，把结果打印出来而不是报错。

    ``with checks.practice("ex1_lower_bound_ms"): checks.value(...)`` shows
    "✔ 练习自测：……" or "✘ 练习自测：" and the grader's feedback, in two or
    three lines (:func:`show_line`), and lets the next cells run.
    """
    previous = _state["practice"]
    _state["practice"] = True
    try:
        yield
    except CheckFailed as exc:
        show_line(False, f"{PRACTICE_FAIL}（{name}）：{exc}")
    except NameError as exc:
        show_line(False, f"{PRACTICE_FAIL}（{name}）：还没有定义 {exc.name}。先运行上面的答题单元。")
    except Exception as exc:  # the student's own function failed inside a check
        show_line(False, f"{PRACTICE_FAIL}（{name}）：检查时你的代码抛出了 {type(exc).__name__}：{exc}")
    finally:
        _state["practice"] = previous
