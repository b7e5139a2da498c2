"""Infrastructure failures: the grading machinery failed, not the student's code (issue 22, item 6).

A kernel that cannot start (no sandbox, no fork server, a kernel that never
answers its first request) or a function host that cannot be launched is the
grader's fault: the student is *not graded* (no grade rows, earlier grades
kept, listed in the summary, graded by the next run), never given 0.

nbgrader catches every exception of a notebook and raises its own generic
one, so the cause would be lost on the way up; the place that detects the
failure therefore also records it here (:func:`fail`), and the shard asks
after autograding (:func:`check`), much as :data:`.student_numbers.RECORDED` works.
"""

from __future__ import annotations

FAILURES: list[str] = []  # reasons recorded in this process since the last clear()


class InfrastructureError(RuntimeError):
    """The grading machinery failed (sandbox, fork server, kernel start, worker); the message is Chinese."""


def fail(reason: str) -> InfrastructureError:
    """Record an infrastructure failure and return the exception to raise."""
    FAILURES.append(reason)
    return InfrastructureError(reason)


def clear() -> None:
    FAILURES.clear()


def check() -> None:
    """Raise :class:`InfrastructureError` when a failure was recorded since the last :func:`clear`."""
    if FAILURES:
        reasons = list(dict.fromkeys(FAILURES))
        FAILURES.clear()
        raise InfrastructureError("；".join(reasons))


def short(exc: BaseException) -> str:
    """One line naming an exception, for a Chinese message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
