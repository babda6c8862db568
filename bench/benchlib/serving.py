"""bench/run serving: recflow serve vs two peers serving the same DeepFM (a
TorchScript server and ONNX Runtime behind Node.js), REST predict latency
(p50/p99) and max QPS with p99 < 10 ms."""

import os
import shutil
import subprocess
import tempfile

from .common import (
    REPO, BUILD, PYTHON, PEERS, VARIANT_VARS, die, build, variant_envs,
    blas_alternative, cpu_model, snapshot, med,
)


SERVING_CANDIDATES = (1, 256)
SERVING_MODEL = "deepfm"
ORT_DIR = os.path.join(PEERS, "ort")  # package.json, package-lock.json, node_modules/
ORT_INSTALL = ("install it with:  scripts/install-deps.sh --bench  (Node.js, then onnxruntime-node "
               "from bench/peers/ort/package-lock.json: cd bench/peers/ort && "
               "npm ci --ignore-scripts)")
# Peer configs: torch, and ONNX Runtime in one process (intra-op threads = T)
# and in T worker processes of one intra-op thread each (node:cluster).
PEER_NAMES = {"torch": "torchscript", "ort": "onnxruntime", "ort+cluster": "onnxruntime"}
# Shown but not in RESULT: ONNX Runtime with the MLP dynamically quantized to
# int8 (recflow serves it in float32), checked against recflow with a looser
# tolerance. recflow-int8 (serve --matmul_precision=int8) has RESULT lines
# of its own, against recflow in float32 and against ort-int8.
INT8_TOLERANCE = 0.05


def serving_model(recflow_bin, bench_bin):
    """A DeepFM trained 50 steps on generated data and exported, cached in
    BUILD/bench_cache/serving; returns (export base dir, weights dump)."""
    cache = os.path.join(BUILD, "bench_cache", "serving")
    base = os.path.join(cache, "export")
    weights = os.path.join(cache, "weights.bin")
    if os.path.exists(os.path.join(base, "1", "saved_model.pb")) and os.path.exists(weights):
        return base, weights
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    data = os.path.join(cache, "data")
    steps = [
        [recflow_bin, "gen-data", "--rows", "20000", "--test_rows", "1000", "--seed", "1",
         "--out", data],
        [recflow_bin, "train", "--config", os.path.join(REPO, "bench/configs/deepfm.yaml"),
         "--data", os.path.join(data, "train-*.tsv"), "--model_dir",
         os.path.join(cache, "model"), "--steps", "50"],
        [recflow_bin, "export", "--model_dir", os.path.join(cache, "model"), "--export_dir",
         os.path.join(base, "1")],
        [bench_bin, "--case=dump", "--export=" + os.path.join(base, "1"), "--out=" + weights],
    ]
    print("preparing the model in %s (gen-data, train --steps 50, export, dump weights)" % cache,
          flush=True)
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            shutil.rmtree(cache, ignore_errors=True)
            die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                         r.stdout[-2000:], r.stderr[-3000:]))
    return base, weights


def check_ort():
    """The node binary, or dies (exit 3) saying how to install the peer."""
    node = shutil.which("node")
    if node is None:
        die("the ONNX Runtime peer needs Node.js (node is not on PATH); " + ORT_INSTALL, 3)
    r = subprocess.run([node, "-e", "process.stdout.write(require(%r).env.versions.node)"
                        % os.path.join(ORT_DIR, "node_modules", "onnxruntime-node")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        err = [l for l in r.stderr.splitlines() if "Error" in l] or r.stderr.splitlines() or ["?"]
        die("the ONNX Runtime peer's onnxruntime-node is not loadable from %s/node_modules "
            "(%s); %s" % (ORT_DIR, err[0].strip(), ORT_INSTALL), 3)
    return node


def serving_onnx(weights):
    """The DeepFM as ONNX for the ONNX Runtime peer (serving_onnx_export.py
    --int8), cached beside the weights; returns the paths of the float32 and
    the int8 model."""
    out = os.path.join(os.path.dirname(weights), "model.onnx")
    int8 = os.path.join(os.path.dirname(weights), "model_int8.onnx")
    if all(os.path.exists(f) and os.path.getmtime(f) >= os.path.getmtime(weights)
           for f in (out, out + ".check.json", int8, int8 + ".check.json")):
        return out, int8
    cmd = [PYTHON, os.path.join(PEERS, "serving_onnx_export.py"), "--weights=" + weights,
           "--out=" + out, "--int8"]
    print("exporting the model to ONNX for the ONNX Runtime peer (%s)" % out, flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    print("  " + r.stdout.strip().splitlines()[-1], flush=True)
    return out, int8


class ServerProc:
    """A server started in the background; .port once it listens."""

    def __init__(self, name, cmd, env, log_path):
        import re
        import threading
        self.name = name
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        self.port = None
        self.info = ""
        found = threading.Event()

        def reader():
            for line in self.proc.stdout:
                self.log.write(line)
                self.log.flush()
                if line.startswith("info "):
                    self.info = line[5:].strip()
                m = (re.search(r"serving model \S+ version \d+ on http://[\d.]+:(\d+)", line)
                     or re.match(r"listening port=(\d+)", line))
                if m and self.port is None:
                    self.port = int(m.group(1))
                    found.set()
            found.set()

        threading.Thread(target=reader, daemon=True).start()
        found.wait(180)
        if self.port is None:
            self.stop()
            with open(log_path) as f:
                die("%s did not start listening: %s\n%s" % (name, " ".join(cmd), f.read()[-3000:]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def serving_lines(bench_bin, args_list, env, prefix):
    r = subprocess.run([bench_bin] + args_list, env=env, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        die("%s failed (exit %d): %s\n%s%s" % (prefix, r.returncode, " ".join(args_list),
                                               r.stdout[-2000:], r.stderr[-2000:]))
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts and parts[0] == prefix:
            out.append(dict(p.split("=", 1) for p in parts[1:]))
    return out, r.stdout


def serving_binaries(args):
    """(bench_serving, recflow): built first unless --no-build."""
    if args.no_build:
        bench_bin = os.path.join(BUILD, "bench", "bench_serving")
    else:
        bench_bin = build("bench_serving")
        build("recflow")
    recflow_bin = os.path.join(BUILD, "recflow")
    for b in (bench_bin, recflow_bin):
        if not os.path.exists(b):
            die("%s is missing; build it (ninja -C build bench_serving recflow)" % b)
    return bench_bin, recflow_bin


def serving(args):
    tmp = tempfile.mkdtemp(prefix="bench_serving.")
    servers = []
    try:
        return _serving(args, tmp, servers)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _serving(args, tmp, servers):
    T = args.threads
    rounds = args.rounds if args.rounds_explicit else 3
    node = check_ort()
    bench_bin, recflow_bin = serving_binaries(args)
    base, weights = serving_model(recflow_bin, bench_bin)
    onnx_model, onnx_int8 = serving_onnx(weights)
    envs, set_values, origin = variant_envs(T)
    snap = os.path.join(tmp, "bin")
    bench_bin = snapshot(bench_bin, snap, envs)
    shutil.copy2(recflow_bin, snap)
    recflow_bin = os.path.join(snap, "recflow")
    peer_script = os.path.join(PEERS, "serving_torch.py")
    ort_script = os.path.join(PEERS, "serving_ort.js")
    client_env = dict(envs["unset"])

    def start(config, variant):
        log = os.path.join(tmp, "%s_%s.log" % (config, variant))
        if config.startswith("ort"):
            # ONNX Runtime uses its own MLAS, not OpenBLAS: its variants are
            # the intra-op pool's spinning ("spin", "nospin").
            env = dict(envs["unset"])
            cmd = [node, ort_script, "--port=0", "--spinning=%d" % (variant == "spin"),
                   "--model=" + (onnx_int8 if config == "ort-int8" else onnx_model)]
            if config == "ort+cluster":
                cmd += ["--workers=%d" % T, "--threads=1"]
            else:
                cmd += ["--threads=%d" % T]
            s = ServerProc("%s (%s)" % (config, variant), cmd, env, log)
            servers.append(s)
            return s
        env = dict(envs[variant.split("+")[0]])
        if variant.endswith("+omp_passive"):
            env["OMP_WAIT_POLICY"] = "PASSIVE"
        if config.startswith("recflow"):
            cmd = [recflow_bin, "serve", "--port=0", "--rest_api_port=auto",
                   "--model_name=" + SERVING_MODEL, "--model_base_path=" + base,
                   "--tensorflow_intra_op_parallelism=%d" % T,
                   "--tensorflow_inter_op_parallelism=%d" % T,
                   "--file_system_poll_wait_seconds=0"]
            if config == "recflow+batching":
                cmd.append("--enable_batching")
            if config == "recflow-int8":
                cmd.append("--matmul_precision=int8")
        else:
            cmd = [PYTHON, peer_script, "--weights=" + weights, "--port=0", "--threads=%d" % T]
        s = ServerProc("%s (%s)" % (config, variant), cmd, env, log)
        servers.append(s)
        return s

    def stop(s):
        s.stop()
        servers.remove(s)

    def latency(port, n, requests):
        res, _ = serving_lines(bench_bin, ["--case=latency", "--port=%d" % port,
                                           "--model=" + SERVING_MODEL, "--candidates=%d" % n,
                                           "--requests=%d" % requests, "--warmup=50"],
                               client_env, "latency")
        return res[0]

    def qps(port, n):
        res, out = serving_lines(bench_bin, ["--case=qps", "--port=%d" % port,
                                             "--model=" + SERVING_MODEL, "--candidates=%d" % n,
                                             "--seconds=1.5", "--limit_ms=10"],
                                 client_env, "qps")
        levels = [l for l in out.splitlines() if l.startswith("level ")]
        return res[0], levels

    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())
    print("== serving: DeepFM export, REST predict with 1 and 256 candidates, recflow serve vs "
          "a TorchScript server and ONNX Runtime behind Node.js")
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("threads: recflow serve --tensorflow_intra_op_parallelism=%d "
          "--tensorflow_inter_op_parallelism=%d (REST worker threads: serve's default); torch "
          "peer torch.set_num_threads(%d), set_num_interop_threads(%d), a stdlib "
          "ThreadingHTTPServer (thread per connection, HTTP/1.1 keep-alive, TCP_NODELAY), "
          "torch.jit.trace + freeze, inference_mode; OMP_NUM_THREADS=OPENBLAS_NUM_THREADS=%d"
          % (T, T, T, T, T))
    print("ort peer: onnxruntime-node, node:http (HTTP/1.1 keep-alive, TCP_NODELAY), config "
          "ort: one process, intraOpNumThreads=%d; config ort+cluster: %d node:cluster "
          "workers of intraOpNumThreads=1; interOpNumThreads=1, graphOptimizationLevel=all, "
          "execution mode timed at startup; model %s; config ort-int8 (shown, not in RESULT): "
          "as ort with the MLP's hidden layers dynamically quantized (%s)"
          % (T, T, onnx_model, onnx_int8))
    print("client: bench_serving on the same machine (not pinned; it shares the %d CPUs with "
          "the server; its CPU time is printed), keep-alive connections to 127.0.0.1, "
          "pre-serialized columnar request bodies" % os.cpu_count())
    print("libblas.so.3 alternative -> %s" % blas_alternative())
    print("variants: set = %s (%s); unset = both removed; ort: intra-op spinning on (spin) "
          "or off (nospin)"
          % (set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print()

    def check(rf, peer, config, variant, tolerance=1e-4):
        diffs = {}
        for n in SERVING_CANDIDATES:
            res, _ = serving_lines(bench_bin, ["--case=check", "--port=%d" % rf.port,
                                               "--port2=%d" % peer.port,
                                               "--model=" + SERVING_MODEL,
                                               "--candidates=%d" % n], client_env, "check")
            diff = float(res[0]["max_abs_diff"])
            diffs[n] = diff
            ok = diff <= tolerance
            print("  check %-17s candidates=%-4d recflow vs %-11s max_abs_diff=%.3g "
                  "(tolerance %g)  %s" % (variant, n, config, diff, tolerance,
                                         "OK" if ok else "FAILED"), flush=True)
            if not ok:
                die("recflow's and %s's predictions differ; not reporting results" % config, 4)
        return diffs

    def probe_latency(side, variant, s):
        lat = latency(s.port, 256, 200)
        probe[(side, variant)] = float(lat["p50_ms"]) + float(lat["p99_ms"])
        print("  probe %-11s %-17s 256 candidates p50 %.3f ms p99 %.3f ms  [%s]" % (
            side, variant, float(lat["p50_ms"]), float(lat["p99_ms"]),
            s.info or "recflow serve"), flush=True)

    # 1. Correctness and the environment variant of each side (probe: 256
    # candidates, sequential, the lower p50 + p99 wins: spinning OpenMP
    # threads can win the median and lose the tail). The torch peer is also
    # tried with OMP_WAIT_POLICY=PASSIVE (spinning OpenMP threads suffer on a
    # loaded machine); ONNX Runtime with its intra-op pool spinning or not.
    # recflow runs alone while a peer starts (the torch peer times its two
    # layouts at startup, the ort peer its execution modes).
    probe = {}
    for variant in ("set", "unset", "set+omp_passive", "unset+omp_passive"):
        base_variant = variant.split("+")[0]
        pt = start("torch", variant)
        rf = start("recflow", base_variant)
        check(rf, pt, "torch", variant)
        for side, s in (("recflow", rf), ("torch", pt)):
            if side == "recflow" and variant != base_variant:
                continue
            probe_latency(side, variant, s)
        stop(rf)
        stop(pt)
    for variant in ("spin", "nospin"):
        po = start("ort", variant)
        rf = start("recflow", "unset")
        check(rf, po, "ort", variant)
        probe_latency("ort", variant, po)
        stop(rf)
        stop(po)
    kept = {side: min((k[1] for k in probe if k[0] == side), key=lambda v: probe[(side, v)])
            for side in ("recflow", "torch", "ort")}
    rf = start("recflow", "unset")
    int8_diffs = {}
    for config in ("ort+cluster", "ort-int8"):
        po = start(config, kept["ort"])
        d = check(rf, po, config, kept["ort"], INT8_TOLERANCE if config == "ort-int8" else 1e-4)
        if config == "ort-int8":
            int8_diffs[config] = d
        stop(po)
    # recflow-int8 computes its first 16 requests in float (calibration):
    # warmed up before it is compared.
    ri = start("recflow-int8", kept["recflow"])
    latency(ri.port, 256, 20)
    int8_diffs["recflow-int8"] = check(rf, ri, "recflow-int8", kept["recflow"], INT8_TOLERANCE)
    stop(ri)
    stop(rf)
    print("kept: recflow %s, torch %s, ort %s" % (kept["recflow"], kept["torch"], kept["ort"]))
    print()

    # 2. Rounds: each config started fresh, latency then QPS for both sizes.
    peers = ["torch", "ort", "ort+cluster"]  # in RESULT
    configs = ["recflow", "recflow+batching", "recflow-int8"] + peers + ["ort-int8"]
    results = {(c, n): [] for c in configs for n in SERVING_CANDIDATES}
    print("rounds: %d; per round each server: latency (1 client, sequential) then max QPS "
          "(closed loop, concurrency 1, 2, 3, 4, 6, 8, ... while p99 < 10 ms), for 1 and 256 "
          "candidates (order flipped every round)" % rounds)
    for rnd in range(rounds):
        order = configs if rnd % 2 == 0 else list(reversed(configs))
        for c in order:
            s = start(c, kept["recflow" if c.startswith("recflow") else
                               "torch" if c == "torch" else "ort"])
            if s.info:
                print("  [round %d] %s: %s" % (rnd + 1, c, s.info))
            for n in SERVING_CANDIDATES:
                lat = latency(s.port, n, 2000 if n == 1 else 500)
                q, levels = qps(s.port, n)
                r = {"p50": float(lat["p50_ms"]), "p99": float(lat["p99_ms"]),
                     "qps": float(q["best_qps"]), "conc": int(q["at_concurrency"]),
                     "levels": levels, "wrong": int(q["wrong_answers"])}
                if r["wrong"]:
                    print("  [round %d] %s %d cand.: %d WRONG answers under concurrent load "
                          "(differ from the answer to the same request sent alone)"
                          % (rnd + 1, c, n, r["wrong"]), flush=True)
                results[(c, n)].append(r)
                print("  [round %d] %-16s %3d cand.  p50 %7.3f ms  p99 %7.3f ms  max QPS "
                      "(p99<10ms) %8.1f at concurrency %d   (load %.1f)" % (
                          rnd + 1, c, n, r["p50"], r["p99"], r["qps"], r["conc"],
                          os.getloadavg()[0]), flush=True)
                for l in levels:
                    print("      " + l)
            stop(s)
    print()

    def m(c, n, key):
        return med([r[key] for r in results[(c, n)]])

    # The recflow config used for RESULT: the one better on more of the
    # eight figures (p50, p99, QPS x 2 sizes; ties: no batching).
    wins = 0
    for n in SERVING_CANDIDATES:
        wins += (m("recflow+batching", n, "p50") < m("recflow", n, "p50"))
        wins += (m("recflow+batching", n, "p99") < m("recflow", n, "p99"))
        wins += 2 * (m("recflow+batching", n, "qps") > m("recflow", n, "qps"))
    wrong = {c: sum(r["wrong"] for n in SERVING_CANDIDATES for r in results[(c, n)])
             for c in configs}
    best = "recflow+batching" if wins > 4 else "recflow"
    if wrong[best]:
        other = "recflow" if best == "recflow+batching" else "recflow+batching"
        if wrong[other]:
            die("recflow answered wrongly under load in both configurations (%s); not "
                "reporting results" % wrong, 4)
        print("%s gave %d wrong answers under load: using %s" % (best, wrong[best], other))
        best = other
    if wrong["recflow-int8"]:
        die("recflow-int8 gave %d wrong answers under load; not reporting results"
            % wrong["recflow-int8"], 4)
    for c in peers + ["ort-int8"]:
        if wrong[c]:
            die("the peer %s gave %d wrong answers under load; not reporting results"
                % (c, wrong[c]), 4)
    print("%-16s %5s %10s %10s %10s %6s   per-round p99 / QPS" % (
        "server", "cand.", "p50 ms", "p99 ms", "max QPS", "wrong"))
    for c in configs:
        for n in SERVING_CANDIDATES:
            print("%-16s %5d %10.3f %10.3f %10.1f %6d   %s / %s" % (
                c, n, m(c, n, "p50"), m(c, n, "p99"), m(c, n, "qps"),
                sum(r["wrong"] for r in results[(c, n)]),
                " ".join("%.3f" % r["p99"] for r in results[(c, n)]),
                " ".join("%.0f" % r["qps"] for r in results[(c, n)])))
    print("recflow config used for RESULT: %s (recflow with and without --enable_batching "
          "both shown above); variants: recflow %s, torch %s, ort %s" % (
              best, kept["recflow"], kept["torch"], kept["ort"]))
    print("RESULT lines compare recflow with the best peer config for each figure (lowest "
          "p50/p99, highest QPS; all peers shown above and below)")

    def peers_text(n, key, unit):
        return ", ".join(("%s %.3f%s" % (c, m(c, n, key), unit) if unit else
                          "%s %.1f" % (c, m(c, n, key))) + (" (int8, not in RESULT)"
                                                           if c == "ort-int8" else "")
                         for c in peers + ["ort-int8"])

    out = []
    for n in SERVING_CANDIDATES:
        for key in ("p50", "p99"):
            pc = min(peers, key=lambda c: m(c, n, key))
            rf, pv = m(best, n, key), m(pc, n, key)
            met = "" if key == "p50" else ("  target (p99 <= half the best peer's): %s"
                                           % ("met" if pv / rf >= 2 else "NOT met"))
            print("%d candidates %s: recflow %.3f ms; peers %s; best peer %s, ratio %.2f%s"
                  % (n, key, rf, peers_text(n, key, " ms"), pc, pv / rf, met))
            out.append("RESULT bench=serving_%s_%d metric=%s_ms recflow=%.3f peer=%s "
                       "peer_value=%.3f ratio=%.3f" % (key, n, key, rf, PEER_NAMES[pc], pv,
                                                       pv / rf))
    for n in SERVING_CANDIDATES:
        pc = max(peers, key=lambda c: m(c, n, "qps"))
        rf, pv = m(best, n, "qps"), m(pc, n, "qps")
        # 0 = no level kept p99 under the limit; both 0 counts as a tie.
        ratio = rf / pv if pv > 0 else (float("inf") if rf > 0 else 1.0)
        print("%d candidates max QPS (p99 < 10 ms): recflow %.1f; peers %s; best peer %s, "
              "ratio %.2f  target (>= 2x): %s" % (
                  n, rf, peers_text(n, "qps", ""), pc, ratio,
                  "met" if ratio >= 2 else "NOT met" + (
                      " (no server kept p99 under 10 ms)" if rf == 0 and pv == 0 else "")))
        out.append("RESULT bench=serving_qps_%d metric=qps_p99_under_10ms recflow=%.1f "
                   "peer=%s peer_value=%.1f ratio=%.3f" % (n, rf, PEER_NAMES[pc], pv, ratio))
    # Int8: recflow serve --matmul_precision=int8 against recflow in float32
    # (same server, no batching) and against ONNX Runtime's int8 model.
    print("int8: recflow serve --matmul_precision=int8 (largest probability change against "
          "float32: %s; ort-int8's against recflow float32: %s)" % (
              ", ".join("%d cand. %.2g" % (n, d) for n, d in
                        sorted(int8_diffs["recflow-int8"].items())),
              ", ".join("%d cand. %.2g" % (n, d) for n, d in
                        sorted(int8_diffs["ort-int8"].items()))))
    for n in SERVING_CANDIDATES:
        for key in ("p50", "p99", "qps"):
            i8 = m("recflow-int8", n, key)
            for other, name, tag in (("recflow", "recflow_float32", "vs_float32"),
                                     ("ort-int8", "onnxruntime_int8", "vs_ort_int8")):
                ov = m(other, n, key)
                if key == "qps":
                    ratio = i8 / ov if ov > 0 else (float("inf") if i8 > 0 else 1.0)
                else:
                    ratio = ov / i8
                print("%d candidates %s: recflow-int8 %.3f, %s %.3f, ratio %.2f" % (
                    n, key, i8, other, ov, ratio))
                if n == 256 and key != "p50":
                    metric = "qps_p99_under_10ms" if key == "qps" else "p99_ms"
                    out.append("RESULT bench=serving_int8_%s_%s_%d metric=%s recflow=%.3f "
                               "peer=%s peer_value=%.3f ratio=%.3f" % (tag, key, n, metric, i8,
                                                                       name, ov, ratio))
    print()
    return out
