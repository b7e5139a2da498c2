"""The helpers test cells call.  Each check prints one receipt line on success.

Visible tests call :func:`visible` (type and dimension only); hidden tests call
:func:`value`, :func:`exact` or :func:`flag` with an :class:`~.diagnose.Expected`
or a right value computed by the package.  A failure raises ``AssertionError``
with a Chinese message that names the variable, what was given and, when a
known slip explains the value, the likely mistake; nbgrader shows it in the
feedback HTML.  Nothing is written to stderr (nbgrader scores stderr as 0).

The receipt ``RECEIPT`` printed on success lets the grader verify afterwards,
outside the student's kernel, that a passing test cell really ran a check
(:mod:`.integrity`).
"""

from __future__ import annotations

from .answers import AnswerError, describe, read_answer
from .diagnose import Expected, diagnose
from ..model.units import fmt

RECEIPT = "✔ 检查通过"
_print = print


class CheckFailed(AssertionError):
    """A test-cell check failed; the message is the student's feedback."""


def _fail(message: str):
    __tracebackhide__ = True
    raise CheckFailed(message)


def _receipt(text: str) -> None:
    _print(f"{RECEIPT}:{text}")


def _read(name, given, kind):
    __tracebackhide__ = True
    try:
        return read_answer(name, given, kind)
    except AnswerError as exc:
        _fail(str(exc))


def _shown(q, unit=None):
    return fmt(q, unit, digits=4) if hasattr(q, "units") else f"{q:.4g}"


def visible(name: str, given, kind: str | None = None) -> None:
    """检查 ``given`` 能否按变量名约定读成正确的量纲(不看数值)。"""
    __tracebackhide__ = True
    q = _read(name, given, kind)
    _receipt(f"{name} 读作 {_shown(q)},类型与量纲正确(数值由隐藏测试检查)")


def value(name: str, given, expected: Expected, kind: str | None = None) -> None:
    """检查数值:在容差内等于 ``expected``;否则说出最可能的错误。"""
    __tracebackhide__ = True
    q = _read(name, given, kind)
    if hasattr(expected.value, "units") and (not hasattr(q, "units") or q.dimensionality != expected.value.dimensionality):
        _fail(f"{name} 的量纲不对:收到 {describe(given)},需要和 {_shown(expected.value, expected.unit)} 同类的量。")
    if expected.matches(q):
        _receipt(f"{name} 的数值正确")
        return
    why = diagnose(expected, q)
    shown = _shown(q, expected.unit)
    if why:
        _fail(f"{name} = {shown} 不对。可能的错误:{why}。")
    _fail(f"{name} = {shown} 不对(容差 {expected.rel_tol:.0%})。请对照公式逐项检查单位和系数。")


def exact(name: str, given, right, hint: str = "") -> None:
    """检查整数或选项字母等必须完全相同的答案(不调用学生对象的方法)。"""
    __tracebackhide__ = True
    if type(right) is int:
        ok = type(given) is int and int.__int__(given) == right
        need = "整数"
    elif type(right) is str:
        ok = isinstance(given, str) and str.__str__(given).strip().upper() == right.upper()
        need = "字符串"
    elif type(right) is bool:
        ok = given is right
        need = "True 或 False"
    else:
        raise TypeError(f"exact() 不支持 {type(right).__name__}")
    if ok:
        _receipt(f"{name} 正确")
        return
    kind_ok = {"整数": type(given) is int, "字符串": isinstance(given, str), "True 或 False": type(given) is bool}[need]
    if not kind_ok:
        _fail(f"{name} 需要{need},收到 {describe(given)}。")
    _fail(f"{name} = {describe(given)} 不对。{hint}".strip())


def kind_is(name: str, given, type_: type) -> None:
    """检查答案的类型(可见测试用,例如整数、字符串、函数)。"""
    __tracebackhide__ = True
    ok = callable(given) if type_ is callable else type(given) is type_
    names = {int: "整数", str: "字符串", bool: "True 或 False", callable: "函数"}
    if not ok:
        _fail(f"{name} 需要{names.get(type_, type_)},收到 {describe(given)}。")
    _receipt(f"{name} 的类型正确")
