"""bench/run tiered: a hash embedding table about 4x its memory budget, tiered
(hot rows in memory, the rest in the cold tier on disk; docs/embedding.md,
"Tiers") against the same table all in memory (issue #27).

bench_tiered (bench/tiered.cc) runs one side per process, so that each has
its own peak RSS; the sides alternate, the order swapped each round. The
table: dim 64 with an Adagrad slot (536 bytes a row with its metadata),
4 x --size_gb (default 2) GB of rows, every row imported first; ids are a
bijective mix of Zipf(1.05) ranks. A training step: a batch of 4096
examples x 26 ids, kTrain lookup, a gradient per occurrence, Unique + sum,
ApplyAdagrad (the table's work only: no dense model, the worst case for a
tier). After 150 untimed warm-up steps, 60 timed steps; the tiered table
runs them three times: without and then with Prefetch of the next batch on
another thread during the step, the cold files' page cache dropped before
each, so cold rows come from the disk (the headline figure); then with
Prefetch after reading the cold files once, so the page cache holds them
(what a machine with memory to spare sees; not the budget's case). Serving: 1000 kReadOnly
lookups of 256 candidates x 26 ids on one thread, page cache dropped first.
No BLAS-bound work is timed, so the OpenBLAS variants are not run.

Targets (#27): >= 0.7x the all-in-memory examples/s at a DRAM hit rate of
90% or more; peak RSS within the budget + 10%; serving p99 reported.
"""

import os
import shutil
import subprocess
import tempfile

from .common import BUILD, build, cpu_model, die, med

DIM = 64
ROW_BYTES = 24 + 4 * DIM * 2  # metadata + weights + Adagrad accumulator


def _parse(line):
    return {k: v for k, v in (p.split("=", 1) for p in line.split()[1:])}


def tiered(args):
    if not args.no_build:
        build("bench_tiered")
    binary = os.path.join(BUILD, "bench", "bench_tiered")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C build bench_tiered)" % binary)
    rounds = args.rounds if args.rounds_explicit else 3
    budget_gb = args.size_gb
    rows = int(4 * budget_gb * 1e9 / ROW_BYTES)
    base = args.dir or tempfile.gettempdir()
    if not os.path.isdir(base):
        die("--dir %s is not a directory" % base, 2)
    need = 9 * budget_gb * 1e9  # the cold files: live rows plus as many dead before compaction
    free = shutil.disk_usage(base).free
    if free < need:
        die("%s has %.1f GB free; the tiered bench needs %.1f GB (9x --size_gb=%g)"
            % (base, free / 1e9, need / 1e9, budget_gb))
    print("== tiered: %d rows of dim %d + Adagrad (%.1f GB) under a %.3g GB memory budget, "
          "vs all in memory; Zipf(1.05) ids, batches of 4096 x 26" % (
              rows, DIM, rows * ROW_BYTES / 1e9, budget_gb))
    print("machine: %s, %d CPUs, load average %s; cold files under %s; %d rounds, sides "
          "alternating" % (cpu_model(), os.cpu_count(),
                           " ".join("%.2f" % x for x in os.getloadavg()), base, rounds))
    res = {"dram": [], "tiered": []}
    for rnd in range(rounds):
        order = ("dram", "tiered") if rnd % 2 == 0 else ("tiered", "dram")
        for side in order:
            tmp = tempfile.mkdtemp(prefix="bench_tiered.", dir=base)
            try:
                cmd = [binary, "--side=" + side, "--rows=%d" % rows, "--dim=%d" % DIM,
                       "--budget_gb=%g" % budget_gb, "--threads=%d" % args.threads]
                if side == "tiered":
                    cmd.append("--dir=" + tmp)
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            if r.returncode != 0:
                die("bench_tiered --side=%s failed (exit %d):\n%s%s" % (
                    side, r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
            got = {}
            for line in r.stdout.splitlines():
                if line.startswith("row "):
                    kv = _parse(line)
                    key = (kv["phase"] + ("_prefetch" if kv.get("prefetch") == "1" else "")
                           + ("_warm" if kv.get("warm") == "1" else ""))
                    got[key] = kv
            for phase in ("populate", "train", "serve", "memory"):
                if phase not in got:
                    die("bench_tiered --side=%s printed no %s line:\n%s" % (
                        side, phase, r.stdout[-2000:]))
            res[side].append(got)
            t = got["train"]
            line = ("  round %d %-6s populate %6.1f s  train %8.0f ex/s (hit %.4f)" % (
                rnd + 1, side, float(got["populate"]["seconds"]),
                float(t["examples_per_s"]), float(t["hit_rate"])))
            if "train_prefetch" in got:
                line += "  with prefetch %8.0f ex/s" % float(got["train_prefetch"]["examples_per_s"])
            if "train_prefetch_warm" in got:
                line += ", page cache warm %8.0f ex/s" % float(
                    got["train_prefetch_warm"]["examples_per_s"])
            m = got["memory"]
            line += ("  serve p50 %.2f p99 %.2f ms  peak RSS %5.0f MB (table %5.0f MB in "
                     "memory, cold index %4.0f MB, cold files %5.0f MB)" % (
                         float(got["serve"]["p50_ms"]), float(got["serve"]["p99_ms"]),
                         float(m["peak_rss_mb"]), float(m["table_mb"]),
                         float(m["cold_index_mb"]), float(m["cold_file_mb"])))
            print(line, flush=True)

    def fig(side, phase, key):
        return med([float(g[phase][key]) for g in res[side]])

    dram = fig("dram", "train", "examples_per_s")
    tier = fig("tiered", "train_prefetch", "examples_per_s")
    tier_np = fig("tiered", "train", "examples_per_s")
    tier_warm = fig("tiered", "train_prefetch_warm", "examples_per_s")
    hit = fig("tiered", "train", "hit_rate")
    peak = fig("tiered", "memory", "peak_rss_mb")
    budget_mb = budget_gb * 1e3
    p99_t, p99_d = fig("tiered", "serve", "p99_ms"), fig("dram", "serve", "p99_ms")
    print("medians: all in memory %.0f ex/s; tiered %.0f ex/s with prefetch (%.2fx), %.0f "
          "without (%.2fx), %.0f with the cold files in the page cache (%.2fx); DRAM hit rate "
          "%.4f (lookups without prefetch); tiered peak RSS %.0f MB vs budget %.0f MB (all in "
          "memory: %.0f MB); serving p99 %.2f vs %.2f ms" % (
              dram, tier, tier / dram, tier_np, tier_np / dram, tier_warm, tier_warm / dram,
              hit, peak, budget_mb,
              fig("dram", "memory", "peak_rss_mb"), p99_t, p99_d))
    return [
        "RESULT bench=tiered metric=examples_per_s recflow=%.0f peer=all_in_memory "
        "peer_value=%.0f ratio=%.2f" % (tier, dram, tier / dram),
        "RESULT bench=tiered metric=examples_per_s_no_prefetch recflow=%.0f "
        "peer=all_in_memory peer_value=%.0f ratio=%.2f" % (tier_np, dram, tier_np / dram),
        "RESULT bench=tiered metric=examples_per_s_page_cache_warm recflow=%.0f "
        "peer=all_in_memory peer_value=%.0f ratio=%.2f" % (tier_warm, dram, tier_warm / dram),
        "RESULT bench=tiered metric=dram_hit_rate recflow=%.4f peer=target peer_value=0.90 "
        "ratio=%.2f" % (hit, hit / 0.90),
        "RESULT bench=tiered metric=peak_rss_mb recflow=%.0f peer=budget_plus_10pct "
        "peer_value=%.0f ratio=%.2f" % (peak, 1.1 * budget_mb, 1.1 * budget_mb / peak),
        "RESULT bench=tiered metric=serving_p99_ms recflow=%.2f peer=all_in_memory "
        "peer_value=%.2f ratio=%.2f" % (p99_t, p99_d, p99_d / p99_t),
    ]
