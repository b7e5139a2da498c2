"""The course's vocabulary: one word per concept, kept in this one place.

The glossary page shows :data:`TERMS` (:func:`html_table`, in a hidden cell, so editing a term
re-executes the glossary like any package file it imports), and ``tests/test_typography.py``
holds every text a reader sees to it: a term's ``pattern`` may appear nowhere else.

``scope``: ``"everywhere"`` (pages, notebooks, question bank, messages, scripts) or
``"prose"`` (the Markdown of the pages and notebooks, where the word needs its context).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

SCOPES = ("everywhere", "prose")


@dataclass(frozen=True)
class Term:
    """One choice of word: what the course writes, the form it avoids (as shown), and why."""

    use: str
    avoid: str
    scope: str
    why: str
    pattern: str = field(default="")  # what a checker looks for; default: ``avoid`` itself

    def __post_init__(self):
        if self.scope not in SCOPES:
            raise ValueError(f"Term 的字段 scope 只能是 {'、'.join(SCOPES)}，收到 {self.scope!r}。")
        object.__setattr__(self, "pattern", self.pattern or re.escape(self.avoid))
        re.compile(self.pattern)

    def find(self, text: str) -> list:
        """Each place ``text`` uses the avoided form, with a few characters around it."""
        return [text[max(0, m.start() - 10): m.end() + 10] for m in re.finditer(self.pattern, text)]


TERMS = (
    Term(use="集合通信", avoid="集体通信", scope="everywhere",
         why="collective communication 的两种译法。NCCL 的中文文档和国内做训练的工程师说“集合通信”，本课只用这一个。"),
    Term(use="互连", avoid="互联", scope="everywhere",
         why="interconnect：设备之间、机器之间传数据的链路（NVLink、PCIe、InfiniBand、以太网等）。"),
    Term(use="微批次", avoid="微批", pattern=r"微批(?!次)", scope="everywhere",
         why="microbatch：流水线并行把一个 batch 切成的更小的份。"),
    Term(use="B/参数（例如 16 B/参数）", avoid="16 字节/参数", pattern=r"\d+\s*字节\s*/\s*参数", scope="everywhere",
         why="每个参数带着的模型状态字节数，与正文的 GB、MB 写法一致。"),
    Term(use="显存", avoid="内存（指加速卡上的存储时）", pattern=r"(?<!设备)(?<!主机)(?<!显存与)(?<!四倍)内存(?!”)",
         scope="prose",
         why="显存是加速卡（GPU）上的设备内存，模型状态、激活和通信缓冲都放在这里；正文说“内存”只指主机（CPU 一侧）的内存。"
             "课程标题“没省四倍内存”沿用系列的问法，那里的“内存”泛指放训练状态的存储，在本课的语境里就是每张卡的显存。"),
    Term(use="第 3 课、第 3 章", avoid="第 03 课", pattern=r"第\s*0\d\s*[课章]", scope="everywhere",
         why="序号不补零。“第 3 课”指本系列的其他课，“第 3 章”指本课内的章节。"),
    Term(use="挂起（hang）", avoid="挂住；不加括注的 hang", pattern=r"(?<![(（])\bhang\b(?![)）])|挂住|hang 住",
         scope="prose", why="各 rank 长时间互相等待、谁也不前进。英文 hang 只作括注。"),
)


def html_table(terms=TERMS) -> str:
    """The glossary's list of chosen words, as an HTML table (``class="pb-terms"``)."""
    esc = html.escape
    rows = "".join(f"<tr><td>{esc(t.use)}</td><td>{esc(t.avoid)}</td><td>{esc(t.why)}</td></tr>" for t in terms)
    return (f'<table class="table pb-terms"><thead><tr><th>本课写作</th><th>不写作</th><th>说明</th></tr></thead>'
            f"<tbody>{rows}</tbody></table>")
