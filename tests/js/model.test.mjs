// node --test tests/js/ : the JavaScript calculators against the Python vectors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { calc } from './calc.mjs';
const { FIELDS, evaluate, fmt, parseParams, parseQuantity } = calc('model.js');

const data = JSON.parse(readFileSync(new URL('../vectors/calculators.json', import.meta.url), 'utf8'));
const CALCS = Object.keys(FIELDS);

function close(actual, expected, path) {
  if (Array.isArray(expected)) {
    assert.equal(actual.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => close(actual[i], e, `${path}[${i}]`));
  } else if (expected !== null && typeof expected === 'object') {
    assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${path}: keys`);
    for (const k of Object.keys(expected)) close(actual[k], expected[k], `${path}.${k}`);
  } else if (typeof expected === 'number') {
    assert.ok(Number.isFinite(actual), `${path}: ${actual} is not finite`);
    const tol = Math.max(1e-9 * Math.max(Math.abs(actual), Math.abs(expected)), 1e-12);
    assert.ok(Math.abs(actual - expected) <= tol, `${path}: ${actual} != ${expected}`);
  } else {
    assert.equal(actual, expected, path);
  }
}

test('the vector file has at least 200 cases, valid and invalid', () => {
  assert.ok(data.cases.length >= 200);
  assert.ok(data.cases.filter((c) => c.errors).length >= 50);
});

test('fields and limits are the same as parallel_budget.book.calculators.FIELDS', () => {
  assert.deepEqual(FIELDS, data.fields);
});

for (const [i, c] of data.cases.entries()) {
  const name = `${i} ${c.kind} ${JSON.stringify(c.input)}`;
  if (CALCS.includes(c.kind)) {
    test(name, () => {
      const r = evaluate(c.kind, c.input);
      if (c.errors) {
        assert.equal(r.out, undefined, 'computed despite invalid input');
        assert.deepEqual(Object.keys(r.errors), c.errors);
        for (const msg of Object.values(r.errors)) assert.match(msg, /[\u4e00-\u9fff]/, 'message is Chinese');
      } else {
        assert.equal(r.errors, undefined, JSON.stringify(r.errors));
        close(r.out, c.out, 'out');
      }
    });
  } else if (c.kind === 'parse' || c.kind === 'params') {
    test(name, () => {
      const run = () => (c.kind === 'parse' ? parseQuantity(c.input.text, c.input.as) : parseParams(c.input.text));
      if (c.errors) assert.throws(run, /[\u4e00-\u9fff]/);
      else close(run(), c.value, 'value');
    });
  } else if (c.kind === 'fmt') {
    test(name, () => assert.equal(fmt(c.input.value, c.input.base, c.input.unit), c.text));
  } else {
    test(name, () => assert.fail(`unknown case kind ${c.kind}`));
  }
}
