"""Stage 3, scoring: a notebook's test cells judged by trusted code on plain data.

* :mod:`.integrity`      the notebook against its release: tricks, edited or missing test cells
* :mod:`.trusted`        test cells run in the grader on the answers' plain values, never in the kernel
* :mod:`.overrun`        a CPU deadline and a memory bound on the grader's work with one cell's data
* :mod:`.preprocessors`  nbgrader preprocessors: sandboxed execution, trusted test cells, output caps
* :mod:`.answer_stubs`   released answer cells that name their answers and start from ``...``
"""
