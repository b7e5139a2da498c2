// The record page "并行方案与通信预算": a form kept in this browser's localStorage,
// exported as Markdown or JSON and imported back. Nothing here grades anything.
export const KEY = 'pb-plan-record-v1';
export const FORMAT = 'pb-plan-record';

const SELECTS = {
  bw_kind: { '': '未填', bytes: '字节(GB/s)', bits: '比特(Gb/s)' },
  batch: { '': '未填', same: '不变', changed: '变了(需另报收敛与质量)' },
};
// [name, label, type, placeholder]; section 'c' = 条件.
const FIELDS = [
  ['model', '模型规模(参数量)', 'input', '例如 7B'],
  ['ranks', 'rank 数与各并行度', 'input', '例如 8 个 rank:DP=4, TP=2'],
  ['bandwidth', '互连单向有效带宽', 'input', '例如 25 GB/s'],
  ['bw_kind', '带宽单位是字节还是比特', 'select'],
  ['batch', '全局 batch 是否不变', 'select'],
  ['overlap', '哪些时间可以重叠', 'textarea', '例如 反向计算与梯度通信部分重叠'],
  ['evidence', '证据', 'textarea', '复算过程、计时、日志、计算器链接……'],
  ['results', '结果', 'textarea', '方案、每卡内存、每 rank 通信量与下界、步时……'],
  ['uncertain', '仍不确定的事', 'textarea', '还需要实测或查证的地方'],
];
const CHECKS = [
  ['c_bw', '复算四卡例并把带宽改为 12.5 GB/s:说明了通信量为何不变、时间为何改变'],
  ['c_new', '陌生配置(8 个 rank、4 GB 梯度、50 GB/s):报告了每 rank 发送量和下界,而不只是全网总量'],
  ['c_ddp', '用一段话否决了“放不下就直接用 DDP”,并列出 ZeRO 分片、TP、PP 各自要追加验证的代价'],
  ['c_batch', '注明了全局 batch 是否不变'],
  ['c_bits', '注明了带宽是字节还是比特'],
  ['c_overlap', '注明了哪些时间能够重叠'],
  ['c_extra', '内存估算注明了激活和临时聚合不在常驻状态之内'],
];
const MAX_TEXT = 20000;

export const empty = () => ({
  format: FORMAT, version: 1,
  fields: Object.fromEntries(FIELDS.map(([n]) => [n, ''])),
  checks: Object.fromEntries(CHECKS.map(([n]) => [n, false])),
});

// Why `data` is not a record of this page, or '' when it is one.
export function problem(data) {
  if (!data || typeof data !== 'object' || Array.isArray(data)) return '内容不是一个 JSON 对象';
  if (data.format !== FORMAT) return `缺少 "format": "${FORMAT}",不是本页导出的记录`;
  if (data.version !== 1) return `版本 ${JSON.stringify(data.version)} 不认识(本页是 1)`;
  for (const [part, list, type] of [['fields', FIELDS, 'string'], ['checks', CHECKS, 'boolean']]) {
    const obj = data[part];
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return `"${part}" 应是一个对象`;
    const known = new Set(list.map(([n]) => n));
    for (const [k, v] of Object.entries(obj)) {
      if (!known.has(k)) return `"${part}" 里有本页没有的项 "${k}"`;
      if (typeof v !== type) return `"${part}.${k}" 应是${type === 'string' ? '文字' : ' true/false'}`;
      if (type === 'string' && v.length > MAX_TEXT) return `"${part}.${k}" 超过 ${MAX_TEXT} 个字符`;
      if (SELECTS[k] && !Object.hasOwn(SELECTS[k], v)) return `"${part}.${k}" 只能是 ${Object.keys(SELECTS[k]).map((x) => JSON.stringify(x)).join('、')}`;
    }
  }
  return '';
}

export function toMarkdown(data) {
  const f = data.fields;
  const v = (n) => (SELECTS[n] ? (f[n] ? SELECTS[n][f[n]] : '未填') : f[n] || '(未填)');
  const label = (n) => FIELDS.find((x) => x[0] === n)[1];
  const block = (n) => `## ${label(n)}\n\n${v(n)}\n`;
  return [
    '# 并行方案与通信预算\n', `导出时间:${data.saved || new Date().toISOString()}\n`, '## 条件\n',
    ...['model', 'ranks', 'bandwidth', 'bw_kind', 'batch', 'overlap'].map((n) => `- ${label(n)}:${v(n)}`), '',
    block('evidence'), block('results'), block('uncertain'),
    '## 验收自检(学习者自己勾选;保存不代表通过)\n',
    ...CHECKS.map(([n, t]) => `- [${data.checks[n] ? 'x' : ' '}] ${t}`), '',
  ].join('\n');
}

const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

function fieldHtml([name, label, type, ph]) {
  const id = `pb-rec-${name}`;
  const control = type === 'select'
    ? `<select id="${id}" name="${name}">${Object.entries(SELECTS[name]).map(([k, t]) => `<option value="${k}">${t}</option>`).join('')}</select>`
    : `<${type} id="${id}" name="${name}" placeholder="${esc(ph)}"${type === 'input' ? ' type="text"' : ' rows="3"'}>${type === 'textarea' ? '</textarea>' : ''}`;
  return `<div class="pb-field"><label for="${id}">${label}</label>${control}</div>`;
}

function download(name, text, type) {
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], { type }));
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 1000);
}

export function mount(el = document.querySelector('.pb-record')) {
  el.innerHTML = `<p class="pb-note"><strong>记录只保存在当前浏览器</strong>(localStorage):换浏览器或设备、清除网站数据、用隐私窗口都会看不到它。需要留存或提交时,请导出文件。</p>
<div class="pb-alert" role="alert" hidden><span></span> <button type="button" data-act="reset">清除本浏览器里的旧记录并重新开始</button></div>
<form class="pb-form pb-record-form" novalidate>
<fieldset><legend>条件</legend>${FIELDS.slice(0, 6).map(fieldHtml).join('')}</fieldset>
<fieldset><legend>证据、结果与不确定</legend>${FIELDS.slice(6).map(fieldHtml).join('')}</fieldset>
<fieldset><legend>验收自检(由你按验收条件勾选;保存不会把任何一项标为通过)</legend>
${CHECKS.map(([n, t]) => `<div class="pb-check"><input type="checkbox" id="pb-rec-${n}" name="${n}"><label for="pb-rec-${n}">${t}</label></div>`).join('')}</fieldset>
</form>
<div class="pb-actions"><button type="button" data-act="md">导出 Markdown</button> <button type="button" data-act="json">导出 JSON</button>
<label for="pb-rec-import">导入 JSON 文件</label><input type="file" id="pb-rec-import" accept=".json,application/json">
<button type="button" data-act="clear">清空记录</button></div>
<p class="pb-status" role="status"></p>`;
  const form = el.querySelector('form');
  const status = el.querySelector('.pb-status');
  const alert = el.querySelector('.pb-alert');
  let autosave = true;

  const read = () => {
    const d = empty();
    for (const n of Object.keys(d.fields)) d.fields[n] = form.elements[n].value;
    for (const n of Object.keys(d.checks)) d.checks[n] = form.elements[n].checked;
    return d;
  };
  const fill = (d) => {
    for (const [n, v] of Object.entries({ ...empty().fields, ...d.fields })) form.elements[n].value = v;
    for (const [n, v] of Object.entries({ ...empty().checks, ...d.checks })) form.elements[n].checked = v;
  };
  const say = (msg, bad = false) => { status.textContent = msg; status.classList.toggle('pb-bad', bad); };
  const save = () => {
    if (!autosave) return say('自动保存已暂停:先处理上面的提示。', true);
    const d = { ...read(), saved: new Date().toISOString() };
    try {
      localStorage.setItem(KEY, JSON.stringify(d));
      say(`已自动保存到本浏览器(${new Date().toLocaleTimeString()})。`);
    } catch (e) {
      say(`这个浏览器不允许本页保存(${e.name});请用“导出”留存记录。`, true);
    }
  };

  let stored = null;
  try { stored = localStorage.getItem(KEY); } catch (e) { say(`这个浏览器不允许本页读取本地存储(${e.name});记录不会自动保存,请导出。`, true); }
  if (stored !== null) {
    let why;
    try { why = problem(JSON.parse(stored)); } catch { why = '内容不是合法的 JSON'; }
    if (why) {
      autosave = false;
      alert.hidden = false;
      alert.querySelector('span').textContent = `本浏览器里保存的记录无法读取(${why}),没有载入。为免覆盖,自动保存已暂停。`;
    } else {
      fill(JSON.parse(stored));
      say('已从本浏览器载入上次的记录。');
    }
  }

  form.addEventListener('input', save);
  form.addEventListener('change', save);
  form.addEventListener('submit', (e) => e.preventDefault());
  el.querySelector('#pb-rec-import').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    let why;
    let data;
    try { data = JSON.parse(await file.text()); why = problem(data); } catch { why = '内容不是合法的 JSON'; }
    e.target.value = '';
    if (why) return say(`导入失败:“${file.name}”不是有效的记录(${why})。页面上的记录没有改动。`, true);
    autosave = true;
    alert.hidden = true;
    fill(data);
    save();
    say(`已导入“${file.name}”并保存到本浏览器。`);
  });
  el.addEventListener('click', (e) => {
    const act = e.target.dataset && e.target.dataset.act;
    if (act === 'md') download('plan-record.md', toMarkdown({ ...read(), saved: new Date().toISOString() }), 'text/markdown');
    if (act === 'json') download('plan-record.json', JSON.stringify({ ...read(), saved: new Date().toISOString() }, null, 2), 'application/json');
    const clear = el.querySelector('[data-act="clear"]');
    if (act === 'reset' || (act === 'clear' && clear.dataset.armed)) {
      try { localStorage.removeItem(KEY); } catch { /* reported when saving */ }
      autosave = true;
      alert.hidden = true;
      fill(empty());
      say('记录已清空。');
    } else if (act === 'clear') {
      clear.dataset.armed = '1';
      clear.textContent = '再点一次确认清空';
      return;
    }
    clear.textContent = '清空记录';
    delete clear.dataset.armed;
  });
}
