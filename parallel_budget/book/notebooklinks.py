"""Links to the exercise notebooks that open them in JupyterLab and download them from the site (issue 25).

A chapter links its exercise notebook as an ordinary Markdown link,

    [02-ring-allreduce.ipynb](../exercises/lesson/02-ring-allreduce.ipynb)

which jupyterlab-myst hands to JupyterLab: a click opens the notebook in a new tab.  (A ``{download}`` role
would be a plain ``/files/`` link there, and the browser would save a copy.)  On the site the notebook is not
a page of the book, and myst-parser, seeing the ``.ipynb`` suffix, would look for a document and warn;
:class:`NotebookLinks` makes such a link the download ``{download}`` makes (``_downloads/<hash>/<name>``), while
Sphinx is still reading the page, so the file is collected and shipped with the site.
"""

from __future__ import annotations

from pathlib import Path

from sphinx import addnodes
from sphinx.transforms import SphinxTransform


def notebook_download(docname: str, srcdir, found_docs) -> str | None:
    """The download target (``/path.ipynb`` from the source folder) for a link to ``docname``, when that
    is a notebook file that is not a page of the book; else ``None``."""
    if docname in found_docs or not (Path(srcdir) / f"{docname}.ipynb").is_file():
        return None
    return f"/{docname}.ipynb"


class NotebookLinks(SphinxTransform):
    """``[text](path.ipynb)`` to a notebook outside the book -> a download reference of that file."""

    default_priority = 400  # while reading: the download collector runs on doctree-read, after transforms

    def apply(self, **kwargs) -> None:
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("refdomain") != "doc" or node.get("reftype") != "myst":
                continue
            target = notebook_download(node["reftarget"], self.env.srcdir, self.env.found_docs)
            if target is None:
                continue
            download = addnodes.download_reference(
                refdomain=None, reftarget=target, refdoc=node.get("refdoc", self.env.docname), reftype="myst",
                refexplicit=node.get("refexplicit", True), classes=["xref", "download", "myst"])
            download.extend(node.children)
            download.source, download.line = node.source, node.line
            node.replace_self(download)


def setup(app) -> dict:
    app.add_transform(NotebookLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
