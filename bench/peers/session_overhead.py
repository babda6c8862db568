#!/usr/bin/python3
"""PyTorch peer of bench/session_overhead.cc (see bench/README.md).

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13):

  /usr/bin/python3 bench/peers/session_overhead.py --case=chain --threads=2 \
      --samples=10 --iters=1000

chain:  y = x; 100 times y = y + c  (x [1,16] float, c [16] float), under
        torch.no_grad(); modes: eager, script (torch.jit.script of the same
        function), trace (torch.jit.trace of it: 100 unrolled aten::add).
matmul: one [n,n] x [n,n] float product; modes: mm (torch.mm), matmul
        (torch.matmul), mm_out (torch.mm(a, b, out=c)).

Modes are timed interleaved (sample 1 of every mode, then sample 2, ...).
Every mode's result is checked against the first mode's before timing.
Output lines match the recflow binary's: info, output=, checksum=, one
mode= line per mode. --dump=PATH writes the first mode's result as raw
float32. Inputs come from gen(), which matches Gen() in session_overhead.cc.
"""

import argparse
import ctypes
import os
import re
import statistics
import sys
import time

import numpy as np


def gen(seed, count):
    """Element i of stream `seed`: uniform in [-1, 1), exact in float32."""
    i = np.arange(count, dtype=np.uint64) + np.uint64(seed << 32)
    with np.errstate(over="ignore"):
        h = i * np.uint64(0x9E3779B97F4A7C15)
        h ^= h >> np.uint64(29)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(32)
    top = (h >> np.uint64(40)).astype(np.float64)
    return (top / 8388608.0 - 1.0).astype(np.float32)


def blas_info(torch):
    """Which BLAS torch loaded, from the process's maps and from OpenBLAS."""
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                base = os.path.basename(path)
                if any(k in base for k in ("blas", "mkl", "lapack", "dnnl")):
                    libs.add(os.path.realpath(path))
    except OSError:
        pass
    core = config = "?"
    threads = -1
    try:
        ob = ctypes.CDLL("libopenblas.so.0")
        ob.openblas_get_corename.restype = ctypes.c_char_p
        ob.openblas_get_config.restype = ctypes.c_char_p
        core = ob.openblas_get_corename().decode()
        config = ob.openblas_get_config().decode()
        threads = ob.openblas_get_num_threads()
    except (OSError, AttributeError):
        pass
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    blas_cfg = m.group(1) if m else "?"
    return sorted(libs), core, config, threads, blas_cfg


def fmt_values(t):
    return ",".join("%.9g" % v for v in t.reshape(-1).tolist())


def print_result(t, print_values):
    a = t.detach().numpy().astype(np.float64)
    if print_values:
        print("output=%s" % fmt_values(t))
    print("shape=[%s] checksum=%.9g abs_checksum=%.9g"
          % (",".join(str(d) for d in t.shape), a.sum(), np.abs(a).sum()))


def check_agree(name, ref, got, rtol=1e-3):
    diff = (got - ref).abs().max().item()
    scale = max(ref.abs().max().item(), 1e-30)
    if not diff <= rtol * scale:
        sys.exit("error: mode %s disagrees with the first mode: max abs diff %g (scale %g)"
                 % (name, diff, scale))


def time_modes(modes, samples, iters, warmup):
    """modes: list of (name, fn). Interleaved samples; prints mode= lines."""
    for _, fn in modes:
        for _ in range(warmup):
            fn()
    results = {name: [] for name, _ in modes}
    for _ in range(samples):
        for name, fn in modes:
            t0 = time.perf_counter_ns()
            for _ in range(iters):
                fn()
            t1 = time.perf_counter_ns()
            results[name].append((t1 - t0) / 1e3 / iters)
    for name, _ in modes:
        us = results[name]
        print("mode=%s median_us=%.3f min_us=%.3f iters=%d samples_us=%s"
              % (name, statistics.median(us), min(us), iters,
                 ",".join("%.3f" % v for v in us)))
    sys.stdout.flush()


def run_chain(torch, args, modes_wanted):
    n = args.chain_len
    x = torch.from_numpy(gen(3, 16).reshape(1, 16))
    c = torch.from_numpy(gen(4, 16))

    def chain(x, c):
        y = x
        for _ in range(n):
            y = y + c
        return y

    # TorchScript needs the trip count as a literal or an argument.
    def chain_n(x, c, n: int):
        y = x
        for _ in range(n):
            y = y + c
        return y

    modes = []
    with torch.no_grad():
        if "eager" in modes_wanted:
            modes.append(("eager", lambda: chain(x, c)))
        if "script" in modes_wanted:
            scripted = torch.jit.script(chain_n)
            modes.append(("script", lambda: scripted(x, c, n)))
        if "trace" in modes_wanted:
            traced = torch.jit.trace(chain, (x, c), check_trace=False)
            modes.append(("trace", lambda: traced(x, c)))
        if not modes:
            sys.exit("error: no chain mode among --modes=%s" % args.modes)
        # JIT modes profile their first calls; run every mode a few times
        # before comparing results.
        outs = {}
        for name, fn in modes:
            for _ in range(5):
                outs[name] = fn()
        ref = outs[modes[0][0]]
        for name, _ in modes[1:]:
            check_agree(name, ref, outs[name])
        print_result(ref, print_values=True)
        if args.dump:
            ref.numpy().astype(np.float32).tofile(args.dump)
        time_modes(modes, args.samples, args.iters or 1000, args.warmup or 200)


def run_matmul(torch, args, modes_wanted):
    n = args.n
    a = torch.from_numpy(gen(1, n * n).reshape(n, n))
    b = torch.from_numpy(gen(2, n * n).reshape(n, n))
    out = torch.empty(n, n, dtype=torch.float32)
    modes = []
    with torch.no_grad():
        if "mm" in modes_wanted:
            modes.append(("mm", lambda: torch.mm(a, b)))
        if "matmul" in modes_wanted:
            modes.append(("matmul", lambda: torch.matmul(a, b)))
        if "mm_out" in modes_wanted:
            modes.append(("mm_out", lambda: torch.mm(a, b, out=out)))
        if not modes:
            sys.exit("error: no matmul mode among --modes=%s" % args.modes)
        outs = {name: fn().clone() for name, fn in modes}
        ref = outs[modes[0][0]]
        for name, _ in modes[1:]:
            check_agree(name, ref, outs[name])
        print_result(ref, print_values=False)
        if args.dump:
            ref.numpy().astype(np.float32).tofile(args.dump)
        time_modes(modes, args.samples, args.iters or 3, args.warmup or 2)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--case", choices=["chain", "matmul"], default="chain")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--samples", type=int, default=10)
    p.add_argument("--iters", type=int, default=0, help="calls per sample; 0: case default")
    p.add_argument("--warmup", type=int, default=0, help="untimed calls; 0: case default")
    p.add_argument("--chain_len", type=int, default=100)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--dump", default="")
    p.add_argument("--modes", default="eager,script,trace,mm,matmul,mm_out",
                   help="comma-separated modes to time (those of the case are used)")
    args = p.parse_args()

    import torch  # after argparse, so --help works without torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    libs, core, config, ob_threads, blas_cfg = blas_info(torch)
    print("info side=pytorch case=%s torch=%s threads=%d interop_threads=%d "
          "blas_info=%s blas_libs=%s blas_core=%s blas_config=\"%s\" openblas_threads=%d "
          "OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s"
          % (args.case, torch.__version__, torch.get_num_threads(),
             torch.get_num_interop_threads(), blas_cfg, ",".join(libs) or "?", core, config,
             ob_threads, os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
             os.environ.get("OPENBLAS_L2_SIZE", "<unset>")))
    modes_wanted = set(args.modes.split(","))
    if args.case == "chain":
        run_chain(torch, args, modes_wanted)
    else:
        run_matmul(torch, args, modes_wanted)


if __name__ == "__main__":
    main()
