"""Helpers for chapter pages: glue computed numbers into prose, and draw figures.

Chapters call :func:`glue_text` so that every number in a sentence is produced
by the package at build time, and :func:`use_cjk_font` before drawing so
Chinese labels render (a missing glyph fails the build instead of drawing boxes).
"""

from __future__ import annotations

import warnings


class _Text(str):
    """A string whose repr is itself, so ``{glue:text}`` shows it without quotes."""

    def __repr__(self) -> str:
        return str(self)


def glue_text(name: str, text) -> str:
    """Glue ``text`` (a str) under ``name`` for ``{glue:text}`name``` in prose."""
    from myst_nb import glue

    value = _Text(str(text))
    glue(name, value, display=False)
    return value


CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans SC", "WenQuanYi Zen Hei", "Source Han Sans SC")


def use_cjk_font() -> str:
    """Configure matplotlib to draw Chinese, and make a missing glyph an error.

    Returns the font family chosen.  Raises ``RuntimeError`` naming the Debian
    package to install when no CJK font is found.
    """
    import matplotlib
    from matplotlib import font_manager

    available = {f.name for f in font_manager.fontManager.ttflist}
    for name in CJK_FONTS:
        if name in available:
            matplotlib.rcParams["font.family"] = "sans-serif"
            matplotlib.rcParams["font.sans-serif"] = [name, "DejaVu Sans"]
            matplotlib.rcParams["axes.unicode_minus"] = False
            warnings.filterwarnings("error", message="Glyph .* missing from")
            return name
    raise RuntimeError(
        "没有找到中文字体,图中的中文会变成方框。请安装 Debian 包 fonts-noto-cjk "
        "(apt-get install -y fonts-noto-cjk),然后删除 ~/.cache/matplotlib 再构建。"
    )
