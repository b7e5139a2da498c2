// node --test tests/js/ : the practice boxes' twins (seeded draw, templates, answer reader,
// diagnose and the grader's feedback) against tests/vectors/questions.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { calc } from './calc.mjs';
globalThis.PBModel = calc('model.js');
const P = calc('practice.js');

const data = JSON.parse(readFileSync(new URL('../vectors/questions.json', import.meta.url), 'utf8'));
const near = (a, b) => Math.abs(a - b) <= Math.max(1e-9 * Math.max(Math.abs(a), Math.abs(b)), 1e-15);

test('the bank has every question with draws and cases of every status', () => {
  assert.ok(data.questions.length >= 25);
  const statuses = new Set(data.questions.flatMap((q) => q.draws.flatMap((d) => d.cases.map((c) => c.status))));
  assert.deepEqual([...statuses].sort(), ['coincide', 'error', 'mistake', 'ok', 'slip', 'wrong']);
});

test('every named mistake of every question has a case that names it', () => {
  for (const { question, draws } of data.questions) {
    const keys = new Set(draws.flatMap((d) => (d.expected.mistakes || []).map(([k]) => k)));
    const named = new Set(draws.flatMap((d) => d.cases.flatMap((c) => c.keys || [])));
    for (const k of keys) assert.ok(named.has(k), `${question.id}: no case for mistake ${k}`);
  }
});

for (const { question: q, draws } of data.questions) {
  test(`${q.id}: same numbers, text and expected values from the same seed`, () => {
    for (const d of draws) {
      const params = P.generate(q, d.seed);
      assert.deepEqual(params, d.params, `seed ${d.seed}`);
      assert.equal(P.fill(q.prompt, q, params, {}), d.prompt, `prompt, seed ${d.seed}`);
      assert.equal(P.fill(q.solution, q, params, P.values(q, params)), d.solution, `solution, seed ${d.seed}`);
      const e = P.expected(q, params);
      if (q.kind === 'int') { assert.equal(e, d.expected.value); continue; }
      assert.ok(near(e.value, d.expected.value), `${e.value} != ${d.expected.value}`);
      assert.equal(e.tol, d.expected.tol);
      assert.equal(e.mistakes.length, d.expected.mistakes.length);
      e.mistakes.forEach(([k, v], i) => {
        assert.equal(k, d.expected.mistakes[i][0]);
        assert.ok(near(v, d.expected.mistakes[i][1]), `${k}: ${v} != ${d.expected.mistakes[i][1]}`);
      });
    }
  });

  test(`${q.id}: typed answers get the grader's verdict and words`, () => {
    for (const d of draws) {
      for (const c of d.cases) {
        const r = P.check(q, d.params, c.text, data);
        const where = `seed ${d.seed}, typed ${JSON.stringify(c.text)}`;
        assert.equal(r.status, c.status, `${where}: ${r.message}`);
        if (c.message !== undefined) assert.equal(r.message, c.message, where);
        if (c.keys) assert.deepEqual(r.keys, c.keys, where);
        assert.ok(r.message && !/NaN|undefined|Infinity/.test(r.message.replace(c.text, '')), `${where}: ${r.message}`);
        if (r.status === 'error') assert.ok(r.message.includes(q.answer), `${where}: ${r.message}`);
      }
    }
  });
}

test('the generator stays in range and never repeats the book draw for every seed', () => {
  const q = data.questions[0].question;
  const seen = new Set();
  for (let s = 1; s <= 200; s++) seen.add(JSON.stringify(P.generate(q, s)));
  assert.ok(seen.size > 20);
});

test('corrupted progress in storage reads as empty, bad entries are dropped', () => {
  const store = (v) => ({ getItem: () => v });
  for (const bad of ['{', 'null', '[]', '"x"', '{"q":5}', '{"q":{"a":{"n":-1,"ok":0}}}', '{"q":{"a":{"n":1,"ok":2}}}',
    '{"q":{"a":{"n":1,"ok":0,"sol":-1}}}', '{"q":{"a":{"n":1,"ok":0,"sol":"x"}}}']) {
    assert.deepEqual(P.load(store(bad)), {}, bad);
  }
  // a record saved before the worked solution was counted reads as never opened
  assert.deepEqual(P.load(store('{"v":1,"q":{"a":{"n":3,"ok":1},"b":"x","c":null,"d":{"n":2,"ok":-1},"e":{"n":2,"ok":0,"sol":1}}}')),
    { a: { n: 3, ok: 1, sol: 0 }, e: { n: 2, ok: 0, sol: 1 } });
  assert.deepEqual(P.load({ getItem() { throw new Error('denied'); } }), {});
});

test('coinciding mistakes: the offered seed tells them apart', () => {
  const cases = data.questions.flatMap(({ question: q, draws }) => draws.flatMap((d) =>
    d.cases.filter((c) => c.status === 'coincide').map((c) => [q, c])));
  assert.ok(cases.length >= 3);
  for (const [q, c] of cases) {
    const seed = P.separating(q, c.keys), e = P.expected(q, P.generate(q, seed));
    const vals = c.keys.map((k) => e.mistakes.find(([m]) => m === k)[1]).concat([e.value]);
    vals.forEach((a, i) => vals.forEach((b, j) => i === j || assert.ok(!near(a, b) && Math.abs(a - b) > 0.01 * Math.max(Math.abs(a), Math.abs(b)), `${q.id} seed ${seed}`)));
  }
});

test('numbers keep their units on the same line', () => {
  assert.equal(P.nb('发送 3 GB，用时 120 ms，7 × 10⁹ 个参数'), '发送 3\u00a0GB，用时 120\u00a0ms，7\u00a0×\u00a010⁹ 个参数');
});
