"""The quantitative model of the course: every formula, one module per concept.

* :mod:`.units`         registry, parsing (``"25 Gb/s"``), formatting
* :mod:`.update`        one data-parallel update, sum vs mean
* :mod:`.communication` ring all-reduce traffic, nccl-tests busbw
* :mod:`.steptime`      step time, speedup, efficiency, overlap behind backward, waiting for a straggler
* :mod:`.memory`        ZeRO resident model-state table and ZeRO communication per stage
* :mod:`.parallelism`   pipeline bubble, schedule, GPipe vs 1F1B in-flight microbatches, tensor-parallel traffic
* :mod:`.activations`   activation bytes per transformer layer (Korthikanti et al. 2022), with options
* :mod:`.schedule`      pipeline schedules as data: GPipe, 1F1B, interleaved 1F1B, ZB-1P, ZB-V (as torch's)
* :mod:`.timeline`      a step as events on streams; compute, exposed communication, bubble read off it
* :mod:`.planstep`      the events of a plan's step: DDP, ZeRO-1/2/3, TP, PP scheduled as frameworks do
* :mod:`.presets`       named models (Llama 2 7B, 70B) and clusters (A100-40GB, H100-80GB nodes)
* :mod:`.plansettings`  a plan's inputs, validated
* :mod:`.planterms`     the terms of a plan, each from its module, in floats
* :mod:`.plan`          a whole DP x TP x PP x ZeRO plan: memory, communication, step timeline
* :mod:`.plansearch`    every split of a device count, best first
* :mod:`.scaling`       a plan's speedup and efficiency against device count or bandwidth
* :mod:`.pipeline`      one pipeline step timed: every forward and backward per stage (a lab draws it)
* :mod:`.calibration`   nccl-tests output fitted to α and bus bandwidth, per group, for the plan
* :mod:`.hfufit`        a measured step time read as the HFU that reproduces it, and MFU
* :mod:`.overlapcriteria` closed-form tests: when DP communication hides behind compute, and could TP's
* :mod:`.planreport`    the plan's Chinese verdict and assumptions
* :mod:`.protocol`      do all ranks call the same collectives in the same order (hangs)
* :mod:`.recovery`      where a job restarts after a failure: the newest checkpoint every rank has complete

Modules here import only each other (and pint); nothing in this subpackage
knows about the book, the grader or the labs.  ``parallel_budget`` re-exports
the public names.
"""
