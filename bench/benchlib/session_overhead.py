"""bench/run session_overhead: per-step Session::Run overhead (a 100-op
AddV2 chain, also from recflow's Python package) and one 1024^3 MatMul,
vs PyTorch."""

import os
import shutil
import sys
import tempfile

from .common import (
    REPO, BUILD, PYTHON, PEERS, VARIANT_VARS, die, build, variant_envs,
    blas_alternative, cpu_model, snapshot, info_field, run_side, med, check_close,
)


def session_overhead(args):
    tmp = tempfile.mkdtemp(prefix="bench_session_overhead.")
    try:
        return _session_overhead(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _session_overhead(args, tmp):
    sys.path.insert(0, PEERS)
    import numpy as np
    from session_overhead import gen  # the shared input generator

    binary = build("bench_session_overhead") if not args.no_build else \
        os.path.join(BUILD, "bench", "bench_session_overhead")
    if not os.path.exists(binary):
        die("%s is missing; build it (ninja -C build bench_session_overhead)" % binary)
    peer_script = os.path.join(PEERS, "session_overhead.py")
    envs, set_values, origin = variant_envs(args.threads)
    # build/ is shared and may be rebuilt or wiped while this runs: run a
    # snapshot of the binary and recflow's libraries (LD_LIBRARY_PATH comes
    # before the binary's RUNPATH).
    binary = snapshot(binary, os.path.join(tmp, "bin"), envs)
    # The Python row (chain only): recflow's Python package from build/python,
    # snapshotted too; its extension module loads the snapshotted libraries
    # through LD_LIBRARY_PATH.
    python_script = os.path.join(REPO, "bench", "session_overhead.py")
    python_pkg = os.path.join(BUILD, "python")
    with_python = os.path.exists(os.path.join(python_pkg, "recflow", "__init__.py"))
    if with_python:
        shutil.copytree(python_pkg, os.path.join(tmp, "python"))
        for env in envs.values():
            env["PYTHONPATH"] = os.path.join(tmp, "python")
    else:
        print("(no build/python: the Python row is skipped; build target recflow_python)")
    T = args.threads
    n = 1024
    chain_len = 100
    cases = {
        # case: (samples per process, iterations per sample)
        "matmul": dict(samples=8, iters=2),
        "chain": dict(samples=10, iters=500),
    }
    variants = ["set", "unset"]
    set_desc = ",".join("%s=%s" % (k, v) for k, v in set_values.items())

    print("== session_overhead: per-step Session::Run overhead and one big MatMul vs PyTorch")
    print("machine: %s, %d CPUs, load average %s" % (
        cpu_model(), os.cpu_count(), " ".join("%.2f" % x for x in os.getloadavg())))
    print("threads: %d on both sides (recflow SessionOptions{inter_op_threads=%d, "
          "intra_op_threads=%d}; torch.set_num_threads(%d), OMP_NUM_THREADS=%d, "
          "OPENBLAS_NUM_THREADS=%d)" % (T, T, T, T, T, T))
    print("libblas.so.3 alternative -> %s" % blas_alternative())
    print("variants: set = %s (%s); unset = both removed"
          % (set_desc, ", ".join("%s %s" % (k, origin[k]) for k in VARIANT_VARS)))
    print("rounds: %d, alternating recflow, peer, recflow, peer, ... (variant order flips "
          "every round)" % args.rounds)
    print()

    # results[case][(side, variant)] = list of per-process results
    results = {c: {} for c in cases}

    def sides_of(case):
        return ("recflow", "pytorch", "python") if case == "chain" and with_python else (
            "recflow", "pytorch")
    all_ok = True
    try:
        for case, cfg in cases.items():
            common = ["--case=" + case, "--threads=%d" % T, "--samples=%d" % cfg["samples"],
                      "--iters=%d" % cfg["iters"], "--chain_len=%d" % chain_len, "--n=%d" % n]
            for r in range(args.rounds):
                order = variants if r % 2 == 0 else variants[::-1]
                for variant in order:
                    for side in sides_of(case):
                        cmd = ({"recflow": [binary], "pytorch": [PYTHON, peer_script],
                                "python": [PYTHON, python_script]}[side] + common)
                        if r == 0:
                            cmd.append("--dump=" + os.path.join(
                                tmp, "%s_%s_%s.f32" % (case, side, variant)))
                        res = run_side(cmd, envs[variant])
                        results[case].setdefault((side, variant), []).append(res)
                        print("  [%s round %d] %-7s %-5s %s  (%.1f s)" % (
                            case, r + 1, side, variant,
                            " ".join("%s=%.1fus" % (m, med(s)) for m, s in res["modes"].items()),
                            res["wall_s"]), flush=True)

            # Correctness: every side and variant against a float64 reference.
            print()
            print("correctness (%s):" % case)
            if case == "matmul":
                a = gen(1, n * n).reshape(n, n).astype(np.float64)
                b = gen(2, n * n).reshape(n, n).astype(np.float64)
                ref = a @ b
            else:
                ref = (gen(3, 16).astype(np.float64) + chain_len * gen(4, 16).astype(np.float64)
                       ).reshape(1, 16)
            dumps = {}
            for side in sides_of(case):
                for variant in variants:
                    path = os.path.join(tmp, "%s_%s_%s.f32" % (case, side, variant))
                    got = np.fromfile(path, dtype=np.float32).reshape(ref.shape)
                    dumps[(side, variant)] = got
                    all_ok &= check_close("%s %s %s vs float64 ref" % (case, side, variant),
                                          got, ref)
                    # Later rounds: the printed checksum must not drift.
                    runs = results[case][(side, variant)]
                    c0 = runs[0]["checksum"]
                    for k, run in enumerate(runs[1:], 2):
                        if abs(run["checksum"] - c0) > 1e-3 * runs[0]["abs_checksum"]:
                            print("  check %s %s %s round %d checksum %.9g != %.9g  FAILED"
                                  % (case, side, variant, k, run["checksum"], c0))
                            all_ok = False
            for variant in variants:
                d = float(np.max(np.abs(dumps[("recflow", variant)].astype(np.float64)
                                        - dumps[("pytorch", variant)])))
                print("  recflow vs pytorch (%s, %s): max_abs_diff=%.3g" % (case, variant, d))
            print()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    # Tables and the kept variants.
    kept = {}
    for case in ("matmul", "chain"):
        cfg = cases[case]
        what = ("%dx%d @ %dx%d float32 MatMul, one Run / one op" % (n, n, n, n) if case == "matmul"
                else "%d-node AddV2 chain on [1,16], one Run = 1 feed + 1 fetch" % chain_len)
        print("%s: %s; %d rounds x %d samples x %d iters; microseconds per step" % (
            case, what, args.rounds, cfg["samples"], cfg["iters"]))
        print("  %-8s %-7s %-9s %-12s %11s %11s   %s" % (
            "side", "variant", "blas_core", "mode", "median_us", "min_us", "per-round medians"))
        best = {}
        for side in sides_of(case):
            for variant in variants:
                runs = results[case][(side, variant)]
                core = info_field(runs[0]["info"], "blas_core")
                for mode in runs[0]["modes"]:
                    pooled = [s for run in runs for s in run["modes"][mode]]
                    m = med(pooled)
                    print("  %-8s %-7s %-9s %-12s %11.2f %11.2f   %s" % (
                        side, variant, core, mode, m, min(pooled),
                        " ".join("%.1f" % med(run["modes"][mode]) for run in runs)))
                    if side not in best or m < best[side][0]:
                        best[side] = (m, variant, mode, core)
        for side in ("recflow", "pytorch"):
            m, variant, mode, core = best[side]
            vdesc = set_desc if variant == "set" else "OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE unset"
            print("  kept %-8s %.2f us: variant %s (%s; OpenBLAS core %s), mode %s" % (
                side, m, variant, vdesc, core, mode))
        # Rounds run the two sides back to back, so a round's ratio is less
        # exposed to the machine's load drifting than the pooled medians.
        _, rv, rm, _ = best["recflow"]
        _, pv, pm, _ = best["pytorch"]
        ratios = [med(p["modes"][pm]) / med(r["modes"][rm])
                  for r, p in zip(results[case][("recflow", rv)], results[case][("pytorch", pv)])]
        print("  per-round ratio peer/recflow (kept variants): %s; median %.3f" % (
            " ".join("%.3f" % x for x in ratios), med(ratios)))
        kept[case] = best
        print()

    info = results["matmul"][("pytorch", "unset")][0]["info"]
    print("peer: PyTorch %s (%s), torch BLAS_INFO=%s, BLAS libraries loaded: %s" % (
        info_field(info, "torch"), PYTHON, info_field(info, "blas_info"),
        info_field(info, "blas_libs")))
    print("correctness: %s" % ("all checks passed" if all_ok else "SOME CHECKS FAILED"))
    if not all_ok:
        die("correctness checks failed; not reporting results", 4)

    def result(bench, metric, case):
        rf, pt = kept[case]["recflow"][0], kept[case]["pytorch"][0]
        return ("RESULT bench=%s metric=%s recflow=%.2f peer=pytorch peer_value=%.2f ratio=%.3f"
                % (bench, metric, rf, pt, pt / rf))

    lines = [result("session_overhead_matmul", "median_us", "matmul"),
             result("session_overhead", "chain_median_us", "chain")]
    if with_python:
        # Session.run from Python vs C++ Session::Run on the same chain, per
        # round (back to back, so less exposed to load drift); the issue's
        # target is python / C++ <= 1.5, i.e. ratio >= 0.667.
        _, rv, rm, _ = kept["chain"]["recflow"]
        for mode in ("python_run", "python_callable"):
            ratios = [med(r["modes"][rm]) / med(p["modes"][mode]) for r, p in
                      zip(results["chain"][("recflow", rv)], results["chain"][("python", rv)])]
            py_us = med([x for run in results["chain"][("python", rv)] for x in run["modes"][mode]])
            print("python %s vs C++ Session::Run (variant %s): per-round C++/python %s; median %.3f"
                  % (mode, rv, " ".join("%.3f" % x for x in ratios), med(ratios)))
            lines.append("RESULT bench=session_overhead_python metric=%s_median_us recflow=%.2f "
                         "peer=recflow_cpp peer_value=%.2f ratio=%.3f" % (
                             mode, py_us, kept["chain"]["recflow"][0], med(ratios)))
        zc = results["chain"][("python", rv)][0].get("zero_copy", "?")
        print("python 1 MB float fetch: %s" % zc)
    return lines
