#!/usr/bin/python3
"""pandas / NumPy peer of bench/data_pipeline.cc (see bench/README.md).

  /usr/bin/python3 bench/peers/data_pipeline_pandas.py --path=F [--batch=4096]
      [--samples=1] [--modes=pandas_str,pandas_category,numpy]

Turns a Criteo TSV (label, I1..I13, C1..C26; empty = missing) into the same
arrays as recflow's Criteo parser, in batches of --batch rows:
  labels float32 [B]; dense float32 [B,13] = log1p(max(x, 0)), 0 when
  missing; per categorical field k: ids int64 = (k << 32) | int(hex, 16)
  for present values, row_splits int64 [B+1].
Modes (each one single-threaded: pandas' C parser and NumPy are):
  pandas_str       pandas.read_csv(sep='\\t', header=None, dtypes given,
                   categoricals as str) of the whole file, then the
                   conversion with NumPy (strings -> S8 bytes -> hex).
  pandas_category  the same with the categoricals read as dtype 'category':
                   each field's distinct strings are decoded once and
                   gathered by code (fewer Python string objects).
  numpy            a pure NumPy parser: np.fromfile, separators found with
                   np.flatnonzero, fields decoded with vectorized digit
                   arithmetic (chunks of 65536 rows), then the same
                   conversion.
Output lines match the recflow binary's: `check mode=M ...` (checksums over
all batches, computed after timing) and `mode=M median_us=... samples_us=...`
(wall and process-CPU microseconds per full pass, file to batches).
"""

import argparse
import statistics
import sys
import time

import numpy as np

NUM_DENSE = 13
NUM_CAT = 26
NUM_FIELDS = 1 + NUM_DENSE + NUM_CAT


def hex_table():
    t = np.full(256, 255, dtype=np.uint8)
    for i, c in enumerate(b"0123456789"):
        t[c] = i
    for i, c in enumerate(b"abcdef"):
        t[c] = 10 + i
    for i, c in enumerate(b"ABCDEF"):
        t[c] = 10 + i
    return t


HEX = hex_table()
FIELD_BASE = (np.arange(NUM_CAT, dtype=np.int64) << 32)


SHIFTS = np.arange(28, -1, -4, dtype=np.int64)


def hex_bytes_to_int(b):
    """b: uint8 [..., 8] of ASCII hex digits, NUL-padded on the right for
    shorter (or missing) values -> int64 values (0 for empty). The digits
    are summed as if there were 8, then shifted right by the padding."""
    d = HEX[b].astype(np.int64)
    d[b == 0] = 0
    length = (b != 0).sum(axis=-1)
    return (d << SHIFTS).sum(axis=-1) >> (4 * (8 - length))


def make_batches(labels, dense, cat_values, cat_present, batch):
    """labels [N], dense [N,13] float32, cat_values [N,26] int64 ids,
    cat_present [N,26] bool -> list of (labels, dense, [(ids, splits)] * 26)
    batches of `batch` rows (views where possible)."""
    n = labels.shape[0]
    cs = np.zeros((n + 1, NUM_CAT), dtype=np.int64)
    np.cumsum(cat_present, axis=0, out=cs[1:])
    compact = [cat_values[:, k][cat_present[:, k]] for k in range(NUM_CAT)]
    out = []
    for b0 in range(0, n, batch):
        b1 = min(n, b0 + batch)
        sparse = []
        for k in range(NUM_CAT):
            splits = cs[b0:b1 + 1, k] - cs[b0, k]
            sparse.append((compact[k][cs[b0, k]:cs[b1, k]], splits))
        out.append((labels[b0:b1], dense[b0:b1], sparse))
    return out


def dense_transform(x):
    """x float64 [N,13] with NaN for missing -> float32 log1p(max(x,0)), 0 if missing."""
    with np.errstate(invalid="ignore"):
        y = np.log1p(np.maximum(x, 0.0))
    y[np.isnan(x)] = 0.0
    return y.astype(np.float32)


# --- pandas ------------------------------------------------------------------------

def run_pandas(path, batch, categorical=False):
    import pandas as pd
    dtypes = {0: np.float32}
    for j in range(1, 1 + NUM_DENSE):
        dtypes[j] = np.float64
    for j in range(1 + NUM_DENSE, NUM_FIELDS):
        dtypes[j] = "category" if categorical else str
    # Empty dense fields -> NaN; empty categoricals stay "" (no NaN objects).
    df = pd.read_csv(path, sep="\t", header=None, dtype=dtypes, engine="c",
                     names=list(range(NUM_FIELDS)), keep_default_na=False,
                     na_values={j: [""] for j in range(1, 1 + NUM_DENSE)})
    labels = df[0].to_numpy(dtype=np.float32)
    dense = dense_transform(df.iloc[:, 1:1 + NUM_DENSE].to_numpy(dtype=np.float64))
    if categorical:
        # Decode each field's distinct strings once, then gather by code.
        n = len(df)
        values = np.empty((n, NUM_CAT), dtype=np.int64)
        present = np.empty((n, NUM_CAT), dtype=bool)
        for k in range(NUM_CAT):
            col = df[1 + NUM_DENSE + k]
            cats = np.ascontiguousarray(
                np.asarray(col.cat.categories, dtype=object).astype("S8"))
            b = cats.view(np.uint8).reshape(-1, 8)
            codes = col.cat.codes.to_numpy()
            values[:, k] = (hex_bytes_to_int(b) | FIELD_BASE[k])[codes]
            present[:, k] = b[codes, 0] != 0
    else:
        # Strings -> fixed 8-byte ASCII -> uint8 [N,26,8] -> hex values.
        raw = np.ascontiguousarray(df.iloc[:, 1 + NUM_DENSE:].to_numpy().astype("S8"))
        b = raw.view(np.uint8).reshape(raw.shape[0], NUM_CAT, 8)
        present = b[..., 0] != 0
        values = hex_bytes_to_int(b) | FIELD_BASE
    return make_batches(labels, dense, values, present, batch)


# --- pure NumPy --------------------------------------------------------------------

def parse_chunk(buf, starts, ends):
    """starts/ends: int64 [n,40] field boundaries into buf -> labels, dense
    (float64, NaN missing), cat values, cat present."""
    lens = ends - starts
    labels = (buf[starts[:, 0]] - 48).astype(np.float32)
    # Dense: optional '-', then up to L digits.
    ds, dl = starts[:, 1:1 + NUM_DENSE], lens[:, 1:1 + NUM_DENSE]
    first = buf[np.minimum(ds, buf.size - 1)]
    neg = (first == ord("-")) & (dl > 0)
    ds = ds + neg
    dl = dl - neg
    v = np.zeros(ds.shape, dtype=np.int64)
    maxlen = int(dl.max()) if dl.size else 0
    for pos in range(maxlen):
        m = pos < dl
        digit = buf[np.minimum(ds + pos, buf.size - 1)].astype(np.int64) - 48
        v = np.where(m, v * 10 + digit, v)
    x = np.where(neg, -v, v).astype(np.float64)
    x[lens[:, 1:1 + NUM_DENSE] == 0] = np.nan
    # Categorical: up to 8 hex digits.
    cs, cl = starts[:, 1 + NUM_DENSE:], lens[:, 1 + NUM_DENSE:]
    idx = cs[..., None] + np.arange(8)
    b = buf[np.minimum(idx, buf.size - 1)]
    b = np.where(np.arange(8) < cl[..., None], b, 0).astype(np.uint8)
    values = hex_bytes_to_int(b) | FIELD_BASE
    return labels, x, values, cl > 0


def run_numpy(path, batch, chunk_rows=65536):
    buf = np.fromfile(path, dtype=np.uint8)
    seps = np.flatnonzero((buf == 9) | (buf == 10))
    if buf.size and buf[-1] != 10:
        seps = np.append(seps, buf.size)
    if seps.size % NUM_FIELDS:
        raise ValueError("numpy parser: %d separators is not a multiple of %d fields"
                         % (seps.size, NUM_FIELDS))
    n = seps.size // NUM_FIELDS
    ends = seps.reshape(n, NUM_FIELDS)
    starts = np.empty_like(ends)
    starts.reshape(-1)[0] = 0
    starts.reshape(-1)[1:] = seps[:-1] + 1
    parts = [parse_chunk(buf, starts[r:r + chunk_rows], ends[r:r + chunk_rows])
             for r in range(0, n, chunk_rows)]
    labels = np.concatenate([p[0] for p in parts])
    dense = dense_transform(np.concatenate([p[1] for p in parts]))
    values = np.concatenate([p[2] for p in parts])
    present = np.concatenate([p[3] for p in parts])
    return make_batches(labels, dense, values, present, batch)


# --- checksums (as bench/data_pipeline.cc's Checksum) ------------------------------------

def checksum(batches):
    rows = 0
    label_sum = 0.0
    dense_sum = 0.0
    nnz = 0
    id_sum = np.uint64(0)
    id_wsum = np.uint64(0)
    splits_sum = np.uint64(0)
    with np.errstate(over="ignore"):
        for labels, dense, sparse in batches:
            rows += labels.shape[0]
            label_sum += float(labels.astype(np.float64).sum())
            dense_sum += float(dense.astype(np.float64).sum())
            for ids, splits in sparse:
                u = ids.astype(np.uint64)
                nnz += u.size
                id_sum += u.sum(dtype=np.uint64)
                id_wsum += (u * np.arange(1, u.size + 1, dtype=np.uint64)).sum(dtype=np.uint64)
                splits_sum += splits.astype(np.uint64).sum(dtype=np.uint64)
    return dict(batches=len(batches), rows=rows, label_sum=label_sum, dense_sum=dense_sum,
                nnz=nnz, id_sum=int(id_sum), id_wsum=int(id_wsum), splits_sum=int(splits_sum))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--path", required=True)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--samples", type=int, default=1)
    p.add_argument("--modes", default="pandas_str,pandas_category,numpy")
    args = p.parse_args()
    import pandas as pd
    print("info side=peer pandas=%s numpy=%s python=%s threads=1" % (
        pd.__version__, np.__version__, sys.version.split()[0]))
    runners = {"pandas_str": run_pandas,
               "pandas_category": lambda p, b: run_pandas(p, b, categorical=True),
               "numpy": run_numpy}
    for mode in args.modes.split(","):
        fn = runners[mode]
        us, cpu_us = [], []
        batches = None
        for _ in range(args.samples):
            batches = None  # free the previous pass first
            c0 = time.process_time()
            t0 = time.perf_counter()
            batches = fn(args.path, args.batch)
            us.append((time.perf_counter() - t0) * 1e6)
            cpu_us.append((time.process_time() - c0) * 1e6)
        c = checksum(batches)
        print("check mode=%s batches=%d rows=%d label_sum=%.17g dense_sum=%.17g nnz=%d "
              "id_sum=%d id_wsum=%d splits_sum=%d" % (
                  mode, c["batches"], c["rows"], c["label_sum"], c["dense_sum"], c["nnz"],
                  c["id_sum"], c["id_wsum"], c["splits_sum"]))
        print("mode=%s median_us=%.1f min_us=%.1f samples_us=%s cpu_us=%s" % (
            mode, statistics.median(us), min(us), ",".join("%.1f" % v for v in us),
            ",".join("%.1f" % v for v in cpu_us)), flush=True)
        del batches
    return 0


if __name__ == "__main__":
    sys.exit(main())
