// The plan builder's model: the JavaScript twin of parallel_budget's plan (plansettings.py, plan.py,
// plansearch.py, scaling.py, planreport.py) and of book/planlayout.py's memory and scaling layouts, held to
// them by tests/vectors/plan.json (book/plan_vectors.py). The step timeline (pipeline orders, events, their
// reading and drawing layout) is plantimeline.js's, loaded before this file. Same arithmetic in the same
// order as Python, so both give the same doubles. No DOM here (planview.js draws); node loads it with
// require(). Classic script, so it also runs from file://.
(function (root) {
'use strict';
const M = root.PBModel || require('./model.js');
const { fmt, fmtCount, pct, trim } = M;
const { ROWS, MULTI, SPLIT: SPLIT_BW, sum, range, scheduleProblem, stageRank, pipelineOrder, inFlight, peakInFlight, build, readTimeline, tfmt, timelineLayout } = root.PBPlanTimeline || require('./plantimeline.js');
const NC = root.PBNccl || require('./nccltests.js');
const { CALIBRATION, fits, measured } = NC;

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
  sel('zero_stage', '2', ['0', '1', '2', '3']), sel('schedule', '1f1b', ['1f1b', 'gpipe', 'interleaved', 'interleaved_zb', 'zbv']),
  f('virtual_stages', 'int', '2', 1, 64), sel('recompute', 'none', ['none', 'selective', 'full']),
  sel('sequence_parallel', 'yes', YN),
  f('hfu', 'num', '0.4', 0, 1, { open: 1 }), f('latency', 'num', '5', 0, 1e6), f('bucket', 'num', '25', 0, 1e6, { open: 1 }),
  f('param_bytes', 'num', '2', 0, 64, { open: 1 }), f('grad_bytes', 'num', '', 0, 64, { open: 1, optional: 1 }), f('optim_bytes', 'num', '12', 0, 64),
  f('compute', 'num', '', 0, 1e7, { open: 1, optional: 1 }),
  sel('overlap_grad_reduce', 'yes', YN), sel('overlap_param_gather', 'no', YN),
  f('devices', 'int', '16', 1, 4096),
  sel('grad_reduce_dtype', 'bf16', ['bf16', 'fp32']), f('hbm_bw', 'num', '1555', 0, 1e6, { open: 1 }),
  f('optimizer_traffic', 'num', '28', 0, 1e3), sel('logits', 'yes', YN),
];
// presets.py, as form values: choosing a preset fills these fields.
const PRESETS = {
  model: {
    'llama2-7b': { layers: '32', hidden: '4096', heads: '32', kv_heads: '32', seq: '4096', vocab: '32000', ffn: '11008', gated: 'yes', dropout: 'no', flash_attention: 'yes', params: '' },
    'llama2-70b': { layers: '80', hidden: '8192', heads: '64', kv_heads: '8', seq: '4096', vocab: '32000', ffn: '28672', gated: 'yes', dropout: 'no', flash_attention: 'yes', params: '' },
  },
  cluster: {
    'a100-40gb': { devices_per_node: '8', device_memory: '40', memory_unit: 'GiB', intra_bw: '300', intra_unit: 'GB/s', inter_bw: '25', inter_unit: 'GB/s', peak_tflops: '312', hbm_bw: '1555' },
    'h100-80gb': { devices_per_node: '8', device_memory: '80', memory_unit: 'GiB', intra_bw: '450', intra_unit: 'GB/s', inter_bw: '50', inter_unit: 'GB/s', peak_tflops: '989', hbm_bw: '3350' },
  },
};
const SPLIT = ['dp', 'tp', 'pp', 'zero_stage', 'micro_batch'];
const ACT = 2;
const [AR, RS, AG, AGB, TPR, PPR] = ROWS.keys();

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
  else if (v.pp > 1 && MULTI.includes(v.schedule)) {
    const why = scheduleProblem(v.schedule, v.layers, v.pp, v.virtual_stages, v.global_batch / (v.dp * v.micro_batch));
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
    virtual_stages: MULTI.includes(v.schedule) ? v.virtual_stages : 1,
    param_bytes: v.param_bytes, grad_bytes: v.grad_bytes !== null ? v.grad_bytes : { bf16: 2, fp32: 4 }[v.grad_reduce_dtype], optim_bytes: v.optim_bytes, devices_per_node: v.devices_per_node,
    device_memory: q('device_memory', 'memory_unit', 'bytes'), intra_bw: q('intra_bw', 'intra_unit', 'bandwidth'),
    inter_bw: q('inter_bw', 'inter_unit', 'bandwidth'), latency: v.latency * 1e-6, bucket: v.bucket * 2 ** 20,
    compute_single: v.compute, peak_flops: v.compute !== null ? null : v.peak_tflops * 1e12, hfu: v.hfu,
    overlap_grad_reduce: yes('overlap_grad_reduce'), overlap_param_gather: yes('overlap_param_gather'),
    grad_reduce_dtype: v.grad_reduce_dtype, hbm_bw: v.hbm_bw * 1e9, optimizer_traffic: v.optimizer_traffic, logits: yes('logits'),
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
// optimizer_time, logits_bytes, boundary_links
const optimizerTime = (n, traffic, hbm) => n * traffic / hbm;
const logitsBytes = (seq, mb, vocab, tp) => seq * mb * vocab * (2 + 4) / tp;
const boundaryLinks = (tp, dp, pp, per) => range(pp).map((r) => (Math.floor(r * tp * dp / per) === Math.floor(((r + 1) % pp) * tp * dp / per) ? 'intra' : 'inter'));
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
  return pp > 1 ? scheduleProblem(s.schedule, s.layers, pp, s.virtual_stages, s.global_batch / (dp * mb)) : '';
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

// plan._spec, _memory, _rows, _time
// plan._group: (α per ring round, bandwidth) of the DP or TP group, fitted to nccl-tests when given.
const group = (s, g, lat, bw) => { const f = s[`${g}_fit`]; return f ? [f[2], f[3]] : [lat, bw]; };
function spec(s, dp, tp, pp, stage, mb) {
  const v = pp > 1 && MULTI.includes(s.schedule) ? s.virtual_stages : 1, m = Math.floor(s.global_batch / (dp * mb));
  const layers = Math.floor(s.layers / (pp * v)), sp = s.sequence_parallel && tp > 1, per = s.devices_per_node, lat = s.latency;
  const bw = { intra: s.intra_bw, inter: s.inter_bw }, shard = s.params / (tp * pp), grads = shard * s.grad_bytes, params = shard * s.param_bytes;
  const [model, , attention] = trainFlops(s.params, s.global_batch * s.seq, s.layers, s.seq, s.hidden, s.recompute);
  const spf = s.compute_single !== null ? s.compute_single / model : 1 / (s.peak_flops * s.hfu);
  const n = s.layers * dp * m * tp, fwd = model / 3 / n * spf, attn = attention / n * spf;
  const extra = { none: 0.0, selective: attn, full: fwd }[s.recompute];
  let tf = 0.0, tb = 0.0, d = 0.0;
  const [tlat, tbw] = group(s, 'tp', lat, groupBw(1, tp, per, s.intra_bw, s.inter_bw));
  if (tp > 1) {
    const ar = callTime('all-reduce', tp, tlat, mb * s.seq * s.hidden * ACT, tbw);
    tf = layers * 2 * ar; tb = layers * (s.recompute === 'full' ? 4 : 2) * ar;
  }
  let boundary = [];
  if (pp > 1) {
    const msg = mb * s.seq * s.hidden * ACT / (sp ? tp : 1);
    d = callTime('send', pp, lat, msg, bw[link(tp * dp, pp, per)]);
    boundary = boundaryLinks(tp, dp, pp, per).map((lk) => callTime('send', pp, lat, msg, bw[lk]));
  }
  const k = Math.max(1, Math.ceil(grads / v / s.bucket)), [dlat, dbw] = group(s, 'dp', lat, groupBw(tp, dp, per, s.intra_bw, s.inter_bw));
  return {
    schedule: pp > 1 ? s.schedule : '1f1b', p: pp, v, m, stage, dp: dp > 1, layers, f: layers * fwd, b: layers * (2 * fwd + extra), tf, tb, d, buckets: k,
    grad_bucket: callTime(stage === 0 ? 'all-reduce' : 'reduce-scatter', dp, dlat, grads / v / k, dbw),
    param_bucket: callTime('all-gather', dp, dlat, params / v / k, dbw),
    layer_gather: callTime('all-gather', dp, dlat, params / s.layers, dbw), layer_scatter: callTime('reduce-scatter', dp, dlat, grads / s.layers, dbw),
    overlap_grad_reduce: s.overlap_grad_reduce, overlap_param_gather: s.overlap_param_gather,
    optimizer: optimizerTime(shard / (stage ? dp : 1), s.optimizer_traffic, s.hbm_bw), boundary,
    w: pp > 1 && SPLIT_BW.includes(s.schedule) ? layers * fwd : 0.0,
  };
}
function memory(s, dp, tp, pp, stage, mb) {
  const v = pp > 1 && MULTI.includes(s.schedule) ? s.virtual_stages : 1, m = Math.floor(s.global_batch / (dp * mb)), shard = s.params / (tp * pp);
  const ps = shard * s.param_bytes / (stage >= 3 ? dp : 1), gs = shard * s.grad_bytes / (stage >= 2 ? dp : 1), os = shard * s.optim_bytes / (stage >= 1 ? dp : 1);
  const states = ps + gs + os;
  const [stored, working] = activations(s.seq, mb, s.hidden, s.heads, tp, s.sequence_parallel && tp > 1, s.recompute, s);
  const flight = pp > 1 ? peakInFlight(s.schedule, pp, m, v) : 1;
  const acts = stored * Math.floor(s.layers / (pp * v)) * flight;
  const gather = stage === 3 && dp > 1 ? (2 * s.param_bytes + s.grad_bytes) * shard / s.layers : 0.0;
  const logits = s.logits ? logitsBytes(s.seq, mb, s.vocab, tp) : 0.0;
  let total = states + acts + gather + working;
  if (pp === 1) total += logits;
  else {
    const last = inFlight(pipelineOrder(s.schedule, pp, m, v)[stageRank(s.schedule, pp, pp * v - 1)]);
    total = Math.max(total, states + stored * Math.floor(s.layers / (pp * v)) * last + gather + working + logits);
  }
  return { m, in_flight: flight, fits: total <= s.device_memory, memory: { param_state: ps, grad_state: gs, optim_state: os, states, activations: acts, gather, working, temporary: gather + working, total, logits } };
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
    rows, compute: r.compute, ideal, optimizer: sp.optimizer, hidden_comm: sum(rows.map((x) => x[9])) - exposed, exposed_comm: exposed, bubble: r.idle, step: r.step,
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
  let bound = (sp.m * sp.v + (SPLIT_BW.includes(sp.schedule) ? 0 : sp.p - 1)) * (sp.f + sp.b + sp.tf + sp.tb) + sp.optimizer;
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

// planlayout.memory_layout
const MEMORY = [['param_state', '参数'], ['grad_state', '梯度'], ['optim_state', '优化器状态'], ['activations', '激活'], ['gather', '临时缓冲'], ['working', '重算工作区']];
function memoryLayout(o, s) {
  const parts = MEMORY.map(([key, label]) => ({ key, label, bytes: o.memory[key] }));
  parts.push({ key: 'logits', label: 'logits（最后一个阶段）', bytes: Math.max(0.0, o.memory.total - sum(parts.map((p) => p.bytes))) });
  return { parts, total: o.memory.total, capacity: s.device_memory, fits: o.fits };
}

// ---------------------------------------------------------------- planreport: verdict and assumptions
const B = (x) => fmt(x, 'B');
const T = (x) => tfmt(x);
function overheads(o) {
  const x = { dp: 0, tp: 0, pp: 0 };
  for (const g of ['dp', 'tp', 'pp']) x[g] = sum(o.comm.filter((c) => c[2] === g).map((c) => c[9]));
  x.bubble = o.bubble;
  x.optimizer = o.optimizer;
  return x;
}
const gatherRow = (o, s) => ((o.zero_stage === 1 || o.zero_stage === 2) && o.split[0] > 1 && !s.overlap_param_gather ? o.comm.find((c) => c[0] === 'DP all-gather') : null);
function codes(o, s) {
  const c = [o.fits ? 'fits' : 'too_big', 'batch', 'units', 'measured', 'overlap'];
  if (o.split[1] > 1 && o.comm.some((x) => x[2] === 'tp' && x[4] === 'inter')) c.push('tp_inter');
  if (gatherRow(o, s)) c.push('gather');
  if (o.mfu !== null) c.push('flops');
  let worst = ['none', 0];
  for (const [k, v] of Object.entries(overheads(o))) if (v > worst[1]) worst = [k, v];
  c.push(`worst_${worst[0]}`);
  return c;
}
const WORST = { dp: '暴露的 DP/ZeRO 通信', tp: 'TP 通信', pp: '暴露的 PP 点对点通信', bubble: '流水线气泡', optimizer: '优化器步' };
const mem = (o, s, verb, sign) => `${verb}：每卡 ${B(o.memory.total)} ${sign} 显存 ${B(s.device_memory)}（模型状态 ${B(o.memory.states)}，激活 ${B(o.memory.activations)}，临时缓冲 ${B(o.memory.gather)}，重算工作区 ${B(o.memory.working)}${o.memory.logits ? `；最后一个阶段另有 logits ${B(o.memory.logits)}` : ''}）。`;
function sentence(code, o, s) {
  const [dp, tp, , stage, mb] = o.split, ov = overheads(o), again = o.compute - o.ideal - o.optimizer;
  switch (code) {
    case 'fits': return mem(o, s, '放得下', '≤');
    case 'too_big': return mem(o, s, '放不下', '>');
    case 'batch': return `全局 batch 不变：${s.global_batch} = dp ${dp} × micro_batch ${mb} × 微批次数 ${o.microbatches}。`;
    case 'units': return `带宽按字节读：节点内 ${fmt(s.intra_bw, 'B/s')}（= ${trim(s.intra_bw * 8e-9, 4)} Gb/s），跨节点 ${fmt(s.inter_bw, 'B/s')}（= ${trim(s.inter_bw * 8e-9, 4)} Gb/s）；梯度按 ${s.grad_reduce_dtype} 归约（每个 ${trim(s.grad_bytes)} 字节）。`;
    case 'measured': return measured(o, s);
    case 'overlap': return `重叠：通信共 ${T(sum(o.comm.map((c) => c[8])))}，与计算重叠 ${T(o.hidden_comm)}，暴露 ${T(o.exposed_comm)}（DP ${T(ov.dp)}，TP ${T(ov.tp)}，PP ${T(ov.pp)}）；气泡 ${T(o.bubble)}。`;
    case 'tp_inter': return `TP=${tp} 超出一个节点（每节点 ${s.devices_per_node} 卡），每层的 TP 通信只能走跨节点链路。`;
    case 'gather': { const g = gatherRow(o, s); return `ZeRO-${stage} 更新后参数的 all-gather 要等优化器、优化器要等全部梯度，只能排在这一步最后：${T(g[8])} 中暴露 ${T(g[9])}；overlap_param_gather=True 让它与下一步的前向重叠。`; }
    case 'flops': return `MFU ${pct(o.mfu)}（只计模型 FLOPs），HFU ${pct(o.hfu)}（连重算一起计）；输入的 hfu=${trim(s.hfu, 12)} 是计算时的速度，通信和气泡把整步平均拉低。`;
    case 'worst_none': return s.recompute === 'none' ? `步时 ${T(o.step)} 里没有暴露的通信和气泡，全是模型计算；效率 ${pct(o.efficiency)}。`
      : `步时 ${T(o.step)} 里没有暴露的通信和气泡，全是计算：模型计算 ${T(o.ideal)}，重算 ${T(again)}；效率 ${pct(o.efficiency)} = 模型计算 ÷ 步时，差的部分就是重算。`;
    default: {
      const key = code.slice(6);
      const parts = [s.recompute !== 'none' ? `重算 ${T(again)}` : '', o.optimizer ? `优化器步 ${T(o.optimizer)}` : ''].filter(Boolean).join('，');
      return `步时 ${T(o.step)}：计算 ${T(o.compute)}${parts ? `（其中${parts}）` : ''}，最大的额外开销是${WORST[key]} ${T(ov[key])}；效率 ${pct(o.efficiency)}。`;
    }
  }
}
const SCHED = { gpipe: 'GPipe', '1f1b': '1F1B', interleaved: '交错式 1F1B', interleaved_zb: '交错式零气泡（ZB-1P）', zbv: '零气泡 ZB-V' };
function assumptions(o, s) {
  const layer = [s.dropout ? '有 dropout' : '无 dropout', `${s.gated ? '门控（SwiGLU） ' : ''}MLP 宽 ${s.ffn}`, s.flash_attention ? 'FlashAttention（不存 s×s 矩阵）' : '注意力存 s×s 矩阵',
    s.kv_heads !== s.heads ? `${s.kv_heads} 组 K、V 头` : ''].filter(Boolean).join('、');
  const v = o.split[2] > 1 && MULTI.includes(s.schedule) ? s.virtual_stages : 1;
  return [`参数量 ${fmtCount(o.params, 4)}，${s.params_from_shape ? '由模型形状推出' : '按给定值'}；TP×PP 均分参数，嵌入层也一样切分；计算也均分到各层。`,
    `激活按 Korthikanti 等（2022）的每层公式（16 位激活，${layer}）；${s.logits ? '最后一个流水线阶段另存一个微批次的 logits（16 位，加上交叉熵用的 fp32 副本，按 TP 切分词表），' : '不计输出 logits，'}不含嵌入层的激活。`,
    `流水线调度 ${SCHED[s.schedule]}${v > 1 ? `（每 rank ${v} 个虚拟阶段）` : ''}：保存得最多的流水线 rank 峰值时保存 ${o.in_flight} 份（阶段×微批次）激活${o.split[2] > 1 && SPLIT_BW.includes(s.schedule) ? '；反向拆成 I（输入梯度）与 W（权重梯度），各按不含重算的反向的一半计，重算归 I，激活一直保存到 W 算完。' : '。'}`,
    'ZeRO-3 的临时缓冲按两层参数（正在用的一层 + 预取的一层）和一层未分片的梯度计；通信缓冲与碎片不计。',
    '通信用理想 ring 与 α-β 模型：每一步（ring 的一轮）延迟 α，加上每卡发送量除以带宽；跨节点的组每节点有 g 张卡就用 g 张网卡（NCCL 的几个 ring 从不同网卡出节点），带宽取节点内带宽与 g × 跨节点每卡带宽中较小的一个；点对点发送：节点内的阶段边界走节点内链路，跨节点的边界用一张网卡。',
    `设备编号 TP 最内、DP 其次、PP 最外；每节点 ${s.devices_per_node} 卡。`,
    `时间线：DP 集合通信在自己的流上一次一个；梯度按 ${trim(s.bucket / 2 ** 20)} MiB 的桶跟在反向后面归约${s.overlap_grad_reduce ? '' : '（已关闭重叠：反向结束后才归约，计算等它）'}；ZeRO-1/2 更新后参数的 all-gather ${s.overlap_param_gather ? '与下一步的前向重叠' : '排在优化器之后、这一步的最后'}；ZeRO-3 每层聚合参数并预取一层；TP 通信夹在层内计算之间；PP 异步发送，接收方等待；读数取第一个流水线 rank。`,
    `计算时间${s.compute_single !== null ? '按一张卡实测的整步计算时间均分到所有卡' : `按每卡峰值 ${trim(s.peak_flops, 3)} FLOP/s × HFU ${pct(s.hfu)} 估算（重算也按这个速度）`}；前向 2P+4·L·s·h FLOPs/词元，反向为前向两倍，重算另加；优化器步按显存带宽计：每个要更新的参数读写 ${trim(s.optimizer_traffic)} 字节，÷ ${fmt(s.hbm_bw, 'B/s')}，排在梯度归约之后。`,
    '气泡 = 第一个流水线 rank 既不计算、自己的通信也不在跑的时间，从时间线读出；各阶段等长、通信不计时，GPipe 与 1F1B 的气泡占整步的 (p−1)/(m+p−1)（即理想时间的 (p−1)/m），交错式 1F1B 占 (p−1)/(v·m+p−1)（理想时间的 (p−1)/(v·m)）；零气泡调度用 W 填空档，气泡更小，只从时间线读。'];
}

// One evaluation of the form: numbers, verdict codes, optionally the search (as plan_vectors.evaluate); fit: the HFU a measured step gives.
function evaluate(raw = {}, withSearch = false) {
  const { v, errors } = read(raw);
  const cal = fits(raw, errors);
  if (Object.keys(errors).length) return { errors, values: v };
  const split = SPLIT.map((k) => Number(v[k])), { s, fit } = NC.stepFit(core, Object.assign(settings(v), cal), split, raw, errors);
  if (Object.keys(errors).length) return { errors, values: v };  // a measured step or tokens/s refused (hfu_from_step)
  const out = core(s, ...split);
  out.codes = codes(out, s);
  out.scaling = scaling(s, split);
  if (withSearch) out.search = search(s, v.devices);
  return { out, values: v, s, split, fit };
}
// The three layouts of an evaluated plan (plan_vectors.layouts).
function layouts(r) {
  const tl = build(spec(r.s, ...r.split));
  return { timeline: timelineLayout(tl, r.out), memory: memoryLayout(r.out, r.s), scaling: r.out.scaling };
}

const api = { FIELDS, PRESETS, SPLIT, CALIBRATION, read, settings, activations, spec, core, search, scaling, codes, sentence, assumptions, evaluate, layouts, tfmt, B };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBPlan = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
