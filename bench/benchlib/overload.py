"""bench/run overload: recflow serve and a peer (ONNX Runtime behind Node.js)
driven at 3x their own capacity: p99 of the admitted requests, how fast and
how much load is shed (503), peak memory, and the time to recover once the
load drops back to half the capacity.

bench/run overload --protocol=grpc: the same over gRPC Predict, recflow serve
with its gRPC admission control against the same recflow serve with it
turned off (--grpc_max_concurrent_requests=0): an ablation, not another
system."""

import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.request

from .common import PEERS, VARIANT_VARS, die, variant_envs, cpu_model, snapshot, med
from .serving import (
    SERVING_MODEL, ServerProc, check_ort, serving_binaries, serving_lines, serving_model,
    serving_onnx,
)


CANDIDATES = 256  # per request: the serving bench's big case
# The load: (name, multiple of the server's capacity, seconds), back to back.
PHASES = (("baseline", 0.5, 4.0), ("overload", 3.0, 8.0), ("recovery", 0.5, 8.0))
# Enough connections that the server holds a real queue under overload
# (recflow serve: 4 handlers + its queue; max_connections 1024).
CONNECTIONS = 256
# Requests not sent within this long after the load's end are left unsent,
# so a server far behind does not stretch the run (they count as not 200).
GRACE_S = 2.0
WINDOW_MS = 500  # recovery: 500 ms windows from the drop
RECOVERED_P99 = 2.0  # a window is recovered when all-200 and p99 < this x baseline p99
# Capacity: a closed loop at saturation (8 connections, requests back to back).
CAPACITY_ARGS = ["--levels=8", "--seconds=3", "--limit_ms=60000"]
ADMISSION_FLAGS = ("rest_api_max_queued_requests", "rest_api_max_queue_wait_ms")
PEER = "onnxruntime"  # one Node process, intra-op threads = T (the serving bench's `ort`)
# --protocol=grpc: recflow serve's gRPC admission flags, and the peer: the
# same server with admission control off.
GRPC_ADMISSION_FLAGS = ("grpc_max_concurrent_requests", "grpc_max_queued_requests",
                        "grpc_max_queue_wait_ms")
GRPC_PEER = "recflow-no-admission"
GRPC_PEER_FLAG = "--grpc_max_concurrent_requests=0"
SAMPLE_S = 0.1  # --protocol=grpc: the server's threads and RSS sampled this often in the load


def admission_defaults(recflow_bin, flags=ADMISSION_FLAGS):
    """{flag: default value or None} for the admission flags `recflow serve
    --help` lists (none when the binary predates them)."""
    r = subprocess.run([recflow_bin, "serve", "--help"], capture_output=True, text=True)
    text = r.stdout + r.stderr
    out = {}
    for flag in flags:
        m = re.search(r"--%s(?:=VALUE)?\s*\n\s*(.*)" % flag, text)
        if m:
            d = re.search(r"default:?\s*(\w+)", m.group(1))
            out[flag] = d.group(1) if d else None
    return out


def peak_rss_mb(pid):
    """VmHWM of a running process, in MB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def proc_status(pid, key):
    """A number field of /proc/PID/status (Threads, VmRSS in kB); None when gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Sampler:
    """The most threads and the largest RSS of a process, sampled every
    SAMPLE_S seconds between start() and stop()."""

    def __init__(self, pid):
        self.pid = pid
        self.threads = 0
        self.rss_mb = 0.0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._done.is_set():
            t, rss = proc_status(self.pid, "Threads"), proc_status(self.pid, "VmRSS")
            if t is not None:
                self.threads = max(self.threads, t)
            if rss is not None:
                self.rss_mb = max(self.rss_mb, rss / 1024.0)
            self._done.wait(SAMPLE_S)

    def start(self):
        self._thread.start()

    def stop(self):
        self._done.set()
        self._thread.join()


def grpc_metrics(rest_port):
    """{name: value} of the recflow_serving_grpc_* lines of the server's
    metrics page ({} without admission control or when unreadable)."""
    url = "http://127.0.0.1:%d/monitoring/prometheus/metrics" % rest_port
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("recflow_serving_grpc_"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def pct(v, q):
    """The q-quantile as bench_serving computes it (nearest rank); 0 when empty."""
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, max(0, math.ceil(q * len(v)) - 1))]


def read_trace(path):
    """[(phase, sched_ms, status, latency_ms)] from bench_serving --trace."""
    out = []
    with open(path) as f:
        for line in f:
            p, s, st, lat = line.split()
            out.append((int(p), float(s), int(st), float(lat)))
    return out


def figures(trace):
    """The figures of one run from its trace."""
    by_phase = [[r for r in trace if r[0] == i] for i in range(len(PHASES))]
    base, over, rec = by_phase

    def ok(rows):
        return [r[3] for r in rows if r[2] == 200]

    base_p99 = pct(ok(base), 0.99)
    shed = [r[3] for r in over if r[2] == 503]
    f = {
        "base_p50": pct(ok(base), 0.5), "base_p99": base_p99,
        "base_not200": sum(r[2] != 200 for r in base),
        "adm_p50": pct(ok(over), 0.5), "adm_p99": pct(ok(over), 0.99),
        "admitted": len(ok(over)), "over_n": len(over),
        "shed_frac": len(shed) / len(over) if over else 0.0,
        "shed_p50": pct(shed, 0.5) if shed else None,
        "shed_p99": pct(shed, 0.99) if shed else None,
        "errors": sum(r[2] not in (-1, 200, 503) for r in trace),
        "wrong": sum(r[2] == 1 for r in trace),
        "unsent": sum(r[2] == -1 for r in trace),
        "over_unsent": sum(r[2] == -1 for r in over),
    }
    # Recovery: 500 ms windows of the last phase by scheduled time, from the
    # drop; recovered at the start of the first window from which on every
    # window is all-200 with p99 < 2x the baseline p99.
    drop_ms = 1000.0 * sum(p[2] for p in PHASES[:2])
    n_windows = int(round(1000.0 * PHASES[2][2] / WINDOW_MS))
    windows = [[] for _ in range(n_windows)]
    for r in rec:
        windows[min(n_windows - 1, int((r[1] - drop_ms) // WINDOW_MS))].append(r)
    good = [bool(w) and all(r[2] == 200 for r in w) and
            pct([r[3] for r in w], 0.99) < RECOVERED_P99 * base_p99 for w in windows]
    first = n_windows
    while first > 0 and good[first - 1]:
        first -= 1
    f["recovery_s"] = first * WINDOW_MS / 1000.0 if first < n_windows else None
    f["windows"] = " ".join(
        "%s%s" % ("%.0f" % pct(ok(w), 0.99) if ok(w) else "-",
                  "" if all(r[2] == 200 for r in w) else
                  "/%d" % sum(r[2] != 200 for r in w)) for w in windows)
    return f


def overload(args):
    tmp = tempfile.mkdtemp(prefix="bench_overload.")
    servers = []
    try:
        return _overload(args, tmp, servers)
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _overload(args, tmp, servers):
    T = args.threads
    rounds = args.rounds if args.rounds_explicit else 2
    # grpc: both sides are recflow serve, loaded over gRPC; the peer has
    # admission control off. REST stays on for the metrics page.
    grpc = getattr(args, "protocol", "rest") == "grpc"
    peer_name = GRPC_PEER if grpc else PEER
    node = None if grpc else check_ort()
    bench_bin, recflow_bin = serving_binaries(args)
    base, weights = serving_model(recflow_bin, bench_bin)
    onnx_model = None if grpc else serving_onnx(weights)[0]
    envs, set_values, origin = variant_envs(T)
    snap = os.path.join(tmp, "bin")
    bench_bin = snapshot(bench_bin, snap, envs)
    shutil.copy2(recflow_bin, snap)
    recflow_bin = os.path.join(snap, "recflow")
    ort_script = os.path.join(PEERS, "serving_ort.js")
    client_env = dict(envs["unset"])
    admission = admission_defaults(recflow_bin, GRPC_ADMISSION_FLAGS if grpc else ADMISSION_FLAGS)
    admission_args = ["--%s=%s" % (k, v) for k, v in admission.items() if v is not None]
    if grpc and len(admission) < len(GRPC_ADMISSION_FLAGS):
        die("this recflow has no gRPC admission flags (%s); nothing to compare"
            % ", ".join("--" + f for f in GRPC_ADMISSION_FLAGS if f not in admission), 3)
    protocol_args = ["--protocol=grpc"] if grpc else []

    def start(side, variant):
        log = os.path.join(tmp, "%s_%s.log" % (side, variant))
        if side == "recflow" or grpc:
            cmd = [recflow_bin, "serve", "--port=%s" % ("auto" if grpc else "0"),
                   "--rest_api_port=auto",
                   "--model_name=" + SERVING_MODEL, "--model_base_path=" + base,
                   "--tensorflow_intra_op_parallelism=%d" % T,
                   "--tensorflow_inter_op_parallelism=%d" % T,
                   "--file_system_poll_wait_seconds=0"] + (
                       admission_args if side == "recflow" else [GRPC_PEER_FLAG])
            env = envs[variant]
        else:
            # ONNX Runtime uses MLAS, not OpenBLAS: its variants are its
            # intra-op pool spinning or not.
            cmd = [node, ort_script, "--port=0", "--spinning=%d" % (variant == "spin"),
                   "--model=" + onnx_model, "--threads=%d" % T]
            env = envs["unset"]
        s = ServerProc("%s (%s)" % (side, variant), cmd, dict(env), log)
        servers.append(s)
        if grpc:
            # ServerProc found the REST port; serve prints the gRPC address
            # (grpc://HOST:PORT) on the line before it.
            s.rest_port = s.port
            with open(log) as f:
                m = re.search(r"serving model \S+ version \d+ on grpc://[\d.]+:(\d+)", f.read())
            if m is None:
                die("%s printed no gRPC address; its log:\n%s" % (s.name, open(log).read()[-3000:]))
            s.port = int(m.group(1))
        return s

    def stop(s):
        s.stop()
        servers.remove(s)

    def capacity(s):
        res, _ = serving_lines(bench_bin, ["--case=qps", "--port=%d" % s.port,
                                           "--model=" + SERVING_MODEL,
                                           "--candidates=%d" % CANDIDATES] + CAPACITY_ARGS
                               + protocol_args, client_env, "qps")
        return float(res[0]["best_qps"])

    def check(rf, peer, variants):
        if grpc:
            # The gRPC request carries the REST body's inputs: both answers
            # of one server agree; then recflow vs the peer over gRPC.
            pairs = [("recflow REST vs gRPC", ["--port=%d" % rf.rest_port, "--port2=%d" % rf.port,
                                               "--protocol2=grpc"]),
                     ("recflow vs %s, gRPC" % peer_name, ["--port=%d" % rf.port,
                                                          "--port2=%d" % peer.port,
                                                          "--protocol=grpc"])]
        else:
            pairs = [("recflow vs %s" % PEER, ["--port=%d" % rf.port, "--port2=%d" % peer.port])]
        for what, ports in pairs:
            res, _ = serving_lines(bench_bin, ["--case=check", "--model=" + SERVING_MODEL,
                                               "--candidates=%d" % CANDIDATES] + ports,
                                   client_env, "check")
            diff = float(res[0]["max_abs_diff"])
            print("  check %-14s %s, %d candidates: max_abs_diff=%.3g (tolerance 1e-4)  %s"
                  % (variants, what, CANDIDATES, diff, "OK" if diff <= 1e-4 else "FAILED"),
                  flush=True)
            if diff > 1e-4:
                die("recflow's and the peer's predictions differ; not reporting results", 4)

    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())
    admission_desc = ("admission control: " + ", ".join(
        "--%s=%s (its default)" % (k, v if v is not None else "?")
        for k, v in admission.items())) if admission else (
            "(this binary has no admission flags: it does not shed)")
    if grpc:
        print("== overload --protocol=grpc: DeepFM export, gRPC Predict with %d candidates, "
              "open-loop load of 0.5x / 3x / 0.5x each server's own capacity, recflow serve "
              "with gRPC admission control vs the same recflow serve with it turned off"
              % CANDIDATES)
    else:
        print("== overload: DeepFM export, REST predict with %d candidates, open-loop load of "
              "0.5x / 3x / 0.5x each server's own capacity, recflow serve vs ONNX Runtime behind "
              "Node.js" % CANDIDATES)
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    if grpc:
        print("recflow serve --port=auto --rest_api_port=auto --tensorflow_intra_op_parallelism=%d "
              "--tensorflow_inter_op_parallelism=%d (gRPC threads: gRPC's default) gRPC %s"
              % (T, T, admission_desc))
        print("peer: %s = THE SAME recflow serve (binary, model, flags, variants) with %s: gRPC "
              "admission control off, every call runs as soon as gRPC gives it a thread. An "
              "ablation of recflow's admission control, not another system"
              % (GRPC_PEER, GRPC_PEER_FLAG))
        print("capacity: bench_serving --case=qps --protocol=grpc %s at %d candidates (closed "
              "loop, 8 channels), measured per server and round" % (" ".join(CAPACITY_ARGS),
                                                                     CANDIDATES))
        print("load: bench_serving --case=load --protocol=grpc, open loop over %d gRPC channels "
              "(one HTTP/2 connection each; blocking calls, 30 s deadline), each request timed "
              "from its scheduled time; UNAVAILABLE from admission control counts as shed "
              "(503); phases %s; requests not sent within %.0f s after the end are left unsent; "
              "recovery: %d ms windows from the drop, recovered when every later window is "
              "all-OK with p99 < %.0fx the baseline p99; the server's threads and RSS sampled "
              "every %.0f ms during the load" % (
                  CONNECTIONS, ", ".join("%s %.1fx %.0f s" % p for p in PHASES), GRACE_S,
                  WINDOW_MS, RECOVERED_P99, 1000 * SAMPLE_S))
        print("variants: OpenBLAS set = %s (%s) or unset, for both sides; each side keeps the "
              "variant with the higher capacity" % (
                  set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    else:
        print("recflow serve --tensorflow_intra_op_parallelism=%d "
              "--tensorflow_inter_op_parallelism=%d (REST worker threads: serve's default) %s"
              % (T, T, admission_desc))
        print("peer: serving_ort.js, onnxruntime-node in one Node process, intraOpNumThreads=%d "
              "(the serving bench's `ort` config; the faster peer at %d candidates there); it "
              "has no admission control of its own" % (T, CANDIDATES))
        print("capacity: bench_serving --case=qps %s at %d candidates (closed loop, 8 "
              "connections), measured per server and round" % (" ".join(CAPACITY_ARGS),
                                                               CANDIDATES))
        print("load: bench_serving --case=load, open loop over %d keep-alive connections, each "
              "request timed from its scheduled time; phases %s; requests not sent within %.0f s "
              "after the end are left unsent; recovery: %d ms windows from the drop, recovered "
              "when every later window is all-200 with p99 < %.0fx the baseline p99" % (
                  CONNECTIONS, ", ".join("%s %.1fx %.0f s" % p for p in PHASES), GRACE_S,
                  WINDOW_MS, RECOVERED_P99))
        print("variants: recflow OpenBLAS set = %s (%s) or unset; peer intra-op spinning on "
              "(spin) or off (nospin); each side keeps the variant with the higher capacity" % (
                  set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print()

    # 1. Correctness and each side's variant (the higher capacity).
    caps = {}
    variant_pairs = ((("set", "set"), ("unset", "unset")) if grpc else
                     (("set", "spin"), ("unset", "nospin")))
    for rf_variant, peer_variant in variant_pairs:
        rf = start("recflow", rf_variant)
        po = start("peer", peer_variant)
        check(rf, po, "%s/%s" % (rf_variant, peer_variant))
        caps[("recflow", rf_variant)] = capacity(rf)
        caps[("peer", peer_variant)] = capacity(po)
        print("  capacity recflow %-6s %7.1f req/s   %s %-6s %7.1f req/s   [%s]" % (
            rf_variant, caps[("recflow", rf_variant)], peer_name, peer_variant,
            caps[("peer", peer_variant)], po.info), flush=True)
        stop(rf)
        stop(po)
    kept = {side: max((k[1] for k in caps if k[0] == side), key=lambda v: caps[(side, v)])
            for side in ("recflow", "peer")}
    print("kept: recflow %s, %s %s" % (kept["recflow"], peer_name, kept["peer"]))
    print()

    # 2. Rounds: per side a fresh server, its capacity, then the load.
    results = {"recflow": [], "peer": []}
    print("rounds: %d (recflow and the peer alternating, order flipped every round)" % rounds)
    for rnd in range(rounds):
        order = ["recflow", "peer"] if rnd % 2 == 0 else ["peer", "recflow"]
        for side in order:
            s = start(side, kept[side])
            cap = capacity(s)
            rates = [mult * cap for _, mult, _ in PHASES]
            peak_before = peak_rss_mb(s.proc.pid)
            trace_path = os.path.join(tmp, "trace_%s_%d.txt" % (side, rnd))
            phases = ",".join("%.1f:%g" % (r, p[2]) for r, p in zip(rates, PHASES))
            if grpc:
                threads_before = proc_status(s.proc.pid, "Threads")
                sampler = Sampler(s.proc.pid)
                sampler.start()
            res, _ = serving_lines(bench_bin, [
                "--case=load", "--port=%d" % s.port, "--model=" + SERVING_MODEL,
                "--candidates=%d" % CANDIDATES, "--phases=" + phases,
                "--connections=%d" % CONNECTIONS, "--grace_s=%g" % GRACE_S,
                "--trace=" + trace_path] + protocol_args, client_env, "load")
            if grpc:
                sampler.stop()
            if s.proc.poll() is not None:
                die("%s exited (%d) during the load; its log:\n%s" % (
                    s.name, s.proc.returncode, open(s.log_path).read()[-3000:]))
            f = figures(read_trace(trace_path))
            f["capacity"] = cap
            f["peak_mb"] = peak_rss_mb(s.proc.pid)
            if grpc:
                f["threads"] = sampler.threads
                server = grpc_metrics(s.rest_port)
            stop(s)
            if f["wrong"]:
                die("%s answered %d requests with 200 but without %d scores; not reporting "
                    "results" % (side, f["wrong"], CANDIDATES), 4)
            results[side].append(f)
            name = "recflow" if side == "recflow" else peer_name
            print("  [round %d] %-11s capacity %6.1f req/s (load: %s req/s); baseline p99 %.1f "
                  "ms%s; overload: admitted %d/%d p50 %.1f ms p99 %.1f ms, shed %.1f%% p50 %s "
                  "p99 %s; errors %d, unsent %d; recovery %s; peak RSS %.0f MB (%.0f MB before "
                  "the load)  (load avg %.1f)" % (
                      rnd + 1, name, cap, " / ".join("%.0f" % r for r in rates),
                      f["base_p99"], " (%d not 200)" % f["base_not200"] if f["base_not200"]
                      else "", f["admitted"], f["over_n"], f["adm_p50"], f["adm_p99"],
                      100 * f["shed_frac"], ms(f["shed_p50"]), ms(f["shed_p99"]), f["errors"],
                      f["unsent"], secs(f["recovery_s"]), f["peak_mb"], peak_before,
                      os.getloadavg()[0]),
                  flush=True)
            print("      recovery windows (p99 ms of the 200s or -, [/non-200 count]): %s "
                  "(client: %s)"
                  % (f["windows"], " ".join("%s=%s" % (k, res[0][k]) for k in
                                            ("sent", "ok", "shed", "failed", "unsent",
                                             "client_cpu_s"))),
                  flush=True)
            if grpc:
                shed_key = "recflow_serving_grpc_requests_shed_total"
                print("      server: threads %s before the load, at most %d during it (sampled); "
                      "largest RSS sampled %.0f MB; %s" % (
                          threads_before, sampler.threads, sampler.rss_mb,
                          "its admission control shed %.0f calls (metrics page)"
                          % server[shed_key] if shed_key in server else
                          "no admission metrics (admission off)"),
                      flush=True)
    print()

    def m(side, key):
        """The median over rounds; None when a round has none (nothing shed,
        not recovered)."""
        v = [r[key] for r in results[side]]
        if any(x is None for x in v):
            return None
        return med(v)

    rows = (("capacity (req/s)", "capacity", "%.1f"),
            ("baseline p99 at 0.5x (ms)", "base_p99", "%.1f"),
            ("admitted p50 at 3x (ms)", "adm_p50", "%.1f"),
            ("admitted p99 at 3x (ms)", "adm_p99", "%.1f"),
            ("shed fraction at 3x", "shed_frac", "%.3f"),
            ("time to shed p50 (ms)", "shed_p50", "%.2f"),
            ("time to shed p99 (ms)", "shed_p99", "%.2f"),
            ("recovery time (s)", "recovery_s", "%.1f"),
            ("peak RSS (MB)", "peak_mb", "%.0f"),
            ("errors (not 200/503)", "errors", "%d"),
            ("unsent of the overload's", "over_unsent", "%d"),
            ("unsent in all", "unsent", "%d"))
    if grpc:
        rows += (("server threads (peak)", "threads", "%d"),)
    print("medians over %d rounds (per round in brackets):" % rounds)
    print("%-28s %-30s %s" % ("", "recflow", peer_name))
    for label, key, fmt in rows:
        cells = []
        for side in ("recflow", "peer"):
            v = m(side, key)
            one = [r[key] for r in results[side]]
            misses = sum(x is None for x in one)
            text = (fmt % v) if v is not None else (
                "none" if key.startswith("shed") else "not recovered" if misses == len(one)
                else "not recovered in %d of %d" % (misses, len(one)))
            cells.append("%s [%s]" % (text, " ".join(
                (fmt % x) if x is not None else "-" for x in one)))
        print("%-28s %-30s %s" % (label, cells[0], cells[1]))
    print("variants: recflow %s, %s %s; peak RSS = VmHWM of the server process after its "
          "round (capacity run and load)" % (kept["recflow"], peer_name, kept["peer"]))
    rf, pv = m("recflow", "adm_p99"), m("peer", "adm_p99")
    ratio = pv / rf if rf > 0 else float("inf")
    print("admitted p99 under 3x: recflow %.1f ms, %s %.1f ms, ratio %.2f" % (
        rf, peer_name + (" (recflow with admission control off)" if grpc else ""), pv, ratio))
    for side in ("recflow", "peer"):
        if m(side, "over_unsent"):
            print("  %s: %.0f of the overload's requests (median) were not sent by the cutoff "
                  "and are not in its admitted p99, which they could only raise" % (
                      "recflow" if side == "recflow" else peer_name, m(side, "over_unsent")))
    print()
    return ["RESULT bench=%s metric=admitted_p99_ms recflow=%.1f peer=%s peer_value=%.1f "
            "ratio=%.3f" % ("overload_grpc" if grpc else "overload", rf, peer_name, pv, ratio)]


def ms(v):
    return "-" if v is None else "%.2f ms" % v


def secs(v):
    return "not recovered" if v is None else "%.1f s" % v
