"""The quantitative model of the course: every formula, one module per concept.

* :mod:`.units`         registry, parsing (``"25 Gb/s"``), formatting
* :mod:`.update`        one data-parallel update, sum vs mean
* :mod:`.communication` ring all-reduce traffic, nccl-tests busbw
* :mod:`.steptime`      step time, speedup, efficiency, overlap behind backward, waiting for a straggler
* :mod:`.memory`        ZeRO resident model-state table and ZeRO communication per stage
* :mod:`.parallelism`   pipeline bubble, schedule, GPipe vs 1F1B in-flight microbatches, tensor-parallel traffic
* :mod:`.pipeline`      one pipeline step as a timeline: every forward and backward per stage (GPipe, 1F1B)
* :mod:`.activations`   activation bytes per transformer layer (Korthikanti et al. 2022)
* :mod:`.planterms`     the terms of a plan's budget, each from its module, in floats
* :mod:`.plan`          a whole DP x TP x PP x ZeRO plan: memory, communication, step; search
* :mod:`.planreport`    the plan's Chinese verdict and assumptions
* :mod:`.protocol`      do all ranks call the same collectives in the same order (hangs)
* :mod:`.recovery`      where a job restarts after a failure: the newest checkpoint every rank has complete

Modules here import only each other (and pint); nothing in this subpackage
knows about the book, the grader or the labs.  ``parallel_budget`` re-exports
the public names.
"""
