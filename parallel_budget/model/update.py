"""One data-parallel SGD update: what every rank ends up with.

Each rank computes the gradient of its *mean* local loss on an equal share of
the global batch.  The full-batch gradient is then the mean of the local
gradients.  An all-reduce that sums needs a division by R; one that already
averages must not be divided again.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

REDUCTIONS = {
    "mean": "all-reduce 求平均（或求和后除以 R 一次）",
    "sum": "all-reduce 求和但没有除以 R",
    "mean_twice": "求平均后又除以 R（平均做了两次）",
}


@dataclass(frozen=True)
class DataParallelUpdate:
    """Weights on every rank after one step, and the single-process reference."""

    w0: float
    grads: tuple
    lr: float
    reduction: str
    aggregated_grad: float
    weights: tuple  # one per rank
    reference: float  # full-batch update on one process

    @property
    def matches_reference(self) -> bool:
        return all(math.isclose(w, self.reference, rel_tol=1e-12, abs_tol=1e-12) for w in self.weights)

    def __repr__(self) -> str:
        ws = ", ".join(f"{w:.6g}" for w in self.weights)
        return (
            f"DataParallelUpdate(reduction={self.reduction!r}: aggregated_grad={self.aggregated_grad:.6g}, "
            f"weights=[{ws}], reference={self.reference:.6g}, matches_reference={self.matches_reference})"
        )


def _real(x, arg):
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
        raise ValueError(f"data_parallel_update() 的参数 {arg} 需要有限的实数，收到 {x!r}。")
    return float(x)


def data_parallel_update(w, grads, lr, reduction="mean") -> DataParallelUpdate:
    """SGD step ``w - lr * g`` where ``g`` aggregates the per-rank ``grads``.

    >>> data_parallel_update(1.0, [2, 6], 0.1).weights
    (0.6, 0.6)
    """
    w0 = _real(w, "w")
    lr_ = _real(lr, "lr")
    if isinstance(grads, (str, bytes)) or not hasattr(grads, "__iter__"):
        raise ValueError("data_parallel_update() 的参数 grads 需要每个 rank 的本地梯度列表，例如 [2, 6]。")
    gs = tuple(_real(g, f"grads[{i}]") for i, g in enumerate(grads))
    if not gs:
        raise ValueError("data_parallel_update() 的参数 grads 至少要有一个 rank 的梯度。")
    if reduction not in REDUCTIONS:
        raise ValueError(
            f"data_parallel_update() 的参数 reduction 只能是 {'、'.join(map(repr, REDUCTIONS))}，收到 {reduction!r}。"
        )
    r = len(gs)
    mean = math.fsum(gs) / r
    agg = {"mean": mean, "sum": math.fsum(gs), "mean_twice": mean / r}[reduction]
    new = w0 - lr_ * agg
    return DataParallelUpdate(
        w0=w0, grads=gs, lr=lr_, reduction=reduction, aggregated_grad=agg,
        weights=(new,) * r, reference=w0 - lr_ * mean,
    )
