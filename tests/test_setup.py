"""Is the venv `make book` made (scripts/setup.sh) ready to start processes fast?

setup.sh installs with ``pip --no-compile`` and then byte-compiles the venv on every core.  Without
that step, where PYTHONDONTWRITEBYTECODE is set (container images, CI) nothing is ever cached and each
lab rank, grading kernel and book page compiles torch's modules again: CI took 878 s instead of 600 s.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

# What every lab rank, grading kernel and executed page imports.
MODULES = ("torch", "torch.distributed", "nbgrader", "ipykernel", "pint", "myst_nb")


@pytest.mark.parametrize("name", MODULES)
def test_what_every_process_imports_is_byte_compiled(name):
    """Does the compiled twin of each module's source exist next to it (so no process compiles it again)?"""
    source = importlib.util.find_spec(name).origin
    cached = Path(importlib.util.cache_from_source(source))
    assert cached.exists(), (f"{name} is not byte-compiled ({cached} is missing): run "
                             f"`VENV={sys.prefix} bash scripts/setup.sh`, which compiles the whole venv after pip")
