"""The site's search finds what a student types: the course's own words, glossary terms and units.

Sphinx's Chinese search cuts text into words with jieba, which does not know the course's terms
("通信预算" became "通信" + "预算", so the query 通信预算 found nothing) and its index keeps Latin
words only as ``[a-zA-Z0-9_]+``, so "GB/s" became "GB" + "s".  :class:`SearchCourse` is Sphinx's
Chinese search with

* a jieba user dictionary (``html_search_options["dict"]``, the documented way): :data:`TERMS`
  and the glossary's terms, read from ``book/glossary.md`` at every build (:func:`glossary_terms`);
* units kept as one token each, bytes and bits apart: "GB/s" -> ``gb/s``, "Gb/s" -> ``gbit/s``,
  "25 Gbps" -> ``gbit/s`` (:func:`unit_token`), and hyphenated words whole ("all-gather");
* the same rules in the page (``splitQuery`` below, in Sphinx's ``language_data.js``): the query
  is cut by the longest words the index knows, so "流水线的气泡" searches 流水线 and 气泡.

A book index says where a term is taught: :data:`TAUGHT` makes each of the course's key words a main
index entry of its page (the section whose title holds it, else the page), which Sphinx's search ranks
first (index entries score 100, titles 15, words 5).

``book/_static/course.js`` shows excerpts without raw TeX and, opened from disk, says in Chinese
that excerpts need the site served (the browser refuses to read the pages from ``file://``).
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.search.zh import SearchChinese
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

from .terms import TERMS as VOCABULARY

logger = logging.getLogger(__name__)

# The course's words a student types, that jieba would otherwise cut apart.
TERMS = ("通信预算", "挂起", "方案构建器", "构建器", "流水线气泡", "集合通信", "单向有效带宽",
         "有效带宽", "计算器", "记录页", "练习框", "检查自己", "通信下界", "通信量", "步时", "加速比",
         "微批次", "气泡", "常驻状态", "数据并行", "张量并行", "流水线并行", "序列并行", "激活重算", "优化器状态")
# Where the course teaches each of these words: the page a student searching for it should get first.
TAUGHT = {
    "通信预算": "book/plan-record", "方案构建器": "book/plan-builder", "挂起": "book/debugging",
    "流水线气泡": "book/tp-pp", "微批次": "book/tp-pp", "集合通信": "book/two-rank-update",
    "单向有效带宽": "book/ring-allreduce", "GB/s": "book/ring-allreduce",
    "Gb/s": "book/ring-allreduce",
}
# A student may type the word the course avoids (book/terms.py: the glossary names it once): it is in the
# dictionary too, and finds first the page that teaches the course's word.
ALSO = {t.avoid: t.use for t in VOCABULARY if re.fullmatch(r"[\u4e00-\u9fff]{2,8}", t.avoid)}
GLOSSARY = Path(__file__).resolve().parents[2] / "book" / "glossary.md"
DICT_NAME = "pb-search-dict.txt"

UNIT = re.compile(r"(?<![A-Za-z])([kKMGTP]i?)(B|bit|b)(/s|ps)?(?![A-Za-z])")
HYPHENATED = re.compile(r"(?<![\w-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+")
_HAN = re.compile(r"^[\u4e00-\u9fff]{2,8}$")


def unit_token(prefix: str, base: str, per: str | None) -> str:
    """The index word of a unit: bytes ``gb``, ``gb/s``, ``gib``; bits ``gbit``, ``gbit/s``.

    A lower-case ``b`` after an upper-case prefix is bits ("Gb/s"); all lower case ("gb/s") is read as
    bytes, the way people type GB/s in a hurry.
    """
    bits = base == "bit" or (base == "b" and prefix[0].isupper())
    return f"{prefix.lower()}{'bit' if bits else 'b'}{'/s' if per else ''}"


def glossary_terms(text: str) -> list[str]:
    """The glossary's terms and their Chinese names (``bubble`` -> 流水线气泡), and the bold terms of its lists."""
    out = []
    inside = False
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("```{glossary}"):
            inside = True
            continue
        if inside and line.startswith("```"):
            inside = False
            continue
        if inside and line.strip() and not line[0].isspace():
            out.append(line.strip())
            definition = lines[i + 1].strip().lstrip(":").strip() if i + 1 < len(lines) else ""
            parts = definition.split("。", 1)[0].split("，")
            # "流水线气泡。", "Pipeline parallelism，流水线并行。": the term's Chinese name
            if len(parts) == 1 or (len(parts) == 2 and not re.search(r"[\u4e00-\u9fff]", parts[0])):
                out.append(parts[-1].strip())
        for bold in re.findall(r"^- \*\*(.+?)\*\*", line):
            out += [w.strip() for w in bold.split("与")]
    return [t for t in dict.fromkeys(out) if " " not in t and (_HAN.match(t) or t.isascii())]


def dictionary_lines() -> list[str]:
    """jieba user dictionary lines: one word each (jieba picks a frequency that keeps it whole)."""
    words = list(TERMS) + list(ALSO) + glossary_terms(GLOSSARY.read_text(encoding="utf-8"))
    return [w for w in dict.fromkeys(words) if _HAN.match(w)]


class SearchCourse(SearchChinese):
    """Sphinx's Chinese search, with units and hyphenated words kept whole (see the module)."""

    def split(self, input: str) -> list[str]:
        units = [unit_token(*m.groups()) for m in UNIT.finditer(input)]
        rest = UNIT.sub(" ", input)
        words = [w.lower() for w in HYPHENATED.findall(rest)]
        return super().split(rest) + units + words

    def stem(self, word: str) -> str:
        if re.search(r"[^a-z]", word.lower()):  # units, hyphenated words, Chinese: as they are
            return word.lower()
        return super().stem(word)

    js_stemmer_code = SearchChinese.js_stemmer_code + """
// parallel_budget.book.search: only plain Latin words are stemmed; units ("gb/s"), hyphenated words
// and Chinese are looked up as they are, as the index holds them.
var PorterStemmer = Stemmer;
Stemmer = function () {
  var porter = new PorterStemmer();
  this.stemWord = function (w) { return /[^a-z]/.test(w) ? w : porter.stemWord(w); };
};
"""

    js_splitter_code = r"""
// parallel_budget.book.search.SearchCourse.split in the page: units as one token (bytes and bits
// apart), hyphenated words whole, Chinese cut by the longest words the index knows.
function splitQuery(query) {
  var out = [];
  var unit = /(?<![A-Za-z])([kKMGTP]i?)(B|bit|b)(\/s|ps)?(?![A-Za-z])/g;
  query = query.replace(unit, function (m, p, b, per) {
    var bits = b === 'bit' || (b === 'b' && p[0] === p[0].toUpperCase());
    out.push(p.toLowerCase() + (bits ? 'bit' : 'b') + (per ? '/s' : ''));
    return ' ';
  });
  var index = typeof Search !== 'undefined' && Search._index;
  var known = function (w) { return !!index && (w in index.terms || w in index.titleterms); };
  query.split(/[^\p{Letter}\p{Number}_-]+/u).forEach(function (part) {
    (part.match(/\p{Script=Han}+|[^\p{Script=Han}]+/gu) || []).forEach(function (run) {
      if (!/\p{Script=Han}/u.test(run) || !index) {
        var w = run.replace(/^-+|-+$/g, '');
        if (w) out.push(w);
        return;
      }
      for (var i = 0; i < run.length; ) {  // longest known word first; a lone unknown character is dropped
        var n = Math.min(8, run.length - i);
        while (n > 1 && !known(run.substr(i, n))) n--;
        if (known(run.substr(i, n))) out.push(run.substr(i, n));
        i += n;
      }
    });
  });
  return out.filter(function (w) { return w; });
}
"""


class TaughtHere(SphinxPostTransform):
    """Index entries (main) for the :data:`TAUGHT` terms of this page; a term the page no longer holds warns."""

    default_priority = 900
    formats = ("html",)

    def run(self, **kwargs) -> None:
        terms = [t for t, doc in TAUGHT.items() if doc == self.env.docname]
        sections = list(self.document.findall(nodes.section))
        if not terms or not sections:
            return
        text = self.document.astext()
        for term in terms:
            if term not in text:
                logger.warning(f"search.TAUGHT: “{term}” no longer occurs in {self.env.docname}; "
                               "update the map in parallel_budget/book/search.py", location=self.env.docname)
                continue
            section = next((s for s in sections if term in s[0].astext()), sections[0])
            # The section's own id: the search shows that section's text as the excerpt.
            words = [term] + [other for other, use in ALSO.items() if use == term]
            section.insert(1, addnodes.index(entries=[("single", w, section["ids"][0], "main", None) for w in words]))


def write_dictionary(app) -> None:
    """Write the jieba user dictionary for this build and point Sphinx's Chinese search at it."""
    path = Path(app.doctreedir) / DICT_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{w}\n" for w in dictionary_lines()), encoding="utf-8")
    app.config.html_search_options = {**(app.config.html_search_options or {}), "dict": str(path)}


def setup(app) -> None:
    app.add_search_language(SearchCourse)
    app.add_post_transform(TaughtHere)
    app.connect("builder-inited", write_dictionary)
