// Renders a calculator into every <div class="pb-calc" data-calc="KIND">.
// The maths is in model.js; this file only builds forms, outputs and SVG,
// and keeps the inputs in the URL hash ("#ring.ranks=8&ring.grad=4").
// Classic script (no ES module), so it also runs from file://; node loads it with require().
(function (root) {
'use strict';
const { FIELDS, NUM, esc, evaluate, fmtAuto, fmtCount, keepUnits, pct, trim } = root.PBModel;

const LABELS = {
  grads: ['每个 rank 的本地梯度', '2 到 8 个数，逗号或空格分隔'],
  lr: ['学习率 lr'],
  w0: ['初始参数 w'],
  reduction: ['归约约定'],
  ranks: ['rank 数 R'],
  grad: ['梯度大小 G', '也可带单位，如 0.5 TB、1.5 GiB'],
  grad_unit: ['梯度单位'],
  bandwidth: ['单向有效带宽', 'GB/s 是字节，Gb/s 是比特；也可直接写 25 Gb/s'],
  bw_unit: ['带宽单位'],
  compute: ['单卡计算时间', '同一全局 batch 在一张卡上；纯数字按 ms，也可写 0.4 s'],
  overlap: ['通信可重叠比例', '0 到 1；1 表示每个桶一就绪就发'],
  backward_ratio: ['反向耗时是前向的几倍', '常取 2：反向占计算的 2/3，只有反向能掩盖梯度通信'],
  last_bucket: ['最后一个桶的通信', '反向结束才就绪，总是暴露；纯数字按 ms'],
  params: ['参数个数 P', '如 7B、1.3e9、350M'],
  dp: ['数据并行度 D'],
  param_bytes: ['参数 B/参数'],
  grad_bytes: ['梯度 B/参数'],
  optim_bytes: ['优化器 B/参数', 'FP32 主副本 + Adam 两个矩 = 12'],
  memory: ['每卡显存', '也可带单位，如 80 GiB'],
  memory_unit: ['显存单位'],
  stages: ['阶段数 p'],
  microbatches: ['微批次数 m'],
  stage_times: ['各阶段时间（ms，可选）', '如 10，12，10，10；留空为相等'],
  batch: ['batch b'],
  seq: ['序列长度 s'],
  hidden: ['隐藏维度 h', '需能被 t 整除'],
  tp: ['TP 度 t'],
  layers: ['层数'],
  bytes_per_elem: ['每元素字节数'],
};
const OPTION_TEXT = { mean: '求平均（或求和后除以 R 一次）', sum: '求和，不除以 R', mean_twice: '求平均后又除以 R' };
const TITLES = {
  update: '数据并行的一次更新', ring: 'ring all-reduce 与步时', zero: '训练状态计算器：ZeRO 常驻状态与通信',
  pipeline: '流水线气泡', tp: '张量并行通信量',
};

const B = (x) => fmtAuto(x, 'B');
const T = (x) => fmtAuto(x, 's');
const dl = (rows) => `<dl class="pb-out">${rows.map(([k, label, v]) => `<dt>${label}</dt><dd data-out="${k}">${esc(v)}</dd>`).join('')}</dl>`;

// Charts are drawn at the width they are shown (one SVG unit = one CSS pixel, 280 to 640), so their
// 12 px text (11 px small) stays that size on a phone instead of shrinking with the picture.
let W = 640, L = 110;  // drawing width and label column of the chart being drawn
const right = () => W - 12;
const rect = (x, y, w, h, cls, title) => `<rect x="${x.toFixed(1)}" y="${y}" width="${Math.max(w, 0).toFixed(1)}" height="${h}" class="${cls}"><title>${esc(title)}</title></rect>`;
const text = (x, y, s, cls = '', anchor = '') => `<text x="${x.toFixed(1)}" y="${y}" class="${cls}"${anchor ? ` text-anchor="${anchor}"` : ''}>${esc(s)}</text>`;
const svg = (h, label, body) => `<svg class="pb-svg" viewBox="0 0 ${W} ${h}" style="max-width:${W}px" role="img" aria-label="${esc(label)}">${body}</svg>`;
// Rough width of a label at 12 px: CJK characters are square, Latin about half.
const textWidth = (s) => [...s].reduce((w, c) => w + (c.charCodeAt(0) > 0x2e80 ? 12 : 7), 0);
// Legend items left to right from the label column, wrapping to a new row when the width runs out.
function legend(y, items) {
  let x = L, row = 0, out = '';
  for (const [cls, s] of items) {
    const w = 18 + textWidth(s) + 14;
    if (x + w > W && x > L) { x = L; row += 1; }
    out += rect(x, y + row * 18, 12, 12, cls, s) + text(x + 18, y + row * 18 + 11, s);
    x += w;
  }
  return [out, row + 1];
}
const layout = (narrowLabel) => { L = W < 480 ? narrowLabel : 110; };

function ringTimeline(o, t1) {
  layout(84);
  const scale = (right() - L) / Math.max(t1, o.step, 1e-30);
  const x = (t) => L + t * scale;
  const per = o.compute_per_rank;
  let body = text(0, 20, '1 张卡') + rect(L, 8, t1 * scale, 16, 'pb-c', `单卡计算 ${T(t1)}`);
  body += text(0, 48, '每 rank 计算') + rect(L, 36, per * scale, 16, 'pb-c', `每 rank 计算 ${T(per)}`);
  const bx = x(per - o.backward);
  body += `<line x1="${bx.toFixed(1)}" x2="${bx.toFixed(1)}" y1="32" y2="84" class="pb-mark"/>` + text(bx + 3, 62, '反向', 'pb-small');
  body += text(0, 76, '通信') + rect(x(per - o.hidden_comm), 64, o.hidden_comm * scale, 16, 'pb-h', `被隐藏的通信 ${T(o.hidden_comm)}`);
  body += rect(x(per), 64, o.exposed_comm * scale, 16, 'pb-x', `暴露的通信 ${T(o.exposed_comm)}`);
  const sx = x(o.step), label = `步时 ${T(o.step)}`;
  body += `<line x1="${sx.toFixed(1)}" x2="${sx.toFixed(1)}" y1="30" y2="86" class="pb-mark"/>`;
  body += text(Math.min(sx, W - 2), 100, label, 'pb-small', 'end');
  const [keys, rows] = legend(112, [['pb-c', '计算'], ['pb-h', '被隐藏的通信'], ['pb-x', '暴露的通信']]);
  return svg(118 + rows * 18, `时间线：计算 ${T(per)}，隐藏通信 ${T(o.hidden_comm)}，暴露通信 ${T(o.exposed_comm)}`, body + keys);
}

// One path per stage and colour (not a rect per slot): 16 x 64 slots stay cheap to redraw.
function gantt(o) {
  layout(56);
  const p = o.stage_times.length, m = o.starts[0].length;
  const scale = (right() - L) / o.makespan;
  let body = '';
  for (let i = 0; i < p; i++) {
    const y = 6 + i * 22, w = o.stage_times[i] * scale, d = ['', ''];
    body += text(0, y + 14, `阶段 ${i + 1}`);
    for (let j = 0; j < m; j++) {
      const x = L + o.starts[i][j] * scale;
      d[j % 2] += `M${x.toFixed(1)} ${y}h${w.toFixed(1)}v18h${(-w).toFixed(1)}z`;
      if (w > 8 + 7 * String(j + 1).length) body += text(x + w / 2, y + 13, String(j + 1), j % 2 ? 'pb-in' : 'pb-in pb-in2', 'middle');
    }
    body = `<path d="${d[0]}" class="pb-c2"/><path d="${d[1]}" class="pb-c"/>` + body;
  }
  const note = `总时长 ${T(o.makespan)}；空白处是等待（气泡）`;
  const wrap = textWidth(note) > W - L;  // on a phone the note takes two lines
  body += wrap ? text(L, 20 + p * 22, `总时长 ${T(o.makespan)}`, 'pb-small') + text(L, 36 + p * 22, '空白处是等待（气泡）', 'pb-small')
    : text(L, 20 + p * 22, note, 'pb-small');
  return svg((wrap ? 44 : 28) + p * 22, `流水线甘特图：${p} 个阶段、${m} 个微批次，总时长 ${T(o.makespan)}`, body);
}

const NAMES = ['完整副本 (DDP)', 'ZeRO-1', 'ZeRO-2', 'ZeRO-3'];
const SHORT = ['DDP', 'ZeRO-1', 'ZeRO-2', 'ZeRO-3'];

function zeroBars(o) {
  layout(60);
  const scale = (right() - L - 76) / Math.max(o.rows[0].total, o.memory, 1e-30);
  let body = '';
  for (const r of o.rows) {
    const y = 6 + r.stage * 26;
    let x = L;
    body += text(0, y + 14, (W < 480 ? SHORT : NAMES)[r.stage]);
    for (const [k, cls, s] of [['param_state', 'pb-p', '参数'], ['grad_state', 'pb-g', '梯度'], ['optim_state', 'pb-o', '优化器']]) {
      body += rect(x, y, r[k] * scale, 18, cls, `${s} ${B(r[k])}`);
      x += r[k] * scale;
    }
    body += text(x + 6, y + 14, `${B(r.total)} ${r.fits ? '✓' : '✗'}`, 'pb-small');
  }
  const mx = L + o.memory * scale;
  body += `<line x1="${mx.toFixed(1)}" x2="${mx.toFixed(1)}" y1="0" y2="108" class="pb-mark"/>` + text(Math.min(mx, W - 2), 122, `显存 ${B(o.memory)}`, 'pb-small', 'end');
  const [keys, rows] = legend(136, [['pb-p', '参数'], ['pb-g', '梯度'], ['pb-o', '优化器状态']]);
  return svg(142 + rows * 18, '每卡常驻模型状态的条形图', body + keys);
}

const OUTPUTS = {
  update(o, v) {
    const bad = { sum: '求和后没有除以 R：步长放大了 R 倍', mean_twice: '平均做了两次：步长缩小了 R 倍', mean: '' }[v.reduction];
    const flag = o.matches_reference
      ? '<p class="pb-ok" data-out="flag">与单进程全批次更新一致。</p>'
      : `<p class="pb-bad" data-out="flag">与单进程全批次更新不一致：${bad}。</p>`;
    return dl([
      ['aggregated_grad', '聚合后的梯度', trim(o.aggregated_grad, 6)],
      ['weights', `各 rank 更新后的 w（${o.ranks} 个）`, o.weights.map((w) => trim(w, 6)).join(', ')],
      ['reference', '单进程全批次更新的 w', trim(o.reference, 6)],
    ]) + flag;
  },
  ring(o, v) {
    return dl([
      ['send_per_rank', '每 rank 发送', B(o.send_per_rank)], ['recv_per_rank', '每 rank 接收', B(o.recv_per_rank)],
      ['total_sent', '全网合计发送', B(o.total_sent)], ['chunk', '每块 G/R', B(o.chunk)],
      ['rounds', '轮数 2(R−1)', String(o.rounds)], ['lower_bound', '通信下界', T(o.lower_bound)],
      ['compute_per_rank', '每 rank 计算', T(o.compute_per_rank)], ['backward', '其中反向（能掩盖通信的窗口）', T(o.backward)],
      ['hidden_comm', '被隐藏的通信', T(o.hidden_comm)], ['exposed_comm', '暴露的通信', T(o.exposed_comm)],
      ['step', '步时', T(o.step)], ['speedup', '加速比', `${trim(o.speedup)}×`], ['efficiency', '效率', pct(o.efficiency)],
    ]) + ringTimeline(o, v.compute)
      + '<p class="pb-note">模型的简化：理想 ring，不计每轮延迟与争用；梯度通信只能藏在反向里，最后一个桶在反向结束后才发出，总是暴露。</p>';
  },
  zero(o) {
    const rows = o.rows.map((r) => `<tr data-stage="${r.stage}"><th scope="row">${NAMES[r.stage]}</th><td>${B(r.param_state)}</td><td>${B(r.grad_state)}</td><td>${B(r.optim_state)}</td><td data-out="total${r.stage}">${B(r.total)}</td><td data-out="fits${r.stage}">${r.fits ? '放得下' : '放不下'}</td><td data-out="comm${r.stage}">${B(r.send_per_rank)}</td><td>${r.relative_to_ddp === null ? '—' : `${trim(r.relative_to_ddp)}×`}</td></tr>`).join('');
    const best = o.smallest_fitting_stage;
    // A region the keyboard can reach: on a phone the table scrolls sideways in it.
    return `<div class="pb-scroll" tabindex="0" role="region" aria-label="四种方案的每卡状态与通信（表格可左右滚动）"><table class="pb-table"><thead><tr><th>方案</th><th>参数</th><th>梯度</th><th>优化器</th><th>合计/卡</th><th>${esc('≤ 显存？')}</th><th>每 rank 每步发送</th><th>相对 DDP</th></tr></thead><tbody>${rows}</tbody></table></div>`
      + `<p data-out="fit">${best === null ? '四种方案的常驻状态都放不下这块卡。' : `最低放得下的方案：${NAMES[best]}。`}</p>`
      + zeroBars(o)
      + '<p class="pb-note">只算常驻模型状态：激活、临时 all-gather、预取与通信缓冲另计，实际峰值会更高。'
      + '通信按理想 ring 计：ZeRO-1/2 的 reduce-scatter + all-gather 与 DDP 的 all-reduce 一样多，ZeRO-3 多一次参数 all-gather，约 1.5 倍（ZeRO 论文第 7 节）。</p>';
  },
  pipeline(o) {
    return dl([
      ['idle_fraction', '空闲占比 (p−1)/(m+p−1)', pct(o.idle_fraction)],
      ['bubble_over_ideal', '气泡 / 理想时间 (p−1)/m', pct(o.bubble_over_ideal)],
      ['makespan', '按各阶段时间调度的总时长', T(o.makespan)],
      ['schedule_idle_fraction', '按各阶段时间调度的空闲占比', pct(o.schedule_idle_fraction)],
    ]) + gantt(o);
  },
  tp(o) {
    return dl([
      ['message', '每次 all-reduce 的消息 b·s·h·字节', B(o.message)],
      ['allreduces_per_layer', '每层 all-reduce 次数（前向 2 + 反向 2）', String(o.allreduces_per_layer)],
      ['per_layer', '每层 all-reduce 数据量', B(o.per_layer)], ['per_step', '每步（所有层）', B(o.per_step)],
      ['send_per_rank_per_layer', '每个 TP rank 每层发送（ring）', B(o.send_per_rank_per_layer)],
      ['send_per_rank_per_step', '每个 TP rank 每步发送（ring）', B(o.send_per_rank_per_step)],
    ]);
  },
};

function control(kind, fd) {
  const id = `pb-${kind}-${fd.name}`;
  if (fd.kind === 'select') {
    const opts = fd.options.map((o) => `<option value="${esc(o)}">${esc(OPTION_TEXT[o] || o)}</option>`).join('');
    return `<select id="${id}" name="${fd.name}" aria-describedby="${id}-msg">${opts}</select>`;
  }
  return `<input id="${id}" name="${fd.name}" type="text" inputmode="${fd.kind === 'list' || fd.kind === 'params' ? 'text' : 'decimal'}" autocomplete="off" spellcheck="false" aria-describedby="${id}-msg ${id}-hint">`;
}

function fieldHtml(kind, fd, unitFd) {
  const id = `pb-${kind}-${fd.name}`;
  const [label, hint] = LABELS[fd.name];
  let unit = '';
  if (unitFd) unit = `<label class="pb-sr" for="pb-${kind}-${unitFd.name}">${LABELS[unitFd.name][0]}</label>${control(kind, unitFd)}`;
  const msgs = [fd, unitFd].filter(Boolean).map((x) => `<span class="pb-msg" id="pb-${kind}-${x.name}-msg" data-msg="${x.name}" aria-live="polite"></span>`).join('');
  return `<div class="pb-field"><label for="${id}">${label}</label><span class="pb-row">${control(kind, fd)}${unit}</span>`
    + `<small class="pb-hint" id="${id}-hint">${hint ? esc(keepUnits(hint)) : ''}</small>${msgs}</div>`;
}

const calcs = [];
// The width a chart is drawn at: its box's, between 280 and 640 px (640 where the page is not laid out).
// Read once at mount and then from the ResizeObserver, never while typing (a layout read per key).
const chartWidth = (px) => Math.max(280, Math.min(640, Math.floor(px) || 640));

function hashParams() {
  const h = location.hash.slice(1);
  return new URLSearchParams(h.includes('=') ? h : '');
}

// Written shortly after typing stops: browsers throttle rapid history updates.
let pending = 0;
function writeHash() {
  clearTimeout(pending);
  pending = setTimeout(() => {
    const p = hashParams();
    for (const c of calcs) for (const [k, v] of Object.entries(c.raw())) p.set(`${c.kind}.${k}`, v);
    history.replaceState(history.state, '', `#${p}`);
  }, 200);
}

class Calc {
  constructor(el, kind) {
    this.el = el;
    this.kind = kind;
    const fields = FIELDS[kind];
    const units = new Set(fields.map((x) => x.unit).filter(Boolean));
    const html = fields.filter((x) => !units.has(x.name))
      .map((x) => fieldHtml(kind, x, x.unit && fields.find((u) => u.name === x.unit))).join('');
    el.innerHTML = `<p class="pb-title">${TITLES[kind]}</p><form class="pb-form" novalidate>${html}</form>`
      + `<div class="pb-status" aria-live="polite"></div><div class="pb-results"></div>`;
    this.form = el.querySelector('form');
    this.inputs = Object.fromEntries(fields.map((x) => [x.name, this.form.elements[x.name]]));
    this.results = el.querySelector('.pb-results');
    this.status = el.querySelector('.pb-status');
    this.hints = Object.fromEntries(fields.map((x) => [x.name, el.querySelector(`#pb-${kind}-${x.name}-hint`)]));
    this.width = chartWidth(this.results.clientWidth);
    this.restore();
    // Redraw at the new width when the box changes size (a phone turned, a window resized).
    if (typeof ResizeObserver === 'function') {
      new ResizeObserver(([e]) => {
        const w = chartWidth(e.contentRect.width);
        if (w !== this.width) { this.width = w; this.update(); }
      }).observe(this.results);
    }
    const onInput = () => { this.update(); writeHash(); };
    this.form.addEventListener('input', onInput);
    this.form.addEventListener('change', onInput);
    this.form.addEventListener('submit', (e) => e.preventDefault());
  }

  raw() {
    return Object.fromEntries(Object.entries(this.inputs).map(([k, e]) => [k, e.value]));
  }

  restore() {
    const p = hashParams();
    for (const fd of FIELDS[this.kind]) {
      const v = p.get(`${this.kind}.${fd.name}`);
      this.inputs[fd.name].value = v === null ? fd.default : v;
    }
    this.update();
  }

  update() {
    const r = evaluate(this.kind, this.raw());
    const errors = r.errors || {};
    for (const fd of FIELDS[this.kind]) {
      const name = fd.name, e = this.inputs[name];
      const msg = this.el.querySelector(`[data-msg="${name}"]`);
      msg.textContent = errors[name] ? `${LABELS[name][0]}：${errors[name]}${fd.default ? `。例如 ${fd.default}` : ''}` : '';
      if (errors[name]) e.setAttribute('aria-invalid', 'true'); else e.removeAttribute('aria-invalid');
    }
    this.echo(r.values, errors);
    if (r.errors) {
      this.status.textContent = '有输入需要修改（见红字提示），结果暂不显示。';
      this.results.innerHTML = '';
      this.el.classList.add('pb-invalid');
      return;
    }
    this.status.textContent = '';
    this.el.classList.remove('pb-invalid');
    W = this.width;
    this.results.innerHTML = OUTPUTS[this.kind](r.out, r.values);
  }

  // What a field with its own unit or a count was read as, under the field: "按 25 Gb/s 计算", "70 亿个参数".
  echo(values, errors) {
    for (const fd of FIELDS[this.kind]) {
      const hint = this.hints[fd.name], typed = this.inputs[fd.name].value.trim();
      if (!hint || !(fd.kind === 'qty' || fd.kind === 'params')) continue;
      let own = '';
      if (!errors[fd.name]) own = fd.kind === 'params' ? `读作 ${fmtCount(values[fd.name])}` : NUM.test(typed) ? '' : `按你写的 ${typed} 计算${this.inputs[fd.unit] ? '，右边的单位选择此时不用' : ''}`;
      const text = keepUnits([LABELS[fd.name][1], own].filter(Boolean).join('；'));
      if (hint.textContent !== text) hint.textContent = text;  // no DOM write (and layout) when nothing changed
    }
  }
}

function mountAll(root = document) {
  for (const el of root.querySelectorAll('.pb-calc[data-calc]:not([data-calc="plan"])')) {  // plan: plan.js
    const kind = el.dataset.calc;
    if (!FIELDS[kind]) {
      el.textContent = `未知的计算器类型 “${kind}”；可用：${Object.keys(FIELDS).join('、')}。`;
    } else if (calcs.some((c) => c.kind === kind)) {
      el.textContent = `本页已有一个 “${kind}” 计算器；每页每种只放一个（网址里的输入按类型保存）。`;
    } else {
      calcs.push(new Calc(el, kind));
    }
  }
  // A link to a section changes the hash too: restore only when it holds calculator inputs.
  addEventListener('hashchange', () => {
    const keys = [...hashParams().keys()];
    calcs.filter((c) => keys.some((k) => k.startsWith(`${c.kind}.`))).forEach((c) => c.restore());
  });
}

const api = { calcs, mountAll };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBCalc = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
