// Where the tests load the page's scripts from: book/_static/calc (the readable sources), or
// PB_CALC_DIR, e.g. a built site's _static/calc (the minified files the site ships).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

export const CALC = process.env.PB_CALC_DIR
  ? pathToFileURL(resolve(process.env.PB_CALC_DIR) + '/')
  : new URL('../../book/_static/calc/', import.meta.url);
const require = createRequire(import.meta.url);
export const calc = (name) => require(new URL(name, CALC).pathname);

// Deep comparison of a JS result with a Python vector: same keys and lengths, strings equal, numbers
// within a relative 1e-9 (and an absolute floor `absTol` for values near zero).
export function assertClose(actual, expected, path, absTol = 1e-12) {
  if (Array.isArray(expected)) {
    assert.ok(Array.isArray(actual), `${path}: not an array`);
    assert.equal(actual.length, expected.length, `${path}: length`);
    expected.forEach((e, i) => assertClose(actual[i], e, `${path}[${i}]`, absTol));
  } else if (expected !== null && typeof expected === 'object') {
    assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${path}: keys`);
    for (const k of Object.keys(expected)) assertClose(actual[k], expected[k], `${path}.${k}`, absTol);
  } else if (typeof expected === 'number') {
    assert.ok(Number.isFinite(actual), `${path}: ${actual} is not finite`);
    const tol = Math.max(1e-9 * Math.max(Math.abs(actual), Math.abs(expected)), absTol);
    assert.ok(Math.abs(actual - expected) <= tol, `${path}: ${actual} != ${expected}`);
  } else {
    assert.equal(actual, expected, path);
  }
}
