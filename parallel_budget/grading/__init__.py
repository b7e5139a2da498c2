"""Autograding of the course's nbgrader exercises.

* :mod:`.answers`    read an answer variable (number in the name's unit, string, Quantity)
* :mod:`.diagnose`   expected values and their named mistakes, from the package
* :mod:`.checks`     what test cells call; prints a receipt, raises Chinese feedback
* :mod:`.integrity`  scan of submissions for tricks, run outside the student's kernel
* :mod:`.preprocessors` nbgrader preprocessors: survive kernel deaths, cap output size
* :mod:`.forkserver` warm kernels: fork each notebook's kernel from a preloaded process
* :mod:`.course`     course layout and nbgrader configuration
* :mod:`.runner`     the one grading command: collect, autograde in parallel shards, merge, feedback, export
* ``python -m parallel_budget.grading --help``
"""
