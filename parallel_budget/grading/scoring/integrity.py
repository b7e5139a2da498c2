"""Integrity scan: what a submission did that nbgrader does not stop.

Runs outside the student's kernel, on the submitted and the autograded
notebooks of one student:

* :func:`scan_source` -- static scan (AST, with a text fallback) of the code
  the student wrote, for the tricks listed in :data:`TRICKS`;
* :func:`compare_cells` -- test cells deleted, edited or duplicated against the
  source notebook (nbgrader restores edited ones from the gradebook, but the
  attempt is reported); :func:`edited_points` -- graded cells whose points
  were changed (restored by nbgrader too, reported the same way);
* :func:`check_receipts` -- every test cell that nbgrader scored as passed must
  show the receipt line the course's checks print (:data:`.checks.RECEIPT`);
  a passing cell without it did not run its checks (an input transformer
  skipped it, or the checking helper was replaced) and is scored 0;
* :func:`runtime_findings` -- cells whose execution hit a timeout, a kernel
  death or a cut output.

Every finding is a :class:`Finding`: student, notebook, cell, trick key and a
Chinese detail for the instructor's report.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .. import MOVED, bounds
from . import overrun
from ...answers.checks import RECEIPT

# The enames an autograded cell carries when its kernel died or it ran past the time limit (the first
# written by preprocessors.ResilientExecute, the second also by nbgrader itself): read by runtime_findings.
KERNEL_DIED = "KernelDied"
TIMED_OUT = "CellTimeoutError"

TRICKS = {
    "invalid_notebook": "提交的文件不是有效的 notebook（JSON 损坏或格式不对），整本记 0 分",
    "grading_failed": "评分这本 notebook 时出错，整本记 0 分",
    "missing_notebook": "没有提交这本 notebook，记 0 分",
    "deleted_test_cell": "删除了测试单元；对应的分数记 0",
    "edited_test_cell": "修改了测试单元；nbgrader 已按源文件恢复并重新评分",
    "edited_points": "改动了计分单元的分值（points）；nbgrader 已按成绩册恢复原分值",
    "duplicated_test_cell": "复制了测试单元（grade_id 重复）；nbgrader 只保留第一个",
    "skip_tests": "改写 IPython 的输入变换或事件钩子，可能让测试单元不执行",
    "rebind_builtins": "改写了 Python 内置函数或异常",
    "rebind_checker": "改动了评分检查工具 parallel_budget.grading",
    "read_files": "在代码里读取磁盘文件或目录（可能在找隐藏测试或评分数据库）",
    "kill_kernel": "调用了结束进程/内核的函数",
    "lying_object": "定义了改写比较或类型转换的类（__eq__、__float__ 等）",
    "dynamic_code": "动态执行代码（exec/eval/compile/__import__），静态检查看不到内容",
    "no_receipt": "测试单元被记为通过，却没有检查工具的回执：检查没有真正运行，该单元改记 0 分",
    "timeout": "单元运行超时（可能是死循环），该单元记 0 分",
    "kernel_died": "内核在运行中退出，该单元记 0 分，其余单元在新内核中继续评分",
    "huge_output": "输出过长，已截断",
    "resource_limit": "单元撞上了沙箱的资源上限（内存、进程数、磁盘空间），该单元记 0 分",
    "spawn_processes": "启动了子进程（fork、subprocess、multiprocessing、os.system）",
    "network": "尝试联网或监听端口（评分沙箱里没有网络）",
    "possible_copying": "个人数字版：答案对自己的数字不对，却等于另一位同学的数字的正确答案（可能抄袭；只是线索），该题照常记 0 分",
    "book_answer": "个人数字版：答案与书中公开答案一致（对自己的数字不对；可能照抄了公开的 solutions/，"
                   "也可能用了正文里书中的数字；只是线索），该题照常记 0 分",
    "oversized_notebook": "提交的 notebook 文件太大，没有读取，整本记 0 分",
    "oversized_cell": "单元的源码太长，没有检查也没有运行；该单元（及依赖它的测试）记 0 分",
    "unscannable_cell": "诚信扫描无法读取这个单元（嵌套过深或太大），它没有运行；该单元（及依赖它的测试）记 0 分",
    "time_budget": "超出每名学生的评分时间预算，其余单元没有运行，记 0 分",
    "check_overrun": "评分者检查这个单元的答案时超过了时间或内存上限（答案可能是刻意构造的），该单元记 0 分",
    "unread_answer": "答案是一个表达式或过长的文字（不是一个数加一个单位）；评分者没有求值，该单元记 0 分",
    "unsandboxed": "本次评分用了 --no-sandbox：学生代码没有隔离运行，成绩和其他学生的数据都可能被它改动",
}

_BUILTIN_NAMES = {
    "abs", "float", "int", "str", "bool", "isinstance", "type", "print", "len", "round", "repr",
    "AssertionError", "Exception", "BaseException", "TypeError", "ValueError", "callable", "getattr",
    "setattr", "hasattr", "object", "super", "min", "max", "sum", "all", "any", "__import__",
}
_DUNDER_LIES = {
    "__eq__", "__ne__", "__float__", "__int__", "__index__", "__bool__", "__str__", "__repr__",
    "__abs__", "__lt__", "__le__", "__gt__", "__ge__", "__sub__", "__rsub__", "__truediv__",
    "__format__", "__hash__", "__class__", "__instancecheck__", "__subclasscheck__", "__getattribute__",
}
_FILE_CALLS = {"open", "listdir", "scandir", "walk", "glob", "iglob", "read_text", "read_bytes", "iterdir",
               "rglob", "connect", "loadtxt", "read_csv"}
_KILL_CALLS = {"_exit", "kill", "abort", "killpg", "exit", "quit"}
_DYNAMIC_CALLS = {"exec", "eval", "compile", "__import__", "import_module"}
_SPAWN_CALLS = {"fork", "forkpty", "system", "popen", "posix_spawn", "spawnv", "execv", "execve", "Popen", "run",
                "Process", "Pool"}
_SPAWN_MODULES = ("subprocess", "multiprocessing", "concurrent")
_NET_MODULES = ("socket", "urllib", "http", "requests", "ftplib", "smtplib", "asyncio", "ssl")
_TEXT_PATTERNS = [
    ("skip_tests", r"input_transformers|ast_transformers|events\s*\.\s*register|register_magic|run_cell"),
    ("rebind_builtins", r"\b__builtins__\b|\bbuiltins\b"),
    ("rebind_checker", r"parallel_budget\s*\.\s*grading|sys\s*\.\s*modules|\bchecks\s*\.\s*\w+\s*=|\bdiagnose\s*\.\s*\w+\s*="),
    ("read_files", r"\bopen\s*\(|pathlib|os\s*\.\s*(listdir|walk|scandir)|\bglob\b|sqlite3|gradebook|\.ipynb|solutions"),
    ("kill_kernel", r"os\s*\.\s*(_exit|kill|abort)|sys\s*\.\s*exit|\bsignal\b|ctypes"),
    ("dynamic_code", r"\b(exec|eval|compile|__import__)\s*\(|importlib"),
]

# what the syntax tree would have found, for cells too long to parse (there, plain text is all there is)
_LONG_TEXT_PATTERNS = [
    ("lying_object", r"\bdef\s+(" + "|".join(sorted(_DUNDER_LIES)) + r")\s*\("),
    ("spawn_processes", r"\b(subprocess|multiprocessing|concurrent\s*\.\s*futures)\b|os\s*\.\s*(fork|system|popen|spawn)"),
    ("network", r"\b(import|from)\s+(" + "|".join(_NET_MODULES) + r")\b"),
]


@dataclass(frozen=True)
class Finding:
    student: str
    notebook: str
    cell: str
    trick: str
    detail: str = ""

    def row(self):
        return [self.student, self.notebook, self.cell, self.trick, TRICKS.get(self.trick, self.trick), self.detail]


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _strip_magics(source: str) -> str:
    lines = []
    for line in source.splitlines():
        s = line.lstrip()
        lines.append("" if s.startswith(("%", "!")) else line)
    return "\n".join(lines)


class ScanFailed(Exception):
    """The scan could not read a cell (nested too deep, out of memory): the cell must not run."""


def _text_scan(source: str, patterns) -> list[tuple[str, str]]:
    found = []
    for trick, pattern in patterns:
        m = re.search(pattern, source)
        if m and (trick, m.group(0)) not in found:
            found.append((trick, m.group(0)))
    return found


def scan_source(source: str) -> list[tuple[str, str]]:
    """(trick, evidence) pairs found in one cell of student code.

    A cell over :data:`.bounds.AST_SCAN_CHARS` characters is scanned on its text only (memory linear
    in its length); :class:`ScanFailed` when the parser gives up for any reason but a syntax error.
    """
    if len(source) > bounds.AST_SCAN_CHARS:
        return _text_scan(source, _TEXT_PATTERNS + _LONG_TEXT_PATTERNS)
    found: list[tuple[str, str]] = []

    def add(trick, evidence):
        if (trick, evidence) not in found:
            found.append((trick, evidence))

    try:
        tree = ast.parse(_strip_magics(source))
    except SyntaxError:
        return _text_scan(source, _TEXT_PATTERNS)
    except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
        raise ScanFailed(type(exc).__name__) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = _dotted(node)
            if node.attr in ("input_transformers_cleanup", "input_transformers_post", "ast_transformers",
                             "input_transformer_manager", "register_magic_function", "run_cell"):
                add("skip_tests", name)
            if name.startswith("events.") or ".events." in name and node.attr == "register":
                add("skip_tests", name)
            if name == "sys.modules":
                add("rebind_checker", name)
        if isinstance(node, ast.Name) and node.id in ("builtins", "__builtins__"):
            add("rebind_builtins", node.id)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            for mod in mods:
                if mod == "builtins":
                    add("rebind_builtins", "import builtins")
                if mod.startswith(("parallel_budget.grading", "parallel_budget.answers")) or (
                    isinstance(node, ast.ImportFrom) and node.module == "parallel_budget"
                    and any(a.name in ("grading", "answers") for a in node.names)
                ):
                    add("rebind_checker", f"import {mod}")
                if mod in ("ctypes", "signal"):
                    add("kill_kernel", f"import {mod}")
                if mod in ("sqlite3", "glob", "pathlib"):
                    add("read_files", f"import {mod}")
                if mod in ("importlib",):
                    add("dynamic_code", f"import {mod}")
                if mod.split(".")[0] in _SPAWN_MODULES:
                    add("spawn_processes", f"import {mod}")
                if mod.split(".")[0] in _NET_MODULES:
                    add("network", f"import {mod}")
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in _BUILTIN_NAMES:
            add("rebind_builtins", f"def {node.name}")
        for t in targets:
            names = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
            for sub in names:
                if isinstance(sub, ast.Name) and sub.id in _BUILTIN_NAMES | {"checks", "diagnose"}:
                    add("rebind_checker" if sub.id in ("checks", "diagnose") else "rebind_builtins", f"{sub.id} = ...")
                if isinstance(sub, ast.Attribute):
                    base = _dotted(sub)
                    if base.split(".")[0] in ("checks", "diagnose", "parallel_budget", "pb"):
                        add("rebind_checker", f"{base} = ...")
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in _DUNDER_LIES:
                    add("lying_object", f"class {node.name}: def {item.name}")
                if isinstance(item, ast.Assign):
                    for t in item.targets:
                        if isinstance(t, ast.Name) and t.id in _DUNDER_LIES:
                            add("lying_object", f"class {node.name}: {t.id} = ...")
        if isinstance(node, ast.Call):
            fname = _dotted(node.func)
            last = fname.rsplit(".", 1)[-1]
            if fname in ("setattr", "delattr"):
                add("rebind_checker", fname + "(...)")
            if last in _FILE_CALLS and (fname == "open" or "." in fname):
                add("read_files", fname + "(...)")
            if last in _KILL_CALLS and (fname.startswith(("os.", "sys.", "signal.")) or fname in ("exit", "quit")):
                add("kill_kernel", fname + "(...)")
            if last in _DYNAMIC_CALLS:
                add("dynamic_code", fname + "(...)")
            if last in _SPAWN_CALLS and fname.startswith(("os.", "subprocess.", "multiprocessing.", "pty.")):
                add("spawn_processes", fname + "(...)")
            if fname in ("type",) and len(node.args) == 3:
                add("lying_object", "type(name, bases, dict)")
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if re.search(r"gradebook|\.ipynb|solutions/|source_cell", node.value):
                add("read_files", repr(node.value[:40]))
    return found


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _is_test(cell) -> bool:
    m = _meta(cell)
    return bool(m.get("grade")) and not m.get("solution") and cell.get("cell_type") == "code"


def _norm(text) -> str:
    return "".join(text) if isinstance(text, list) else (text or "")


# A release made before December 2026 imports the checkers from parallel_budget.grading (which still
# hands them on, grading/__init__.py); that exact line reads as today's, so the untouched cells of such
# a release compare equal to today's release instead of being reported as edited.
_MOVED_NAME = "|".join(map(re.escape, MOVED))
_OLD_IMPORT = re.compile(rf"^from parallel_budget\.grading import ((?:{_MOVED_NAME})(?:, (?:{_MOVED_NAME}))*)[ \t]*$", re.M)


def _as_today(source: str) -> str:
    return _OLD_IMPORT.sub(r"from parallel_budget.answers import \1", source)


def compare_cells(student, notebook, submitted_nb, release_cells: dict) -> list[Finding]:
    """Deleted, edited and duplicated test cells; scan of every cell the student wrote.

    ``release_cells`` maps grade_id -> (released source, is a test cell).  A cell the scan cannot
    read is replaced in ``submitted_nb`` by a comment (:func:`.bounds.replace_cell`): it never runs.
    """
    findings = []
    seen = {}
    for index, cell in enumerate(submitted_nb.get("cells", [])):
        m = _meta(cell)
        gid = m.get("grade_id")
        src = _norm(cell.get("source"))
        released, is_test = release_cells.get(gid, (None, False))
        if released is not None and _as_today(src) == released:
            src = released
        if released is not None and is_test:
            seen[gid] = seen.get(gid, 0) + 1
            if seen[gid] > 1:
                findings.append(Finding(student, notebook, gid, "duplicated_test_cell", f"第 {index + 1} 个单元"))
            elif src.strip() != released.strip():
                findings.append(Finding(student, notebook, gid, "edited_test_cell", f"第 {index + 1} 个单元"))
            continue
        if released is not None and m.get("locked") and src.strip() == released.strip():
            continue  # an untouched read-only cell of the release
        if cell.get("cell_type") != "code":
            continue
        where = gid or f"第 {index + 1} 个单元"
        try:
            found = scan_source(src)
        except ScanFailed as exc:
            bounds.replace_cell(cell, f"# 诚信扫描无法读取这个单元（{exc}）：没有运行。\n")
            found = [("unscannable_cell", str(exc))]
        for trick, evidence in found:
            findings.append(Finding(student, notebook, where, trick, evidence))
    for gid, (_, is_test) in release_cells.items():
        if is_test and gid not in seen:
            findings.append(Finding(student, notebook, gid, "deleted_test_cell"))
    return findings


def edited_points(student, notebook, submitted_nb, points: dict) -> list[Finding]:
    """Graded cells whose ``points`` the student changed (nbgrader restores them silently; reported here).

    ``points`` maps grade_id -> the points the gradebook holds (:func:`.gradebook.max_scores`).
    """
    found = {}
    for cell in submitted_nb.get("cells", []):
        m = _meta(cell)
        gid = m.get("grade_id")
        if gid not in points or gid in found or "points" not in m:
            continue
        try:
            given = float(m["points"])
        except (TypeError, ValueError):
            given = None
        if given != points[gid]:
            found[gid] = Finding(student, notebook, gid, "edited_points", f"{str(m['points'])[:20]} 分（应为 {points[gid]:g} 分）")
    return list(found.values())


def drop_duplicate_grade_cells(nb: dict) -> int:
    """Remove every later cell that repeats an earlier cell's grade_id; return how many.

    nbgrader's own de-duplication strips the copy's metadata and then refuses
    the whole notebook; keeping the first copy grades the rest normally (the
    copy is reported by :func:`compare_cells`).
    """
    seen, keep = set(), []
    for cell in nb.get("cells", []):
        gid = _meta(cell).get("grade_id")
        if gid and gid in seen:
            continue
        seen.add(gid)
        keep.append(cell)
    dropped = len(nb.get("cells", [])) - len(keep)
    nb["cells"] = keep
    return dropped


def _stdout(cell) -> str:
    return "".join(_norm(o.get("text")) for o in cell.get("outputs", []) if o.get("output_type") == "stream")


def _errors(cell):
    return [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]


_CHECK_CALL = re.compile(r"\bchecks\s*\.\s*(?:visible|value|exact|kind_is)\s*\(")


def passed_without_receipt(autograded_nb) -> list[str]:
    """grade_ids of test cells that show no error but fewer receipts than the checks they call.

    Each call of a check in the (restored) test cell prints one receipt line;
    a cell whose checks were skipped or replaced prints fewer.
    """
    bad = []
    for cell in autograded_nb.get("cells", []):
        if _is_test(cell) and not _errors(cell):
            calls = len(_CHECK_CALL.findall(_norm(cell.get("source"))))
            if _stdout(cell).count(RECEIPT) < max(calls, 1):
                bad.append(_meta(cell).get("grade_id"))
    return bad


def runtime_findings(student, notebook, autograded_nb, budget: float = 0) -> list[Finding]:
    """Timeouts, kernel deaths, cut outputs and the time budget (``budget`` seconds) recorded in the autograded notebook."""
    found, not_run = [], []
    for index, cell in enumerate(autograded_nb.get("cells", [])):
        where = _meta(cell).get("grade_id") or f"第 {index + 1} 个单元"
        if any(out.get("ename") == bounds.OVER_BUDGET for out in _errors(cell)):
            not_run.append(where)
            continue
        for out in _errors(cell):
            if out.get("ename") == TIMED_OUT:
                found.append(Finding(student, notebook, where, "timeout"))
            if out.get("ename") == KERNEL_DIED:
                found.append(Finding(student, notebook, where, "kernel_died"))
            if out.get("ename") in (overrun.OVERRUN, overrun.UNREAD):
                trick = "check_overrun" if out["ename"] == overrun.OVERRUN else "unread_answer"
                found.append(Finding(student, notebook, where, trick, str(out.get("evalue", ""))[:200]))
            if out.get("ename") == "MemoryError" or any(
                    text in str(out.get("evalue", "")) for text in ("No space left", "Resource temporarily unavailable")):
                found.append(Finding(student, notebook, where, "resource_limit", str(out.get("ename"))))
        if "输出过长，已截断" in _stdout(cell):
            found.append(Finding(student, notebook, where, "huge_output"))
    if not_run:  # one row per notebook: where the budget ran out, and how much did not run
        found.append(Finding(student, notebook, not_run[0], "time_budget",
                             f"超出每名学生的评分时间预算 {budget:g} s：从 {not_run[0]} 起 {len(not_run)} 个代码单元未运行"))
    return found
