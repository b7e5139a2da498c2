"""The small sharded training job the checkpoint and restart labs save, kill and resume.

A stack of ``layers`` fp64 ``Linear(width, width)`` + ``tanh`` layers, each
``fully_shard``-ed (FSDP2) over a 1-D ``DeviceMesh`` of the job's ranks, trained
with Adam.  The data of step ``s`` is a fixed global batch drawn from seed ``s``
and split evenly over the ranks, and FSDP2 averages the gradients, so a job of
any number of ranks takes the same steps: only the order of floating-point sums
differs (fp64 keeps that below 1e-12 here).  ``state()``/``restore()`` go
through ``torch.distributed.checkpoint.state_dict``, which gives DCP the
sharded (DTensor) model and optimizer state and takes it back on any mesh.
"""

from __future__ import annotations

import math

LR = 1e-2


def global_rows(world_size: int) -> int:
    """Rows of every step's global batch: divisible by any job of 1 .. world_size ranks."""
    return 2 * math.lcm(*range(1, world_size + 1))


def build(mesh, width: int, layers: int, device):
    import torch
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width, dtype=torch.float64), torch.nn.Tanh()]
    model = torch.nn.Sequential(*mods).to(device)
    for m in model:
        if isinstance(m, torch.nn.Linear):
            fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, torch.optim.Adam(model.parameters(), lr=LR)


def train_step(model, optimizer, step: int, rows: int, width: int, rank: int, world_size: int, device) -> None:
    import torch

    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(rows, width, generator=g, dtype=torch.float64)
    per = rows // world_size
    optimizer.zero_grad()
    model(x[rank * per:(rank + 1) * per].to(device)).square().mean().backward()
    optimizer.step()


def state(model, optimizer, step: int) -> dict:
    """What DCP saves: sharded model and optimizer state, and the step."""
    import torch
    from torch.distributed.checkpoint.state_dict import get_state_dict

    msd, osd = get_state_dict(model, optimizer)
    return {"model": msd, "optim": osd, "step": torch.tensor(step)}


def restore(model, optimizer, st: dict) -> int:
    from torch.distributed.checkpoint.state_dict import set_state_dict

    set_state_dict(model, optimizer, model_state_dict=st["model"], optim_state_dict=st["optim"])
    return int(st["step"])


def full_params(model) -> list:
    """Every parameter gathered whole (a collective: every rank of the mesh calls it)."""
    return [p.full_tensor().detach().cpu() for p in model.parameters()]


def local_bytes(model, optimizer) -> dict:
    """Bytes this rank holds of parameters and Adam moments (local shards)."""
    def size(t):
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    return {"params": sum(size(p) for p in model.parameters()),
            "moments": sum(size(v) for st in optimizer.state.values() for k, v in st.items()
                           if k in ("exp_avg", "exp_avg_sq"))}


def max_diff(a: list, b: list) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))
