"""Do all ranks issue the same collectives in the same order?  (Hang diagnosis.)

A collective completes only when every rank of the group enters it.  Given the
sequence of collectives each rank actually called (from logs or a flight
recorder), :func:`check_collectives` finds the first position where the ranks
disagree: a rank that exited early, took another branch, or ran out of data.
What happens there depends on what the ranks called:

* ``"block"``: some rank never calls.  The others wait inside the collective
  until the process group's timeout (on NCCL the watchdog aborts the process);
  a longer timeout only delays the error.  A rank whose process has exited may
  be reported sooner, as a closed connection.
* ``"silent"``: every rank calls the same operation on tensors of the same
  shape, but they mean different things (two all-reduces swapped).  The calls
  pair up and complete: no error, no hang, wrong numbers.  The sequences stay
  shifted, so the check goes on to what happens next (``then``).
* ``"mismatch"``: the operations or the shapes differ.  With
  ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` every rank raises before communicating;
  without it the outcome depends on the backend (an error, a wait until the
  timeout, or a rank that carries on with wrong values).
* ``"unknown"``: the same operation under different names and no shapes given:
  "silent" if the shapes agree, "mismatch" if not.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("block", "silent", "mismatch", "unknown")


@dataclass(frozen=True)
class CollectiveCheck:
    """Where the per-rank collective sequences first disagree, and what that does."""

    calls: tuple  # calls[rank] = tuple of collective names, in order
    completed: int  # collectives every rank entered identically
    mismatch_at: int | None  # index of the first disagreement, None when consistent
    waiting: tuple  # ranks that made the majority call at mismatch_at
    missing: tuple  # ranks that called nothing at mismatch_at (exited / exhausted data)
    diverged: tuple  # ranks that called a different collective there
    outcome: str | None = None  # one of OUTCOMES at mismatch_at, None when consistent
    shapes: tuple = ()  # shapes[rank][k]: the k-th call's shape, None when not given
    then: CollectiveCheck | None = None  # after a silent pairing: the check of what follows

    @property
    def consistent(self) -> bool:
        return self.mismatch_at is None

    @property
    def hangs(self) -> bool:
        """Do the ranks that entered the first disagreeing call wait there until the timeout?"""
        return self.outcome == "block"

    @property
    def blocked(self) -> tuple:
        """Ranks stuck inside the collective at ``mismatch_at`` (every rank that entered it), for ``block``."""
        return tuple(sorted(self.waiting + self.diverged)) if self.outcome == "block" else ()

    def explain(self) -> str:
        """Chinese sentences for the page, the panel and the lab's prediction column."""
        if self.consistent:
            return f"所有 rank 依次进入了相同的 {self.completed} 次集合通信，协议一致。"
        i = self.mismatch_at
        if i == 0:
            head = "第 1 次集合通信就出现分歧："
        else:
            head = f"前 {i} 次集合通信一致，第 {i + 1} 次出现分歧："
        return head + self._what()

    def _what(self, nested: bool = False) -> str:
        i = self.mismatch_at
        parts = []
        if self.missing:
            parts.append(f"{_ranks(self.missing)} 没有再调用（已退出或数据提前用尽）")
        if self.diverged:
            theirs = {self.calls[r][i] for r in self.diverged}
            mine = self.calls[self.waiting[0]][i] if self.waiting else "?"
            parts.append(f"{_ranks(self.diverged)} 调用的是 {'、'.join(sorted(theirs))}，{_ranks(self.waiting)} 调用的是 {mine}")
        if not parts:
            shown = "，".join(f"rank {r} 是 {_shape(self.shapes[r][i])}" for r in range(len(self.calls)))
            parts.append(f"各 rank 都调用 {self.calls[0][i]}，但张量形状不同（{shown}）")
        return "，".join(parts) + "。" + self._consequence(nested)

    def _consequence(self, nested: bool = False) -> str:
        if self.outcome == "block":
            return (f"已进入的 {_ranks(self.blocked)} 会停在这次调用里，直到进程组超时才报错"
                    "（NCCL 上由 watchdog 中止进程；缺席的进程若已退出，gloo 可能更早报出连接断开）；"
                    "把超时调长只会更晚报错。")
        if self.outcome == "silent":
            then = self.then
            rest = f"此后序列仍然错位，第 {then.mismatch_at + 1} 次：{then._what(nested=True)}" if then is not None else ""
            if nested:
                return "同样悄悄配错。" + rest
            return ("这些调用操作相同、形状相同，会互相配对并照常完成：不报错，也不挂起，结果却悄悄配错；"
                    "TORCH_DISTRIBUTED_DEBUG=DETAIL 比对的是操作和形状，也查不出来。" + rest)
        if self.outcome == "mismatch":
            i = self.mismatch_at
            ops = {_op(seq[i]) for seq in self.calls if i < len(seq)}
            shapes = {s[i] for s in self.shapes if i < len(s) and s[i] is not None}
            what = "操作不同" if len(ops) > 1 else "张量形状不同"
            if len(ops) == 1 and len(shapes) > 1 and self.diverged:
                what += "（" + "，".join(f"rank {r} 是 {_shape(self.shapes[r][i])}" for r in range(len(self.calls))) + "）"
            return (f"这些调用的{what}：开了 TORCH_DISTRIBUTED_DEBUG=DETAIL 时每个 rank 在通信前报错，"
                    "写出各自的调用；不开时后果取决于后端，可能报错，可能等到超时，也可能有 rank 带着错的值继续。")
        return ("操作相同，但没有给出形状：形状相同会互相配对、悄悄配错；形状不同则与操作不同一样，"
                "开 TORCH_DISTRIBUTED_DEBUG=DETAIL 时报错，不开时可能报错、等到超时或带着错的值继续。")

    def __repr__(self) -> str:
        return f"CollectiveCheck(outcome={self.outcome}, mismatch_at={self.mismatch_at}: {self.explain()})"


def _ranks(ranks) -> str:
    return "rank " + "、".join(map(str, ranks))


def _shape(shape) -> str:
    return "未知" if shape is None else "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _op(name: str) -> str:
    """``"all_reduce(grad, step=1)"`` -> ``"all_reduce"``: the operation a labelled call performs."""
    return name.split("(", 1)[0].strip()


def _call(rank: int, k: int, call):
    """One call as (name, shape): a name, or a pair (name, shape) where shape is a tuple or a size."""
    if isinstance(call, str):
        return call, None
    if isinstance(call, (tuple, list)) and len(call) == 2 and isinstance(call[0], str):
        shape = call[1]
        if shape is None:
            return call[0], None
        if isinstance(shape, int) and not isinstance(shape, bool):
            return call[0], (shape,)
        if isinstance(shape, (tuple, list)) and all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
            return call[0], tuple(shape)
    raise ValueError(
        f"check_collectives() 的参数 calls[{rank}][{k}] 需要一个通信名称，或（名称，形状）一对，收到 {call!r}。"
        "例如 \"all_reduce\" 或 (\"all_reduce(grad)\", (4,))"
    )


def _outcome(at: list, shapes: list) -> str:
    present = [k for k, a in enumerate(at) if a is not None]
    if len(present) < len(at):
        return "block"
    if len({_op(at[k]) for k in present}) > 1:
        return "mismatch"
    known = [shapes[k] for k in present if shapes[k] is not None]
    if len(known) < len(present):
        return "mismatch" if len(set(known)) > 1 else "unknown"
    return "silent" if len(set(known)) == 1 else "mismatch"


def _check(seqs: tuple, shapes: tuple, start: int = 0) -> CollectiveCheck:
    longest = max(len(s) for s in seqs)
    for i in range(start, longest):
        at = [s[i] if i < len(s) else None for s in seqs]
        sh = [shapes[r][i] if i < len(shapes[r]) else None for r in range(len(seqs))]
        if len(set(at)) == 1 and len({x for x in sh if x is not None}) <= 1:
            continue
        names = [a for a in at if a is not None]
        expected = max(sorted(set(names)), key=names.count)
        outcome = _outcome(at, sh)
        then = _check(seqs, shapes, i + 1) if outcome == "silent" and i + 1 < longest else None
        return CollectiveCheck(
            calls=tuple(seqs), completed=i - start, mismatch_at=i,
            waiting=tuple(r for r, a in enumerate(at) if a == expected),
            missing=tuple(r for r, a in enumerate(at) if a is None),
            diverged=tuple(r for r, a in enumerate(at) if a is not None and a != expected),
            outcome=outcome, shapes=tuple(shapes), then=then if then is not None and not then.consistent else None,
        )
    return CollectiveCheck(tuple(seqs), longest - start, None, (), (), (), None, tuple(shapes))


def check_collectives(calls) -> CollectiveCheck:
    """Compare the collectives each rank called, in order.

    ``calls`` lists, per rank, the collectives it entered: names such as
    ``"all_reduce"`` or ``"all_reduce(grad)"`` (the operation is the part before
    the parenthesis), or pairs ``(name, shape)`` when the shapes are known, e.g.
    ``[[("all_reduce(grad)", (4,)), ("all_reduce(loss)", (1,))], ...]``.  The
    majority call at the first disagreeing position is taken as the protocol;
    ranks that made it are ``waiting``, ranks with another call ``diverged``,
    ranks with none ``missing``; ``outcome`` says what happens there.
    """
    if isinstance(calls, (str, bytes)) or not hasattr(calls, "__iter__"):
        raise ValueError('check_collectives() 的参数 calls 需要每个 rank 的集合通信序列，例如 [["all_reduce"], ["all_reduce"]]。')
    seqs, shapes = [], []
    for rank, seq in enumerate(calls):
        if isinstance(seq, (str, bytes)) or not hasattr(seq, "__iter__"):
            raise ValueError(
                f"check_collectives() 的参数 calls[{rank}] 需要一个通信名称列表，收到 {seq!r}。例如 [\"all_reduce\", \"barrier\"]"
            )
        pairs = [_call(rank, k, c) for k, c in enumerate(seq)]
        seqs.append(tuple(name for name, _ in pairs))
        shapes.append(tuple(shape for _, shape in pairs))
    if len(seqs) < 2:
        raise ValueError("check_collectives() 的参数 calls 至少需要两个 rank 的序列。")
    return _check(tuple(seqs), tuple(shapes))
