"""bench/run distributed: a local cluster (1 ps + 2 workers, recflow
launch) vs one process: examples/s, wire bytes per step, test AUC."""

import os
import shutil
import subprocess
import tempfile
import time

from .common import (
    REPO, BUILD, die, build, variant_envs, cpu_model, snapshot, med,
)


DIST_ROWS = 1000000
DIST_TEST_ROWS = 100000
DIST_BATCH = 4096
DIST_AUC_TOLERANCE = 0.01


def dist_data(recflow_bin, env):
    """recflow gen-data --rows 1M --test_rows 100K --seed 1 (Criteo TSV), made
    once under BUILD/bench_data/distributed/ (3-4 s; delete it to remake)."""
    d = os.path.join(BUILD, "bench_data", "distributed")
    train = os.path.join(d, "train-00000-of-00001.tsv")
    test = os.path.join(d, "test-00000-of-00001.tsv")
    done = os.path.join(d, "DONE")
    if os.path.exists(done) and os.path.exists(train) and os.path.exists(test):
        return d, train, test
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    print("generating the data once into %s (recflow gen-data --rows %d --test_rows %d "
          "--seed 1) ..." % (d, DIST_ROWS, DIST_TEST_ROWS), flush=True)
    r = subprocess.run([recflow_bin, "gen-data", "--rows", str(DIST_ROWS), "--test_rows",
                        str(DIST_TEST_ROWS), "--seed", "1", "--out", d], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(train) or not os.path.exists(test):
        die("recflow gen-data failed:\n" + r.stderr[-2000:])
    with open(done, "w") as f:
        f.write("recflow gen-data --rows %d --test_rows %d --seed 1\n"
                % (DIST_ROWS, DIST_TEST_ROWS))
    return d, train, test


def dist_config(path, threads):
    """examples/configs/deepfm_hash.yaml at batch 4096 with `threads` session
    threads (every task of the cluster gets the same config)."""
    src = os.path.join(REPO, "examples", "configs", "deepfm_hash.yaml")
    with open(src) as f:
        text = f.read()
    if "batch_size: 1024" not in text:
        die("%s no longer has 'batch_size: 1024'; update dist_config in bench/benchlib/distributed.py" % src)
    text = text.replace("batch_size: 1024", "batch_size: %d\n  threads: %d"
                        % (DIST_BATCH, threads))
    with open(path, "w") as f:
        f.write(text)


def dist_children_cpu():
    import resource
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def dist_kill(proc):
    """SIGTERM to the process group (launch forwards it to its tasks), then SIGKILL."""
    import signal
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            pass


def dist_run_cluster(recflow_bin, config, train, test, model_dir, env, timeout=900):
    """recflow launch --ps 1 --workers 2 --no_chief; its stderr (every task's
    lines, prefixed) is read line by line with arrival times. Returns a dict."""
    import re
    import threading
    cmd = [recflow_bin, "launch", "--ps", "1", "--workers", "2", "--no_chief",
           "--config", config, "--model_dir", model_dir, "--", "--data", train,
           "--eval_data", test]
    cpu0 = dist_children_cpu()
    t0 = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    timer = threading.Timer(timeout, dist_kill, [proc])
    timer.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append((time.time(), line.rstrip("\n")))
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            dist_kill(proc)
    wall = time.time() - t0
    cpu = dist_children_cpu() - cpu0
    text = "\n".join(l for _, l in lines)
    if proc.returncode != 0:
        die("recflow launch failed (exit %s after %.0f s; timeout %d s): %s\n%s"
            % (proc.returncode, wall, timeout, " ".join(cmd), text[-5000:]))
    start_re = re.compile(r"^\[(worker\d+)\] worker (\d+): training worker \d+ of \d+")
    done_re = re.compile(
        r"^\[(worker\d+)\] worker (\d+): (\d+) steps of this worker \((\d+) examples\) in "
        r"([0-9.]+) s: .*; per step: (\d+) bytes sent, (\d+) bytes received, minimum (\d+) "
        r"bytes \((\d+) steps\)")
    auc_re = re.compile(r"^\[(worker\d+)\] test AUC ([0-9.]+)")
    starts, workers, auc = {}, {}, None
    for t, line in lines:
        m = start_re.match(line)
        if m:
            starts.setdefault(m.group(1), t)
            continue
        m = done_re.match(line)
        if m:
            workers[m.group(1)] = dict(
                steps=int(m.group(3)), examples=int(m.group(4)), seconds=float(m.group(5)),
                sent=int(m.group(6)), received=int(m.group(7)), minimum=int(m.group(8)),
                wire_steps=int(m.group(9)))
            continue
        m = auc_re.match(line)
        if m:
            auc = float(m.group(2))
    if sorted(workers) != ["worker0", "worker1"] or sorted(starts) != sorted(workers):
        die("expected a start line and a summary line ('... per step: N bytes sent, ...') from "
            "worker0 and worker1 in recflow launch's output; got starts %s, summaries %s:\n%s"
            % (sorted(starts), sorted(workers), text[-5000:]))
    if auc is None:
        die("no 'test AUC' line from the chief (worker0) in recflow launch's output:\n%s"
            % text[-3000:])
    # The job's training span: the first worker's first step to the last
    # worker's last step (each worker's start = when its "training worker"
    # line arrived; its end = start + the seconds of its summary line).
    first = min(starts.values())
    last = max(starts[w] + workers[w]["seconds"] for w in workers)
    span = last - first
    examples = sum(w["examples"] for w in workers.values())
    steps = sum(w["wire_steps"] for w in workers.values())
    return dict(
        eps=examples / span, span=span, wall=wall, cpu=cpu, examples=examples, auc=auc,
        workers=workers,
        stagger=max(starts.values()) - first,
        # Per step per worker (both workers' steps pooled).
        sent=sum(w["sent"] * w["wire_steps"] for w in workers.values()) / steps,
        received=sum(w["received"] * w["wire_steps"] for w in workers.values()) / steps,
        minimum=sum(w["minimum"] * w["wire_steps"] for w in workers.values()) / steps)


def dist_run_single(recflow_bin, config, train, test, model_dir, env, timeout=900):
    import re
    cmd = [recflow_bin, "train", "--config", config, "--model_dir", model_dir, "--data", train,
           "--eval_data", test]
    cpu0 = dist_children_cpu()
    t0 = time.time()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        die("recflow train took over %d s: %s" % (timeout, " ".join(cmd)))
    wall = time.time() - t0
    cpu = dist_children_cpu() - cpu0
    if r.returncode != 0:
        die("recflow train failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                       r.stdout[-2000:], r.stderr[-3000:]))
    m = re.search(r"^trained (\d+) steps \((\d+) examples\) in ([0-9.]+) s", r.stdout, re.M)
    a = re.search(r"^test AUC ([0-9.]+)", r.stdout, re.M)
    if not m or not a:
        die("no 'trained N steps ...' or 'test AUC' line from: %s\n%s"
            % (" ".join(cmd), r.stdout[-2000:]))
    examples, span = int(m.group(2)), float(m.group(3))
    return dict(eps=examples / span, span=span, wall=wall, cpu=cpu, examples=examples,
                steps=int(m.group(1)), auc=float(a.group(1)))


def distributed(args):
    tmp = tempfile.mkdtemp(prefix="bench_distributed.")
    try:
        return _distributed(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _distributed(args, tmp):
    if not args.no_build:
        build("recflow")
    recflow_bin = os.path.join(BUILD, "recflow")
    if not os.path.exists(recflow_bin):
        die("%s is missing; build it (ninja -C %s recflow)" % (recflow_bin, BUILD))
    T = args.threads
    rounds = args.rounds if args.rounds_explicit else 3
    envs, _, _ = variant_envs(T)
    env = envs["unset"]  # no peer framework here; recflow pins OpenBLAS to 1 thread itself
    data_dir, train, test = dist_data(recflow_bin, env)
    # Run a snapshot of the binary and its libraries (launch starts copies of
    # the binary it runs as, i.e. the snapshot, for every task).
    recflow_bin = snapshot(recflow_bin, os.path.join(tmp, "bin"), {"env": env})
    config = os.path.join(tmp, "deepfm_hash_b%d.yaml" % DIST_BATCH)
    dist_config(config, T)

    print("== distributed: DeepFM with hash-table embeddings (examples/configs/deepfm_hash.yaml, "
          "dim 16, hidden [256, 128], batch %d), one epoch of %d rows, then the test AUC on %d "
          "rows" % (DIST_BATCH, DIST_ROWS, DIST_TEST_ROWS))
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("data: %s (recflow gen-data --seed 1, Criteo TSV; parsed by each run's own input "
          "pipeline: one file, so each worker takes every 2nd batch)" % data_dir)
    print("cluster: recflow launch --ps 1 --workers 2 --no_chief (worker 0 is the chief; "
          "asynchronous), %d session threads per task; single: recflow train, %d threads"
          % (T, T))
    print("NOTE: this machine has %d cores. The cluster runs 3 processes (1 ps + 2 workers) on "
          "them, so it has no more CPU than the single process and cannot scale here: the "
          "figures measure the cost of the ps protocol (pull, push, serialization, gRPC, the "
          "ps's own work), not distributed speed-up. Examples per CPU-second is that cost "
          "directly; examples/s can still come out above 1 when the single process leaves "
          "part of the cores idle (see 'cores busy') and the two workers' overlapping steps "
          "fill them, or when other load shares the machine (more runnable threads get a "
          "larger share of it)." % os.cpu_count())
    print("examples/s: cluster = both workers' examples / the job's training span (the first "
          "worker's first step to the last worker's last step; start-up, the final checkpoint "
          "and the evaluation left out); single = its examples / its training loop's time. "
          "Examples are steps x %d on both sides (the last, partial batch counted whole)."
          % DIST_BATCH)
    print("rounds: %d, alternating cluster, single, cluster, single, ..." % rounds)
    print()

    results = {"cluster": [], "single": []}
    for rnd in range(rounds):
        for side in ("cluster", "single"):
            model_dir = os.path.join(tmp, "model_%s_%d" % (side, rnd))
            if side == "cluster":
                res = dist_run_cluster(recflow_bin, config, train, test, model_dir, env)
                w = res["workers"]
                extra = ("(span %.1f s, workers %s s, start stagger %.2f s; launch wall %.1f s)  "
                         "per worker per step: %.0f B sent + %.0f B received = %.0f B, minimum "
                         "%.0f B (%.2fx)" % (
                             res["span"], "/".join("%.1f" % w[k]["seconds"] for k in sorted(w)),
                             res["stagger"], res["wall"], res["sent"], res["received"],
                             res["sent"] + res["received"], res["minimum"],
                             (res["sent"] + res["received"]) / res["minimum"]))
            else:
                res = dist_run_single(recflow_bin, config, train, test, model_dir, env)
                extra = "(%d steps in %.1f s; wall %.1f s)" % (res["steps"], res["span"],
                                                              res["wall"])
            shutil.rmtree(model_dir, ignore_errors=True)
            results[side].append(res)
            print("  [round %d] %-7s %8.0f examples/s  test AUC %.4f  %.1f CPU s for the whole "
                  "run (%.0f examples per CPU-second; %.2f cores busy)  %s  (load %.1f)" % (
                      rnd + 1, side, res["eps"], res["auc"], res["cpu"],
                      res["examples"] / res["cpu"], res["cpu"] / res["wall"], extra,
                      os.getloadavg()[0]), flush=True)
    print()

    c_eps = med([r["eps"] for r in results["cluster"]])
    s_eps = med([r["eps"] for r in results["single"]])
    c_auc = med([r["auc"] for r in results["cluster"]])
    s_auc = med([r["auc"] for r in results["single"]])
    c_cpu = med([r["examples"] / r["cpu"] for r in results["cluster"]])
    s_cpu = med([r["examples"] / r["cpu"] for r in results["single"]])
    wire = med([r["sent"] + r["received"] for r in results["cluster"]])
    sent = med([r["sent"] for r in results["cluster"]])
    received = med([r["received"] for r in results["cluster"]])
    minimum = med([r["minimum"] for r in results["cluster"]])
    print("examples/s (median of %d rounds): cluster %.0f, single process %.0f, ratio %.3f  "
          "[per round: cluster %s; single %s]" % (
              rounds, c_eps, s_eps, c_eps / s_eps,
              " ".join("%.0f" % r["eps"] for r in results["cluster"]),
              " ".join("%.0f" % r["eps"] for r in results["single"])))
    c_busy = med([r["cpu"] / r["wall"] for r in results["cluster"]])
    s_busy = med([r["cpu"] / r["wall"] for r in results["single"]])
    print("examples per CPU-second of the whole run (start-up and evaluation included, all "
          "processes): cluster %.0f, single %.0f, ratio %.3f (the ps protocol's CPU cost); "
          "cores busy over the whole run: cluster %.2f, single %.2f of %d"
          % (c_cpu, s_cpu, c_cpu / s_cpu, c_busy, s_busy, os.cpu_count()))
    print("wire bytes per step per worker (Pull + Push requests and responses): %.0f (%.0f sent, "
          "%.0f received); minimum %.0f (4 bytes per touched parameter -- the dense "
          "variables and the batch's distinct embedding rows -- pulled, and 4 pushed; the ids "
          "themselves, 8 bytes each way, are not in it); %.2fx the minimum" % (wire, sent, received, minimum, wire / minimum))
    print("test AUC (median): cluster %.4f, single %.4f, difference %+.4f  [per round: cluster "
          "%s; single %s]" % (c_auc, s_auc, c_auc - s_auc,
                              " ".join("%.4f" % r["auc"] for r in results["cluster"]),
                              " ".join("%.4f" % r["auc"] for r in results["single"])))
    bad = [r["auc"] for r in results["cluster"] if abs(r["auc"] - s_auc) > DIST_AUC_TOLERANCE]
    if bad:
        print()
        print("FAILED: cluster test AUC %s differs from the single process's %.4f by more than "
              "%g" % (", ".join("%.4f" % a for a in bad), s_auc, DIST_AUC_TOLERANCE))
        die("distributed: the cluster did not train the same model as the single process (test "
            "AUC %s vs %.4f, tolerance %g); not reporting results"
            % (", ".join("%.4f" % a for a in bad), s_auc, DIST_AUC_TOLERANCE), 4)
    print("AUC check: every cluster run within %g of the single process's median: OK"
          % DIST_AUC_TOLERANCE)
    print()
    return [
        "RESULT bench=distributed metric=examples_per_sec recflow=%.0f peer=single_process "
        "peer_value=%.0f ratio=%.3f" % (c_eps, s_eps, c_eps / s_eps),
        "RESULT bench=distributed metric=wire_bytes_per_step recflow=%.0f peer=minimum "
        "peer_value=%.0f ratio=%.3f" % (wire, minimum, minimum / wire),
        "RESULT bench=distributed metric=examples_per_cpu_sec recflow=%.0f peer=single_process "
        "peer_value=%.0f ratio=%.3f" % (c_cpu, s_cpu, c_cpu / s_cpu),
    ]
