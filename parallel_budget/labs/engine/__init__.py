"""The machinery that runs a lab: the labs themselves are the modules one level up.

* :mod:`.config`        which labs exist and how a run is configured (:class:`.config.LaunchConfig`)
* :mod:`.launcher`      ``run_lab``: start the ranks, wait with a deadline, collect results
* :mod:`.zygote`, :mod:`.zygoteclient`, :mod:`.zygoterank`  a fork server that imports torch once
* :mod:`.forkrun`, :mod:`.agents`  torchrun agents for the restart drill, forking from the zygote
* :mod:`.runtime`       what a rank calls: process group, options, hang detection
* :mod:`.cli`           a lab module's command line (``torchrun -m parallel_budget.labs.<lab>``)
* :mod:`.result`, :mod:`.report`  the result and its table: prediction beside measurement
* :mod:`.cache`         recorded results for the book build
* :mod:`.commcount`, :mod:`.emulatedlink`, :mod:`.gantt`, :mod:`.dcptrain`, :mod:`.dcpcheck`  instruments and parts shared by labs
"""
