// The record page "并行方案与通信预算". The page's HTML holds the form (fieldsets,
// labelled fields, the self-check boxes); this module keeps it in localStorage,
// exports Markdown / JSON and imports JSON back. Nothing here grades anything.
// Classic script (no ES module), so it also runs from file://; node loads it with require().
(function (root) {
'use strict';
const KEY = 'pb-plan-record-v1';
const FORMAT = 'pb-plan-record';
const MAX_TEXT = 20000;
const PLAN_KEY = 'pb-plan-builder-v1';  // written by plan.js ("送到记录页")

// Why `p` is not a plan sent by the plan builder, or '' when it is one.
function planProblem(p) {
  if (!p || typeof p !== 'object' || p.format !== 'pb-plan' || p.version !== 1) return '不是方案构建器存下的方案';
  const strs = (x) => Array.isArray(x) && x.length <= 60 && x.every((s) => typeof s === 'string' && s.length <= 2000);
  if (!strs(p.numbers) || !strs(p.assumptions) || !strs(p.verdict) || typeof p.link !== 'string' || p.link.length > 4000) return '方案的内容不完整';
  return '';
}

// The record's fields a plan fills: its own four, and the conditions it answers when still empty.
function planFields(p) {
  const overlap = p.verdict.find((s) => s.startsWith('重叠')) || '';
  const measured = p.verdict.find((s) => s.startsWith('实测：') || s.startsWith('全部按数据手册')) || '';  // planreport._measured
  return {
    own: { plan_link: p.link, plan_numbers: p.numbers.join('\n'), plan_assumptions: p.assumptions.join('\n'), plan_verdict: p.verdict.join('\n') },
    ifEmpty: { ranks: p.numbers[0] || '', bw_kind: 'bytes', batch: 'same', measured, overlap },
  };
}

// What the form holds: sections of {name, label, check, options: {value: text} | null}.
function schemaOf(form) {
  return [...form.querySelectorAll('fieldset')].map((fs) => ({
    title: fs.querySelector('legend').textContent.trim(),
    items: [...fs.querySelectorAll('input, select, textarea')].map((e) => ({
      name: e.name,
      label: form.querySelector(`label[for="${e.id}"]`).textContent.trim(),
      check: e.type === 'checkbox',
      options: e.tagName === 'SELECT' ? Object.fromEntries([...e.options].map((o) => [o.value, o.text])) : null,
    })),
  }));
}

const items = (schema) => schema.flatMap((s) => s.items);

function empty(schema) {
  const d = { format: FORMAT, version: 1, fields: {}, checks: {} };
  for (const i of items(schema)) if (i.check) d.checks[i.name] = false; else d.fields[i.name] = '';
  return d;
}

// Why `data` is not a record of this form, or '' when it is one.
function problem(data, schema) {
  const isObj = (x) => x && typeof x === 'object' && !Array.isArray(x);
  if (!isObj(data)) return '内容不是一个 JSON 对象';
  if (data.format !== FORMAT) return `缺少 "format": "${FORMAT}"，不是本页导出的记录`;
  if (data.version !== 1) return `版本 ${JSON.stringify(data.version)} 不认识（本页是 1）`;
  const known = Object.fromEntries(items(schema).map((i) => [i.name, i]));
  for (const part of ['fields', 'checks']) {
    if (!isObj(data[part])) return `"${part}" 应是一个对象`;
    for (const [k, v] of Object.entries(data[part])) {
      const i = known[k];
      if (!i || i.check !== (part === 'checks')) return `"${part}" 里有本页没有的项 "${k}"`;
      if (typeof v !== (i.check ? 'boolean' : 'string')) return `"${part}.${k}" 应是${i.check ? ' true/false' : '文字'}`;
      if (!i.check && v.length > MAX_TEXT) return `"${part}.${k}" 超过 ${MAX_TEXT} 个字符`;
      if (i.options && !Object.hasOwn(i.options, v)) return `"${part}.${k}" 只能是 ${Object.keys(i.options).map((x) => JSON.stringify(x)).join('、')}`;
    }
  }
  return '';
}

function toMarkdown(data, schema) {
  const out = ['# 并行方案与通信预算', '', `导出时间：${data.saved || new Date().toISOString()}`, ''];
  for (const s of schema) {
    out.push(`## ${s.title}`, '');
    for (const i of s.items) {
      const v = i.check ? data.checks[i.name] : data.fields[i.name] || '';
      if (i.check) out.push(`- [${v ? 'x' : ' '}] ${i.label}`);
      else out.push(`- **${i.label}**：${(i.options ? i.options[v] : v) || '（未填）'}`.replace(/\n/g, '\n  '));
    }
    out.push('');
  }
  return out.join('\n');
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

function mount(el = document.querySelector('.pb-record')) {
  const form = el.querySelector('form');
  const schema = schemaOf(form);
  el.insertAdjacentHTML('afterbegin', '<div class="pb-alert" role="alert" hidden><span></span> <button type="button" data-act="reset">清除本浏览器里的旧记录并重新开始</button></div>');
  el.insertAdjacentHTML('beforeend', `<div class="pb-actions"><button type="button" data-act="md">导出 Markdown</button> <button type="button" data-act="json">导出 JSON</button>
<label for="pb-rec-import">导入 JSON 文件</label><input type="file" id="pb-rec-import" accept=".json,application/json">
<button type="button" data-act="plan">从方案构建器导入</button> <button type="button" data-act="clear">清空记录</button></div><p class="pb-status" role="status"></p>`);
  const status = el.querySelector('.pb-status');
  const alert = el.querySelector('.pb-alert');
  let autosave = true;

  const read = () => {
    const d = empty(schema);
    for (const n of Object.keys(d.fields)) d.fields[n] = form.elements[n].value;
    for (const n of Object.keys(d.checks)) d.checks[n] = form.elements[n].checked;
    return { ...d, saved: new Date().toISOString() };
  };
  const fill = (d) => {
    const e = empty(schema);
    for (const [n, v] of Object.entries({ ...e.fields, ...d.fields })) form.elements[n].value = v;
    for (const [n, v] of Object.entries({ ...e.checks, ...d.checks })) form.elements[n].checked = v;
  };
  const say = (msg, bad = false) => { status.textContent = msg; status.classList.toggle('pb-bad', bad); };
  const unblock = () => { autosave = true; alert.hidden = true; };
  const save = () => {
    if (!autosave) return say('自动保存已暂停：先处理上面的提示。', true);
    try {
      localStorage.setItem(KEY, JSON.stringify(read()));
      say(`已自动保存到本浏览器（${new Date().toLocaleTimeString()}）。`);
    } catch (e) {
      say(`这个浏览器不允许本页保存（${e.name}）；请用“导出”留存记录。`, true);
    }
  };
  const parse = (text) => { try { const d = JSON.parse(text); return [d, problem(d, schema)]; } catch { return [null, '内容不是合法的 JSON']; } };

  let stored = null;
  try { stored = localStorage.getItem(KEY); } catch (e) { say(`这个浏览器不允许本页读取本地存储（${e.name}）；记录不会自动保存，请导出。`, true); }
  if (stored !== null) {
    const [data, why] = parse(stored);
    if (why) {
      autosave = false;
      alert.hidden = false;
      alert.querySelector('span').textContent = `本浏览器里保存的记录无法读取（${why}），没有载入。为免覆盖，自动保存已暂停。`;
    } else {
      fill(data);
      say('已从本浏览器载入上次的记录。');
    }
  }

  form.addEventListener('input', save);
  form.addEventListener('change', save);
  form.addEventListener('submit', (e) => e.preventDefault());
  el.querySelector('#pb-rec-import').addEventListener('change', async (e) => {
    const file = e.target.files[0];
    if (!file) return;
    const [data, why] = parse(await file.text());
    e.target.value = '';
    if (why) return say(`导入失败：“${file.name}”不是有效的记录（${why}）。页面上的记录没有改动。`, true);
    unblock();
    fill(data);
    save();
    say(`已导入“${file.name}”并保存到本浏览器。`);
  });
  el.addEventListener('click', (e) => {
    const act = e.target.dataset && e.target.dataset.act;
    if (act === 'plan') {
      let p = null;
      try { p = JSON.parse(localStorage.getItem(PLAN_KEY)); } catch { p = null; }
      const why = p === null ? '本浏览器里还没有方案：先在方案构建器里点“送到记录页”' : planProblem(p);
      if (why) say(`没有导入：${why}。页面上的记录没有改动。`, true);
      else {
        const { own, ifEmpty } = planFields(p);
        for (const [n, v] of Object.entries(own)) form.elements[n].value = v;
        for (const [n, v] of Object.entries(ifEmpty)) if (!form.elements[n].value) form.elements[n].value = v;
        save();
        say(`已导入方案构建器的方案（${p.fits ? '放得下' : '放不下'}），导出时一并带上。`);
      }
    }
    if (act === 'md') download('plan-record.md', toMarkdown(read(), schema), 'text/markdown');
    if (act === 'json') download('plan-record.json', JSON.stringify(read(), null, 2), 'application/json');
    const clear = el.querySelector('[data-act="clear"]');
    if (act === 'reset' || (act === 'clear' && clear.dataset.armed)) {
      try { localStorage.removeItem(KEY); } catch { /* reported when saving */ }
      unblock();
      fill(empty(schema));
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

const api = { KEY, FORMAT, PLAN_KEY, schemaOf, empty, problem, planProblem, planFields, toMarkdown, mount };
if (typeof module === 'object' && module.exports) module.exports = api;
else root.PBRecord = api;
})(typeof globalThis !== 'undefined' ? globalThis : this);
