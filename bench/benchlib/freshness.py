"""bench/run freshness: online learning end to end (docs/online_learning.md).

A writer appends Criteo lines to a stream directory at a set rate (a new file
every few seconds, new ids appearing all the time); `recflow train --stream
--publish_interval_secs 1` trains on them and publishes updates; two servers
serve the same export of the trainer's first checkpoint, one following the
update log (`--model_update_source=dir:`) and one not, and a bounded
open-loop load of candidate-scoring requests goes to each in turn.

Reported: freshness (from the training step that last changed a row to the
first moment the server says it serves the update holding it: the server's
update-sequence gauge, polled every 5 ms), p50 and p99 over all rows of all
delta updates seen live; serving p99 with updates flowing vs the server
without them (same load, same trainer running, alternating); failed requests;
and, after the stream stops and the last update applies, the largest
difference between the updated server's predictions and those of a fresh
export of the trainer's final checkpoint on a fixed set of requests.

The peer for freshness is the whole-version reload TF Serving does: the time
to export the current checkpoint and for a server polling its base path every
second to load it and report it AVAILABLE. That is the peer's best case: it
counts no time for the checkpoint to be written (its age at export).
"""

import json
import math
import os
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

from .common import die, variant_envs, snapshot
from .serving import ServerProc, serving_binaries, serving_lines

MODEL = "ctr"
RATE_ROWS = 4000          # rows/s the writer appends
FILE_SECONDS = 5          # a new file this often
NEW_ID_FRACTION = 0.25    # rows whose C3 and C9 are ids never seen before
CANDIDATES = 200          # per request
REQUEST_RATE = 40         # requests/s of the bounded load
LOAD_SECONDS = 15         # per load phase
PUBLISH_SECS = 1

CONFIG = """\
model: {type: deepfm, embedding_dim: 8, hidden_units: [64, 32], seed: 1}
features: {dense: 13, sparse: 26, sparse_defaults: {hash_table: true}}
data: {format: criteo}
train: {batch_size: 256, threads: 1, log_every_secs: 5}
checkpoint: {save_secs: 5, keep: 3}
"""


class Writer(threading.Thread):
    """Appends the source lines to DIR/part-NNNNN.tsv at RATE_ROWS rows/s in
    100 ms chunks, a new file every FILE_SECONDS; a quarter of the rows get
    fresh ids in two fields."""

    def __init__(self, source_lines, out_dir):
        super().__init__(daemon=True)
        self.lines = source_lines
        self.out_dir = out_dir
        self.stop_event = threading.Event()
        self.rows = 0
        self.files = 0
        self.next_id = 0xF0000000
        self.rng = random.Random(7)

    def fresh(self, line):
        if self.rng.random() >= NEW_ID_FRACTION:
            return line
        cols = line.split("\t")
        for c in (14 + 2, 14 + 8):  # C3, C9 (label, I1..I13, C1.. )
            cols[c] = "%08x" % self.next_id
            self.next_id += 1
        return "\t".join(cols)

    def run(self):
        chunk = RATE_ROWS // 10
        pos = 0
        f = None
        file_start = 0
        t_next = time.time()
        while not self.stop_event.is_set():
            now = time.time()
            if f is None or now - file_start >= FILE_SECONDS:
                if f is not None:
                    f.close()
                path = os.path.join(self.out_dir, "part-%05d.tsv" % self.files)
                f = open(path, "w")
                self.files += 1
                file_start = now
            out = []
            for _ in range(chunk):
                out.append(self.fresh(self.lines[pos % len(self.lines)]))
                pos += 1
            f.write("\n".join(out) + "\n")
            f.flush()
            self.rows += chunk
            t_next += 0.1
            delay = t_next - time.time()
            if delay > 0:
                self.stop_event.wait(delay)
        if f is not None:
            f.close()


def metric_value(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/monitoring/prometheus/metrics" % port,
                                timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") and 'model="%s"' % MODEL in line:
                return float(line.rsplit(" ", 1)[1])
    return None


def version_available(port, version):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/v1/models/%s" % (port, MODEL),
                                    timeout=10) as r:
            status = json.loads(r.read().decode())
    except OSError:
        return False
    return any(v.get("version") == str(version) and v.get("state") == "AVAILABLE"
               for v in status.get("model_version_status", []))


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def request_body(test_file, n):
    """TF Serving's columnar REST body for the first n rows of a Criteo test
    file, as recflow's parser reads them (log1p dense values, hex ids tagged
    with their field)."""
    dense, ids, splits = [], [[] for _ in range(26)], [[0] for _ in range(26)]
    with open(test_file) as f:
        for i, line in enumerate(f):
            if i == n:
                break
            cols = line.rstrip("\n").split("\t")
            dense.append([math.log1p(max(float(v), 0.0)) if v else 0.0 for v in cols[1:14]])
            for k in range(26):
                h = cols[14 + k]
                if h:
                    ids[k].append((k << 32) | int(h, 16))
                splits[k].append(len(ids[k]))
    inputs = {"dense": dense}
    for k in range(26):
        inputs["C%d/ids" % (k + 1)] = ids[k]
        inputs["C%d/row_splits" % (k + 1)] = splits[k]
    return json.dumps({"inputs": inputs})


def run(cmd, env, what):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        die("%s failed (exit %d): %s\n%s%s" % (what, r.returncode, " ".join(cmd),
                                                r.stdout[-2000:], r.stderr[-3000:]))
    return r.stdout


def freshness(args):
    tmp = tempfile.mkdtemp(prefix="bench_freshness.")
    procs = []
    try:
        return _freshness(args, tmp, procs)
    finally:
        for p in procs:
            if hasattr(p, "stop"):
                p.stop()
            elif p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def _freshness(args, tmp, procs):
    rounds = args.rounds if args.rounds_explicit else 4
    bench_bin, recflow_bin = serving_binaries(args)
    # recflow needs no OpenBLAS variables; it runs with them unset.
    envs, _, _ = variant_envs(1)
    bench_bin = snapshot(bench_bin, os.path.join(tmp, "bin"), envs)
    shutil.copy2(recflow_bin, os.path.join(tmp, "bin"))
    recflow_bin = os.path.join(tmp, "bin", "recflow")
    env = envs["unset"]

    src = os.path.join(tmp, "src")
    # Enough rows that the writer never repeats one (4000/s for about 150 s).
    run([recflow_bin, "gen-data", "--rows", "800000", "--test_rows", "2000", "--seed", "3",
         "--out", src], env, "gen-data")
    with open(os.path.join(src, "train-00000-of-00001.tsv")) as f:
        lines = f.read().splitlines()
    body_path = os.path.join(tmp, "body.json")
    with open(body_path, "w") as f:
        f.write(request_body(os.path.join(src, "test-00000-of-00001.tsv"), CANDIDATES))
    config = os.path.join(tmp, "run.yaml")
    with open(config, "w") as f:
        f.write(CONFIG)

    stream = os.path.join(tmp, "stream")
    os.makedirs(stream)
    model_dir = os.path.join(tmp, "model")
    updates = os.path.join(model_dir, "updates")
    writer = Writer(lines, stream)
    writer.start()
    trainer_log = open(os.path.join(tmp, "trainer.log"), "w")
    trainer = subprocess.Popen(
        [recflow_bin, "train", "--config", config, "--stream", "--data",
         os.path.join(stream, "*.tsv"), "--model_dir", model_dir,
         "--publish_interval_secs", str(PUBLISH_SECS)],
        env=env, stdout=trainer_log, stderr=subprocess.STDOUT)
    procs.append(trainer)
    print("writer: %d rows/s, a new file every %d s, %d%% of rows with new ids; trainer: "
          "recflow train --stream --publish_interval_secs %d (1 thread)" % (
              RATE_ROWS, FILE_SECONDS, int(NEW_ID_FRACTION * 100), PUBLISH_SECS), flush=True)
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(model_dir, "checkpoint")):
        if trainer.poll() is not None or time.time() > deadline:
            trainer_log.flush()
            with open(os.path.join(tmp, "trainer.log")) as f:
                die("the streaming trainer wrote no checkpoint:\n" + f.read()[-3000:])
        time.sleep(0.2)
    time.sleep(1)
    base_live = os.path.join(tmp, "live")
    base_still = os.path.join(tmp, "still")
    run([recflow_bin, "export", "--model_dir", model_dir, "--export_dir",
         os.path.join(base_live, "1")], env, "export")
    shutil.copytree(base_live, base_still)

    def serve(name, base, extra):
        cmd = [recflow_bin, "serve", "--port=0", "--rest_api_port=auto",
               "--model_name=" + MODEL, "--model_base_path=" + base,
               "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1"]
        s = ServerProc(name, cmd + extra, env, os.path.join(tmp, name + ".log"))
        procs.append(s)
        return s

    live = serve("live", base_live, ["--file_system_poll_wait_seconds=0",
                                     "--model_update_source=dir:" + updates])
    still = serve("still", base_still, ["--file_system_poll_wait_seconds=1"])
    start_seq = metric_value(live.port, "recflow_serving_model_update_sequence") or 0
    seen_path = os.path.join(tmp, "seen.txt")
    seen_file = open(seen_path, "w")
    watcher = subprocess.Popen([bench_bin, "--case=watch", "--port=%d" % live.port,
                                "--model=" + MODEL, "--seconds=3600", "--interval_ms=5"],
                               env=env, stdout=seen_file, stderr=subprocess.STDOUT)
    procs.append(watcher)

    def load(server, key):
        res, _ = serving_lines(bench_bin, ["--case=load", "--port=%d" % server.port,
                                           "--latencies=" + os.path.join(tmp, key + ".ms"),
                                           "--model=" + MODEL, "--candidates=%d" % CANDIDATES,
                                           "--body=" + body_path, "--rate=%d" % REQUEST_RATE,
                                           "--seconds=%d" % LOAD_SECONDS, "--connections=4"],
                               env, "load")
        return res[0]

    print("load: %d requests/s of %d candidates for %d s per phase, %d rounds, alternating "
          "the server that applies updates and the one that does not" % (
              REQUEST_RATE, CANDIDATES, LOAD_SECONDS, rounds), flush=True)
    results = {"updates": [], "none": []}
    cpu0 = {"updates": cpu_seconds(live.proc.pid), "none": cpu_seconds(still.proc.pid)}
    for r in range(rounds):
        order = [("updates", live), ("none", still)]
        if r % 2:
            order.reverse()
        for key, server in order:
            res = load(server, key)
            results[key].append(res)
            print("  round %d %-7s sent=%s failed=%s shed=%s p50_ms=%s p99_ms=%s max_ms=%s "
                  "first_error=%s" % (r + 1, key, res["sent"], res["failed"], res.get("shed", 0),
                                      res["p50_ms"], res["p99_ms"], res["max_ms"],
                                      res["first_error"]),
                  flush=True)
        if trainer.poll() is not None:
            die("the streaming trainer exited (%d) during the load" % trainer.returncode)

    cpu = {"updates": cpu_seconds(live.proc.pid) - cpu0["updates"],
           "none": cpu_seconds(still.proc.pid) - cpu0["none"]}
    applies = metric_value(live.port, "recflow_serving_model_update_apply_seconds_count") or 0
    apply_sum = metric_value(live.port, "recflow_serving_model_update_apply_seconds_sum") or 0
    # The peer: a whole new version, exported and loaded (TF Serving's way).
    t0 = time.time()
    run([recflow_bin, "export", "--model_dir", model_dir, "--export_dir",
         os.path.join(base_still, "2")], env, "export")
    t_export = time.time() - t0
    while not version_available(still.port, 2):
        if time.time() - t0 > 120:
            die("the server without updates did not load version 2 in 120 s")
        time.sleep(0.02)
    t_reload = time.time() - t0
    print("full reload (the peer): export %.2f s, export + load until AVAILABLE %.2f s" % (
        t_export, t_reload), flush=True)

    # Stop the stream; the trainer publishes its last update on SIGTERM.
    writer.stop_event.set()
    writer.join()
    time.sleep(3)
    trainer.send_signal(signal.SIGTERM)
    try:
        trainer.wait(120)
    except subprocess.TimeoutExpired:
        die("the trainer did not stop within 120 s of SIGTERM")
    trainer_log.close()
    if trainer.returncode != 0:
        with open(os.path.join(tmp, "trainer.log")) as f:
            die("the trainer exited %d:\n%s" % (trainer.returncode, f.read()[-3000:]))
    last = max(int(n[len("update-"):-len(".index")]) for n in os.listdir(updates)
               if n.startswith("update-") and n.endswith(".index"))
    deadline = time.time() + 60
    while (metric_value(live.port, "recflow_serving_model_update_sequence") or 0) < last:
        if time.time() > deadline:
            die("the server did not apply update %d within 60 s" % last)
        time.sleep(0.05)
    time.sleep(0.2)
    watcher.kill()
    watcher.wait()
    seen_file.close()
    with open(os.path.join(tmp, "trainer.log")) as f:
        tail = [l for l in f.read().splitlines() if "progressive validation" in l]
    final = os.path.join(tmp, "final")
    run([recflow_bin, "export", "--model_dir", model_dir, "--export_dir",
         os.path.join(final, "1")], env, "export")
    fresh = serve("final", final, ["--file_system_poll_wait_seconds=0"])
    check, _ = serving_lines(bench_bin, ["--case=check", "--port=%d" % live.port,
                                         "--port2=%d" % fresh.port, "--model=" + MODEL,
                                         "--candidates=%d" % CANDIDATES, "--body=" + body_path],
                             env, "check")
    diff = float(check[0]["max_abs_diff"])
    fr, _ = serving_lines(bench_bin, ["--case=freshness", "--updates=" + updates,
                                      "--seen=" + seen_path, "--from_sequence=%d" % start_seq],
                          env, "freshness")
    fr = fr[0]

    def pooled_p99(key):
        with open(os.path.join(tmp, key + ".ms")) as f:
            ms = sorted(float(line) for line in f if line.strip())
        return ms[min(len(ms) - 1, int(math.ceil(0.99 * len(ms))) - 1)]

    # A 503 (bench_serving counts it as shed) is a failed request here too.
    failed = sum(int(x["failed"]) + int(x.get("shed", 0)) for x in results["updates"])
    failed_none = sum(int(x["failed"]) + int(x.get("shed", 0)) for x in results["none"])
    p99_up, p99_none = pooled_p99("updates"), pooled_p99("none")
    print("trainer: %d rows written in %d files; %s" % (
        writer.rows, writer.files, tail[-1].strip() if tail else "no progressive validation line"))
    print("updates %d..%d; freshness over %s delta updates seen live, %s rows: p50 %s s, "
          "p99 %s s, max %s s (dense variables: p50 %s s, p99 %s s; updates never seen "
          "live: %s)" % (int(start_seq) + 1, last, fr["updates"], fr["rows"], fr["p50_s"],
                         fr["p99_s"], fr["max_s"], fr["dense_p50_s"], fr["dense_p99_s"],
                         fr["unseen"]))
    print("serving p99 (all rounds' requests pooled): %.2f ms with updates, %.2f ms without "
          "(target: with <= 1.1x without); failed requests: %d with updates, %d without" % (
              p99_up, p99_none, failed, failed_none))
    print("server CPU over the load rounds: %.1f s with updates (%d applied, %.1f ms each on "
          "average), %.1f s without" % (cpu["updates"], applies,
                                        1e3 * apply_sum / max(applies, 1), cpu["none"]))
    print("after the last update (%d): served predictions vs a fresh export of the final "
          "checkpoint, %d candidates: max abs diff %.3g" % (last, CANDIDATES, diff))
    if int(fr["rows"]) == 0:
        die("no row freshness was measured (no delta update was seen live)", 4)
    if diff > 1e-5:
        die("the updated server's predictions differ from the final checkpoint's by %g" % diff, 4)
    p99 = float(fr["p99_s"])
    return [
        "RESULT bench=freshness metric=freshness_p99_s recflow=%.3f peer=full_reload "
        "peer_value=%.3f ratio=%.2f" % (p99, t_reload, t_reload / p99),
        "RESULT bench=freshness metric=freshness_p50_s recflow=%.3f peer=full_reload "
        "peer_value=%.3f ratio=%.2f" % (float(fr["p50_s"]), t_reload,
                                         t_reload / float(fr["p50_s"])),
        "RESULT bench=freshness metric=serving_p99_ms recflow=%.3f peer=no_updates "
        "peer_value=%.3f ratio=%.3f" % (p99_up, p99_none, p99_none / p99_up),
        "RESULT bench=freshness metric=failed_requests recflow=%d peer=no_updates "
        "peer_value=%d ratio=%.2f" % (failed, failed_none, (failed_none + 1.0) / (failed + 1.0)),
        "RESULT bench=freshness metric=final_max_abs_diff recflow=%.3g peer=final_checkpoint "
        "peer_value=0 ratio=%.2f" % (diff, 1.0 if diff <= 1e-5 else 0.0),
    ]
