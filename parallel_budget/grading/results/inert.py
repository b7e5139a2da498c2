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
* :class:`InertOutputs` also rebuilds what nbconvert's templates read of a cell
  from typed allow-lists (issue 31): output metadata (:func:`output_metadata`:
  numbers only for width/height, no ``filenames``/``isolated``), ``nbgrader``
  metadata, execution counts, stream names.  The templates write some of these
  as unquoted attributes or URLs, where no HTML sanitizer looks.
* :func:`configure` turns both on for an exporter's config.
"""

from __future__ import annotations

import math
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


def _number(value, top: float = 100000):
    """``value`` when it is a plain finite number in (0, top], else None (a string could be markup)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value if 0 < value <= top else None


def output_metadata(meta) -> dict:
    """The output metadata a template may see: per MIME type, numeric width/height, ``unconfined`` and text ``alt``.

    nbconvert's templates write width and height as *unquoted* attributes and ``filenames`` as image
    URLs, so anything else a kernel sends (filenames, isolated, strings for sizes...) is dropped here."""
    out: dict = {}
    if not isinstance(meta, dict):
        return out
    for key, value in meta.items():
        if key in ("width", "height") and _number(value) is not None:
            out[key] = value
        elif key in SAFE_OUTPUTS | SANITIZED_OUTPUTS and isinstance(value, dict):
            kept = {k: value[k] for k in ("width", "height") if _number(value.get(k)) is not None}
            if value.get("unconfined") is True:
                kept["unconfined"] = True
            if isinstance(value.get("alt"), str):
                kept["alt"] = value["alt"][:500]  # written quoted and escaped
            if kept:
                out[key] = kept
    return out


def nbgrader_metadata(meta) -> dict:
    """A cell's ``nbgrader`` metadata with known keys of the right types only (a student can edit it)."""
    if not isinstance(meta, dict):
        return {}
    out = {k: meta[k] for k in _NBGRADER_FLAGS if isinstance(meta.get(k), bool)}
    out.update({k: meta[k] for k in _NBGRADER_TEXT if isinstance(meta.get(k), str)})
    out.update({k: meta[k] for k in _NBGRADER_NUMBERS
                if not isinstance(meta.get(k), bool) and isinstance(meta.get(k), (int, float))})
    return out


_NBGRADER_FLAGS = ("solution", "grade", "locked", "task")
_NBGRADER_TEXT = ("grade_id", "comment", "cell_type", "checksum")
_NBGRADER_NUMBERS = ("points", "score", "schema_version")
STREAMS = ("stdout", "stderr")
OUTPUT_TYPES = ("stream", "display_data", "execute_result", "error")


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class InertOutputs(Preprocessor):
    """Rebuild what a template sees of each cell from validated parts: outputs that could run (JavaScript, widgets,
    unknown types) dropped, HTML sanitized, metadata reduced to typed allow-lists, counts made integers."""

    enabled = Bool(True).tag(config=True)  # a plain nbconvert preprocessor is off by default

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        meta = cell.get("metadata", {})
        cell["metadata"] = type(meta)()
        if isinstance(meta, dict) and "nbgrader" in meta:
            cell["metadata"]["nbgrader"] = type(meta)(nbgrader_metadata(meta["nbgrader"]))
        if "execution_count" in cell:
            cell["execution_count"] = _count(cell["execution_count"])
        if cell.get("cell_type") == "code":
            cell["outputs"] = [o for o in (self._output(o) for o in cell.get("outputs", [])) if o is not None]
        return cell, resources

    @staticmethod
    def _output(output):
        if not isinstance(output, dict) or output.get("output_type") not in OUTPUT_TYPES:
            return None
        output["metadata"] = type(output)(output_metadata(output.get("metadata")))
        if "execution_count" in output:
            output["execution_count"] = _count(output["execution_count"])
        if output["output_type"] == "stream":
            output["name"] = output.get("name") if output.get("name") in STREAMS else "stdout"
            output["text"] = output.get("text") if isinstance(output.get("text"), str) else ""
        if output["output_type"] == "error":
            for key in ("ename", "evalue"):
                output[key] = output.get(key) if isinstance(output.get(key), str) else ""
            tb = output.get("traceback")
            output["traceback"] = [t for t in tb if isinstance(t, str)] if isinstance(tb, list) else []
        data = output.get("data")
        if output["output_type"] in ("display_data", "execute_result"):
            data = data if isinstance(data, dict) else {}
            for mime in list(data):
                if mime in SANITIZED_OUTPUTS and isinstance(data[mime], str):
                    if mime == "text/html":
                        data[mime] = clean_html(data[mime])
                elif mime not in SAFE_OUTPUTS or (mime != "application/json" and not isinstance(data[mime], str)):
                    del data[mime]
            output["data"] = data
        return output


class FeedbackPolicy(Preprocessor):
    """Give a feedback page its nonce and policy (``resources.csp_nonce``, ``resources.csp_policy``, :mod:`.csp`).

    The nonce is a digest of the notebook the page is made from, so the same submission gives the same bytes
    on every run (feedback is compared and re-made), while no student can write it into their own notebook:
    a script carrying it would change the digest (a SHA-256 fixed point).
    """

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb, resources):
        from .csp import feedback_policy, notebook_nonce

        resources["csp_nonce"] = nonce = notebook_nonce(nb)
        resources["csp_policy"] = feedback_policy(nonce)
        return nb, resources


def configure(cfg):
    """``cfg`` with nbconvert's sanitizing switched on and its ``clean_html`` filter replaced by :func:`clean_html`."""
    cfg.HTMLExporter.sanitize_html = True
    cfg.HTMLExporter.filters = {**dict(cfg.HTMLExporter.get("filters", {}) or {}),
                                "clean_html": "parallel_budget.grading.results.inert.clean_html"}
    return cfg
