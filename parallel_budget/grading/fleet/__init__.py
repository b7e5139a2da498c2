"""Stage 5, fleet: carrying every student through stages 2-4, on this machine or a Dask cluster.

* :mod:`.shard`          one student, start to end, in a throw-away nbgrader course (a worker's task)
* :mod:`.pool`           the local worker pool
* :mod:`.cluster`        grading on a Dask cluster; :mod:`.clusterworker` is its worker side
* :mod:`.shipping`       folders as bytes for machines that share no filesystem
* :mod:`.batches`        finished students merged as they finish, in batches
* :mod:`.preflight`      before anyone is graded: can a kernel, started as the shards start theirs, run?
* :mod:`.lifeline`       workers die with ``grade``; a rerun ends leftovers
"""
