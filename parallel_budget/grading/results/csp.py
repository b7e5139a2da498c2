"""Content-Security-Policy of every page that shows student work (issue 31, item 1).

Sanitizing (:mod:`.inert`) decides what of a submission reaches a page; the
policy decides what the page may *do* whatever reached it.  Both pages that
show student work get one:

* formgrader (``python -m parallel_budget.grading formgrader``): every nbgrader
  page is sent with :func:`formgrader_policy` in the ``Content-Security-Policy``
  header (:mod:`.formgrader`).  Scripts run only from a ``<script>`` tag carrying the
  request's nonce (the course's templates, ``templates/pb_formgrader`` and
  ``templates/pb_formgrade``, put it on theirs) or from two folders of this
  server (formgrader's static files and the vendored MathJax).  No inline
  handler, no ``javascript:`` URL (both are inline script), no ``eval``, no
  plugin, no ``<base>``, no frame, no form sent elsewhere.
* feedback HTML: a ``<meta http-equiv>`` policy (:func:`feedback_policy`) as the
  first thing in ``<head>``: a page opened from disk or an LMS has no server
  to send a header.  The nonce is on MathJax's tags; ``'strict-dynamic'`` lets
  MathJax load its own components, and nothing else.

The rest of formgrader's JupyterLab gets :data:`SERVER_POLICY` through
``ServerApp.tornado_settings`` (``jupyter_config/jupyter_server_config.json``):
no plugin, no ``<base>``, framed only by itself.  JupyterLab renders
notebooks with its own sanitizer and runs no output of an untrusted notebook;
Jupyter adds ``sandbox allow-scripts`` (no same-origin rights) to ``/files/``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

# Sent for JupyterLab's own pages (they need inline styles and their bundles; Jupyter adds
# "sandbox allow-scripts" for /files/).  formgrader's pages get the strict policy below.
SERVER_POLICY = "frame-ancestors 'self'; object-src 'none'; base-uri 'self'; form-action 'self'"
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?\Z|https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?\Z")
_PATH = re.compile(r"/[A-Za-z0-9._~/\-]*\Z")
UNSAFE = ("'unsafe-inline'", "'unsafe-eval'", "'unsafe-hashes'", "'wasm-unsafe-eval'", "data:", "*")


def new_nonce() -> str:
    """A fresh nonce (128 bits, URL-safe base64)."""
    return secrets.token_urlsafe(16)


def notebook_nonce(nb) -> str:
    """A feedback page's nonce: 128 bits of SHA-256 over the notebook (nbformat's JSON), URL-safe base64."""
    import nbformat

    digest = hashlib.sha256(nbformat.writes(nb).encode("utf-8")).digest()[:16]
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


def formgrader_policy(nonce: str, origin: str, base_url: str) -> str:
    """The policy of a formgrader page served from ``origin`` (scheme://host:port) under ``base_url``."""
    root = (origin.rstrip("/") + "/" + base_url.strip("/")).rstrip("/")
    scripts = f"'nonce-{nonce}'"
    if _ORIGIN.match(origin) and _PATH.match(base_url):  # a Host header cannot add a directive
        scripts += f" {root}/formgrader/static/ {root}/pb-mathjax/"
    return "; ".join([
        "default-src 'none'",
        f"script-src {scripts}",
        "style-src 'self' 'unsafe-inline'",  # MathJax writes styles; a student's style attributes are removed
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "form-action 'self'",
        "frame-src 'none'",
        "worker-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'self'",  # formgrader opens inside JupyterLab
    ])


def feedback_policy(nonce: str) -> str:
    """The policy of a feedback page (a ``<meta http-equiv>``: frame-ancestors and sandbox cannot be set there)."""
    return "; ".join([
        "default-src 'none'",
        f"script-src 'nonce-{nonce}' 'strict-dynamic'",
        "style-src 'unsafe-inline'",  # the page's own styles are inline; a student's are removed
        "img-src data:",
        "font-src 'self' file: data:",  # MathJax's fonts next to the page (opened from disk or a course site)
        "connect-src 'none'",
        "form-action 'none'",
        "frame-src 'none'",
        "worker-src 'none'",
        "object-src 'none'",
        "base-uri 'none'",
    ])


def script_sources(policy: str) -> list:
    """The ``script-src`` sources of a policy (for tests and the README)."""
    for part in policy.split(";"):
        words = part.split()
        if words and words[0] == "script-src":
            return words[1:]
    return []

