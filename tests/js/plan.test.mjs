// node --test tests/js/plan.test.mjs : the plan builder's JavaScript twin against tests/vectors/plan.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { assertClose, calc, CALC } from './calc.mjs';
globalThis.PBModel = calc('model.js');
const { FIELDS, evaluate, sentence, EXPORT_KEY } = calc('plan.js');

const data = JSON.parse(readFileSync(new URL('../vectors/plan.json', import.meta.url), 'utf8'));


test('fields and limits are parallel_budget.book.plan_vectors.FIELDS', () => {
  assert.deepEqual(FIELDS, data.fields);
});

test('enough cases: valid, invalid, searches', () => {
  assert.ok(data.cases.length >= 100);
  assert.ok(data.cases.filter((c) => c.errors).length >= 20);
  assert.ok(data.cases.filter((c) => c.search && c.out).length >= 5);
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
      const s = sentence(code, r.out, r.s, r.split);
      assert.match(s, /[\u4e00-\u9fff]/);
      assert.doesNotMatch(s, /NaN|undefined|Infinity/);
    }
    if (c.search) {
      assert.equal(search.candidates, want.candidates, 'candidates');
      // Same plans in the same order (exact float ties are broken the same way on both sides).
      assertClose(search.plans, want.plans, 'search.plans', 1e-15);
    }
  });
}

test('the record export key is the one record.js reads', () => {
  assert.match(readFileSync(new URL('record.js', CALC), 'utf8'), new RegExp(EXPORT_KEY));
});

test('a plan sent by the builder passes the record page check and fills its fields', () => {
  const { planProblem, planFields, PLAN_KEY } = calc('record.js');
  assert.equal(PLAN_KEY, EXPORT_KEY);
  const r = evaluate({});
  const p = { format: 'pb-plan', version: 1, link: 'x#plan.dp=16', numbers: ['DP=16', 'b'], assumptions: ['a'],
    verdict: r.out.codes.map((c) => sentence(c, r.out, r.s, r.split)), fits: true };
  assert.equal(planProblem(p), '');
  const { own, ifEmpty } = planFields(p);
  assert.equal(own.plan_numbers, 'DP=16\nb');
  assert.match(ifEmpty.overlap, /^重叠/);
  assert.equal(ifEmpty.bw_kind, 'bytes');
  for (const bad of [null, {}, { ...p, format: 'x' }, { ...p, version: 2 }, { ...p, numbers: 'x' }, { ...p, verdict: [1] },
    { ...p, link: 7 }, { ...p, numbers: Array(61).fill('x') }]) assert.match(planProblem(bad), /[\u4e00-\u9fff]/);
});
