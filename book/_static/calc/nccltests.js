// The plan builder's calibration: nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf)
// read and fitted to α (latency per call) and bus bandwidth. The JavaScript twin of
// parallel_budget/model/calibration.py, held to it by tests/vectors/nccltests.json: same rows accepted,
// same lines refused (the message names the line), same least squares (residuals relative to time).
// Also the plan builder's use of a fit (plan.js): the inputs per group and the verdict's sentence on what was
// measured (planreport._measured). No DOM here; node loads it with require(). Classic script, so it also runs from file://.
(function (root) {
'use strict';
const M = root.PBModel || require('./model.js');
const { fmt, trim } = M;
const FUNC = 'fit_nccl_tests';
const TYPE_BYTES = { int8: 1, uint8: 1, int32: 4, uint32: 4, int64: 8, uint64: 8, half: 2, float: 4, double: 8, bfloat16: 2, f8e4m3: 1, f8e5m2: 1 };
const RANK = /^#\s+Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+\d+\s+on\s+\S+\s+device\s+\d+/;
const NUM = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const ACCEPTS = '接受的是 nccl-tests 的 all_reduce_perf、all_gather_perf 或 reduce_scatter_perf 打印的完整输出：'
  + '“# nThread … nGpus …”一行、每个 rank 一行“#  Rank …”、表头，再是每个消息大小一行'
  + '（size count type redop root，然后两组 time algbw busbw #wrong）。';

// planterms.share and rounds
const share = (c, r) => { const x = 2 * (r - 1) / r; return c === 'all-reduce' ? x : x / 2; };
const rounds = (c, r) => (c === 'all-reduce' ? 2 * (r - 1) : r - 1);

function fail(msg, line = 0) { const e = new Error(msg); e.line = line; return e; }
function bad(n, line, why) {
  let shown = line.trim();
  if ([...shown].length > 80) shown = [...shown].slice(0, 77).join('') + '…';
  return fail(`${FUNC}() 读不懂第 ${n} 行“${shown}”：${why}。${ACCEPTS}`, n);
}

function row(n, line) {
  const tok = line.trim().split(/\s+/);
  if (tok.length < 13) throw bad(n, line, `数据行应有 13 列，这里只有 ${tok.length} 列`);
  if (!/^\d+$/.test(tok[0]) || !/^\d+$/.test(tok[1])) throw bad(n, line, '前两列 size 与 count 应是整数');
  if (!Object.hasOwn(TYPE_BYTES, tok[2])) throw bad(n, line, `数据类型 '${tok[2]}' 不是 nccl-tests 的类型名（${Object.keys(TYPE_BYTES).join('、')}）`);
  const nums = [...tok.slice(5, 8), ...tok.slice(9, 12)];
  if (!/^-?\d+$/.test(tok[4]) || !nums.every((x) => NUM.test(x))) throw bad(n, line, 'root 应是整数，time、algbw、busbw 应是数字');
  if (!(tok[8] === 'N/A' || NUM.test(tok[8])) || !(tok[12] === 'N/A' || NUM.test(tok[12]))) throw bad(n, line, '#wrong 列应是数字或 N/A');
  if ([tok[8], tok[12]].some((x) => x !== 'N/A' && Number(x) > 0)) throw bad(n, line, `这一行有校验出错的元素（#wrong = ${tok[8]}、${tok[12]}），结果不能用`);
  const t = Number(tok[5]) * 1e-6, alg = Number(tok[6]) * 1e9, bus = Number(tok[7]) * 1e9, tIn = Number(tok[9]) * 1e-6;
  if (t <= 0 || tIn <= 0) throw bad(n, line, '时间应大于 0');
  return { size: Number(tok[0]), count: Number(tok[1]), type: tok[2], redop: tok[3], root: Number(tok[4]), t, alg, bus, tIn };
}

function collective(n, line, r, ranks) {
  if (r.root !== -1) throw bad(n, line, `root = ${r.root}：这是有根的集合通信（reduce、broadcast 一类），不是三者之一`);
  const per = r.count ? r.size / (r.count * TYPE_BYTES[r.type]) : 0;
  if (r.redop === 'none' && per === ranks) return 'all-gather';
  if (r.redop !== 'none' && per === 1) return 'all-reduce';
  if (r.redop !== 'none' && per === ranks) return 'reduce-scatter';
  throw bad(n, line, `size ÷（count × 元素字节数）= ${+per.toPrecision(6)}、redop = ${r.redop}，对 ${ranks} 个 rank 不是 all-reduce（1，有归约）、all-gather（${ranks}，none）或 reduce-scatter（${ranks}，有归约）`);
}

function parse(text) {
  if (typeof text !== 'string' || !text.trim()) throw fail(`${FUNC}() 需要一段文字（nccl-tests 的输出），收到的是空白或不是文字。${ACCEPTS}`);
  const ranks = [], rows = [];
  let header = false, nthread = false;
  text.split(/\r\n|\r|\n/).forEach((line, i) => {
    const n = i + 1, s = line.trim();
    if (!s) return;
    if (s.startsWith('#')) {
      const m = RANK.exec(s);
      if (m) {
        if (rows.length) throw bad(n, line, 'rank 行应在表格之前');
        ranks.push(Number(m[1]));
      } else if (/^#\s*nThread\s+\d+\s+nGpus\s+\d+/.test(s)) nthread = true;
      else if (/^#\s*size\s+count\s+type\s+redop\s+root\s+time\s+algbw\s+busbw\s+#wrong/.test(s)) header = true;
      return;
    }
    if (!header) throw bad(n, line, '表头（“#  size  count  type  redop  root  time  algbw  busbw  #wrong …”）之前出现了数据');
    rows.push([n, line, row(n, line)]);
  });
  if (!nthread) throw fail(`${FUNC}() 没有找到“# nThread … nGpus …”这一行。${ACCEPTS}`);
  if (!ranks.length) throw fail(`${FUNC}() 没有找到“#  Rank  0 Group  0 Pid …”这样的设备行，数不出 rank 数。${ACCEPTS}`);
  const sorted = [...ranks].sort((a, b) => a - b);
  if (sorted.some((r, i) => r !== i)) throw fail(`${FUNC}() 的设备行给出的 rank 是 [${sorted.join(', ')}]，应是 0 到 n−1 各一次。${ACCEPTS}`);
  if (!header || !rows.length) throw fail(`${FUNC}() 没有找到表头和数据行（至少两个消息大小）。${ACCEPTS}`);
  return { ranks: ranks.length, rows };
}

// calibration.fit_nccl_tests: {collective, ranks, alpha (s), bus_bandwidth (B/s), points, max_error, step_latency}.
function fit(text) {
  const { ranks, rows } = parse(text);
  if (ranks < 2) throw fail(`${FUNC}() 的表只有 1 个 rank：没有通信，拟合不出带宽。请在至少 2 个 rank 上测。`);
  const kinds = new Set(rows.map(([n, line, r]) => collective(n, line, r, ranks)));
  if (kinds.size > 1) throw fail(`${FUNC}() 的表里混了几种集合通信（${[...kinds].sort().join('、')}）：一次只贴一种的输出。`);
  const coll = [...kinds][0], f = share(coll, ranks);
  for (const [n, line, r] of rows) {
    const alg = r.alg / 1e9, bus = r.bus / 1e9;
    if (alg >= 1 && Math.abs(bus / alg - f) > f * (0.002 + 0.01 / alg + 0.01 / bus)) throw bad(n, line, `busbw/algbw = ${(bus / alg).toFixed(3)}，而 ${ranks} 个 rank 的 ${coll} 应是 ${f.toFixed(3)}：设备行与表对不上`);
  }
  const sizes = [...new Set(rows.map(([, , r]) => r.size))];
  if (sizes.length < 2) throw fail(`${FUNC}() 至少要两个不同的消息大小才能分出 α 和带宽，表里只有 [${sizes.join(', ')}]。`);
  const pts = rows.flatMap(([, , r]) => [[f * r.size, r.t], [f * r.size, r.tIn]]);
  let sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const [x, t] of pts) {
    const w = 1.0 / (t * t);
    sw += w; sx += w * x; sy += w * t; sxx += w * x * x; sxy += w * x * t;
  }
  const det = sw * sxx - sx * sx, slope = (sw * sxy - sx * sy) / det, alpha = (sy - slope * sx) / sw;
  if (slope <= 0 || alpha < 0) throw fail(`${FUNC}() 拟合出的 α = ${+(alpha * 1e6).toPrecision(3)} µs、每字节 ${+slope.toPrecision(3)} s，不合物理：表里的时间没有随消息变大而变长。请贴从小到大（例如 -b 8 -e 1G -f 2）的完整表。`);
  const maxError = Math.max(...pts.map(([x, t]) => Math.abs(alpha + x * slope - t) / t));
  return { collective: coll, ranks, alpha, bus_bandwidth: 1.0 / slope, points: pts.length, max_error: maxError, step_latency: alpha / rounds(coll, ranks) };
}

// The builder's calibration: nccl-tests text per group (raw.dp_nccl, raw.tp_nccl), as plan_budget(dp_nccl=…).
const CALIBRATION = ['dp_nccl', 'tp_nccl'];
function fits(raw, errors) {
  const out = { dp_fit: null, tp_fit: null, measured: [] };
  for (const name of CALIBRATION) {
    const text = typeof raw[name] === 'string' ? raw[name] : '';
    if (!text.trim()) continue;
    try {
      const f = fit(text);
      out[`${name.slice(0, 2)}_fit`] = [f.collective, f.ranks, f.step_latency, f.bus_bandwidth, f.alpha];
      out.measured.push(name);
    } catch (e) { errors[name] = e.message; }
  }
  return out;
}
// planreport._measured: which numbers were measured (nccl-tests fits) and which are datasheet values.
const MEASURED = { hfu: 'HFU', compute: '单卡计算时间', intra_bw: '节点内带宽', inter_bw: '跨节点带宽', latency: '每轮延迟 α', peak_flops: '峰值 FLOP/s', device_memory: '显存' };
function measured(o, s) {
  const got = [], sheet = [];
  for (const g of ['dp', 'tp']) {
    const f = s[`${g}_fit`];
    if (f) got.push(`${g.toUpperCase()} 组的 α 与带宽（nccl-tests，${f[1]} 卡 ${f[0]}：每次调用 ${trim(f[4] * 1e6, 3)} µs，总线带宽 ${fmt(f[3], 'B/s', 'GB/s', 3)}）`);
  }
  const fitted = s.dp_fit && (s.tp_fit || o.split[1] === 1) && o.split[2] === 1;
  for (const [key, zh] of Object.entries(MEASURED)) {
    if (s.measured.includes(key)) got.push(zh);
    else if (['intra_bw', 'inter_bw', 'latency'].includes(key) && fitted) continue;
    else if (key === 'compute' || (['peak_flops', 'hfu'].includes(key) && s.compute_single !== null)) continue;
    else sheet.push(zh);
  }
  if (!got.length) return `全部按数据手册与默认值，没有实测：${sheet.join('、')}。用 nccl-tests 的输出（dp_nccl、tp_nccl）和一次实测步时（hfu_from_step）校准。`;
  return `实测：${got.join('；')}${sheet.length ? `。按数据手册：${sheet.join('、')}。` : '。'}`;
}
// overlapcriteria.overlap_threshold / plan_threshold and overlapfigure.overlap_layout: the closed-form test and the
// sweep of the builder's figure (exposed DP gradient communication against tokens per microbatch). core: plan.js's.
const BACKWARD = { none: 4.0, selective: 4.0, full: 6.0 };
function overlapThreshold(peak, bw, hfu, r, stage, g, p, rc, alpha, m, attention) {
  let sent, calls;
  if (stage === 0) { sent = share('all-reduce', r) * g; calls = [['all-reduce', g]]; }
  else if (stage < 3) { sent = share('reduce-scatter', r) * g; calls = [['reduce-scatter', g]]; }
  else { sent = share('all-gather', r) * (p + g); calls = [['all-gather', p], ['reduce-scatter', g]]; }
  let eff = bw;
  if (alpha > 0) eff = sent / calls.reduce((a, [c, b]) => a + rounds(c, r) * alpha * b / m + share(c, r) * b / bw, 0);
  return peak * hfu / eff * sent / (BACKWARD[rc] + attention);
}
function planThreshold(s, [dp, tp, pp, stage], seq = s.seq) {
  const per = s.devices_per_node, span = tp * dp, v = pp > 1 && s.schedule === 'interleaved' ? s.virtual_stages : 1;
  const inter = dp === 1 || (span <= per && per % span === 0) ? s.intra_bw : Math.min(s.intra_bw, Math.max(1, Math.min(dp, Math.floor(per / tp))) * s.inter_bw);
  const f = s.dp_fit, bw = f ? f[3] : inter, lat = f ? f[2] : s.latency;
  const grads = s.params / (tp * pp) * s.grad_bytes / v;
  const msg = stage < 3 ? grads / Math.ceil(grads / s.bucket) : grads * v / s.layers;
  let peak = s.peak_flops, hfu = s.hfu;
  if (peak === null) {
    const tokens = s.global_batch * s.seq, model = 3 * (2.0 * s.params * tokens + 4.0 * s.layers * s.seq * s.hidden * tokens);
    peak = model / s.compute_single; hfu = 1.0;
  }
  const attention = (s.recompute === 'none' ? 8.0 : 12.0) * s.layers * seq * s.hidden / s.params;
  return overlapThreshold(peak, bw, hfu, Math.max(dp, 2), stage, s.grad_bytes, s.param_bytes, s.recompute, lat, msg, attention);
}
function overlapLayout(core, s, split, points = 25) {
  const [dp, , , stage, mb] = split;
  if (dp === 1) return { threshold: null, tokens: [], exposed: [], stage, dp: 1 };
  let th = planThreshold(s, split);
  for (let i = 0; i < 20; i++) th = planThreshold(s, split, th / mb);
  const tokens = [], exposed = [];
  for (let i = 0; i < points; i++) {
    const seq = Math.max(1, Math.floor(th * 2 ** (-2 + 4 * i / (points - 1)) / mb + 0.5));
    if (tokens.length && seq * mb === tokens[tokens.length - 1]) continue;
    const o = core(Object.assign({}, s, { seq }), ...split);
    tokens.push(seq * mb);
    exposed.push(o.comm.filter((c) => c[2] === 'dp' && !((stage === 1 || stage === 2) && c[0] === 'DP all-gather' && !s.overlap_param_gather)).reduce((a, c) => a + c[9], 0));
  }
  return { threshold: th, tokens, exposed, stage, dp };
}

// hfufit.hfu_from_step: the hfu at which the plan model (core, plan.js's) gives a measured step (s, seconds) or
// tokens per second; same bisection on log hfu, same refusals. s: settings with hfu 1 as a start; returns the fit.
const g4 = (x) => {  // Python's format(x, '.4g'): round half to even on the exact double, then fixed or exponent
  const [m, e] = Math.abs(x).toExponential(99).split('e'), all = m.replace('.', ''), rest = all.slice(4).replace(/0+$/, '');
  let n = Number(all.slice(0, 4)), k = Number(e);
  if (rest > '5' || (rest === '5' && n % 2)) n += 1;
  if (n === 10000) { n = 1000; k += 1; }
  const sign = x < 0 ? '-' : '', digits = String(n).replace(/0+$/, '') || '0';
  if (k < -4 || k >= 4) return `${sign}${digits[0]}${digits.length > 1 ? `.${digits.slice(1)}` : ''}e${k < 0 ? '-' : '+'}${String(Math.abs(k)).padStart(2, '0')}`;
  const f = k >= 0 ? (digits + '000').slice(0, k + 1) + (digits.length > k + 1 ? `.${digits.slice(k + 1)}` : '') : `0.${'0'.repeat(-k - 1)}${digits}`;
  return sign + f;
};
function hfuFromStep(core, s, split, step = null, tokensPerS = null) {
  const F = 'hfu_from_step', run = (hfu, m = s.measured) => core(Object.assign({}, s, { hfu, measured: m }), ...split);
  if (step === null && tokensPerS === null) throw fail(`${F}() 需要实测的 step（如 "8.2 s"）或 tokens_per_s（每秒词元数）二者之一。`);
  const base = run(1.0), tokens = s.global_batch * s.seq;
  let t = step;
  if (tokensPerS !== null) {
    const t2 = tokens / tokensPerS;
    if (t !== null && Math.abs(t2 - t) > 0.02 * t) throw fail(`${F}() 的 step=${g4(t)} s 与 tokens_per_s 推出的 ${g4(t2)} s（全局 batch ${tokens} 个词元）相差超过 2%：两者应来自同一次测量。`);
    t = t === null ? t2 : t;
  }
  if (base.mfu === null) throw fail(`${F}() 要用 peak_flops（或集群预设）算 HFU，不能配 compute。`);
  if (t <= 0 || t < base.step * (1 - 1e-9)) throw fail(`${F}() 的实测步时 ${g4(t)} s 比 hfu=1（计算跑满峰值）时模型的步时 ${g4(base.step)} s 还短：模型的通信或气泡比实测的多，先用 nccl-tests 的实测带宽校准通信（dp_nccl=…）。`);
  let lo = 1e-4, hi = 1.0;
  for (let i = 0; i < 60; i++) {
    const mid = Math.sqrt(lo * hi);
    if (run(mid).step > t) lo = mid; else hi = mid;
  }
  const b = run(hi), measured = [...s.measured, 'hfu'];
  return { step: t, hfu: hi, mfu: b.mfu * b.step / t, hfu_step: b.hfu * b.step / t, s: Object.assign({}, s, { hfu: hi, measured }) };
}
// The builder's measured step (s) and throughput (tokens/s), as plan_budget(...) then hfu_from_step(...).
const STEP = [{ name: 'measured_step', kind: 'num', min: 0, max: 1e7, min_open: true }, { name: 'measured_tokens', kind: 'num', min: 0, max: 1e15, min_open: true }];
function stepFit(core, s, split, raw, errors) {
  const [t, n] = STEP.map((fd) => {
    const text = String(raw[fd.name] ?? '').trim();
    if (!text) return null;
    try { return M.fieldValue(fd, { [fd.name]: text }); } catch (e) { errors[fd.name] = e.message; return null; }
  });
  if (Object.keys(errors).length || (t === null && n === null)) return { s, fit: null };
  try { const fit = hfuFromStep(core, s, split, t, n); return { s: fit.s, fit }; } catch (e) { errors[t === null ? 'measured_tokens' : 'measured_step'] = e.message; return { s, fit: null }; }
}

const api = { g4, hfuFromStep, STEP, stepFit, fit, parse, share, rounds, TYPE_BYTES, CALIBRATION, fits, measured, overlapThreshold, planThreshold, overlapLayout };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBNccl = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
