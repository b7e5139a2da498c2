// Practice boxes: parallel_budget/questions answered in the page. Twins of questions.core
// (seeded draw, templates), grading.answers (reading) and grading.diagnose/checks (expected,
// named mistakes, feedback), held to Python by tests/vectors/questions.json. All course text
// comes from the page's <script id="pb-bank">. Nothing is sent; progress stays in localStorage.
(function (root) {
'use strict';
const M = root.PBModel || (typeof require === 'function' ? require('./model.js') : null);
const KEY = 'pb-practice', SEED_MAX = 999999;
const NUMBER = /^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$/;

// == seeded draw (core.Rng)
function rng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1) >>> 0;
    t = (t ^ ((t + (Math.imul(t ^ (t >>> 7), t | 61) >>> 0)) >>> 0)) >>> 0;
    return (t ^ (t >>> 14)) >>> 0;
  };
  return { next, pick: (xs) => xs[next() % xs.length] };
}
function draw(r, o) {
  if (!Array.isArray(o)) {
    const n = r.pick(o.len), xs = [];
    for (let i = 0; i < n; i++) xs.push(r.pick(o.each));
    if (o.late) { const i = r.next() % n; xs[i] += r.pick(o.late); }
    return xs;
  }
  return r.pick(o);
}
function generate(q, seed) {
  const out = {};
  if (!seed) { for (const [n, d] of q.params) out[n] = Array.isArray(d) ? d.slice() : d; return out; }
  const r = rng(seed);
  for (const [n, , o] of q.params) out[n] = draw(r, o);
  return out;
}

// == units and text
const factor = (u) => M.parseQuantity(`1 ${u}`, u.endsWith('/s') ? 'bandwidth' : /^(s|ms|us|min)$/.test(u) ? 'time' : 'bytes');
const show = (v, u) => v === null ? 'None' : u === '%' ? `${M.trim(100 * v, 4)}%` : !u ? M.trim(v, 4) : `${M.trim(v / factor(u), 4)} ${u}`;
const paramText = (p, v) => (Array.isArray(v) ? v.map(String).join('、') : String(v)) + (p[3] ? ` ${p[3]}` : '');
function fill(t, q, params, values) {
  return t.replace(/\{(\w+)(?:\|([^}]*))?\}/g, (_, k, u) => u === undefined ? paramText(q.params.find((p) => p[0] === k), params[k]) : show(values[k], u));
}

// == builders (diagnose twins), SI units
const GiB = 2 ** 30;
const gib = (x) => x / GiB * 1e9;
const ex = (value, unit, mistakes, tol = 0.01) => ({ value, unit, mistakes, tol });
const ringOf = (a) => M.ringAllreduce(a.ranks, a.grad * 1e9, (a.bw ?? 25) * 1e9);
const sendFactor = (r) => 2 * (r - 1) / r;
const commOf = (a) => ringOf(a).lower_bound;
const st = (a, comm, o = 0, share = 2 / 3, last = 0, ranks = a.ranks) => M.stepTime(a.compute / 1e3, ranks, comm, o, share, last);
const zeroTotal = (n, d, s) => n * (2 / (s >= 3 ? d : 1) + 2 / (s >= 2 ? d : 1) + 12 / (s >= 1 ? d : 1));
const zeroSend = (a, s) => M.zeroCommunication(a.params * 1e9, a.dp, s, 2, 2).send_per_rank;
const sum = (xs) => xs.reduce((s, x) => s + x, 0);
const upd = (a, how) => { const g = sum(a.grads), r = a.grads.length; return a.w - a.lr * { mean: g / r, sum: g, twice: g / r / r }[how]; };
const tpc = (a) => { const msg = a.batch * a.seq * a.hidden * 2, per = msg * (a.tp > 1 ? 4 : 0); return { msg, per }; };
const arr = (a) => a.arrivals.map((x) => x / 1e3);
// plan.js (loaded where the plan builder is mounted; node requires it): one plan of the chapter's example.
const PL = () => root.PBPlan || require('./plan.js');
const planOf = (a, o = {}) => {
  const P = PL(), raw = Object.assign({}, a, { gated: a.gated ? 'yes' : 'no', peak_tflops: a.peak_flops / 1e12, zero_stage: 1, schedule: '1f1b' }, o);
  return P.core(P.settings(P.read(raw).v), a.dp, a.tp, a.pp, 1, a.micro_batch);
};
const B = {
  ring_send(a) { const r = ringOf(a), s = r.send_per_rank; return ex(s, 'GB', [['bits', s * 8], ['recv', s + r.recv_per_rank], ['total', r.total_sent], ['gib', gib(s)], ['ring_fraction', s / sendFactor(a.ranks) * 2], ['factor2', s / 2]]); },
  ring_bound(a) {
    const r = ringOf(a), lb = r.lower_bound, bw = (a.bw ?? 25) * 1e9;
    return ex(lb, 'ms', [['bits', lb * 8], ['bits', lb / 8], ['recv', (r.send_per_rank + r.recv_per_rank) / bw], ['total', r.total_sent / bw], ['ring_fraction', lb / sendFactor(a.ranks) * 2], ['factor2', lb / 2]]);
  },
  ring_factor(a) { const f = sendFactor(a.ranks); return ex(f, null, [['ring_fraction', 2], ['factor2', f / 2]]); },
  dp_weight: (a) => ex(upd(a, 'mean'), null, [['mean_twice', upd(a, 'twice')], ['sum', upd(a, 'sum')]], 1e-3),
  buggy_weight: (a) => ex(upd(a, 'twice'), null, [['correct_code', upd(a, 'mean')], ['sum', upd(a, 'sum')]], 1e-3),
  step(a) {
    const c = commOf(a), k = a.what, pick = (s) => k === 'step' ? s.step : s.speedup / (k === 'efficiency' ? a.ranks : 1);
    const v = [['comm_twice', st(a, c * 2)], ['bits', st(a, c * 8)], ['no_split', st(a, c, 0, 2 / 3, 0, 1)]];
    const right = st(a, c);
    return ex(k === 'step' ? right.step : k === 'speedup' ? right.speedup : right.efficiency, k === 'step' ? 'ms' : null, v.map(([n, s]) => [n, pick(s)]));
  },
  overlap_step(a) {
    const c = commOf(a), l = a.last / 1e3, right = st(a, c, 1, 2 / 3, l);
    return ex(right.step, 'ms', [['overlap_compute', st(a, c, 1, 1, l).step], ['overlap_all', right.compute_per_rank], ['no_overlap', st(a, c).step], ['last_twice', right.step + l]]);
  },
  full_overlap(a) { const c = commOf(a), right = st(a, c, 1); return ex(right.step, 'ms', [['overlap_all', right.compute_per_rank], ['overlap_compute', st(a, c, 1, 1).step], ['no_overlap', st(a, c).step]]); },
  zero_state(a) { const t = zeroTotal(a.params * 1e9, a.dp, a.stage); return ex(t, 'GB', [['gib', gib(t)]]); },
  zero_peak(a) { const s = zeroTotal(a.params * 1e9, a.dp, a.stage), act = a.act * 1e9; return ex(s + act, 'GB', [['act_over_d', s + act / a.dp], ['gib', gib(s + act)]]); },
  zero_send(a) { const s = zeroSend(a, a.stage); return ex(s, 'GB', [['zero3_as_ddp', zeroSend(a, 0)], ['zero3_no_ring', s / (sendFactor(a.dp) / 2)], ['bits', s * 8], ['gib', gib(s)]]); },
  smallest_stage(a) {
    const room = (a.memory - a.act) * 1e9;
    if (room < 0) return null;
    for (let s = 0; s < 4; s++) if (zeroTotal(a.params * 1e9, a.dp, s) <= room) return s;
    return null;
  },
  bubble: (a) => ex((a.stages - 1) / (a.micro + a.stages - 1), null, [['bubble_convention', (a.stages - 1) / a.micro]]),
  tp_send_layer(a) { const { per } = tpc(a), s = per * sendFactor(a.tp); return ex(s, 'MB', [['tp_half', s / 2], ['tp_no_ring', per], ['bits', s * 8], ['total', s * a.tp]]); },
  tp_step(a) { const s = tpc(a).per * a.layers; return ex(s, 'GB', [['tp_forward_only', s / 2], ['bits', s * 8]]); },
  straggler_step(a) { const t = arr(a), last = Math.max(...t), c = a.comm / 1e3; return ex(last + c, 'ms', [['mean_arrival', sum(t) / t.length + c], ['no_comm', last]]); },
  straggler_wait(a) { const t = arr(a), last = Math.max(...t), w = last - t[a.rank]; return ex(w, 'ms', [['wait_with_comm', w + a.comm / 1e3], ['mean_arrival', sum(t) / t.length - t[a.rank]]]); },
  slow_rank(a) { const t = arr(a); return t.indexOf(Math.max(...t)); },
  stage_acts(a) {
    const act = (o) => planOf(a, o).memory.activations, r = act();
    return ex(r, 'GB', [['flight_gpipe', act({ schedule: 'gpipe' })], ['all_layers', r * a.pp], ['no_sp', act({ sequence_parallel: 'no' })], ['gib', gib(r)]]);
  },
};
const stepX = (a, o) => { const c = commOf(a), s = st(a, c, o, 2 / 3, (a.last || 0) / 1e3); return { comm: c, per: s.compute_per_rank, hidden: s.hidden_comm, backward: s.backward, speedup: s.speedup, step: s.step }; };
const zeroX = (a) => Object.fromEntries([0, 1, 2, 3].map((s) => [`z${s}`, zeroTotal(a.params * 1e9, a.dp, s)]));
const tpX = (a) => { const { msg, per } = tpc(a); return { message: msg, per_layer: per }; };
const waitX = (a) => ({ last: Math.max(...arr(a)) });
const X = {
  ring_send: (a) => ({ factor: sendFactor(a.ranks) }), ring_bound: (a) => ({ send: ringOf(a).send_per_rank }),
  dp_weight: (a) => ({ mean: sum(a.grads) / a.grads.length }), buggy_weight: (a) => X.dp_weight(a),
  step: (a) => stepX(a, 0), overlap_step: (a) => stepX(a, 1), full_overlap: (a) => stepX(a, 1),
  zero_state: zeroX, zero_peak: zeroX, smallest_stage: zeroX, zero_send: (a) => ({ ddp: zeroSend(a, 0) }),
  tp_send_layer: tpX, tp_step: tpX, straggler_step: waitX, straggler_wait: waitX, slow_rank: waitX,
  stage_acts: (a) => {
    const o = planOf(a);
    return { m: o.microbatches, flight: o.in_flight, layers: a.layers / a.pp, per_layer: PL().activations(a.seq, a.micro_batch, a.hidden, a.heads, a.tp, a.tp > 1, a.recompute, a)[0] };
  },
};
const args = (q, params) => Object.assign({}, q.fixed, params);
const expected = (q, params) => B[q.builder](args(q, params));
function values(q, params) {
  const e = expected(q, params), out = X[q.builder] ? X[q.builder](args(q, params)) : {};
  out.answer = q.kind === 'int' ? e : e.value;
  return out;
}

// == reading and checking (answers/checks twins)
const close = (a, b, tol) => Math.abs(a - b) <= Math.max(tol * Math.max(Math.abs(a), Math.abs(b)), 1e-12);
// A sentence of the page's bank (site.TEXT), {key} filled from vars.
const say = (T, k, v) => T[k].replace(/\{(\w+)\}/g, (_, n) => v[n]);

// The typed text as the grader reads it: [value in SI units or a plain number, bare number or null].
function read(q, text, T) {
  const t = String(text).trim(), name = q.answer, bare = NUMBER.test(t) ? Number(t) : null, v = { name, text: `'${t}'`, t };
  const fail = (k, more) => { throw new Error(say(T, k, Object.assign(v, more))); };
  if (q.kind === 'int') {
    if (/^(none|无)$/i.test(t)) return [null, null];
    if (/^[+-]?\d+$/.test(t)) return [Number(t), null];
    fail('int');
  }
  if (q.kind === 'number' || q.kind === 'fraction') {
    const frac = q.kind === 'fraction', pc = t.endsWith('%');
    const x = frac && pc && t.length <= 64 && NUMBER.test(t.slice(0, -1)) ? Number(t.slice(0, -1)) / 100 : bare;
    if (x === null) fail(frac ? 'fraction' : 'number');
    if (!Number.isFinite(x)) fail('finite');
    if (frac && (x < 0 || x > 1)) fail(x > 1 && x <= 100 && !pc ? 'percent' : 'range', { share: M.trim(x / 100, 4) });
    return [x, null];
  }
  const unit = q.unit;
  let x;
  try { x = bare !== null ? bare * factor(unit) : M.parseQuantity(t, q.kind); } catch (e) { fail('quantity', { why: e.message, unit }); }
  if (!Number.isFinite(x)) fail('finite');
  if (x < 0) fail('quantity', { why: say(T, 'negative', v), unit });
  return [x, bare];
}

// A bits unit typed for a bytes answer (diagnose._BITS_UNIT): "1006.63 Mb", "25 Gb/s", "8 kbit".
const BITS = /(?<![A-Za-z])(?:[kMGTP]i?)?(?:b|bits?)(?:\/s|ps)?\s*$/;

// {status: ok|mistake|coincide|slip|wrong|error, keys, message}, the message as checks.value/exact words it;
// "coincide": several named mistakes give this same number here (questions.vectors words it for the box).
function check(q, params, text, bank) {
  const name = q.answer, T = bank.text;
  let x, bare;
  try { [x, bare] = read(q, text, T); } catch (e) { return { status: 'error', keys: [], message: e.message }; }
  const e = expected(q, params), r = (status, k, v, keys = []) => ({ status, keys, message: say(T, k, Object.assign({ name }, v)) });
  if (q.kind === 'int') return x === e ? r('ok', 'ok_int') : r('wrong', q.hint ? 'wrong_int_hint' : 'wrong_int', { x: x === null ? 'None' : x, hint: q.hint });
  if (close(x, e.value, e.tol)) return r('ok', 'ok');
  const shown = q.unit ? show(x, q.unit) : M.trim(x, 4), keys = [];
  if (bare === null && q.unit && q.kind !== 'time' && BITS.test(String(text).trim()) && close(x * 8, e.value, e.tol)) {
    return r('mistake', 'mistake', { shown, why: bank.mistakes.bits }, ['bits']);
  }
  for (const [k, v] of e.mistakes) if (close(x, v, e.tol) && !close(v, e.value, e.tol) && !keys.includes(k)) keys.push(k);
  if (keys.length > 1) return r('coincide', 'coincide', { shown, n: keys.length }, keys);
  if (keys.length) return r('mistake', 'mistake', { shown, why: bank.mistakes[keys[0]] }, keys);
  const suffix = name.split('_').pop();
  if (bare !== null && q.unit) {
    for (const alt of q.slip) {
      if (alt !== q.unit && close(bare * factor(alt), e.value, e.tol)) {
        return r('slip', 'slip', { shown, alt, suffix, unit: q.unit, right: show(e.value, q.unit).split(' ')[0], bare: M.trim(bare, 6) }, [alt]);
      }
    }
  }
  return r('wrong', 'wrong', { shown, tol: `${Math.round(e.tol * 100)}%` });
}

// == progress in localStorage (never sent): per question, answers checked (n), right (ok), worked solution opened (sol)
// Anything unreadable or out of shape counts as no progress; the next save writes a clean record.
const count = (x) => Number.isInteger(x) && x >= 0;
function load(s) {
  const out = {};
  try {
    for (const [id, r] of Object.entries(JSON.parse(s.getItem(KEY)).q)) {
      const sol = r && r.sol === undefined ? 0 : r && r.sol;
      if (r && count(r.n) && count(r.ok) && r.ok <= r.n && count(sol)) out[id] = { n: r.n, ok: r.ok, sol };
    }
  } catch (e) { return {}; }
  return out;
}
function save(s, rec) { try { s.setItem(KEY, JSON.stringify({ v: 1, q: rec })); } catch (e) { /* full or off */ } }
// Add to one question's record, re-read first: another tab may have saved.
function bump(all, id, add) {
  const cur = load(store), mine = cur[id] || { n: 0, ok: 0, sol: 0 };
  for (const [k, v] of Object.entries(add)) mine[k] += v;
  cur[id] = all[id] = mine;
  save(store, cur);
}

// == the page
const el = (tag, cls, text) => { const n = document.createElement(tag); if (cls) n.className = cls; if (text !== undefined) n.textContent = text; return n; };
const nb = (t) => M.keepUnits(t);
const urlSeed = (id) => { const s = Number(new URLSearchParams(location.search).get(`p-${id}`)); return Number.isInteger(s) && s > 0 && s <= SEED_MAX ? s : 0; };
function setUrlSeed(id, seed) {
  const u = new URL(location.href);
  if (seed) u.searchParams.set(`p-${id}`, seed); else u.searchParams.delete(`p-${id}`);
  history.replaceState(history.state, '', u);
}
let store = { getItem: () => null, setItem() {} };  // when storage is off, progress is only not kept
try { store = root.localStorage || store; } catch (e) { /* keep the stand-in */ }

// A seed whose numbers tell the mistakes `keys` apart (each differs from the others and from the answer).
function separating(q, keys, tries = 200) {
  for (let i = 0; i < tries; i++) {
    const seed = 1 + Math.floor(Math.random() * SEED_MAX), e = expected(q, generate(q, seed));
    const vals = keys.map((k) => e.mistakes.find(([m]) => m === k)[1]).concat([e.value]);
    if (vals.every((a, j) => vals.every((b, l) => j === l || !close(a, b, e.tol)))) return seed;
  }
  return 1 + Math.floor(Math.random() * SEED_MAX);
}

// A box: a wrong answer gets the named mistake and a hint only; the worked solution opens on 看解答
// or after the second wrong answer to the same numbers (and after a right one).
function mountBox(box, q, bank, all) {
  const T = bank.text, id = `pb-q-${q.id.replace(/\W/g, '-')}`;
  let seed = urlSeed(q.id), params, wrong = 0, offer = null;
  box.innerHTML = `<p class="pb-q-src"></p><p class="pb-q-prompt"></p><form class="pb-q-form"><label for="${id}"></label><input id="${id}" type="text" autocomplete="off" spellcheck="false">
<span class="pb-actions"><button type="submit"></button><button type="button" class="pb-q-show"></button><button type="button" class="pb-q-new"></button></span></form><p class="pb-q-fb" role="status" aria-live="polite"></p><div class="pb-q-sol" hidden></div><p class="pb-q-stat"></p>`;
  const [src, prompt, form, fb, sol, stat] = box.children, [label, input] = form.children;
  const [ok, show, again] = form.querySelectorAll('button');
  src.textContent = say(T, 'source', q); label.textContent = q.label; ok.textContent = T.check; show.textContent = T.show;
  const status = () => { const r = all[q.id]; stat.textContent = r ? say(T, 'stat', r) : ''; };
  const reveal = (counted) => {
    if (!sol.hidden) return;
    sol.hidden = false; show.hidden = true;
    if (counted) { bump(all, q.id, { sol: 1 }); status(); }
  };
  const render = () => {
    params = generate(q, seed);
    prompt.textContent = nb(fill(q.prompt, q, params, {}) + say(T, seed ? 'drawn' : 'book', { seed }));
    sol.replaceChildren(el('strong', '', T.solution), document.createTextNode(nb(fill(q.solution, q, params, values(q, params)))));
    sol.hidden = true; show.hidden = false; wrong = 0; offer = null;
    again.textContent = T.again; again.classList.remove('pb-q-offer');
    fb.textContent = ''; fb.className = 'pb-q-fb'; status();
  };
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const r = check(q, params, input.value, bank), right = r.status === 'ok';
    fb.className = `pb-q-fb pb-q-${r.status}`;
    fb.textContent = r.message;
    if (r.status === 'error') return;
    if (!right) wrong += 1;
    bump(all, q.id, { n: 1, ok: right ? 1 : 0 });
    status();
    if (r.status === 'coincide') { offer = r.keys; again.textContent = T.separate; again.classList.add('pb-q-offer'); }
    if (right || wrong >= 2) reveal(!right && sol.hidden);
    else if (sol.hidden) fb.textContent += `\n${T.retry}`;
  });
  show.addEventListener('click', () => reveal(true));
  again.addEventListener('click', () => {
    seed = offer ? separating(q, offer) : 1 + Math.floor(Math.random() * SEED_MAX); input.value = '';
    setUrlSeed(q.id, seed); render(); input.focus();
  });
  render();
}

function mountSummary(box, bank) {
  const rec = load(store), table = el('table', 'pb-q-summary'), head = el('tr');
  for (const h of bank.text.head) { const th = el('th', '', h); th.scope = 'col'; head.append(th); }
  table.append(head);
  for (const [ch, ids] of Object.entries(bank.index || {})) {
    const tr = el('tr'), done = ids.filter((i) => rec[i] && rec[i].ok > 0).length, n = ids.reduce((s, i) => s + (rec[i] ? rec[i].n : 0), 0);
    const seen = ids.filter((i) => rec[i] && rec[i].sol > 0).length;
    tr.dataset.chapter = ch;
    tr.append(el('td', '', (bank.titles || {})[ch] || ch), el('td', '', `${done} / ${ids.length}`), el('td', '', String(n)), el('td', '', String(seen)));
    table.append(tr);
  }
  box.replaceChildren(table);
}

function mountAll() {
  let bank;
  try { bank = JSON.parse(document.getElementById('pb-bank').textContent); } catch (e) { return; }
  const byId = Object.fromEntries(bank.questions.map((q) => [q.id, q])), all = load(store);
  document.querySelectorAll('.pb-practice[data-q]').forEach((box) => { if (byId[box.dataset.q]) mountBox(box, byId[box.dataset.q], bank, all); });
  document.querySelectorAll('.pb-practice-summary').forEach((box) => mountSummary(box, bank));
}

const api = { rng, generate, fill, expected, values, read, check, load, separating, nb, mountAll };
if (typeof module === 'object' && module.exports) module.exports = api;
else { root.PBPractice = api; mountAll(); }
})(typeof globalThis !== 'undefined' ? globalThis : this);
