"""A chapter's lab cell: the site shows the lab's real output, JupyterLab a button that runs it.

A chapter's 选做实验 cell reads::

    lab_cell(run_lab, "ring_allreduce")          # was: run_lab("ring_allreduce")

* In the book build (:data:`BUILD_ENV` set, which ``sphinxext.setup`` does for every page kernel) it runs
  the lab at once and returns the :class:`~parallel_budget.labs.LabResult`: the site shows the table the
  build measured, as before.
* Anywhere else (a student's JupyterLab) it returns a :class:`LabButton`: *Run All* draws the button and
  goes on, so the prose numbers (jupyterlab-myst asks the kernel for its ``{eval}`` values only after
  every queued cell ran) appear in seconds and never wait on, or are lost with, a lab that fails or is
  interrupted.  A click runs the lab in the kernel; 内核 → 中断内核 stops it, and every lab process ends
  (the launcher kills them on ``KeyboardInterrupt``).

The lab runner is passed in (``run_lab`` from :mod:`parallel_budget.labs`) so that the book side never
imports the labs (``tests/test_layout.py``).
"""

from __future__ import annotations

import html
import os
import time

BUILD_ENV = "PB_BOOK_BUILD"

RUN_ALL_NOTE = "点“运行实验”才会运行；运行中要停下，选择菜单“内核 → 中断内核”。"

# The first cell after a page's title, tagged remove-cell (myst-nb leaves it out of the site): what Run All
# does, in the menu's own words of JupyterLab's zh-CN language pack.  tests/test_labcell.py holds every page
# to ``run_all_tip(page has lab cells)``.
TIP_TAG_LINE = '+++ {"tags": ["remove-cell"]}'
_TIP = "在菜单栏选择**运行 → 运行所有单元格**：几秒后，正文里的数字会替换掉现在显示的变量名；本页如果有图和交互面板，也会一起画出来。"
_TIP_LABS = "选做实验不会跟着运行：要在自己的机器上运行，点实验单元格下方的“运行实验”按钮。"


def run_all_tip(labs: bool) -> str:
    """The Markdown of a page's JupyterLab tip (``labs``: the page has lab cells)."""
    body = _TIP + (_TIP_LABS if labs else "")
    return f":::{{tip}} 在 JupyterLab 中读本页\n{body}\n:::\n"


def building() -> bool:
    """Is this kernel executing a page for the book build?"""
    return os.environ.get(BUILD_ENV) == "1"


def lab_cell(run, name: str | None = None, **options):
    """The lab ``name`` for a chapter cell: run now in the book build, a :class:`LabButton` elsewhere.

    ``run`` is the lab runner (``parallel_budget.labs.run_lab``); ``options`` go to it unchanged."""
    if not callable(run) or not isinstance(name, str):
        lab = name if isinstance(name, str) else run if isinstance(run, str) else "overlap"
        raise TypeError(f"lab_cell() 需要实验的运行函数和实验名，收到 {run!r} 和 {name!r}。"
                        f"例如 lab_cell(run_lab, {lab!r})")
    if building():
        return run(name, **options)
    return LabButton(run, name, options)


def _status(text: str, color: str = "#444") -> str:
    return f'<p style="color:{color};margin:0.3em 0">{html.escape(text)}</p>'


def _call(options: dict, name: str) -> str:
    args = [repr(name), *(f"{k}={v!r}" for k, v in options.items())]
    return f"run_lab({', '.join(args)})"


class LabButton:
    """A button that runs one lab in this kernel, a status line, and the lab's table underneath.

    Built lazily as an ipywidgets ``VBox`` (``widget``); a notebook shows it through ``_repr_mimebundle_``.
    ``click()`` runs the lab as the button does (tests call it)."""

    def __init__(self, run, name: str, options: dict):
        import ipywidgets as widgets

        self._run, self.name, self.options = run, name, dict(options)
        self.button = widgets.Button(description="运行实验", icon="play", button_style="primary",
                                     tooltip=f"在本机运行 {_call(self.options, name)}")
        self.status = widgets.HTML(_status(f"实验 {name}：{RUN_ALL_NOTE}"))
        self.output = widgets.Output()
        self.widget = widgets.VBox([self.button, self.status, self.output])
        self.widget.add_class("pb-lab-button")
        self.button.on_click(lambda _button: self.click())
        self.result = None

    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    def click(self):
        """Run the lab; show its table, or why it stopped.  Returns the result (``None`` if it did not finish)."""
        self.button.disabled = True
        self.output.outputs = ()
        self.result = None
        self.status.value = _status(f"正在运行 {_call(self.options, self.name)}……要停下，选择菜单“内核 → 中断内核”。")
        start = time.monotonic()
        try:
            result = self._run(self.name, **self.options)
        except KeyboardInterrupt:
            self.status.value = _status("实验已中断，它启动的进程都已结束。再点“运行实验”可以重来。", "#D55E00")
        except Exception as exc:  # a failed run (LabError, LabTimeout) or a bad option: say it, no traceback
            self.status.value = _status(f"实验没有完成：{exc}", "#D55E00")
            partial = getattr(exc, "result", None)
            if partial is not None:
                self.output.append_display_data(partial)
        else:
            self.result = result
            self.status.value = _status(f"完成，用时 {time.monotonic() - start:.1f} 秒。再点一次会重新运行。")
            self.output.append_display_data(result)
        finally:
            self.button.disabled = False
        return self.result
