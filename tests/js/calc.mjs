// Where the tests load the page's scripts from: book/_static/calc (the readable sources), or
// PB_CALC_DIR, e.g. a built site's _static/calc (the minified files the site ships).
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';

export const CALC = process.env.PB_CALC_DIR
  ? pathToFileURL(resolve(process.env.PB_CALC_DIR) + '/')
  : new URL('../../book/_static/calc/', import.meta.url);
const require = createRequire(import.meta.url);
export const calc = (name) => require(new URL(name, CALC).pathname);
