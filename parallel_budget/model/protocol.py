"""Do all ranks issue the same collectives in the same order?  (Hang diagnosis.)

A collective completes only when every rank of the group enters it.  Given the
sequence of collectives each rank actually called (from logs or a flight
recorder), :func:`check_collectives` finds the first position where the ranks
disagree: a rank that exited early, took another branch, or ran out of data.
From that point on the group waits forever; a longer timeout only delays the
report, it does not make the sequences agree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CollectiveCheck:
    """Where the per-rank collective sequences first disagree."""

    calls: tuple  # calls[rank] = tuple of collective names, in order
    completed: int  # collectives every rank entered identically
    mismatch_at: int | None  # index of the first disagreement, None when consistent
    waiting: tuple  # ranks blocked at mismatch_at (entered a collective that cannot complete)
    missing: tuple  # ranks that called nothing at mismatch_at (exited / exhausted data)
    diverged: tuple  # ranks that called a different collective there

    @property
    def hangs(self) -> bool:
        return self.mismatch_at is not None

    def explain(self) -> str:
        """One Chinese sentence for the page and the logs."""
        if not self.hangs:
            return f"所有 rank 依次进入了相同的 {self.completed} 次集体通信，协议一致。"
        i = self.mismatch_at
        parts = [f"前 {self.completed} 次集体通信一致；第 {i + 1} 次出现分歧"]
        if self.missing:
            parts.append(f"rank {', '.join(map(str, self.missing))} 没有再调用（已退出或数据提前用尽）")
        if self.diverged:
            parts.append(f"rank {', '.join(map(str, self.diverged))} 调用了不同的通信（走了不同分支）")
        if self.waiting:
            parts.append(f"rank {', '.join(map(str, self.waiting))} 会一直等待")
        return ",".join(parts) + "。"

    def __repr__(self) -> str:
        return f"CollectiveCheck(hangs={self.hangs}, mismatch_at={self.mismatch_at}: {self.explain()})"


def check_collectives(calls) -> CollectiveCheck:
    """Compare the collectives each rank called, in order.

    ``calls`` lists, per rank, the names of the collectives it entered, e.g.
    ``[["all_reduce", "all_reduce"], ["all_reduce"]]``.  The majority call at
    the first disagreeing position is taken as the protocol; ranks that made it
    are ``waiting``, ranks with another call ``diverged``, ranks with none
    ``missing``.
    """
    if isinstance(calls, (str, bytes)) or not hasattr(calls, "__iter__"):
        raise ValueError('check_collectives() 的参数 calls 需要每个 rank 的集体通信序列，例如 [["all_reduce"], ["all_reduce"]]。')
    seqs = []
    for rank, seq in enumerate(calls):
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
            raise ValueError(
                f"check_collectives() 的参数 calls[{rank}] 需要一个通信名称列表，收到 {seq!r}。例如 [\"all_reduce\", \"barrier\"]"
            )
        seqs.append(tuple(str(c) for c in seq))
    if len(seqs) < 2:
        raise ValueError("check_collectives() 的参数 calls 至少需要两个 rank 的序列。")
    longest = max(len(s) for s in seqs)
    for i in range(longest):
        at = [s[i] if i < len(s) else None for s in seqs]
        if len(set(at)) == 1:
            continue
        names = [a for a in at if a is not None]
        expected = max(sorted(set(names)), key=names.count)
        return CollectiveCheck(
            calls=tuple(seqs),
            completed=i,
            mismatch_at=i,
            waiting=tuple(r for r, a in enumerate(at) if a == expected),
            missing=tuple(r for r, a in enumerate(at) if a is None),
            diverged=tuple(r for r, a in enumerate(at) if a is not None and a != expected),
        )
    return CollectiveCheck(tuple(seqs), longest, None, (), (), ())
