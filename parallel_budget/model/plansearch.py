"""Searching every split of a device count, best first (:func:`search_plans`).

Every candidate's memory is cheap; its step needs a timeline.  The search
computes a lower bound of each fitting candidate's step (:func:`_lower_bound`),
times candidates in the order of their bounds and gives a plan out as soon as
no candidate not yet timed could beat it.  The first plans therefore cost only
the timelines that could have been faster; the order is the one a full sort
would give (``tests/test_plan_search.py`` checks both).
"""

from __future__ import annotations

import heapq
import itertools
from functools import cached_property
from types import MappingProxyType

from . import planterms as T
from .plan import _budget, _memory, _spec, _time
from .plansettings import settings
from .schedule import SPLIT
from .units import as_count


def _lower_bound(s: dict, dp: int, tp: int, pp: int, stage: int, mb: int) -> float:
    """A step time no schedule of this split can beat (tests/test_plan.py checks it against the timeline).

    The pipeline's work and fill with free point-to-point messages, (m·v + p − 1)
    chunks of forward, backward and TP (m·v for the zero-bubble schedules, whose fill W may hide), and the optimizer
    step after them, plus what is exposed in any case: ZeRO-3's
    first gather of each forward and backward, the last gradient bucket, and
    ZeRO-1/2's parameter all-gather when it ends the step.
    """
    sp = _spec(s, dp, tp, pp, stage, mb)
    fill = 0 if sp.schedule in SPLIT else sp.p - 1  # zero-bubble schedules fill the pipeline with W: work only
    bound = (sp.m * sp.v + fill) * (sp.f + sp.b + sp.tf + sp.tb) + sp.optimizer
    if dp == 1:
        return bound
    if stage == 3:
        return bound + 2 * sp.m * sp.layer_gather + sp.layer_scatter
    bound += sp.grad_bucket * (1 if sp.overlap_grad_reduce else sp.buckets)
    if stage and not sp.overlap_param_gather:
        bound += sp.v * sp.buckets * sp.param_bucket
    return bound


class PlanSearch:
    """The splits of ``devices`` that fit, fastest first; iterate or index it like a tuple.

    Every candidate's memory is computed at once; the fitting ones are timed
    lazily, best first: a candidate is timed when its lower bound
    (:func:`_lower_bound`) is below the fastest step not yet given out, so the
    first plans cost only the timelines that could beat them.  ``len()`` counts
    every fitting split; ``plans`` times them all.  Plans are :class:`PlanBudget`
    (pint Quantities), ordered by step time, then bytes sent, then memory, then split.
    """

    def __init__(self, devices: int, candidates: int, pending: list, settings: MappingProxyType):
        self.devices, self.candidates, self.settings = devices, candidates, settings
        self._pending, self._next_pending = pending, 0  # (lower bound, split, memory numbers), by bound
        self._timed, self._found = [], []  # heap of ((step, bytes, memory, split), split, numbers); given out

    def _release(self) -> bool:
        """Give out the next plan in order; False when none is left."""
        s = self.settings
        while True:
            pending = self._pending[self._next_pending][0] if self._next_pending < len(self._pending) else None
            if self._timed and (pending is None or self._timed[0][0][0] < pending * (1 - 1e-9)):
                _, split, c = heapq.heappop(self._timed)
                self._found.append((split, c))
                return True
            if pending is None:
                return False
            _, split, c = self._pending[self._next_pending]
            self._next_pending += 1
            c = {**c, **_time(s, *split)}
            heapq.heappush(self._timed, ((c["step"], sum(x[7] for x in c["rows"]), c["total"], split), split, c))

    def _upto(self, n: int) -> None:
        while len(self._found) < n and self._release():
            pass

    @property
    def found(self) -> tuple:
        """((dp, tp, pp, zero_stage, micro_batch), numbers) of every fitting split, fastest first (times them all)."""
        self._upto(len(self))
        return tuple(self._found)

    @property
    def timed(self) -> int:
        """How many fitting splits have been timed so far."""
        return self._next_pending

    @cached_property
    def plans(self) -> tuple:
        """Every fitting plan as a PlanBudget, fastest first."""
        return tuple(_budget(dict(self.settings), *split, c) for split, c in self.found)

    def __iter__(self):
        i = 0
        while True:
            self._upto(i + 1)
            if i >= len(self._found):
                return
            yield _budget(dict(self.settings), *self._found[i][0], self._found[i][1])
            i += 1

    def __len__(self) -> int:
        return len(self._pending)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i] if (i.stop is None or i.stop < 0) else tuple(itertools.islice(self, i.stop))[i]
        n = i if i >= 0 else len(self) + i
        self._upto(n + 1)
        if not 0 <= n < len(self._found):
            raise IndexError(i)
        return _budget(dict(self.settings), *self._found[n][0], self._found[n][1])

    @property
    def best(self):
        return self[0] if len(self) else None

    def top(self, n: int) -> tuple:
        """The n fastest fitting splits and their numbers, timing only what could beat them."""
        self._upto(n)
        return tuple(self._found[:n])

    def __repr__(self) -> str:
        return (f"PlanSearch(devices={self.devices}: {self.candidates} splits, {len(self)} fit, "
                f"best={self.best!r})")


splits = T.splits  # every possible split of a device count (planterms)


def search_plans(*, devices, **kw) -> PlanSearch:
    """Every (dp, tp, pp, zero_stage, micro_batch) split of ``devices`` that fits, by step time.

    Takes :func:`plan_budget`'s keywords except the split itself; ZeRO stages
    above 0 are tried only when dp > 1 (with one replica there is nothing to
    shard), ZeRO-2/3 only without pipeline.  Ties on step time go to the plan
    that sends fewer bytes, then to the one that needs less memory, then to the
    smaller (dp, tp, pp, stage, micro_batch).  See :class:`PlanSearch` for what
    is computed when.
    """
    n = as_count(devices, arg="devices", func="search_plans")
    for k in ("dp", "tp", "pp", "zero_stage", "micro_batch"):
        if k in kw:
            raise ValueError(f"search_plans() 自己枚举 {k}，不要传入它；其余参数与 plan_budget() 相同。")
    s = settings(func="search_plans", **kw)
    pending, count = [], 0
    for split in T.splits(s, n):
        count += 1
        c = _memory(s, *split)
        if c["fits"]:
            pending.append((_lower_bound(s, *split), split, c))
    pending.sort(key=lambda x: (x[0], x[1]))
    return PlanSearch(n, count, pending, MappingProxyType(s))
