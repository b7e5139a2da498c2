"""What an answer is and how it is judged: the layer under the question bank, the site and the grader.

* :mod:`.read`      read an answer variable: a number in the unit its name gives, a string, a Quantity
* :mod:`.plain`     answers as plain data (dumped in the student's kernel, loaded in the grader)
* :mod:`.diagnose`  expected values and their named mistakes (the catalogue :data:`.diagnose.MISTAKES`)
* :mod:`.checks`    what test cells call: prints a receipt, or raises feedback that names the mistake

It imports only :mod:`parallel_budget.model`.  The practice boxes (:mod:`parallel_budget.questions.site`),
the notebooks' test cells and self-checks, and the grader's trusted checks all judge with it.
"""
