"""Lab 3's emulated link: a serial link of a given bandwidth under DDP's buckets, and how a step reads on it.

:class:`Link` is what lab 3's DDP communication hook calls for each bucket: the real all-reduce
(it computes the result) and, with a bandwidth, an emulated serial link.  A bucket enters the link
when it is launched and the link is free, stays there for ``ring_allreduce(R, bucket, bandwidth)
.lower_bound``, and its future completes only when that time is over and the real all-reduce has
finished; a :class:`Timer` thread sleeps until then.  Communication so costs wall time but no CPU,
as on a GPU whose copy engines move data while the SMs compute.

:func:`step_parts` decomposes one DDP step on that link from its own time stamps and an independent
end of backward (compute, hidden and exposed link time); :func:`straggler_step` picks, of all ranks' timed steps, the one the lab reports.
"""

from __future__ import annotations

import heapq
import threading
import time


class Timer:
    """One thread that sleeps until the earliest due callback and runs it (the emulated link's clock)."""

    def __init__(self):
        self.cv = threading.Condition()
        self.heap, self.count, self.closed = [], 0, False
        self.thread = threading.Thread(target=self._run, name="pb-emulated-link", daemon=True)
        self.thread.start()

    def at(self, due: float, fn) -> None:
        with self.cv:
            heapq.heappush(self.heap, (due, self.count, fn))
            self.count += 1
            self.cv.notify()

    def _run(self) -> None:
        while True:
            with self.cv:
                while not self.closed and (not self.heap or self.heap[0][0] > time.monotonic()):
                    self.cv.wait(self.heap[0][0] - time.monotonic() if self.heap else None)
                if not self.heap:
                    return
                fn = heapq.heappop(self.heap)[2]
            fn()

    def close(self) -> None:
        with self.cv:
            self.closed = True
            self.cv.notify()
        self.thread.join(10)


class Link:
    """How a bucket is all-reduced: the real collective, and with ``bandwidth`` (B/s) an emulated serial link too.

    Emulated: the bucket enters the link when it is launched and the link is free, stays for the ring
    all-reduce time the package gives for its size, and its future completes when that time is over
    *and* the real all-reduce (which computes the result) has finished.
    """

    def __init__(self, dist, ranks: int, bandwidth: float | None):
        self.dist, self.ranks, self.bandwidth = dist, ranks, bandwidth
        self.free = 0.0
        self.lock = threading.Lock()
        self.timer = Timer() if bandwidth else None

    def seconds(self, nbytes: int) -> float:
        from ...model.communication import ring_allreduce
        from ...model.units import Q_

        return ring_allreduce(self.ranks, Q_(nbytes, "B"), Q_(self.bandwidth, "B/s")).lower_bound.to("s").magnitude

    def launch(self, tensor, entry: dict | None = None):
        """The bucket's future; on the emulated link ``entry["link"]`` gets its [start, end] there (monotonic s)."""
        import torch

        real = self.dist.all_reduce(tensor, async_op=True).get_future()
        if self.timer is None:
            return real.then(lambda f: f.value()[0])
        with self.lock:
            start = max(time.monotonic(), self.free)
            self.free = end = start + self.seconds(tensor.numel() * tensor.element_size())
        if entry is not None:
            entry["link"] = (start, end)
        out = torch.futures.Future()
        real.add_done_callback(lambda f: self.timer.at(end, lambda: out.set_result(f.value()[0])))
        return out

    def close(self) -> None:
        if self.timer is not None:
            self.timer.close()


def step_parts(t0: float, t_fwd: float, t1: float, record: list, end_backward: float) -> dict:
    """One DDP step on the emulated link, from its own time stamps.

    ``end_backward`` is when backward's compute ended by a clock DDP does not drive: the gradient hook
    of the first layer's parameters (the last ones autograd computes).  The link's busy time is known
    bucket by bucket: what of it lay before that moment was hidden, what lay after it exposed.  Nothing
    here assumes DDP's bucket order: whether the last bucket launched holds the first layer
    (``last_has_first``) and when it was launched (``last_launch``, s after ``end_backward``) are measured.
    """
    links = [e["link"] for e in record]
    return {
        "step": t1 - t0, "compute": end_backward - t0, "forward": t_fwd - t0, "wait": t1 - end_backward,
        "comm": sum(b - a for a, b in links),
        "hidden": sum(max(0.0, min(b, end_backward) - a) for a, b in links),
        "exposed": sum(max(0.0, b - max(a, end_backward)) for a, b in links),
        "last": links[-1][1] - links[-1][0],
        "last_launch": record[-1]["launch"] - end_backward,
        "last_has_first": bool(record[-1].get("first_layer")),
    }


def straggler_step(per_rank: list) -> dict | None:
    """Of the emulated link's timed steps, the median one as seen by its slowest rank.

    Each rank emulates its own link, and a bucket can only be all-reduced once the last rank has it: the rank
    whose backward ends last in a step sees the link as the real collective would.  None for gloo runs.
    """
    steps = [c.get("inside") for c in per_rank]
    if not all(steps):
        return None
    slowest = [max(group, key=lambda d: d["compute"]) for group in zip(*steps)]
    return sorted(slowest, key=lambda d: d["step"])[len(slowest) // 2]
