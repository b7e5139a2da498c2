"""Stage 2, sandbox: where a student's code runs, and nothing else does.

* :mod:`.bwrap`        the bubblewrap sandbox: no network, read-only system, own uid, limits
* :mod:`.forkserver`   a warm process inside the sandbox that forks each notebook's kernel
* :mod:`.forkclient`   the grader's handle on a fork server (launch, retry once, close)
* :mod:`.warmkernels`  the jupyter_client glue that takes kernels from the fork server
* :mod:`.fnhost`       the function host: replays a student's cells to call a function answer
* :mod:`.channel`      length-prefixed JSON between the grader and the function host
* :mod:`.hostlog`      what sandboxed processes may write into the grader's logs
* :mod:`.failures`     infrastructure failures: the sandbox failed, not the student (not graded, never 0)
"""
