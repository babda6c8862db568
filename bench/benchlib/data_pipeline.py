"""bench/run data_pipeline: Criteo TSV -> batches (parser, TextLine/Map/
Prefetch pipeline, feeding a busy consumer), rows/s, vs pandas / NumPy."""

import os
import shutil
import subprocess
import tempfile
import time

from .common import (
    BUILD, PYTHON, PEERS, die, build, try_build, variant_envs, cpu_model, snapshot, med,
)


DP_ROWS = 1000000
DP_BATCH = 4096


def dp_parse(text):
    """`check mode=M k=v ...` and `mode=M ... samples_us=... cpu_us=...` lines."""
    res = {"checks": {}, "modes": {}, "cpu": {}, "info": "", "rows": None, "bytes": None,
           "spin_us": None}
    for line in text.splitlines():
        if line.startswith("info "):
            res["info"] = line[5:]
        elif line.startswith("check "):
            kv = dict(p.split("=", 1) for p in line.split()[1:])
            res["checks"][kv.pop("mode")] = kv
        elif line.startswith("mode="):
            kv = dict(p.split("=", 1) for p in line.split())
            res["modes"][kv["mode"]] = [float(v) for v in kv["samples_us"].split(",")]
            if "cpu_us" in kv:
                res["cpu"][kv["mode"]] = [float(v) for v in kv["cpu_us"].split(",")]
        elif line.startswith("rows="):
            kv = dict(p.split("=", 1) for p in line.split())
            res["rows"], res["bytes"] = int(kv["rows"]), int(kv["bytes"])
        elif line.startswith("spin_us_per_batch="):
            res["spin_us"] = float(line.split()[0].split("=", 1)[1])
    return res


def dp_run(cmd, env, timeout=3600):
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    res = dp_parse(r.stdout)
    res["wall_s"] = time.time() - t0
    if not res["modes"]:
        die("no timing lines from: %s\n%s" % (" ".join(cmd), r.stdout[-2000:]))
    return res


def data_pipeline(args):
    tmp = tempfile.mkdtemp(prefix="bench_data_pipeline.")
    try:
        return _data_pipeline(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _data_pipeline(args, tmp):
    r = subprocess.run([PYTHON, "-c", "import pandas, numpy; print(pandas.__version__)"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        die("pandas is not importable by %s; install Debian's: apt-get install python3-pandas"
            % PYTHON, 3)
    binary = build("bench_data_pipeline") if not args.no_build else \
        os.path.join(BUILD, "bench", "bench_data_pipeline")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C build bench_data_pipeline)" % binary)
    peer_script = os.path.join(PEERS, "data_pipeline_pandas.py")
    T = args.threads
    # Neither side calls BLAS, so the OpenBLAS variants do not apply: one
    # environment (the driver's thread settings, OPENBLAS_* as given).
    envs, _, _ = variant_envs(T)
    env = envs["unset"]
    binary = snapshot(binary, os.path.join(tmp, "bin"), {"unset": env})

    print("== data_pipeline: Criteo TSV -> batches of %d (labels, dense [%d,13], 26 x ids + "
          "row_splits) vs pandas / NumPy" % (DP_BATCH, DP_BATCH))
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))

    # The data: `recflow gen-data` (the synthetic click log) when it builds
    # and runs, else the bench's own small generator.
    data_dir = os.path.join(tmp, "data")
    path = None
    t0 = time.time()
    recflow_cli = os.path.join(BUILD, "recflow")
    if not args.no_build:
        try_build("recflow")
    if os.path.exists(recflow_cli):
        r = subprocess.run([recflow_cli, "gen-data", "--rows", str(DP_ROWS), "--seed", "1",
                            "--test_rows", "0", "--out", data_dir, "--threads", str(T)],
                           env=env, capture_output=True, text=True)
        cand = os.path.join(data_dir, "train-00000-of-00001.tsv")
        if r.returncode == 0 and os.path.exists(cand):
            path, source = cand, "recflow gen-data --rows %d --seed 1 --test_rows 0" % DP_ROWS
        else:
            print("note: recflow gen-data failed (%s); using bench_data_pipeline --case=gen"
                  % (r.stderr.strip().splitlines() or ["?"])[-1])
    if path is None:
        path = os.path.join(tmp, "criteo.tsv")
        r = subprocess.run([binary, "--case=gen", "--path=" + path, "--rows=%d" % DP_ROWS,
                            "--seed=1"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            die("data generation failed:\n" + r.stderr[-3000:])
        source = "bench_data_pipeline --case=gen --rows=%d --seed=1" % DP_ROWS
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        sample = f.read(1 << 24).split(b"\n")[:-1]
    fields = [fld for line in sample for fld in line.split(b"\t")[1:]]
    missing = sum(1 for fld in fields if not fld) / max(1, len(fields))
    print("data: %d rows, %.1f MB, written by `%s` in %.1f s; %.1f%% of the feature fields are "
          "empty (missing)" % (DP_ROWS, size / 1e6, source, time.time() - t0, 100 * missing))
    print("threads: recflow parse alone on 1 thread; pipeline TextLine(lines_per_element=%d) -> "
          "Map(criteo ParseFn, num_parallel_calls=1 and %d) -> Prefetch(2); pandas and NumPy are "
          "single-threaded" % (DP_BATCH, T))
    print("rounds: %d, alternating recflow, peer; recflow: 1 checked + 3 timed passes per mode; "
          "peer: 1 timed pass per mode (checked after)" % args.rounds)
    print()

    rf_cmd = [binary, "--case=run", "--path=" + path, "--threads=%d" % T,
              "--batch=%d" % DP_BATCH, "--samples=3"]
    peer_cmd = [PYTHON, peer_script, "--path=" + path, "--batch=%d" % DP_BATCH, "--samples=1"]
    results = {"recflow": [], "peer": []}
    for rnd in range(args.rounds):
        for side in ("recflow", "peer"):
            res = dp_run(rf_cmd if side == "recflow" else peer_cmd, env)
            results[side].append(res)
            print("  [round %d] %-7s %s  (%.1f s)" % (
                rnd + 1, side, " ".join("%s=%.0frows/s" % (m, DP_ROWS / (med(s) * 1e-6))
                                       for m, s in res["modes"].items()), res["wall_s"]),
                  flush=True)

    # Correctness: every mode of both sides yields the same arrays.
    print()
    print("correctness (checksums over all batches: rows, labels, dense sum, nnz, ids, "
          "position-weighted ids, row_splits):")
    all_ok = True
    ref_mode = "parse"
    ref = results["recflow"][0]["checks"][ref_mode]
    for side in ("recflow", "peer"):
        for rnd, res in enumerate(results[side], 1):
            for mode, c in res["checks"].items():
                bad = [k for k in ("batches", "rows", "label_sum", "nnz", "id_sum", "id_wsum",
                                   "splits_sum") if c[k] != ref[k]]
                d = abs(float(c["dense_sum"]) - float(ref["dense_sum"]))
                dense_ok = d <= 1e-6 * abs(float(ref["dense_sum"]))
                ok = not bad and dense_ok
                all_ok &= ok
                if rnd == 1 or not ok:
                    print("  check %-8s %-12s round %d: %s; dense_sum diff %.3g  %s" % (
                        side, mode, rnd, "ids/rows/splits equal" if not bad else
                        "DIFFER in " + ",".join(bad), d, "OK" if ok else "FAILED"))
    print("  reference (recflow parse): rows=%s nnz=%s label_sum=%s dense_sum=%s id_sum=%s"
          % (ref["rows"], ref["nnz"], ref["label_sum"], ref["dense_sum"], ref["id_sum"]))
    print()

    # Tables.
    mb = size / 1e6
    print("throughput: %d rows, %.1f MB per pass; rows/s and MB/s from the median wall time of "
          "all passes pooled over rounds; cpu rows/s = rows per second of process CPU time "
          "(all threads)" % (DP_ROWS, mb))
    print("  %-8s %-14s %12s %9s %14s   %s" % ("side", "mode", "rows/s", "MB/s", "cpu rows/s",
                                                 "per-round rows/s"))
    rates = {}
    for side in ("recflow", "peer"):
        runs = results[side]
        for mode in runs[0]["modes"]:
            if mode.startswith("feed_"):
                continue
            pooled = [s for run in runs for s in run["modes"][mode]]
            cpu = [s for run in runs for s in run["cpu"].get(mode, [])]
            m = med(pooled)
            rates[(side, mode)] = DP_ROWS / (m * 1e-6)
            print("  %-8s %-14s %12.0f %9.1f %14s   %s" % (
                side, mode, DP_ROWS / (m * 1e-6), mb / (m * 1e-6),
                "%.0f" % (DP_ROWS / (med(cpu) * 1e-6)) if cpu else "-",
                " ".join("%.0f" % (DP_ROWS / (med(run["modes"][mode]) * 1e-6)) for run in runs)))
    print("  (pipeline_tT: wall clock of TextLine -> Map(T) -> Prefetch over the file; parse: "
          "the parser alone over lines in memory, one thread; textline: the source alone)")
    print()
    runs = results["recflow"]
    fm = med([s for run in runs for s in run["modes"]["feed_memory"]])
    fp = med([s for run in runs for s in run["modes"]["feed_pipeline"]])
    spin = med([run["spin_us"] for run in runs])
    fractions = [med(run["modes"]["feed_memory"]) / med(run["modes"]["feed_pipeline"])
                 for run in runs]
    print("training fed by the pipeline vs from memory: a consumer that spins %.0f CPU-us per "
          "batch (= the 1-thread pipeline's CPU time per batch, measured in the same process), fed by "
          "TextLine -> Map(1) -> Prefetch(2) (one background thread) or from the batches already "
          "in memory:" % spin)
    share = {m: med([c / w for run in runs for c, w in zip(run["cpu"][m], run["modes"][m])])
             for m in ("feed_memory", "feed_pipeline")}
    print("  from memory    %10.0f rows/s   (the process got %.2f CPUs)"
          % (DP_ROWS / (fm * 1e-6), share["feed_memory"]))
    print("  from pipeline  %10.0f rows/s   (the process got %.2f CPUs; it could use 2)"
          % (DP_ROWS / (fp * 1e-6), share["feed_pipeline"]))
    print("  fraction kept  %10.3f   (per round: %s; goal >= 0.9)"
          % (fm / fp, " ".join("%.3f" % f for f in fractions)))
    if share["feed_pipeline"] < 1.5 * share["feed_memory"]:
        print("  note: the pipeline run got no more CPU than the in-memory run, so producer "
              "and consumer took turns instead of overlapping (a busy machine; with "
              "kernel.sched_autogroup_enabled=1 all threads of a session share one fair "
              "share): the fraction measures the machine, not the pipeline")
    print()
    print("peer: %s (%s)" % (results["peer"][0]["info"], PYTHON))
    print("correctness: %s" % ("all checks passed" if all_ok else "SOME CHECKS FAILED"))
    if not all_ok:
        die("correctness checks failed; not reporting results", 4)
    rf = rates[("recflow", "pipeline_t%d" % T)]
    # Give the peer its best: the faster of the two pandas ways.
    pd_mode = max(("pandas_str", "pandas_category"), key=lambda m: rates[("peer", m)])
    pd_rate = rates[("peer", pd_mode)]
    per_round = [med(p["modes"][pd_mode]) / med(r["modes"]["pipeline_t%d" % T])
                 for r, p in zip(results["recflow"], results["peer"])]
    print("  kept pandas mode: %s; per-round ratio recflow pipeline_t%d / pandas rows/s: %s; "
          "median %.3f" % (pd_mode, T, " ".join("%.3f" % x for x in per_round),
                           med(per_round)))
    print()
    return ["RESULT bench=data_pipeline metric=rows_per_s recflow=%.0f peer=pandas "
            "peer_value=%.0f ratio=%.3f" % (rf, pd_rate, rf / pd_rate)]
