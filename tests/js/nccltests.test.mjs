// node --test tests/js/nccltests.test.mjs : the builder's nccl-tests reader against tests/vectors/nccltests.json.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { assertClose, calc } from './calc.mjs';
const N = calc('nccltests.js');

const data = JSON.parse(readFileSync(new URL('../vectors/nccltests.json', import.meta.url), 'utf8'));

test('enough cases: every collective fitted, refusals naming a line and not', () => {
  const fits = data.cases.filter((c) => c.fit);
  assert.deepEqual(new Set(fits.map((c) => c.fit.collective)), new Set(['all-reduce', 'all-gather', 'reduce-scatter']));
  assert.ok(data.cases.filter((c) => c.error && c.line).length >= 8);
  assert.ok(data.cases.filter((c) => c.error && !c.line).length >= 3);
});

for (const [i, c] of data.cases.entries()) {
  test(`${i} ${c.name}`, () => {
    if (c.error) {
      assert.throws(() => N.fit(c.text), (e) => {
        assert.equal(e.message, c.error);
        assert.equal(e.line, c.line);
        return true;
      });
      return;
    }
    assertClose(N.fit(c.text), c.fit, 'fit', 1e-15);
  });
}

// The verdict's sentence on what was measured, for plans with and without fits (planreport._measured).
globalThis.PBModel = calc('model.js');
const P = calc('plan.js');
for (const [i, c] of data.plans.entries()) {
  test(`measured sentence ${i} ${Object.keys(c.input).join(',')}`, () => {
    const r = P.evaluate(c.input);
    assert.equal(r.errors, undefined, JSON.stringify(r.errors));
    assert.ok(r.out.codes.includes('measured'));
    assert.equal(P.sentence('measured', r.out, r.s), c.measured);
  });
}

// The overlap figure's sweep: the closed-form threshold and the exposed DP communication read off each timeline.
for (const [i, c] of data.overlaps.entries()) {
  test(`overlap layout ${i} ${JSON.stringify(c.input).slice(0, 80)}`, () => {
    const r = P.evaluate(c.input);
    assertClose(N.overlapLayout(P.core, r.s, r.split), c.layout, 'layout', 1e-15);
  });
}
