// The plan builder's model: the JavaScript twin of parallel_budget's plan (plansettings.py, plan.py,
// planstep.py, timeline.py, schedule.py, plansearch.py, scaling.py, planreport.py) and of the drawing
// layouts (book/planlayout.py), held to them by tests/vectors/plan.json (book/plan_vectors.py).
// Same arithmetic in the same order as Python, so both give the same doubles. No DOM here
// (planview.js draws); node loads it with require(). Classic script, so it also runs from file://.
(function (root) {
'use strict';
const M = root.PBModel || require('./model.js');
const { fmt, fmtCount, pct, trim } = M;

const f = (name, kind, def, min = null, max = null, o = {}) => ({
  name, kind, default: def, min, max, min_open: !!o.open, options: o.options || null, unit: o.unit || null, optional: !!o.optional,
});
const YN = ['yes', 'no'];
const sel = (name, def, options) => f(name, 'select', def, null, null, { options });
// Same fields and limits as parallel_budget.book.plan_vectors.FIELDS (checked by the vectors).
const FIELDS = [
  sel('model', 'llama2-7b', ['llama2-7b', 'llama2-70b', 'custom']),
  f('layers', 'int', '32', 1, 1024), f('hidden', 'int', '4096', 1, 65536), f('heads', 'int', '32', 1, 1024),
  f('kv_heads', 'int', '32', 1, 1024), f('seq', 'int', '4096', 1, 131072), f('vocab', 'int', '32000', 1, 1000000),
  f('ffn', 'int', '11008', 1, 262144), sel('gated', 'yes', YN), sel('dropout', 'no', YN), sel('flash_attention', 'yes', YN),
  f('params', 'params', '', 0, 1e15, { open: 1, optional: 1 }),
  f('global_batch', 'int', '32', 1, 65536), f('micro_batch', 'int', '1', 1, 65536),
  sel('cluster', 'a100-40gb', ['a100-40gb', 'h100-80gb', 'custom']),
  f('devices_per_node', 'int', '8', 1, 1024),
  f('device_memory', 'num', '40', 0, 1e6, { open: 1, unit: 'memory_unit' }), sel('memory_unit', 'GiB', ['GB', 'GiB']),
  f('intra_bw', 'num', '300', 0, 1e6, { open: 1, unit: 'intra_unit' }), sel('intra_unit', 'GB/s', ['GB/s', 'Gb/s']),
  f('inter_bw', 'num', '25', 0, 1e6, { open: 1, unit: 'inter_unit' }), sel('inter_unit', 'GB/s', ['GB/s', 'Gb/s']),
  f('peak_tflops', 'num', '312', 0, 1e6, { open: 1 }),
  f('dp', 'int', '16', 1, 4096), f('tp', 'int', '1', 1, 4096), f('pp', 'int', '1', 1, 4096),
  sel('zero_stage', '2', ['0', '1', '2', '3']), sel('schedule', '1f1b', ['1f1b', 'gpipe', 'interleaved']),
  f('virtual_stages', 'int', '2', 1, 64), sel('recompute', 'none', ['none', 'selective', 'full']),
  sel('sequence_parallel', 'yes', YN),
  f('hfu', 'num', '0.4', 0, 1, { open: 1 }), f('latency', 'num', '5', 0, 1e6), f('bucket', 'num', '25', 0, 1e6, { open: 1 }),
  f('param_bytes', 'num', '2', 0, 64, { open: 1 }), f('grad_bytes', 'num', '2', 0, 64, { open: 1 }), f('optim_bytes', 'num', '12', 0, 64),
  f('compute', 'num', '', 0, 1e7, { open: 1, optional: 1 }),
  sel('overlap_grad_reduce', 'yes', YN), sel('overlap_param_gather', 'no', YN),
  f('devices', 'int', '16', 1, 4096),
];
// presets.py, as form values: choosing a preset fills these fields.
const PRESETS = {
  model: {
    'llama2-7b': { layers: '32', hidden: '4096', heads: '32', kv_heads: '32', seq: '4096', vocab: '32000', ffn: '11008', gated: 'yes', dropout: 'no', flash_attention: 'yes', params: '' },
    'llama2-70b': { layers: '80', hidden: '8192', heads: '64', kv_heads: '8', seq: '4096', vocab: '32000', ffn: '28672', gated: 'yes', dropout: 'no', flash_attention: 'yes', params: '' },
  },
  cluster: {
    'a100-40gb': { devices_per_node: '8', device_memory: '40', memory_unit: 'GiB', intra_bw: '300', intra_unit: 'GB/s', inter_bw: '25', inter_unit: 'GB/s', peak_tflops: '312' },
    'h100-80gb': { devices_per_node: '8', device_memory: '80', memory_unit: 'GiB', intra_bw: '450', intra_unit: 'GB/s', inter_bw: '50', inter_unit: 'GB/s', peak_tflops: '989' },
  },
};
const SPLIT = ['dp', 'tp', 'pp', 'zero_stage', 'micro_batch'];
const ACT = 2;
const ROWS = ['dp_allreduce', 'dp_reduce_scatter', 'dp_all_gather', 'dp_all_gather_backward', 'tp', 'pp'];
const [AR, RS, AG, AGB, TPR, PPR] = [0, 1, 2, 3, 4, 5];
const [COMPUTE, DP, PP_ACT, PP_GRAD] = [0, 2, 3, 4];
const STREAMS = ['compute', 'tp', 'dp', 'pp_act', 'pp_grad'];
const sum = (xs) => xs.reduce((a, x) => a + x, 0);
const range = (n) => Array.from({ length: n }, (_, i) => i);

// schedule.interleave_problem
function rounds(p, m) { const n = Math.max(1, Math.floor(m / p)); return [n, Math.floor(m / n)]; }
function interleaveProblem(layers, p, v, m) {
  if (v < 2) return `交错调度每个 rank 至少要有 2 个虚拟阶段，收到 virtual_stages=${v}。`;
  if (layers % (p * v)) return `交错调度要求 layers=${layers} 能被 pp×virtual_stages=${p}×${v}=${p * v} 整除：每个虚拟阶段要分到整数层。`;
  const [n] = rounds(p, m);
  if (m % n) return `交错调度要求微批次数 m=${m} 是轮数 max(1, m // pp)=${n} 的整数倍（PyTorch 的 ScheduleInterleaved1F1B 同样要求）。`;
  return '';
}

// The form: values, or Chinese messages by field (same checks and order as plan_vectors._split_errors).
function read(raw) {
  const v = {}, errors = {};
  for (const fd of FIELDS) {
    let t = raw[fd.name] ?? fd.default;
    if (t === true || t === false) t = t ? 'yes' : 'no';
    t = String(t).trim();
    if (fd.optional && !t) { v[fd.name] = null; continue; }
    try { v[fd.name] = M.fieldValue(fd, { [fd.name]: t }); } catch (e) { errors[fd.name] = e.message; }
  }
  if (Object.keys(errors).length) return { v, errors };
  if (v.hidden % v.heads) errors.heads = `heads=${v.heads} 要整除 hidden=${v.hidden}`;
  else if (v.heads % v.kv_heads) errors.kv_heads = `kv_heads=${v.kv_heads} 要整除 heads=${v.heads}（每组查询头共享一组 K、V）`;
  if (v.heads % v.tp) errors.tp = `tp=${v.tp} 不能整除 heads=${v.heads}：每个 TP rank 要分到整数个注意力头`;
  else if (v.kv_heads % v.tp) errors.tp = `tp=${v.tp} 不能整除 kv_heads=${v.kv_heads}：每个 TP rank 要分到整数组 K、V 头`;
  if (v.layers % v.pp) errors.pp = `pp=${v.pp} 不能整除 layers=${v.layers}：每个流水线阶段要分到整数层`;
  if (v.global_batch % (v.dp * v.micro_batch)) errors.micro_batch = `global_batch=${v.global_batch} 不是 dp×micro_batch=${v.dp}×${v.micro_batch} 的整数倍：全局 batch 要保持不变`;
  else if (v.pp > 1 && v.dp > 1 && +v.zero_stage >= 2) errors.zero_stage = `ZeRO-${v.zero_stage} 不能与 pp=${v.pp} 同用：本模型不建这种组合（分片的梯度要求每个微批次都 reduce-scatter，DeepSpeed 的流水线引擎也只接受 ZeRO-0/1）；请选 ZeRO-0/1 或 pp=1`;
  else if (v.pp > 1 && v.schedule === 'interleaved') {
    const why = interleaveProblem(v.layers, v.pp, v.virtual_stages, v.global_batch / (v.dp * v.micro_batch));
    if (why) errors.virtual_stages = why;
  }
  return { v, errors };
}

const layerParams = (h, ffn, gated, r) => (2.0 + 2.0 * r) * h * h + (gated ? 3 : 2) * h * ffn;

// plansettings.settings from form values: SI floats.
function settings(v) {
  const q = (n, u, k) => M.parseQuantity(`${v[n]} ${v[u]}`, k);
  const yes = (n) => v[n] === 'yes';
  const s = {
    layers: v.layers, hidden: v.hidden, heads: v.heads, kv_heads: v.kv_heads, seq: v.seq, vocab: v.vocab, ffn: v.ffn,
    gated: yes('gated'), dropout: yes('dropout'), flash_attention: yes('flash_attention'), global_batch: v.global_batch,
    schedule: v.schedule, recompute: v.recompute, sequence_parallel: yes('sequence_parallel'),
    virtual_stages: v.schedule === 'interleaved' ? v.virtual_stages : 1,
    param_bytes: v.param_bytes, grad_bytes: v.grad_bytes, optim_bytes: v.optim_bytes, devices_per_node: v.devices_per_node,
    device_memory: q('device_memory', 'memory_unit', 'bytes'), intra_bw: q('intra_bw', 'intra_unit', 'bandwidth'),
    inter_bw: q('inter_bw', 'inter_unit', 'bandwidth'), latency: v.latency * 1e-6, bucket: v.bucket * 2 ** 20,
    compute_single: v.compute, peak_flops: v.compute !== null ? null : v.peak_tflops * 1e12, hfu: v.hfu,
    overlap_grad_reduce: yes('overlap_grad_reduce'), overlap_param_gather: yes('overlap_param_gather'),
  };
  s.params = v.params !== null ? v.params : s.layers * layerParams(s.hidden, s.ffn, s.gated, s.kv_heads / s.heads) + 2 * s.vocab * s.hidden;
  s.params_from_shape = v.params === null;
  return s;
}

// activations.layer_terms / layer_activation_bytes: [stored, working]; o: {ffn, gated, dropout, flash_attention, kv_heads}.
function activations(seq, b, h, a, t, sp, rc, o = {}) {
  const ffn = o.ffn == null ? 4.0 * h : o.ffn, kv = o.kv_heads == null ? a : o.kv_heads;
  const dropout = o.dropout == null ? true : !!o.dropout;
  const whole = 8.0 + (dropout ? 2.0 : 0.0);
  const split = 4.0 + 4.0 * kv / a + (o.gated ? 6.0 : 4.0) * ffn / h;
  const core = o.flash_attention ? 4.0 * a / h : (dropout ? 5.0 : 2.0) * a * seq / h;
  const sbh = seq * b * h, on = sp && t > 1;
  const kept = sbh * (on ? whole / t : whole), full = kept + sbh * (split + core) / t;
  if (rc === 'none') return [full, 0.0];
  if (rc === 'selective') return [kept + sbh * split / t, sbh * core / t];
  return [on ? 2 * sbh / t : 2 * sbh, full];
}

// planterms: links, α-β calls, FLOPs, splits.
const link = (stride, size, perNode) => (size === 1 || (stride * size <= perNode && perNode % (stride * size) === 0) ? 'intra' : 'inter');
// group_bandwidth: inside a node the node's links; across nodes g ports (g devices of the group per node), capped by them.
const groupBw = (stride, size, perNode, intra, inter) => (link(stride, size, perNode) === 'intra' ? intra : Math.min(intra, Math.max(1, Math.min(size, Math.floor(perNode / stride))) * inter));
const share = (c, r) => { const x = 2 * (r - 1) / r; return c === 'all-reduce' ? x : x / 2; };
const callTime = (c, r, lat, data, bw) => (c === 'send' ? lat + data / bw : (c === 'all-reduce' ? 2 * (r - 1) : r - 1) * lat + share(c, r) * data / bw);
function trainFlops(params, tokens, layers, seq, hidden, rc) {
  const attention = 4.0 * layers * seq * hidden * tokens, forward = 2.0 * params * tokens + attention, model = 3 * forward;
  return [model, model + { none: 0.0, selective: attention, full: forward }[rc], attention];
}
function splitProblem(s, dp, tp, pp, stage, mb) {
  if (s.heads % tp || s.kv_heads % tp || s.layers % pp || s.global_batch % (dp * mb)) return 'x';
  if (pp > 1 && stage >= 2 && dp > 1) return 'x';
  return pp > 1 && s.schedule === 'interleaved' ? interleaveProblem(s.layers, pp, s.virtual_stages, s.global_batch / (dp * mb)) : '';
}
const divisors = (n) => range(n).map((i) => i + 1).filter((d) => n % d === 0);
function* splits(s, n) {
  for (const tp of divisors(n)) {
    if (s.heads % tp || s.kv_heads % tp) continue;
    for (const pp of divisors(n / tp)) {
      if (s.layers % pp) continue;
      const dp = n / (tp * pp);
      if (s.global_batch % dp) continue;
      for (const mb of divisors(s.global_batch / dp)) for (const st of dp > 1 ? [0, 1, 2, 3] : [0]) if (!splitProblem(s, dp, tp, pp, st, mb)) yield [dp, tp, pp, st, mb];
    }
  }
}

// schedule.pipeline_order / in_flight
const orders = new Map();
function pipelineOrder(schedule, p, m, v) {
  const key = `${schedule},${p},${m},${v}`;
  if (orders.has(key)) return orders.get(key);
  let out;
  if (p === 1) out = [range(m).flatMap((j) => [[0, 'F', j], [0, 'B', j]])];
  else if (schedule === 'interleaved') {
    const [, per] = rounds(p, m);
    out = range(p).map((r) => {
      const warm = Math.min((v - 1) * per + 2 * (p - 1 - r), m * v), total = v * m, fwd = Array(v).fill(0), bwd = Array(v).fill(0), ops = [];
      const F = (x) => { const c = Math.floor(x / per) % v; ops.push([c * p + r, 'F', fwd[c]++]); };
      const B = (x) => { const c = v - 1 - Math.floor((x - warm) / per) % v; ops.push([c * p + r, 'B', bwd[c]++]); };
      for (let x = 0; x < warm; x++) F(x);
      for (let x = warm; x < total; x++) { F(x); B(x); }
      for (let x = total; x < total + warm; x++) B(x);
      return ops;
    });
  } else {
    out = range(p).map((r) => {
      if (schedule === 'gpipe') return [...range(m).map((j) => [r, 'F', j]), ...range(m).map((j) => [r, 'B', j])];
      const warm = Math.min(m, p - r), ops = range(warm).map((j) => [r, 'F', j]);
      let fw = warm;
      for (let j = 0; j < m; j++) { ops.push([r, 'B', j]); if (fw < m) ops.push([r, 'F', fw++]); }
      return ops;
    });
  }
  orders.set(key, out);
  return out;
}
function inFlight(ops) { let peak = 0, held = 0; for (const o of ops) { held += o[1] === 'F' ? 1 : -1; peak = Math.max(peak, held); } return peak; }

// timeline.Timeline, in flat arrays per device (no object per event): stream, start, end, work, row, tp, busy
// start, and the tag as three numbers (kind in KIND, stage or layer, microbatch).
const KIND = ['F', 'B', 'AG', 'AGB', 'RS', 'R', 'P'];
const lane = () => ({ st: [], s: [], e: [], w: [], r: [], t: [], b: [], kind: [], k: [], j: [] });
class Timeline {
  constructor(devices) { this.devices = devices; this.free = Array(devices * 5).fill(0.0); this.ev = range(devices).map(lane); this.lastStart = 0.0; }
  put(d, stream, work, ready, tail, row, kind, k, j, tp = 0.0) {
    const i = d * 5 + stream;
    let s = this.free[i];
    if (ready > s) s = ready;
    let e = s + work, busy = s;
    if (tail > e) { e = tail; busy = tail - work; }
    if (tp) e += tp;
    this.free[i] = e;
    this.lastStart = s;
    const L = this.ev[d];
    L.st.push(stream); L.s.push(s); L.e.push(e); L.w.push(work); L.r.push(row); L.t.push(tp); L.b.push(busy); L.kind.push(kind); L.k.push(k); L.j.push(j);
    return e;
  }
  get step() { return Math.max(...this.free); }
}

// planstep.build
const [KF, KB, KAG, KAGB, KRS, KR, KP] = [0, 1, 2, 3, 4, 5, 6];
function zero3(sp, tl) {
  const n = sp.layers, fl = sp.f / n, bl = sp.b / n, tfl = sp.tf / n, tbl = sp.tb / n, g = sp.layer_gather, r = sp.layer_scatter;
  let hold = 0.0;
  for (let j = 0; j < sp.m; j++) {
    let ready = tl.put(0, DP, g, hold, 0.0, AG, KAG, 0, j);
    for (let l = 0; l < n; l++) {
      hold = tl.put(0, COMPUTE, fl, Math.max(ready, hold), 0.0, TPR, KF, l, j, tfl);
      if (l + 1 < n) ready = tl.put(0, DP, g, tl.lastStart, 0.0, AG, KAG, l + 1, j);
    }
    ready = tl.put(0, DP, g, hold, 0.0, AGB, KAGB, n - 1, j);
    for (let l = n - 1; l >= 0; l--) {
      const out = tl.put(0, COMPUTE, bl, Math.max(ready, hold), 0.0, TPR, KB, l, j, tbl), began = tl.lastStart;
      if (l) ready = tl.put(0, DP, g, began, 0.0, AGB, KAGB, l - 1, j);
      hold = out;
      const done = tl.put(0, DP, r, out, 0.0, RS, KRS, l, j);
      if (!sp.overlap_grad_reduce) hold = done;
    }
  }
}
function build(sp) {
  const { p, v, m } = sp, tl = new Timeline(p);
  if (sp.dp && sp.stage === 3) { zero3(sp, tl); return tl; }
  const order = pipelineOrder(sp.schedule, p, m, v), stages = p * v;
  const act = Array(stages * m).fill(-1.0), grad = Array(stages * m).fill(-1.0), hold = Array(p).fill(0.0);
  const zero12 = sp.dp && (sp.stage === 1 || sp.stage === 2), kb = sp.buckets, { f, b, tf, tb, d } = sp;
  const gathered = new Map();
  if (zero12 && sp.overlap_param_gather) {
    for (let r = 0; r < p; r++) for (let c = 0; c < v; c++) {
      const last = tl.put(r, DP, kb * sp.param_bucket, 0.0, 0.0, AG, KAG, c * p + r, -1);
      gathered.set(r * v + c, [tl.lastStart + sp.param_bucket, last]);
    }
  }
  const reduceRow = sp.stage === 0 ? AR : RS, eachMb = sp.stage === 2, reduceHere = sp.dp && sp.stage < 3;
  const ptr = Array(p).fill(0), sweep = [...range(p), ...range(Math.max(p - 2, 0)).map((i) => p - 2 - i).filter((i) => i > 0)];
  let left = sum(order.map((o) => o.length));
  while (left) {
    const moved = left;
    for (const r of sweep) {
      const ops = order[r];
      let i = ptr[r];
      while (i < ops.length) {
        const [k, kind, j] = ops[i];
        if (kind === 'F') {
          let ready = k ? act[k * m + j] : 0.0;
          if (ready < 0) break;
          if (ready < hold[r]) ready = hold[r];
          let out;
          if (j === 0 && gathered.size) {
            const [first, last] = gathered.get(r * v + Math.floor(k / p));
            out = tl.put(r, COMPUTE, f, Math.max(ready, first), last + f / kb, TPR, KF, k, j, tf);
          } else out = tl.put(r, COMPUTE, f, ready, 0.0, TPR, KF, k, j, tf);
          if (k + 1 < stages) act[(k + 1) * m + j] = tl.put((k + 1) % p, PP_ACT, d, out, 0.0, PPR, KP, k + 1, j);
        } else {
          const ready = k + 1 < stages ? grad[k * m + j] : 0.0;
          if (ready < 0) break;
          const out = tl.put(r, COMPUTE, b, Math.max(ready, hold[r]), 0.0, TPR, KB, k, j, tb), began = tl.lastStart;
          if (k) grad[(k - 1) * m + j] = tl.put((k - 1) % p, PP_GRAD, d, out, 0.0, PPR, KP, k - 1, j);
          if (reduceHere && (eachMb || j === m - 1)) {
            const a = sp.grad_bucket;
            if (sp.overlap_grad_reduce) tl.put(r, DP, kb * a, began + (out - began) / kb, out + a, reduceRow, KR, k, j);
            else hold[r] = tl.put(r, DP, kb * a, out, 0.0, reduceRow, KR, k, j);
          }
        }
        i++;
        left--;
      }
      ptr[r] = i;
    }
    if (left === moved) throw new Error('流水线调度出现了循环依赖');
  }
  if (zero12 && !sp.overlap_param_gather) for (let r = 0; r < p; r++) tl.put(r, DP, v * kb * sp.param_bucket, 0.0, 0.0, AG, KAG, -1, -1);
  return tl;
}

// timeline.read, on [starts, ends] lists sorted by start (each lane is: it runs one event at a time).
// union: the merged, disjoint intervals of two such lists (the same set as Python's sorted(a + b) pass).
function union(s1, e1, s2, e2) {
  const S = [], E = [], n1 = s1.length, n2 = s2.length;
  let i = 0, j = 0;
  while (i < n1 || j < n2) {
    let s, e;
    if (j >= n2 || (i < n1 && (s1[i] < s2[j] || (s1[i] === s2[j] && e1[i] <= e2[j])))) { s = s1[i]; e = e1[i++]; } else { s = s2[j]; e = e2[j++]; }
    const n = S.length;
    if (n && s <= E[n - 1]) { if (e > E[n - 1]) E[n - 1] = e; } else { S.push(s); E.push(e); }
  }
  return [S, E];
}
// For each interval, the seconds not inside the cover (timeline._uncovered).
function uncovered(s0, e0, cs, ce, out) {
  const n = cs.length;
  let k = 0;
  for (let q = 0; q < s0.length; q++) {
    const s = s0[q], e = e0[q];
    while (k < n && ce[k] <= s) k++;
    let left = e - s, x = s;
    for (let i = k; i < n && cs[i] < e; i++) {
      const lo = Math.max(cs[i], x), hi = Math.min(ce[i], e);
      if (hi > lo) { left -= hi - lo; x = hi; }
    }
    out.push(Math.max(left, 0.0));
  }
  return out;
}
function readTimeline(tl, device, rows) {
  const L = tl.ev[device], comm = Array(rows).fill(0.0), exposed = Array(rows).fill(0.0);
  const bs = [], be = [], ts = [], te = [], tr = [], ds = [], de = [], dr = [], as = [], ae = [], gs = [], ge = [];
  let compute = 0.0, ppRow = -1;
  for (let i = 0; i < L.s.length; i++) {
    const st = L.st[i], r = L.r[i];
    if (st === COMPUTE) {
      const b = L.b[i], w = L.w[i], t = L.t[i];
      bs.push(b); be.push(b + w); compute += w;
      if (t) { ts.push(L.e[i] - t); te.push(L.e[i]); tr.push(r); comm[r] += t; }
      continue;
    }
    comm[r] += L.w[i];
    if (st === DP) { ds.push(L.s[i]); de.push(L.e[i]); dr.push(r); } else { ppRow = r; (st === PP_ACT ? as : gs).push(L.s[i]); (st === PP_ACT ? ae : ge).push(L.e[i]); }
  }
  const [ps, pe] = union(as, ae, gs, ge);
  let [cs, ce] = union(bs, be, [], []);
  for (const [s0, e0, rr] of [[ts, te, tr], [ps, pe, null], [ds, de, dr]]) {
    if (!s0.length) continue;
    uncovered(s0, e0, cs, ce, []).forEach((x, q) => { exposed[rr ? rr[q] : ppRow] += x; });
    [cs, ce] = union(cs, ce, s0, e0);
  }
  const step = tl.step;
  let idle = step - compute - sum(exposed);
  if (idle < step * 1e-12) idle = 0.0;
  return { step, compute, comm, exposed, idle };
}

// plan._spec, _memory, _rows, _time
function spec(s, dp, tp, pp, stage, mb) {
  const v = pp > 1 && s.schedule === 'interleaved' ? s.virtual_stages : 1, m = Math.floor(s.global_batch / (dp * mb));
  const layers = Math.floor(s.layers / (pp * v)), sp = s.sequence_parallel && tp > 1, per = s.devices_per_node, lat = s.latency;
  const bw = { intra: s.intra_bw, inter: s.inter_bw }, shard = s.params / (tp * pp), grads = shard * s.grad_bytes, params = shard * s.param_bytes;
  const [model, , attention] = trainFlops(s.params, s.global_batch * s.seq, s.layers, s.seq, s.hidden, s.recompute);
  const spf = s.compute_single !== null ? s.compute_single / model : 1 / (s.peak_flops * s.hfu);
  const n = s.layers * dp * m * tp, fwd = model / 3 / n * spf, attn = attention / n * spf;
  const extra = { none: 0.0, selective: attn, full: fwd }[s.recompute];
  let tf = 0.0, tb = 0.0, d = 0.0;
  if (tp > 1) {
    const ar = callTime('all-reduce', tp, lat, mb * s.seq * s.hidden * ACT, groupBw(1, tp, per, s.intra_bw, s.inter_bw));
    tf = layers * 2 * ar; tb = layers * (s.recompute === 'full' ? 4 : 2) * ar;
  }
  if (pp > 1) d = callTime('send', pp, lat, mb * s.seq * s.hidden * ACT / (sp ? tp : 1), bw[link(tp * dp, pp, per)]);
  const k = Math.max(1, Math.ceil(grads / v / s.bucket)), dbw = groupBw(tp, dp, per, s.intra_bw, s.inter_bw);
  return {
    schedule: pp > 1 ? s.schedule : '1f1b', p: pp, v, m, stage, dp: dp > 1, layers, f: layers * fwd, b: layers * (2 * fwd + extra), tf, tb, d, buckets: k,
    grad_bucket: callTime(stage === 0 ? 'all-reduce' : 'reduce-scatter', dp, lat, grads / v / k, dbw),
    param_bucket: callTime('all-gather', dp, lat, params / v / k, dbw),
    layer_gather: callTime('all-gather', dp, lat, params / s.layers, dbw), layer_scatter: callTime('reduce-scatter', dp, lat, grads / s.layers, dbw),
    overlap_grad_reduce: s.overlap_grad_reduce, overlap_param_gather: s.overlap_param_gather,
  };
}
function memory(s, dp, tp, pp, stage, mb) {
  const v = pp > 1 && s.schedule === 'interleaved' ? s.virtual_stages : 1, m = Math.floor(s.global_batch / (dp * mb)), shard = s.params / (tp * pp);
  const ps = shard * s.param_bytes / (stage >= 3 ? dp : 1), gs = shard * s.grad_bytes / (stage >= 2 ? dp : 1), os = shard * s.optim_bytes / (stage >= 1 ? dp : 1);
  const states = ps + gs + os;
  const [stored, working] = activations(s.seq, mb, s.hidden, s.heads, tp, s.sequence_parallel && tp > 1, s.recompute, s);
  const flight = pp > 1 ? inFlight(pipelineOrder(s.schedule, pp, m, v)[0]) : 1;
  const acts = stored * Math.floor(s.layers / (pp * v)) * flight;
  const gather = stage === 3 && dp > 1 ? (2 * s.param_bytes + s.grad_bytes) * shard / s.layers : 0.0;
  const total = states + acts + gather + working;
  return { m, in_flight: flight, fits: total <= s.device_memory, memory: { param_state: ps, grad_state: gs, optim_state: os, states, activations: acts, gather, working, temporary: gather + working, total } };
}
function commRows(s, dp, tp, pp, stage, mb, sp) {
  const per = s.devices_per_node, { m, v, buckets: k } = sp, shard = s.params / (tp * pp), grads = shard * s.grad_bytes, params = shard * s.param_bytes, rows = [];
  if (dp > 1) {
    const lk = link(tp, dp, per), g1 = share('reduce-scatter', dp) * grads, p1 = share('all-gather', dp) * params, ov = s.overlap_grad_reduce;
    const row = (r, name, what, calls, sent, o) => rows.push([r, name, what, 'dp', dp, lk, calls, sent, o]);
    if (stage === 0) row(AR, 'DP all-reduce', '梯度', v * k, share('all-reduce', dp) * grads, ov);
    else if (stage < 3) {
      const n = stage === 2 ? m : 1;
      row(RS, 'DP reduce-scatter', '梯度', n * v * k, n * g1, ov);
      row(AG, 'DP all-gather', '更新后的参数', v * k, p1, s.overlap_param_gather);
    } else {
      const n = m * s.layers;
      row(AG, 'DP all-gather', '前向用的参数', n, m * p1, true);
      row(AGB, 'DP all-gather', '反向用的参数', n, m * p1, true);
      row(RS, 'DP reduce-scatter', '梯度', n, m * g1, ov);
    }
  }
  if (tp > 1) {
    const n = m * Math.floor(s.layers / pp) * (s.recompute === 'full' ? 6 : 4), sent = n * share('all-reduce', tp) * mb * s.seq * s.hidden * ACT;
    rows.push([TPR, s.sequence_parallel ? 'TP all-gather + reduce-scatter' : 'TP all-reduce', '激活', 'tp', tp, link(1, tp, per), n * (s.sequence_parallel ? 2 : 1), sent, false]);
  }
  if (pp > 1) {
    const n = (2 * v - 1) * m, msg = mb * s.seq * s.hidden * ACT / (s.sequence_parallel && tp > 1 ? tp : 1);
    rows.push([PPR, 'PP send/recv', '激活与其梯度', 'pp', pp, link(tp * dp, pp, per), n, n * msg, true]);
  }
  return rows;
}
function time(s, dp, tp, pp, stage, mb) {
  const sp = spec(s, dp, tp, pp, stage, mb), r = readTimeline(build(sp), 0, 6);
  const rows = commRows(s, dp, tp, pp, stage, mb, sp).map((x) => [...x, r.comm[x[0]], r.exposed[x[0]]]);
  const n = dp * tp * pp, [model, run] = trainFlops(s.params, s.global_batch * s.seq, s.layers, s.seq, s.hidden, s.recompute);
  const ideal = s.compute_single !== null ? s.compute_single / n : model / (n * s.peak_flops * s.hfu);
  const exposed = sum(rows.map((x) => x[10])), peak = s.peak_flops;
  return {
    rows, compute: r.compute, ideal, hidden_comm: sum(rows.map((x) => x[9])) - exposed, exposed_comm: exposed, bubble: r.idle, step: r.step,
    tokens_per_s: s.global_batch * s.seq / r.step, efficiency: ideal / r.step,
    mfu: peak === null ? null : model / (r.step * n * peak), hfu: peak === null ? null : run / (r.step * n * peak),
  };
}
// One plan: the numbers plan_vectors.budget_out gives (comm rows without their row index).
function core(s, dp, tp, pp, stage, mb) {
  const o = Object.assign(memory(s, dp, tp, pp, stage, mb), time(s, dp, tp, pp, stage, mb));
  o.params = s.params;
  o.microbatches = o.m;
  delete o.m;
  o.comm = o.rows.map((x) => x.slice(1));
  delete o.rows;
  o.zero_stage = stage;
  o.split = [dp, tp, pp, stage, mb];
  return o;
}

// plansearch: best first, the `top` fastest and how many fit.
function lowerBound(s, dp, tp, pp, stage, mb) {
  const sp = spec(s, dp, tp, pp, stage, mb);
  let bound = (sp.m * sp.v + sp.p - 1) * (sp.f + sp.b + sp.tf + sp.tb);
  if (dp === 1) return bound;
  if (stage === 3) return bound + 2 * sp.m * sp.layer_gather + sp.layer_scatter;
  bound += sp.grad_bucket * (sp.overlap_grad_reduce ? 1 : sp.buckets);
  if (stage && !sp.overlap_param_gather) bound += sp.v * sp.buckets * sp.param_bucket;
  return bound;
}
const cmp = (a, b) => { for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1; return 0; };
function search(s, n, top = 10) {
  const pending = [];
  let candidates = 0;
  for (const sp of splits(s, n)) {
    candidates++;
    const c = memory(s, ...sp);
    if (c.fits) pending.push([lowerBound(s, ...sp), sp, c]);
  }
  pending.sort((a, b) => a[0] - b[0] || cmp(a[1], b[1]));
  const timed = [], found = [];
  let next = 0;
  while (found.length < top) {
    const bound = next < pending.length ? pending[next][0] : null;
    let best = -1;
    for (let i = 0; i < timed.length; i++) if (best < 0 || cmp(timed[i][0], timed[best][0]) < 0) best = i;
    if (best >= 0 && (bound === null || timed[best][0][0] < bound * (1 - 1e-9))) { found.push(timed.splice(best, 1)[0]); continue; }
    if (bound === null) break;
    const [, sp, c] = pending[next++], t = time(s, ...sp);
    timed.push([[t.step, sum(t.rows.map((x) => x[7])), c.memory.total, ...sp], sp, t, c]);
  }
  return { candidates, fits: pending.length, timed: next, plans: found.map(([, sp, t, c]) => [...sp, t.step, c.memory.total]) };
}

// scaling.plan_scaling
function scalingDps(gb, mb, dp) {
  const most = Math.floor(gb / mb), out = new Set([1, dp]);
  for (let d = 1; d <= most; d *= 2) if (most % d === 0 && 8 * d >= dp) out.add(d);
  return [...out].sort((a, b) => a - b);
}
function scaling(s, split, over = 'devices') {
  const [dp, tp, pp, stage, mb] = split, pts = [];
  const point = (s2, x, d, st) => {
    const c = Object.assign(memory(s2, d, tp, pp, st, mb), time(s2, d, tp, pp, st, mb)), n = d * tp * pp;
    pts.push({ x, devices: n, speedup: n * c.efficiency, efficiency: c.efficiency, fits: c.fits });
  };
  if (over === 'devices') {
    for (const d of scalingDps(s.global_batch, mb, dp)) { const st = d > 1 ? stage : 0; if (!splitProblem(s, d, tp, pp, st, mb)) point(s, d * tp * pp, d, st); }
  } else for (const x of [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0]) { const s2 = Object.assign({}, s, { inter_bw: s.inter_bw * x }); point(s2, s2.inter_bw, dp, stage); }
  return { over, points: pts };
}

// ---------------------------------------------------------------- planlayout: what the drawings show
const tfmt = (x) => fmt(x, 's', Math.abs(x) >= 1 ? 's' : 'ms');
const STREAM_ZH = { compute: '计算', tp: 'TP', dp: 'DP', pp: 'PP' };
const ROW_ZH = { dp_allreduce: 'DP all-reduce', dp_reduce_scatter: 'DP reduce-scatter', dp_all_gather: 'DP all-gather', dp_all_gather_backward: 'DP all-gather（反向）', tp: 'TP 集合通信', pp: 'PP 点对点' };
const SHORT = { dp_allreduce: 'AR', dp_reduce_scatter: 'RS', dp_all_gather: 'AG', dp_all_gather_backward: 'AG' };
const MEMORY = [['param_state', '参数'], ['grad_state', '梯度'], ['optim_state', '优化器状态'], ['activations', '激活'], ['gather', '临时缓冲'], ['working', '重算工作区']];
function events(tl) {
  const out = [];
  tl.ev.forEach((L, d) => {
    for (let i = 0; i < L.s.length; i++) {
      const stream = L.st[i], s = L.s[i], e = L.e[i], w = L.w[i], r = L.r[i], t = L.t[i], tag = [KIND[L.kind[i]], L.k[i], L.j[i]];
      if (stream === COMPUTE) {
        out.push({ device: d, stream: 'compute', start: s, end: e - t, work: w, row: -1, tag });
        if (t) out.push({ device: d, stream: 'tp', start: e - t, end: e, work: t, row: r, tag: ['TP', tag[1], tag[2]] });
      } else out.push({ device: d, stream: STREAMS[stream], start: s, end: e, work: w, row: r, tag });
    }
  });
  return out;
}
// timeline._pieces: the parts of each [start, end, row] (sorted by start) outside the cover.
function pieces(intervals, cs, ce) {
  const out = [], n = cs.length;
  let k = 0;
  for (const [s, e, r] of intervals) {
    while (k < n && ce[k] <= s) k++;
    let x = s;
    for (let i = k; i < n && cs[i] < e; i++) {
      if (cs[i] > x) out.push([x, cs[i], r]);
      x = Math.max(x, ce[i]);
      if (x >= e) break;
    }
    if (x < e) out.push([x, e, r]);
  }
  return out;
}
const byTriple = (a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
function exposedSpans(evs, device, step) {
  const bs = [], be = [], groups = { tp: [], pp: [], dp: [] };
  for (const e of evs) {
    if (e.device !== device) continue;
    if (e.stream === 'compute') { bs.push(e.end - e.work); be.push(e.end); } else groups[e.stream.startsWith('pp') ? 'pp' : e.stream].push([e.start, e.end, e.row]);
  }
  let [cs, ce] = union(bs, be, [], []), spans = [];
  for (const name of ['tp', 'pp', 'dp']) {
    let group = groups[name].sort(byTriple);
    if (name === 'pp' && group.length) { const row = group[0][2], [S, E] = union(group.map((x) => x[0]), group.map((x) => x[1]), [], []); group = S.map((s, i) => [s, E[i], row]); }
    spans = spans.concat(pieces(group, cs, ce));
    [cs, ce] = union(cs, ce, group.map((x) => x[0]), group.map((x) => x[1]));
  }
  return [spans.sort(byTriple), pieces([[0.0, step, -1]], cs, ce).map(([s, e]) => [s, e])];
}
const shownDevices = (p) => (p <= 4 ? range(p) : [0, 1, p - 2, p - 1]);
const streamOf = (row) => (ROWS[row] === 'tp' || ROWS[row] === 'pp' ? ROWS[row] : 'dp');
function what(e, zero3) {
  const [kind, k, j] = e.tag;
  if (e.stream === 'compute') return [kind === 'F' ? 'F' : 'B', `${kind}${j}`, `${kind === 'F' ? '前向' : '反向'} ${zero3 ? `第 ${k + 1} 层` : `阶段 ${k}`} 微批次 ${j}`];
  const name = ROW_ZH[ROWS[e.row]];
  if (e.stream.startsWith('pp')) return ['pp', '', `${name}：阶段 ${k} 收到微批次 ${j} 的${e.stream === 'pp_act' ? '激活' : '梯度'}`];
  if (e.stream === 'tp') return ['tp', '', `${name}：微批次 ${j}`];
  return ['dp', SHORT[ROWS[e.row]], name + (j >= 0 ? `：微批次 ${j}` : '')];
}
// planlayout._merge: one microbatch's blocks first, then a block still narrower than `narrow` into the one before.
function merge(blocks, gap, narrow) { return mergePass(mergePass(blocks, gap, 0.0), gap, narrow); }
function mergePass(blocks, gap, narrow) {
  const out = [];
  for (const b of blocks) {
    const last = out[out.length - 1];
    if (last && b[0] - last[1] <= gap && ((last[2] === b[2] && last[3] === b[3]) || b[1] - b[0] < narrow)) {
      last[1] = Math.max(last[1], b[1]); last[5] += b[5]; last[6] += b[6];
      if (last[3] !== b[3]) last[3] = '';
      if (last[2] !== b[2]) { last[2] = 'C'; last[4] = '前向与反向'; }
    } else out.push(b.slice());
  }
  return out;
}
function spanMerge(spans, gap) {
  const out = [];
  for (const [s, e] of spans) { if (out.length && s - out[out.length - 1][1] <= gap) out[out.length - 1][1] = Math.max(out[out.length - 1][1], e); else out.push([s, e]); }
  return out;
}
// planlayout.timeline_layout of one plan (o: core's result, sp: its spec).
function timelineLayout(tl, o) {
  const evs = events(tl), step = o.step, gap = step / 200, narrow = step / 100, tiny = step / 2000;
  const [dp, , pp, stage] = o.split, zero3 = stage === 3 && dp > 1, lanes = [], blocks = [], marks = [];
  const byDevice = new Map(shownDevices(pp).map((d) => [d, []]));
  for (const e of evs) if (byDevice.has(e.device)) byDevice.get(e.device).push(e);
  for (const [d, own] of byDevice) {
    const [spans, idle] = exposedSpans(own, d, step);
    const streams = ['compute', ...['tp', 'dp', 'pp'].filter((x) => own.some((e) => e.stream.startsWith(x)))];
    for (const stream of streams) {
      const lane = lanes.length;
      lanes.push({ device: d, stream, label: pp > 1 ? `rank ${d} ${STREAM_ZH[stream]}` : STREAM_ZH[stream] });
      const raw = own.filter((e) => e.stream.startsWith(stream)).sort((a, b) => a.start - b.start || a.end - b.end)
        .map((e) => { const [kind, short, w] = what(e, zero3); return [e.start, e.end, kind, short, w, 1, e.work]; });
      for (const [s, e, kind, label, w, count, busy] of merge(raw, gap, narrow)) {
        blocks.push({ lane, start: s, end: e, kind, label, title: count === 1 ? `${w}：${tfmt(busy)}` : `${w} 等 ${count} 段：共 ${tfmt(busy)}` });
      }
      if (stream === 'compute') {
        for (const [s, e] of spanMerge(idle.filter((x) => x[1] - x[0] > tiny), gap)) marks.push({ lane, start: s, end: e, kind: 'idle', title: `等待（气泡）：${tfmt(e - s)}` });
      } else if (stream !== 'tp') {
        const mine = spans.filter(([s, e, r]) => e - s > tiny && streamOf(r) === stream).map(([s, e]) => [s, e]);
        for (const [s, e] of spanMerge(mine, gap)) marks.push({ lane, start: s, end: e, kind: 'exposed', title: `暴露的 ${STREAM_ZH[stream]} 通信：${tfmt(e - s)}` });
      }
    }
  }
  return { step, lanes, blocks, marks };
}
const memoryLayout = (o, s) => ({ parts: MEMORY.map(([key, label]) => ({ key, label, bytes: o.memory[key] })), total: o.memory.total, capacity: s.device_memory, fits: o.fits });

// ---------------------------------------------------------------- planreport: verdict and assumptions
const B = (x) => fmt(x, 'B');
const T = (x) => tfmt(x);
function overheads(o) {
  const x = { dp: 0, tp: 0, pp: 0 };
  for (const g of ['dp', 'tp', 'pp']) x[g] = sum(o.comm.filter((c) => c[2] === g).map((c) => c[9]));
  x.bubble = o.bubble;
  return x;
}
const gatherRow = (o, s) => ((o.zero_stage === 1 || o.zero_stage === 2) && o.split[0] > 1 && !s.overlap_param_gather ? o.comm.find((c) => c[0] === 'DP all-gather') : null);
function codes(o, s) {
  const c = [o.fits ? 'fits' : 'too_big', 'batch', 'units', 'overlap'];
  if (o.split[1] > 1 && o.comm.some((x) => x[2] === 'tp' && x[4] === 'inter')) c.push('tp_inter');
  if (gatherRow(o, s)) c.push('gather');
  if (o.mfu !== null) c.push('flops');
  let worst = ['none', 0];
  for (const [k, v] of Object.entries(overheads(o))) if (v > worst[1]) worst = [k, v];
  c.push(`worst_${worst[0]}`);
  return c;
}
const WORST = { dp: '暴露的 DP/ZeRO 通信', tp: 'TP 通信', pp: '暴露的 PP 点对点通信', bubble: '流水线气泡' };
const mem = (o, s, verb, sign) => `${verb}：每卡 ${B(o.memory.total)} ${sign} 显存 ${B(s.device_memory)}（模型状态 ${B(o.memory.states)}，激活 ${B(o.memory.activations)}，临时缓冲 ${B(o.memory.gather)}，重算工作区 ${B(o.memory.working)}）。`;
function sentence(code, o, s) {
  const [dp, tp, , stage, mb] = o.split, ov = overheads(o), again = o.compute - o.ideal;
  switch (code) {
    case 'fits': return mem(o, s, '放得下', '≤');
    case 'too_big': return mem(o, s, '放不下', '>');
    case 'batch': return `全局 batch 不变：${s.global_batch} = dp ${dp} × micro_batch ${mb} × 微批次数 ${o.microbatches}。`;
    case 'units': return `带宽按字节读：节点内 ${fmt(s.intra_bw, 'B/s')}（= ${trim(s.intra_bw * 8e-9, 4)} Gb/s），跨节点 ${fmt(s.inter_bw, 'B/s')}（= ${trim(s.inter_bw * 8e-9, 4)} Gb/s）。`;
    case 'overlap': return `重叠：通信共 ${T(sum(o.comm.map((c) => c[8])))}，与计算重叠 ${T(o.hidden_comm)}，暴露 ${T(o.exposed_comm)}（DP ${T(ov.dp)}，TP ${T(ov.tp)}，PP ${T(ov.pp)}）；气泡 ${T(o.bubble)}。`;
    case 'tp_inter': return `TP=${tp} 超出一个节点（每节点 ${s.devices_per_node} 卡），每层的 TP 通信只能走跨节点链路。`;
    case 'gather': { const g = gatherRow(o, s); return `ZeRO-${stage} 更新后参数的 all-gather 要等优化器、优化器要等全部梯度，只能排在这一步最后：${T(g[8])} 中暴露 ${T(g[9])}；overlap_param_gather=True 让它与下一步的前向重叠。`; }
    case 'flops': return `MFU ${pct(o.mfu)}（只计模型 FLOPs），HFU ${pct(o.hfu)}（连重算一起计）；输入的 hfu=${trim(s.hfu, 12)} 是计算时的速度，通信和气泡把整步平均拉低。`;
    case 'worst_none': return s.recompute === 'none' ? `步时 ${T(o.step)} 里没有暴露的通信和气泡，全是模型计算；效率 ${pct(o.efficiency)}。`
      : `步时 ${T(o.step)} 里没有暴露的通信和气泡，全是计算：模型计算 ${T(o.ideal)}，重算 ${T(again)}；效率 ${pct(o.efficiency)} = 模型计算 ÷ 步时，差的部分就是重算。`;
    default: {
      const key = code.slice(6);
      return `步时 ${T(o.step)}：计算 ${T(o.compute)}${s.recompute !== 'none' ? `（其中重算 ${T(again)}）` : ''}，最大的额外开销是${WORST[key]} ${T(ov[key])}；效率 ${pct(o.efficiency)}。`;
    }
  }
}
const SCHED = { gpipe: 'GPipe', '1f1b': '1F1B', interleaved: '交错式 1F1B' };
function assumptions(o, s) {
  const layer = [s.dropout ? '有 dropout' : '无 dropout', `${s.gated ? '门控（SwiGLU） ' : ''}MLP 宽 ${s.ffn}`, s.flash_attention ? 'FlashAttention（不存 s×s 矩阵）' : '注意力存 s×s 矩阵',
    s.kv_heads !== s.heads ? `${s.kv_heads} 组 K、V 头` : ''].filter(Boolean).join('、');
  const v = o.split[2] > 1 && s.schedule === 'interleaved' ? s.virtual_stages : 1;
  return [`参数量 ${fmtCount(o.params, 4)}，${s.params_from_shape ? '由模型形状推出' : '按给定值'}；TP×PP 均分参数，嵌入层也一样切分；计算也均分到各层。`,
    `激活按 Korthikanti 等（2022）的每层公式（16 位激活，${layer}），不含嵌入与输出 logits。`,
    `流水线调度 ${SCHED[s.schedule]}${v > 1 ? `（每 rank ${v} 个虚拟阶段）` : ''}：第一个流水线 rank 峰值时保存 ${o.in_flight} 份（阶段×微批次）激活。`,
    'ZeRO-3 的临时缓冲按两层参数（正在用的一层 + 预取的一层）和一层未分片的梯度计；通信缓冲与碎片不计。',
    '通信用理想 ring 与 α-β 模型：每一步（ring 的一轮）延迟 α，加上每卡发送量除以带宽；跨节点的组每节点有 g 张卡就用 g 张网卡（NCCL 的几个 ring 从不同网卡出节点），带宽取节点内带宽与 g × 跨节点每卡带宽中较小的一个；点对点发送用一张网卡。',
    `设备编号 TP 最内、DP 其次、PP 最外；每节点 ${s.devices_per_node} 卡。`,
    `时间线：DP 集合通信在自己的流上一次一个；梯度按 ${trim(s.bucket / 2 ** 20)} MiB 的桶跟在反向后面归约${s.overlap_grad_reduce ? '' : '（已关闭重叠：反向结束后才归约，计算等它）'}；ZeRO-1/2 更新后参数的 all-gather ${s.overlap_param_gather ? '与下一步的前向重叠' : '排在优化器之后、这一步的最后'}；ZeRO-3 每层聚合参数并预取一层；TP 通信夹在层内计算之间；PP 异步发送，接收方等待；读数取第一个流水线 rank。`,
    `计算时间${s.compute_single !== null ? '按一张卡实测的整步计算时间均分到所有卡' : `按每卡峰值 ${trim(s.peak_flops, 3)} FLOP/s × HFU ${pct(s.hfu)} 估算（重算也按这个速度）`}；前向 2P+4·L·s·h FLOPs/词元，反向为前向两倍，重算另加；优化器本身的时间不计。`,
    '气泡 = 第一个流水线 rank 既不计算、自己的通信也不在跑的时间，从时间线读出；各阶段等长、通信不计时，GPipe 与 1F1B 的气泡占整步的 (p−1)/(m+p−1)（即理想时间的 (p−1)/m），交错式 1F1B 占 (p−1)/(v·m+p−1)（理想时间的 (p−1)/(v·m)）。'];
}

// One evaluation of the form: numbers, verdict codes, optionally the search (as plan_vectors.evaluate).
function evaluate(raw = {}, withSearch = false) {
  const { v, errors } = read(raw);
  if (Object.keys(errors).length) return { errors, values: v };
  const s = settings(v), split = SPLIT.map((k) => Number(v[k]));
  const out = core(s, ...split);
  out.codes = codes(out, s);
  out.scaling = scaling(s, split);
  if (withSearch) out.search = search(s, v.devices);
  return { out, values: v, s, split };
}
// The three layouts of an evaluated plan (plan_vectors.layouts).
function layouts(r) {
  const tl = build(spec(r.s, ...r.split));
  return { timeline: timelineLayout(tl, r.out), memory: memoryLayout(r.out, r.s), scaling: r.out.scaling };
}

const api = { FIELDS, PRESETS, SPLIT, read, settings, activations, pipelineOrder, inFlight, build, spec, readTimeline, core, search, scaling, codes, sentence, assumptions, evaluate, layouts, tfmt, B };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBPlan = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
