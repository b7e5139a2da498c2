"""Student content shown inert: what formgrader and feedback pages may render of a submission (issue 22).

A submission's Markdown and outputs are someone else's HTML.  formgrader serves
its grading page on the Jupyter origin, where a script would run with the
instructor's session (and the ``_xsrf`` cookie: it could PUT marks, write files
through ``/api/contents`` or open a terminal).  So every page that shows a
submission renders it the way nbconvert's ``SanitizeHTML`` preprocessor and
``HTMLExporter.sanitize_html`` do, with the maintained sanitizer nh3 (Rust's
ammonia) instead of a hand-written one:

* :func:`clean_html` is the exporters' ``clean_html`` filter, applied to every
  rendered Markdown cell, HTML/Markdown output and raw cell: an allow-list of
  tags (no ``script``, ``style``, ``iframe``, ``svg``, ``form``, ``input``,
  ``object``...), no event attributes, no ``javascript:``/relative URLs
  (nothing the page would request from the Jupyter server), images only as
  ``data:image/...``, ``id`` values prefixed (they cannot collide with the
  page's own inputs), classes only from Pygments' token names and a few
  others, and ``style`` only for table alignment.  Text is untouched, so TeX
  (``$...$``) still reaches MathJax.
* :class:`InertOutputs` keeps only output types that render as data
  (text, images, LaTeX, sanitized HTML/Markdown): JavaScript, widget views and
  unknown types are dropped, as is the notebook's widget state.
* :func:`configure` turns both on for an exporter's config.
"""

from __future__ import annotations

import re

import nh3
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool

ID_PREFIX = "student-"
# Output types that render as data.  text/html and text/markdown are sanitized; image/svg+xml
# becomes <img src="data:..."> (nbconvert's default), where an SVG cannot run a script.
SAFE_OUTPUTS = frozenset({"text/plain", "text/latex", "image/png", "image/jpeg", "image/gif", "image/svg+xml",
                          "application/json"})
SANITIZED_OUTPUTS = frozenset({"text/html", "text/markdown"})
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp|svg\+xml);base64,[A-Za-z0-9+/=\s]*\Z")
_LINK = re.compile(r"(https?:|mailto:)", re.IGNORECASE)
_URL_ATTRS = {"href", "src", "cite", "longdesc"}


def _safe_classes() -> frozenset:
    from pygments.token import STANDARD_TYPES

    return frozenset(v for v in STANDARD_TYPES.values() if v) | {"highlight", "dataframe", "anchor-link"}


SAFE_CLASSES = _safe_classes()
_TAGS = frozenset(nh3.ALLOWED_TAGS)
_ATTRIBUTES = {tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()}
_ATTRIBUTES["*"] = {"class", "id", "title", "lang", "dir"}
for _cell in ("th", "td"):
    _ATTRIBUTES[_cell] = _ATTRIBUTES.get(_cell, set()) | {"style"}  # Markdown tables' text-align


def _attribute(tag: str, attr: str, value: str):
    """nh3's attribute filter: the value to keep, or None to drop the attribute."""
    if attr == "class":
        kept = [c for c in value.split() if c in SAFE_CLASSES or c.startswith(("hl-", "language-"))]
        return " ".join(kept) or None
    if attr in _URL_ATTRS:
        if tag == "img" and attr == "src":
            return value if _DATA_IMAGE.match(value.strip()) else None
        return value if _LINK.match(value.strip()) else None  # an outside link the reader may follow
    return value


def clean_html(html) -> str:
    """``html`` (a fragment from a submission) without anything that runs, loads or impersonates the page."""
    html = html.decode() if isinstance(html, bytes) else str(html)
    return nh3.clean(html, tags=_TAGS, attributes=_ATTRIBUTES, attribute_filter=_attribute,
                     url_schemes={"http", "https", "mailto", "data"}, url_relative="deny",
                     filter_style_properties={"text-align"}, id_prefix=ID_PREFIX, strip_comments=True)


class InertOutputs(Preprocessor):
    """Drop outputs that could run (JavaScript, widgets, unknown types); sanitize HTML outputs."""

    enabled = Bool(True).tag(config=True)  # a plain nbconvert preprocessor is off by default

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        for output in cell.get("outputs", []):
            meta = output.get("metadata", {}).get("text/html")
            if isinstance(meta, dict):
                meta.pop("isolated", None)  # nbconvert would put the HTML in an unsandboxed data: iframe
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            for mime in list(data):
                if mime in SANITIZED_OUTPUTS and isinstance(data[mime], str):
                    if mime == "text/html":
                        data[mime] = clean_html(data[mime])
                elif mime not in SAFE_OUTPUTS:
                    del data[mime]
        return cell, resources


def configure(cfg):
    """``cfg`` with nbconvert's sanitizing switched on and its ``clean_html`` filter replaced by :func:`clean_html`."""
    cfg.HTMLExporter.sanitize_html = True
    cfg.HTMLExporter.filters = {**dict(cfg.HTMLExporter.get("filters", {}) or {}),
                                "clean_html": "parallel_budget.grading.inert.clean_html"}
    return cfg
