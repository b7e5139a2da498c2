#!/usr/bin/env bash
# Create .venv with everything the course needs. Idempotent; called by `make`.
# System packages (Debian): fonts-noto-cjk for Chinese in figures, chromium for
# browser tests. Installed when running as root with apt-get; otherwise we say
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VENV:-.venv}"
PYTHON="${PYTHON:-python3.11}"

need_pkgs=()
dpkg -s fonts-noto-cjk >/dev/null 2>&1 || need_pkgs+=(fonts-noto-cjk)
command -v bwrap >/dev/null || need_pkgs+=(bubblewrap)  # the grading sandbox (parallel_budget/grading/sandbox/bwrap.py)
if [ "${PB_WITH_BROWSER:-1}" = 1 ]; then
  [ -x /usr/bin/chromium ] || need_pkgs+=(chromium)
  command -v node >/dev/null || need_pkgs+=(nodejs)  # node --test for the JS calculators
  command -v npm >/dev/null || need_pkgs+=(npm)  # installs axe-core (package-lock.json) for the browser tests
fi
if [ ${#need_pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Debian packages: ${need_pkgs[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
    rm -rf "${HOME}/.cache/matplotlib"
  else
    echo "setup: please install the Debian packages: ${need_pkgs[*]} (sudo apt-get install ${need_pkgs[*]})" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV with $PYTHON"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
echo "setup: installing requirements.txt into $VENV"
# --no-compile, then compileall on both cores: pip byte-compiles serially, a large share of a warm-cache
# install (torch alone has thousands of modules).  Compiling here rather than on first use matters where
# PYTHONDONTWRITEBYTECODE is set (common in container images, and on CI): Python would then never cache
# anything, and every lab rank, grading kernel and book page would compile torch's modules again
# (import torch: 2.8 s instead of 1.4 s).  A file that is not Python 3 (test data of some packages) is
# skipped, not an error (tests/test_setup.py checks that what every process imports is compiled).
"$VENV/bin/pip" install -q --no-compile -r requirements.txt
echo "setup: byte-compiling $VENV"
env -u PYTHONDONTWRITEBYTECODE "$VENV/bin/python" -m compileall -q -j 0 \
  "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" >/dev/null 2>&1 || true
# JupyterLab as a student gets it, set inside the venv (nothing in $HOME; tests/test_jupyterlab.py):
# - settings (scripts/jupyterlab-overrides.json): a double-click opens a chapter (MyST .md) as a notebook
#   through jupytext; a Chinese interface (zh-CN language pack); a notebook's kernel ends with its tab;
#   a short autosave (saving a chapter writes back the same bytes, book/jupytext.toml); no news, no
#   update checks;
# - page config: nbgrader's instructor tools (create assignment, formgrader, courses, validate) hidden.
#   The same list, enabled, is what `python -m parallel_budget.grading formgrader` adds for instructors
#   (parallel_budget/grading/jupyter_config/labconfig/page_config.json);
# - server (scripts/jupyter-server-config.json): a kernel no tab is connected to ends after a minute idle.
#   JupyterLab's kernelShutdown (above) ends a notebook's kernel with its tab, but jupytext's factory, which
#   opens the chapters, does not read that setting.
"$VENV/bin/python" - "$VENV" scripts/jupyterlab-overrides.json \
  parallel_budget/grading/jupyter_config/labconfig/page_config.json scripts/jupyter-server-config.json <<'PY'
import json, sys
from pathlib import Path
venv, overrides, instructor, server = (Path(a) for a in sys.argv[1:])

def merge(target, ours):
    merged = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
    for key, values in ours.items():
        merged.setdefault(key, {}).update(values)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(merged, indent=2) + "\n", encoding="utf-8")

merge(venv / "share" / "jupyter" / "lab" / "settings" / "overrides.json",
      json.loads(overrides.read_text(encoding="utf-8")))
tools = json.loads(instructor.read_text(encoding="utf-8"))["disabledExtensions"]
merge(venv / "etc" / "jupyter" / "labconfig" / "page_config.json",
      {"disabledExtensions": {plugin: True for plugin in tools}})
target = venv / "etc" / "jupyter" / "jupyter_server_config.d" / "parallel_budget.json"
target.parent.mkdir(parents=True, exist_ok=True)
target.write_text(server.read_text(encoding="utf-8"), encoding="utf-8")
PY
# Our one JupyterLab extension, plain JavaScript without a build step: a link to a term of the glossary
# scrolls to it once jupyterlab-myst has rendered it (scripts/labextension/parallel-budget-anchors).
rm -rf "$VENV/share/jupyter/labextensions/parallel-budget-anchors"
cp -r scripts/labextension/parallel-budget-anchors "$VENV/share/jupyter/labextensions/"
# Node packages of the tests (axe-core, the accessibility engine the browser tests inject), pinned in
# package.json and locked in package-lock.json; installed once here, so the tests never fetch anything.
if [ "${PB_WITH_BROWSER:-1}" = 1 ] && command -v npm >/dev/null; then
  want=$(node -p 'require("./package-lock.json").packages["node_modules/axe-core"].version')
  have=$(node -p 'try { require("./node_modules/axe-core/package.json").version } catch (e) { "" }')
  if [ "$want" != "$have" ]; then
    echo "setup: installing node packages from package-lock.json (axe-core $want)"
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null
  fi
fi
touch "$VENV/.installed"
