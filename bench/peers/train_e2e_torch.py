#!/usr/bin/python3
"""PyTorch peer of bench/train_e2e.cc (see bench/README.md, "train_e2e").

  /usr/bin/python3 bench/peers/train_e2e_torch.py --model=deepfm \
      --train=CACHE --test=CACHE [--threads=2] [--batch=4096] \
      [--mode=auto|fused|per_field] [--init=F] [--pred_out=F] [--max_steps=N] \
      [--embedding_dim=16 --vocabulary_size=100000 --hidden_units=256,128 \
       --bottom_units=64 --emb_lr=0.1 --emb_acc0=0.001 --dense_lr=0.001 \
       --beta1=0.9 --beta2=0.999 --epsilon=1e-8]

The zoo's DeepFM and DLRM (recflow/models/ctr_models.cc, docs/models.md)
written in PyTorch with the same hyperparameters (bench/run passes the ones
the recflow side printed), trained one epoch over the rows of the cache
bench_train_e2e --case=prepare wrote (recflow's parse of the same TSV: hex
ids (field << 32) | value, dense log(1 + max(x, 0)), missing = empty bag),
in the same order, batch 4096, then predicting the test rows.

- Bucketing: id mod vocabulary_size (torch.remainder, floor mod: the zoo's
  FloorMod), inside the timed step.
- Initial weights: with --init, recflow's (bench_train_e2e --init_out), so
  both sides start from the same values; without, drawn as below.
- Embeddings: EmbeddingBag(mode="sum", sparse=True), empty bags read 0;
  initial values truncated normal (stddev 0.05, cut at 2 stddev, as TF's);
  torch.optim.Adagrad(lr, initial_accumulator_value, eps=0): TF's rule
  acc += g^2; w -= lr g / sqrt(acc), stepping only the touched rows.
- Dense layers: Linear (Glorot-uniform kernels, zero biases; fm's dense
  projection truncated normal 0.05), ReLU; torch.optim.Adam(lr, betas,
  eps, foreach=True). Loss BCEWithLogitsLoss (mean).
- deepfm: logit = [sum_f w_f(id) + dense.w + b] + FM pairwise term over
  the 26 field vectors and dense.W_proj + MLP(concat(dense, fields)).
- dlrm: z = MLP_bottom(dense) (bottom_units then dim, ReLU on every layer);
  pairwise dots <v_i, v_j> (i > j) of (z, fields) from one bmm;
  logit = MLP_top(concat(z, dots)) -> Linear(1).

Modes (the embedding layout; the math is the same):
  per_field  one EmbeddingBag per field (26, plus 26 of width 1 for
             deepfm's first-order weights), as a model is usually written
  fused      one EmbeddingBag of 26 * vocabulary_size rows (TorchRec's
             layout: one kernel for all fields); deepfm's first-order
             weight is a 17th column of the same table (Adagrad is
             per-element, so this changes nothing but speed)
  auto       times a few steps of each on the first batches (fresh models,
             thrown away) and trains with the faster

Data loading (the batch slicing and, for fused, the layout of the ids) is
done before the clock starts, as on the recflow side; the timed loop is
one epoch of zero_grad / forward / backward / both optimizers' steps.

Prints (key=value lines like bench_train_e2e):
  info ...      torch, threads, BLAS, env
  mode ...      the probe timings (auto) and the mode kept
  losses values=...
  epoch steps=N examples=N seconds=S examples_per_sec=V first_loss=...
  test rows=N seconds=S auc=A
"""

import argparse
import ctypes
import os
import re
import sys
import time

import numpy as np

MAGIC = b"RFE2E001"


def read_cache(path):
    """(labels [N] f32, dense [N, nd] f32, [(splits [N+1] i64, ids [nnz] i64)] per field)."""
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise ValueError("%s is not a train_e2e cache (bad magic)" % path)
        rows, nd, nf = np.fromfile(f, dtype=np.int64, count=3)
        labels = np.fromfile(f, dtype=np.float32, count=rows)
        dense = np.fromfile(f, dtype=np.float32, count=rows * nd).reshape(rows, nd)
        fields = []
        for _ in range(nf):
            nnz = int(np.fromfile(f, dtype=np.int64, count=1)[0])
            splits = np.fromfile(f, dtype=np.int64, count=rows + 1)
            ids = np.fromfile(f, dtype=np.int64, count=nnz)
            if len(splits) != rows + 1 or len(ids) != nnz or splits[-1] != nnz:
                raise ValueError("%s is truncated or corrupt" % path)
            fields.append((splits, ids))
    if len(labels) != rows or dense.shape[0] != rows:
        raise ValueError("%s is truncated" % path)
    return labels, dense, fields


def read_weights(path):
    """{name: float32 array} from bench_train_e2e --init_out."""
    out = {}
    with open(path, "rb") as f:
        if f.read(8) != b"RFE2EW01":
            raise ValueError("%s is not a train_e2e weights file (bad magic)" % path)
        count = int(np.fromfile(f, dtype=np.int64, count=1)[0])
        for _ in range(count):
            n = int(np.fromfile(f, dtype=np.int64, count=1)[0])
            name = f.read(n).decode()
            rank = int(np.fromfile(f, dtype=np.int64, count=1)[0])
            dims = [int(d) for d in np.fromfile(f, dtype=np.int64, count=rank)]
            size = int(np.prod(dims)) if dims else 1
            a = np.fromfile(f, dtype=np.float32, count=size)
            if len(a) != size:
                raise ValueError("%s is truncated at %s" % (path, name))
            out[name] = a.reshape(dims)
    return out


def auc_exact(labels, preds):
    """Exact ROC AUC (ties count one half) by sorting."""
    labels = np.asarray(labels, dtype=np.float64) > 0.5
    preds = np.asarray(preds, dtype=np.float64)
    order = np.argsort(preds, kind="mergesort")
    p = preds[order]
    y = labels[order]
    # Average ranks over ties.
    bounds = np.flatnonzero(np.diff(p)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(p)]))
    avg = (starts + ends + 1) / 2.0  # 1-based average rank of each tie group
    ranks = np.repeat(avg, ends - starts)
    npos = y.sum()
    nneg = len(y) - npos
    if npos == 0 or nneg == 0:
        return float("nan")
    return float((ranks[y].sum() - npos * (npos + 1) / 2.0) / (npos * nneg))


def logloss(labels, preds, eps=1e-7):
    p = np.clip(np.asarray(preds, dtype=np.float64), eps, 1 - eps)
    y = np.asarray(labels, dtype=np.float64)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def blas_info(torch):
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                path = parts[-1] if len(parts) >= 6 else ""
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


def make_batches(torch, data, batch, mode, vocab):
    """Per batch: (labels, dense, sparse) with sparse in the mode's layout:
    per_field: [(ids, offsets)] per field (raw ids; the step buckets them);
    fused: (ids [nnz] raw, base [nnz] = field * vocab, offsets [B*F]) with
    the bags example-major (bag b * F + f)."""
    labels, dense, fields = data
    n = len(labels)
    nf = len(fields)
    out = []
    for s in range(0, n, batch):
        e = min(n, s + batch)
        b = e - s
        lab = torch.from_numpy(labels[s:e].copy())
        den = torch.from_numpy(dense[s:e].copy())
        if mode == "per_field":
            sp = []
            for splits, ids in fields:
                a, z = splits[s], splits[e]
                sp.append((torch.from_numpy(ids[a:z].copy()),
                           torch.from_numpy(splits[s:e] - a)))
            out.append((lab, den, sp))
            continue
        # fused: lengths [B, F] -> example-major bags.
        lengths = np.stack([splits[s + 1:e + 1] - splits[s:e] for splits, _ in fields], axis=1)
        offsets = np.zeros(b * nf, dtype=np.int64)
        np.cumsum(lengths.reshape(-1)[:-1], out=offsets[1:])
        total = int(lengths.sum())
        ids_out = np.empty(total, dtype=np.int64)
        base_out = np.empty(total, dtype=np.int64)
        for f, (splits, ids) in enumerate(fields):
            seg = ids[splits[s]:splits[e]]
            ln = lengths[:, f]
            # destination of field f's ids, row by row
            starts = offsets.reshape(b, nf)[:, f]
            idx = np.repeat(starts - np.concatenate(([0], np.cumsum(ln)[:-1])), ln) + \
                np.arange(len(seg))
            ids_out[idx] = seg
            base_out[idx] = f * vocab
        out.append((lab, den, (torch.from_numpy(ids_out), torch.from_numpy(base_out),
                               torch.from_numpy(offsets))))
    return out


def load_weights(torch, model, w, mode, deepfm, nf, V, D):
    """Copies recflow's initial weights (names as the zoo's variables) into
    the model, so both sides start from the same values."""
    def lin(module, prefix):
        module.weight.copy_(torch.from_numpy(np.ascontiguousarray(w[prefix + "/kernel"].T)))
        module.bias.copy_(torch.from_numpy(w[prefix + "/bias"]))

    with torch.no_grad():
        for f in range(nf):
            e = torch.from_numpy(w["embedding/C%d" % (f + 1)])
            if mode == "fused":
                model.table.weight[f * V:(f + 1) * V, :D] = e
                if deepfm:
                    model.table.weight[f * V:(f + 1) * V, D:] = torch.from_numpy(
                        w["linear/C%d" % (f + 1)])
            else:
                model.tables[f].weight.copy_(e)
                if deepfm:
                    model.linear_tables[f].weight.copy_(
                        torch.from_numpy(w["linear/C%d" % (f + 1)]))
        if deepfm:
            model.lr_dense.weight.copy_(torch.from_numpy(
                np.ascontiguousarray(w["lr/dense_weights"].T)))
            model.lr_dense.bias.copy_(torch.from_numpy(w["lr/bias"]))
            model.fm_proj.copy_(torch.from_numpy(w["fm/dense_projection"]))
            for l in range(len(model.deep) // 2):
                lin(model.deep[2 * l], "mlp_%d" % l)
            lin(model.deep_logit, "mlp_logit")
        else:
            for l in range(len(model.bottom) // 2):
                lin(model.bottom[2 * l], "bottom_%d" % l)
            for l in range(len(model.top) // 2):
                lin(model.top[2 * l], "top_%d" % l)
            lin(model.top_logit, "top_logit")


def build(torch, args, mode, nd, nf, weights=None):
    nn = torch.nn
    D = args.embedding_dim
    V = args.vocabulary_size
    deepfm = args.model == "deepfm"
    hidden = [int(x) for x in args.hidden_units.split(",") if x]
    bottom = [int(x) for x in args.bottom_units.split(",") if x]

    def trunc(t):
        with torch.no_grad():
            nn.init.trunc_normal_(t, mean=0.0, std=0.05, a=-0.1, b=0.1)
        return t

    def linear(i, o):
        lin = nn.Linear(i, o)
        nn.init.xavier_uniform_(lin.weight)
        nn.init.zeros_(lin.bias)
        return lin

    def mlp(i, units):
        layers = []
        for u in units:
            layers += [linear(i, u), nn.ReLU()]
            i = u
        return nn.Sequential(*layers), i

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            width = D + 1 if (deepfm and mode == "fused") else D
            if mode == "fused":
                self.table = nn.EmbeddingBag(nf * V, width, mode="sum", sparse=True)
                trunc(self.table.weight)
            else:
                self.tables = nn.ModuleList(
                    [nn.EmbeddingBag(V, D, mode="sum", sparse=True) for _ in range(nf)])
                for t in self.tables:
                    trunc(t.weight)
                if deepfm:
                    self.linear_tables = nn.ModuleList(
                        [nn.EmbeddingBag(V, 1, mode="sum", sparse=True) for _ in range(nf)])
                    for t in self.linear_tables:
                        trunc(t.weight)
            if deepfm:
                self.lr_dense = linear(nd, 1)
                self.fm_proj = nn.Parameter(trunc(torch.empty(nd, D)))
                self.deep, w = mlp(nd + nf * D, hidden)
                self.deep_logit = linear(w, 1)
            else:
                self.bottom, _ = mlp(nd, bottom + [D])
                f = nf + 1
                li, lj = [], []
                for i in range(1, f):
                    for j in range(i):
                        li.append(i)
                        lj.append(j)
                self.register_buffer("li", torch.tensor(li, dtype=torch.long))
                self.register_buffer("lj", torch.tensor(lj, dtype=torch.long))
                self.top, w = mlp(D + len(li), hidden)
                self.top_logit = linear(w, 1)

        def embed(self, sparse, bsz):
            """[B, F, D] field vectors and (deepfm) [B] first-order sum."""
            if mode == "fused":
                ids, base, offsets = sparse
                e = self.table(torch.remainder(ids, V) + base, offsets).view(bsz, nf, -1)
                if deepfm:
                    return e[:, :, :D], e[:, :, D].sum(1)
                return e, None
            vecs = [t(torch.remainder(ids, V), off) for t, (ids, off) in zip(self.tables, sparse)]
            lin = None
            if deepfm:
                lin = torch.cat([t(torch.remainder(ids, V), off)
                                 for t, (ids, off) in zip(self.linear_tables, sparse)],
                                1).sum(1)
            return torch.stack(vecs, 1), lin

        def forward(self, dense, sparse):
            bsz = dense.shape[0]
            emb, lin = self.embed(sparse, bsz)
            if deepfm:
                linear_logit = lin + self.lr_dense(dense).view(-1)
                stacked = torch.cat([emb, (dense @ self.fm_proj).unsqueeze(1)], 1)
                s = stacked.sum(1)
                pair = 0.5 * (s.square().sum(1) - stacked.square().sum((1, 2)))
                deep = self.deep_logit(
                    self.deep(torch.cat([dense, emb.reshape(bsz, nf * D)], 1))).view(-1)
                return linear_logit + pair + deep
            z = self.bottom(dense)
            v = torch.cat([z.unsqueeze(1), emb], 1)  # [B, F+1, D]
            gram = torch.bmm(v, v.transpose(1, 2))
            dots = gram[:, self.li, self.lj]
            return self.top_logit(self.top(torch.cat([z, dots], 1))).view(-1)

    model = Model()
    if weights is not None:
        load_weights(torch, model, weights, mode, deepfm, nf, V, D)
    emb_params, dense_params = [], []
    for name, p in model.named_parameters():
        (emb_params if name.startswith(("table", "tables", "linear_tables")) else
         dense_params).append(p)
    emb_opt = torch.optim.Adagrad(emb_params, lr=args.emb_lr,
                                  initial_accumulator_value=args.emb_acc0, eps=0.0)
    dense_opt = torch.optim.Adam(dense_params, lr=args.dense_lr, betas=(args.beta1, args.beta2),
                                 eps=args.epsilon, foreach=True)
    loss_fn = torch.nn.BCEWithLogitsLoss()

    def step(batch):
        lab, den, sp = batch
        emb_opt.zero_grad(set_to_none=True)
        dense_opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(den, sp), lab)
        loss.backward()
        emb_opt.step()
        dense_opt.step()
        return loss

    def predict(batch):
        _, den, sp = batch
        with torch.no_grad():
            return torch.sigmoid(model(den, sp))

    nparams = sum(p.numel() for p in model.parameters())
    return step, predict, nparams


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=("deepfm", "dlrm"), required=True)
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--mode", default="auto", choices=("auto", "fused", "per_field"))
    p.add_argument("--probe_steps", type=int, default=6)
    p.add_argument("--pred_out", default="")
    p.add_argument("--init", default="", help="initial weights (bench_train_e2e --init_out)")
    p.add_argument("--max_steps", type=int, default=0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--embedding_dim", type=int, default=16)
    p.add_argument("--vocabulary_size", type=int, default=100000)
    p.add_argument("--hidden_units", default="256,128")
    p.add_argument("--bottom_units", default="64")
    p.add_argument("--emb_lr", type=float, default=0.1)
    p.add_argument("--emb_acc0", type=float, default=0.001)
    p.add_argument("--dense_lr", type=float, default=0.001)
    p.add_argument("--beta1", type=float, default=0.9)
    p.add_argument("--beta2", type=float, default=0.999)
    p.add_argument("--epsilon", type=float, default=1e-8)
    p.add_argument("--omp_wait_policy", default="",
                   help="set OMP_WAIT_POLICY (active/passive) before torch loads libgomp")
    args = p.parse_args()
    if args.omp_wait_policy:
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()

    import torch  # after argparse, so --help works without torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    libs, core, blas_cfg = blas_info(torch)
    print("info side=pytorch torch=%s threads=%d interop_threads=%d batch=%d blas_info=%s "
          "blas_libs=%s blas_core=%s OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s OMP_WAIT_POLICY=%s"
          % (torch.__version__, torch.get_num_threads(), torch.get_num_interop_threads(),
             args.batch, blas_cfg, ",".join(libs) or "?", core,
             os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
             os.environ.get("OPENBLAS_L2_SIZE", "<unset>"),
             os.environ.get("OMP_WAIT_POLICY", "<unset>")), flush=True)

    t_load = time.perf_counter()
    train = read_cache(args.train)
    test = read_cache(args.test)
    nd, nf = train[1].shape[1], len(train[2])

    mode = args.mode
    if mode == "auto":
        # A few steps of each layout on fresh models; keep the faster.
        probe = {}
        for m in ("per_field", "fused"):
            torch.manual_seed(args.seed)
            step, _, _ = build(torch, args, m, nd, nf)
            sub = (train[0][:args.batch * (args.probe_steps + 2)],
                   train[1][:args.batch * (args.probe_steps + 2)],
                   [(s[:args.batch * (args.probe_steps + 2) + 1], i) for s, i in train[2]])
            bs = make_batches(torch, sub, args.batch, m, args.vocabulary_size)
            step(bs[0])
            step(bs[1])
            t0 = time.perf_counter()
            for b in bs[2:]:
                step(b)
            probe[m] = (time.perf_counter() - t0) / (len(bs) - 2)
        mode = min(probe, key=probe.get)
        print("mode probe %s kept=%s" % (" ".join("%s_ms=%.1f" % (k, v * 1e3)
                                                   for k, v in probe.items()), mode), flush=True)
    batches = make_batches(torch, train, args.batch, mode, args.vocabulary_size)
    test_batches = make_batches(torch, test, args.batch, mode, args.vocabulary_size)
    test_labels = test[0]
    del train, test
    torch.manual_seed(args.seed)
    weights = read_weights(args.init) if args.init else None
    step, predict, nparams = build(torch, args, mode, nd, nf, weights)
    del weights
    print("loaded batches=%d test_batches=%d mode=%s parameters=%d seconds=%.2f"
          % (len(batches), len(test_batches), mode, nparams, time.perf_counter() - t_load),
          flush=True)

    steps = len(batches) if args.max_steps <= 0 else min(args.max_steps, len(batches))
    losses = []
    examples = 0
    first_step = 0.0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    for i in range(steps):
        loss = step(batches[i]).item()
        if i == 0:
            first_step = time.perf_counter() - t0
        if not np.isfinite(loss):
            sys.exit("error: loss at step %d is %r" % (i + 1, loss))
        losses.append(loss)
        examples += batches[i][0].shape[0]
    secs = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    print("losses values=%s" % ",".join("%.7g" % v for v in losses[:5]))
    tail = losses[-10:]
    print("epoch steps=%d examples=%d seconds=%.3f examples_per_sec=%.1f first_loss=%.6f "
          "last_loss=%.6f mean_loss_last10=%.6f cpu_seconds=%.3f first_step_seconds=%.3f mode=%s"
          % (steps, examples, secs, examples / secs, losses[0], losses[-1],
             sum(tail) / len(tail), cpu, first_step, mode), flush=True)

    t1 = time.perf_counter()
    preds = np.concatenate([predict(b).numpy() for b in test_batches]).astype(np.float32)
    print("test rows=%d seconds=%.3f auc=%.6f logloss=%.6f"
          % (len(preds), time.perf_counter() - t1, auc_exact(test_labels, preds),
             logloss(test_labels, preds)), flush=True)
    if args.pred_out:
        preds.tofile(args.pred_out)


if __name__ == "__main__":
    main()
