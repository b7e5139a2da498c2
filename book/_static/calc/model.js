// Formulas and validation of the in-page calculators. Mirrors parallel_budget
// (calculators.py, units.py, ...) and is held to it by tests/vectors/calculators.json.
// No DOM here: node --test imports this file directly.
// Classic script (no ES module), so it also runs from file://; node loads it with require().
(function (root) {
'use strict';

const NUM = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/;
const LIST_SEP = /[\s,，、;；]+/;  // calculators.LIST_SEP: ASCII and full-width commas and semicolons

const f = (name, kind, def, min = null, max = null, o = {}) => ({
  name, kind, default: def, min, max, min_open: !!o.open, options: o.options || null,
  unit: o.unit || null, optional: !!o.optional, ...(o.qty ? { qty: o.qty } : {}),
});

// Same fields and limits as parallel_budget.book.calculators.FIELDS (checked by the vectors).
const FIELDS = {
  update: [
    f('grads', 'list', '2, 6', -1e12, 1e12, { options: [2, 8] }),
    f('lr', 'num', '0.1', 0, 1e3, { open: 1 }),
    f('w0', 'num', '1', -1e12, 1e12),
    f('reduction', 'select', 'mean', null, null, { options: ['mean', 'sum', 'mean_twice'] }),
  ],
  ring: [
    f('ranks', 'int', '4', 1, 100000),
    f('grad', 'qty', '2', 0, 1e15, { unit: 'grad_unit', qty: 'bytes' }),
    f('grad_unit', 'select', 'GB', null, null, { options: ['GB', 'GiB', 'MB'] }),
    f('bandwidth', 'qty', '25', 1e6, 1e14, { unit: 'bw_unit', qty: 'bandwidth' }),
    f('bw_unit', 'select', 'GB/s', null, null, { options: ['GB/s', 'Gb/s'] }),
    f('compute', 'qty', '400', 0, 1e4, { open: 1, unit: 'ms', qty: 'time' }),
    f('overlap', 'num', '0', 0, 1),
    f('backward_ratio', 'num', '2', 0, 1e3),
    f('last_bucket', 'qty', '0', 0, 1e4, { unit: 'ms', qty: 'time' }),
  ],
  zero: [
    f('params', 'params', '1B', 0, 1e15, { open: 1 }),
    f('dp', 'int', '4', 1, 1000000),
    f('param_bytes', 'num', '2', 0, 64),
    f('grad_bytes', 'num', '2', 0, 64),
    f('optim_bytes', 'num', '12', 0, 64),
    f('memory', 'qty', '80', 1e6, 1e15, { unit: 'memory_unit', qty: 'bytes' }),
    f('memory_unit', 'select', 'GB', null, null, { options: ['GB', 'GiB'] }),
  ],
  pipeline: [
    f('stages', 'int', '4', 1, 16),
    f('microbatches', 'int', '8', 1, 64),
    f('stage_times', 'list', '', 0, 1e6, { open: 1, optional: 1 }),
  ],
  tp: [
    f('batch', 'int', '8', 1, 100000),
    f('seq', 'int', '2048', 1, 10000000),
    f('hidden', 'int', '4096', 1, 1000000),
    f('tp', 'int', '4', 1, 1024),
    f('layers', 'int', '32', 1, 10000),
    f('bytes_per_elem', 'num', '2', 0, 16, { open: 1 }),
  ],
};
const EQUAL_STAGE_MS = 10;
const FIELDS_BY_NAME = Object.fromEntries(Object.values(FIELDS).flat().map((x) => [x.name, x]));

// ---------------------------------------------------------------- units

const PREFIX = { '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40 };
const TIME = { s: 1, sec: 1, ms: 1e-3, us: 1e-6, 'µs': 1e-6, ns: 1e-9, min: 60, h: 3600, hr: 3600 };
const BASE = { bytes: 'B', bandwidth: 'B/s', time: 's' };

function infoUnit(u) {
  const m = /^(|k|M|G|T|P|Ki|Mi|Gi|Ti)(B|b|bit)$/.exec(u);
  return m ? PREFIX[m[1]] / (m[2] === 'B' ? 1 : 8) : null;
}

// units.AMBIGUOUS: lower-case prefixes of bytes and bits ("mb", "mB", "kb", "gb/s") are refused with both readings.
const AMBIGUOUS = /(?<![A-Za-zµ])(?!kB)([kmgtp])([bB])(\/s|ps)?(?![A-Za-z])/;
const PREFIX_ZH = { k: '千', M: '兆', G: '吉', T: '太', P: '拍' };
function ambiguity(text) {
  const m = AMBIGUOUS.exec(text);
  if (!m) return null;
  const p = m[1] === 'k' ? 'k' : m[1].toUpperCase(), per = m[3] ? '/s' : '', zh = PREFIX_ZH[p], s = per ? '每秒' : '';
  const by = `${p}B${per}`, bi = `${p === 'k' ? 'kbit' : `${p}b`}${per}`;
  return `单位 ${m[0]} 有歧义：可能指 ${by}（${zh}字节${s}）或 ${bi}（${zh}比特${s}，只有 ${by} 的 1/8）；请写 ${by} 或 ${bi}`;
}

// [dimension, factor to the base unit] of a unit symbol, or null when unknown (unit_text.UNIT_SPELLINGS).
function unitOf(written) {
  const u = written.replace(/\s*\/\s*/g, '/');
  if (Object.hasOwn(TIME, u)) return ['time', TIME[u]];
  const b = infoUnit(u);
  if (b !== null) return ['bytes', b];
  const m = /^(.+)\/(s|sec)$/.exec(u);
  const i = m && infoUnit(m[1]);
  return i ? ['bandwidth', i] : null;
}

// unit_text's grammar: a number (at most 30 digits before and after the point, a 4-digit exponent), spaces,
// an optional unit of the fixed table; at most MAX_TEXT characters. Never an expression ("2**9999999 MB").
const MAX_TEXT = 64;
const QTY = /^([+-]?(?:[0-9]{1,30}(?:\.[0-9]{0,30})?|\.[0-9]{1,30})(?:[eE][+-]?[0-9]{1,4})?)[ \t]*([^0-9.\s][\s\S]*)?$/;

// Like units.parse: "2 GB" as bytes -> 2e9; throws Error with a Chinese message.
function parseQuantity(text, kind) {
  const raw = String(text).trim();
  const accepted = { bytes: 'B、MB、GB、GiB、Gb 等，例如 2 GB', bandwidth: 'GB/s、Gb/s、MB/s 等，例如 25 GB/s', time: 's、ms、us，例如 400 ms' }[kind];
  const shown = raw.length > 40 ? `${raw.slice(0, 37)}...` : raw;
  if (raw.length > MAX_TEXT) throw new Error(`太长（${raw.length} 个字符，最多 ${MAX_TEXT} 个），请只写一个数和单位；可用单位：${accepted}`);
  const t = raw.replace('Gbps', 'Gb/s').replace('GBps', 'GB/s');
  const m = QTY.exec(t);
  if (!t) throw new Error(`不能为空；可用单位：${accepted}`);
  if (!m) throw new Error(`应以数字开头（最多 30 位数字，指数最多 4 位），收到 “${shown}”；可用单位：${accepted}`);
  const amb = ambiguity(t);
  if (amb) throw new Error(`${amb}（收到 “${shown}”）`);
  const written = (m[2] || '').trim();
  const u = written ? unitOf(written) : [kind, 1];
  if (!u) throw new Error(`不认识单位 “${written}”${written.includes('KB') ? '（请写 kB 或 KiB）' : ''}；只写一个数和一个单位；可用单位：${accepted}`);
  if (u[0] !== kind) throw new Error(`需要${{ bytes: '数据量', bandwidth: '带宽', time: '时间' }[kind]}，“${shown}” 的单位不对；可用单位：${accepted}`);
  const x = Number(m[1]) * u[1];
  if (!Number.isFinite(x)) throw new Error(`必须是有限的数，收到 “${shown}”`);
  if (x < 0) throw new Error(`不能为负数，收到 “${shown}”`);
  return x;
}

const COUNT = { '': 1, K: 1e3, k: 1e3, M: 1e6, B: 1e9, G: 1e9, T: 1e12 };
// Like units.as_params: "7B" -> 7e9, "350M", "1.3e9".
function parseParams(text) {
  const m = /^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([kKMBGT]?)\s*$/.exec(String(text));
  const n = m ? Number(m[1]) * COUNT[m[2]] : NaN;
  if (!(n > 0 && Number.isFinite(n))) throw new Error(`无法读成参数个数：“${text}”。可写 7B、1.3e9、350M（B 表示十亿个参数）`);
  return n;
}

// ---------------------------------------------------------------- formatting (units.fmt)

// Significant digits of |x| rounded half-to-even like Python's format(x, ".Ng").
function roundSig(a, p) {
  const parse = (s) => { const [m, e] = s.split('e'); return [m.replace('.', ''), Number(e)]; };
  let [d, e] = parse(a.toExponential(p - 1));
  const [t, te] = parse(a.toExponential(Math.min(100, p + 30)));
  if (/^50*$/.test(t.slice(p)) && Number(t[p - 1]) % 2 === 0) [d, e] = [t.slice(0, p), te];
  return [d, e];
}

function trim(x, digits = 3) {
  if (x === 0) return '0';
  x = Number(x.toPrecision(12)); // float noise first, as units._trim: 116.44999999999999 shows as 116.5
  const [d, e] = roundSig(Math.abs(x), digits);
  const sign = x < 0 ? '-' : '';
  if (e < -4 || e >= digits) {
    const m = (d[0] + '.' + d.slice(1)).replace(/\.?0*$/, '');
    return `${sign}${m}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
  }
  const s = e >= 0 ? d.slice(0, e + 1) + '.' + d.slice(e + 1) : '0.' + '0'.repeat(-e - 1) + d;
  return sign + s.replace(/\.?0*$/, '');
}

const DEFAULT_UNIT = { B: 'GB', 'B/s': 'GB/s' };
const FACTOR = { B: 1, kB: 1e3, MB: 1e6, GB: 1e9, TB: 1e12, PB: 1e15, GiB: 2 ** 30, 'B/s': 1, 'MB/s': 1e6, 'GB/s': 1e9, 'TB/s': 1e12, s: 1, ms: 1e-3, 'µs': 1e-6, min: 60, h: 3600 };
// units.AUTO_UNITS: the first unit whose rounded value stays under 1000 ("120 ms", "1.06 s", "0 ms").
const AUTO = { B: ['B', 'kB', 'MB', 'GB', 'TB', 'PB'], 'B/s': ['MB/s', 'GB/s', 'TB/s'], s: ['ms', 's', 'min', 'h'] };
const autoUnit = (x, base, digits = 3) => AUTO[base].find((u) => Math.abs(Number(trim(x / FACTOR[u], digits))) < 1000) || AUTO[base].at(-1);

// units.fmt: a value in base unit ('B', 'B/s', 's') shown in `unit` (default GB, GB/s; times by size).
function fmt(x, base, unit = null, digits = 3) {
  const u = unit || DEFAULT_UNIT[base] || autoUnit(x, base, digits);
  return `${trim(x / FACTOR[u], digits)} ${u}`;
}

// units.fmt_auto: the calculators' one format, in the unit the value's size calls for.
const fmtAuto = (x, base, digits = 3) => fmt(x, base, autoUnit(x, base, digits), digits);

// units.fmt_count: 6.738e9 -> "67.4 亿", 3.5e7 -> "3500 万".
function fmtCount(n, digits = 3) {
  const [size, name] = [[1e12, ' 万亿'], [1e8, ' 亿'], [1e4, ' 万'], [1, '']].find(([z], i, all) => Math.abs(n) >= z || i === all.length - 1);
  const x = n / size;
  return trim(x, Math.max(digits, String(Math.trunc(Math.abs(x))).length)) + name;
}
// Numbers and their units never part at a line end: "2 GB", "7 × 10⁹" get a no-break space (prose.keep_units).
const keepUnits = (t) => t.replace(/(\d) (?=[A-Za-zµ%×])|× (?=\d)/g, (m) => m.replace(' ', '\u00a0'));
const esc = (s) => String(s).replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`);
const pct = (x) => `${trim(100 * x)}%`;

// ---------------------------------------------------------------- validation

const span = (fd) => `${fd.min}${fd.min_open ? '（不含）' : ''} 到 ${fd.max}`;
// Quantity limits read as what they rule out (calculators.FIELDS: beyond them no real link, model or step).
const PLAUSIBLE = {
  grad: ['梯度', '真实模型的梯度'], bandwidth: ['带宽', '真实链路'], memory: ['显存', '真实的加速卡'],
  compute: ['计算时间', '一步训练的计算'], last_bucket: ['最后一个桶的通信', '一步训练里的通信'],
};

// A quantity field in SI units: "25 Gb/s" as typed, or a bare number in the select's (or the field's fixed) unit.
function quantityValue(fd, text, raw) {
  const select = FIELDS_BY_NAME[fd.unit];
  const unit = select ? String(raw[fd.unit] ?? select.default).trim() : fd.unit;
  if (NUM.test(text) && select && !select.options.includes(unit)) throw new Error(`单位只能选 ${select.options.join(' / ')}`);
  const x = parseQuantity(NUM.test(text) ? `${text} ${unit}` : text, fd.qty);
  const [noun, what] = PLAUSIBLE[fd.name], base = BASE[fd.qty];
  if (fd.min_open ? x <= fd.min : x < fd.min) {
    throw new Error(fd.min ? `${noun}小于 ${fmtAuto(fd.min, base)}，不像${what}` : `${noun}需要大于 0，收到 “${text}”`);
  }
  if (x > fd.max) throw new Error(`${noun}大于 ${fmtAuto(fd.max, base)}，不像${what}`);
  return x;
}

function checkNumber(text, fd) {
  if (!NUM.test(text)) throw new Error(text ? `需要一个数，收到 “${text}”` : '不能为空');
  const x = Number(text);
  const low = fd.min_open ? x <= fd.min : x < fd.min;
  if (!Number.isFinite(x) || low || x > fd.max) throw new Error(`需要在 ${span(fd)} 之间，收到 ${text}`);
  if (fd.kind === 'int' && !Number.isInteger(x)) throw new Error(`需要整数，收到 ${text}`);
  return x;
}

function fieldValue(fd, raw) {
  const text = String(raw[fd.name] ?? fd.default).trim();
  if (fd.kind === 'select') {
    if (!fd.options.includes(text)) throw new Error(`只能选 ${fd.options.join(' / ')}，收到 “${text}”`);
    return text;
  }
  if (fd.kind === 'list') {
    const items = text.split(LIST_SEP).filter(Boolean);
    if (!items.length) {
      if (fd.optional) return [];
      throw new Error('不能为空；用逗号或空格分隔，例如“2, 6”');
    }
    const values = items.map((t) => checkNumber(t, fd));
    const [lo, hi] = fd.options || [0, Infinity];
    if (values.length < lo || values.length > hi) throw new Error(`需要 ${lo} 到 ${hi} 个数（每个 rank 一个），收到 ${values.length} 个`);
    return values;
  }
  if (fd.kind === 'params') {
    const n = parseParams(text);
    if (n > fd.max) throw new Error(`参数个数太大（上限 ${fmtCount(fd.max)}），收到 “${text}”`);
    return n;
  }
  if (fd.kind === 'qty') return quantityValue(fd, text, raw);
  return checkNumber(text, fd);
}

// ---------------------------------------------------------------- formulas

function fsum(xs) {  // Neumaier summation, close to Python's math.fsum
  let s = 0, c = 0;
  for (const x of xs) {
    const t = s + x;
    c += Math.abs(s) >= Math.abs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  return s + c;
}
const isclose = (a, b, tol) => Math.abs(a - b) <= Math.max(tol * Math.max(Math.abs(a), Math.abs(b)), tol);

class FieldError extends Error {
  constructor(field, message) { super(message); this.field = field; }
}

function ringAllreduce(ranks, grad, bandwidth) {
  const send = grad * (2 * (ranks - 1) / ranks);
  if (bandwidth === 0 && send > 0) throw new FieldError('bandwidth', '有数据要发送时带宽必须大于 0');
  return {
    chunk: grad / ranks, rounds: 2 * (ranks - 1), send_per_rank: send, recv_per_rank: send,
    total_sent: send * ranks, lower_bound: bandwidth === 0 ? 0 : send / bandwidth,
  };
}

// Like steptime.step_time: only backward (backward_share of compute) can hide
// communication, and the last bucket (lastBucket seconds) is always exposed.
function stepTime(computeSingle, ranks, comm, overlap, backwardShare = 2 / 3, lastBucket = 0) {
  if (lastBucket > comm) throw new FieldError('last_bucket', '最后一个桶的通信不能超过全部通信时间');
  const per = computeSingle / ranks, backward = per * backwardShare;
  const hidden = Math.max(Math.min(comm * overlap, backward, comm - lastBucket), 0);
  const exposed = comm - hidden;
  const step = per + exposed;
  const speedup = computeSingle / step;
  return {
    compute_per_rank: per, backward, hidden_comm: hidden, exposed_comm: exposed, step, speedup,
    efficiency: speedup / ranks, comm_bound: exposed > per,
  };
}

// Like memory.zero_communication: bytes each rank sends per step (ideal ring).
const ZERO_COLLECTIVES = [[['ar', 'g']], [['rs', 'g'], ['ag', 'p']], [['rs', 'g'], ['ag', 'p']], [['ag', 'p'], ['ag', 'p'], ['rs', 'g']]];
function zeroCommunication(n, d, stage, pBytes, gBytes) {
  const half = (2 * (d - 1) / d) / 2;
  let total = 0, units = 0;
  for (const [c, what] of ZERO_COLLECTIVES[stage]) {
    const size = n * (what === 'g' ? gBytes : pBytes), factor = c === 'ar' ? 2 : 1;
    units += size * factor;
    total += size * factor * half;
  }
  return { send_per_rank: total, relative_to_ddp: gBytes ? units / (n * gBytes * 2) : null };
}

function pipelineSchedule(times, m) {
  const starts = [];
  times.forEach((t, i) => {
    const row = [];
    for (let j = 0; j < m; j++) {
      const readyInput = i ? starts[i - 1][j] + times[i - 1] : 0;
      const readyStage = j ? row[j - 1] + t : 0;
      row.push(Math.max(readyInput, readyStage));
    }
    starts.push(row);
  });
  const makespan = starts[times.length - 1][m - 1] + times[times.length - 1];
  let total = 0;
  for (const t of times) total += t;
  return {
    stage_times: times, starts, makespan, idle_per_stage: times.map((t) => makespan - m * t),
    schedule_idle_fraction: 1 - (m * total) / (times.length * makespan),
  };
}

const COMPUTE = {
  update(v) {
    const r = v.grads.length;
    const sum = fsum(v.grads), mean = sum / r;
    const agg = { mean, sum, mean_twice: mean / r }[v.reduction];
    const w = v.w0 - v.lr * agg, reference = v.w0 - v.lr * mean;
    return { ranks: r, aggregated_grad: agg, weights: Array(r).fill(w), reference, matches_reference: isclose(w, reference, 1e-12) };
  },
  ring(v) {
    const { grad, bandwidth } = v, r = ringAllreduce(v.ranks, grad, bandwidth);
    return { grad, bandwidth, ...r, ...stepTime(v.compute, v.ranks, r.lower_bound, v.overlap, v.backward_ratio / (1 + v.backward_ratio), v.last_bucket) };
  },
  zero(v) {
    const memory = v.memory;
    const n = v.params, d = v.dp;
    const rows = [0, 1, 2, 3].map((s) => {
      const param_state = (n * v.param_bytes) / (s >= 3 ? d : 1);
      const grad_state = (n * v.grad_bytes) / (s >= 2 ? d : 1);
      const optim_state = (n * v.optim_bytes) / (s >= 1 ? d : 1);
      const total = param_state + grad_state + optim_state;
      return { stage: s, param_state, grad_state, optim_state, total, fits: total <= memory, ...zeroCommunication(n, d, s, v.param_bytes, v.grad_bytes) };
    });
    const fit = rows.find((r) => r.fits);
    return { params: n, memory, rows, smallest_fitting_stage: fit ? fit.stage : null };
  },
  pipeline(v) {
    const p = v.stages, m = v.microbatches;
    const ms = v.stage_times.length ? v.stage_times : Array(p).fill(EQUAL_STAGE_MS);
    return {
      idle_fraction: (p - 1) / (m + p - 1), bubble_over_ideal: (p - 1) / m,
      ...pipelineSchedule(ms.map((t) => t / 1000), m),
    };
  },
  tp(v) {
    const t = v.tp;
    if (t > 1 && v.hidden % t) throw new FieldError('hidden', `hidden=${v.hidden} 不能被 tp=${t} 整除：张量并行要把矩阵均分`);
    const message = v.batch * v.seq * v.hidden * v.bytes_per_elem;
    const count = t > 1 ? 4 : 0;
    const per_layer = message * count, factor = (2 * (t - 1)) / t;
    return {
      message, allreduces_per_layer: count, per_layer, per_step: per_layer * v.layers,
      send_per_rank_per_layer: per_layer * factor, send_per_rank_per_step: per_layer * factor * v.layers,
    };
  },
};

// Validate the form strings of one calculator and compute. Returns {values, errors}
// (errors: field -> Chinese message, in field order) or {values, out}.
function evaluate(kind, raw = {}) {
  const values = {}, errors = {};
  for (const fd of FIELDS[kind]) {
    try { values[fd.name] = fieldValue(fd, raw); } catch (e) { errors[fd.name] = e.message; }
  }
  if (kind === 'pipeline' && !Object.keys(errors).length && values.stage_times.length && values.stage_times.length !== values.stages) {
    errors.stage_times = `给了 ${values.stage_times.length} 个阶段时间，但阶段数是 ${values.stages}；留空表示各阶段相等`;
  }
  if (Object.keys(errors).length) return { values, errors };
  try {
    return { values, out: COMPUTE[kind](values) };
  } catch (e) {
    return { values, errors: { [e.field || FIELDS[kind][0].name]: e.message } };
  }
}

const api = { FIELDS, EQUAL_STAGE_MS, NUM, fieldValue, parseQuantity, parseParams, trim, fmt, fmtAuto, fmtCount, keepUnits, esc, pct, FieldError, ringAllreduce, stepTime, zeroCommunication, pipelineSchedule, evaluate };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBModel = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
