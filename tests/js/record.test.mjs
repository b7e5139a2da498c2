// node --test: the record page's pure parts (validation of stored/imported JSON, Markdown export).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { calc } from './calc.mjs';
const { empty, problem, toMarkdown } = calc('record.js');

const schema = [
  { title: '条件', items: [
    { name: 'model', label: '模型规模', check: false, options: null },
    { name: 'bw_kind', label: '带宽单位', check: false, options: { '': '未填', bytes: '字节', bits: '比特' } },
  ] },
  { title: '自检', items: [{ name: 'c_bits', label: '写明了带宽是字节还是比特', check: true, options: null }] },
];

test('an empty record of the form is valid', () => {
  assert.equal(problem(empty(schema), schema), '');
});

test('foreign or corrupted values are refused with a Chinese reason', () => {
  const good = { ...empty(schema), fields: { model: '7B', bw_kind: 'bits' }, checks: { c_bits: true } };
  assert.equal(problem(good, schema), '');
  const bad = [
    null, [], '7B', 42, {},
    { ...good, format: 'other' },
    { ...good, version: 2 },
    { ...good, fields: [] },
    { ...good, fields: { model: 7 } },
    { ...good, fields: { unknown: 'x' } },
    { ...good, fields: { c_bits: 'x' } },
    { ...good, fields: { bw_kind: 'toString' } },
    { ...good, checks: { c_bits: 'yes' } },
    { ...good, checks: { model: true } },
    { ...good, fields: { model: 'x'.repeat(20001) } },
  ];
  for (const b of bad) assert.match(problem(b, schema), /[\u4e00-\u9fff]/, JSON.stringify(b)?.slice(0, 80));
});

test('Markdown export lists the fields, option texts and ticks', () => {
  const md = toMarkdown({ ...empty(schema), fields: { model: '7B\n两行', bw_kind: 'bits' }, checks: { c_bits: true }, saved: 'T' }, schema);
  assert.match(md, /^# 并行方案与通信预算/);
  assert.match(md, /- \*\*模型规模\*\*：7B\n  两行/);
  assert.match(md, /- \*\*带宽单位\*\*：比特/);
  assert.match(md, /- \[x\] 写明了带宽是字节还是比特/);
  const blank = toMarkdown(empty(schema), schema);
  assert.match(blank, /- \*\*模型规模\*\*：（未填）/);
  assert.match(blank, /- \[ \] 写明了/);
});

