"""Count the collectives of a region and the bytes each carries, with PyTorch's own ``CommDebugMode``.

``CommDebugMode`` (``torch.distributed.tensor.debug``) sees every collective
dispatched in its region -- DTensor's functional collectives and the plain c10d
ones FSDP2 calls -- and counts them per op, forward and backward apart.  It does
not record sizes; :func:`comm_counter` returns a subclass that also keeps, per
call, the payload: what one rank contributes to an all-reduce, the gathered
output of an all-gather, the full input of a reduce-scatter.  What a rank
*sends* for that payload depends on the algorithm; the labs compare it with the
ring model's (R-1)/R per all-gather or reduce-scatter and 2(R-1)/R per
all-reduce.

Importing this module does not import torch; :func:`comm_counter` does.
"""

from __future__ import annotations

KINDS = {  # op name (overload packet) -> (collective, how to read the payload from its arguments)
    "c10d._allgather_base_": ("all-gather", "arg0"),
    "c10d.allgather_into_tensor_coalesced_": ("all-gather", "arg0"),
    "c10d._reduce_scatter_base_": ("reduce-scatter", "arg1"),
    "c10d.reduce_scatter_tensor_coalesced_": ("reduce-scatter", "arg1"),
    "c10d.allreduce_": ("all-reduce", "arg0"),
    "c10d.allreduce_coalesced_": ("all-reduce", "arg0"),
    "_c10d_functional.all_reduce": ("all-reduce", "arg0"),
    "_c10d_functional.all_reduce_coalesced": ("all-reduce", "arg0"),
    "_c10d_functional.all_gather_into_tensor": ("all-gather", "arg0*arg1"),
    "_c10d_functional.all_gather_into_tensor_coalesced": ("all-gather", "arg0*arg1"),
    "_c10d_functional.reduce_scatter_tensor": ("reduce-scatter", "arg0"),
    "_c10d_functional.reduce_scatter_tensor_coalesced": ("reduce-scatter", "arg0"),
}


def _nbytes(x) -> int:
    if isinstance(x, (list, tuple)):
        return sum(_nbytes(t) for t in x)
    return x.numel() * x.element_size() if hasattr(x, "element_size") else 0


def payload(op: str, args) -> tuple:
    """(collective, payload bytes) of one call; an op not in :data:`KINDS` counts all its tensor arguments."""
    kind, how = KINDS.get(op, (op, "all"))
    if how == "arg0":
        return kind, _nbytes(args[0])
    if how == "arg1":
        return kind, _nbytes(args[1])
    if how == "arg0*arg1":
        return kind, _nbytes(args[0]) * int(args[1])
    return kind, _nbytes(list(a for a in args if hasattr(a, "element_size") or isinstance(a, (list, tuple))))


def comm_counter():
    """A ``CommDebugMode`` that also records ``calls``: one ``{"kind", "phase", "bytes"}`` per collective."""
    from torch.distributed.tensor.debug import CommDebugMode

    class ByteCountingCommMode(CommDebugMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __enter__(self):
            self.calls = []
            return super().__enter__()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            before = self.get_total_counts()
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if self.get_total_counts() > before:  # CommDebugMode counted a collective: record its size
                kind, size = payload(str(func._overloadpacket), args)
                phase = "backward" if self.advanced_module_tracker.is_bw else "forward"
                self.calls.append({"kind": kind, "phase": phase, "bytes": size})
            return out

        def summary(self) -> dict:
            """``{"forward": {"all-gather": [count, bytes], ...}, "backward": {...}}``."""
            out = {"forward": {}, "backward": {}}
            for c in self.calls:
                n = out[c["phase"]].setdefault(c["kind"], [0, 0])
                n[0] += 1
                n[1] += c["bytes"]
            return out

    return ByteCountingCommMode()
