#!/usr/bin/python3
"""PyTorch peer of bench/lenet_train.py (see bench/README.md, "conv").

    /usr/bin/python3 bench/peers/lenet_torch.py --threads=2

TF-slim's LeNet in PyTorch: Conv2d(1, 32, 5, padding=2) + ReLU, MaxPool2d(2),
Conv2d(32, 64, 5, padding=2) + ReLU, MaxPool2d(2), Flatten, Linear(7*7*64,
1024) + ReLU, Dropout(0.5), Linear(1024, 10); CrossEntropyLoss (mean),
SGD(lr 0.01, momentum 0.9) (the same update as TensorFlow's
MomentumOptimizer). One step: zero_grad, forward, backward, step, on the
same batch every step, torch.set_num_threads(--threads).

init_params() and make_batch() (NumPy only; bench/lenet_train.py imports
them) give both sides the same start: weights from gen() in TensorFlow's
layouts (HWIO filters, [in, out] matrices, fc3's rows in NHWC flatten
order), which build_model() transposes into PyTorch's. The first
--check_steps steps run in eval mode (no dropout) and print their losses;
then train mode is timed. Modes, fastest kept: eager (NCHW) and
channels_last (model and batch in torch.channels_last).
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from session_overhead import gen  # noqa: E402  (the shared input generator)

# layer -> (weights shape in TensorFlow's layout, fan-in)
LAYERS = {"conv1": (5, 5, 1, 32), "conv2": (5, 5, 32, 64), "fc3": (7 * 7 * 64, 1024),
                    "fc4": (1024, 10)}


def init_params():
    """{layer: {"weights": array, "biases": array}} (float32, TF layouts)."""
    params = {}
    for l, (name, shape) in enumerate(LAYERS.items()):
        fan_in = int(np.prod(shape[:-1]))
        n = int(np.prod(shape))
        w = (gen(10 + l, n) * np.float32(np.sqrt(3.0 / fan_in))).reshape(shape)
        b = gen(20 + l, shape[-1]) * np.float32(0.01)
        params[name] = {"weights": w.astype(np.float32), "biases": b.astype(np.float32)}
    return params


def make_batch(batch):
    """images [batch, 28, 28, 1] float32 (NHWC), labels [batch] int64 in 0..9."""
    x = gen(1, batch * 28 * 28).reshape(batch, 28, 28, 1)
    y = np.floor((gen(2, batch).astype(np.float64) + 1.0) * 5.0).clip(0, 9).astype(np.int64)
    return x, y


def build_model(torch, params):
    nn = torch.nn
    model = nn.Sequential(
            nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(7 * 7 * 64, 1024), nn.ReLU(), nn.Dropout(0.5),
            nn.Linear(1024, 10))
    conv1, conv2, fc3, fc4 = model[0], model[3], model[7], model[10]
    with torch.no_grad():
        for layer, name in ((conv1, "conv1"), (conv2, "conv2")):
            w = params[name]["weights"].transpose(3, 2, 0, 1)  # HWIO -> OIHW
            layer.weight.copy_(torch.from_numpy(w.copy()))
            layer.bias.copy_(torch.from_numpy(params[name]["biases"]))
        # fc3's rows are in NHWC flatten order (h, w, c); PyTorch flattens NCHW (c, h, w).
        w3 = params["fc3"]["weights"].reshape(7, 7, 64, 1024).transpose(2, 0, 1, 3)
        w3 = w3.reshape(-1, 1024)
        fc3.weight.copy_(torch.from_numpy(w3.T.copy()))
        fc3.bias.copy_(torch.from_numpy(params["fc3"]["biases"]))
        fc4.weight.copy_(torch.from_numpy(params["fc4"]["weights"].T.copy()))
        fc4.bias.copy_(torch.from_numpy(params["fc4"]["biases"]))
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--steps", type=int, default=20, help="steps per sample")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--check_steps", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--modes", default="eager,channels_last")
    args = p.parse_args()

    import torch  # after argparse, so --help works without torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    print("info side=pytorch torch=%s threads=%d batch=%d mkldnn=%s OPENBLAS_CORETYPE=%s "
          "OPENBLAS_L2_SIZE=%s OMP_WAIT_POLICY=%s"
          % (torch.__version__, torch.get_num_threads(), args.batch,
             torch.backends.mkldnn.is_available(),
             os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
             os.environ.get("OPENBLAS_L2_SIZE", "<unset>"),
             os.environ.get("OMP_WAIT_POLICY", "<unset>")))
    params = init_params()
    xn, yn = make_batch(args.batch)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps = {}
    first = None
    for mode in args.modes.split(","):
        if mode not in ("eager", "channels_last"):
            sys.exit("error: unknown mode %s" % mode)
        fmt = torch.channels_last if mode == "channels_last" else torch.contiguous_format
        model = build_model(torch, params).to(memory_format=fmt)
        x = torch.from_numpy(xn).permute(0, 3, 1, 2).contiguous(memory_format=fmt)
        y = torch.from_numpy(yn)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

        def step(model=model, x=x, y=y, opt=opt):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        model.eval()  # correctness: no dropout
        losses = [step().item() for _ in range(args.check_steps)]
        print("losses mode=%s values=%s" % (mode, ",".join("%.9g" % v for v in losses)))
        if first is None:
            first = losses
        elif any(abs(a - b) > 1e-4 * max(abs(a), 1e-6) for a, b in zip(first, losses)):
            sys.exit("error: mode %s losses %s disagree with %s" % (mode, losses, first))
        model.train()
        steps[mode] = step
    sys.stdout.flush()
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    results = {m: [] for m in steps}
    for _ in range(args.samples):
        for mode, step in steps.items():
            t0 = time.perf_counter_ns()
            for _ in range(args.steps):
                step()
            results[mode].append((time.perf_counter_ns() - t0) / 1e3 / args.steps)
    for mode, us in results.items():
        print("mode=%s median_us=%.1f min_us=%.1f iters=%d samples_us=%s" % (
                mode, statistics.median(us), min(us), args.steps, ",".join("%.1f" % v for v in us)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
