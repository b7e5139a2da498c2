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

// hfu_from_step: the HFU and MFU a measured step or tokens/s gives, or the same refusal (hfufit.py).
test('hfu cases: solved from a step, from tokens/s and both; every refusal', () => {
  assert.ok(data.hfus.filter((c) => c.fit).length >= 6);
  for (const why of ['相差超过 2%', '还短', '不能配 compute']) assert.ok(data.hfus.some((c) => c.error && c.error.includes(why)), why);
});
for (const [i, c] of data.hfus.entries()) {
  test(`hfu from step ${i} ${JSON.stringify(c.input).slice(0, 80)}`, () => {
    const r = P.evaluate(c.input);
    if (c.error) {
      assert.equal(r.out, undefined);
      assert.deepEqual(Object.values(r.errors), [c.error]);
      return;
    }
    assert.equal(r.errors, undefined, JSON.stringify(r.errors));
    const { s, ...fit } = r.fit;
    assertClose(fit, c.fit, 'fit', 1e-15);
    assert.ok(s.measured.includes('hfu'));
  });
}
test('hfu_from_step needs a step or tokens/s; bad field text is refused by name', () => {
  const r = P.evaluate({});
  assert.throws(() => N.hfuFromStep(P.core, r.s, r.split), { message: 'hfu_from_step() 需要实测的 step（如 "8.2 s"）或 tokens_per_s（每秒词元数）二者之一。' });
  assert.equal(r.fit, null);
  assert.match(P.evaluate({ measured_step: '-3' }).errors.measured_step, /^需要在 .* 之间，收到 -3$/);
  assert.match(P.evaluate({ measured_tokens: 'abc' }).errors.measured_tokens, /需要一个数，收到 “abc”/);
});
test('g4 is Python format(x, ".4g")', () => {
  const want = { 8.2: '8.2', 0.00012345: '0.0001234', 1e-5: '1e-05', 12345: '1.234e+04', 1234.5: '1234', 9.99951: '10', 99999: '1e+05', 1000: '1000', 0.0125: '0.0125', 123.45: '123.5' };
  for (const [x, g] of Object.entries(want)) assert.equal(N.g4(Number(x)), g, x);
});
