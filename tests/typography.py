"""Chinese typography rules and the reader-facing strings they are checked on.

The rules (GB/T 15834, and what the course's style asks):

* no ASCII ``, ; :`` inside Chinese running text: next to a Chinese character, or between two
  Chinese stretches with only numbers, Latin words and spaces in between ("梯度是 2,rank 1 算出");
* no ASCII ``( ) ? !`` touching a Chinese character;
* no space between two Chinese characters or Chinese punctuation marks ("更新后的 参数").

The extractors read sources and outputs, never a list of known strings: every string constant of
the package (docstrings aside), every string literal of the in-page JavaScript, Jinja templates,
Markdown prose, notebook cells, and the built HTML.  ``tests/test_typography.py`` applies them.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

HAN = "\u3400-\u4dbf\u4e00-\u9fff"
# Chinese punctuation: 、。〈〉《》「」『』【】 (U+3000 block) and the full-width forms ，：；（）！？ ….
CJK_PUNCT = "\u3001-\u3003\u3008-\u3011\uff01\uff08\uff09\uff0c\uff1a\uff1b\uff1f"
CJK = HAN + CJK_PUNCT
# What may sit between two Chinese stretches inside one clause: numbers, Latin words, units, spaces.
SPAN = re.compile(r"[A-Za-z0-9 _.%/+\-×*=^#~·()\u2212\u00d7]")
SPAN_MAX = 24
# Chinese sentence punctuation that ends a clause as a Chinese character would (not brackets or quotes).
CLAUSE = re.compile(rf"[{HAN}\u3001\u3002\uff0c\uff1a\uff1b\uff01\uff1f]")
IS_HAN = re.compile(f"[{HAN}]")
IS_CJK = re.compile(f"[{CJK}]")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _reach(text: str, i: int, step: int) -> str | None:
    """The first character past the number/Latin stretch that starts at ``i`` going ``step``, if Chinese.

    The start or end of the text is returned as ``"^"`` or ``"$"``: a clause boundary as well, which
    counts when the other side reaches a Chinese character ("A:rank 2 的网卡", "还是 Gb/s;").
    """
    n = 0
    while n <= SPAN_MAX:
        if i < 0:
            return "^"
        if i >= len(text):
            return "$"
        ch = text[i]
        if CLAUSE.match(ch):
            return ch
        if not SPAN.match(ch):
            return None
        i += step
        n += 1
    return None


def _between_chinese(text: str, i: int) -> bool:
    """Is the ASCII mark at ``i`` inside a Chinese clause, with only numbers and Latin words around it?

    Not when it separates the arguments of a call or a formula (``min(p, m)``), starts a path (``C:/``)
    or groups the digits of a number (``40,735``).
    """
    if text[i + 1: i + 2] in ("/", "\\") or re.match(r"\d,\d{3}(?!\d)", text[max(0, i - 1): i + 5]):
        return False  # a path (C:/) or a thousands separator (40,735)
    left, right = _reach(text, i - 1, -1), _reach(text, i + 1, 1)
    if not (left and right and (left + right).strip("^$")):
        return False
    j = i - 1
    while j >= 0 and not CLAUSE.match(text[j]):
        j -= 1
    stretch = text[j + 1: i]
    return stretch.count("(") <= stretch.count(")")


def violations(text: str, *, table: bool = False, breaks: bool = False) -> list:
    """Each typographic slip in ``text`` as a short excerpt around it.

    ``breaks``: a line break in ``text`` is a real one (a message, a figure label), not a space.
    ``table``: the text is preformatted (a terminal table) where runs of two or more spaces align
    columns: only a single space counts there as a space between Chinese characters.
    """
    text = ANSI.sub("", text).replace("**", "")  # Markdown bold is not what the reader sees
    found = []

    def hit(i, j):
        found.append(text[max(0, i - 12): j + 12].replace("\n", "⏎"))

    for i, ch in enumerate(text):
        if ch in ",;:":
            before = text[i - 1] if i else ""
            after = text[i + 1] if i + 1 < len(text) else ""
            after2 = text[i + 2] if i + 2 < len(text) else ""
            if IS_CJK.match(before) or IS_CJK.match(after) or (after == " " and IS_HAN.match(after2)):
                hit(i, i + 1)
            elif _between_chinese(text, i):
                hit(i, i + 1)
        elif ch in "()?!":
            if IS_HAN.match(text[i - 1] if i else "") or IS_HAN.match(text[i + 1] if i + 1 < len(text) else ""):
                hit(i, i + 1)
    gap = r"(?<! ) (?! )" if table else (r" +" if breaks else r"\s+")
    for m in re.finditer(rf"(?<=[{CJK}]){gap}(?=[{CJK}])", text):
        hit(m.start(), m.end())
    return found


# ------------------------------------------------------------------ sources


def not_text(tree, docstrings: bool = True) -> list:
    """The string constants of a module that are code, not text: regular expressions (``re.<fn>(pattern, …)``,
    ``pattern=…``) and, with ``docstrings``, the docstrings."""
    out = []
    for node in ast.walk(tree):
        if docstrings and isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.append(body[0].value)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re" and node.args:
                out.append(node.args[0])
            out += [k.value for k in node.keywords if k.arg == "pattern"]
    return out


def python_strings(path: Path, docstrings: bool = False) -> list:
    """The string constants of a module as a reader would see them; regular expressions and (unless
    ``docstrings``: a test cell's docstring is what a student reads) docstrings left out.

    An f-string's replacement fields become ``0`` (a number stands for what the program fills in).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node) for node in not_text(tree, docstrings=not docstrings)}
    inside_f = set()
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                inside_f.add(id(v))
                parts.append(v.value if isinstance(v, ast.Constant) else "0")
            out.append((node.lineno, "".join(parts)))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
                and id(node) not in inside_f):
            out.append((node.lineno, node.value))
    return [(n, s) for n, s in out if IS_HAN.search(s)]


JS_STRING = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`""", re.S)


def js_strings(path: Path) -> list:
    """String and template literals of a script (``${…}`` as ``0``), comments left out."""
    src = path.read_text(encoding="utf-8")
    out = []
    for m in JS_STRING.finditer(src):
        s = m.group()
        if s.startswith("/"):
            continue
        body = s[1:-1]
        if s[0] == "`":
            body = _drop_template_fields(body)
        body = re.sub(r"\\u([0-9a-fA-F]{4})", lambda u: chr(int(u.group(1), 16)), body).replace("\\n", "\n")
        if IS_HAN.search(body):
            out.append((src.count("\n", 0, m.start()) + 1, body))
    return out


def _drop_template_fields(body: str) -> str:
    out, depth, i = [], 0, 0
    while i < len(body):
        if depth == 0 and body.startswith("${", i):
            depth, i = 1, i + 2
            out.append("0")
            continue
        if depth:
            depth += {"{": 1, "}": -1}.get(body[i], 0)
        else:
            out.append(body[i])
        i += 1
    return "".join(out)


def template_text(path: Path) -> str:
    """A Jinja template's text with its tags and expressions as ``0``."""
    src = path.read_text(encoding="utf-8")
    src = re.sub(r"\{#.*?#\}", "", src, flags=re.S)
    src = re.sub(r"\{\{.*?\}\}|\{%.*?%\}", "0", src, flags=re.S)
    return markup_text(src)


def markup_text(html: str) -> str:
    """Tags out, entities in: the text of an HTML fragment, one block per line."""
    import html as html_lib

    html = re.sub(r"<(script|style)\b.*?</\1>", "\n", html, flags=re.S | re.I)
    html = re.sub(r"</?(p|div|li|ul|ol|tr|table|thead|tbody|h\d|section|br|dd|dt|td|th|pre|details|summary)\b[^>]*>",
                  "\n", html, flags=re.I)
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
ROLE = re.compile(r"(\{[a-z:-]+\})?`[^`\n]*`")


def markdown_prose(src: str) -> list:
    """The prose of a MyST page or a notebook's Markdown cell, as (line, paragraph) pairs.

    Code fences, front matter and HTML blocks are left out; math becomes ``M`` and inline code or
    a role (``{eval}`x```) becomes ``C``; link targets are dropped; the lines of one paragraph are
    joined by line breaks (which a browser shows as a space between Chinese characters).
    """
    lines = src.split("\n")
    out, para, start, fence = [], [], 0, None
    in_front = lines[:1] == ["---"]
    for n, line in enumerate(lines, 1):
        if in_front:
            if n > 1 and line.strip() == "---":
                in_front = False
            continue
        m = re.match(r"^\s*(`{3,}|~{3,}|:{3,})(.*)$", line)
        if m:
            mark = m.group(1)
            if fence is None:
                head = m.group(2).strip()
                kind = re.match(r"\{([a-z-]+)\}", head)
                prose_fence = mark.startswith(":") or (kind and kind.group(1) not in (
                    "code-cell", "code", "code-block", "raw", "math", "eval-rst"))
                fence = (mark, bool(prose_fence))
                if para:
                    out.append((start, "\n".join(para)))
                    para = []
                continue
            if line.strip() == fence[0] or (line.strip().startswith(fence[0][0] * 3) and not m.group(2).strip()):
                fence = None
                if para:
                    out.append((start, "\n".join(para)))
                    para = []
                continue
        if fence is not None and not fence[1]:
            continue
        if fence is not None and re.match(r"^:[a-z-]+:", line.strip()):
            continue  # a directive option (:class: tip)
        stripped = line.strip()
        item = re.match(r"^([-*+]|\d+\.|:)\s", stripped)
        if item and para:
            out.append((start, "\n".join(para)))
            para = []
        if not stripped or stripped.startswith("<") or stripped.startswith("|---"):
            if para:
                out.append((start, "\n".join(para)))
                para = []
            if stripped.startswith("<"):
                out.append((n, markup_text(stripped)))
            continue
        text = MATH.sub("M", stripped).replace("**", "")
        text = ROLE.sub("C", text)
        text = re.sub(r"\]\([^)]*\)", "]", text)
        text = re.sub(r"^([-*+]|\d+\.|#+|:)\s+", "", text)
        if text.startswith("|"):
            out.append((n, text))  # a table row: its own line
            continue
        if not para:
            start = n
        para.append(text)
    if para:
        out.append((start, "\n".join(para)))
    return out


def notebook_texts(path: Path) -> list:
    """(cell index, text) of a notebook: Markdown prose, and the string constants of its code cells."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, cell in enumerate(nb["cells"]):
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            out += [(i, t) for _, t in markdown_prose(src)]
        elif cell["cell_type"] == "code":
            out += [(i, s) for _, s in _code_strings(src)]
    return out


def _code_strings(src: str) -> list:
    import tempfile

    clean = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in src.split("\n"))
    try:
        ast.parse(clean)
    except SyntaxError:
        return []
    with tempfile.NamedTemporaryFile("w", suffix=".py", encoding="utf-8", delete=False) as f:
        f.write(clean)
    try:
        return python_strings(Path(f.name), docstrings=True) + [
            (n, c) for n, line in enumerate(clean.split("\n"), 1)
            if (c := line.split("#", 1)[1] if "#" in line else "") and IS_HAN.search(c)]
    finally:
        Path(f.name).unlink()


# ------------------------------------------------------------------ the built site


BLOCKS = {"p", "li", "td", "th", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "caption", "figcaption",
          "summary", "div", "section", "article", "blockquote", "label", "legend", "option", "button", "title",
          "nav", "aside", "header", "footer", "main", "ul", "ol", "table", "tr", "form", "fieldset", "details", "span"}
INLINE_BLOCKS = {"span"}  # not a block: listed only so a span's own text is found (see html_texts)
ATTRIBUTES = ("placeholder", "title", "alt", "aria-label")


def html_texts(html: str) -> list:
    """What a reader of one built page sees, as (kind, text): running text per block, program output
    (``pre``) as preformatted text, and the placeholder, title, alt and aria-label attributes.

    Math becomes ``M``, inline code ``C``; highlighted source code and scripts are left out.
    """
    import bs4

    soup = bs4.BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "svg", "noscript", "template"]):
        tag.decompose()
    for tag in soup.select(".highlight, .headerlink, .MathJax, mjx-container"):
        tag.decompose()
    out = []
    for tag in soup.select("pre"):
        out.append(("pre", tag.get_text()))
        tag.decompose()
    for tag in soup.select(".math, math"):
        tag.replace_with("M")
    for tag in soup(["code", "kbd", "samp", "var"]):
        tag.replace_with("C")
    for tag in soup.find_all(True):
        for attr in ATTRIBUTES:
            if tag.get(attr):
                out.append(("attr", tag[attr]))
    groups = {}
    order = []
    for node in soup.find_all(string=True):
        if isinstance(node, (bs4.Comment, bs4.Doctype, bs4.Declaration, bs4.ProcessingInstruction)):
            continue
        block = next((p for p in node.parents if p.name in BLOCKS - INLINE_BLOCKS), None)
        key = id(block)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(str(node))
    for key in order:
        text = re.sub(r"[ \t\r\n]+", " ", "".join(groups[key])).strip()
        if IS_HAN.search(text):
            out.append(("text", text))
    return out


# ------------------------------------------------------------------ the fixer (a tool for the sources)

FULL = {",": "\uff0c", ";": "\uff1b", ":": "\uff1a", "?": "\uff1f", "!": "\uff01", "(": "\uff08", ")": "\uff09"}
_ESCAPE = re.compile(r"\\(N\{[^}]*\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.S)


def _literal_map(body: str, fstring: bool, raw: bool):
    """The text a string literal's body stands for, and for each of its characters the body index
    it came from (``None``: an f-string field, shown as ``0``)."""
    text, where, i = [], [], 0
    while i < len(body):
        if fstring and body.startswith(("{{", "}}"), i):
            text.append(body[i]), where.append(None)
            i += 2
            continue
        if fstring and body[i] == "{":
            depth, j = 1, i + 1
            while j < len(body) and depth:
                depth += {"{": 1, "}": -1}.get(body[j], 0)
                j += 1
            text.append("0"), where.append(None)
            i = j
            continue
        if not raw and body[i] == "\\":
            m = _ESCAPE.match(body, i)
            seq = m.group(1)
            ch = {"n": "\n", "t": "\t"}.get(seq, seq if len(seq) == 1 else "\ufffc")
            text.append(ch), where.append(None)
            i = m.end()
            continue
        text.append(body[i]), where.append(i)
        i += 1
    return "".join(text), where


def fixed_text(text: str) -> dict:
    """Edits that make ``text`` pass :func:`violations`: ``{index: replacement}`` ("" deletes)."""
    edits = {}
    han = lambda j: 0 <= j < len(text) and IS_HAN.match(text[j]) is not None  # noqa: E731
    from parallel_budget.labs.engine.report import paren_pairs

    paired = set()
    for o, c in paren_pairs(text):
        paired.update((o, c))
        if han(o - 1) or han(o + 1) or han(c - 1) or han(c + 1):
            edits[o], edits[c] = FULL["("], FULL[")"]
    for i, c in enumerate(text):
        if c in "()?!" and i not in paired and (han(i - 1) or han(i + 1)):
            edits[i] = FULL[c]
        elif c in ",;:" and _flagged(text, i):
            edits[i] = FULL[c]
            if i + 1 < len(text) and text[i + 1] == " ":
                edits[i + 1] = ""
    for m in re.finditer(rf"(?<=[{CJK}]) +(?=[{CJK}])", text):
        for j in range(m.start(), m.end()):
            edits[j] = ""
    # a full-width mark needs no space beside it
    for i, rep in list(edits.items()):
        if rep in ("\uff0c", "\uff1b", "\uff1a", "\uff09") and i + 1 < len(text) and text[i + 1] == " ":
            edits[i + 1] = ""
        if rep == "\uff08" and i > 0 and text[i - 1] == " ":
            edits[i - 1] = ""
    return edits


def _flagged(text: str, i: int) -> bool:
    before = text[i - 1] if i else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    after2 = text[i + 2] if i + 2 < len(text) else ""
    if IS_CJK.match(before) or IS_CJK.match(after) or (after == " " and IS_HAN.match(after2)):
        return True
    return _between_chinese(text, i)


def fix_python_source(src: str) -> str:
    """``src`` with the Chinese typography of its string literals fixed (docstrings and regular expressions left alone)."""
    import io
    import tokenize

    src_lines = src.split("\n")
    code = {(n.lineno, len(src_lines[n.lineno - 1].encode("utf-8")[:n.col_offset].decode("utf-8")))  # bytes -> chars
            for n in not_text(ast.parse(src))}
    lines = src.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    out, last = [], 0
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type != tokenize.STRING or not IS_HAN.search(tok.string) or tok.start in code:
            continue
        start = offsets[tok.start[0] - 1] + tok.start[1]
        s = tok.string
        prefix = re.match(r"[A-Za-z]*", s).group()
        quote = s[len(prefix):len(prefix) + 3] if s[len(prefix):len(prefix) + 3] in ('"""', "'''") else s[len(prefix)]
        body = s[len(prefix) + len(quote): len(s) - len(quote)]
        text, where = _literal_map(body, "f" in prefix.lower(), "r" in prefix.lower())
        edits = {where[i]: rep for i, rep in fixed_text(text).items() if where[i] is not None}
        if not edits:
            continue
        new = "".join(edits.get(j, ch) for j, ch in enumerate(body))
        out.append(src[last:start] + prefix + quote + new + quote)
        last = start + len(s)
    out.append(src[last:])
    return "".join(out)


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] != ["--fix-python"]:
        sys.exit("usage: python tests/typography.py --fix-python FILE.py ...")
    for name in sys.argv[2:]:
        p = Path(name)
        old = p.read_text(encoding="utf-8")
        new = fix_python_source(old)
        if new != old:
            p.write_text(new, encoding="utf-8")
            print("fixed", name)
