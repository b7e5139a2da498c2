// The plan builder's pipeline schedules: the JavaScript twin of parallel_budget.model's schedule.py (each
// rank's order of forwards and backwards, split into I and W for the zero-bubble schedules, as torch's; where
// each stage runs; what each schedule refuses). plantimeline.js runs these orders; tests/vectors/plan.json
// holds both to Python. No DOM here; node loads it with require(). The page loads it first of the builder's.
(function (root) {
'use strict';
const range = (n) => Array.from({ length: n }, (_, i) => i);
// schedule.interleave_problem / schedule_problem / stage_rank
const MULTI = ['interleaved', 'interleaved_zb', 'zbv'], SPLIT = ['interleaved_zb', 'zbv'];
const TORCH_CLASS = { interleaved: 'ScheduleInterleaved1F1B', interleaved_zb: 'ScheduleInterleavedZeroBubble', zbv: 'ScheduleZBVZeroBubble' };
const stageRank = (schedule, p, k) => (schedule === 'zbv' && k >= p ? 2 * p - 1 - k : k % p);
function rounds(p, m) { const n = Math.max(1, Math.floor(m / p)); return [n, Math.floor(m / n)]; }
function scheduleProblem(schedule, layers, p, v, m) {
  if (schedule === 'zbv') {
    if (v !== 2) return `ZB-V 调度每个 rank 恰好有 2 个阶段（PyTorch 的 ScheduleZBVZeroBubble 同样要求），收到 virtual_stages=${v}。`;
    if (layers % (2 * p)) return `ZB-V 调度要求 layers=${layers} 能被 2×pp=2×${p}=${2 * p} 整除：每个阶段要分到整数层。`;
    return '';
  }
  return schedule === 'interleaved' || schedule === 'interleaved_zb' ? interleaveProblem(layers, p, v, m, TORCH_CLASS[schedule]) : '';
}
function interleaveProblem(layers, p, v, m, cls = 'ScheduleInterleaved1F1B') {
  if (v < 2) return `交错调度每个 rank 至少要有 2 个虚拟阶段，收到 virtual_stages=${v}。`;
  if (layers % (p * v)) return `交错调度要求 layers=${layers} 能被 pp×virtual_stages=${p}×${v}=${p * v} 整除：每个虚拟阶段要分到整数层。`;
  const [n] = rounds(p, m);
  if (m % n) return `交错调度要求微批次数 m=${m} 是轮数 max(1, m // pp)=${n} 的整数倍（PyTorch 的 ${cls} 同样要求）。`;
  return '';
}

// schedule._zb1p_rank: ScheduleInterleavedZeroBubble's F, I, W of rank r
function zb1pRank(p, m, v, r) {
  const [, per] = rounds(p, m), total = v * m, warm = Math.min((v - 1) * per + (p - 1 - r), total);
  const count = { F: Array(v).fill(0), I: Array(v).fill(0), W: Array(v).fill(0) }, ops = [], backwards = [];
  let weights = 0;
  const act = (kind, c) => { ops.push([c * p + r, kind, count[kind][c]++]); if (kind === 'W') weights++; };
  const chunkB = (x) => v - 1 - Math.floor((x - warm) / per) % v;
  for (let x = 0; x < total + warm; x++) {
    if (x < total) act('F', Math.floor(x / per) % v);
    if (x < warm) continue;
    act('I', chunkB(x));
    backwards.push(x);
    if (x - warm >= r) act('W', chunkB(backwards[weights]));
  }
  while (weights < backwards.length) act('W', chunkB(backwards[weights]));
  return ops;
}
// schedule._zbv_rank: ScheduleZBVZeroBubble's rank r (stages r and 2p−1−r), microbatches ≥ m dropped
function zbvRank(p, m, r) {
  const n = Math.max(2 * p - 1, m), c0 = r, c1 = 2 * p - 1 - r, ops = [];
  let f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  for (let i = 0; i < 2 * (p - r) - 1; i++) ops.push([c0, 'F', f0++]);
  for (let i = 0; i < r; i++) ops.push([c1, 'F', f1++], [c0, 'F', f0++]);
  for (let i = 0; i < p - r; i++) { ops.push([c1, 'F', f1++], [c1, 'I', b1], [c1, 'W', b1]); b1++; }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) ops.push([c0, 'F', f0++]);
    ops.push([c0, 'I', b0], [c0, 'W', b0], [c1, 'F', f1++], [c1, 'I', b1], [c1, 'W', b1]);
    b0++; b1++;
  }
  let w0 = b0;
  const w1 = b1;
  for (let i = 0; i < r; i++) ops.push([c0, 'I', b0++], [c1, 'I', b1++]);
  for (let i = 0; i < p - r; i++) ops.push([c0, 'I', b0++], [c0, 'W', w0++]);
  for (let j = w1; j < b1; j++) ops.push([c1, 'W', j]);
  for (let j = w0; j < b0; j++) ops.push([c0, 'W', j]);
  return ops.filter((o) => o[2] < m);
}

// schedule.pipeline_order / in_flight / peak_in_flight
const orders = new Map();
function pipelineOrder(schedule, p, m, v) {
  const key = `${schedule},${p},${m},${v}`;
  if (orders.has(key)) return orders.get(key);
  let out;
  if (p === 1) out = [range(m).flatMap((j) => [[0, 'F', j], [0, 'B', j]])];
  else if (schedule === 'interleaved_zb') out = range(p).map((r) => zb1pRank(p, m, v, r));
  else if (schedule === 'zbv') out = range(p).map((r) => zbvRank(p, m, r));
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
// A microbatch's activations are held from F to B, or to W when the backward is split (I frees nothing).
function inFlight(ops) {
  let peak = 0, held = 0;
  for (const o of ops) { if (o[1] === 'F') peak = Math.max(peak, ++held); else if (o[1] !== 'I') held--; }
  return peak;
}
const peakInFlight = (schedule, p, m, v) => Math.max(...pipelineOrder(schedule, p, m, v).map(inFlight));

const api = { MULTI, SPLIT, stageRank, rounds, scheduleProblem, interleaveProblem, pipelineOrder, inFlight, peakInFlight };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBPlanSchedule = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
