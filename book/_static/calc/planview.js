// The plan builder's page: grouped form (presets, a hint per input, advanced folded), results, verdict,
// and three SVG drawings of plan.js's layouts (timeline, memory bar, scaling curve), drawn at the width
// of their box so chart text keeps its size on a phone. Mounted on <div class="pb-calc" data-calc="plan">.
// Adds mountAll to window.PBPlan (main.js calls it). Classic script; node requires it for EXPORT_KEY.
(function (root) {
'use strict';
const M = root.PBModel || require('./model.js');
const P = root.PBPlan || require('./plan.js');
const { esc, fmtAuto, fmtCount, pct, trim } = M;
const { FIELDS, PRESETS, SPLIT, CALIBRATION: NCCL, tfmt: T } = P;
const NC = root.PBNccl || require('./nccltests.js');
const STEP = NC.STEP.map((x) => x.name), CALIBRATION = [...NCCL, ...STEP];  // the box "用实测校准": not in the link
const EXPORT_KEY = 'pb-plan-builder-v1';
const B = (x) => fmtAuto(x, 'B');

const LABELS = {
  model: '模型预设', layers: '层数 L', hidden: '隐藏维度 h', heads: '注意力头数 a', seq: '序列长度 s', vocab: '词表大小',
  global_batch: '全局 batch（序列数）', micro_batch: '微批次大小 b', cluster: '集群预设', devices_per_node: '每节点卡数',
  device_memory: '每卡显存', memory_unit: '显存单位', intra_bw: '节点内单向带宽', intra_unit: '节点内带宽单位', inter_bw: '跨节点单向带宽（每卡）',
  inter_unit: '跨节点带宽单位', peak_tflops: '每卡峰值（TFLOP/s）', dp: 'DP', tp: 'TP', pp: 'PP', zero_stage: 'ZeRO 阶段', schedule: '流水线调度',
  virtual_stages: '虚拟阶段数 v', recompute: '重算', sequence_parallel: '序列并行', kv_heads: 'K、V 头组数', ffn: 'MLP 宽度', gated: '门控 MLP（SwiGLU）',
  dropout: 'dropout', flash_attention: 'FlashAttention', params: '参数量（留空按形状推出）', hfu: 'HFU（0 到 1）', latency: '每步延迟 α（µs）',
  bucket: '梯度桶（MiB）', param_bytes: '参数（字节/参数）', grad_bytes: '梯度（字节/参数）', optim_bytes: '优化器（字节/参数）', compute: '实测单卡整步计算（s）',
  overlap_grad_reduce: '梯度归约跟在反向后面', overlap_param_gather: '参数 all-gather 与下一步前向重叠', devices: '搜索用的卡数',
  grad_reduce_dtype: '梯度归约精度', hbm_bw: '显存带宽（GB/s）', optimizer_traffic: '优化器步读写（字节/参数）', logits: '计入最后一个阶段的 logits',
  dp_nccl: 'DP 组的 nccl-tests 输出', tp_nccl: 'TP 组的 nccl-tests 输出', measured_step: '实测步时（s）', measured_tokens: '实测吞吐（词元/s）',
};
const HINTS = {
  model: '选一个公开模型，下面的形状和训练选项按它填好；改动后变成“自定义”。', layers: 'Transformer 的层数。', hidden: '每个词元的向量维度。',
  heads: '注意力头数，要整除隐藏维度。', seq: '每条序列的词元数。', vocab: '只影响嵌入层和输出层的参数量。',
  global_batch: '一次参数更新用的序列数，每个切分都保持不变。', micro_batch: '每个微批次的序列数；每卡的微批次数 = 全局 batch ÷ (DP × b)。',
  cluster: '选一种节点，下面的显存、带宽和峰值按它填好（标称值）。', devices_per_node: '决定哪些通信组留在节点内的快链路上，以及跨节点的组在每个节点用几张网卡。',
  device_memory: '“80 GB”的卡是 80 GiB。', intra_bw: '节点内每卡单向有效带宽（如 NVLink）。', inter_bw: '每卡分到的网卡带宽（节点网卡总带宽 ÷ 每节点卡数）；网卡标称常写成 Gb/s，注意单位。',
  peak_tflops: '每卡 16 位矩阵乘的峰值，不含稀疏。', dp: '数据并行度：模型复制几份。', tp: '张量并行度：一层切给几张卡，最好在一个节点内。',
  pp: '流水线并行度：层分成几段。', zero_stage: '0 是 DDP；1 分优化器状态，2 再分梯度，3 再分参数。', schedule: '只在 PP > 1 时起作用。零气泡调度把反向拆成输入梯度（I）和权重梯度（W）两步。',
  virtual_stages: '交错式调度（1F1B 与零气泡）每个 rank 负责几段层；ZB-V 固定 2 段。', recompute: '反向时重算哪些激活：不重算、只重算注意力、整层重算。',
  sequence_parallel: 'TP 组内按序列切开逐词元的操作，激活再除以 TP。', kv_heads: 'GQA 的 K、V 头组数；等于头数就是普通多头注意力。',
  ffn: 'MLP 的中间宽度。', gated: 'SwiGLU 有三个矩阵，激活也多存两路。', dropout: '有 dropout 要多存掩码。',
  flash_attention: '不存 s×s 注意力矩阵的实现（FlashAttention 一类）。', params: '直接给参数量，如 7B。',
  hfu: '计算时的硬件 FLOPs 利用率，重算也按它算。', latency: '集合通信每一步（ring 的一轮）的延迟；NCCL 的代价模型约 3 到 10 µs。', bucket: 'PyTorch DDP 默认 25 MiB。',
  param_bytes: 'BF16 参数是 2。', grad_bytes: '留空按归约精度（bf16 是 2，fp32 是 4）。', optim_bytes: '混合精度 Adam 是 12。',
  compute: '一张卡算完整个全局 batch 的实测秒数（不重算）；填了就不用峰值和 HFU。', overlap_grad_reduce: '关掉时，反向结束才归约，计算等它。',
  overlap_param_gather: 'Megatron-LM 的 --overlap-param-gather，只对 ZeRO-1/2 起作用。', devices: '搜索时一共用几张卡。',
  grad_reduce_dtype: 'Megatron-LM 在 --bf16 下默认按 fp32 归约（--grad-reduce-in-bf16 才是 bf16），PyTorch DDP 在 AMP 下也是 fp32；fp32 的梯度多占显存、多发一倍。',
  hbm_bw: '每卡显存带宽（A100 40GB 1555，H100 SXM 3350）；优化器步按它算。', optimizer_traffic: '融合 Adam 每更新一个参数读写的字节数，约 28。',
  logits: '最后一个阶段为交叉熵存一个微批次的 logits（16 位加 fp32 副本）。',
  dp_nccl: '在 DP 组那些卡上跑 all_reduce_perf（DDP）或 reduce_scatter_perf / all_gather_perf（ZeRO），整段输出贴在这里：拟合出的 α 与总线带宽代替上面的标称值。不存进链接。',
  tp_nccl: '同上，TP 组（一般是一个节点内的卡）的 all_reduce_perf 输出。',
  measured_step: '训练时一步（整个全局 batch）的实测秒数：解出让模型给出这个步时的 HFU（pb.hfu_from_step），结论里 HFU 记为实测。不存进链接。',
  measured_tokens: '可不填；或只填它：每秒词元数，步时 = 全局 batch × 序列长度 ÷ 它。两者都填时要相差不到 2%。',
};
// Groups of inputs: [title, shown, folded inside the group]; the last group is folded as a whole.
const GROUPS = [['模型', ['model', 'seq'], ['layers', 'hidden', 'heads', 'vocab']], ['batch', ['global_batch', 'micro_batch'], []],
  ['集群', ['cluster', 'device_memory', 'inter_bw'], ['devices_per_node', 'intra_bw', 'peak_tflops', 'hbm_bw']],
  ['方案', ['dp', 'tp', 'pp', 'zero_stage', 'recompute'], ['schedule', 'virtual_stages', 'sequence_parallel']],
  ['高级', ['kv_heads', 'ffn', 'gated', 'dropout', 'flash_attention', 'params', 'hfu', 'latency', 'bucket', 'param_bytes', 'grad_bytes',
    'optim_bytes', 'compute', 'overlap_grad_reduce', 'overlap_param_gather', 'grad_reduce_dtype', 'optimizer_traffic', 'logits'], []]];
const SUB = { 模型: '模型形状', 集群: '节点内带宽、每节点卡数、峰值、显存带宽', 方案: '流水线调度与序列并行' };
const OPTION = { bf16: 'bf16', fp32: 'fp32', yes: '是', no: '否', custom: '自定义', none: '不重算', selective: '选择性', full: '完全', gpipe: 'GPipe', '1f1b': '1F1B', interleaved: '交错式 1F1B',
  interleaved_zb: '交错式零气泡（ZB-1P）', zbv: '零气泡 ZB-V' };
const LINK = { intra: '节点内', inter: '跨节点' };
const byName = Object.fromEntries(FIELDS.map((x) => [x.name, x]));

// ---------------------------------------------------------------- SVG
const svg = (w, h, label, body) => `<svg class="pb-svg" width="${w}" height="${h}" viewBox="0 0 ${w} ${h}" role="img" aria-label="${esc(label)}">${body}</svg>`;
const rect = (x, y, w, h, cls, tip) => `<rect x="${x.toFixed(1)}" y="${y}" width="${Math.max(w, 0.8).toFixed(1)}" height="${h}" class="${cls}">${tip ? `<title>${esc(tip)}</title>` : ''}</rect>`;
const text = (x, y, s, cls = '', anchor = 'start') => `<text x="${x.toFixed(1)}" y="${y}" class="${cls}" text-anchor="${anchor}">${esc(s)}</text>`;
const niceStep = (x) => { const e = 10 ** Math.floor(Math.log10(x)), m = x / e; return (m > 5 ? 10 : m > 2 ? 5 : m > 1 ? 2 : 1) * e; };
const BLOCK = { F: 'pb-f', B: 'pb-b', W: 'pb-w', C: 'pb-f', O: 'pb-wk', dp: 'pb-cm', pp: 'pb-cm', tp: 'pb-ex' };

function timelineSvg(L, width) {
  const left = L.lanes.some((l) => l.label.startsWith('rank')) ? 84 : 40, w = width - left - 8, sx = w / (L.step || 1);
  const ys = [];
  let y = 4;
  for (const l of L.lanes) { ys.push(y); y += l.stream === 'compute' ? 22 : 16; }
  const h = y + 26, unit = L.step >= 1 ? 1 : 1e-3, tick = niceStep(L.step / Math.max(2, Math.floor(w / 90)));
  let body = L.lanes.map((l, i) => text(left - 4, ys[i] + (l.stream === 'compute' ? 14 : 11), l.label, 'pb-small', 'end')).join('');
  for (const m of L.marks) if (m.kind === 'idle') body += rect(left + m.start * sx, ys[m.lane], (m.end - m.start) * sx, 18, 'pb-id', m.title);
  for (const b of L.blocks) {
    const comp = L.lanes[b.lane].stream === 'compute', bh = comp ? 18 : 12, bw = (b.end - b.start) * sx;
    body += rect(left + b.start * sx, ys[b.lane], bw, bh, BLOCK[b.kind], b.title);
    if (b.label && bw > 26) body += text(left + b.start * sx + bw / 2, ys[b.lane] + (comp ? 13 : 10), b.label, 'pb-in', 'middle');
  }
  for (const m of L.marks) if (m.kind === 'exposed') body += rect(left + m.start * sx, ys[m.lane] + 6, (m.end - m.start) * sx, 8, 'pb-ex pb-hatch', m.title);
  for (let t = 0; t <= L.step * 1.0001; t += tick) {
    const x = left + t * sx;
    body += `<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${y}" y2="${y + 4}" class="pb-axis"/>` + text(x, y + 16, trim(t / unit, 3), 'pb-small', t ? 'middle' : 'start');
  }
  body += text(width - 2, y + 16, unit === 1 ? 's' : 'ms', 'pb-small', 'end');
  return svg(width, h, `一步的时间线：步时 ${T(L.step)}，斜线是暴露的通信，灰色是等待`, body);
}
const MEMCLS = { param_state: 'pb-p', grad_state: 'pb-g', optim_state: 'pb-o', activations: 'pb-ac', gather: 'pb-tm', working: 'pb-wk', logits: 'pb-ex' };
function memorySvg(L, width) {
  const w = width - 8, sx = w / Math.max(L.total, L.capacity, 1e-30);
  let x = 4, body = '';
  for (const p of L.parts) { body += rect(x, 18, p.bytes * sx, 22, MEMCLS[p.key], `${p.label} ${B(p.bytes)}`); x += p.bytes * sx; }
  const cx = 4 + L.capacity * sx;
  body += `<line x1="${cx.toFixed(1)}" x2="${cx.toFixed(1)}" y1="12" y2="46" class="pb-mark"/>`;
  body += text(Math.min(cx, width - 4), 11, `显存 ${B(L.capacity)}`, 'pb-small', cx > width * 0.7 ? 'end' : 'middle');
  body += text(4, 60, `共 ${B(L.total)}（${L.fits ? '放得下' : '放不下'}）`, 'pb-small');
  return svg(width, 66, `每卡显存 ${B(L.total)}，显存 ${B(L.capacity)}`, body);
}
function scalingSvg(L, width) {
  const pts = L.points, byDev = L.over === 'devices', left = 40, w = width - left - 12, top = 18, h = 150;
  const lx = pts.map((p) => Math.log2(p.x)), lo = Math.min(...lx), hi = Math.max(...lx), x = (v) => left + (hi > lo ? (v - lo) / (hi - lo) : 0.5) * w;
  const ys = pts.map((p) => Math.log2(Math.max(p.speedup, 1e-9))), yl = Math.min(...ys, byDev ? lo : Infinity), yh = Math.max(...ys, byDev ? hi : -Infinity);
  const y = (v) => top + h - (yh > yl ? (v - yl) / (yh - yl) : 0.5) * h;
  let body = `<line x1="${left}" x2="${left}" y1="${top}" y2="${top + h}" class="pb-axis"/><line x1="${left}" x2="${left + w}" y1="${top + h}" y2="${top + h}" class="pb-axis"/>`;
  if (byDev) body += `<polyline points="${pts.map((p) => `${x(Math.log2(p.x)).toFixed(1)},${y(Math.log2(p.x)).toFixed(1)}`).join(' ')}" class="pb-ideal"/>`;
  body += `<polyline points="${pts.map((p, i) => `${x(lx[i]).toFixed(1)},${y(ys[i]).toFixed(1)}`).join(' ')}" class="pb-line"/>`;
  pts.forEach((p, i) => {
    const label = byDev ? `${p.devices} 卡` : M.fmt(p.x, 'B/s');
    body += `<circle cx="${x(lx[i]).toFixed(1)}" cy="${y(ys[i]).toFixed(1)}" r="5" class="${p.fits ? 'pb-dot' : 'pb-dot pb-hollow'}"><title>${esc(`${label}：加速比 ${trim(p.speedup)} 倍，效率 ${pct(p.efficiency)}${p.fits ? '' : '（放不下）'}`)}</title></circle>`;
    body += text(x(lx[i]), top + h + 16, byDev ? String(p.devices) : trim(p.x / 1e9), 'pb-small', 'middle');
    const px = x(lx[i]), at = px > width - 30 ? 'end' : 'middle';
    if (i === pts.length - 1 || i === 0 || w / pts.length > 46) body += text(at === 'end' ? width - 2 : px, y(ys[i]) - 9, pct(p.efficiency), 'pb-small', at);
  });
  body += text(left - 4, top + 4, `${trim(pts.reduce((a, p) => Math.max(a, p.speedup), 0))}×`, 'pb-small', 'end');
  body += text(left + w, top + h + 32, byDev ? '卡数' : '跨节点带宽，每卡（GB/s）', 'pb-small', 'end');
  return svg(width, top + h + 38, `加速比与效率随${byDev ? '卡数' : '跨节点带宽'}变化`, body);
}

// Exposed DP gradient communication against tokens per microbatch (log₂ axis), the threshold dashed.
function overlapSvg(L, width, mine) {
  const left = 48, w = width - left - 12, top = 14, h = 130, ts = L.tokens, ex = L.exposed.map((x) => x * 1e3);
  const lo = Math.log2(ts[0]), hi = Math.log2(ts[ts.length - 1]), top1 = Math.max(...ex, 1e-9);
  const x = (t) => left + (Math.log2(t) - lo) / (hi - lo || 1) * w, y = (v) => top + h - v / top1 * h;
  let body = `<line x1="${left}" x2="${left}" y1="${top}" y2="${top + h}" class="pb-axis"/><line x1="${left}" x2="${left + w}" y1="${top + h}" y2="${top + h}" class="pb-axis"/>`;
  body += `<polyline points="${ts.map((t, i) => `${x(t).toFixed(1)},${y(ex[i]).toFixed(1)}`).join(' ')}" class="pb-line"/>`;
  const tx = x(L.threshold);
  body += `<line x1="${tx.toFixed(1)}" x2="${tx.toFixed(1)}" y1="${top}" y2="${top + h}" class="pb-mark"/>` + text(Math.min(tx + 3, width - 2), top + 10, `阈值 ${Math.round(L.threshold).toLocaleString('en')}`, 'pb-small', tx > width * 0.7 ? 'end' : 'start');
  if (mine >= ts[0] && mine <= ts[ts.length - 1]) body += `<circle cx="${x(mine).toFixed(1)}" cy="${(top + h).toFixed(1)}" r="5" class="pb-dot"><title>本方案：每个微批次 ${mine} 个词元</title></circle>`;
  for (let k = Math.ceil(lo); k <= Math.floor(hi); k++) body += text(x(2 ** k), top + h + 15, (2 ** k).toLocaleString('en'), 'pb-small', 'middle');
  body += text(left - 4, top + 8, `${trim(top1, 3)}`, 'pb-small', 'end') + text(left - 4, top + h, '0', 'pb-small', 'end');
  body += text(left + w, top + h + 31, '每个微批次的词元数（每卡）', 'pb-small', 'end') + text(2, top - 2, 'ms', 'pb-small');
  return svg(width, top + h + 37, `暴露的梯度通信随每个微批次的词元数变化，阈值 ${Math.round(L.threshold)} 个词元`, body);
}
// Drawn only while its box is open: the sweep prices 25 timelines (up to a second for long pipelines).
const overlapShell = (r, open) => (r.split[0] > 1 ? `<details class="pb-overlap"${open ? ' open' : ''}><summary>DP 通信藏得住吗：阈值与时间线（点开计算）</summary><div data-out="overlap"></div></details>` : '');
function overlapHtml(r, width) {
  const L = NC.overlapLayout(P.core, r.s, r.split), mine = r.split[4] * r.s.seq;
  return `${overlapSvg(L, width, mine)}`
    + `<p class="pb-note" data-out="threshold">一行算式给出的阈值是每个微批次 ${Math.round(L.threshold).toLocaleString('en')} 个词元（峰值 × HFU ÷ DP 组带宽 × 每参数发送字节 ÷ 反向每参数每词元 FLOPs，计入 α 与注意力）；本方案是 ${mine.toLocaleString('en')} 个，${mine > L.threshold ? '在阈值之上，梯度通信能藏在反向后面' : '在阈值之下，梯度通信会暴露'}。曲线只改序列长度，每一点排一次时间线；ZeRO-1/2 步末的参数 all-gather 不在其中。TP 通信按不开 --tp-comm-overlap 的 Megatron-LM 计，全部暴露。</p>`;
}

// ---------------------------------------------------------------- form
function control(fd) {
  const id = `pb-plan-${fd.name}`, hint = HINTS[fd.name] ? ` aria-describedby="${id}-hint ${id}-msg"` : ` aria-describedby="${id}-msg"`;
  return fd.kind === 'select'
    ? `<select id="${id}" name="${fd.name}"${hint}>${fd.options.map((o) => `<option value="${o}">${OPTION[o] || o}</option>`).join('')}</select>`
    : `<input id="${id}" name="${fd.name}" type="text" inputmode="${fd.kind === 'int' ? 'numeric' : 'decimal'}" autocomplete="off" spellcheck="false"${hint}>`;
}
function field(name) {
  const fd = byName[name], u = fd.unit && byName[fd.unit];
  return `<div class="pb-field"><label for="pb-plan-${name}">${LABELS[name]}</label><span class="pb-row">${control(fd)}`
    + (u ? `<label class="pb-sr" for="pb-plan-${u.name}">${LABELS[u.name]}</label>${control(u)}` : '') + '</span>'
    + (HINTS[name] ? `<span class="pb-hint" id="pb-plan-${name}-hint">${esc(HINTS[name])}</span>` : '')
    + [fd, u].filter(Boolean).map((x) => `<span class="pb-msg" id="pb-plan-${x.name}-msg" data-msg="${x.name}" aria-live="polite"></span>`).join('') + '</div>';
}
function calibrationHtml() {
  return '<details class="pb-group"><summary>用实测校准（nccl-tests 的输出、实测步时）</summary><div class="pb-form">'
    + CALIBRATION.map((name) => `<div class="pb-field"><label for="pb-plan-${name}">${LABELS[name]}</label>`
      + (STEP.includes(name) ? `<input id="pb-plan-${name}" name="${name}" type="text" inputmode="decimal" autocomplete="off" spellcheck="false"`
        : `<textarea id="pb-plan-${name}" name="${name}" rows="4" spellcheck="false" autocomplete="off"`) + ` aria-describedby="pb-plan-${name}-hint pb-plan-${name}-msg">${STEP.includes(name) ? '' : '</textarea>'}`
      + `<span class="pb-hint" id="pb-plan-${name}-hint">${esc(HINTS[name])}</span><span class="pb-msg" id="pb-plan-${name}-msg" data-msg="${name}" aria-live="polite"></span></div>`).join('')
    + '</div></details>';
}
function formHtml() {
  return GROUPS.map(([title, names, more], i) => {
    const inner = `<div class="pb-form">${names.map(field).join('')}</div>`
      + (more.length ? `<details class="pb-sub"><summary>${SUB[title]}</summary><div class="pb-form">${more.map(field).join('')}</div></details>` : '');
    return i === GROUPS.length - 1 ? `<details class="pb-group"><summary>${title}（点开调整）</summary>${inner}</details>`
      : `<fieldset class="pb-group"><legend>${title}</legend>${inner}</fieldset>`;
  }).join('') + calibrationHtml();
}

function numbers(r) {
  const o = r.out, m = o.memory, p = r.split;
  return [`DP=${p[0]}、TP=${p[1]}、PP=${p[2]}、ZeRO-${p[3]}，微批次 ${p[4]} × ${o.microbatches}`,
    `参数量 ${fmtCount(o.params, 4)}；每卡显存 ${B(m.total)}（状态 ${B(m.states)}，激活 ${B(m.activations)}，临时缓冲 ${B(m.gather)}，重算工作区 ${B(m.working)}）`,
    `步时 ${T(o.step)}：计算 ${T(o.compute)}，暴露的通信 ${T(o.exposed_comm)}，气泡 ${T(o.bubble)}；${Math.round(o.tokens_per_s).toLocaleString('en')} 词元/s，效率 ${pct(o.efficiency)}`
      + (o.mfu !== null ? `，MFU ${pct(o.mfu)}，HFU ${pct(o.hfu)}` : ''),
    ...o.comm.map((c) => `${c[0]}（${c[1]}，${c[3]} 卡，${LINK[c[4]]}）：每卡每步 ${B(c[6])}，${c[5]} 次，${T(c[8])}，暴露 ${T(c[9])}`)];
}
function resultsHtml(r, width, axis) {
  const o = r.out, m = o.memory, L = P.layouts(r), scaling = axis === 'devices' ? L.scaling : P.scaling(r.s, r.split, 'inter_bw');
  const dl = [['每卡显存', 'total', `${B(m.total)}（${o.fits ? '放得下' : '放不下'}）`], ['步时', 'step', T(o.step)],
    ['计算 / 暴露的通信 / 气泡', '', `${T(o.compute)} / ${T(o.exposed_comm)} / ${T(o.bubble)}`],
    ['其中优化器步', 'optimizer', T(o.optimizer)],
    ['吞吐', 'tokens', `${Math.round(o.tokens_per_s).toLocaleString('en')} 词元/s`],
    ['效率 / MFU / HFU', 'efficiency', `${pct(o.efficiency)}${o.mfu !== null ? ` / ${pct(o.mfu)} / ${pct(o.hfu)}` : ''}`]];
  const f = r.fit;  // hfu_from_step: the HFU (the model's input) that reproduces the measured step, and the MFU
  if (f) dl.push(['实测步时 → HFU / MFU', 'hfu_fit', `${T(f.step)} → <span data-hfu="${f.hfu}">${pct(f.hfu)}</span> / <span data-mfu="${f.mfu}">${pct(f.mfu)}</span>`]);
  const legend = (items) => `<p class="pb-legend">${items.map(([c, n]) => `<span><i class="${c}"></i>${n}</span>`).join('')}</p>`;
  return `<dl class="pb-out">${dl.map(([t, k, v]) => `<dt>${t}</dt><dd${k ? ` data-out="${k}"` : ''}>${v}</dd>`).join('')}</dl>`
    + `<ul class="pb-verdict" data-out="verdict">${o.codes.map((c) => `<li data-code="${c}">${esc(P.sentence(c, o, r.s))}</li>`).join('')}</ul>`
    + `<h4 class="pb-h">一步的时间线（悬停或长按看时长）</h4>${timelineSvg(L.timeline, width)}`
    + legend([['pb-f', '前向'], ...(L.timeline.blocks.some((b) => b.kind === 'W') ? [['pb-b', '输入梯度 I'], ['pb-w', '权重梯度 W']] : [['pb-b', '反向']]),
      ['pb-wk', '优化器步'], ['pb-cm', '通信'], ['pb-ex pb-hatch', '暴露的通信'], ['pb-id', '等待（气泡）']])
    + `<h4 class="pb-h">每卡显存</h4>${memorySvg(L.memory, width)}`
    + legend(L.memory.parts.map((p) => [MEMCLS[p.key], `${p.label} ${B(p.bytes)}`]))
    + `<h4 class="pb-h">扩展：加速比与效率</h4><div class="pb-actions" role="radiogroup" aria-label="横轴">`
    + [['devices', '横轴：卡数'], ['inter_bw', '横轴：跨节点带宽']].map(([k, n]) => `<button type="button" data-act="axis" data-axis="${k}" aria-pressed="${axis === k}">${n}</button>`).join('')
    + `</div>${scalingSvg(scaling, width)}<p class="pb-note">加速比以一张卡只做模型计算为基准（那张卡放不下，只是理想的基准）；空心点放不下。</p>`
    + overlapShell(r, overlapOpen)
    + '<div class="pb-scroll" tabindex="0" role="region" aria-label="各次集合通信（表格可左右滚动）"><table class="pb-table"><thead><tr><th>集合通信</th><th>搬运</th><th>组大小</th><th>链路</th><th>每卡每步</th><th>次数</th><th>时间</th><th>暴露</th></tr></thead><tbody>'
    + (o.comm.map((c) => `<tr><th scope="row">${esc(c[0])}</th><td>${esc(c[1])}</td><td>${c[3]}</td><td>${LINK[c[4]]}</td><td>${B(c[6])}</td><td>${c[5]}</td><td>${T(c[8])}</td><td>${T(c[9])}</td></tr>`).join('') || '<tr><td colspan="8">没有通信（单卡）</td></tr>')
    + `</tbody></table></div><details><summary>模型的简化</summary><ul>${P.assumptions(o, r.s).map((a) => `<li>${esc(a)}</li>`).join('')}</ul></details>`;
}

let pending = 0, overlapOpen = false;
function mount(el) {
  el.innerHTML = '<p class="pb-title">方案构建器：显存、通信与一步的时间线</p><form class="pb-plan-form" novalidate>' + formHtml() + '</form>'
    + '<div class="pb-status" aria-live="polite"></div><div class="pb-results"></div>'
    + `<div class="pb-actions pb-search-row">${field('devices')}`
    + '<button type="button" data-act="search">搜索所有切分</button><button type="button" data-act="send">送到记录页</button></div>'
    + '<p class="pb-status" data-out="sent" role="status"></p><div class="pb-search"></div>';
  const form = el.querySelector('form'), res = el.querySelector('.pb-results'), status = el.querySelector('.pb-status');
  const input = (name) => el.querySelector(`[name="${name}"]`);
  const raw = () => Object.fromEntries(FIELDS.map((x) => [x.name, input(x.name).value]));
  const rawAll = () => Object.assign(raw(), Object.fromEntries(CALIBRATION.map((n) => [n, input(n).value])));
  const hash = () => new URLSearchParams(location.hash.slice(1).includes('=') ? location.hash.slice(1) : '');
  let last = null, axis = 'devices', width = 0, seen = '';
  const update = () => {
    seen = JSON.stringify(rawAll());
    const r = P.evaluate(rawAll());
    for (const name of [...FIELDS.map((fd) => fd.name), ...CALIBRATION]) {
      const msg = (r.errors || {})[name] || '';
      el.querySelector(`[data-msg="${name}"]`).textContent = msg && `${LABELS[name]}：${msg}`;
      input(name).toggleAttribute('aria-invalid', !!msg);
    }
    const bad = Object.keys(r.errors || {});
    for (const d of el.querySelectorAll('form details')) if (bad.some((n) => d.querySelector(`[name="${n}"]`))) d.open = true;
    if (r.errors) { status.textContent = '有输入需要修改（见红字提示），结果暂不显示。'; res.innerHTML = ''; last = null; return; }
    status.textContent = '';
    last = r;
    width = Math.max(280, Math.min(res.clientWidth || 640, 760));
    res.innerHTML = resultsHtml(r, width, axis);
    if (overlapOpen) drawOverlap();
  };
  const drawOverlap = () => { const box = res.querySelector('[data-out="overlap"]'); if (box && last) box.innerHTML = overlapHtml(last, width); };
  el.addEventListener('toggle', (e) => {
    if (!e.target.classList || !e.target.classList.contains('pb-overlap')) return;
    overlapOpen = e.target.open;
    if (overlapOpen) drawOverlap();
  }, true);
  const preset = (kind) => {
    const p = PRESETS[kind][input(kind).value];
    if (p) for (const [k, v] of Object.entries(p)) input(k).value = v;
  };
  const matchPreset = () => {
    for (const kind of ['model', 'cluster']) {
      const hit = Object.entries(PRESETS[kind]).find(([, p]) => Object.entries(p).every(([k, v]) => input(k).value.trim() === v));
      input(kind).value = hit ? hit[0] : 'custom';
    }
  };
  const restore = () => {
    const p = hash();
    for (const fd of FIELDS) input(fd.name).value = p.get(`plan.${fd.name}`) ?? fd.default;
    update();
  };
  const save = () => {
    clearTimeout(pending);
    pending = setTimeout(() => { const p = hash(); for (const [k, v] of Object.entries(raw())) p.set(`plan.${k}`, v); history.replaceState(history.state, '', `#${p}`); }, 200);
  };
  const onInput = (e) => {
    const name = e && e.target && e.target.name;
    if (JSON.stringify(rawAll()) === seen) return;  // a change event after input (a field left): keep the drawings
    if (name === 'model' || name === 'cluster') preset(name); else if (name && !CALIBRATION.includes(name)) matchPreset();
    update();
    if (!CALIBRATION.includes(name)) save();
  };
  el.addEventListener('input', onInput);
  el.addEventListener('change', onInput);
  form.addEventListener('submit', (e) => e.preventDefault());
  addEventListener('hashchange', () => { if ([...hash().keys()].some((k) => k.startsWith('plan.'))) restore(); });
  addEventListener('resize', () => { if (last && Math.abs(Math.min(res.clientWidth, 760) - width) > 8) update(); });
  el.addEventListener('click', (e) => {
    const t = e.target.closest('button');
    const act = t && t.dataset.act;
    if (act === 'axis') { axis = t.dataset.axis; update(); } else if (act === 'search') {
      if (!last) return;
      const t0 = performance.now(), r = P.search(last.s, last.values.devices), ms = performance.now() - t0;
      const box = el.querySelector('.pb-search');
      box.dataset.ms = ms.toFixed(2);
      box.innerHTML = `<p data-out="search">${last.values.devices} 张卡：试了 ${r.candidates} 种切分，放得下 ${r.fits} 种（用时 ${trim(ms)} ms）。最快的 ${r.plans.length} 种：</p>`
        + '<div class="pb-scroll" tabindex="0" role="region" aria-label="搜索到的方案（表格可左右滚动）"><table class="pb-table"><thead><tr><th>DP</th><th>TP</th><th>PP</th><th>ZeRO</th><th>微批次</th><th>步时</th><th>每卡显存</th><th></th></tr></thead><tbody>'
        + r.plans.map((p) => `<tr>${p.slice(0, 5).map((x) => `<td>${x}</td>`).join('')}<td>${T(p[5])}</td><td>${B(p[6])}</td><td><button type="button" data-act="use" data-split="${p.slice(0, 5).join(',')}">采用</button></td></tr>`).join('')
        + '</tbody></table></div>';
    } else if (act === 'use') {
      t.dataset.split.split(',').forEach((x, i) => { input(SPLIT[i]).value = x; });
      update();
      save();
      res.scrollIntoView({ block: 'start' });
    } else if (act === 'send' && last) {
      const o = last.out;
      const rec = { format: 'pb-plan', version: 1, saved: new Date().toISOString(), link: location.href, inputs: raw(), numbers: numbers(last),
        assumptions: P.assumptions(o, last.s), verdict: o.codes.map((c) => P.sentence(c, o, last.s)), fits: o.fits };
      const out = el.querySelector('[data-out="sent"]');
      try { localStorage.setItem(EXPORT_KEY, JSON.stringify(rec)); out.innerHTML = '已存入本浏览器。打开<a href="plan-record.html">并行方案与通信预算</a>，点“从方案构建器导入”。'; } catch (err) { out.textContent = `这个浏览器不允许本页保存（${err.name}）。`; }
    }
  });
  restore();
}

function mountAll(doc = document) { for (const el of doc.querySelectorAll('.pb-calc[data-calc="plan"]')) mount(el); }

const api = { EXPORT_KEY, LABELS, HINTS, GROUPS, mount, mountAll, numbers, timelineSvg, memorySvg, scalingSvg, overlapSvg };
if (typeof module === 'object' && module.exports) module.exports = api;
else { root.PBPlanView = api; if (root.PBPlan) root.PBPlan.mountAll = mountAll; }
})(typeof globalThis !== 'undefined' ? globalThis : this);
