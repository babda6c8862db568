"""bench/run python_train: DeepFM trained from Python (recflow.models, the zoo's
deepfm over recflow's C++ input pipeline, Session.run per step) vs `recflow
train` on the same config and data, and vs the PyTorch eager DeepFM of
train_e2e (bench/peers/train_e2e_torch.py). examples/s over one epoch."""

import os
import shutil
import subprocess
import tempfile
import time

from .common import (
    REPO, BUILD, PYTHON, PEERS, VARIANT_VARS, die, build, variant_envs, cpu_model, med,
)

PT_ROWS = int(os.environ.get("RECFLOW_PYTHON_TRAIN_ROWS", "500000"))
PT_BATCH = 4096
SIDES = ("python", "recflow_train", "torch")


def _config(tmp):
    """bench/configs/deepfm.yaml (train_e2e's deepfm, the form the torch peer
    reproduces) with train.batch_size = PT_BATCH and no periodic checkpoint."""
    src = os.path.join(REPO, "bench", "configs", "deepfm.yaml")
    out, section = [], None
    with open(src) as f:
        for line in f.read().splitlines():
            if line and not line[0].isspace() and not line.startswith("#"):
                section = line.split(":", 1)[0]
            if section == "train" and line.strip().startswith("batch_size:"):
                line = "  batch_size: %d" % PT_BATCH
            out.append(line)
    path = os.path.join(tmp, "deepfm.yaml")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path


def _data(recflow_bin, prepare_bin, env):
    """The TSV (recflow gen-data --seed 1) and the torch peer's cache of it
    (bench_train_e2e --case=prepare: recflow's parse of the same lines)."""
    d = os.path.join(BUILD, "bench_data", "python_train_%d" % PT_ROWS)
    tsv = os.path.join(d, "tsv", "train-00000-of-00001.tsv")
    cache = os.path.join(d, "train.cache")
    test_cache = os.path.join(d, "test.cache")
    if all(os.path.exists(f) for f in (tsv, cache, test_cache)):
        return tsv, cache, test_cache
    os.makedirs(os.path.dirname(tsv), exist_ok=True)
    print("generating the data once into %s (recflow gen-data --rows %d --seed 1) ..."
          % (d, PT_ROWS), flush=True)
    r = subprocess.run([recflow_bin, "gen-data", "--rows", str(PT_ROWS), "--test_rows", "2000",
                        "--seed", "1", "--out", os.path.dirname(tsv)], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        die("recflow gen-data failed:\n" + r.stderr[-2000:])
    test_tsv = os.path.join(os.path.dirname(tsv), "test-00000-of-00001.tsv")
    for src, out in ((tsv, cache), (test_tsv, test_cache)):
        r = subprocess.run([prepare_bin, "--case=prepare", "--tsv=" + src, "--out=" + out],
                           env=env, capture_output=True, text=True)
        if r.returncode != 0:
            die("bench_train_e2e --case=prepare failed:\n" + r.stderr[-2000:])
    return tsv, cache, test_cache


def _run(cmd, env, parse, timeout=3600):
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    res = parse(r.stdout + r.stderr)
    res["wall_s"] = time.time() - t0
    return res


def _parse_recflow_train(text):
    # "trained N steps (E examples) in S s: V examples/s; model in D"
    for line in text.splitlines():
        if line.startswith("trained ") and "examples/s" in line:
            words = line.split()
            steps, examples = int(words[1]), int(words[3].lstrip("("))
            seconds = float(words[6])
            return {"eps": examples / seconds, "steps": steps, "examples": examples,
                    "seconds": seconds, "loss": "?"}
    die("no 'trained ... examples/s' line from recflow train:\n" + text[-2000:])


def _parse_kv(text):
    for line in text.splitlines():
        if line.startswith("epoch "):
            e = dict(p.split("=", 1) for p in line.split()[1:])
            return {"eps": float(e["examples_per_sec"]), "steps": int(e["steps"]),
                    "examples": int(e["examples"]), "seconds": float(e["seconds"]),
                    "loss": "%s->%s" % (e.get("first_loss", "nan")[:6],
                                        e.get("last_loss", e.get("mean_loss_last10", "nan"))[:6])}
    die("no epoch line in:\n" + text[-2000:])


def python_train(args):
    tmp = tempfile.mkdtemp(prefix="bench_python_train.")
    try:
        return _python_train(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _python_train(args, tmp):
    if not args.no_build:
        build("recflow")
        build("recflow_python")
        build("bench_train_e2e")
    recflow_bin = os.path.join(BUILD, "recflow")
    prepare_bin = os.path.join(BUILD, "bench", "bench_train_e2e")
    pywrap = [f for f in os.listdir(os.path.join(BUILD, "python", "recflow"))
              if f.startswith("_pywrap")] if os.path.isdir(
                  os.path.join(BUILD, "python", "recflow")) else []
    for b in (recflow_bin, prepare_bin):
        if not os.path.exists(b):
            die("%s is missing; build it (ninja -C build recflow bench_train_e2e)" % b)
    if not pywrap:
        die("build/python/recflow/_pywrap*.so is missing; build recflow_python")
    T = args.threads
    rounds = args.rounds if args.rounds_explicit else 3
    envs, set_values, origin = variant_envs(T)
    for env in envs.values():
        env["PYTHONPATH"] = os.path.join(BUILD, "python")
    tsv, cache, test_cache = _data(recflow_bin, prepare_bin, envs["unset"])
    config = _config(tmp)
    print("== python_train: the zoo's DeepFM (bench/configs/deepfm.yaml, batch %d), one epoch "
          "of %d rows (recflow gen-data --seed 1)" % (PT_BATCH, PT_ROWS))
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("python:        bench/python_train.py: recflow.models.build(config, batch="
          "batch_placeholders) (the same C++ builder and graph as recflow train), "
          "recflow.models.Batches (the same C++ Criteo pipeline), Session.run per step")
    print("recflow_train: recflow train --config (same config, same TSV; its own "
          "'examples/s' line)")
    print("torch:         bench/peers/train_e2e_torch.py --mode=auto (PyTorch eager, the same "
          "DeepFM and hyperparameters as train_e2e; it reads a pre-parsed cache of the same "
          "rows, cut into batches before its clock starts)")
    print("variants: set = %s (%s); unset = both removed; every side runs in both, each keeps "
          "its faster median" % (",".join("%s=%s" % kv for kv in set_values.items()),
                                 ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print("threads: %d on every side; rounds: %d, sides alternating (order rotated each "
          "round)" % (T, rounds))
    print()

    def cmd(side, rnd):
        if side == "python":
            return [PYTHON, os.path.join(REPO, "bench", "python_train.py"), "--config=" + config,
                    "--data=" + tsv, "--threads=%d" % T], _parse_kv
        if side == "recflow_train":
            return [recflow_bin, "train", "--config", config, "--data", tsv, "--threads",
                    str(T), "--model_dir", os.path.join(tmp, "model_%d" % rnd)], \
                _parse_recflow_train
        return [PYTHON, os.path.join(PEERS, "train_e2e_torch.py"), "--model=deepfm",
                "--train=" + cache, "--test=" + test_cache, "--max_steps=0", "--threads=%d" % T,
                "--batch=%d" % PT_BATCH, "--mode=auto", "--embedding_dim=16",
                "--vocabulary_size=100000", "--hidden_units=256,128", "--bottom_units=64",
                "--emb_lr=0.1", "--emb_acc0=0.001", "--dense_lr=0.001", "--beta1=0.9",
                "--beta2=0.999", "--epsilon=1e-8"], _parse_kv

    runs = {(s, v): [] for s in SIDES for v in ("set", "unset")}
    n = 0
    for rnd in range(rounds):
        order = SIDES[rnd % 3:] + SIDES[:rnd % 3]
        for side in order:
            for variant in ("set", "unset"):
                n += 1  # a fresh model directory per run (recflow train resumes from one)
                c, parse = cmd(side, n)
                res = _run(c, envs[variant], parse)
                runs[(side, variant)].append(res)
                print("  [round %d] %-13s %-5s %8.0f examples/s  (%d steps, %d examples in %.1f "
                      "s; loss %s; %.0f s wall, load %.1f)" % (
                          rnd + 1, side, variant, res["eps"], res["steps"], res["examples"],
                          res["seconds"], res["loss"], res["wall_s"], os.getloadavg()[0]),
                      flush=True)
                shutil.rmtree(os.path.join(tmp, "model_%d" % n), ignore_errors=True)
    print()
    # Correctness: every side saw every row and its loss went down; Python's
    # steps are recflow train's (the same batches).
    for (side, variant), rs in runs.items():
        for r in rs:
            if r["examples"] != PT_ROWS:
                die("%s %s trained on %d examples, not the %d rows" % (
                    side, variant, r["examples"], PT_ROWS), 4)
            if side != "recflow_train":
                first, last = (float(x) for x in r["loss"].split("->"))
                if not last < first:
                    die("%s %s: the loss did not go down (%s)" % (side, variant, r["loss"]), 4)
            if side == "python" and r["steps"] != runs[("recflow_train", variant)][0]["steps"]:
                die("python ran %d steps, recflow train %d" % (
                    r["steps"], runs[("recflow_train", variant)][0]["steps"]), 4)
    best = {}
    for side in SIDES:
        meds = {v: med([r["eps"] for r in runs[(side, v)]]) for v in ("set", "unset")}
        v = max(meds, key=meds.get)
        best[side] = (meds[v], v, [r["eps"] for r in runs[(side, v)]])
        print("  %-13s median set %.0f, unset %.0f examples/s; counted: %s" % (
            side, meds["set"], meds["unset"], v))
    py, rt, pt = best["python"][0], best["recflow_train"][0], best["torch"][0]
    print()
    print("python / recflow train = %.3f (target >= 0.95): %s" % (
        py / rt, "met" if py / rt >= 0.95 else "NOT met"))
    print("python / torch eager   = %.3f (target >= 2):    %s" % (
        py / pt, "met" if py / pt >= 2 else "NOT met"))
    print()
    return ["RESULT bench=python_train metric=examples_per_sec recflow=%.0f peer=recflow_train "
            "peer_value=%.0f ratio=%.3f" % (py, rt, py / rt),
            "RESULT bench=python_train_vs_torch metric=examples_per_sec recflow=%.0f peer=torch "
            "peer_value=%.0f ratio=%.3f" % (py, pt, py / pt)]
