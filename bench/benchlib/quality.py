"""bench/run quality: test AUC of the zoo's models (default configs) vs the
same models in PyTorch (learning rates chosen on validation), and
examples/s."""

import os
import shutil
import subprocess
import tempfile
import time

from .common import (
    REPO, BUILD, PYTHON, PEERS, VARIANT_VARS, die, build, variant_envs, cpu_model,
    snapshot, info_field, med,
)


QUALITY_MODELS = ("lr", "deepfm", "dlrm", "dcn_v2")
QUALITY_FILES = 10            # train-00000..00008 train, train-00009 validates
QUALITY_BUCKETS = 1 << 20     # = the configs' vocabulary_size
QUALITY_EMB_LRS = (0.01, 0.03, 0.1)
QUALITY_DENSE_LRS = {"lr": (0.001, 0.003, 0.01)}
QUALITY_DEFAULT_DENSE_LRS = (0.001, 0.003)
QUALITY_AUC_TOLERANCE = 0.002  # the same run under another environment
# The peer's grid runs under the first (OMP_WAIT_POLICY does not change the numbers;
# passive spares the grid the spinning OpenMP threads of a loaded machine).
QUALITY_PEER_VARIANTS = ("unset+omp_passive", "unset", "set", "set+omp_passive")
QUALITY_RECFLOW_VARIANTS = ("unset", "set")


def quality_data(recflow_bin, rows, seed, env):
    """BUILD/bench_quality/rows<R>_seed<S>: recflow gen-data --rows R --test_rows R/5
    --seed S --num_files 10, made once (reused while its dataset.json exists)."""
    import json
    d = os.path.join(BUILD, "bench_quality", "rows%d_seed%d" % (rows, seed))
    meta = os.path.join(d, "dataset.json")
    test_rows = max(1, rows // 5)
    if not os.path.exists(meta):
        shutil.rmtree(d, ignore_errors=True)
        cmd = [recflow_bin, "gen-data", "--rows", str(rows), "--test_rows", str(test_rows),
               "--seed", str(seed), "--num_files", str(QUALITY_FILES), "--out", d]
        print("generating %s (%s) ..." % (d, " ".join(["recflow"] + cmd[1:])), flush=True)
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(meta):
            die("recflow gen-data failed:\n" + r.stdout[-1000:] + r.stderr[-2000:])
    with open(meta) as f:
        info = json.load(f)
    name = "train-%05d-of-%05d.tsv"
    train = [os.path.join(d, name % (i, QUALITY_FILES)) for i in range(QUALITY_FILES - 1)]
    val = os.path.join(d, name % (QUALITY_FILES - 1, QUALITY_FILES))
    test = [os.path.join(d, f) for f in sorted(info["splits"]["test"]["files"])]
    for p in train + [val] + test:
        if not os.path.exists(p):
            die("%s is missing (delete %s to generate the data again)" % (p, d))
    if info["splits"]["train"]["rows"] != rows or info["splits"]["test"]["rows"] != test_rows:
        die("%s holds %d train / %d test rows, expected %d / %d (delete it)"
            % (d, info["splits"]["train"]["rows"], info["splits"]["test"]["rows"], rows,
               test_rows))

    def lines(path):
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    return dict(dir=d, train=train, val=val, test=test, seed=seed,
                train_rows=sum(lines(p) for p in train), val_rows=lines(val),
                test_rows=test_rows, oracle_auc=info["ground_truth"]["oracle"]["auc"],
                first_order_auc=info["ground_truth"]["first_order_only"]["auc"])


def quality_config(model, dest, seed, threads, lrs=None):
    """bench/quality/MODEL.yaml with model.seed = the data seed, data.parse_threads =
    the bench's thread count and, for a sweep point, an optimizer section that sets
    only the two learning rates (the groups' other settings keep recflow's defaults)."""
    src = os.path.join(REPO, "bench", "quality", model + ".yaml")
    with open(src) as f:
        text = f.read()
    for key, extra in (("model:\n", "  seed: %d\n" % seed),
                       ("data:\n", "  parse_threads: %d\n" % threads)):
        if ("\n" + key) not in ("\n" + text):
            die("%s has no top-level '%s' section" % (src, key.strip()))
        text = ("\n" + text).replace("\n" + key, "\n" + key + extra, 1)[1:]
    if lrs is not None:
        if "\noptimizer:" in "\n" + text:
            die("%s already has an optimizer section" % src)
        text += ("optimizer: {embedding: {learning_rate: %g}, dense: {learning_rate: %g}}\n"
                 % lrs)
    with open(dest, "w") as f:
        f.write(text)
    return dest


def quality_recflow(recflow_bin, config, data, eval_split, model_dir, env, threads,
                    timeout=3600):
    """recflow train on the 9 train files, evaluating on `eval_split` ("val" or
    "test") at the end. Returns eps (train rows / the training loop's seconds),
    auc, logloss and the eval row count."""
    import re
    evals = data["val"] if eval_split == "val" else ",".join(data["test"])
    cmd = [recflow_bin, "train", "--config", config, "--data", ",".join(data["train"]),
           "--eval_data", evals, "--model_dir", model_dir, "--threads", str(threads)]
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    wall = time.time() - t0
    if r.returncode != 0:
        die("recflow train failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                       r.stdout[-2000:], r.stderr[-3000:]))
    m = re.search(r"^trained (\d+) steps \((\d+) examples\) in ([0-9.]+) s: ([0-9.]+) "
                  r"examples/s", r.stdout, re.M)
    a = re.search(r"^test AUC ([0-9.]+)\s+logloss ([0-9.]+).*?\((\d+) examples\)", r.stdout,
                  re.M)
    if not m or not a:
        die("no 'trained N steps ...' or 'test AUC' line from: %s\n%s"
            % (" ".join(cmd), r.stdout[-2000:]))
    steps, counted, eps = int(m.group(1)), int(m.group(2)), float(m.group(4))
    batch = 4096
    if steps != (data["train_rows"] + batch - 1) // batch:
        die("recflow trained %d steps; %d train rows at batch %d make %d (bad lines "
            "skipped?):\n%s" % (steps, data["train_rows"], batch,
                                (data["train_rows"] + batch - 1) // batch, r.stderr[-2000:]), 4)
    rows = data["val_rows"] if eval_split == "val" else data["test_rows"]
    if int(a.group(3)) != rows:
        die("recflow evaluated %s examples of %s; it has %d rows" % (a.group(3), eval_split,
                                                                    rows), 4)
    # Its examples/s counts the last, partial batch whole: scale to the rows.
    return dict(eps=eps * data["train_rows"] / counted, seconds=float(m.group(3)),
                auc=float(a.group(1)), logloss=float(a.group(2)), wall=wall)


def quality_recflow_eval(recflow_bin, model_dir, data, env, timeout=1800):
    """recflow eval of model_dir's newest checkpoint on the test files: auc, logloss."""
    import re
    cmd = [recflow_bin, "eval", "--model_dir", model_dir, "--data", ",".join(data["test"])]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    a = re.search(r"^AUC ([0-9.]+)\s+logloss ([0-9.]+).*?\((\d+) examples", r.stdout, re.M)
    if r.returncode != 0 or not a:
        die("recflow eval failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                      r.stdout[-2000:], r.stderr[-2000:]))
    if int(a.group(3)) != data["test_rows"]:
        die("recflow eval scored %s examples; the test split has %d rows"
            % (a.group(3), data["test_rows"]), 4)
    return dict(auc=float(a.group(1)), logloss=float(a.group(2)))


def quality_peer(model, data, lrs, variant, envs, threads, timeout=3600):
    """One quality_torch.py run: eps, val_auc, test_auc, info ..."""
    emb_lr, dense_lr = lrs
    cmd = [PYTHON, os.path.join(PEERS, "quality_torch.py"), "--model=" + model,
           "--train=" + ",".join(data["train"]), "--val=" + data["val"],
           "--test=" + ",".join(data["test"]), "--cache=" + os.path.join(data["dir"],
                                                                          "torch_cache"),
           "--buckets=%d" % QUALITY_BUCKETS, "--emb_lr=%g" % emb_lr,
           "--dense_lr=%g" % dense_lr, "--seed=%d" % data["seed"], "--threads=%d" % threads]
    if model == "deepfm":
        cmd.append("--dense_in_fm")  # the paper's form (recflow's fm_dense: fields)
    if variant.endswith("+omp_passive"):
        cmd.append("--omp_wait_policy=passive")
    t0 = time.time()
    r = subprocess.run(cmd, env=envs[variant.split("+")[0]], capture_output=True, text=True,
                       timeout=timeout)
    wall = time.time() - t0
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    kv = {}
    info = ""
    for line in r.stdout.splitlines():
        head, _, rest = line.partition(" ")
        if head == "info":
            info = rest
        elif head in ("data", "train", "val", "test"):
            kv[head] = dict(p.split("=", 1) for p in rest.split())
    if not all(k in kv for k in ("data", "train", "val", "test")):
        die("missing data/train/val/test lines from: %s\n%s" % (" ".join(cmd),
                                                               r.stdout[-2000:]))
    for split, key in (("train", "train_rows"), ("val", "val_rows"), ("test", "test_rows")):
        if int(kv["data"][key]) != data[key]:
            die("torch read %s %s rows; the split has %d" % (kv["data"][key], split,
                                                            data[key]), 4)
    return dict(eps=float(kv["train"]["examples_per_sec"]),
                seconds=float(kv["train"]["seconds"]),
                val_auc=float(kv["val"]["auc"]), auc=float(kv["test"]["auc"]),
                logloss=float(kv["test"]["logloss"]), load_s=float(kv["data"]["load_seconds"]),
                cached=int(kv["data"]["cached_files"]), info=info, wall=wall)


def quality_interleave(*queues):
    """Runs the thunks of the queues alternately (a, b, a, b, ..., then the rest)."""
    queues = [list(q) for q in queues]
    while any(queues):
        for q in queues:
            if q:
                q.pop(0)()


def quality(args):
    tmp = tempfile.mkdtemp(prefix="bench_quality.")
    try:
        return _quality(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _quality(args, tmp):
    if not args.no_build:
        build("recflow")
    recflow_bin = os.path.join(BUILD, "recflow")
    if not os.path.exists(recflow_bin):
        die("%s is missing; build it (ninja -C %s recflow)" % (recflow_bin, BUILD))
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in QUALITY_MODELS:
            die("--models: unknown model '%s' (known: %s)" % (m, ",".join(QUALITY_MODELS)), 2)
        if not os.path.exists(os.path.join(REPO, "bench", "quality", m + ".yaml")):
            die("bench/quality/%s.yaml is missing" % m)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        die("--seeds: a comma-separated list of integers, got '%s'" % args.seeds, 2)
    seeds = list(dict.fromkeys(seeds))  # each once, in the order given
    if not seeds or not models or min(seeds) < 0 or args.quality_rows < QUALITY_FILES:
        die("--models and --seeds must not be empty, seeds >= 0, --rows >= %d"
            % QUALITY_FILES, 2)
    T = args.threads

    def mean(v):
        return sum(v) / len(v)

    envs, set_values, origin = variant_envs(T)
    # A private copy of the binary and its libraries: the build dir may be rebuilt meanwhile.
    recflow_bin = snapshot(recflow_bin, os.path.join(tmp, "bin"), envs)

    print("== quality: test AUC of the zoo's %s (bench/quality/*.yaml, recflow's default "
          "optimizer settings) vs the same models written from the papers in PyTorch %s "
          "(bench/peers/quality_torch.py, learning rates chosen on validation)"
          % (", ".join(models), "1.13"))
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("data: recflow gen-data --rows %d --test_rows %d --num_files %d per seed (seeds %s) "
          "under %s; train on train-00000..%05d, validate on train-%05d, test on test-*; "
          "one epoch in file order, batch 4096, %d buckets per field" % (
              args.quality_rows, max(1, args.quality_rows // 5), QUALITY_FILES,
              ",".join(map(str, seeds)), os.path.join(BUILD, "bench_quality"),
              QUALITY_FILES - 2, QUALITY_FILES - 1, QUALITY_BUCKETS))
    print("threads: %d on both sides (recflow train --threads %d, data.parse_threads %d; "
          "torch.set_num_threads(%d)); model seed = data seed on both sides" % (T, T, T, T))
    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())
    print("variants: set = %s (%s); unset = both removed; torch also with "
          "OMP_WAIT_POLICY=PASSIVE. Each side runs every variant once on the first seed's "
          "chosen configuration and keeps its fastest for the other seeds" % (
              set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print("examples/s: train rows / the training loop's time. recflow's loop parses the TSV "
          "as it trains (its input pipeline); torch's reads arrays parsed before the clock "
          "starts (cached .npy), so its figure leaves the parsing out")
    print(flush=True)

    datasets = {s: quality_data(recflow_bin, args.quality_rows, s, envs["unset"]) for s in seeds}
    s0 = seeds[0]
    out_lines = []
    peer_info = None
    for m in models:
        print("-- %s" % m, flush=True)
        grid = [(e, d) for e in QUALITY_EMB_LRS
                for d in QUALITY_DENSE_LRS.get(m, QUALITY_DEFAULT_DENSE_LRS)]
        rf = {}       # (seed, variant) -> result of the default config
        pt = {}       # (seed, variant, lrs) -> result
        sweep = {}    # lrs -> recflow result on val (first seed)
        best_sweep = {"lrs": None, "auc": -1.0, "dir": None}
        counter = [0]

        def model_dir():
            counter[0] += 1
            return os.path.join(tmp, "model_%s_%d" % (m, counter[0]))

        def run_rf(seed, variant):
            def go():
                md = model_dir()
                cfg = quality_config(m, os.path.join(tmp, "%s_seed%d.yaml" % (m, seed)), seed, T)
                res = quality_recflow(recflow_bin, cfg, datasets[seed], "test", md,
                                      envs[variant], T)
                shutil.rmtree(md, ignore_errors=True)
                rf[(seed, variant)] = res
                print("  seed %d recflow %-18s default config         test AUC %.4f  "
                      "logloss %.4f  %8.0f examples/s  (%.1f s loop, %.0f s wall, load %.1f)"
                      % (seed, variant, res["auc"], res["logloss"], res["eps"],
                         res["seconds"], res["wall"], os.getloadavg()[0]), flush=True)
            return go

        def run_pt(seed, variant, lrs):
            def go():
                nonlocal peer_info
                res = quality_peer(m, datasets[seed], lrs, variant, envs, T)
                pt[(seed, variant, lrs)] = res
                peer_info = peer_info or res["info"]
                print("  seed %d torch   %-18s emb_lr %-5g dense_lr %-6g val AUC %.4f  test AUC "
                      "%.4f  logloss %.4f  %8.0f examples/s  (%.1f s loop, %.0f s wall, "
                      "blas_core %s, load %.1f)"
                      % (seed, variant, lrs[0], lrs[1], res["val_auc"], res["auc"],
                         res["logloss"], res["eps"], res["seconds"], res["wall"],
                         info_field(res["info"], "blas_core"), os.getloadavg()[0]),
                      flush=True)
            return go

        def run_sweep(lrs):
            def go():
                md = model_dir()
                cfg = quality_config(m, os.path.join(tmp, "%s_sweep.yaml" % m), s0, T, lrs)
                res = quality_recflow(recflow_bin, cfg, datasets[s0], "val", md, envs["unset"],
                                      T)
                sweep[lrs] = res
                print("  seed %d recflow %-18s emb_lr %-5g dense_lr %-6g val AUC %.4f  "
                      "%8.0f examples/s  (sweep)" % (s0, "unset", lrs[0], lrs[1], res["auc"],
                                                    res["eps"]), flush=True)
                if res["auc"] > best_sweep["auc"]:
                    if best_sweep["dir"]:
                        shutil.rmtree(best_sweep["dir"], ignore_errors=True)
                    best_sweep.update(lrs=lrs, auc=res["auc"], dir=md)
                else:
                    shutil.rmtree(md, ignore_errors=True)
            return go

        # 1. First seed: recflow's default config under each environment, the
        # peer's learning-rate grid (and recflow's, with --sweep_recflow), alternating.
        quality_interleave([run_rf(s0, v) for v in QUALITY_RECFLOW_VARIANTS] +
                           ([run_sweep(g) for g in grid] if args.sweep_recflow else []),
                           [run_pt(s0, QUALITY_PEER_VARIANTS[0], g) for g in grid])
        grid_runs = {g: pt[(s0, QUALITY_PEER_VARIANTS[0], g)] for g in grid}
        chosen = max(grid, key=lambda g: grid_runs[g]["val_auc"])
        print("  torch: emb_lr %g, dense_lr %g has the best validation AUC (%.4f) on seed %d"
              % (chosen[0], chosen[1], grid_runs[chosen]["val_auc"], s0), flush=True)
        swept = None
        if args.sweep_recflow:
            swept = best_sweep["lrs"]
            best_test = quality_recflow_eval(recflow_bin, best_sweep["dir"], datasets[s0],
                                             envs["unset"])
            shutil.rmtree(best_sweep["dir"], ignore_errors=True)
            print("  recflow sweep: emb_lr %g, dense_lr %g has the best validation AUC (%.4f); "
                  "its test AUC %.4f" % (swept[0], swept[1], best_sweep["auc"],
                                         best_test["auc"]), flush=True)
        # 2. The chosen configuration under the peer's other environments.
        quality_interleave([run_pt(s0, v, chosen) for v in QUALITY_PEER_VARIANTS[1:]])
        bad = []
        for side, runs in (("recflow", [rf[(s0, v)] for v in QUALITY_RECFLOW_VARIANTS]),
                           ("torch", [pt[(s0, v, chosen)] for v in QUALITY_PEER_VARIANTS])):
            aucs = [r["auc"] for r in runs]
            if max(aucs) - min(aucs) > QUALITY_AUC_TOLERANCE:
                bad.append("%s %s" % (side, ", ".join("%.4f" % a for a in aucs)))
        if bad:
            die("quality %s: the same run under the environment variants gave test AUCs "
                "further apart than %g (%s); not reporting results"
                % (m, QUALITY_AUC_TOLERANCE, "; ".join(bad)), 4)
        rf_kept = max(QUALITY_RECFLOW_VARIANTS, key=lambda v: rf[(s0, v)]["eps"])
        pt_kept = max(QUALITY_PEER_VARIANTS, key=lambda v: pt[(s0, v, chosen)]["eps"])
        print("  kept: recflow %s (%s), torch %s (%s)" % (
            rf_kept, ", ".join("%s %.0f" % (v, rf[(s0, v)]["eps"])
                               for v in QUALITY_RECFLOW_VARIANTS),
            pt_kept, ", ".join("%s %.0f" % (v, pt[(s0, v, chosen)]["eps"])
                               for v in QUALITY_PEER_VARIANTS)), flush=True)
        # 3. The other seeds, alternating.
        swept_runs = {}

        def run_swept(seed):
            def go():
                md = model_dir()
                cfg = quality_config(m, os.path.join(tmp, "%s_swept%d.yaml" % (m, seed)), seed,
                                     T, swept)
                swept_runs[seed] = quality_recflow(recflow_bin, cfg, datasets[seed], "test", md,
                                                   envs[rf_kept], T)
                shutil.rmtree(md, ignore_errors=True)
                print("  seed %d recflow %-18s emb_lr %-5g dense_lr %-6g test AUC %.4f  "
                      "(swept)" % (seed, rf_kept, swept[0], swept[1], swept_runs[seed]["auc"]),
                      flush=True)
            return go

        for seed in seeds[1:]:
            quality_interleave([run_rf(seed, rf_kept)] +
                               ([run_swept(seed)] if swept else []),
                               [run_pt(seed, pt_kept, chosen)])
        if swept:
            swept_runs[s0] = dict(auc=best_test["auc"])

        # Table.
        print()
        print("  %-5s %8s %12s %10s %9s %9s %14s %12s" % (
            "seed", "oracle", "recflow AUC", "torch AUC", "diff", "torch val", "recflow ex/s",
            "torch ex/s") + ("   recflow swept AUC" if swept else ""))
        rows = []
        for seed in seeds:
            a = rf[(seed, rf_kept)]
            b = pt[(seed, pt_kept, chosen)]
            rows.append((datasets[seed]["oracle_auc"], a["auc"], b["auc"], a["eps"], b["eps"]))
            print("  %-5d %8.4f %12.4f %10.4f %+9.4f %9.4f %14.0f %12.0f" % (
                seed, datasets[seed]["oracle_auc"], a["auc"], b["auc"], a["auc"] - b["auc"],
                b["val_auc"], a["eps"], b["eps"]) +
                ("   %.4f" % swept_runs[seed]["auc"] if swept else ""))
        o_auc, r_auc, p_auc = (mean([r[i] for r in rows]) for i in range(3))
        r_eps, p_eps = med([r[3] for r in rows]), med([r[4] for r in rows])
        print("  %-5s %8.4f %12.4f %10.4f %+9.4f %9s %14.0f %12.0f" % (
            "mean", o_auc, r_auc, p_auc, r_auc - p_auc, "", r_eps, p_eps) +
            ("   %.4f" % mean([swept_runs[s]["auc"] for s in seeds]) if swept else ""))
        print("  (AUC: mean over seeds; examples/s: median over seeds, each side's kept "
              "variant; torch learning rates emb %g, dense %g; grid on seed %d: %s)" % (
                  chosen[0], chosen[1], s0, ", ".join(
                      "%g/%g %.4f" % (g[0], g[1], grid_runs[g]["val_auc"])
                      for g in grid)))
        if swept:
            print("  (recflow sweep on seed %d, val AUC: %s; chosen %g/%g)" % (
                s0, ", ".join("%g/%g %.4f" % (g[0], g[1], sweep[g]["auc"]) for g in grid),
                swept[0], swept[1]))
        print(flush=True)
        out_lines.append("RESULT bench=quality_%s metric=test_auc recflow=%.4f peer=torch "
                         "peer_value=%.4f ratio=%.4f" % (m, r_auc, p_auc, r_auc / p_auc))
        out_lines.append("RESULT bench=quality_%s_speed metric=examples_per_sec recflow=%.0f "
                         "peer=torch peer_value=%.0f ratio=%.3f" % (m, r_eps, p_eps,
                                                                    r_eps / p_eps))
        if swept:
            out_lines.append("info bench=quality_%s recflow_swept_test_auc=%.4f emb_lr=%g "
                             "dense_lr=%g (learning rates chosen on seed %d's validation "
                             "split; informational)" % (
                                 m, mean([swept_runs[s]["auc"] for s in seeds]), swept[0],
                                 swept[1], s0))
    if peer_info:
        print("torch: %s" % peer_info)
    print()
    o = mean([datasets[s]["oracle_auc"] for s in seeds])
    return (["info bench=quality oracle_auc=%.4f first_order_only_auc=%.4f seeds=%s "
             "(the ground truth's test AUC, mean over seeds: the ceiling)" % (
                 o, mean([datasets[s]["first_order_auc"] for s in seeds]),
                 ",".join(map(str, seeds)))] + out_lines)
