"""The terms of a parallel plan, in plain floats (SI units), for :mod:`.plan`.

Every term calls the module that owns its formula; this module decides which
formula applies to which group of devices.  The calls are cached: a search over
every split of 64 devices evaluates hundreds of candidates but only a few dozen
distinct (stage, degree) combinations.

Devices are numbered with tensor parallel innermost, then data parallel, then
pipeline parallel (Megatron-LM's default order).  A group of ``size`` devices
``stride`` apart stays inside a node when ``stride * size`` divides the devices
per node; otherwise it crosses nodes (:func:`group_bandwidth` gives its
bandwidth: every device has its own network port, and NCCL's rings leave a node
through as many ports as the group has devices there).

Time of one collective call (α-β model): ``rounds * latency + bytes / bandwidth``,
where ``bytes`` is what one device sends and ``rounds`` is 2(R−1) for a ring
all-reduce, R−1 for a reduce-scatter or an all-gather, 1 for a point-to-point
send (each device sends 2(R−1)/R of the data in an all-reduce, (R−1)/R in the
other two: :func:`.communication.ring_send_factor`).  This is the shape of
NCCL's own cost model (``src/graph/tuning.cc``, :func:`nccl_ring_latency`: a
base latency plus one hop latency per ring step); the default α of 5 µs per
step lies inside what that model charges for a 16-GPU, 2-node ring on NVLink
and InfiniBand (NCCL 2.30.7, Simple protocol, sm_80: 132-184 µs for an
all-reduce on an Intel host, 204-286 µs on an AMD host, against our
30 × 5 = 150 µs; 70 µs for a reduce-scatter or all-gather against our 75 µs).
"""

from __future__ import annotations

from functools import lru_cache

from .activations import layer_activation_bytes
from .communication import ring_send_factor
from .memory import zero_memory
from .schedule import schedule_problem

ACT_BYTES = 2  # 16-bit activations, as in Korthikanti et al.
LOGIT_BYTES = 2 + 4  # the 16-bit logits and their fp32 up-cast for the cross-entropy

# NCCL 2.30.7 (src/graph/tuning.cc, ncclTunerConstantsDefaults; ring algorithm, Simple protocol), in µs.
NCCL_VERSION = "2.30.7"
NCCL_BASE = 8.4  # baseLatencies[RING][SIMPLE]
NCCL_NVLINK = 3.4  # hwLatencies[NVLINK][RING][SIMPLE]
NCCL_NET = 14.0  # hwLatencies[NET][RING][SIMPLE]
NCCL_NET_OVERHEAD = {"intel": 1.0, "amd": 2.0}  # getNetOverhead(), times 3 for Simple
NCCL_PLATEAU = {"sm_80+": 1.4, "older": 1.9}  # large multi-node ring all-reduce ("plateau effect of ring")


@lru_cache(maxsize=4096)
def zero_state(shard_params: float, dp: int, stage: int, p: float, g: float, o: float) -> tuple:
    """(param, grad, optimizer, total) bytes per device: memory.zero_memory."""
    z = zero_memory(shard_params, dp, stage, p, g, o)
    return tuple(float(q.to("B").magnitude) for q in (z.param_state, z.grad_state, z.optim_state, z.total))


@lru_cache(maxsize=4096)
def activations(seq: int, micro_batch: int, hidden: int, heads: int, tp: int, sp: bool, recompute: str,
                ffn: int, gated: bool, dropout: bool, flash: bool, kv_heads: int) -> tuple:
    """(stored, working) bytes of one layer and microbatch: activations.layer_activation_bytes."""
    return layer_activation_bytes(seq, micro_batch, hidden, heads, tp, sp, recompute, ffn, gated, dropout, flash,
                                  kv_heads)


@lru_cache(maxsize=256)
def share(collective: str, ranks: int) -> float:
    """Share of the data one device sends: 2(R−1)/R for an all-reduce, (R−1)/R otherwise."""
    f = ring_send_factor(ranks)
    return f if collective == "all-reduce" else f / 2


def rounds(collective: str, ranks: int) -> int:
    """Ring rounds of one call: 2(R−1) for an all-reduce, R−1 for a reduce-scatter or all-gather, 1 for a send."""
    if collective == "send":
        return 1
    return 2 * (ranks - 1) if collective == "all-reduce" else ranks - 1


def call_time(collective: str, ranks: int, latency: float, data: float, bandwidth: float) -> float:
    """α-β time of one call moving ``data`` bytes (the full tensor) over ``ranks`` devices."""
    if collective == "send":
        return latency + data / bandwidth
    return rounds(collective, ranks) * latency + share(collective, ranks) * data / bandwidth


def nccl_ring_latency(collective: str, ranks: int, nodes: int, host: str = "intel", plateau: bool = False,
                      sm80: bool = True) -> float:
    """NCCL's own latency estimate (seconds) of one ring call, Simple protocol, ``nodes`` nodes on NVLink and a network.

    ``tuning.cc``: base + (nsteps − nInterSteps) · max(NVLink hop, 3 · net overhead) + nInterSteps · net hop,
    nsteps = 2(R−1) for an all-reduce (R−1 otherwise), nInterSteps = 2(N−1) (N−1); a large multi-node
    all-reduce multiplies it by 1.4 on sm_80 and newer (1.9 below).  Graph-specific ``latencyInter`` is left out.
    """
    steps = 2 * (ranks - 1) if collective == "all-reduce" else ranks - 1
    inter = 0 if nodes == 1 else (2 * (nodes - 1) if collective == "all-reduce" else nodes - 1)
    hop = max(NCCL_NVLINK, 3 * NCCL_NET_OVERHEAD[host]) if nodes > 1 else NCCL_NVLINK
    lat = NCCL_BASE + (steps - inter) * hop + inter * NCCL_NET
    if plateau and collective == "all-reduce" and nodes > 1:
        lat *= NCCL_PLATEAU["sm_80+" if sm80 else "older"]
    return lat * 1e-6


def optimizer_time(params_updated: float, traffic: float, hbm_bw: float) -> float:
    """Seconds of a fused Adam step on one device: HBM-bound, ``traffic`` bytes per parameter it updates.

    28 B with 16-bit gradients: read the fp32 master weight and two fp32 moments (12 B) and the gradient
    (2 B), write the three back (12 B) and the 16-bit copy of the weight (2 B).
    """
    return params_updated * traffic / hbm_bw


def logits_bytes(seq: int, micro_batch: int, vocab: int, tp: int) -> float:
    """The last stage's logits of one microbatch: s·b·V in 16 bit plus the fp32 up-cast, split over TP (vocab-parallel)."""
    return seq * micro_batch * vocab * LOGIT_BYTES / tp


def boundary_links(tp: int, dp: int, pp: int, per_node: int) -> tuple:
    """'intra' or 'inter' for each pipeline boundary r → r+1 (mod pp) of the first replica's devices r·tp·dp."""
    span = tp * dp
    return tuple("intra" if (r * span) // per_node == (((r + 1) % pp) * span) // per_node else "inter"
                 for r in range(pp))


def link(stride: int, size: int, per_node: int) -> str:
    """'intra' when a group of ``size`` devices ``stride`` apart stays in one node, else 'inter'."""
    span = stride * size
    return "intra" if size == 1 or (span <= per_node and per_node % span == 0) else "inter"


def group_bandwidth(stride: int, size: int, per_node: int, intra: float, inter: float) -> float:
    """Bus bandwidth (one way, per device) of a ring over ``size`` devices ``stride`` apart.

    Inside a node: ``intra``.  Across nodes every device has its own network
    port of ``inter`` (one InfiniBand port per GPU on DGX A100 and H100 nodes).
    NCCL runs several rings (channels) at once, each leaving the node through a
    different port, so a group with g of its devices in each node moves
    g·inter out of a node, and at most what the links inside the node carry:
    min(intra, g·inter).  NCCL's tuning model says the same (bus bandwidth =
    channels × per-channel speed), and its maintainers quote a node's NIC
    total as the bus bandwidth to expect (NVIDIA/nccl-tests issues 100 and 152,
    NVIDIA/nccl issue 412).  A group with one device per node gets one port.
    """
    if link(stride, size, per_node) == "intra":
        return intra
    g = max(1, min(size, per_node // stride))
    return min(intra, g * inter)


def layer_params(hidden: int, ffn: int, gated: bool, kv_ratio: float = 1.0) -> float:
    """Weights of one transformer layer: Q and O (2h²), K and V (2h² · kv_heads/heads), MLP 2 or 3 (gated) · h · ffn.

    Norms and biases are ignored.
    """
    return (2.0 + 2.0 * kv_ratio) * hidden * hidden + (3 if gated else 2) * hidden * ffn


def model_params(layers: int, hidden: int, ffn: int, gated: bool, vocab: int, tied: bool, kv_ratio: float = 1.0) -> float:
    """layers · layer_params + (1 or 2) · vocab · h (input embedding, and output head unless tied)."""
    return layers * layer_params(hidden, ffn, gated, kv_ratio) + (1 if tied else 2) * vocab * hidden


def train_flops(params: float, tokens: float, layers: int, seq: int, hidden: int, recompute: str) -> tuple:
    """(model FLOPs, executed FLOPs, attention FLOPs) of one step.

    Forward: 2·P per token for the matrix multiplications plus 4·s·h per token
    and layer for attention scores and values (Narayanan et al. 2021, eq. 3
    without the vocabulary refinement; PaLM's appendix B counts the same
    6·P + 12·L·h·s per token for forward and backward); backward costs twice
    forward.  Selective recomputation repeats the attention part of forward,
    full recomputation the whole forward: executed = model + that (what HFU
    counts and MFU does not, Korthikanti et al. 2022, section 5).
    """
    attention = 4.0 * layers * seq * hidden * tokens
    forward = 2.0 * params * tokens + attention
    model = 3 * forward
    extra = {"none": 0.0, "selective": attention, "full": forward}[recompute]
    return model, model + extra, attention


def divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def split_problem(s: dict, dp: int, tp: int, pp: int, stage: int, mb: int) -> str:
    """Why this split is impossible for the model, batch and schedule, in Chinese, or ''."""
    if s["heads"] % tp:
        return f"tp={tp} 不能整除 heads={s['heads']}：每个 TP rank 要分到整数个注意力头。"
    if s["kv_heads"] % tp:
        return f"tp={tp} 不能整除 kv_heads={s['kv_heads']}：每个 TP rank 要分到整数组 K、V 头（Megatron-LM 同样要求）。"
    if s["layers"] % pp:
        return f"pp={pp} 不能整除 layers={s['layers']}：每个流水线阶段要分到整数层。"
    if s["global_batch"] % (dp * mb):
        return (f"global_batch={s['global_batch']} 不是 dp×micro_batch={dp}×{mb} 的整数倍："
                "全局 batch 要保持不变，每个副本要分到整数个微批次。")
    if pp > 1 and stage >= 2 and dp > 1:
        return (f"zero_stage={stage} 不能与 pp={pp} 同用：本模型不建这种组合。分片的梯度要求每个微批次的反向之后就 "
                "reduce-scatter，流水线的每个阶段都要为每个微批次付这笔通信，DeepSpeed 的流水线引擎因此只接受 ZeRO-0/1；"
                "PyTorch 的 torch.distributed.pipelining 配 FSDP 时，参数和梯度在微批次之间保持不分片（最后一个微批次才"
                "reduce-scatter），优化器状态仍然分片：ZeRO-2/3 比 ZeRO-1 多省的那部分显存还了回去，ZeRO-1 那一份还在。"
                "请用 zero_stage=0 或 1，或 pp=1。")
    if pp > 1:
        return schedule_problem(s["schedule"], s["layers"], pp, s["virtual_stages"], s["global_batch"] // (dp * mb))
    return ""


def splits(s: dict, devices: int):
    """Every possible (dp, tp, pp, zero_stage, micro_batch) of ``devices`` for these settings."""
    for tp in divisors(devices):
        if s["heads"] % tp or s["kv_heads"] % tp:
            continue
        for pp in divisors(devices // tp):
            if s["layers"] % pp:
                continue
            dp = devices // (tp * pp)
            if s["global_batch"] % dp:
                continue
            for mb in divisors(s["global_batch"] // dp):
                for stage in (0, 1, 2, 3) if dp > 1 else (0,):
                    if not split_problem(s, dp, tp, pp, stage, mb):
                        yield dp, tp, pp, stage, mb


def cache_clear() -> None:
    """Forget cached package calls (benchmarks measure a cold search with it)."""
    from . import schedule

    for f in (zero_state, activations, share, schedule.pipeline_order, schedule.peak_in_flight):
        f.cache_clear()
