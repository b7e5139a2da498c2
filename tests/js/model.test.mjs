// node --test tests/js/ : the JavaScript calculators against the Python vectors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { assertClose, calc } from './calc.mjs';
const { FIELDS, evaluate, fmt, fmtAuto, fmtCount, parseParams, parseQuantity } = calc('model.js');

const data = JSON.parse(readFileSync(new URL('../vectors/calculators.json', import.meta.url), 'utf8'));
const CALCS = Object.keys(FIELDS);


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
        assertClose(r.out, c.out, 'out');
      }
    });
  } else if (c.kind === 'parse' || c.kind === 'params') {
    test(name, () => {
      const run = () => (c.kind === 'parse' ? parseQuantity(c.input.text, c.input.as) : parseParams(c.input.text));
      if (c.errors) assert.throws(run, /[\u4e00-\u9fff]/);
      else assertClose(run(), c.value, 'value');
      // An ambiguous unit ("mb", "kb", "mB") is refused naming both readings, as units.parse does.
      for (const reading of c.readings || []) assert.throws(run, (e) => e.message.includes(` ${reading}（`), reading);
    });
  } else if (c.kind === 'fmt') {
    test(name, () => assert.equal(fmt(c.input.value, c.input.base, c.input.unit), c.text));
  } else if (c.kind === 'fmt_auto') {
    test(name, () => assert.equal(fmtAuto(c.input.value, c.input.base), c.text));
  } else if (c.kind === 'fmt_count') {
    test(name, () => assert.equal(fmtCount(c.input.value), c.text));
  } else {
    test(name, () => assert.fail(`unknown case kind ${c.kind}`));
  }
}
