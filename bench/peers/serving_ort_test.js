// Tests of serving_ort.js's request parser against JSON.parse (no
// onnxruntime needed):  node --test bench/peers/serving_ort_test.js

'use strict';

const assert = require('node:assert');
const test = require('node:test');
const {Parser, RequestError} = require('./serving_ort.js');

const NUM_DENSE = 13;
const NUM_FIELDS = 26;

// A deterministic generator (no Math.random: failures must reproduce).
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 4294967296;
  };
}

// A columnar request of `rows` rows as text, and what it holds.
function request(rows, seed, {space = ' ', ids = null, exotic = false, shuffle = true} = {}) {
  const r = rng(seed);
  const dense = [];
  const denseText = [];
  for (let i = 0; i < rows; ++i) {
    const row = [];
    const text = [];
    for (let d = 0; d < NUM_DENSE; ++d) {
      let t;
      const k = r();
      if (exotic && k < 0.2) t = (r() * 8 - 4).toExponential(6);           // 1.5e+0
      else if (exotic && k < 0.3) t = String(Math.floor(r() * 100) - 50);   // integers
      else if (exotic && k < 0.4) t = (r() * 4).toPrecision(17);            // > 15 digits
      else t = (r() * 4).toPrecision(9);
      row.push(Number(t));
      text.push(t);
    }
    dense.push(row);
    denseText.push('[' + text.join(',' + space) + ']');
  }
  const fieldIds = [];
  const parts = ['"dense":' + space + '[' + denseText.join(',' + space) + ']'];
  for (let f = 0; f < NUM_FIELDS; ++f) {
    const col = [];
    for (let i = 0; i < rows; ++i) {
      col.push(ids ? ids[(f * rows + i) % ids.length]
                   : BigInt(f) * 4294967296n + BigInt(Math.floor(r() * (1 << 24))));
    }
    fieldIds.push(col);
    parts.push(`"C${f + 1}/ids":${space}[${col.join(',' + space)}]`);
    parts.push(`"C${f + 1}/row_splits":${space}[${Array.from({length: rows + 1}, (_, i) => i)
                                                     .join(',' + space)}]`);
  }
  // Keys in a shuffled order.
  for (let i = shuffle ? parts.length - 1 : 0; i > 0; --i) {
    const j = Math.floor(r() * (i + 1));
    [parts[i], parts[j]] = [parts[j], parts[i]];
  }
  const body = `{${space}"signature_name":${space}"serving_default",${space}"inputs":${space}` +
               `{${space}${parts.join(',' + space)}${space}}${space}}`;
  return {body: Buffer.from(body), dense, fieldIds};
}

function assertParsed(got, want, rows) {
  assert.strictEqual(got.rows, rows);
  for (let i = 0; i < rows; ++i) {
    for (let d = 0; d < NUM_DENSE; ++d) {
      assert.strictEqual(got.dense[i * NUM_DENSE + d], Math.fround(want.dense[i][d]),
                         `dense[${i}][${d}]`);
    }
    for (let f = 0; f < NUM_FIELDS; ++f) {
      assert.strictEqual(got.ids[i * NUM_FIELDS + f], want.fieldIds[f][i], `C${f + 1}[${i}]`);
    }
  }
}

test('parses what JSON.parse parses, in any key order and spacing', () => {
  const p = new Parser();
  for (const [rows, seed, space] of [[1, 1, ' '], [7, 2, ''], [256, 3, ' '], [3, 4, '\n\t ']]) {
    const req = request(rows, seed, {space});
    assertParsed(p.parse(req.body), req, rows);
    const ref = JSON.parse(req.body.toString()).inputs;
    assert.strictEqual(ref.dense.length, rows);
  }
});

test('floats in exponent form, integers and 17 digits round as Number() does', () => {
  const p = new Parser();
  const req = request(64, 5, {exotic: true});
  assertParsed(p.parse(req.body), req, 64);
});

test('ids are exact over the int64 range', () => {
  const ids = [0n, -1n, -100001n, 9007199254740991n, 9007199254740993n, -9007199254740993n,
               9223372036854775807n, -9223372036854775808n, 123456789012345n,
               -4294967297n];
  const p = new Parser();
  const req = request(5, 6, {ids});
  assertParsed(p.parse(req.body), req, 5);
});

test('a reused parser gives fresh arrays', () => {
  const p = new Parser();
  const a = request(4, 7);
  const b = request(2, 8);
  const ga = p.parse(a.body);
  const gb = p.parse(b.body);
  assertParsed(ga, a, 4);
  assertParsed(gb, b, 2);
});

function rejects(body, pattern) {
  const p = new Parser();
  assert.throws(() => p.parse(Buffer.from(body)),
                (e) => e instanceof RequestError && pattern.test(e.message));
}

test('bad requests are RequestErrors that say what is wrong', () => {
  const one = request(2, 9, {shuffle: false}).body.toString();
  rejects('{"instances": [{"dense": [1]}]}', /row format/);
  rejects(one.replace('"C3/row_splits": [0, 1, 2]', '"C3/row_splits": [0, 2, 2]'),
          /exactly one id per field and row/);
  rejects(one.replace('"C3/row_splits": [0, 1, 2]', '"C3/row_splits": [0, 1]'),
          /does not split/);
  rejects(one.replace('"C7/ids"', '"C99/ids"'), /unknown input "C99\/ids"/);
  rejects(one.replace(/"C5\/ids": \[[^\]]*\]/, '"C5/ids": [1.5, 2]'), /not an integer/);
  rejects(one.replace(/"C5\/ids": \[[^\]]*\]/, '"C5/ids": [9223372036854775808, 2]'),
          /out of the int64 range/);
  rejects(one.replace(/\]\]/, ', 1]]'), /has 14 values; expected 13/);
  rejects(one.slice(0, -1), /malformed JSON/);
  rejects(one + 'x', /trailing bytes/);
  rejects(one.replace(/, "C9\/row_splits": \[[^\]]*\]/, ''), /"C9\/row_splits" is missing/);
});
