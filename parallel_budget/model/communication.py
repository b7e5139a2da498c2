"""Collective traffic: ideal ring all-reduce and nccl-tests bus bandwidth.

The ring model: split G bytes into R chunks of G/R; R-1 reduce-scatter rounds
leave each rank with one fully reduced chunk, R-1 all-gather rounds spread the
chunks.  In every round every rank sends one chunk and receives one, so each
rank sends 2(R-1)/R * G and receives the same amount.  It is the traffic of one
algorithm, not a law for every library, topology and message size.  The lower
bound divides the per-rank send by the one-way effective bandwidth and ignores
per-round latency and contention.
"""

from __future__ import annotations

from dataclasses import dataclass

import pint

from .units import Q_, as_bandwidth, as_bytes, as_count, fmt


@dataclass(frozen=True)
class RingAllReduce:
    """Per-rank traffic and time bound of one ideal ring all-reduce."""

    ranks: int
    grad: pint.Quantity
    bandwidth: pint.Quantity
    chunk: pint.Quantity
    steps: int
    send_per_rank: pint.Quantity
    recv_per_rank: pint.Quantity
    total_sent: pint.Quantity
    lower_bound: pint.Quantity

    def __repr__(self) -> str:
        return (
            f"RingAllReduce(ranks={self.ranks}, grad={fmt(self.grad, digits=4)}, "
            f"bandwidth={fmt(self.bandwidth, digits=4)}: send_per_rank={fmt(self.send_per_rank, digits=4)}, "
            f"recv_per_rank={fmt(self.recv_per_rank, digits=4)}, total_sent={fmt(self.total_sent, digits=4)}, "
            f"steps={self.steps}, chunk={fmt(self.chunk, digits=4)}, lower_bound={fmt(self.lower_bound, digits=4)})"
        )


def ring_send_factor(ranks: int) -> float:
    """2(R-1)/R: bytes each rank sends per byte of gradient in a ring all-reduce."""
    ranks = as_count(ranks, arg="ranks", func="ring_send_factor")
    return 2 * (ranks - 1) / ranks


def ring_allreduce(ranks, grad, bandwidth) -> RingAllReduce:
    """Ideal ring all-reduce of ``grad`` bytes over ``ranks`` ranks.

    >>> ring_allreduce(4, "2 GB", "25 GB/s").lower_bound.to("ms")
    <Quantity(120.0, 'millisecond')>
    """
    ranks = as_count(ranks, arg="ranks", func="ring_allreduce")
    g = as_bytes(grad, arg="grad", func="ring_allreduce")
    bw = as_bandwidth(bandwidth, arg="bandwidth", func="ring_allreduce")
    send = g * (2 * (ranks - 1) / ranks)
    if bw.magnitude == 0:
        if send.magnitude > 0:
            raise ValueError("ring_allreduce() 的参数 bandwidth 必须大于 0（有数据要发送时）。例如 \"25 GB/s\"")
        bound = Q_(0.0, "s")
    else:
        bound = (send / bw).to("s")
    return RingAllReduce(
        ranks=ranks,
        grad=g,
        bandwidth=bw,
        chunk=(g / ranks).to("B"),
        steps=2 * (ranks - 1),
        send_per_rank=send.to("B"),
        recv_per_rank=send.to("B"),
        total_sent=(send * ranks).to("B"),
        lower_bound=bound,
    )


# nccl-tests' PERFORMANCE.md: busbw = algbw * factor(n).
_BUSBW_FACTORS = {
    "allreduce": lambda n: 2 * (n - 1) / n,
    "reducescatter": lambda n: (n - 1) / n,
    "allgather": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}


def busbw(algbw, ranks, collective: str = "allreduce") -> pint.Quantity:
    """Bus bandwidth from algorithm bandwidth, as nccl-tests reports it.

    ``algbw`` is message size over time; ``busbw`` rescales it by the
    collective's traffic factor (2(n-1)/n for all-reduce) so it can be compared
    with the link's one-way bandwidth and with this course's ring model.
    """
    bw = as_bandwidth(algbw, arg="algbw", func="busbw")
    n = as_count(ranks, arg="ranks", func="busbw")
    key = str(collective).lower().replace("_", "").replace("-", "")
    if key not in _BUSBW_FACTORS:
        raise ValueError(
            f"busbw() 的参数 collective 不认识 {collective!r}。可用：{'、'.join(_BUSBW_FACTORS)}"
        )
    return (bw * _BUSBW_FACTORS[key](n)).to("B/s")


@dataclass(frozen=True)
class RingTransfer:
    """One chunk sent from ``src`` to its right neighbour ``dst`` in one round."""

    round: int  # 0 .. 2(R-1)-1
    phase: str  # "reduce-scatter" or "all-gather"
    src: int
    dst: int
    chunk: int


def ring_schedule(ranks) -> tuple:
    """Every transfer of the ideal ring all-reduce, round by round.

    Rank r always sends to rank (r+1) mod R.  In reduce-scatter round k it
    sends chunk (r-k) mod R (its partial sum so far); after R-1 rounds rank r
    holds the fully reduced chunk (r+1) mod R.  In all-gather round k it sends
    chunk (r+1-k) mod R.  Returns a tuple of rounds, each a tuple of R
    :class:`RingTransfer`; the figures and the in-page calculator draw this.

    >>> [t.chunk for t in ring_schedule(4)[0]]
    [0, 1, 2, 3]
    """
    r_ = as_count(ranks, arg="ranks", func="ring_schedule")
    rounds = []
    for k in range(2 * (r_ - 1)):
        if k < r_ - 1:
            phase, offset = "reduce-scatter", -k
        else:
            phase, offset = "all-gather", 1 - (k - (r_ - 1))
        rounds.append(tuple(
            RingTransfer(round=k, phase=phase, src=r, dst=(r + 1) % r_, chunk=(r + offset) % r_)
            for r in range(r_)
        ))
    return tuple(rounds)
