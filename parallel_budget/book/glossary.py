"""Glossary terms that work on the site and in JupyterLab (issue 13).

A ``{term}`` role resolves only in Sphinx: jupyterlab-myst sees one notebook at a
time, cannot find ``book/glossary.md``'s entries and leaves the word as plain text
(with a console error).  So the chapters write a glossary term as an ordinary
Markdown link to the glossary page's anchor,

    [挂起](glossary.md#term-hang)

which JupyterLab opens as a notebook (jupytext is the default viewer of ``.md``).
On the site, :class:`GlossaryLinks` turns each such link into the ``std:term``
reference ``{term}`` would have made: an anchor that names no glossary entry is a
build warning (``-W`` fails), never a dead link.

``book/glossary.md`` writes each definition as ``term`` then ``  : definition``:
the definition list mystmd's ``{glossary}`` directive expects (each term gets an
``id`` in JupyterLab, no console error).  :class:`Glossary` is Sphinx's glossary
directive reading that marker as plain indentation.
"""

from __future__ import annotations

import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.domains.std import Glossary as SphinxGlossary
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

GLOSSARY_DOC = "book/glossary"
ANCHOR = "term-"
# "  : definition" (a definition-list item) -> "  definition" (Sphinx's glossary format).
DEFINITION = re.compile(r"^(\s+):\s+(.*)$")


def sphinx_lines(lines):
    """Glossary content with each ``: `` definition marker dropped, indentation kept."""
    out = []
    for line in lines:
        m = DEFINITION.match(line)
        out.append(m.group(1) + m.group(2) if m else line)
    return out


class Glossary(SphinxGlossary):
    """Sphinx's ``glossary`` that also reads ``term`` / ``  : definition`` (mystmd's form)."""

    def run(self):
        content = StringList()
        for line, (source, offset) in zip(sphinx_lines(list(self.content)), self.content.items):
            content.append(line, source, offset)
        self.content = content
        return super().run()


def term_ids(std_domain) -> dict:
    """(docname, anchor id) -> glossary term, for every term the book defines."""
    return {(doc, node_id): name for (kind, name), (doc, node_id) in std_domain.objects.items() if kind == "term"}


class GlossaryLinks(SphinxPostTransform):
    """``[text](glossary.md#term-x)`` -> the ``std:term`` reference of term x; unknown anchors warn."""

    default_priority = 5  # before myst-parser's link resolver (9) and Sphinx's (10)

    def run(self, **kwargs) -> None:
        terms = None
        for node in list(self.document.findall(addnodes.pending_xref)):
            anchor = node.get("reftargetid") or ""
            if node.get("refdomain") != "doc" or node.get("reftarget") != GLOSSARY_DOC or not anchor.startswith(ANCHOR):
                continue
            if terms is None:
                terms = term_ids(self.env.get_domain("std"))
            name = terms.get((GLOSSARY_DOC, anchor))
            if name is None:
                known = ", ".join(sorted(a for _, a in terms))
                logger.warning(f"glossary link #{anchor} names no term of {GLOSSARY_DOC}.md (known anchors: {known})",
                               location=node, type="pb", subtype="glossary")
                node.replace_self(nodes.inline(node.astext(), node.astext()))
                continue
            node["refdomain"], node["reftype"], node["reftarget"], node["refexplicit"] = "std", "term", name, True


def setup(app) -> dict:
    app.add_directive_to_domain("std", "glossary", Glossary, override=True)
    app.add_post_transform(GlossaryLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
