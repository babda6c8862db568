#!/usr/bin/python3
"""PyTorch peer of bench/mlp_train.cc (see bench/README.md).

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13):

  /usr/bin/python3 bench/peers/mlp_train.py --threads=2 --samples=5 --steps=3

The same training step as recflow's: an MLP x[B,512] -> 1024 -> 512 -> 256
(Linear + ReLU) -> 1 logit, loss = BCEWithLogitsLoss (mean), Adam(lr 1e-3,
eps 1e-8), one step = zero_grad, forward, backward, optimizer.step, on the
same batch every step. Initial weights, x and y come from gen() (shared with
session_overhead.py, bit-identical to Gen() in the C++ files); see
init_params() and make_batch().

Modes (each its own model and optimizer from the same initial weights;
samples are interleaved across modes):
  eager          nn.Sequential in eager mode, torch.optim.Adam (for-loop)
  eager_foreach  the same with Adam(foreach=True) (multi-tensor update)
  script         torch.jit.script of the model (+ foreach Adam)
Every mode prints the losses of its first --check_steps steps, which must
agree with the first mode's; then timing lines as the recflow binary's
(microseconds per step).

--omp_wait_policy=passive sets OMP_WAIT_POLICY before torch loads libgomp:
torch's OpenMP threads then sleep at the end of a parallel region instead of
spinning, which leaves the cores to OpenBLAS's own threads during the
matmuls (bench/run times the peer both ways and keeps the faster).
"""

import argparse
import ctypes
import os
import re
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from session_overhead import gen  # noqa: E402  (the shared input generator)

FEATURES = 512
HIDDEN = (1024, 512, 256)


def layer_dims(features=FEATURES, hidden=HIDDEN):
    dims = [features] + list(hidden) + [1]
    return list(zip(dims[:-1], dims[1:]))


def init_params(features=FEATURES, hidden=HIDDEN):
    """[(kernel [in,out] float32, bias [out] float32)] as bench/mlp_train.cc."""
    params = []
    for l, (i, o) in enumerate(layer_dims(features, hidden)):
        limit = np.float32(np.sqrt(6.0 / (i + o)))
        w = (gen(10 + l, i * o) * limit).reshape(i, o).astype(np.float32)
        b = (gen(20 + l, o) * np.float32(0.01)).astype(np.float32)
        params.append((w, b))
    return params


def make_batch(batch, features=FEATURES):
    x = gen(1, batch * features).reshape(batch, features)
    y = (gen(2, batch) > 0).astype(np.float32).reshape(batch, 1)
    return x, y


def reference_losses(params, x, y, updates, style, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
    """The losses at steps 1 .. updates + 1 of Adam training in float64
    (NumPy). style "tf": TensorFlow's ApplyAdam (recflow's), var -= lr *
    sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps); "torch":
    torch.optim.Adam, var -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 -
    beta2^t) + eps). They differ only in where eps enters."""
    ws = [w.astype(np.float64) for w, _ in params]
    bs = [b.astype(np.float64) for _, b in params]
    ms = [np.zeros_like(t) for t in ws + bs]
    vs = [np.zeros_like(t) for t in ws + bs]
    xx = x.astype(np.float64)
    yy = y.astype(np.float64)
    losses = []
    for t in range(1, updates + 2):
        acts, zs = [xx], []
        for l in range(len(ws)):
            z = acts[-1] @ ws[l] + bs[l]
            zs.append(z)
            acts.append(np.maximum(z, 0) if l + 1 < len(ws) else z)
        z = zs[-1]
        losses.append(float(np.mean(np.maximum(z, 0) - z * yy + np.log1p(np.exp(-np.abs(z))))))
        if t == updates + 1:
            break
        dz = (1.0 / (1.0 + np.exp(-z)) - yy) / z.size
        gws, gbs = [None] * len(ws), [None] * len(ws)
        for l in reversed(range(len(ws))):
            gws[l] = acts[l].T @ dz
            gbs[l] = dz.sum(axis=0)
            if l > 0:
                dz = (dz @ ws[l].T) * (zs[l - 1] > 0)
        for k, (var, g) in enumerate(zip(ws + bs, gws + gbs)):
            ms[k] = beta1 * ms[k] + (1 - beta1) * g
            vs[k] = beta2 * vs[k] + (1 - beta2) * g * g
            if style == "tf":
                var -= (lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
                        * ms[k] / (np.sqrt(vs[k]) + eps))
            else:
                var -= (lr / (1 - beta1 ** t)
                        * ms[k] / (np.sqrt(vs[k]) / np.sqrt(1 - beta2 ** t) + eps))
    return losses


def blas_info(torch):
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
    core = "?"
    try:
        ob = ctypes.CDLL("libopenblas.so.0")
        ob.openblas_get_corename.restype = ctypes.c_char_p
        core = ob.openblas_get_corename().decode()
    except (OSError, AttributeError):
        pass
    m = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return sorted(libs), core, (m.group(1) if m else "?")


def build_model(torch, params):
    layers = []
    for l, (w, b) in enumerate(params):
        lin = torch.nn.Linear(w.shape[0], w.shape[1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))  # [out, in]
            lin.bias.copy_(torch.from_numpy(b))
        layers.append(lin)
        if l + 1 < len(params):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--steps", type=int, default=3, help="steps per sample")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--check_steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--modes", default="eager,eager_foreach,script")
    p.add_argument("--omp_wait_policy", default="",
                   help="set OMP_WAIT_POLICY (active/passive) before torch loads libgomp")
    args = p.parse_args()
    if args.omp_wait_policy:
        # libgomp reads it once, when torch loads it below.
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()

    import torch  # after argparse, so --help works without torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    libs, core, blas_cfg = blas_info(torch)
    print("info side=pytorch case=train torch=%s threads=%d interop_threads=%d batch=%d "
          "blas_info=%s blas_libs=%s blas_core=%s OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s "
          "OMP_WAIT_POLICY=%s"
          % (torch.__version__, torch.get_num_threads(), torch.get_num_interop_threads(),
             args.batch, blas_cfg, ",".join(libs) or "?", core,
             os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
             os.environ.get("OPENBLAS_L2_SIZE", "<unset>"),
             os.environ.get("OMP_WAIT_POLICY", "<unset>")))

    params = init_params()
    xn, yn = make_batch(args.batch)
    x = torch.from_numpy(xn)
    y = torch.from_numpy(yn)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def make_step(name):
        model = build_model(torch, params)
        foreach = name != "eager"
        opt = torch.optim.Adam(model.parameters(), lr=args.lr, eps=1e-8, foreach=foreach)
        if name == "script":
            model = torch.jit.script(model)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        return step

    modes = []
    for name in args.modes.split(","):
        if name not in ("eager", "eager_foreach", "script"):
            sys.exit("error: unknown mode %s" % name)
        modes.append((name, make_step(name)))

    # Correctness: the first steps' losses, every mode from the same weights.
    first = None
    for name, step in modes:
        losses = [step().item() for _ in range(args.check_steps)]
        print("losses mode=%s values=%s" % (name, ",".join("%.9g" % v for v in losses)))
        if first is None:
            first = losses
        else:
            for a, b in zip(first, losses):
                if not abs(a - b) <= 1e-4 * max(abs(a), 1e-6):
                    sys.exit("error: mode %s losses %s disagree with %s's %s"
                             % (name, losses, modes[0][0], first))
    sys.stdout.flush()

    for _, step in modes:
        for _ in range(args.warmup):
            step()
    results = {name: [] for name, _ in modes}
    for _ in range(args.samples):
        for name, step in modes:
            t0 = time.perf_counter_ns()
            for _ in range(args.steps):
                step()
            t1 = time.perf_counter_ns()
            results[name].append((t1 - t0) / 1e3 / args.steps)
    for name, _ in modes:
        us = results[name]
        print("mode=%s median_us=%.1f min_us=%.1f iters=%d samples_us=%s"
              % (name, statistics.median(us), min(us), args.steps,
                 ",".join("%.1f" % v for v in us)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
