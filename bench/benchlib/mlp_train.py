"""bench/run mlp_train: MLP training throughput (examples/s) vs PyTorch,
with the machine's sgemm peak and a breakdown of recflow's step."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

from .common import (
    BUILD, PYTHON, PEERS, VARIANT_VARS, die, build, variant_envs, blas_alternative,
    cpu_model, snapshot, parse_output, info_field, med,
)


MLP_BATCH = 4096
MLP_CHECK_STEPS = 5


def mlp_flops_per_step(batch, dims):
    """Nominal matmul flops of one training step: forward + two backward
    products per layer, 3 * 2 * batch * sum(in * out); and the work actually
    needed (the first layer's input gradient is computed by neither side)."""
    s = sum(i * o for i, o in dims)
    nominal = 3 * 2 * batch * s
    return nominal, nominal - 2 * batch * dims[0][0] * dims[0][1]


def run_side_raw(cmd, env, timeout=900):
    """run_side plus the `losses mode=M values=...` lines: res["losses"][M]."""
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    res = parse_output(r.stdout)
    res["wall_s"] = time.time() - t0
    res["losses"] = {}
    for line in r.stdout.splitlines():
        if line.startswith("losses "):
            kv = dict(p.split("=", 1) for p in line.split()[1:])
            res["losses"][kv["mode"]] = [float(v) for v in kv["values"].split(",")]
    if not res["modes"]:
        die("no timing lines from: %s\n%s" % (" ".join(cmd), r.stdout[-2000:]))
    return res


def mlp_train(args):
    tmp = tempfile.mkdtemp(prefix="bench_mlp_train.")
    try:
        return _mlp_train(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _mlp_train(args, tmp):
    sys.path.insert(0, PEERS)
    import numpy as np
    import mlp_train as peer  # init_params, make_batch, reference_losses

    binary = build("bench_mlp_train") if not args.no_build else \
        os.path.join(BUILD, "bench", "bench_mlp_train")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C build bench_mlp_train)" % binary)
    peer_script = os.path.join(PEERS, "mlp_train.py")
    envs, set_values, origin = variant_envs(args.threads)
    binary = snapshot(binary, os.path.join(tmp, "bin"), envs)
    T = args.threads
    B = MLP_BATCH
    dims = peer.layer_dims()
    nominal_flops, needed_flops = mlp_flops_per_step(B, dims)
    variants = ["set", "unset"]
    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())
    train_flags = ["--threads=%d" % T, "--batch=%d" % B, "--samples=5", "--steps=3",
                   "--warmup=2", "--check_steps=%d" % MLP_CHECK_STEPS]
    peak_flags = ["--case=peak", "--threads=%d" % T, "--samples=3", "--steps=2", "--warmup=1",
                  "--gemm=4096x1024x1024"]

    print("== mlp_train: MLP training throughput (examples/s) vs PyTorch")
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("work: x[%d,%d] float32 -> %s (ReLU) -> 1 logit, sigmoid cross-entropy (mean), "
          "Adam lr 1e-3 eps 1e-8; one step = forward + backward + update on the same batch"
          % (B, dims[0][0], "-".join(str(o) for _, o in dims[:-1])))
    print("flops per step: %.2f GFLOP nominal (3 * 2 * batch * sum(in*out)); %.2f GFLOP "
          "needed (neither side computes the first layer's input gradient)"
          % (nominal_flops / 1e9, needed_flops / 1e9))
    print("threads: %d on both sides (recflow SessionOptions{inter_op_threads=%d, "
          "intra_op_threads=%d}; torch.set_num_threads(%d), OMP_NUM_THREADS=%d, "
          "OPENBLAS_NUM_THREADS=%d)" % (T, T, T, T, T, T))
    print("libblas.so.3 alternative -> %s" % blas_alternative())
    print("variants: set = %s (%s); unset = both removed"
          % (set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print("rounds: %d, alternating recflow, peer, recflow, peer, ... (variant order flips "
          "every round); each process: %d checked steps, 2 warm-up steps, 5 samples x 3 steps; "
          "the peer runs twice per turn (OMP_WAIT_POLICY as set, and PASSIVE: modes "
          "+omp_passive); one sgemm peak process per round and variant"
          % (args.rounds, MLP_CHECK_STEPS))
    print()

    results = {}   # (side, variant) -> [res]
    peaks = {}     # variant -> [res]
    for r in range(args.rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for variant in order:
            for side in ("recflow", "pytorch"):
                cmd = ([binary, "--case=train"] if side == "recflow"
                       else [PYTHON, peer_script]) + train_flags
                res = run_side_raw(cmd, envs[variant])
                if side == "pytorch":
                    # Also with OMP_WAIT_POLICY=PASSIVE (a process of its own:
                    # libgomp reads it at load); its modes get a suffix.
                    res2 = run_side_raw(cmd + ["--omp_wait_policy=passive"], envs[variant])
                    for key in ("modes", "losses"):
                        res[key].update({m + "+omp_passive": v for m, v in res2[key].items()})
                    res["wall_s"] += res2["wall_s"]
                results.setdefault((side, variant), []).append(res)
                print("  [round %d] %-7s %-5s %s  (%.1f s)" % (
                    r + 1, side, variant,
                    " ".join("%s=%.0fex/s" % (m, B / (med(s) * 1e-6))
                             for m, s in res["modes"].items()), res["wall_s"]), flush=True)
            res = run_side_raw([binary] + peak_flags, envs[variant])
            peaks.setdefault(variant, []).append(res)
            print("  [round %d] sgemm   %-5s %s  (%.1f s)" % (
                r + 1, variant,
                " ".join("%s=%.1fGFLOP/s" % (m, 2 * 4096 * 1024 * 1024 / (med(s) * 1e3))
                         for m, s in res["modes"].items()), res["wall_s"]), flush=True)

    # Correctness: each side's first losses against a float64 NumPy
    # trajectory of the same Adam (TensorFlow's update for recflow,
    # torch.optim.Adam's for PyTorch: they differ only in where eps enters),
    # recflow against PyTorch, and no drift across rounds.
    print()
    print("correctness (losses of the first %d steps from the shared initial weights):"
          % MLP_CHECK_STEPS)
    params = peer.init_params()
    xn, yn = peer.make_batch(B)
    t0 = time.time()
    refs = {"recflow": peer.reference_losses(params, xn, yn, MLP_CHECK_STEPS - 1, "tf"),
            "pytorch": peer.reference_losses(params, xn, yn, MLP_CHECK_STEPS - 1, "torch")}
    print("  float64 reference, TF Adam (recflow's): %s" % " ".join(
        "%.7f" % v for v in refs["recflow"]))
    print("  float64 reference, torch.optim.Adam:    %s  (%.0f s)" % (
        " ".join("%.7f" % v for v in refs["pytorch"]), time.time() - t0))
    scale = abs(refs["recflow"][0])
    all_ok = True

    def check(name, ok, detail):
        nonlocal all_ok
        all_ok &= ok
        print("  check %-44s %s  %s" % (name, detail, "OK" if ok else "FAILED"))

    for variant in variants:
        got = {"recflow": results[("recflow", variant)][0]["losses"]["session_run"]}
        for mode, losses in results[("pytorch", variant)][0]["losses"].items():
            got["pytorch" if mode == "eager" else "pytorch " + mode] = losses
        for name, losses in got.items():
            print("  %-5s %-41s %s" % (variant, name + " losses:", " ".join(
                "%.7f" % v for v in losses)))
        for side in ("recflow", "pytorch"):
            d = max(abs(a - b) for a, b in zip(got[side], refs[side]))
            check("%s %s vs its float64 reference" % (side, variant), d <= 2e-4 * scale,
                  "max abs diff %.3g (tolerance %.3g)" % (d, 2e-4 * scale))
        # The sides may differ by as much as the two exact trajectories do,
        # plus each side's own tolerance.
        rl, pl = got["recflow"], got["pytorch"]
        d = max(abs(a - b) for a, b in zip(rl, pl))
        tol = max(abs(a - b) for a, b in zip(refs["recflow"], refs["pytorch"])) + 4e-4 * scale
        check("recflow vs pytorch %s, steps 1-%d" % (variant, MLP_CHECK_STEPS),
              d <= tol, "max abs diff %.3g (tolerance %.3g = reference gap + 4e-4 * loss)"
              % (d, tol))
        check("loss decreases (%s)" % variant, rl[-1] < rl[0] and pl[-1] < pl[0],
              "recflow %.4f -> %.4f, pytorch %.4f -> %.4f" % (rl[0], rl[-1], pl[0], pl[-1]))
        for side in ("recflow", "pytorch"):
            runs = results[(side, variant)]
            first = runs[0]["losses"]
            worst = max(abs(a - b) for run in runs[1:] for m in first
                        for a, b in zip(first[m], run["losses"][m])) if len(runs) > 1 else 0.0
            check("%s %s losses stable across rounds" % (side, variant),
                  worst <= 1e-4 * scale, "max drift %.3g" % worst)
    print()

    # Tables and the kept variants.
    def ex_per_s(us):
        return B / (us * 1e-6)

    print("training step: batch %d; %d rounds x 5 samples x 3 steps; examples/s (median of "
          "per-sample step times) and achieved GFLOP/s (nominal flops / step time)" % (B, args.rounds))
    print("  %-8s %-7s %-9s %-26s %11s %9s %9s   %s" % (
        "side", "variant", "blas_core", "mode", "examples/s", "step_ms", "GFLOP/s",
        "per-round examples/s"))
    best = {}
    for side in ("recflow", "pytorch"):
        for variant in variants:
            runs = results[(side, variant)]
            core = info_field(runs[0]["info"], "blas_core")
            for mode in runs[0]["modes"]:
                pooled = [s for run in runs for s in run["modes"][mode]]
                m = med(pooled)
                print("  %-8s %-7s %-9s %-26s %11.0f %9.1f %9.1f   %s" % (
                    side, variant, core, mode, ex_per_s(m), m / 1e3, nominal_flops / (m * 1e3),
                    " ".join("%.0f" % ex_per_s(med(run["modes"][mode])) for run in runs)))
                if side not in best or m < best[side][0]:
                    best[side] = (m, variant, mode, core)
    print()
    print("sgemm peak on %d threads: 4096x1024 @ 1024x1024 float32 (%.2f GFLOP per call)"
          % (T, 2 * 4096 * 1024 * 1024 / 1e9))
    print("  %-7s %-9s %-16s %9s   %s" % ("variant", "blas_core", "mode", "GFLOP/s",
                                          "per-round GFLOP/s"))
    peak_best = (0.0, "?", "?")
    for variant in variants:
        runs = peaks[variant]
        core = info_field(runs[0]["info"], "blas_core")
        for mode in runs[0]["modes"]:
            pooled = [s for run in runs for s in run["modes"][mode]]
            g = 2 * 4096 * 1024 * 1024 / (med(pooled) * 1e3)
            print("  %-7s %-9s %-16s %9.1f   %s" % (
                variant, core, mode, g, " ".join(
                    "%.1f" % (2 * 4096 * 1024 * 1024 / (med(run["modes"][mode]) * 1e3))
                    for run in runs)))
            if g > peak_best[0]:
                peak_best = (g, variant, mode)
    onednn = info_field(peaks[variants[0]][0]["info"], "onednn")
    print("  (onednn: %s)" % onednn)
    print()
    for side in ("recflow", "pytorch"):
        m, variant, mode, core = best[side]
        vdesc = set_desc if variant == "set" else "OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset"
        g = nominal_flops / (m * 1e3)
        print("  kept %-8s %.0f examples/s, %.1f ms/step, %.1f GFLOP/s = %.0f%% of the sgemm "
              "peak: variant %s (%s; OpenBLAS core %s), mode %s" % (
                  side, ex_per_s(m), m / 1e3, g, 100 * g / peak_best[0], variant, vdesc, core,
                  mode))
    print("  sgemm peak %.1f GFLOP/s (%s, variant %s)" % peak_best)
    _, rv, rm, _ = best["recflow"]
    _, pv, pm, _ = best["pytorch"]
    ratios = [med(p["modes"][pm]) / med(r["modes"][rm])
              for r, p in zip(results[("recflow", rv)], results[("pytorch", pv)])]
    print("  per-round ratio recflow/peer examples/s (kept variants): %s; median %.3f" % (
        " ".join("%.3f" % x for x in ratios), med(ratios)))
    print()

    # Where recflow's step goes (one process, kept variant).
    bd = run_side_raw([binary, "--case=breakdown", "--threads=%d" % T, "--batch=%d" % B,
                       "--samples=3", "--steps=1", "--warmup=1"], envs[rv])
    full = med(bd["modes"]["full_step"])
    print("recflow step breakdown (variant %s; median of 3 single-step samples; %% of the "
          "full step):" % rv)
    for mode, s in bd["modes"].items():
        m = med(s)
        extra = ""
        if mode.startswith("matmul_"):
            parts = mode.split("_")  # matmul_l<k>_<what>
            l = int(parts[1][1:])
            i, o = dims[l]
            extra = " %6.1f GFLOP/s" % (2.0 * B * i * o / (m * 1e3))
        print("  %-22s %9.2f ms %6.1f%%%s" % (mode, m / 1e3, 100 * m / full, extra))
    mm = sum(med(s) for mode, s in bd["modes"].items() if mode.startswith("matmul_"))
    print("  %-22s %9.2f ms %6.1f%%  (the step's MatMuls, each alone)" % ("sum of matmuls",
                                                                        mm / 1e3, 100 * mm / full))
    print()

    info = results[("pytorch", "unset")][0]["info"]
    print("peer: PyTorch %s (%s), torch BLAS_INFO=%s, BLAS libraries loaded: %s" % (
        info_field(info, "torch"), PYTHON, info_field(info, "blas_info"),
        info_field(info, "blas_libs")))
    print("correctness: %s" % ("all checks passed" if all_ok else "SOME CHECKS FAILED"))
    if not all_ok:
        die("correctness checks failed; not reporting results", 4)
    rf = ex_per_s(best["recflow"][0])
    pt = ex_per_s(best["pytorch"][0])
    return ["RESULT bench=mlp_train metric=examples_per_sec recflow=%.0f peer=pytorch "
            "peer_value=%.0f ratio=%.3f" % (rf, pt, rf / pt)]
