"""Book-side code: what the chapters, the site and JupyterLab use to show the model.

* :mod:`.pages`       text() for the prose {eval} numbers; CJK font for figures
* :mod:`.figures`     build-time matplotlib figures of the chapters
* :mod:`.widgets`     ipywidgets recompute panels for JupyterLab
* :mod:`.calculators` the in-page calculators' fields, limits and ``evaluate``
* :mod:`.vectors`     shared Python/JavaScript test vectors (``python -m parallel_budget.book.vectors``)
* :mod:`.sphinxext`   Sphinx extension: offline assets, calculator scripts, CJK search

Everything here calls :mod:`parallel_budget.model`; nothing here holds a formula.
"""
