"""bench/run conv: Conv2D forward + both backprops on MobileNet-v1 and ResNet
shapes (bench/conv.cc) vs torch.nn.functional.conv2d (bench/peers/conv_torch.py),
milliseconds per shape; and LeNet training examples/s (bench/lenet_train.py vs
bench/peers/lenet_torch.py)."""

import os
import shutil
import subprocess
import sys
import tempfile
import time

from .common import (
    BUILD, PYTHON, PEERS, REPO, VARIANT_VARS, die, build, variant_envs, blas_alternative,
    cpu_model, snapshot, run_side, info_field, med, check_close,
)

CONV_BATCH = 32
CHECK_BATCH = 2


def conv(args):
    tmp = tempfile.mkdtemp(prefix="bench_conv.")
    try:
        lines = _conv(args, tmp)
        lines += _lenet(args, tmp)
        return lines
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _checksums(res_text):
    out = {}
    for line in res_text.splitlines():
        if line.startswith("checksum "):
            kv = dict(p.split("=", 1) for p in line.split()[1:])
            name = kv.pop("shape")
            out[name] = {k: float(v) for k, v in kv.items()}
    return out


def _run(cmd, env, timeout=900):
    """run_side plus the checksum lines: res["checksums"][shape][key]."""
    t0 = time.time()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        die("command failed (exit %d): %s\n%s%s" % (r.returncode, " ".join(cmd),
                                                     r.stdout[-2000:], r.stderr[-3000:]))
    from .common import parse_output
    res = parse_output(r.stdout)
    res["checksums"] = _checksums(r.stdout)
    res["losses"] = _losses(r.stdout)
    res["wall_s"] = time.time() - t0
    return res


def _with_passive(res, cmd, env):
    """res plus the modes of cmd run again under OMP_WAIT_POLICY=PASSIVE (suffix
    +omp_passive): libgomp's threads then sleep between parallel regions instead of
    spinning, which matters on a loaded machine (see mlp_train)."""
    env = dict(env)
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    res2 = _run(cmd, env)
    for key in ("modes", "losses"):
        res[key].update({m + "+omp_passive": v for m, v in res2[key].items()})
    res["wall_s"] += res2["wall_s"]
    return res


def _conv(args, tmp):
    sys.path.insert(0, PEERS)
    import numpy as np
    import conv_torch as peer  # SHAPES, make_inputs, reference, flops

    rounds = args.rounds if args.rounds_explicit else 3
    binary = build("bench_conv") if not args.no_build else \
        os.path.join(BUILD, "bench", "bench_conv")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C %s bench_conv)" % (binary, BUILD))
    envs, set_values, origin = variant_envs(args.threads)
    binary = snapshot(binary, os.path.join(tmp, "bin"), envs)
    peer_script = os.path.join(PEERS, "conv_torch.py")
    T = args.threads
    variants = ["set", "unset"]
    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())
    names = [s[0] for s in peer.SHAPES]
    shapes = {s[0]: s for s in peer.SHAPES}
    flags = ["--threads=%d" % T, "--batch=%d" % CONV_BATCH, "--samples=5", "--iters=1",
             "--warmup=1"]

    print("== conv: Conv2D forward + backward (input and filter gradients) vs PyTorch")
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("work: batch %d float32; recflow NHWC (TensorFlow's default) with HWIO filters, one "
          "Session::Run fetching y, dx and dw; PyTorch F.conv2d + y.backward(dy) in NCHW "
          "(its default) and channels_last, fastest kept per shape" % CONV_BATCH)
    print("threads: %d on both sides (recflow SessionOptions{inter_op_threads=%d, "
          "intra_op_threads=%d}; torch.set_num_threads(%d), OMP_NUM_THREADS=%d)"
          % (T, T, T, T, T))
    print("libblas.so.3 alternative -> %s" % blas_alternative())
    print("variants: set = %s (%s); unset = both removed"
          % (set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print("rounds: %d, alternating recflow, peer (variant order flips every round); each "
          "process: every shape, 1 warm-up step, 5 samples x 1 step" % rounds)
    print()

    # Correctness first: batch %d, every output against float64 NumPy, both
    # sides, both variants.
    print("correctness (batch %d, each output vs a float64 NumPy convolution):" % CHECK_BATCH)
    refs = {}
    for name in names:
        x, w, dy = peer.make_inputs(shapes[name], CHECK_BATCH)
        refs[name] = dict(zip(("y", "dx", "dw"), peer.reference(shapes[name], x, w, dy)))
    all_ok = True
    for variant in variants:
        for side in ("recflow", "pytorch"):
            d = os.path.join(tmp, "dump_%s_%s" % (side, variant))
            os.makedirs(d)
            chk = ["--threads=%d" % T, "--batch=%d" % CHECK_BATCH, "--samples=1", "--warmup=0",
                   "--dump=" + d]
            cmd = [binary] + chk if side == "recflow" else [PYTHON, peer_script] + chk
            _run(cmd, envs[variant])
            for name in names:
                for k, ref in refs[name].items():
                    got = np.fromfile(os.path.join(d, "%s.%s.f32" % (name, k)),
                                      dtype=np.float32).reshape(ref.shape)
                    all_ok &= check_close("%s %s %s %s" % (side, variant, name, k), got, ref,
                                          rtol=1e-4)
    print()

    results = {}  # (side, variant) -> [res]
    for r in range(rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for variant in order:
            for side in ("recflow", "pytorch"):
                cmd = [binary] + flags if side == "recflow" else [PYTHON, peer_script] + flags
                res = _run(cmd, envs[variant])
                if side == "pytorch":
                    res = _with_passive(res, cmd, envs[variant])
                results.setdefault((side, variant), []).append(res)
                total = {}
                for mode, s in res["modes"].items():
                    m = mode.split("/")[1]
                    total[m] = total.get(m, 0.0) + med(s) / 1e3
                print("  [round %d] %-7s %-5s total %s  (%.1f s)" % (
                    r + 1, side, variant, " ".join("%s=%.0fms" % kv for kv in total.items()),
                    res["wall_s"]), flush=True)

    # Full-batch checksums: recflow vs PyTorch, and no drift across rounds.
    print()
    first = results[("recflow", variants[0])][0]["checksums"]
    for (side, variant), runs in results.items():
        for run in runs:
            for name in names:
                for k in ("y_abs", "dx_abs", "dw_abs"):
                    a, b = run["checksums"][name][k], first[name][k]
                    if abs(a - b) > 1e-4 * abs(b):
                        all_ok = False
                        print("  check %s %s %s %s: %.9g vs recflow's %.9g  FAILED"
                              % (side, variant, name, k, a, b))
    print("  check batch-%d abs checksums (y, dx, dw) of every run within 1e-4 of recflow's "
          "first: %s" % (CONV_BATCH, "OK" if all_ok else "FAILED"))
    print()

    def pooled(side, variant, key):
        return [s for run in results[(side, variant)] for s in run["modes"][key]]

    # Each side's kept variant: the smaller sum over shapes of its best mode.
    best = {}
    for side in ("recflow", "pytorch"):
        for variant in variants:
            modes = results[(side, variant)][0]["modes"]
            per_shape = {}
            for name in names:
                cands = [(med(pooled(side, variant, k)), k.split("/")[1])
                         for k in modes if k.split("/")[0] == name]
                per_shape[name] = min(cands)
            total = sum(v[0] for v in per_shape.values())
            if side not in best or total < best[side][0]:
                best[side] = (total, variant, per_shape)

    print("per shape: milliseconds per forward + backward step (median of %d rounds x 5 "
          "samples; kept variant recflow %s, pytorch %s); GFLOP/s = 3 x the forward's flops / "
          "time" % (rounds, best["recflow"][1], best["pytorch"][1]))
    print("  %-28s %10s %9s %10s %9s %-26s %7s   %s" % (
        "shape", "recflow_ms", "GFLOP/s", "pytorch_ms", "GFLOP/s", "pytorch_mode", "ratio",
        "per-round ratio"))
    for name in names:
        rm, rmode = best["recflow"][2][name]
        pm, pmode = best["pytorch"][2][name]
        fl = 3 * peer.flops(shapes[name], CONV_BATCH)
        rr = [med(p["modes"]["%s/%s" % (name, pmode)]) / med(q["modes"]["%s/%s" % (name, rmode)])
              for q, p in zip(results[("recflow", best["recflow"][1])],
                              results[("pytorch", best["pytorch"][1])])]
        print("  %-28s %10.1f %9.1f %10.1f %9.1f %-26s %7.3f   %s" % (
            name, rm / 1e3, fl / (rm * 1e3), pm / 1e3, fl / (pm * 1e3), pmode, pm / rm,
            " ".join("%.2f" % x for x in rr)))
    rt, pt = best["recflow"][0], best["pytorch"][0]
    print("  %-28s %10.1f %9s %10.1f %9s %-26s %7.3f" % ("total", rt / 1e3, "", pt / 1e3, "",
                                                         "", pt / rt))
    print()
    print("all variants (total ms over the shapes, best mode per shape):")
    for (side, variant), runs in results.items():
        core = info_field(runs[0]["info"], "blas_core")
        tot = {}
        for key in runs[0]["modes"]:
            name, mode = key.split("/")
            tot[mode] = tot.get(mode, 0.0) + med(pooled(side, variant, key)) / 1e3
        print("  %-8s %-6s blas_core=%-10s %s" % (side, variant, core, " ".join(
            "%s=%.1f" % kv for kv in tot.items())))
    print()

    # Where recflow's time goes: each op alone, with the kernels' choice and
    # with the im2col + OpenBLAS path forced (informational).
    bd_flags = ["--threads=%d" % T, "--batch=%d" % CONV_BATCH, "--samples=3", "--warmup=1",
                "--breakdown"]
    bd = {}
    for impl in ("auto", "im2col"):
        env = dict(envs[best["recflow"][1]])
        env["RECFLOW_CONV_IMPL"] = impl
        bd[impl] = _run([binary] + bd_flags, env)
    print("recflow per op (ms, median of 3; RECFLOW_CONV_IMPL=auto is the default choice, "
          "im2col forces im2col + OpenBLAS):")
    print("  %-28s %-10s %9s %9s %9s %9s" % ("shape", "impl", "fwd", "bwd_input", "bwd_filter",
                                              "fwd_bwd"))
    for name in names:
        for impl, res in bd.items():
            print("  %-28s %-10s %s" % (name, impl, " ".join(
                "%9.1f" % (med(res["modes"]["%s/%s" % (name, op)]) / 1e3)
                for op in ("fwd", "bwd_input", "bwd_filter", "fwd_bwd"))))
    print()
    info = results[("pytorch", "unset")][0]["info"]
    print("peer: PyTorch %s (%s), mkldnn=%s, BLAS libraries loaded: %s" % (
        info_field(info, "torch"), PYTHON, info_field(info, "mkldnn"),
        info_field(info, "blas_libs")))
    print("correctness: %s" % ("all checks passed" if all_ok else "SOME CHECKS FAILED"))
    if not all_ok:
        die("correctness checks failed; not reporting results", 4)
    return ["RESULT bench=conv metric=conv_fwd_bwd_ms recflow=%.1f peer=pytorch peer_value=%.1f "
            "ratio=%.3f" % (rt / 1e3, pt / 1e3, pt / rt)]


LENET_BATCH = 64
LENET_CHECK_STEPS = 5


def _losses(res_text):
    out = {}
    for line in res_text.splitlines():
        if line.startswith("losses "):
            kv = dict(p.split("=", 1) for p in line.split()[1:])
            out[kv["mode"]] = [float(v) for v in kv["values"].split(",")]
    return out


def _lenet(args, tmp):
    rounds = args.rounds if args.rounds_explicit else 3
    if not args.no_build:
        build("recflow_python")
    pydir = os.path.join(BUILD, "python")
    if not os.path.exists(os.path.join(pydir, "recflow", "contrib", "slim", "nets", "lenet.py")):
        die("%s has no recflow.contrib.slim.nets.lenet; build recflow_python" % pydir)
    envs, set_values, _ = variant_envs(args.threads)
    for env in envs.values():
        env["PYTHONPATH"] = pydir
    T = args.threads
    B = LENET_BATCH
    flags = ["--threads=%d" % T, "--batch=%d" % B, "--samples=5", "--steps=10", "--warmup=3",
             "--check_steps=%d" % LENET_CHECK_STEPS]
    scripts = {"recflow": os.path.join(REPO, "bench", "lenet_train.py"),
               "pytorch": os.path.join(PEERS, "lenet_torch.py")}
    variants = ["set", "unset"]
    print("== conv (LeNet): training examples/s, batch %d, vs PyTorch" % B)
    print("work: TF-slim LeNet (conv 5x5x32, pool 2, conv 5x5x64, pool 2, fc 1024, dropout 0.5, "
          "fc 10; SAME convs) on a fed random batch [%d,28,28,1], sparse softmax "
          "cross-entropy, momentum SGD (lr 0.01, 0.9); recflow: bench/lenet_train.py "
          "(recflow.contrib.slim.nets.lenet from Python, Session.run per step, NHWC); PyTorch: "
          "nn.Sequential, eager NCHW and channels_last, fastest kept" % B)
    print("rounds: %d, alternating recflow, peer; each process: %d checked steps without "
          "dropout from the shared initial weights, 3 warm-up steps, 5 samples x 10 steps"
          % (rounds, LENET_CHECK_STEPS))
    results = {}
    for r in range(rounds):
        order = variants if r % 2 == 0 else variants[::-1]
        for variant in order:
            for side in ("recflow", "pytorch"):
                res = _run([PYTHON, scripts[side]] + flags, envs[variant])
                if side == "pytorch":
                    res = _with_passive(res, [PYTHON, scripts[side]] + flags, envs[variant])
                results.setdefault((side, variant), []).append(res)
                print("  [round %d] %-7s %-5s %s  (%.1f s)" % (
                    r + 1, side, variant, " ".join(
                        "%s=%.0fex/s" % (m, B / (med(s) * 1e-6))
                        for m, s in res["modes"].items()), res["wall_s"]), flush=True)

    all_ok = True
    print()
    print("correctness (losses of the first %d steps, dropout off, same initial weights and "
          "batch):" % LENET_CHECK_STEPS)
    for variant in variants:
        rl = results[("recflow", variant)][0]["losses"]["session_run"]
        for mode, pl in results[("pytorch", variant)][0]["losses"].items():
            d = max(abs(a - b) for a, b in zip(rl, pl))
            ok = d <= 1e-3 * abs(rl[0]) and rl[-1] < rl[0]
            all_ok &= ok
            print("  %-5s recflow %s\n        pytorch %-13s %s  max diff %.3g (tolerance %.3g), "
                  "loss decreases: %s" % (variant, " ".join("%.6f" % v for v in rl), mode,
                                          " ".join("%.6f" % v for v in pl), d,
                                          1e-3 * abs(rl[0]), "OK" if ok else "FAILED"))
        for side in ("recflow", "pytorch"):
            runs = results[(side, variant)]
            drift = max(abs(a - b) for run in runs[1:] for m in runs[0]["losses"]
                        for a, b in zip(runs[0]["losses"][m], run["losses"][m])) \
                if len(runs) > 1 else 0.0
            ok = drift <= 1e-4 * abs(rl[0])
            all_ok &= ok
            print("  %-5s %s losses stable across rounds: max drift %.3g  %s"
                  % (variant, side, drift, "OK" if ok else "FAILED"))
    print()
    best = {}
    print("  %-8s %-7s %-26s %11s %9s   %s" % ("side", "variant", "mode", "examples/s",
                                               "step_ms", "per-round examples/s"))
    for (side, variant), runs in results.items():
        for mode in runs[0]["modes"]:
            pooled = [s for run in runs for s in run["modes"][mode]]
            m = med(pooled)
            print("  %-8s %-7s %-26s %11.0f %9.1f   %s" % (
                side, variant, mode, B / (m * 1e-6), m / 1e3, " ".join(
                    "%.0f" % (B / (med(run["modes"][mode]) * 1e-6)) for run in runs)))
            if side not in best or m < best[side][0]:
                best[side] = (m, variant, mode)
    for side in ("recflow", "pytorch"):
        m, variant, mode = best[side]
        print("  kept %-8s %.0f examples/s (variant %s, mode %s)" % (side, B / (m * 1e-6),
                                                                     variant, mode))
    print()
    if not all_ok:
        die("LeNet correctness checks failed; not reporting results", 4)
    rf = B / (best["recflow"][0] * 1e-6)
    pt = B / (best["pytorch"][0] * 1e-6)
    return ["RESULT bench=conv_lenet metric=lenet_train_examples_per_s recflow=%.0f peer=pytorch "
            "peer_value=%.0f ratio=%.3f" % (rf, pt, rf / pt)]
