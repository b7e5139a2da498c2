// The plan builder's step timeline: the JavaScript twin of parallel_budget.model's timeline.py (event lanes,
// their reading, exposed spans) and planstep.py (the DDP/ZeRO/TP/PP event rules that fill a Timeline from a
// step's spec, in the pipeline orders of planschedule.js), and of book/planlayout.py's timeline_layout (what
// the timeline drawing shows; planview.js draws it). plan.js prices a plan with it; tests/vectors/plan.json
// holds it to Python. No DOM here; node loads it with require(). The page loads it after planschedule.js.
(function (root) {
'use strict';
const { fmt } = root.PBModel || require('./model.js');
const { MULTI, SPLIT, stageRank, scheduleProblem, interleaveProblem, pipelineOrder, inFlight, peakInFlight } = root.PBPlanSchedule || require('./planschedule.js');
const ROWS = ['dp_allreduce', 'dp_reduce_scatter', 'dp_all_gather', 'dp_all_gather_backward', 'tp', 'pp'];
const [AR, RS, AG, AGB, TPR, PPR] = ROWS.keys();
const [COMPUTE, DP, PP_ACT, PP_GRAD] = [0, 2, 3, 4];
const STREAMS = ['compute', 'tp', 'dp', 'pp_act', 'pp_grad'];
const sum = (xs) => xs.reduce((a, x) => a + x, 0);
const range = (n) => Array.from({ length: n }, (_, i) => i);

// timeline.Timeline, in flat arrays per device (no object per event): stream, start, end, work, row, tp, busy
// start, and the tag as three numbers (kind in KIND, stage or layer, microbatch).
const KIND = ['F', 'B', 'AG', 'AGB', 'RS', 'R', 'P', 'I', 'W', 'O'];
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
const [KF, KB, KAG, KAGB, KRS, KR, KP, KI, KW, KO] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
// planstep._optimizer: after the device's compute and its gradients' reduction.
const optimizer = (sp, tl, r) => (sp.optimizer ? tl.put(r, COMPUTE, sp.optimizer, tl.free[r * 5 + DP], 0.0, -1, KO, -1, -1) : 0.0);
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
  optimizer(sp, tl, 0);
}
function build(sp) {
  const { p, v, m } = sp, tl = new Timeline(p);
  if (sp.dp && sp.stage === 3) { zero3(sp, tl); return tl; }
  const order = pipelineOrder(sp.schedule, p, m, v), stages = p * v;
  const act = Array(stages * m).fill(-1.0), grad = Array(stages * m).fill(-1.0), hold = Array(p).fill(0.0);
  const zero12 = sp.dp && (sp.stage === 1 || sp.stage === 2), kb = sp.buckets, { f, b, tf, tb } = sp;
  const msg = sp.boundary && sp.boundary.length ? sp.boundary : Array(p).fill(sp.d);
  const gathered = new Map();
  if (zero12 && sp.overlap_param_gather) {
    for (let r = 0; r < p; r++) for (let c = 0; c < v; c++) {
      const last = tl.put(r, DP, kb * sp.param_bucket, 0.0, 0.0, AG, KAG, c * p + r, -1);
      gathered.set(r * v + c, [tl.lastStart + sp.param_bucket, last]);
    }
  }
  const reduceRow = sp.stage === 0 ? AR : RS, eachMb = sp.stage === 2, reduceHere = sp.dp && sp.stage < 3;
  const rankOf = range(stages).map((k) => stageRank(sp.schedule, p, k)), vee = sp.schedule === 'zbv', w = sp.w || 0.0;
  // the receiver's lane for a message: one per link; in ZB-V by direction (from the lower rank: PP_ACT)
  const lane = (src, dst, kind) => (vee ? (src < dst ? PP_ACT : PP_GRAD) : kind);
  // one message between neighbouring ranks: the link of boundary a -> a+1 (mod p) that joins them
  const hop = (src, dst) => (dst === (src + 1) % p ? msg[src] : msg[dst]);
  const reduce = (r, k, j, began, out) => {
    if (!(reduceHere && (eachMb || j === m - 1))) return;
    const a = sp.grad_bucket;
    if (sp.overlap_grad_reduce) tl.put(r, DP, kb * a, began + (out - began) / kb, out + a, reduceRow, KR, k, j);
    else hold[r] = tl.put(r, DP, kb * a, out, 0.0, reduceRow, KR, k, j);
  };
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
          if (k + 1 < stages) {
            const nxt = rankOf[k + 1];
            act[(k + 1) * m + j] = nxt === r ? out : tl.put(nxt, lane(r, nxt, PP_ACT), hop(r, nxt), out, 0.0, PPR, KP, k + 1, j);
          }
        } else if (kind === 'W') {
          const out = tl.put(r, COMPUTE, w, hold[r], 0.0, TPR, KW, k, j);
          reduce(r, k, j, tl.lastStart, out);
        } else {
          const ready = k + 1 < stages ? grad[k * m + j] : 0.0;
          if (ready < 0) break;
          const split = kind === 'I';
          const out = tl.put(r, COMPUTE, split ? b - w : b, Math.max(ready, hold[r]), 0.0, TPR, split ? KI : KB, k, j, tb), began = tl.lastStart;
          if (k) {
            const prv = rankOf[k - 1];
            grad[(k - 1) * m + j] = prv === r ? out : tl.put(prv, lane(r, prv, PP_GRAD), hop(r, prv), out, 0.0, PPR, KP, k - 1, j);
          }
          if (!split) reduce(r, k, j, began, out);
        }
        i++;
        left--;
      }
      ptr[r] = i;
    }
    if (left === moved) throw new Error('流水线调度出现了循环依赖');
  }
  for (let r = 0; r < p; r++) {
    const done = optimizer(sp, tl, r);
    if (zero12 && !sp.overlap_param_gather) tl.put(r, DP, v * kb * sp.param_bucket, done, 0.0, AG, KAG, -1, -1);
  }
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

// ---------------------------------------------------------------- planlayout: what the timeline drawing shows
const tfmt = (x) => fmt(x, 's', Math.abs(x) >= 1 ? 's' : 'ms');
const STREAM_ZH = { compute: '计算', tp: 'TP', dp: 'DP', pp: 'PP' };
const ROW_ZH = { dp_allreduce: 'DP all-reduce', dp_reduce_scatter: 'DP reduce-scatter', dp_all_gather: 'DP all-gather', dp_all_gather_backward: 'DP all-gather（反向）', tp: 'TP 集合通信', pp: 'PP 点对点' };
const SHORT = { dp_allreduce: 'AR', dp_reduce_scatter: 'RS', dp_all_gather: 'AG', dp_all_gather_backward: 'AG' };
const shownDevices = (p) => (p <= 4 ? range(p) : [0, 1, p - 2, p - 1]);
const streamOf = (row) => (ROWS[row] === 'tp' || ROWS[row] === 'pp' ? ROWS[row] : 'dp');
const COMPUTE_ZH = { F: '前向', B: '反向', I: '反向（输入梯度 I）', W: '反向（权重梯度 W）' };
function what(e, zero3) {
  const [kind, k, j] = e.tag;
  if (e.stream === 'compute' && kind === 'O') return ['O', 'Opt', '优化器步'];
  if (e.stream === 'compute') return [kind === 'F' || kind === 'W' ? kind : 'B', `${kind}${j}`, `${COMPUTE_ZH[kind]} ${zero3 ? `第 ${k + 1} 层` : `阶段 ${k}`} 微批次 ${j}`];
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
    if (last && last[2] !== 'O' && b[2] !== 'O' && b[0] - last[1] <= gap && ((last[2] === b[2] && last[3] === b[3]) || b[1] - b[0] < narrow)) {
      last[1] = Math.max(last[1], b[1]); last[5] += b[5]; last[6] += b[6];
      if (last[3] !== b[3]) last[3] = '';
      if (last[2] !== b[2]) { const back = ['B', 'W'].includes(last[2]) && ['B', 'W'].includes(b[2]); last[2] = back ? 'B' : 'C'; last[4] = back ? '反向' : '前向与反向'; }
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
  const evs = events(tl), step = o.step, gap = step / 200, narrow = step / 200, tiny = step / 2000;
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

// What plan.js uses (sum and range too, rather than a copy of each).
const api = { ROWS, MULTI, SPLIT, sum, range, interleaveProblem, scheduleProblem, stageRank, pipelineOrder, inFlight, peakInFlight, build, readTimeline, tfmt, timelineLayout };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBPlanTimeline = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);

