"""JupyterLab server extension for formgrader (issue 17): offline MathJax, mark schemes, fresh reads.

``python -m parallel_budget.grading formgrader`` starts JupyterLab with this
extension, rooted at the course root (so Preview and "Open live notebook"
reach ``solutions/`` and ``autograde/autograded/``).  It changes five things
in nbgrader 0.9.6's formgrader, inside this server only:

* a submission is shown inert (issue 22): nbgrader renders it as nbconvert
  HTML on the Jupyter origin, so a student's ``<script>``, ``onerror`` or
  ``display(Javascript(...))`` would run as the logged-in instructor; the
  page's exporter sanitizes Markdown and outputs with :mod:`.inert` (nh3);

* every formgrader page is sent with a strict Content-Security-Policy
  (:mod:`.csp`, issue 31) and a fresh nonce per request; the course's
  copies of nbgrader's templates (``templates/pb_formgrader``, autoescaped,
  values as JSON, no inline handler) put the nonce on their scripts;
* the grading page uses ``templates/pb_formgrade``: MathJax 3 from the copy
  the book vendors, served at ``<base_url>/pb-mathjax/`` (no CDN), and a
  banner that says in words when a save failed or the page went stale;
* :class:`MarkSchemes` puts the mark scheme of every manually graded cell
  (the ``BEGIN MARK SCHEME`` region of the source notebook) right under the
  student's answer, for the grader only;
* formgrader keeps one database session for the server's lifetime, so rows
  the grade command changed would be served from its cache (or, after a
  failed write, every request would fail); each request now starts with a
  rollback, i.e. reads what the gradebook holds now.
"""

from __future__ import annotations

import json
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from traitlets import Bool, Unicode

from . import csp, inert
from .feedback import TEMPLATES, mathjax_source

BEGIN, END = "BEGIN MARK SCHEME", "END MARK SCHEME"
LABEL = "**评分标准**（来自 `solutions/`，只在 formgrader 里显示，学生看不到）"


def mark_schemes(source_notebook: Path) -> dict:
    """{grade_id: mark scheme text} of the graded cells of a source notebook."""
    try:
        cells = json.loads(source_notebook.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    out = {}
    for cell in cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if gid and BEGIN in src:
            inside, lines = False, []
            for line in src.splitlines():
                if BEGIN in line:
                    inside = True
                elif END in line:
                    inside = False
                elif inside:
                    lines.append(line)
            out[gid] = "\n".join(lines).strip()
    return out


class MarkSchemes(Preprocessor):
    """Insert a read-only mark-scheme cell after each manually graded cell of the page."""

    enabled = Bool(True).tag(config=True)
    source_root = Unicode("").tag(config=True)  # <course root>/<source directory>

    def preprocess(self, nb, resources):
        path = Path(self.source_root) / resources.get("assignment_id", "") / f"{resources.get('notebook_id', '')}.ipynb"
        schemes = mark_schemes(path)
        if not schemes:
            return nb, resources
        from nbformat.v4 import new_markdown_cell

        cells = []
        for cell in nb.cells:
            cells.append(cell)
            meta = cell.get("metadata", {}).get("nbgrader", {})
            gid = meta.get("grade_id")
            if gid in schemes and meta.get("grade") and meta.get("solution"):
                text = "\n".join("> " + line for line in schemes[gid].splitlines())
                cells.append(new_markdown_cell(f"{LABEL}\n\n{text}", metadata={"pb_mark_scheme": gid}))
        nb.cells = cells
        return nb, resources


def formgrade_exporter(formgrader):
    """nbgrader's formgrade exporter with the course template and the mark schemes."""
    import os

    from nbconvert.exporters import HTMLExporter
    from traitlets.config import Config

    nbgrader_templates = Path(__import__("nbgrader").__file__).parent / "server_extensions" / "formgrader" / "templates"
    cfg = inert.configure(Config(formgrader.config))
    cfg.HTMLExporter.template_name = "pb_formgrade"
    cfg.HTMLExporter.extra_template_basedirs = [str(TEMPLATES), str(nbgrader_templates)]
    exporter = HTMLExporter(config=cfg)
    coursedir = formgrader.coursedir
    source = os.path.join(coursedir.root, coursedir.source_directory)
    exporter.register_preprocessor(inert.InertOutputs(), enabled=True)
    exporter.register_preprocessor(MarkSchemes(source_root=source), enabled=True)
    return exporter


class _NoncedExporter:
    """The page's exporter, handing the request's nonce to the template (``resources.csp_nonce``)."""

    def __init__(self, exporter, nonce: str):
        self._exporter, self._nonce = exporter, nonce

    def from_filename(self, filename, resources=None, **kw):
        return self._exporter.from_filename(filename, resources=dict(resources or {}, csp_nonce=self._nonce), **kw)


def _jinja_env(plain):
    """formgrader's Jinja environment with the course's nonced copies of its templates first, autoescaping on."""
    from jinja2 import ChoiceLoader, Environment, FileSystemLoader

    return Environment(loader=ChoiceLoader([FileSystemLoader(str(TEMPLATES / "pb_formgrader")), plain.loader]),
                       autoescape=True)


def _patch_formgrader() -> None:
    from nbgrader.server_extensions.formgrader.base import BaseHandler
    from nbgrader.server_extensions.formgrader.handlers import SubmissionFilesHandler

    if getattr(BaseHandler, "_pb_patched", False):
        return
    plain_gradebook = BaseHandler.gradebook.fget

    def gradebook(self):
        gb = plain_gradebook(self)
        if not getattr(self, "_pb_fresh", False):  # once per request, before anything is read or changed
            gb.db.rollback()
            self._pb_fresh = True
        return gb

    def exporter(self):
        formgrader = self.settings["nbgrader_formgrader"]
        cached = self.settings.get("pb_exporter")
        if cached is None or cached[0] is not formgrader.coursedir:
            cached = (formgrader.coursedir, formgrade_exporter(formgrader))
            self.settings["pb_exporter"] = cached
        return _NoncedExporter(cached[1], self.csp_nonce)

    def nonce(self):
        if getattr(self, "_pb_nonce", None) is None:
            self._pb_nonce = csp.new_nonce()
        return self._pb_nonce

    def policy(self):
        origin = f"{self.request.protocol}://{self.request.host}"
        return csp.formgrader_policy(self.csp_nonce, origin, self.settings.get("base_url", "/"))

    def render(self, name, **ns):
        env = self.settings.get("pb_jinja2_env")
        if env is None:
            env = self.settings["pb_jinja2_env"] = _jinja_env(self.settings["nbgrader_jinja2_env"])
        return env.get_template(name).render(csp_nonce=self.csp_nonce, **ns)

    BaseHandler.gradebook = property(gradebook)
    BaseHandler.exporter = property(exporter)
    BaseHandler.csp_nonce = property(nonce)
    BaseHandler.content_security_policy = property(policy)
    BaseHandler.render = render
    BaseHandler._pb_patched = True
    # A student's own files (formgrader serves the autograded folder): an opaque origin where nothing runs.
    SubmissionFilesHandler.content_security_policy = property(lambda self: policy(self) + "; sandbox")


def _jupyter_server_extension_points():
    return [{"module": "parallel_budget.grading.results.formgrader"}]


def _load_jupyter_server_extension(serverapp) -> None:
    from jupyter_server.utils import url_path_join
    from tornado.web import StaticFileHandler

    web_app = serverapp.web_app
    route = url_path_join(web_app.settings["base_url"], "pb-mathjax/(.*)")
    web_app.add_handlers(".*$", [(route, StaticFileHandler, {"path": str(mathjax_source())})])
    _patch_formgrader()
    serverapp.log.info("parallel_budget.grading.results.formgrader: inert submissions, offline MathJax, mark schemes, fresh gradebook reads")


load_jupyter_server_extension = _load_jupyter_server_extension
