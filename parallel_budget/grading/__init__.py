"""Autograding of the course's nbgrader exercises.

* :mod:`.answers`    read an answer variable (number in the name's unit, string, Quantity)
* :mod:`.diagnose`   expected values and their named mistakes, from the package
* :mod:`.checks`     what test cells call; prints a receipt, raises Chinese feedback
* :mod:`.integrity`  scan of submissions for tricks, run outside the student's kernel
* :mod:`.preprocessors` nbgrader preprocessors: trusted test cells, survive kernel deaths, cap output size
* :mod:`.trusted`    test cells run in the grader on the answers' plain values; function answers via :mod:`.fnhost`
* :mod:`.plain`      answer values as plain data (kernel side dump, grader side load)
* :mod:`.sandbox`    bubblewrap sandbox and limits for every kernel
* :mod:`.forkserver` warm kernels: fork each notebook's kernel from a preloaded process (in the sandbox)
* :mod:`.forkclient` the grader's handle on a fork server; :mod:`.warmkernels` the jupyter_client glue
* :mod:`.course`     course layout and nbgrader configuration
* :mod:`.runner`     the one grading command: lock, worker pool, journal, placing results
* :mod:`.collect`    submissions from a folder or a zip_collect archive into autograde/submitted
* :mod:`.gradebook`  base gradebook for a run, CSV export
* :mod:`.merge`      shards into the live gradebook in one transaction (marks, flags kept; changed answers cleared)
* :mod:`.shard`      grading one student in a throw-away nbgrader course (a worker process)
* :mod:`.feedback`   feedback HTML with the current manual marks, Chinese labels, offline MathJax
* :mod:`.privacy`    what feedback shows a student: no hidden tests, tracebacks or machine paths
* :mod:`.lab`        JupyterLab extension for formgrader: offline MathJax, mark schemes, fresh reads, CSP
* :mod:`.inert`      student content inert: nh3, metadata rebuilt from typed allow-lists
* :mod:`.csp`        Content-Security-Policy of formgrader pages (header) and feedback pages (meta)
* ``python -m parallel_budget.grading --help``
"""
