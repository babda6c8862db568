#!/usr/bin/python3
"""PyTorch peer of bench/embedding.cc (see bench/README.md).

  /usr/bin/python3 bench/peers/embedding_torch.py --ids=F --mode=per_field \
      [--threads=2] [--fields=26] [--batch=4096] [--rows=1000000] \
      [--warmup=3] [--samples=5] [--iters=10] [--dump=PATH]

The same training step as the recflow side: for every field an
nn.EmbeddingBag(rows, 16, mode="sum", sparse=True) over the batch's ids (one
id per example, offsets 0..batch-1), loss = sum_f sum(bag_f * G_f) with the
same fixed G_f (gen(100 + f) * 0.01), backward (sparse gradients), and
torch.optim.Adagrad(lr=0.05, initial_accumulator_value=0.1, eps=0) — TF's
Adagrad rule, which the recflow side uses — stepping only the touched rows.
Tables start at 0.01.

Modes:
  per_field  26 EmbeddingBag modules (as a model is usually written)
  fused      one EmbeddingBag of fields * rows rows, ids offset by
             field * rows (TorchRec's layout: one kernel for all fields)

The ids file is bench_embedding --case=gen's: int64 [S, fields, batch].
Steps cycle over the S stored batches; the process always runs
warmup + samples * iters steps, and --dump writes the final rows of the
probe ids (the distinct ids of batch 0 of fields 0 and fields-1, first 256
each, in first-occurrence order) as raw float32.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from session_overhead import gen  # noqa: E402  (the shared input generator)

DIM = 16
INIT = 0.01
LR = 0.05
ACC0 = 0.1
PROBE = 256


def probe_ids(batch0):
    seen, out = set(), []
    for i in batch0.tolist():
        if i not in seen:
            seen.add(i)
            out.append(i)
            if len(out) == PROBE:
                break
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ids", required=True)
    p.add_argument("--mode", default="per_field", choices=("per_field", "fused"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--fields", type=int, default=26)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--rows", type=int, default=1000000)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--dump", default="")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    F, B, V = a.fields, a.batch, a.rows
    raw = np.fromfile(a.ids, dtype=np.int64)
    if raw.size % (F * B) != 0:
        sys.exit("%s: %d ids is not a multiple of fields * batch" % (a.ids, raw.size))
    ids = torch.from_numpy(raw.reshape(-1, F, B).copy())
    S = ids.shape[0]
    grads = [torch.from_numpy(gen(100 + f, B * DIM).reshape(B, DIM) * np.float32(0.01))
             for f in range(F)]
    offsets = torch.arange(B, dtype=torch.int64)

    if a.mode == "per_field":
        bags = [torch.nn.EmbeddingBag(V, DIM, mode="sum", sparse=True) for _ in range(F)]
        for m in bags:
            torch.nn.init.constant_(m.weight, INIT)
        params = [m.weight for m in bags]
        batches = [[ids[s, f].contiguous() for f in range(F)] for s in range(S)]

        def forward(s):
            loss = None
            for f in range(F):
                t = (bags[f](batches[s][f], offsets) * grads[f]).sum()
                loss = t if loss is None else loss + t
            return loss
    else:
        bag = torch.nn.EmbeddingBag(F * V, DIM, mode="sum", sparse=True)
        torch.nn.init.constant_(bag.weight, INIT)
        params = [bag.weight]
        shift = (torch.arange(F, dtype=torch.int64) * V).reshape(F, 1)
        flat = [(ids[s] + shift).reshape(-1).contiguous() for s in range(S)]
        foffsets = torch.arange(F * B, dtype=torch.int64)
        g_all = torch.stack(grads)  # [F, B, DIM]

        def forward(s):
            out = bag(flat[s], foffsets).reshape(F, B, DIM)
            return (out * g_all).sum()

    opt = torch.optim.Adagrad(params, lr=LR, initial_accumulator_value=ACC0, eps=0.0)

    def step(s):
        opt.zero_grad(set_to_none=True)
        loss = forward(s % S)
        loss.backward()
        opt.step()

    s = 0
    for _ in range(a.warmup):
        step(s)
        s += 1
    samples = []
    for _ in range(a.samples):
        t0 = time.perf_counter()
        for _ in range(a.iters):
            step(s)
            s += 1
        samples.append((time.perf_counter() - t0) * 1e6 / a.iters)
    print("info torch=%s threads=%d mode=%s" % (torch.__version__, a.threads, a.mode))
    print("mode=%s median_us=%.1f min_us=%.1f samples_us=%s" % (
        a.mode, statistics.median(samples), min(samples),
        ",".join("%.1f" % x for x in samples)))
    if a.dump:
        rows = []
        with torch.no_grad():
            for f in (0, F - 1):
                pid = torch.tensor(probe_ids(ids[0, f]), dtype=torch.int64)
                if a.mode == "per_field":
                    rows.append(bags[f].weight[pid].numpy())
                else:
                    rows.append(bag.weight[pid + f * V].numpy())
        np.concatenate([r.reshape(-1) for r in rows]).astype(np.float32).tofile(a.dump)


if __name__ == "__main__":
    main()
