"""bench/run overload: recflow serve and a peer (ONNX Runtime behind Node.js)
driven at 3x their own capacity: p99 of the admitted requests, how fast and
how much load is shed (503), peak memory, and the time to recover once the
load drops back to half the capacity."""

import math
import os
import re
import shutil
import subprocess
import tempfile

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


def admission_defaults(recflow_bin):
    """{flag: default value or None} for the admission flags `recflow serve
    --help` lists (none when the binary predates them)."""
    r = subprocess.run([recflow_bin, "serve", "--help"], capture_output=True, text=True)
    text = r.stdout + r.stderr
    out = {}
    for flag in ADMISSION_FLAGS:
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
    node = check_ort()
    bench_bin, recflow_bin = serving_binaries(args)
    base, weights = serving_model(recflow_bin, bench_bin)
    onnx_model, _ = serving_onnx(weights)
    envs, set_values, origin = variant_envs(T)
    snap = os.path.join(tmp, "bin")
    bench_bin = snapshot(bench_bin, snap, envs)
    shutil.copy2(recflow_bin, snap)
    recflow_bin = os.path.join(snap, "recflow")
    ort_script = os.path.join(PEERS, "serving_ort.js")
    client_env = dict(envs["unset"])
    admission = admission_defaults(recflow_bin)
    admission_args = ["--%s=%s" % (k, v) for k, v in admission.items() if v is not None]

    def start(side, variant):
        log = os.path.join(tmp, "%s_%s.log" % (side, variant))
        if side == "recflow":
            cmd = [recflow_bin, "serve", "--port=0", "--rest_api_port=auto",
                   "--model_name=" + SERVING_MODEL, "--model_base_path=" + base,
                   "--tensorflow_intra_op_parallelism=%d" % T,
                   "--tensorflow_inter_op_parallelism=%d" % T,
                   "--file_system_poll_wait_seconds=0"] + admission_args
            env = envs[variant]
        else:
            # ONNX Runtime uses MLAS, not OpenBLAS: its variants are its
            # intra-op pool spinning or not.
            cmd = [node, ort_script, "--port=0", "--spinning=%d" % (variant == "spin"),
                   "--model=" + onnx_model, "--threads=%d" % T]
            env = envs["unset"]
        s = ServerProc("%s (%s)" % (side, variant), cmd, dict(env), log)
        servers.append(s)
        return s

    def stop(s):
        s.stop()
        servers.remove(s)

    def capacity(s):
        res, _ = serving_lines(bench_bin, ["--case=qps", "--port=%d" % s.port,
                                           "--model=" + SERVING_MODEL,
                                           "--candidates=%d" % CANDIDATES] + CAPACITY_ARGS,
                               client_env, "qps")
        return float(res[0]["best_qps"])

    def check(rf, peer, variants):
        res, _ = serving_lines(bench_bin, ["--case=check", "--port=%d" % rf.port,
                                           "--port2=%d" % peer.port, "--model=" + SERVING_MODEL,
                                           "--candidates=%d" % CANDIDATES], client_env, "check")
        diff = float(res[0]["max_abs_diff"])
        print("  check %-14s recflow vs %s, %d candidates: max_abs_diff=%.3g (tolerance 1e-4)  %s"
              % (variants, PEER, CANDIDATES, diff, "OK" if diff <= 1e-4 else "FAILED"),
              flush=True)
        if diff > 1e-4:
            die("recflow's and the peer's predictions differ; not reporting results", 4)

    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())
    print("== overload: DeepFM export, REST predict with %d candidates, open-loop load of "
          "0.5x / 3x / 0.5x each server's own capacity, recflow serve vs ONNX Runtime behind "
          "Node.js" % CANDIDATES)
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("recflow serve --tensorflow_intra_op_parallelism=%d --tensorflow_inter_op_parallelism=%d "
          "(REST worker threads: serve's default) %s" % (
              T, T, ("admission control: " + ", ".join(
                  "--%s=%s (its default)" % (k, v if v is not None else "?")
                  for k, v in admission.items())) if admission else
              "(this binary has no admission flags: it does not shed)"))
    print("peer: serving_ort.js, onnxruntime-node in one Node process, intraOpNumThreads=%d "
          "(the serving bench's `ort` config; the faster peer at %d candidates there); it has "
          "no admission control of its own" % (T, CANDIDATES))
    print("capacity: bench_serving --case=qps %s at %d candidates (closed loop, 8 connections), "
          "measured per server and round" % (" ".join(CAPACITY_ARGS), CANDIDATES))
    print("load: bench_serving --case=load, open loop over %d keep-alive connections, each "
          "request timed from its scheduled time; phases %s; requests not sent within %.0f s "
          "after the end are left unsent; recovery: %d ms windows from the drop, recovered "
          "when every later window is all-200 with p99 < %.0fx the baseline p99" % (
              CONNECTIONS, ", ".join("%s %.1fx %.0f s" % p for p in PHASES), GRACE_S,
              WINDOW_MS, RECOVERED_P99))
    print("variants: recflow OpenBLAS set = %s (%s) or unset; peer intra-op spinning on (spin) "
          "or off (nospin); each side keeps the variant with the higher capacity" % (
              set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print()

    # 1. Correctness and each side's variant (the higher capacity).
    caps = {}
    for rf_variant, peer_variant in (("set", "spin"), ("unset", "nospin")):
        rf = start("recflow", rf_variant)
        po = start("peer", peer_variant)
        check(rf, po, "%s/%s" % (rf_variant, peer_variant))
        caps[("recflow", rf_variant)] = capacity(rf)
        caps[("peer", peer_variant)] = capacity(po)
        print("  capacity recflow %-6s %7.1f req/s   %s %-6s %7.1f req/s   [%s]" % (
            rf_variant, caps[("recflow", rf_variant)], PEER, peer_variant,
            caps[("peer", peer_variant)], po.info), flush=True)
        stop(rf)
        stop(po)
    kept = {side: max((k[1] for k in caps if k[0] == side), key=lambda v: caps[(side, v)])
            for side in ("recflow", "peer")}
    print("kept: recflow %s, %s %s" % (kept["recflow"], PEER, kept["peer"]))
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
            res, _ = serving_lines(bench_bin, [
                "--case=load", "--port=%d" % s.port, "--model=" + SERVING_MODEL,
                "--candidates=%d" % CANDIDATES, "--phases=" + phases,
                "--connections=%d" % CONNECTIONS, "--grace_s=%g" % GRACE_S,
                "--trace=" + trace_path], client_env, "load")
            if s.proc.poll() is not None:
                die("%s exited (%d) during the load; its log:\n%s" % (
                    s.name, s.proc.returncode, open(s.log_path).read()[-3000:]))
            f = figures(read_trace(trace_path))
            f["capacity"] = cap
            f["peak_mb"] = peak_rss_mb(s.proc.pid)
            stop(s)
            if f["wrong"]:
                die("%s answered %d requests with 200 but without %d scores; not reporting "
                    "results" % (side, f["wrong"], CANDIDATES), 4)
            results[side].append(f)
            name = "recflow" if side == "recflow" else PEER
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
    print("medians over %d rounds (per round in brackets):" % rounds)
    print("%-28s %-30s %s" % ("", "recflow", PEER))
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
          "round (capacity run and load)" % (kept["recflow"], PEER, kept["peer"]))
    rf, pv = m("recflow", "adm_p99"), m("peer", "adm_p99")
    ratio = pv / rf if rf > 0 else float("inf")
    print("admitted p99 under 3x: recflow %.1f ms, %s %.1f ms, ratio %.2f" % (rf, PEER, pv,
                                                                             ratio))
    for side in ("recflow", "peer"):
        if m(side, "over_unsent"):
            print("  %s: %.0f of the overload's requests (median) were not sent by the cutoff "
                  "and are not in its admitted p99, which they could only raise" % (
                      "recflow" if side == "recflow" else PEER, m(side, "over_unsent")))
    print()
    return ["RESULT bench=overload metric=admitted_p99_ms recflow=%.1f peer=%s peer_value=%.1f "
            "ratio=%.3f" % (rf, PEER, pv, ratio)]


def ms(v):
    return "-" if v is None else "%.2f ms" % v


def secs(v):
    return "not recovered" if v is None else "%.1f s" % v
