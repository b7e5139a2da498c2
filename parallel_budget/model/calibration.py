"""Measured numbers in place of datasheet ones: an nccl-tests table fitted to α-β, and a step time read as HFU.

:func:`fit_nccl_tests` reads the text that ``all_reduce_perf``,
``all_gather_perf`` or ``reduce_scatter_perf`` (NVIDIA/nccl-tests) print: the
``# nThread … nGpus …`` header, one ``#  Rank  r Group g Pid … device …`` line
per rank, the column header, then one row per message size::

    size  count  type  redop  root  | time algbw busbw #wrong (out-of-place) | time algbw busbw #wrong (in-place)

``size`` is in bytes (for all-gather the gathered output, for reduce-scatter
the input of one rank: the whole tensor either way), ``time`` in µs, ``algbw``
and ``busbw`` in GB/s (10⁹ B/s).  nccl-tests' README defines algbw = size / time
and busbw = algbw × 2(n−1)/n for an all-reduce, × (n−1)/n for an all-gather or a
reduce-scatter, which is this package's share of the data each device sends
(:func:`.planterms.share`).  So time = α + share · size / busbw is the α-β model
of :func:`.planterms.call_time`, with α the latency of one call.  The fit is a
least-squares line through (share · size, time) of every row, out-of-place and
in-place, with each residual relative to its time (so the µs-scale small
messages set α and the large ones set the bandwidth; a plain fit would let the
largest message decide both).

The collective is read off the table, not trusted from a title: an all-reduce
has a reduction and count = size / type size; an all-gather has no reduction
(``none``) and count = size / (type size · n); a reduce-scatter has a reduction
and the same per-rank count.  The rank count is the number of ``Rank`` lines.
Anything else is refused with a Chinese message naming the line.

A measured step time is read as HFU in :mod:`.hfufit`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pint

from .planterms import rounds, share
from .units import Q_, as_time

FUNC = "fit_nccl_tests"
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter")
#: bytes of each element type nccl-tests names (src/common.cu, test_typenames)
TYPE_BYTES = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
              "double": 8, "bfloat16": 2, "f8e4m3": 1, "f8e5m2": 1}
_RANK = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+")
_NUM = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_ACCEPTS = ("接受的是 nccl-tests 的 all_reduce_perf、all_gather_perf 或 reduce_scatter_perf 打印的完整输出："
            "“# nThread … nGpus …”一行、每个 rank 一行“#  Rank …”、表头，再是每个消息大小一行"
            "（size count type redop root，然后两组 time algbw busbw #wrong）。")


@dataclass(frozen=True)
class NcclFit:
    """α and bus bandwidth of one collective on one group, fitted to an nccl-tests table."""

    collective: str  # "all-reduce", "all-gather" or "reduce-scatter"
    ranks: int
    alpha: pint.Quantity  # latency of one call (s)
    bus_bandwidth: pint.Quantity  # B/s, nccl-tests' busbw at large messages
    points: int  # (size, time) pairs fitted
    max_error: float  # largest |fit − measured| / measured over the points
    sizes: tuple  # bytes, one per row
    times: tuple  # seconds, out-of-place, one per row

    @property
    def step_latency(self) -> pint.Quantity:
        """α per ring round (:func:`.planterms.rounds`), the plan model's ``latency``."""
        return self.alpha / rounds(self.collective, self.ranks)

    def time(self, size) -> pint.Quantity:
        """The fitted time of one call on ``size`` bytes (the whole tensor, as nccl-tests' size column)."""
        b = size.to("B").magnitude if hasattr(size, "to") else float(size)
        return self.alpha + Q_(share(self.collective, self.ranks) * b, "B") / self.bus_bandwidth


def _bad(n: int, line: str, why: str) -> ValueError:
    shown = line.strip()
    shown = shown if len(shown) <= 80 else shown[:77] + "…"
    return ValueError(f"{FUNC}() 读不懂第 {n} 行“{shown}”：{why}。{_ACCEPTS}")


def _row(n: int, line: str) -> tuple:
    """(size, count, type, redop, root, out-of-place time s, algbw B/s, busbw B/s, in-place time s) of a data row."""
    tok = line.split()
    if len(tok) < 13:
        raise _bad(n, line, f"数据行应有 13 列，这里只有 {len(tok)} 列")
    if not (tok[0].isdigit() and tok[1].isdigit()):
        raise _bad(n, line, "前两列 size 与 count 应是整数")
    if tok[2] not in TYPE_BYTES:
        raise _bad(n, line, f"数据类型 {tok[2]!r} 不是 nccl-tests 的类型名（{'、'.join(TYPE_BYTES)}）")
    nums = tok[5:8] + tok[9:12]
    if not re.fullmatch(r"-?\d+", tok[4]) or not all(_NUM.match(x) for x in nums):
        raise _bad(n, line, "root 应是整数，time、algbw、busbw 应是数字")
    if not (tok[8] == "N/A" or _NUM.match(tok[8])) or not (tok[12] == "N/A" or _NUM.match(tok[12])):
        raise _bad(n, line, "#wrong 列应是数字或 N/A")
    if any(x != "N/A" and float(x) > 0 for x in (tok[8], tok[12])):
        raise _bad(n, line, f"这一行有校验出错的元素（#wrong = {tok[8]}、{tok[12]}），结果不能用")
    t, alg, bus, t_in = float(tok[5]) * 1e-6, float(tok[6]) * 1e9, float(tok[7]) * 1e9, float(tok[9]) * 1e-6
    if t <= 0 or t_in <= 0:
        raise _bad(n, line, "时间应大于 0")
    return int(tok[0]), int(tok[1]), tok[2], tok[3], int(tok[4]), t, alg, bus, t_in


def _collective(n: int, line: str, size: int, count: int, dtype: str, redop: str, root: int, ranks: int) -> str:
    if root != -1:
        raise _bad(n, line, f"root = {root}：这是有根的集合通信（reduce、broadcast 一类），不是三者之一")
    per = size / (count * TYPE_BYTES[dtype]) if count else 0
    if redop == "none" and per == ranks:
        return "all-gather"
    if redop != "none" and per == 1:
        return "all-reduce"
    if redop != "none" and per == ranks:
        return "reduce-scatter"
    raise _bad(n, line, f"size ÷（count × 元素字节数）= {per:g}、redop = {redop}，对 {ranks} 个 rank 不是 all-reduce（1，有归约）、"
                        f"all-gather（{ranks}，none）或 reduce-scatter（{ranks}，有归约）")


def _parse(text: str) -> tuple:
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"{FUNC}() 需要一段文字（nccl-tests 的输出），收到的是空白或不是文字。{_ACCEPTS}")
    ranks, header, rows = [], False, []
    nthread = None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            m = _RANK.match(s)
            if m:
                if rows:
                    raise _bad(n, line, "rank 行应在表格之前")
                ranks.append(int(m.group(1)))
            elif re.match(r"^#\s*nThread\s+\d+\s+nGpus\s+\d+", s):
                nthread = n
            elif re.match(r"^#\s*size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong", s):
                header = True
            continue
        if not header:
            raise _bad(n, line, "表头（“#  size  count  type  redop  root  time  algbw  busbw  #wrong …”）之前出现了数据")
        rows.append((n, line, _row(n, line)))
    if nthread is None:
        raise ValueError(f"{FUNC}() 没有找到“# nThread … nGpus …”这一行。{_ACCEPTS}")
    if not ranks:
        raise ValueError(f"{FUNC}() 没有找到“#  Rank  0 Group  0 Pid …”这样的设备行，数不出 rank 数。{_ACCEPTS}")
    if sorted(ranks) != list(range(len(ranks))):
        raise ValueError(f"{FUNC}() 的设备行给出的 rank 是 {sorted(ranks)}，应是 0 到 n−1 各一次。{_ACCEPTS}")
    if not header or not rows:
        raise ValueError(f"{FUNC}() 没有找到表头和数据行（至少两个消息大小）。{_ACCEPTS}")
    return len(ranks), rows


def fit_nccl_tests(text: str) -> NcclFit:
    """Fit α (latency per call) and bus bandwidth to the output of nccl-tests' all_reduce/all_gather/reduce_scatter_perf.

    Returns a :class:`NcclFit`; refuses any other text with a Chinese message naming the line.
    """
    ranks, rows = _parse(text)
    if ranks < 2:
        raise ValueError(f"{FUNC}() 的表只有 1 个 rank：没有通信，拟合不出带宽。请在至少 2 个 rank 上测。")
    kinds = {_collective(n, line, *r[:5], ranks) for n, line, r in rows}
    if len(kinds) > 1:
        raise ValueError(f"{FUNC}() 的表里混了几种集合通信（{'、'.join(sorted(kinds))}）：一次只贴一种的输出。")
    coll = kinds.pop()
    f = share(coll, ranks)
    for n, line, r in rows:  # busbw / algbw is the share of the data each rank sends: the rank count must agree
        alg, bus = r[6] / 1e9, r[7] / 1e9  # GB/s, printed with two decimals (more digits than that: fewer decimals)
        if alg >= 1 and abs(bus / alg - f) > f * (0.002 + 0.01 / alg + 0.01 / bus):
            raise _bad(n, line, f"busbw/algbw = {bus / alg:.3f}，而 {ranks} 个 rank 的 {coll} 应是 {f:.3f}：设备行与表对不上")
    sizes = sorted({r[0] for _, _, r in rows})
    if len(sizes) < 2:
        raise ValueError(f"{FUNC}() 至少要两个不同的消息大小才能分出 α 和带宽，表里只有 {sizes}。")
    pts = [(f * r[0], t) for _, _, r in rows for t in (r[5], r[8])]
    # weighted least squares, weight 1/t: minimise Σ ((α + x/B − t)/t)²
    sw = sx = sy = sxx = sxy = 0.0
    for x, t in pts:
        w = 1.0 / (t * t)
        sw, sx, sy, sxx, sxy = sw + w, sx + w * x, sy + w * t, sxx + w * x * x, sxy + w * x * t
    det = sw * sxx - sx * sx
    slope = (sw * sxy - sx * sy) / det
    alpha = (sy - slope * sx) / sw
    if slope <= 0 or alpha < 0:
        raise ValueError(f"{FUNC}() 拟合出的 α = {alpha * 1e6:.3g} µs、每字节 {slope:.3g} s，不合物理："
                         "表里的时间没有随消息变大而变长。请贴从小到大（例如 -b 8 -e 1G -f 2）的完整表。")
    err = max(abs(alpha + x * slope - t) / t for x, t in pts)
    return NcclFit(coll, ranks, Q_(alpha, "s"), Q_(1.0 / slope, "B/s"), len(pts), err,
                   tuple(r[0] for _, _, r in rows), tuple(r[5] for _, _, r in rows))


def _num(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: two decimals while they fit in ``width``, then fewer, then an exponent."""
    power, v = 0, 1
    while value >= v:
        power, v = power + 1, v * 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def nccl_tests_text(collective: str, ranks: int, alpha, bus_bandwidth, sizes=None, dtype: str = "float",
                    per_node: int = 8) -> str:
    """What nccl-tests would print if the α-β model were exact: the table a fit must recover (tests, the chapter)."""
    if collective not in COLLECTIVES:
        raise ValueError(f"nccl_tests_text() 的参数 collective 只能是 {'、'.join(COLLECTIVES)}，收到 {collective!r}。")
    a = as_time(alpha, arg="alpha", func="nccl_tests_text").magnitude
    bw = Q_(bus_bandwidth).to("B/s").magnitude if not isinstance(bus_bandwidth, (int, float)) else float(bus_bandwidth)
    sizes = sizes or [2 ** k for k in range(3, 31)]
    f, width = share(collective, ranks), TYPE_BYTES[dtype]
    unit = width * (1 if collective == "all-reduce" else ranks)  # nccl-tests rounds sizes to whole elements per rank
    sizes = sorted({max(unit, int(x) // unit * unit) for x in sizes})
    name = collective.replace("-", "_")
    out = [f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) warmup iters: 5 iters: 20 "
           "agg iters: 1 validation: 1 graph: 0", "#", "# Using devices"]
    out += [f"#  Rank {r:2d} Group  0 Pid {1000 + r:6d} on     node{r // per_node} device {r % per_node:2d} "
            f"[0x{r % per_node:02x}] NVIDIA A100-SXM4-40GB" for r in range(ranks)]
    out += ["#", f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       in-place",
            f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
            f"{'busbw':>6} {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}",
            f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  "
            f"{'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}"]
    for size in sizes:
        count = size // width if collective == "all-reduce" else size // (width * ranks)
        t = a + f * size / bw
        alg = size / t / 1e9
        cells = f"  {_num(t * 1e6, 7)}  {_num(alg, 6)}  {_num(alg * f, 6)}  {0:6g}"
        redop = "none" if collective == "all-gather" else "sum"
        out.append(f"{size:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {-1:6d}{cells}{cells}")
    out += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 0 ", "#", f"# ({name}_perf, model)"]
    return "\n".join(out) + "\n"


def as_fit(value, arg: str, func: str) -> NcclFit | None:
    """None, an :class:`NcclFit`, or nccl-tests text (fitted here)."""
    if value is None or isinstance(value, NcclFit):
        return value
    if isinstance(value, str):
        return fit_nccl_tests(value)
    raise ValueError(f"{func}() 的参数 {arg} 应是 pb.fit_nccl_tests(...) 的结果或 nccl-tests 输出的文字，收到 {type(value).__name__}。")
