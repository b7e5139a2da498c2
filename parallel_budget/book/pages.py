"""Helpers for chapter pages: numbers for the prose, and figures.

A chapter's hidden first cell binds every number of its prose to a name with
:func:`text` (``ch2_send = text(pb.fmt(r.send_per_rank))``) and the prose shows it
with the MyST role ``{eval}`ch2_send```.  The role is rendered by myst-nb on the
site (``execute_notebooks: inline``) and by jupyterlab-myst in JupyterLab, from
the kernel's value, so both show the same package-computed text.
:func:`use_cjk_font` is called before drawing so Chinese labels render (a missing
glyph fails the build instead of drawing boxes).
"""

from __future__ import annotations

import warnings


class Text(str):
    """A string whose repr is itself, so ``{eval}`` shows it without quotes in either renderer."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def text(value) -> Text:
    """``value`` (usually a formatted quantity) as prose text for the ``{eval}`` role."""
    return Text(str(value))


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
        "没有找到中文字体，图中的中文会变成方框。请安装 Debian 包 fonts-noto-cjk "
        "(apt-get install -y fonts-noto-cjk)，然后删除 ~/.cache/matplotlib 再构建。"
    )
