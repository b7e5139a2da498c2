// node --test tests/js/plan.test.mjs : the plan builder's JavaScript twin against tests/vectors/plan.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { assertClose, calc, CALC } from './calc.mjs';
globalThis.PBModel = calc('model.js');
const P = calc('plan.js');
const { FIELDS, evaluate, sentence, assumptions, layouts } = P;

const data = JSON.parse(readFileSync(new URL('../vectors/plan.json', import.meta.url), 'utf8'));

test('fields and limits are parallel_budget.book.plan_vectors.FIELDS', () => {
  assert.deepEqual(FIELDS, data.fields);
});

test('enough cases: valid, invalid, searches, layouts', () => {
  assert.ok(data.cases.length >= 100);
  assert.ok(data.cases.filter((c) => c.errors).length >= 20);
  assert.ok(data.cases.filter((c) => c.search && c.out).length >= 5);
  assert.ok(data.layouts.length >= 5);
});

for (const [i, c] of data.cases.entries()) {
  test(`${i} ${JSON.stringify(c.input)}${c.search ? ' + search' : ''}`, () => {
    const r = evaluate(c.input, c.search);
    if (c.errors) {
      assert.equal(r.out, undefined, 'computed despite invalid input');
      assert.deepEqual(Object.keys(r.errors), c.errors);
      for (const msg of Object.values(r.errors)) assert.match(msg, /[\u4e00-\u9fff]/, 'message is Chinese');
      return;
    }
    assert.equal(r.errors, undefined, JSON.stringify(r.errors));
    const { search, ...rest } = r.out;
    const { search: want, ...expected } = c.out;
    assertClose(rest, expected, 'out', 1e-15);
    for (const code of r.out.codes) {
      const s = sentence(code, r.out, r.s);
      assert.match(s, /[\u4e00-\u9fff]/);
      assert.doesNotMatch(s, /NaN|undefined|Infinity|null/);
    }
    for (const a of assumptions(r.out, r.s)) assert.doesNotMatch(a, /NaN|undefined|Infinity|null/);
    if (c.search) assertClose(search, want, 'search', 1e-15);
  });
}

for (const [i, c] of data.layouts.entries()) {
  test(`layout ${i} ${JSON.stringify(c.input)}`, () => {
    const got = layouts(evaluate(c.input));
    assertClose(got.timeline, c.timeline, 'timeline', 1e-15);
    assertClose(got.memory, c.memory, 'memory', 1e-15);
    assertClose(got.scaling, c.scaling, 'scaling', 1e-15);
  });
}

test('presets fill the fields with the package presets (llama2-7b and a100-40gb are the defaults)', () => {
  const byName = Object.fromEntries(FIELDS.map((f) => [f.name, f.default]));
  for (const [k, v] of Object.entries(P.PRESETS.model['llama2-7b'])) assert.equal(byName[k], v, k);
  for (const [k, v] of Object.entries(P.PRESETS.cluster['a100-40gb'])) assert.equal(byName[k], v, k);
  const big = evaluate({ ...P.PRESETS.model['llama2-70b'], ...P.PRESETS.cluster['h100-80gb'], global_batch: '64', dp: '4', tp: '8', pp: '4', zero_stage: '1' });
  assert.ok(Math.abs(big.out.params - 68976648192) / 68976648192 < 1e-3);
  assert.equal(big.s.device_memory, 80 * 2 ** 30);
});

test('the record export key is the one record.js reads', () => {
  const { EXPORT_KEY } = calc('planview.js');
  assert.match(readFileSync(new URL('record.js', CALC), 'utf8'), new RegExp(EXPORT_KEY));
});

test('a plan sent by the builder passes the record page check and fills its fields', () => {
  const { planProblem, planFields, PLAN_KEY } = calc('record.js');
  const { EXPORT_KEY } = calc('planview.js');
  assert.equal(PLAN_KEY, EXPORT_KEY);
  const r = evaluate({});
  const p = { format: 'pb-plan', version: 1, link: 'x#plan.dp=16', numbers: ['DP=16', 'b'], assumptions: assumptions(r.out, r.s),
    verdict: r.out.codes.map((c) => sentence(c, r.out, r.s)), fits: true };
  assert.equal(planProblem(p), '');
  const { own, ifEmpty } = planFields(p);
  assert.equal(own.plan_numbers, 'DP=16\nb');
  assert.match(ifEmpty.overlap, /^重叠/);
  assert.match(ifEmpty.measured, /^全部按数据手册/);
  const cal = evaluate({ dp_nccl: readFileSync(new URL('../vectors/nccltests.json', import.meta.url), 'utf8') && JSON.parse(readFileSync(new URL('../vectors/nccltests.json', import.meta.url), 'utf8')).cases[0].text });
  const pc = { ...p, verdict: cal.out.codes.map((c) => sentence(c, cal.out, cal.s)) };
  assert.match(planFields(pc).ifEmpty.measured, /^实测：DP 组的 α 与带宽（nccl-tests，16 卡 all-reduce/);
  assert.equal(ifEmpty.bw_kind, 'bytes');
  for (const bad of [null, {}, { ...p, format: 'x' }, { ...p, version: 2 }, { ...p, numbers: 'x' }, { ...p, verdict: [1] },
    { ...p, link: 7 }, { ...p, numbers: Array(61).fill('x') }]) assert.match(planProblem(bad), /[\u4e00-\u9fff]/);
});
