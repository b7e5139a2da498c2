"""Stage 4, results: scores into the gradebook, and out again as feedback and formgrader pages.

* :mod:`.gradebook`   the base gradebook a run starts from; CSV export
* :mod:`.merge`       finished students into the live gradebook in one transaction (marks and flags kept)
* :mod:`.feedback`    per-student feedback HTML with the current manual marks
* :mod:`.privacy`     what feedback shows a student: no hidden tests, tracebacks or machine paths
* :mod:`.inert`       student content rendered inert: nh3, metadata rebuilt from typed allow-lists
* :mod:`.csp`         Content-Security-Policy of formgrader pages and feedback pages
* :mod:`.formgrader`  the JupyterLab server extension for formgrader (inert pages, offline MathJax, CSP)
* ``templates/``      nbconvert and formgrader templates with a nonce on every script
"""
