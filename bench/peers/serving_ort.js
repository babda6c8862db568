#!/usr/bin/env node
// ONNX Runtime peer of `bench/run serving` (see bench/README.md, "serving").
//
//   node bench/peers/serving_ort.js --model=MODEL.onnx [--port=0] [--threads=2]
//       [--workers=1] [--spinning=1] [--execution_mode=auto|sequential|parallel]
//       [--check=MODEL.onnx.check.json]
//
// Serves the DeepFM that bench/peers/serving_onnx_export.py exported (inputs
// dense [B, 13] float32 and ids [B, 26] int64 raw ids; the bucketing is in
// the graph) with onnxruntime-node (installed in bench/peers/ort/node_modules
// by scripts/install-deps.sh --bench) behind Node's own `http` server
// (HTTP/1.1 keep-alive, TCP_NODELAY), speaking TF Serving's REST predict API
// in the columnar form recflow's export takes:
//
//   POST /v1/models/NAME:predict
//   {"inputs": {"dense": [[13 floats] x B], "C1/ids": [...],
//               "C1/row_splits": [B+1], ..., "C26/..."}}
//   -> {"outputs": {"logits": [B], "probabilities": [B]}}
//
// Limitation: the ONNX model takes exactly one id per field and row, so
// every Cn/row_splits must be [0, 1, ..., B]; anything else (an empty or a
// multi-id bag) is answered 400 with a message saying so. Row-format
// ("instances") requests are answered 400 too.
//
// The body is read by a small JSON parser of its own (below) that writes
// the numbers straight into the input tensors' typed arrays: at 256
// candidates (158 KB) it takes ~0.65 of the time of JSON.parse alone, which
// would still leave the copy into typed arrays to do. It accepts any JSON
// whose "inputs" has the shape above (keys in any order, any whitespace,
// other top-level keys such as "signature_name" skipped). Floats: decimals
// of at most 15 digits and no exponent are converted as m / 10^k (both
// exact doubles, so the division is the correctly rounded double, as
// Number() gives), anything else by Number(); then rounded to float32.
// Ids: integers of at most 15 digits exactly as doubles, longer ones by
// BigInt (range-checked to int64).
//
// Session options: intraOpNumThreads = --threads, interOpNumThreads = 1 (the
// graph is a chain), graphOptimizationLevel 'all', the intra-op pool's
// spinning on or off (--spinning, session.intra_op.allow_spinning), and the
// execution mode: with --execution_mode=auto both 'sequential' and
// 'parallel' sessions are timed at startup (run only, median of alternating
// calls at 1 and 256 rows) and the faster at 256 rows is kept. --workers=W
// > 1 runs W processes (node:cluster, round-robin over connections), each
// with its own session of --threads intra-op threads.
//
// At startup every worker runs the exporter's check rows (a request body
// built from MODEL.onnx.check.json through this parser and the session) and
// refuses to serve when its answers differ from torch's by more than the
// file's tolerance (1e-5; the int8 model's file says 0.05).
// Prints `info side=ort ...` and then `listening port=P`.

'use strict';

const cluster = require('node:cluster');
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');

const NUM_DENSE = 13;
const NUM_FIELDS = 26;
const ORT_DIR = path.join(__dirname, 'ort', 'node_modules', 'onnxruntime-node');

function parseArgs(argv) {
  const a = {model: '', port: 0, threads: 2, workers: 1, spinning: 1, execution_mode: 'auto',
             check: ''};
  for (const s of argv) {
    const m = /^--([a-z_]+)=(.*)$/.exec(s);
    if (!m || !(m[1] in a)) die(`unknown argument ${s}`);
    a[m[1]] = typeof a[m[1]] === 'number' ? Number(m[2]) : m[2];
  }
  if (!a.model) die('--model=MODEL.onnx is required');
  if (!a.check) a.check = a.model + '.check.json';
  if (!['auto', 'sequential', 'parallel'].includes(a.execution_mode)) {
    die(`--execution_mode=${a.execution_mode}: expected auto, sequential or parallel`);
  }
  return a;
}

function die(msg) {
  process.stderr.write(`serving_ort: ${msg}\n`);
  process.exit(2);
}

function loadOrt() {
  try {
    return require(ORT_DIR);
  } catch (e) {
    die(`onnxruntime-node is not installed in ${path.dirname(ORT_DIR)} (${e.message.split('\n')[0]}); ` +
        'install it with: scripts/install-deps.sh --bench ' +
        '(or: cd bench/peers/ort && npm ci --ignore-scripts)');
  }
}

// --- the request parser -------------------------------------------------------

class RequestError extends Error {}

// 10^k for k <= 22: exact doubles.
const POW10 = Array.from({length: 23}, (_, k) => Number('1e' + k));

// Growable scratch arrays, reused across requests (one request parses at a
// time per process).
class Scratch {
  constructor(Type) {
    this.Type = Type;
    this.a = new Type(1024);
    this.n = 0;
  }
  grow() {
    const b = new this.Type(this.a.length * 2);
    b.set(this.a);
    this.a = b;
  }
}

function skipBlanks(b, p) {
  for (;;) {
    const c = b[p];
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) ++p;
    else return p;
  }
}

class Parser {
  constructor() {
    this.dense = new Scratch(Float32Array);
    this.denseRows = 0;
    this.ids = [];      // per field: Scratch(Float64Array) of exact ids, or NaN = see big
    this.big = [];      // per field: Map index -> BigInt for ids beyond 15 digits
    this.splits = [];   // per field: Scratch(Float64Array)
    this.seen = new Uint8Array(2 * NUM_FIELDS + 1);
    for (let f = 0; f < NUM_FIELDS; ++f) {
      this.ids.push(new Scratch(Float64Array));
      this.splits.push(new Scratch(Float64Array));
      this.big.push(new Map());
    }
  }

  fail(msg) {
    throw new RequestError(msg);
  }

  ws() {
    this.p = skipBlanks(this.b, this.p);
  }

  // The next non-blank byte, consumed if it is `c`.
  eat(c) {
    this.ws();
    if (this.b[this.p] === c) {
      ++this.p;
      return true;
    }
    return false;
  }

  expect(c) {
    if (!this.eat(c)) {
      this.fail(`malformed JSON at byte ${this.p}: expected '${String.fromCharCode(c)}'`);
    }
  }

  string() {
    this.expect(0x22);
    const b = this.b;
    const start = this.p;
    let p = start;
    let escaped = false;
    while (p < b.length && b[p] !== 0x22) {
      if (b[p] === 0x5c) {
        escaped = true;
        ++p;
      }
      ++p;
    }
    if (p >= b.length) this.fail('malformed JSON: unterminated string');
    this.p = p + 1;
    const raw = b.toString('utf8', start, p);
    return escaped ? JSON.parse('"' + raw + '"') : raw;
  }

  // [start, end) of the number at p.
  numberSpan() {
    this.ws();
    const b = this.b;
    const start = this.p;
    let p = start;
    for (;;) {
      const c = b[p];
      if ((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2e || c === 0x2b || c === 0x65 ||
          c === 0x45) {
        ++p;
      } else {
        break;
      }
    }
    if (p === start) this.fail(`malformed JSON at byte ${start}: expected a number`);
    this.p = p;
    return start;
  }

  float() {
    const start = this.numberSpan();
    const b = this.b;
    const end = this.p;
    let p = start;
    const neg = b[p] === 0x2d;
    if (neg) ++p;
    let m = 0;
    let digits = 0;
    let frac = -1;
    for (; p < end; ++p) {
      const c = b[p];
      if (c >= 0x30 && c <= 0x39) {
        m = m * 10 + (c - 0x30);
        ++digits;
        if (frac >= 0) ++frac;
      } else if (c === 0x2e && frac < 0) {
        frac = 0;
      } else {
        break;
      }
    }
    if (p === end && digits > 0 && digits <= 15 && frac !== 0) {
      const v = frac > 0 ? m / POW10[frac] : m;
      return neg ? -v : v;
    }
    const v = Number(b.toString('latin1', start, end));
    if (!Number.isFinite(v)) {
      this.fail(`bad number '${b.toString('latin1', start, end)}' at byte ${start}`);
    }
    return v;
  }

  // An integer id; returns a double (exact) or NaN after storing a BigInt
  // in `big` at `index`.
  int(what, big, index) {
    const start = this.numberSpan();
    const b = this.b;
    const end = this.p;
    let p = start;
    const neg = b[p] === 0x2d;
    if (neg) ++p;
    let m = 0;
    for (; p < end; ++p) {
      const c = b[p];
      if (c < 0x30 || c > 0x39) break;
      m = m * 10 + (c - 0x30);
    }
    const digits = end - start - (neg ? 1 : 0);
    if (p !== end || digits === 0) {
      this.fail(`${what}: '${b.toString('latin1', start, end)}' is not an integer`);
    }
    if (digits <= 15) return neg ? -m : m;
    const v = BigInt(b.toString('latin1', start, end));
    if (v !== BigInt.asIntN(64, v)) this.fail(`${what}: ${v} is out of the int64 range`);
    if (big === null) this.fail(`${what}: ${v} is too large`);
    big.set(index, v);
    return NaN;
  }

  skipValue(depth) {
    this.ws();
    const c = this.b[this.p];
    if (depth > 64) this.fail('malformed JSON: nested too deeply');
    if (c === 0x22) {
      this.string();
    } else if (c === 0x7b || c === 0x5b) {
      const close = c === 0x7b ? 0x7d : 0x5d;
      ++this.p;
      if (this.eat(close)) return;
      do {
        if (c === 0x7b) {
          this.string();
          this.expect(0x3a);
        }
        this.skipValue(depth + 1);
      } while (this.eat(0x2c));
      this.expect(close);
    } else if (c === 0x74 || c === 0x66 || c === 0x6e) {  // true false null
      const word = c === 0x74 ? 'true' : c === 0x66 ? 'false' : 'null';
      if (this.b.toString('latin1', this.p, this.p + word.length) !== word) {
        this.fail(`malformed JSON at byte ${this.p}`);
      }
      this.p += word.length;
    } else {
      this.numberSpan();
    }
  }

  // The hot loops below keep the position in a local and scan plain
  // numbers inline; anything unusual (exponents, > 15 digits, bad syntax)
  // goes through float() / int() at the number's start.

  denseValue() {
    const d = this.dense;
    const b = this.b;
    this.expect(0x5b);
    if (this.eat(0x5d)) return;
    do {
      this.expect(0x5b);
      let n = 0;
      if (!this.eat(0x5d)) {
        let p = this.p;
        for (;;) {
          p = skipBlanks(b, p);
          const start = p;
          const neg = b[p] === 0x2d;
          if (neg) ++p;
          let m = 0;
          let digits = 0;
          let frac = -1;
          let c = b[p];
          for (;;) {
            if (c >= 0x30 && c <= 0x39) {
              m = m * 10 + (c - 0x30);
              ++digits;
              if (frac >= 0) ++frac;
            } else if (c === 0x2e && frac < 0) {
              frac = 0;
            } else {
              break;
            }
            c = b[++p];
          }
          let v;
          if (digits > 0 && digits <= 15 && frac !== 0 && c !== 0x65 && c !== 0x45) {
            v = frac > 0 ? m / POW10[frac] : m;
            if (neg) v = -v;
          } else {
            this.p = start;
            v = this.float();
            p = this.p;
          }
          if (d.n === d.a.length) d.grow();
          d.a[d.n++] = v;
          ++n;
          p = this.afterElement(p);
          if (p < 0) {
            p = ~p;
            break;
          }
        }
        this.p = p;
      }
      if (n !== NUM_DENSE) {
        this.fail(`dense row ${this.denseRows} has ${n} values; expected ${NUM_DENSE}`);
      }
      ++this.denseRows;
    } while (this.eat(0x2c));
    this.expect(0x5d);
  }

  intList(what, dst, big) {
    const b = this.b;
    this.expect(0x5b);
    if (this.eat(0x5d)) return;
    let p = this.p;
    for (;;) {
      p = skipBlanks(b, p);
      const start = p;
      const neg = b[p] === 0x2d;
      if (neg) ++p;
      const d0 = p;
      let m = 0;
      let c = b[p];
      while (c >= 0x30 && c <= 0x39) {
        m = m * 10 + (c - 0x30);
        c = b[++p];
      }
      let v;
      if (p > d0 && p - d0 <= 15 && c !== 0x2e && c !== 0x65 && c !== 0x45) {
        v = neg ? -m : m;
      } else {
        this.p = start;
        v = this.int(what, big, dst.n);
        p = this.p;
      }
      if (dst.n === dst.a.length) dst.grow();
      dst.a[dst.n++] = v;
      p = this.afterElement(p);
      if (p < 0) {
        p = ~p;
        break;
      }
    }
    this.p = p;
  }

  // After a list element ending at p: past the ',' that follows (returns the
  // position), or past the closing ']' (returns ~position, negative); fails
  // on anything else.
  afterElement(p) {
    p = skipBlanks(this.b, p);
    const c = this.b[p];
    if (c === 0x2c) return p + 1;
    if (c === 0x5d) return ~(p + 1);
    this.p = p;
    this.expect(0x5d);
    return p;  // not reached: expect throws
  }

  inputs() {
    this.expect(0x7b);
    if (this.eat(0x7d)) return;
    do {
      const key = this.string();
      this.expect(0x3a);
      let m;
      if (key === 'dense') {
        if (this.seen[2 * NUM_FIELDS]++) this.fail('input "dense" given twice');
        this.denseValue();
      } else if ((m = /^C([1-9][0-9]?)\/(ids|row_splits)$/.exec(key)) &&
                 Number(m[1]) <= NUM_FIELDS) {
        const f = Number(m[1]) - 1;
        const isIds = m[2] === 'ids';
        if (this.seen[2 * f + (isIds ? 0 : 1)]++) this.fail(`input "${key}" given twice`);
        if (isIds) this.intList(key, this.ids[f], this.big[f]);
        else this.intList(key, this.splits[f], null);
      } else {
        this.fail(`unknown input "${key}"; expected dense and C1..C${NUM_FIELDS}/ids, ` +
                  '/row_splits');
      }
    } while (this.eat(0x2c));
    this.expect(0x7d);
  }

  // Parses `body` (a Buffer) and fills `into(rows)`'s arrays: returns
  // {rows, dense: Float32Array [rows * 13], ids: BigInt64Array [rows * 26]}.
  parse(body) {
    this.b = body;
    this.p = 0;
    this.dense.n = 0;
    this.denseRows = 0;
    this.seen.fill(0);
    for (let f = 0; f < NUM_FIELDS; ++f) {
      this.ids[f].n = 0;
      this.splits[f].n = 0;
      this.big[f].clear();
    }
    let sawInputs = false;
    let sawInstances = false;
    this.expect(0x7b);
    if (!this.eat(0x7d)) {
      do {
        const key = this.string();
        this.expect(0x3a);
        if (key === 'inputs') {
          if (sawInputs) this.fail('"inputs" given twice');
          sawInputs = true;
          this.inputs();
        } else {
          if (key === 'instances') sawInstances = true;
          this.skipValue(0);
        }
      } while (this.eat(0x2c));
      this.expect(0x7d);
    }
    this.ws();
    if (this.p !== body.length) this.fail(`malformed JSON: trailing bytes at ${this.p}`);
    if (!sawInputs) {
      this.fail(sawInstances ? 'row format ("instances") is not served; send the columnar ' +
                               '{"inputs": {...}} form'
                             : 'expected columnar {"inputs": {...}}');
    }
    if (!this.seen[2 * NUM_FIELDS]) this.fail('input "dense" is missing');
    const rows = this.denseRows;
    for (let f = 0; f < NUM_FIELDS; ++f) {
      if (!this.seen[2 * f] || !this.seen[2 * f + 1]) {
        this.fail(`input "C${f + 1}/${this.seen[2 * f] ? 'row_splits' : 'ids'}" is missing`);
      }
      const s = this.splits[f];
      if (s.n !== rows + 1 || s.a[0] !== 0 || s.a[rows] !== this.ids[f].n) {
        this.fail(`C${f + 1}/row_splits does not split ${this.ids[f].n} ids into ${rows} rows`);
      }
      for (let i = 1; i <= rows; ++i) {
        if (s.a[i] !== i) {
          this.fail(`C${f + 1}/row_splits: row ${i - 1} has ${s.a[i] - s.a[i - 1]} ids; this ` +
                    'peer (an ONNX model with one id per field and row) takes exactly one ' +
                    'id per field and row');
        }
      }
    }
    const dense = new Float32Array(rows * NUM_DENSE);
    dense.set(this.dense.a.subarray(0, rows * NUM_DENSE));
    // int64 little-endian as two int32 halves: exact for |id| <= 2^53.
    const ids = new BigInt64Array(rows * NUM_FIELDS);
    const halves = new Int32Array(ids.buffer);
    for (let f = 0; f < NUM_FIELDS; ++f) {
      const src = this.ids[f].a;
      for (let i = 0, j = 2 * f; i < rows; ++i, j += 2 * NUM_FIELDS) {
        const v = src[i];
        const hi = Math.floor(v / 4294967296);
        halves[j] = (v - hi * 4294967296) | 0;
        halves[j + 1] = hi;
      }
      for (const [i, v] of this.big[f]) ids[i * NUM_FIELDS + f] = v;
    }
    this.b = null;
    return {rows, dense, ids};
  }
}

// --- the model ----------------------------------------------------------------

function sessionOptions(args, mode) {
  return {
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: mode,
    enableCpuMemArena: true,
    enableMemPattern: true,
    extra: {session: {intra_op: {allow_spinning: args.spinning ? '1' : '0'},
                      inter_op: {allow_spinning: args.spinning ? '1' : '0'}}},
  };
}

function feeds(ort, req) {
  return {dense: new ort.Tensor('float32', req.dense, [req.rows, NUM_DENSE]),
          ids: new ort.Tensor('int64', req.ids, [req.rows, NUM_FIELDS])};
}

function exampleBody(check, rows) {
  const parts = [];
  parts.push('"dense": ' + JSON.stringify(check.dense.slice(0, rows)));
  for (let f = 0; f < NUM_FIELDS; ++f) {
    const ids = check.ids.slice(0, rows).map((r) => r[f]);
    parts.push(`"C${f + 1}/ids": [${ids.join(', ')}]`);
    parts.push(`"C${f + 1}/row_splits": [${Array.from({length: rows + 1}, (_, i) => i)}]`);
  }
  return Buffer.from(`{"signature_name": "serving_default", "inputs": {${parts.join(', ')}}}`);
}

// Runs the exporter's check rows through the parser and the session; returns
// the max abs difference from torch's logits and probabilities.
async function checkModel(ort, session, parser, check) {
  const rows = check.logits.length;
  const ids = check.ids.flat();
  if (ids.some((v) => !Number.isSafeInteger(v))) die('check ids beyond 2^53 cannot be checked');
  const req = parser.parse(exampleBody(check, rows));
  const out = await session.run(feeds(ort, req));
  let diff = 0;
  for (let i = 0; i < rows; ++i) {
    diff = Math.max(diff, Math.abs(out.logits.data[i] - check.logits[i]),
                    Math.abs(out.probabilities.data[i] - check.probabilities[i]));
  }
  return diff;
}

async function timeModes(ort, sessions, parser, check) {
  const text = [];
  let best = null;
  for (const rows of [1, 256]) {
    // Requests of `rows` rows, the check rows repeated.
    const big = {dense: [], ids: [], logits: []};
    for (let i = 0; i < rows; ++i) {
      big.dense.push(check.dense[i % check.dense.length]);
      big.ids.push(check.ids[i % check.ids.length]);
      big.logits.push(0);
    }
    const f = feeds(ort, parser.parse(exampleBody(big, rows)));
    const samples = {};
    for (const [mode, s] of Object.entries(sessions)) {
      samples[mode] = [];
      for (let i = 0; i < 5; ++i) await s.run(f);
    }
    for (let i = 0; i < (rows === 1 ? 200 : 30); ++i) {
      for (const [mode, s] of Object.entries(sessions)) {
        const t0 = process.hrtime.bigint();
        await s.run(f);
        samples[mode].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
    const med = {};
    for (const [mode, v] of Object.entries(samples)) {
      v.sort((a, b) => a - b);
      med[mode] = v[v.length >> 1];
    }
    const modes = Object.keys(med);
    const fastest = modes.reduce((a, b) => (med[b] < med[a] ? b : a));
    if (rows === 256) best = fastest;
    text.push(`${rows}:${fastest}(` +
              `${modes.map((m) => m.slice(0, 3) + '=' + med[m].toFixed(3) + 'ms').join('/')})`);
  }
  return {best, text: text.join(',')};
}

// One serving process: loads and checks the model; resolves to {server, info}.
async function startWorker(args) {
  const ort = loadOrt();
  const check = JSON.parse(fs.readFileSync(args.check, 'utf8'));
  const parser = new Parser();
  const modes = args.execution_mode === 'auto' ? ['sequential', 'parallel']
                                               : [args.execution_mode];
  const sessions = {};
  for (const mode of modes) {
    sessions[mode] = await ort.InferenceSession.create(args.model, sessionOptions(args, mode));
  }
  let mode = modes[0];
  let probeText = 'fixed';
  if (modes.length > 1) {
    const r = await timeModes(ort, sessions, parser, check);
    mode = r.best;
    probeText = r.text;
    for (const m of modes) {
      if (m !== mode) await sessions[m].release();
    }
  }
  const session = sessions[mode];
  const diff = await checkModel(ort, session, parser, check);
  const tolerance = check.tolerance || 1e-5;
  if (!(diff <= tolerance)) {
    die(`the ONNX model's answers differ from torch's (${args.check}) by ${diff} ` +
        `(tolerance ${tolerance})`);
  }

  async function score(body) {
    const req = parser.parse(body);
    if (req.rows === 0) return '{"outputs": {"logits": [], "probabilities": []}}';
    const out = await session.run(feeds(ort, req));
    return `{"outputs": {"logits": [${out.logits.data.join(', ')}], "probabilities": [` +
           `${out.probabilities.data.join(', ')}]}}`;
  }

  function reply(res, code, payload) {
    res.writeHead(code, {'Content-Type': 'application/json',
                         'Content-Length': Buffer.byteLength(payload)});
    res.end(payload);
  }

  const server = http.createServer({noDelay: true, keepAlive: true}, (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || !req.url.endsWith(':predict')) {
        reply(res, 404, '{"error": "only POST .../NAME:predict is served"}');
        return;
      }
      const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      score(body).then((out) => reply(res, 200, out), (e) => {
        if (e instanceof RequestError) reply(res, 400, JSON.stringify({error: e.message}));
        else reply(res, 500, JSON.stringify({error: String(e && e.message || e)}));
      });
    });
  });
  server.keepAliveTimeout = 600000;
  server.headersTimeout = 601000;
  const info = `execution_mode=${mode} mode_probe=${probeText} ` +
               `check_max_abs_diff=${diff.toExponential(2)}(tolerance=${tolerance})`;
  return {server, info, ort};
}

function infoLine(args, ort, workerInfo) {
  return `info side=ort onnxruntime-node=${ort.env.versions.node} node=${process.version} ` +
         `workers=${args.workers} intra_op_threads=${args.threads} inter_op_threads=1 ` +
         `spinning=${args.spinning ? 1 : 0} graph_optimization=all ${workerInfo} ` +
         `server=node:http parser=own model=${path.basename(args.model)}`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.workers <= 1) {
    const {server, info, ort} = await startWorker(args);
    server.listen(args.port, '127.0.0.1', () => {
      console.log(infoLine(args, ort, info));
      console.log(`listening port=${server.address().port}`);
    });
    return;
  }
  if (cluster.isPrimary) {
    cluster.schedulingPolicy = cluster.SCHED_RR;
    cluster.setupPrimary({args: process.argv.slice(2)});
    let port = null;
    let ready = 0;
    let info = '';
    // Workers start one after another (each times its execution modes at
    // startup); they all listen on --port, which the primary binds once and
    // shares (with 0, the same free port for every worker).
    const startOne = (i) => {
      const w = cluster.fork();
      w.on('message', (m) => {
        if (m.port === undefined) return;
        port = m.port;
        info = info || m.info;
        if (++ready === args.workers) {
          console.log(infoLine(args, loadOrt(), info));
          console.log(`listening port=${port}`);
        } else {
          startOne(i + 1);
        }
      });
    };
    cluster.on('exit', (w, code) => {
      die(`worker ${w.process.pid} exited (code ${code})`);
    });
    for (const sig of ['SIGTERM', 'SIGINT']) {
      process.on(sig, () => {
        cluster.removeAllListeners('exit');
        for (const w of Object.values(cluster.workers)) w.kill();
        process.exit(0);
      });
    }
    startOne(0);
    return;
  }
  const {server, info} = await startWorker(args);
  server.listen(args.port, '127.0.0.1', () => {
    process.send({port: server.address().port, info});
  });
}

if (require.main === module) {
  main().catch((e) => die(String(e && e.stack || e)));
} else {
  module.exports = {Parser, RequestError};  // for a test of the parser
}
