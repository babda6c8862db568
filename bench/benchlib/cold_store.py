"""bench/run cold_store: the store behind a tiered hash table's cold rows
(issue #27: "RocksDB from Debian's librocksdb-dev, or a log-structured file
of your own if it measures faster (measure both, say which and why)").

bench_cold_store (bench/cold_store.cc) runs, in one process and alternating
the order each round, recflow's RowLog (embedding/row_log.h) and RocksDB 7.8
(without compression, and with snappy, its default) on the same work: load
ROWS rows of dim 16 with an Adagrad slot (152-byte records) in batches of
4096; read 200 batches of 4096 Zipf(1.05) ids cold (files dropped from the
page cache) and again warm; write back the same 200 batches. The peer is
RocksDB's faster setting for each figure. No BLAS-bound work is timed, so
the OpenBLAS variants are not run.
"""

import os
import subprocess

from .common import BUILD, build, cpu_model, die, in_size_gb_dir, med

ROWS = 4000000
FIGURES = ("load_rows_per_s", "cold_get_rows_per_s", "warm_get_rows_per_s", "put_rows_per_s")


def cold_store(args):
    return in_size_gb_dir(args, "cold_store", _cold_store)


def _cold_store(args, tmp):
    if not args.no_build:
        build("bench_cold_store")
    binary = os.path.join(BUILD, "bench", "bench_cold_store")
    if not os.path.exists(binary):
        die("%s is missing: it is built only where librocksdb-dev is installed "
            "(scripts/install-deps.sh --bench, then ninja -C build bench_cold_store)" % binary)
    rounds = args.rounds if args.rounds_explicit else 3
    print("== cold_store: %d rows of dim 16 + an Adagrad slot (152-byte records); 200 batches "
          "of 4096 Zipf(1.05) ids read cold, warm, then written back; RowLog vs RocksDB" % ROWS)
    print("machine: %s, %d CPUs, load average %s; directory %s; RowLog reads over %d threads"
          % (cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg()), tmp,
             args.threads))
    r = subprocess.run([binary, "--dir=" + tmp, "--rows=%d" % ROWS, "--rounds=%d" % rounds,
                        "--threads=%d" % args.threads],
                       capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        die("bench_cold_store failed (exit %d):\n%s%s" % (r.returncode, r.stdout[-2000:],
                                                          r.stderr[-2000:]))
    res = {}
    for line in r.stdout.splitlines():
        if not line.startswith("store="):
            continue
        kv = dict(p.split("=", 1) for p in line.split())
        res.setdefault(kv["store"], []).append(kv)
        print("  round %s %-15s load %9.0f  cold get %9.0f  warm get %9.0f  put %9.0f rows/s  "
              "files %6.0f MB" % (kv["round"], kv["store"], float(kv["load_rows_per_s"]),
                                  float(kv["cold_get_rows_per_s"]),
                                  float(kv["warm_get_rows_per_s"]),
                                  float(kv["put_rows_per_s"]), int(kv["bytes"]) / 1e6))
    if "rowlog" not in res or "rocksdb" not in res:
        die("missing result lines from bench_cold_store:\n" + r.stdout[-2000:])
    lines = []
    for fig in FIGURES:
        ours = med([float(kv[fig]) for kv in res["rowlog"]])
        peers = {name: med([float(kv[fig]) for kv in res[name]])
                 for name in res if name != "rowlog"}
        peer = max(peers, key=peers.get)
        lines.append("RESULT bench=cold_store metric=%s recflow=%.0f peer=%s peer_value=%.0f "
                     "ratio=%.2f" % (fig, ours, peer, peers[peer], ours / peers[peer]))
    return lines
