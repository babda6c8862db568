"""bench/run quantized: an export's hash embedding tables served with their
rows quantized (`recflow serve --embedding_row_format float16|int8`,
docs/embedding.md "Quantized rows") against the same export with float32 rows.

Work: `recflow gen-data --seed 1` (TRAIN_ROWS train rows, TEST_ROWS test
rows); the zoo's DeepFM with hash tables (examples/configs/deepfm_hash.yaml)
trained one epoch by `recflow train`; `recflow export`. Then, each round,
bench_quantized (bench/quantized.cc) loads the export once per format, the
order rotating, and reports:

- test AUC and logloss through the serving_default signature (the same load
  and signature run as a server), on the whole test split;
- bytes per row of the tables (the row stride with its 24 bytes of metadata)
  and the tables' memory;
- lookup rows/s: HashEmbeddingTable::Lookup in serving mode on the largest
  table, batches of 4096 ids drawn from its keys, one thread.

The peer is float32 rows: the same export through the same code, so the
ratios are what quantizing buys and costs. The targets of issue #27: an AUC
change of at most 0.0002 (float16) and 0.001 (int8). No BLAS-bound work is
timed (lookups only), so the OpenBLAS variants are not run.
"""

import os
import re
import shutil
import subprocess
import tempfile

from .common import BUILD, REPO, build, cpu_model, die, med

TRAIN_ROWS = 500000
TEST_ROWS = 100000
FORMATS = ("float32", "float16", "int8")


def _run(cmd, what, timeout=1800):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("%s failed (exit %d): %s\n%s%s" % (what, r.returncode, " ".join(cmd),
                                                r.stdout[-2000:], r.stderr[-3000:]))
    return r.stdout + r.stderr


def _parse(line):
    return {k: v for k, v in (p.split("=", 1) for p in line.split()[1:])}


def quantized(args):
    tmp = tempfile.mkdtemp(prefix="bench_quantized.")
    try:
        return _quantized(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _quantized(args, tmp):
    if not args.no_build:
        build("recflow")
        build("bench_quantized")
    recflow_bin = os.path.join(BUILD, "recflow")
    bench_bin = os.path.join(BUILD, "bench", "bench_quantized")
    for b in (recflow_bin, bench_bin):
        if not os.path.exists(b):
            die("%s is missing; build it (ninja -C build recflow bench_quantized)" % b)
    rounds = args.rounds if args.rounds_explicit else 3
    data = os.path.join(tmp, "data")
    _run([recflow_bin, "gen-data", "--rows", str(TRAIN_ROWS), "--test_rows", str(TEST_ROWS),
          "--seed", "1", "--out", data], "gen-data")
    config = os.path.join(REPO, "examples", "configs", "deepfm_hash.yaml")
    model_dir = os.path.join(tmp, "model")
    out = _run([recflow_bin, "train", "--config", config, "--model_dir", model_dir,
                "--data", os.path.join(data, "train-*.tsv"),
                "--eval_data", os.path.join(data, "test-*.tsv")], "recflow train")
    m = re.search(r"test AUC ([0-9.]+)", out)
    train_auc = m.group(1) if m else "?"
    export = os.path.join(tmp, "export")
    _run([recflow_bin, "export", "--model_dir", model_dir, "--export_dir", export], "export")
    test = os.path.join(data, "test-*.tsv")
    print("== quantized: DeepFM with hash tables (examples/configs/deepfm_hash.yaml), one "
          "epoch of %d gen-data rows; test AUC of %d rows through the served export" %
          (TRAIN_ROWS, TEST_ROWS))
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("recflow train's own test AUC (float32, the checkpoint): %s" % train_auc)
    res = {f: [] for f in FORMATS}
    for r in range(rounds):
        order = FORMATS[r % 3:] + FORMATS[:r % 3]
        for fmt in order:
            text = _run([bench_bin, "--export=" + export, "--config=" + config,
                         "--data=" + test, "--format=" + fmt], "bench_quantized " + fmt)
            line = [l for l in text.splitlines() if l.startswith("quantized ")]
            if not line:
                die("no result line from bench_quantized:\n" + text[-2000:])
            kv = _parse(line[0])
            res[fmt].append(kv)
            print("  round %d %-8s auc=%s logloss=%s bytes_per_row=%s table_mib=%s "
                  "lookups(%s rows)=%s/s synthetic(%s rows, %s MiB)=%s/s load_s=%s" % (
                      r + 1, fmt, kv["auc"], kv["logloss"], kv["bytes_per_row"],
                      kv["table_mib"], kv["lookup_table_rows"], kv["lookup_rows_per_s"],
                      kv["synthetic_rows"], kv["synthetic_mib"],
                      kv["synthetic_lookup_rows_per_s"], kv["load_s"]))
    # AUC and sizes do not change between rounds; lookups are timed.
    for fmt in FORMATS:
        aucs = {kv["auc"] for kv in res[fmt]}
        if len(aucs) != 1:
            die("%s: the AUC changed between rounds (%s)" % (fmt, sorted(aucs)))
    base = res["float32"][0]
    base_auc = float(base["auc"])
    base_bytes = float(base["bytes_per_row"])
    base_speed = med([float(kv["lookup_rows_per_s"]) for kv in res["float32"]])
    base_big = med([float(kv["synthetic_lookup_rows_per_s"]) for kv in res["float32"]])
    base_big_mib = float(base["synthetic_mib"])
    lines = []
    for fmt in ("float16", "int8"):
        auc = float(res[fmt][0]["auc"])
        bytes_per_row = float(res[fmt][0]["bytes_per_row"])
        speed = med([float(kv["lookup_rows_per_s"]) for kv in res[fmt]])
        print("%s: AUC %.6f vs float32 %.6f (change %+.6f); %.1f bytes per row vs %.1f; "
              "lookups %.0f rows/s vs %.0f" % (fmt, auc, base_auc, auc - base_auc,
                                               bytes_per_row, base_bytes, speed, base_speed))
        lines.append("RESULT bench=quantized metric=auc_%s recflow=%.6f peer=float32 "
                     "peer_value=%.6f ratio=%.6f" % (fmt, auc, base_auc, auc / base_auc))
        lines.append("RESULT bench=quantized metric=bytes_per_row_%s recflow=%.1f "
                     "peer=float32 peer_value=%.1f ratio=%.3f" % (
                         fmt, bytes_per_row, base_bytes, base_bytes / bytes_per_row))
        lines.append("RESULT bench=quantized metric=lookup_rows_per_s_%s recflow=%.0f "
                     "peer=float32 peer_value=%.0f ratio=%.3f" % (
                         fmt, speed, base_speed, speed / base_speed))
        big = med([float(kv["synthetic_lookup_rows_per_s"]) for kv in res[fmt]])
        big_mib = float(res[fmt][0]["synthetic_mib"])
        print("%s: a %s-row dim-16 table: %.1f MiB vs %.1f, lookups %.0f rows/s vs %.0f" % (
            fmt, res[fmt][0]["synthetic_rows"], big_mib, base_big_mib, big, base_big))
        lines.append("RESULT bench=quantized metric=big_table_mib_%s recflow=%.1f peer=float32 "
                     "peer_value=%.1f ratio=%.3f" % (fmt, big_mib, base_big_mib,
                                                     base_big_mib / big_mib))
        lines.append("RESULT bench=quantized metric=big_table_lookup_rows_per_s_%s "
                     "recflow=%.0f peer=float32 peer_value=%.0f ratio=%.3f" % (
                         fmt, big, base_big, big / base_big))
    return lines
