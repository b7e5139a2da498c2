"""A step as a timeline: events on the streams of a few devices, and what is read off it.

Each device has five streams (lanes): compute, TP communication, DP
communication, and two point-to-point lanes of pipeline parallelism (activations
arriving from the previous stage, gradients arriving from the next one: two
links).  An event runs on one lane; a lane runs its events one at a time in
the order they were put (a CUDA stream, a NCCL communicator).  An event starts
when its lane is free and its inputs are ready (``ready``, the latest end of
what it depends on), lasts ``work`` seconds, and may have to wait at its end
for something it consumes while running (``tail``: a backward that computes a
layer after its gathered parameters arrived, a bucketed all-reduce whose last
bucket is ready only when backward ends).  :func:`put` is that rule; whoever
builds the events (:mod:`.planstep`) puts each one after the events it depends on.

Read off the timeline for one device (:func:`read`), over the step [0, T], T the
last end of any event:

* compute: the time its compute lane is busy (an event's ``work``);
* exposed communication of each row (kind of collective): the time that row's
  lane is active while compute is not, attributed first to TP (it blocks
  compute), then to pipeline point-to-point, then to DP;
* idle (the bubble): the rest, T − compute − exposed; the device waits for other
  devices and nothing of its own runs.

So step = compute + exposed + idle, on every device, by construction.
"""

from __future__ import annotations

from dataclasses import dataclass

STREAMS = ("compute", "tp", "dp", "pp_act", "pp_grad")
COMPUTE, TP, DP, PP_ACT, PP_GRAD = range(5)
NSTREAMS = len(STREAMS)


class Timeline:
    """Events of one step, put in an order where each comes after what it depends on (mutable builder).

    ``ev[device]`` holds ``(stream, start, end, work, row, tag, tp, busy)`` tuples.  An event
    held up by its ``tail`` is busy during its last ``work`` seconds (``busy`` is when
    that starts): the stall comes first, then the work that needed the tail.  A
    compute event may carry its TP collectives (``tp`` seconds, row ``row``): they
    follow the compute at its end, on the TP lane, and the compute lane waits for
    them (Megatron's collectives sit between a layer's matrix multiplications).
    """

    __slots__ = ("devices", "free", "ev", "last_start", "keep")

    def __init__(self, devices: int, keep=None):
        """``keep``: the one device whose events are stored (None: all); the others are only scheduled.

        Reading one device (:func:`read`) needs only its events; a search skips storing the rest.
        """
        self.devices = devices
        self.free = [0.0] * (devices * NSTREAMS)
        self.ev = [[] for _ in range(devices)]
        self.last_start = 0.0
        self.keep = keep

    def put(self, device: int, stream: int, work: float, ready: float = 0.0, tail: float = 0.0, row: int = -1,
            tag=None, tp: float = 0.0) -> float:
        """Schedule one event; returns its end (its start is ``last_start``)."""
        lane = device * NSTREAMS + stream
        s = self.free[lane]
        if ready > s:
            s = ready
        e = s + work
        busy = s
        if tail > e:
            e = tail
            busy = tail - work
        if tp:
            e += tp
        self.free[lane] = e
        self.last_start = s
        if self.keep is None or device == self.keep:
            self.ev[device].append((stream, s, e, work, row, tag, tp, busy))
        return e

    @property
    def step(self) -> float:
        """The last end of any event: every lane's last event ends last on that lane."""
        return max(self.free)


@dataclass(frozen=True)
class Event:
    """One block of the timeline (seconds from the step's start)."""

    device: int
    stream: str  # one of STREAMS
    start: float
    end: float
    work: float  # busy seconds, the last ones of the event; end - start - work is waiting first (a stall)
    row: int  # the collective it belongs to (-1: compute)
    tag: tuple  # what it is, e.g. ("F", stage, microbatch), for labels


@dataclass(frozen=True)
class Reading:
    """One device's step read off the timeline: step = compute + sum(exposed) + idle."""

    device: int
    step: float
    compute: float
    comm: tuple  # busy seconds of each row on this device
    exposed: tuple  # seconds of each row while compute is idle
    idle: float  # waiting with nothing of its own running: the bubble


def _union(a: list, b: list) -> list:
    """Union of two lists of (start, end) sorted by start, as sorted disjoint intervals."""
    out = []
    for s, e in sorted(a + b):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _uncovered(intervals: list, cover: list) -> list:
    """For each (start, end) of ``intervals`` (sorted by start), the seconds not inside ``cover`` (sorted, disjoint)."""
    out, k, n = [], 0, len(cover)
    for s, e in intervals:
        while k < n and cover[k][1] <= s:
            k += 1
        left, x, i = e - s, s, k
        while i < n and cover[i][0] < e:
            lo = max(cover[i][0], x)
            hi = min(cover[i][1], e)
            if hi > lo:
                left -= hi - lo
                x = hi
            i += 1
        out.append(max(left, 0.0))
    return out


def read(tl: Timeline, device: int, rows: int) -> Reading:
    """Compute, exposed communication per row and idle time of ``device`` over the whole step."""
    busy, tp, pp, dp = [], [], [], []
    comm = [0.0] * rows
    compute = 0.0
    for stream, s, e, w, r, _, t, b in tl.ev[device]:
        if stream == COMPUTE:
            busy.append((b, b + w))
            compute += w
            if t:
                tp.append((e - t, e, r))
                comm[r] += t
            continue
        comm[r] += w
        (dp if stream == DP else pp).append((s, e, r))
    exposed = [0.0] * rows
    if pp:  # the two point-to-point lanes are one row; count time when either is active once
        row = pp[0][2]
        pp = [(s, e, row) for s, e in _union(sorted((s, e) for s, e, _ in pp), [])]
    cover = _union(busy, [])
    for group in (tp, pp, dp):
        if not group:
            continue
        for (_, _, r), x in zip(group, _uncovered([(s, e) for s, e, _ in group], cover)):
            exposed[r] += x
        cover = _union(cover, [(s, e) for s, e, _ in group])
    step = tl.step
    idle = step - compute - sum(exposed)
    if idle < step * 1e-12:  # rounding of the sums above, not waiting
        idle = 0.0
    return Reading(device, step, compute, tuple(comm), tuple(exposed), idle)


def events(tl: Timeline) -> tuple:
    """Every event as an :class:`Event`, device by device in the order they were put; TP parts as their own."""
    out = []
    for d, ev in enumerate(tl.ev):
        for stream, s, e, w, r, tag, t, _ in ev:
            if stream == COMPUTE:
                out.append(Event(d, "compute", s, e - t, w, -1, tag))
                if t:
                    out.append(Event(d, "tp", e - t, e, t, r, ("TP", *tag[1:])))
            else:
                out.append(Event(d, STREAMS[stream], s, e, w, r, tag))
    return tuple(out)


def _pieces(intervals: list, cover: list) -> list:
    """The parts of each (start, end, row) of ``intervals`` (sorted by start) outside ``cover`` (sorted, disjoint)."""
    out, k, n = [], 0, len(cover)
    for s, e, r in intervals:
        while k < n and cover[k][1] <= s:
            k += 1
        x, i = s, k
        while i < n and cover[i][0] < e:
            lo, hi = cover[i]
            if lo > x:
                out.append((x, lo, r))
            x = max(x, hi)
            if x >= e:
                break
            i += 1
        if x < e:
            out.append((x, e, r))
    return out


def exposed_spans(events, device: int, step: float | None = None) -> tuple:
    """Where ``device`` waits: ((start, end, row), …) of exposed communication (same priority as :func:`read`),
    and ((start, end), …) of idle time, from :func:`events` (the step's end: the last end of them, or ``step``)."""
    busy, groups = [], {"tp": [], "pp": [], "dp": []}
    if step is None:
        step = max((e.end for e in events), default=0.0)
    for e in events:
        if e.device != device:
            continue
        if e.stream == "compute":
            busy.append((e.end - e.work, e.end))
        else:
            groups["pp" if e.stream.startswith("pp") else e.stream].append((e.start, e.end, e.row))
    cover = _union(busy, [])
    spans = []
    for name in ("tp", "pp", "dp"):
        group = sorted(groups[name])
        if name == "pp" and group:
            group = [(s, e, group[0][2]) for s, e in _union([(s, e) for s, e, _ in group], [])]
        spans += _pieces(group, cover)
        cover = _union(cover, [(s, e) for s, e, _ in group])
    idle = [(s, e) for s, e, _ in _pieces([(0.0, step, -1)], cover)]
    return tuple(sorted(spans)), tuple(idle)
