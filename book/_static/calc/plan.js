// The plan builder: the JavaScript twin of parallel_budget.plan_budget / search_plans
// (model/plan.py, planterms.py, planreport.py; form in book/plan_vectors.py), held to them
// by tests/vectors/plan.json. Mounted on <div class="pb-calc" data-calc="plan">.
// Same arithmetic in the same order as Python, so both give the same doubles.
// Classic script (no ES module), so it also runs from file://; node loads it with require().
(function (root) {
'use strict';
const M = root.PBModel || require('./model.js');
const { esc, fmtAuto, pct, trim } = M;

const f = (name, kind, def, min = null, max = null, o = {}) => ({
  name, kind, default: def, min, max, min_open: !!o.open, options: o.options || null, unit: o.unit || null, optional: !!o.optional,
});
const YN = { options: ['yes', 'no'] };
const FIELDS = [
  f('layers', 'int', '32', 1, 1024), f('hidden', 'int', '4096', 1, 65536), f('heads', 'int', '32', 1, 1024),
  f('seq', 'int', '4096', 1, 131072), f('vocab', 'int', '32000', 1, 1000000), f('ffn', 'int', '11008', 1, 262144),
  f('gated', 'select', 'yes', null, null, YN), f('params', 'params', '', 0, 1e15, { open: 1, optional: 1 }),
  f('global_batch', 'int', '32', 1, 65536), f('micro_batch', 'int', '1', 1, 65536),
  f('dp', 'int', '16', 1, 4096), f('tp', 'int', '1', 1, 4096), f('pp', 'int', '1', 1, 4096),
  f('zero_stage', 'select', '2', null, null, { options: ['0', '1', '2', '3'] }),
  f('schedule', 'select', '1f1b', null, null, { options: ['1f1b', 'gpipe'] }),
  f('recompute', 'select', 'selective', null, null, { options: ['none', 'selective', 'full'] }),
  f('sequence_parallel', 'select', 'yes', null, null, YN),
  f('param_bytes', 'num', '2', 0, 64, { open: 1 }), f('grad_bytes', 'num', '2', 0, 64, { open: 1 }), f('optim_bytes', 'num', '12', 0, 64),
  f('devices_per_node', 'int', '8', 1, 1024),
  f('device_memory', 'num', '80', 0, 1e6, { open: 1, unit: 'memory_unit' }), f('memory_unit', 'select', 'GB', null, null, { options: ['GB', 'GiB'] }),
  f('intra_bw', 'num', '150', 0, 1e6, { open: 1, unit: 'intra_unit' }), f('intra_unit', 'select', 'GB/s', null, null, { options: ['GB/s', 'Gb/s'] }),
  f('inter_bw', 'num', '25', 0, 1e6, { open: 1, unit: 'inter_unit' }), f('inter_unit', 'select', 'GB/s', null, null, { options: ['GB/s', 'Gb/s'] }),
  f('latency', 'num', '10', 0, 1e6), f('peak_tflops', 'num', '312', 0, 1e6, { open: 1 }), f('mfu', 'num', '0.4', 0, 1, { open: 1 }),
  f('compute', 'num', '', 0, 1e7, { open: 1, optional: 1 }), f('overlap', 'num', '1', 0, 1), f('devices', 'int', '16', 1, 4096),
];
const SPLIT = ['dp', 'tp', 'pp', 'zero_stage', 'micro_batch'];
const BACKWARD_SHARE = 2 / 3, ACT = 2;
const ZERO = [[['all-reduce', 'g']], [['reduce-scatter', 'g'], ['all-gather', 'p']], [['reduce-scatter', 'g'], ['all-gather', 'p']],
  [['all-gather', 'p'], ['all-gather', 'p'], ['reduce-scatter', 'g']]];

function read(raw) {
  const v = {}, errors = {};
  for (const fd of FIELDS) {
    const t = String(raw[fd.name] ?? fd.default).trim();
    if (fd.optional && !t) { v[fd.name] = null; continue; }
    try { v[fd.name] = M.fieldValue(fd, { [fd.name]: t }); } catch (e) { errors[fd.name] = e.message; }
  }
  if (Object.keys(errors).length) return { v, errors };
  if (v.hidden % v.heads) errors.heads = `heads=${v.heads} 要整除 hidden=${v.hidden}`;
  if (v.heads % v.tp) errors.tp = `tp=${v.tp} 不能整除 heads=${v.heads}：每个 TP rank 要分到整数个注意力头`;
  if (v.layers % v.pp) errors.pp = `pp=${v.pp} 不能整除 layers=${v.layers}：每个阶段要分到整数层`;
  if (v.global_batch % (v.dp * v.micro_batch)) errors.micro_batch = `global_batch=${v.global_batch} 不是 dp×micro_batch=${v.dp}×${v.micro_batch} 的整数倍：全局 batch 要保持不变`;
  return { v, errors };
}

const layerParams = (h, ffn, gated) => 4.0 * h * h + (gated ? 3 : 2) * h * ffn;

// plan.settings: SI floats.
function settings(v) {
  const q = (n, u, k) => M.parseQuantity(`${v[n]} ${v[u]}`, k);
  const s = {
    layers: v.layers, hidden: v.hidden, heads: v.heads, seq: v.seq, vocab: v.vocab, ffn: v.ffn, gated: v.gated === 'yes',
    global_batch: v.global_batch, schedule: v.schedule, recompute: v.recompute, sequence_parallel: v.sequence_parallel === 'yes',
    param_bytes: v.param_bytes, grad_bytes: v.grad_bytes, optim_bytes: v.optim_bytes, devices_per_node: v.devices_per_node,
    device_memory: q('device_memory', 'memory_unit', 'bytes'), intra_bw: q('intra_bw', 'intra_unit', 'bandwidth'),
    inter_bw: q('inter_bw', 'inter_unit', 'bandwidth'), latency: v.latency * 1e-6, overlap: v.overlap, backward_share: BACKWARD_SHARE,
    compute_single: v.compute, peak_flops: v.peak_tflops * 1e12, mfu: v.mfu,
  };
  s.params = v.params !== null ? v.params : s.layers * layerParams(s.hidden, s.ffn, s.gated) + 2 * s.vocab * s.hidden;
  return s;
}

// activations.layer_activation_bytes (Korthikanti et al. 2022, Table 2): [stored, working].
function activations(s, b, h, a, t, sp, rc) {
  const sbh = s * b * h, core = 5 * a * s * s * b;
  const full = sp ? (34 * sbh + core) / t : sbh * (10 + 24 / t) + core / t;
  if (rc === 'none') return [full, 0.0];
  if (rc === 'selective') return [full - core / t, core / t];
  return [sp ? 2 * sbh / t : 2 * sbh, full];
}
const link = (stride, size, perNode) => (size === 1 || (stride * size <= perNode && perNode % (stride * size) === 0) ? 'intra' : 'inter');
const rounds = (c, r) => (c === 'all-reduce' ? 2 * (r - 1) : c === 'send' ? 1 : r - 1);
const alphaBeta = (calls, per, lat, sent, bw) => calls * per * lat + sent / bw;
const sum = (xs) => xs.reduce((a, x) => a + x, 0);

// plan._core: every number of one plan.
function core(s, dp, tp, pp, stage, mb) {
  const n = dp * tp * pp, m = Math.floor(s.global_batch / (dp * mb)), layers = s.layers / pp;
  const sp = s.sequence_parallel && tp > 1, shard = s.params / (tp * pp), lat = s.latency;
  const bw = { intra: s.intra_bw, inter: s.inter_bw };
  const ps = (shard * s.param_bytes) / (stage >= 3 ? dp : 1);
  const gs = (shard * s.grad_bytes) / (stage >= 2 ? dp : 1), os = (shard * s.optim_bytes) / (stage >= 1 ? dp : 1);
  const states = ps + gs + os;
  const [stored, working] = activations(s.seq, mb, s.hidden, s.heads, tp, sp, s.recompute);
  const flight = s.schedule === 'gpipe' ? m : Math.min(pp, m);
  const acts = stored * layers * flight;
  const gather = stage === 3 && dp > 1 ? 2 * layerParams(s.hidden, s.ffn, s.gated) / tp * s.param_bytes : 0.0;
  const total = states + acts + gather + working;
  const comm = [];
  if (dp > 1) {
    const lk = link(tp, dp, s.devices_per_node), half = (2 * (dp - 1) / dp) / 2;
    for (const [c, what] of ZERO[stage]) {
      const calls = stage === 3 ? layers * m : 1;
      const sent = shard * (what === 'g' ? s.grad_bytes : s.param_bytes) * (c === 'all-reduce' ? 2 : 1) * half * (stage === 3 ? m : 1);
      comm.push([`DP ${c}`, 'dp', dp, lk, calls, sent, alphaBeta(calls, rounds(c, dp), lat, sent, bw[lk]), true]);
    }
  }
  if (tp > 1) {
    const lk = link(1, tp, s.devices_per_node), calls = 4 * layers * m;
    const sent = (s.seq * mb * s.hidden * 2.0 * 4) * (2 * (tp - 1) / tp) * layers * m;
    comm.push([sp ? 'TP all-gather + reduce-scatter' : 'TP all-reduce', 'tp', tp, lk, calls, sent, alphaBeta(calls, rounds('all-reduce', tp), lat, sent, bw[lk]), false]);
  }
  if (pp > 1) {
    const lk = link(tp * dp, pp, s.devices_per_node), sent = 2 * m * mb * s.seq * s.hidden * ACT / (sp ? tp : 1);
    comm.push(['PP send/recv', 'pp', pp, lk, 2 * m, sent, alphaBeta(2 * m, 1, lat, sent, bw[lk]), false]);
  }
  const tokens = s.global_batch * s.seq, attention = 4.0 * s.layers * s.seq * s.hidden * tokens;
  const forward = 2.0 * s.params * tokens + attention, model = 3 * forward;
  const run = model + { none: 0.0, selective: attention, full: forward }[s.recompute];
  const ideal = s.compute_single !== null ? s.compute_single / n : model / (n * s.peak_flops * s.mfu);
  const compute = ideal * run / model;
  const dpTime = sum(comm.filter((c) => c[7]).map((c) => c[6]));
  const critical = sum(comm.filter((c) => !c[7]).map((c) => c[6]));
  const tpTime = sum(comm.filter((c) => c[1] === 'tp').map((c) => c[6]));
  const hidden = dpTime === 0 ? 0.0 : M.stepTime((stage === 3 ? compute : compute / m) * n, n, dpTime, s.overlap, s.backward_share).hidden_comm;
  const bubble = ((pp - 1) / m) * (compute + tpTime);
  const exposed = dpTime - hidden + critical, step = compute + exposed + bubble;
  return {
    params: s.params, microbatches: m, in_flight: flight,
    memory: { param_state: ps, grad_state: gs, optim_state: os, states, activations: acts, gather, working, temporary: gather + working, total },
    comm, compute, ideal, hidden_comm: hidden, exposed_comm: exposed, bubble, step, tokens_per_s: tokens / step, efficiency: ideal / step,
    fits: total <= s.device_memory,
  };
}

// planreport.overheads / verdict_codes.
function overheads(o) {
  const t = (g) => sum(o.comm.filter((c) => c[1] === g).map((c) => c[6]));
  const x = { dp: o.exposed_comm - sum(o.comm.filter((c) => !c[7]).map((c) => c[6])), tp: t('tp'), pp: t('pp'), bubble: o.bubble };
  for (const k in x) x[k] = Math.max(x[k], 0.0);
  return x;
}
function codes(o, tp) {
  const c = [o.fits ? 'fits' : 'too_big', 'batch', 'units', 'overlap'];
  if (tp > 1 && o.comm.some((x) => x[1] === 'tp' && x[3] === 'inter')) c.push('tp_inter');
  let worst = ['none', 0];
  for (const [k, v] of Object.entries(overheads(o))) if (v > worst[1]) worst = [k, v];
  c.push(`worst_${worst[0]}`);
  return c;
}

function* splits(s, n) {
  const div = (x) => { const d = []; for (let i = 1; i <= x; i++) if (x % i === 0) d.push(i); return d; };
  for (const tp of div(n)) {
    if (s.heads % tp) continue;
    for (const pp of div(n / tp)) {
      if (s.layers % pp) continue;
      const dp = n / (tp * pp);
      if (s.global_batch % dp) continue;
      for (const mb of div(s.global_batch / dp)) for (const st of dp > 1 ? [0, 1, 2, 3] : [0]) yield [dp, tp, pp, st, mb];
    }
  }
}

// search_plans: every split that fits, by (step, bytes sent, memory, split).
function search(s, n) {
  const found = [];
  let candidates = 0;
  for (const sp of splits(s, n)) {
    candidates++;
    const o = core(s, ...sp);
    if (o.fits) found.push([[o.step, sum(o.comm.map((c) => c[5])), o.memory.total, ...sp], sp, o]);
  }
  const cmp = (a, b) => { for (let i = 0; i < a[0].length; i++) if (a[0][i] !== b[0][i]) return a[0][i] < b[0][i] ? -1 : 1; return 0; };
  found.sort(cmp);
  return { candidates, plans: found.map(([, sp, o]) => [...sp, o.step, o.memory.total]) };
}

function evaluate(raw = {}, withSearch = false) {
  const { v, errors } = read(raw);
  if (Object.keys(errors).length) return { errors, values: v };
  const s = settings(v), split = SPLIT.map((k) => Number(v[k]));
  const out = core(s, ...split);
  out.codes = codes(out, split[1]);
  if (withSearch) out.search = search(s, v.devices);
  return { out, values: v, s, split };
}

// ---------------------------------------------------------------- view
const B = (x) => fmtAuto(x, 'B'), T = (x) => M.fmt(x, 's', Math.abs(x) >= 1 ? 's' : 'ms');  // like the chapter's t_
const LINK = { intra: '节点内', inter: '跨节点' };
const LABELS = {
  layers: '层数 L', hidden: '隐藏维度 h', heads: '注意力头数 a', seq: '序列长度 s', vocab: '词表大小', ffn: 'MLP 宽度',
  gated: '门控 MLP（SwiGLU）', params: '参数量（留空按形状推出）', global_batch: '全局 batch（序列数）', micro_batch: '微批次大小 b',
  dp: 'DP', tp: 'TP', pp: 'PP', zero_stage: 'ZeRO 阶段', schedule: '流水线调度', recompute: '重算', sequence_parallel: '序列并行',
  param_bytes: '参数（字节/参数）', grad_bytes: '梯度（字节/参数）', optim_bytes: '优化器（字节/参数）', devices_per_node: '每节点卡数',
  device_memory: '每卡显存', memory_unit: '显存单位', intra_bw: '节点内单向带宽', intra_unit: '节点内带宽单位',
  inter_bw: '跨节点单向带宽（每卡）', inter_unit: '跨节点带宽单位', latency: '每轮延迟 α（µs）', peak_tflops: '每卡峰值（TFLOP/s）',
  mfu: 'MFU（0 到 1）', compute: '实测单卡整步计算（s，可留空）', overlap: 'DP 通信可重叠比例', devices: '搜索用的卡数',
};
const rect = (x, y, w, h, fill, tip) => `<rect x="${x.toFixed(1)}" y="${y}" width="${Math.max(w, 0).toFixed(1)}" height="${h}" ${fill.startsWith('#') ? `fill="${fill}"` : `class="${fill}"`}><title>${esc(tip)}</title></rect>`;
const txt = (x, y, s, cls = '') => `<text x="${x.toFixed(1)}" y="${y}" class="${cls}">${esc(s)}</text>`;
const svg = (h, label, body) => `<svg class="pb-svg" viewBox="0 0 640 ${h}" role="img" aria-label="${esc(label)}">${body}</svg>`;

function stacked(y, parts, scale) {
  let x = 110, body = '';
  for (const [v, fill, name, fmtv] of parts) { body += rect(x, y, v * scale, 18, fill, `${name} ${fmtv(v)}`); x += v * scale; }
  return [body, x];
}
function memorySvg(o, mem) {
  const m = o.memory, scale = 500 / Math.max(m.total, mem, 1e-30);
  const parts = [[m.param_state, 'pb-p', '参数'], [m.grad_state, 'pb-g', '梯度'], [m.optim_state, 'pb-o', '优化器'],
    [m.activations, '#F0E442', '激活'], [m.temporary, '#999999', '临时']].map((p) => [...p, B]);
  const [body, end] = stacked(8, parts, scale);
  const mx = (110 + mem * scale).toFixed(1);
  const leg = parts.map(([, fill, name], i) => rect(110 + i * 100, 44, 12, 12, fill, name) + txt(126 + i * 100, 55, name)).join('');
  return svg(64, `每卡显存：占用 ${B(m.total)}，容量 ${B(mem)}`, txt(0, 22, '每卡显存') + body + txt(Math.min(end + 4, 560), 22, B(m.total), 'pb-small')
    + `<line x1="${mx}" x2="${mx}" y1="2" y2="32" class="pb-mark"/>` + txt(Math.min(+mx, 560), 40, `显存 ${B(mem)}`, 'pb-small') + leg);
}
function timelineSvg(o) {
  const ov = overheads(o), scale = 500 / Math.max(o.step, 1e-30);
  const [row1, end] = stacked(8, [[o.compute, 'pb-c', '计算', T], [ov.dp, 'pb-x', '暴露的 DP 通信', T], [ov.tp, 'pb-x', 'TP 通信', T],
    [ov.pp, 'pb-x', 'PP 通信', T], [o.bubble, '#999999', '气泡', T]], scale);
  const h0 = 110 + (o.compute - o.hidden_comm) * scale;
  return svg(86, `一步的时间线：计算 ${T(o.compute)}，暴露的通信 ${T(o.exposed_comm)}，气泡 ${T(o.bubble)}，步时 ${T(o.step)}`,
    txt(0, 22, '一步') + row1 + txt(Math.min(end + 4, 560), 22, T(o.step), 'pb-small') + txt(0, 48, '藏住的通信')
    + rect(h0, 34, o.hidden_comm * scale, 18, 'pb-h', `藏在反向后的 DP 通信 ${T(o.hidden_comm)}`)
    + [['pb-c', '计算'], ['pb-h', '被隐藏'], ['pb-x', '暴露的通信'], ['#999999', '气泡']].map(([c, n], i) => rect(110 + i * 110, 64, 12, 12, c, n) + txt(126 + i * 110, 75, n)).join(''));
}

const VERDICT = {
  fits: (o, s) => `放得下：每卡 ${B(o.memory.total)} ≤ 显存 ${B(s.device_memory)}（模型状态 ${B(o.memory.states)}，激活 ${B(o.memory.activations)}，临时 ${B(o.memory.temporary)}）。`,
  too_big: (o, s) => `放不下：每卡 ${B(o.memory.total)} > 显存 ${B(s.device_memory)}（模型状态 ${B(o.memory.states)}，激活 ${B(o.memory.activations)}，临时 ${B(o.memory.temporary)}）。`,
  batch: (o, s, p) => `全局 batch 不变：${s.global_batch} = dp ${p[0]} × micro_batch ${p[4]} × 微批次数 ${o.microbatches}。`,
  units: (o, s) => `带宽按字节读：节点内 ${fmtAuto(s.intra_bw, 'B/s')}（= ${trim(s.intra_bw * 8e-9, 4)} Gb/s），跨节点 ${fmtAuto(s.inter_bw, 'B/s')}（= ${trim(s.inter_bw * 8e-9, 4)} Gb/s）。`,
  overlap: (o) => `重叠：DP/ZeRO 通信 ${T(sum(o.comm.filter((c) => c[7]).map((c) => c[6])))} 中有 ${T(o.hidden_comm)} 藏在反向计算之后；TP、PP 通信和气泡都不重叠。`,
  tp_inter: (o, s, p) => `TP=${p[1]} 超出一个节点（每节点 ${s.devices_per_node} 卡），每层的 TP 通信只能走跨节点链路。`,
  worst_none: (o) => `步时 ${T(o.step)} 全是计算（效率 ${pct(o.efficiency)}）。`,
};
const WORST = { dp: '暴露的 DP/ZeRO 通信', tp: 'TP 通信', pp: 'PP 点对点通信', bubble: '流水线气泡' };
const sentence = (code, o, s, p) => (VERDICT[code] ? VERDICT[code](o, s, p)
  : `步时 ${T(o.step)}：计算 ${T(o.compute)}，最大的额外开销是${WORST[code.slice(6)]} ${T(overheads(o)[code.slice(6)])}；效率 ${pct(o.efficiency)}。`);
const ASSUME = ['激活按 Korthikanti 等（2022）每层公式（16 位、MLP 宽 4h），不含嵌入与 logits', '理想 ring + α-β 时间；跨节点 ring 按最慢链路计',
  '设备编号 TP 最内、DP 其次、PP 最外', '只有 DP/ZeRO 通信能藏在反向之后（反向占计算 2/3；DDP 与 ZeRO-1/2 只藏在最后一个微批次后）',
  'ZeRO-3 临时聚合按两层参数计；通信缓冲与碎片不计', '气泡 = (p−1)/m × 阶段计算；GPipe 与 1F1B 气泡相同'];

function control(fd) {
  const id = `pb-plan-${fd.name}`;
  const c = fd.kind === 'select'
    ? `<select id="${id}" name="${fd.name}">${fd.options.map((o) => `<option value="${o}">${{ yes: '是', no: '否' }[o] || o}</option>`).join('')}</select>`
    : `<input id="${id}" name="${fd.name}" type="text" autocomplete="off" spellcheck="false" aria-describedby="${id}-msg">`;
  return c;
}
const EXPORT_KEY = 'pb-plan-builder-v1';
let pending = 0;

function mount(el) {
  const units = new Set(FIELDS.map((x) => x.unit).filter(Boolean));
  el.innerHTML = '<p class="pb-title">方案构建器：显存、通信与步时</p><form class="pb-form" novalidate>' + FIELDS.filter((x) => !units.has(x.name)).map((fd) => {
    const u = fd.unit && FIELDS.find((x) => x.name === fd.unit);
    return `<div class="pb-field"><label for="pb-plan-${fd.name}">${LABELS[fd.name]}</label><span class="pb-row">${control(fd)}${u ? `<label class="pb-sr" for="pb-plan-${u.name}">${LABELS[u.name]}</label>${control(u)}` : ''}</span>`
      + [fd, u].filter(Boolean).map((x) => `<span class="pb-msg" id="pb-plan-${x.name}-msg" data-msg="${x.name}" aria-live="polite"></span>`).join('') + '</div>';
  }).join('') + '</form><div class="pb-status" aria-live="polite"></div><div class="pb-results"></div>'
    + '<div class="pb-actions"><button type="button" data-act="search">搜索所有切分</button><button type="button" data-act="send">送到记录页</button></div><p class="pb-status" data-out="sent" role="status"></p><div class="pb-search"></div>';
  const form = el.querySelector('form'), res = el.querySelector('.pb-results'), status = el.querySelector('.pb-status');
  const raw = () => Object.fromEntries(FIELDS.map((x) => [x.name, form.elements[x.name].value]));
  const hash = () => new URLSearchParams(location.hash.slice(1).includes('=') ? location.hash.slice(1) : '');
  let last = null;
  const update = () => {
    const r = evaluate(raw());
    for (const fd of FIELDS) {
      const msg = (r.errors || {})[fd.name] || '';
      el.querySelector(`[data-msg="${fd.name}"]`).textContent = msg && `${LABELS[fd.name]}:${msg}`;
      form.elements[fd.name].toggleAttribute('aria-invalid', !!msg);
    }
    if (r.errors) { status.textContent = '有输入需要修改（见红字提示），结果暂不显示。'; res.innerHTML = ''; last = null; return; }
    status.textContent = '';
    last = r;
    const o = r.out, m = o.memory;
    res.innerHTML = `<dl class="pb-out"><dt>每卡显存（状态 + 激活 + 临时）</dt><dd data-out="total">${B(m.states)} + ${B(m.activations)} + ${B(m.temporary)} = ${B(m.total)}</dd>`
      + `<dt>放得下吗</dt><dd data-out="fits">${o.fits ? '放得下' : '放不下'}</dd><dt>步时</dt><dd data-out="step">${T(o.step)}</dd>`
      + `<dt>计算 / 暴露的通信 / 气泡</dt><dd>${T(o.compute)} / ${T(o.exposed_comm)} / ${T(o.bubble)}</dd>`
      + `<dt>吞吐</dt><dd data-out="tokens">${Math.round(o.tokens_per_s).toLocaleString('en')} 词元/s</dd><dt>效率</dt><dd data-out="efficiency">${pct(o.efficiency)}</dd></dl>`
      + memorySvg(o, r.s.device_memory) + timelineSvg(o)
      + '<table class="pb-table"><thead><tr><th>集合通信</th><th>组大小</th><th>链路</th><th>每卡每步发送</th><th>时间</th><th>可藏在反向后</th></tr></thead><tbody>'
      + (o.comm.map((c) => `<tr><th scope="row">${esc(c[0])}</th><td>${c[2]}</td><td>${LINK[c[3]]}</td><td>${B(c[5])}</td><td>${T(c[6])}</td><td>${c[7] ? '是' : '否'}</td></tr>`).join('') || '<tr><td colspan="6">没有通信（单卡）</td></tr>')
      + `</tbody></table><ul class="pb-verdict" data-out="verdict">${o.codes.map((c) => `<li data-code="${c}">${esc(sentence(c, o, r.s, r.split))}</li>`).join('')}</ul>`
      + `<details><summary>模型的简化</summary><ul>${ASSUME.map((a) => `<li>${esc(a)}</li>`).join('')}</ul></details>`;
  };
  const restore = () => { const p = hash(); for (const fd of FIELDS) form.elements[fd.name].value = p.get(`plan.${fd.name}`) ?? fd.default; update(); };
  const onInput = () => {
    update();
    clearTimeout(pending);
    pending = setTimeout(() => { const p = hash(); for (const [k, v] of Object.entries(raw())) p.set(`plan.${k}`, v); history.replaceState(history.state, '', `#${p}`); }, 200);
  };
  form.addEventListener('input', onInput);
  form.addEventListener('change', onInput);
  form.addEventListener('submit', (e) => e.preventDefault());
  addEventListener('hashchange', () => { if ([...hash().keys()].some((k) => k.startsWith('plan.'))) restore(); });
  el.addEventListener('click', (e) => {
    const act = e.target.dataset && e.target.dataset.act;
    if (act === 'search') {
      if (!last) return;
      const t0 = performance.now(), r = search(last.s, last.values.devices), ms = performance.now() - t0;
      const box = el.querySelector('.pb-search');
      box.dataset.ms = ms.toFixed(2);
      box.innerHTML = `<p data-out="search">${last.values.devices} 张卡：试了 ${r.candidates} 种切分，放得下 ${r.plans.length} 种（用时 ${trim(ms)} ms）。前 10 名：</p>`
        + '<table class="pb-table"><thead><tr><th>DP</th><th>TP</th><th>PP</th><th>ZeRO</th><th>微批次</th><th>步时</th><th>每卡显存</th><th></th></tr></thead><tbody>'
        + r.plans.slice(0, 10).map((p) => `<tr>${p.slice(0, 5).map((x) => `<td>${x}</td>`).join('')}<td>${T(p[5])}</td><td>${B(p[6])}</td><td><button type="button" data-act="use" data-split="${p.slice(0, 5).join(',')}">采用</button></td></tr>`).join('')
        + '</tbody></table>';
    } else if (act === 'use') {
      e.target.dataset.split.split(',').forEach((x, i) => { form.elements[SPLIT[i]].value = x; });
      onInput();
    } else if (act === 'send' && last) {
      const o = last.out, m = o.memory, p = last.split;
      const numbers = [`DP=${p[0]}、TP=${p[1]}、PP=${p[2]}、ZeRO-${p[3]}，微批次 ${p[4]} × ${o.microbatches}`,
        `参数量 ${trim(o.params, 4)}；每卡显存 ${B(m.total)}（状态 ${B(m.states)}，激活 ${B(m.activations)}，临时 ${B(m.temporary)}）`,
        `步时 ${T(o.step)}：计算 ${T(o.compute)}，暴露的通信 ${T(o.exposed_comm)}，气泡 ${T(o.bubble)}；${Math.round(o.tokens_per_s).toLocaleString('en')} 词元/s，效率 ${pct(o.efficiency)}`,
        ...o.comm.map((c) => `${c[0]}（${c[2]} 卡，${LINK[c[3]]}）：每卡每步 ${B(c[5])}，${T(c[6])}`)];
      const rec = { format: 'pb-plan', version: 1, saved: new Date().toISOString(), link: location.href, inputs: raw(), numbers,
        assumptions: ASSUME, verdict: o.codes.map((c) => sentence(c, o, last.s, p)), fits: o.fits };
      const out = el.querySelector('[data-out="sent"]');
      try { localStorage.setItem(EXPORT_KEY, JSON.stringify(rec)); out.innerHTML = '已存入本浏览器。打开<a href="plan-record.html">并行方案与通信预算</a>，点“从方案构建器导入”。'; } catch (err) { out.textContent = `这个浏览器不允许本页保存（${err.name}）。`; }
    }
  });
  restore();
}

function mountAll(doc = document) { for (const el of doc.querySelectorAll('.pb-calc[data-calc="plan"]')) mount(el); }

const api = { FIELDS, EXPORT_KEY, evaluate, search, core, settings, read, activations, codes, sentence, mountAll };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBPlan = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
