"""Where a job restarts after a failure: the newest checkpoint every rank has complete.

A checkpoint of a sharded job is whole only when every rank's shard of the same step is saved (and, with
PyTorch's Distributed Checkpoint, when the metadata that describes them is committed).  After a failure
the whole group goes back to the newest such step and redoes the steps finished after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .units import as_count


@dataclass(frozen=True)
class ResumePoint:
    """The step to load (None: start from scratch) and how many finished steps are lost."""

    step: int | None
    reached: int
    lost_steps: int

    def __repr__(self) -> str:
        where = f"step {self.step}" if self.step is not None else "scratch"
        return f"ResumePoint(resume from {where}, reached {self.reached}, lost_steps={self.lost_steps})"


def resume_point(saved, reached) -> ResumePoint:
    """Resume from the newest step that every rank saved completely.

    ``saved``: for each rank the steps whose checkpoint it has complete (a dict rank -> steps, or one
    iterable when all ranks saved the same steps); ``reached``: the last step the job finished before it
    failed.  Steps after ``reached`` do not count.

    >>> resume_point({0: [2, 4], 1: [2]}, reached=4)
    ResumePoint(resume from step 2, reached 4, lost_steps=2)
    """
    r = as_count(reached, arg="reached", func="resume_point", minimum=0)
    groups = list(saved.values()) if isinstance(saved, dict) else [saved]
    common = None
    for steps in groups:
        if isinstance(steps, (str, bytes)) or not hasattr(steps, "__iter__"):
            raise ValueError(f"resume_point() 的参数 saved 需要每个 rank 已保存的步数列表，收到 {steps!r}。"
                             "例如 resume_point({0: [2, 4], 1: [2]}, reached=4)")
        have = {as_count(s, arg="saved", func="resume_point") for s in steps}
        common = have if common is None else common & have
    done = {s for s in (common or set()) if s <= r}
    step = max(done) if done else None
    return ResumePoint(step, r, r - (step or 0))
