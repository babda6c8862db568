#!/usr/bin/python3
"""PyTorch peer of bench/conv.cc (see bench/README.md, "conv").

Run with Debian's interpreter (/usr/bin/python3, python3-torch 1.13):

  /usr/bin/python3 bench/peers/conv_torch.py --threads=2 --samples=5 --batch=32

For each shape of SHAPES (the same table as kShapes in bench/conv.cc): x, w
and dy from gen() (the values recflow gets, made in NHWC / HWIO order and
transposed to PyTorch's NCHW / OIHW), then one step is

  x.grad = w.grad = None
  y = F.conv2d(x, w, stride, padding, groups)   (groups = C: depthwise)
  y.backward(dy)                                 (x.grad and w.grad)

float32, on torch.set_num_threads(--threads) threads (oneDNN, "mkldnn", does
the convolutions of a float batch on CPU). Modes, fastest kept by bench/run:
  nchw           contiguous NCHW tensors, PyTorch's default
  channels_last  the same values in torch.channels_last (NHWC in memory)
Output lines as the recflow binary's (checksum ..., mode=SHAPE/MODE ...);
--dump=DIR writes y, dx, dw of the nchw mode in NHWC / HWIO order (raw
float32) for the correctness check. reference() is that check's float64
NumPy convolution.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from session_overhead import gen, blas_info  # noqa: E402  (the shared input generator)

# name, depthwise, h, w, cin, cout, k, stride, pad (-1: SAME, symmetric for
# these odd kernels at stride 1; else that padding on each side).
SHAPES = [
    ("mbv1_stem_3x3s2_224x3_32", False, 224, 224, 3, 32, 3, 2, 1),
    ("mbv1_dw_3x3_56x128", True, 56, 56, 128, 128, 3, 1, -1),
    ("mbv1_pw_1x1_28x256_256", False, 28, 28, 256, 256, 1, 1, -1),
    ("resnet_3x3_56x64_64", False, 56, 56, 64, 64, 3, 1, -1),
    ("resnet_3x3_28x128_128", False, 28, 28, 128, 128, 3, 1, -1),
    ("resnet_3x3_14x256_256", False, 14, 14, 256, 256, 3, 1, -1),
    ("resnet_stem_7x7s2_224x3_64", False, 224, 224, 3, 64, 7, 2, 3),
]


def padding_of(shape):
    _, _, _, _, _, _, k, _, pad = shape
    return (k - 1) // 2 if pad < 0 else pad


def out_dim(shape, n_in):
    _, _, _, _, _, _, k, s, _ = shape
    return (n_in + 2 * padding_of(shape) - k) // s + 1


def flops(shape, batch):
    """Multiply-adds x 2 of the forward; fwd + bwd is about 3x that."""
    _, dw, h, w, cin, cout, k, _, _ = shape
    return 2.0 * batch * out_dim(shape, h) * out_dim(shape, w) * cout * k * k * (1 if dw else cin)


def make_inputs(shape, batch):
    """x [N,H,W,C], w [k,k,Cin,Cout or 1], dy [N,OH,OW,Cout]: float32, as
    bench/conv.cc's feeds."""
    _, dw, h, w, cin, cout, k, _, _ = shape
    fo = 1 if dw else cout
    fan_in = k * k * (1 if dw else cin)
    x = gen(1, batch * h * w * cin).reshape(batch, h, w, cin)
    wt = (gen(2, k * k * cin * fo) * np.float32(1.0 / np.sqrt(fan_in))).reshape(k, k, cin, fo)
    dy = (gen(3, batch * out_dim(shape, h) * out_dim(shape, w) * cout) * np.float32(0.1)).reshape(
        batch, out_dim(shape, h), out_dim(shape, w), cout)
    return x, wt, dy


def reference(shape, x, wt, dy):
    """(y, dx, dw) in float64 from NHWC x, HWIO wt and NHWC dy."""
    _, dw, h, w, cin, cout, k, s, _ = shape
    p = padding_of(shape)
    x = x.astype(np.float64)
    wt = wt.astype(np.float64)
    dy = dy.astype(np.float64)
    n = x.shape[0]
    oh, ow = out_dim(shape, h), out_dim(shape, w)
    xp = np.zeros((n, h + 2 * p, w + 2 * p, cin))
    xp[:, p:p + h, p:p + w, :] = x
    y = np.zeros((n, oh, ow, cout))
    dxp = np.zeros_like(xp)
    dwt = np.zeros_like(wt)
    for ky in range(k):
        for kx in range(k):
            win = xp[:, ky:ky + s * (oh - 1) + 1:s, kx:kx + s * (ow - 1) + 1:s, :]
            if dw:  # channel multiplier 1
                y += win * wt[ky, kx, :, 0]
                dxp[:, ky:ky + s * (oh - 1) + 1:s, kx:kx + s * (ow - 1) + 1:s, :] += \
                    dy * wt[ky, kx, :, 0]
                dwt[ky, kx, :, 0] = np.einsum("nhwc,nhwc->c", win, dy)
            else:
                y += win @ wt[ky, kx]
                dxp[:, ky:ky + s * (oh - 1) + 1:s, kx:kx + s * (ow - 1) + 1:s, :] += \
                    dy @ wt[ky, kx].T
                dwt[ky, kx] = win.reshape(-1, cin).T @ dy.reshape(-1, cout)
    return y, dxp[:, p:p + h, p:p + w, :], dwt


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--iters", type=int, default=1, help="steps per sample")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--shapes", default="all")
    p.add_argument("--modes", default="nchw,channels_last")
    p.add_argument("--dump", default="")
    args = p.parse_args()

    import torch  # after argparse, so --help works without torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    libs, core, _, _, blas_cfg = blas_info(torch)
    print("info side=pytorch torch=%s threads=%d batch=%d mkldnn=%s blas_info=%s blas_libs=%s "
          "blas_core=%s OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s OMP_WAIT_POLICY=%s"
          % (torch.__version__, torch.get_num_threads(), args.batch,
             torch.backends.mkldnn.is_available(), blas_cfg, ",".join(libs) or "?", core,
             os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
             os.environ.get("OPENBLAS_L2_SIZE", "<unset>"),
             os.environ.get("OMP_WAIT_POLICY", "<unset>")))
    sys.stdout.flush()
    modes = args.modes.split(",")
    for m in modes:
        if m not in ("nchw", "channels_last"):
            sys.exit("error: unknown mode %s" % m)
    names = args.shapes.split(",")
    for shape in SHAPES:
        name, dw, _, _, cin, _, _, stride, _ = shape
        if args.shapes != "all" and name not in names:
            continue
        xn, wn, dyn = make_inputs(shape, args.batch)
        groups = cin if dw else 1
        pad = padding_of(shape)
        steps = {}
        for mode in modes:
            fmt = torch.channels_last if mode == "channels_last" else torch.contiguous_format
            x = torch.from_numpy(xn).permute(0, 3, 1, 2).contiguous(memory_format=fmt)
            # HWIO -> OIHW; depthwise HWC1 -> C1HW (groups = C, one output each).
            wt = torch.from_numpy(wn).permute(3, 2, 0, 1) if not dw else \
                torch.from_numpy(wn).permute(2, 3, 0, 1)
            wt = wt.contiguous(memory_format=fmt)
            dy = torch.from_numpy(dyn).permute(0, 3, 1, 2).contiguous(memory_format=fmt)
            x.requires_grad_(True)
            wt.requires_grad_(True)

            def step(x=x, wt=wt, dy=dy):
                x.grad = None
                wt.grad = None
                y = F.conv2d(x, wt, stride=stride, padding=pad, groups=groups)
                y.backward(dy)
                return y

            steps[mode] = (step, x, wt)
        # Checksums (and the dump) of the first mode; every mode must agree.
        sums = None
        for mode, (step, x, wt) in steps.items():
            y = step().detach()
            outs = {"y": y.permute(0, 2, 3, 1).contiguous().numpy(),
                    "dx": x.grad.permute(0, 2, 3, 1).contiguous().numpy(),
                    "dw": (wt.grad.permute(2, 3, 1, 0) if not dw
                           else wt.grad.permute(2, 3, 0, 1)).contiguous().numpy()}
            s = {k: (float(np.sum(v, dtype=np.float64)),
                     float(np.sum(np.abs(v), dtype=np.float64))) for k, v in outs.items()}
            if sums is None:
                sums = s
                print("checksum shape=%s %s" % (name, " ".join(
                    "%s=%.9g %s_abs=%.9g" % (k, v[0], k, v[1]) for k, v in s.items())))
                if args.dump:
                    for k, v in outs.items():
                        v.astype(np.float32).tofile(os.path.join(args.dump,
                                                                 "%s.%s.f32" % (name, k)))
            else:
                for k in s:
                    if abs(s[k][1] - sums[k][1]) > 1e-4 * sums[k][1]:
                        sys.exit("error: %s %s: mode %s abs checksum %.9g, %s's %.9g"
                                 % (name, k, mode, s[k][1], modes[0], sums[k][1]))
        sys.stdout.flush()
        for step, _, _ in steps.values():
            for _ in range(args.warmup):
                step()
        results = {m: [] for m in steps}
        for _ in range(args.samples):
            for mode, (step, _, _) in steps.items():
                t0 = time.perf_counter_ns()
                for _ in range(args.iters):
                    step()
                results[mode].append((time.perf_counter_ns() - t0) / 1e3 / args.iters)
        for mode, us in results.items():
            print("mode=%s/%s median_us=%.1f min_us=%.1f iters=%d samples_us=%s"
                  % (name, mode, statistics.median(us), min(us), args.iters,
                     ",".join("%.1f" % v for v in us)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
