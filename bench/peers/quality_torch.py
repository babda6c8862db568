#!/usr/bin/python3
"""PyTorch peer of `bench/run quality` (see bench/README.md, "quality").

  /usr/bin/python3 bench/peers/quality_torch.py --model=deepfm \
      --train='DIR/train-0000[0-8]-of-00010.tsv' --val=DIR/train-00009-of-00010.tsv \
      --test='DIR/test-*.tsv' [--cache=DIR/torch_cache] [--buckets=1048576] \
      [--emb_lr=0.03] [--dense_lr=0.001] [--batch=4096] [--epochs=1] [--seed=1] \
      [--threads=2] [--shuffle] [--dense_in_fm] [--emb_init=default|rows|dim|X] \
      [--missing=row|zero] [--omp_wait_policy=passive] [--max_steps=N]

CTR models written from their papers in plain PyTorch, trained on
Criteo-format TSV files with this script's own loader (nothing of recflow's:
not its parser, tensors or weights), then scored on a validation and a test
split. It trains once and prints key=value lines:

  info torch=... threads=T interop=T blas=... blas_core=... OPENBLAS_CORETYPE=... ...
  data train_rows=N val_rows=N test_rows=N load_seconds=S parsed_files=K cached_files=K
  model name=deepfm parameters=N embedding_rows=R emb_init=... dense_init=...
  train rows=N steps=N seconds=S examples_per_sec=V first_loss=L last10_loss=L
  val auc=A logloss=L rows=N seconds=S
  test auc=A logloss=L rows=N seconds=S

Data (per line `label \\t I1..I13 \\t C1..C26`):
- dense: x -> log(1 + max(x, 0)) (computed in float64, stored as float32);
  an empty value -> 0.
- categorical: 1 to 8 hex digits h -> int(h, 16) mod --buckets (default
  2**20); an empty value -> a dedicated "missing" row per field, row index
  `buckets` (so each field's table has buckets + 1 rows). --missing=zero
  instead reads zeros for a missing value and never trains that row (what
  an empty bag does in an EmbeddingBag; an ablation, not the default).
- Files are read with pandas.read_csv (C engine; C columns as str) and the
  hex text is converted with NumPy (no Python loop per value). The parsed
  arrays of each file (labels, dense, raw 32-bit hex values, missing mask)
  are cached as .npy files in --cache, keyed by the file's path, size and
  mtime, so later runs over the same files do not parse them again.
- Rows are used in file order (files in the order given / sorted glob
  order); --shuffle permutes the training rows once with --seed.

Models (dim 16 embeddings; F = 26 fields, n = 13 dense):
- lr:     logit = sum_f w_f[id_f] + Linear(13, 1)(dense). The first-order
          weights w (one scalar per row) start at zero; the Linear's weight
          and bias start at zero too.
- deepfm  (Guo et al. 2017): logit = linear + fm + mlp. linear is lr's
          (zero-initialized first-order weights + Linear(13, 1), also zero);
          fm = 0.5 * sum_k ((sum_i v_ik)^2 - sum_i v_ik^2) over the 26 field
          embeddings v_i (init uniform(-0.01, 0.01)); mlp = MLP over
          concat(dense, v_1..v_26) [429] -> 400 -> 400 -> 400 (ReLU) -> 1.
          --dense_in_fm (the paper's form): each dense feature j is a field
          of its own with a vector u_j (uniform(-0.01, 0.01), a dense
          parameter, so Adam), entering as x_j * u_j: the FM runs over 39
          vectors and the MLP reads those 39 vectors [624] instead of
          concat(dense, v_1..v_26) (the paper's DNN input is every field's
          embedding).
- dlrm    (Naumov et al. 2019, as facebookresearch/dlrm's dlrm_s_pytorch.py):
          z = bottom MLP 13 -> 512 -> 256 -> 16 (ReLU on every layer);
          embeddings uniform(+-sqrt(1/rows)), rows = buckets + 1 (the
          reference's init); dot interaction of (z, v_1..v_26): the 351
          products <u_i, u_j>, i > j (strictly lower triangle of the batched
          Gram matrix, no self pairs); top MLP over concat(z, dots) [367] ->
          512 -> 256 (ReLU) -> 1. Linear layers use the reference's init:
          weight ~ normal(0, sqrt(2 / (fan_in + fan_out))), bias ~
          normal(0, sqrt(1 / fan_out)).
- dcn_v2  (Wang et al. 2021, parallel form): x0 = concat(dense, v_1..v_26)
          [429]; 3 cross layers x_{l+1} = x0 * (W_l x_l + b_l) + x_l with a
          full-rank W_l [429, 429]; a deep MLP 429 -> 400 -> 400 (ReLU) over
          x0 in parallel; logit = Linear(429 + 400, 1)(concat(x_3, deep)).
          Embeddings uniform(+-sqrt(1/rows)), rows = buckets + 1: the DLRM
          reference's init, and TorchRec's default of the torch 1.13 era
          (EmbeddingBagConfig's weight_init_max = sqrt(1 / num_embeddings),
          which its DLRM/DCN example uses; newer TorchRec releases use
          sqrt(1 / embedding_dim) = 0.25 instead: --emb_init=dim).
- deepfm, dcn_v2 and lr's Linear layers (other than the zero-initialized
  first-order ones) keep PyTorch's default nn.Linear init
  (kaiming_uniform(a=sqrt(5)) weights, uniform(+-1/sqrt(fan_in)) biases).
- --emb_init overrides the embedding init of deepfm/dlrm/dcn_v2: `rows`
  (+-sqrt(1/(buckets+1))), `dim` (+-sqrt(1/16)) or a number X (+-X).

Training: the 26 fields' tables are one nn.Embedding(26 * (buckets + 1),
width, sparse=True) with a per-field row offset (one lookup and one sparse
update instead of 26; Adagrad is elementwise, so this is exactly 26
separate tables); lr's first-order weights are that table at width 1, and
deepfm's are its last column (width 16 + 1, the column starting at zero),
the same elementwise update as a second table, in one sparse step.
Embedding tables: torch.optim.Adagrad(lr=--emb_lr) with
PyTorch's defaults (initial_accumulator_value=0, eps=1e-10, no decay);
every other parameter: torch.optim.Adam(lr=--dense_lr) with its defaults
(betas (0.9, 0.999), eps 1e-8; foreach=True, which changes only speed).
Loss BCEWithLogitsLoss (mean). Batch --batch (4096), --epochs (1) passes,
torch.manual_seed(--seed), torch.set_num_threads(--threads) and
set_num_interop_threads(--threads). The timed part is the training loop
(zero_grad, forward, backward, both optimizer steps) over batches sliced
from tensors built before the clock starts.

Metrics: AUC exact (rank-based, ties get their average rank), logloss the
mean BCE of the logits (float64).
"""

import argparse
import ctypes
import glob
import hashlib
import math
import os
import sys
import time

import numpy as np

NUM_DENSE = 13
NUM_SPARSE = 26
CACHE_VERSION = "quality-v1"


# --- data ----------------------------------------------------------------------

def expand_files(spec):
    """A comma-separated list of paths or globs -> paths (each glob sorted)."""
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if any(ch in part for ch in "*?["):
            hits = sorted(glob.glob(part))
            if not hits:
                raise SystemExit("quality_torch: no file matches %s" % part)
            out.extend(hits)
        else:
            if not os.path.exists(part):
                raise SystemExit("quality_torch: no such file %s" % part)
            out.append(part)
    return out


def hex_lut():
    lut = np.full(256, 255, dtype=np.uint8)
    for i, ch in enumerate(b"0123456789abcdef"):
        lut[ch] = i
    for i, ch in enumerate(b"ABCDEF"):
        lut[ch] = 10 + i
    return lut


HEX_LUT = hex_lut()


def parse_hex_column(values, path, name):
    """Object array of str (NaN or '' when missing) -> (uint32 values, bool missing)."""
    n = len(values)
    # str -> fixed 9-byte strings: a 9th byte catches values longer than 8 digits.
    raw = np.asarray(values, dtype="S9")
    b = raw.view(np.uint8).reshape(n, 9)
    if b[:, 8].any():
        bad = int(np.flatnonzero(b[:, 8])[0])
        raise SystemExit("quality_torch: %s: %s on data row %d has more than 8 hex digits"
                         % (path, name, bad + 1))
    present = b != 0
    nib = HEX_LUT[b]
    if np.any(present & (nib == 255)):
        bad = int(np.flatnonzero((present & (nib == 255)).any(axis=1))[0])
        raise SystemExit("quality_torch: %s: %s on data row %d is not hex: %r"
                         % (path, name, bad + 1, raw[bad]))
    v = np.zeros(n, dtype=np.uint64)
    for k in range(8):
        # Horner over the digits that are there (values of 1 to 8 digits).
        v = np.where(present[:, k], v * np.uint64(16) + nib[:, k].astype(np.uint64), v)
    return v.astype(np.uint32), ~present[:, 0]


def parse_tsv(path):
    import csv
    import pandas as pd
    dense_names = ["I%d" % (j + 1) for j in range(NUM_DENSE)]
    sparse_names = ["C%d" % (j + 1) for j in range(NUM_SPARSE)]
    dtypes = {"label": np.float32}
    dtypes.update({c: np.float64 for c in dense_names})
    dtypes.update({c: str for c in sparse_names})
    df = pd.read_csv(path, sep="\t", header=None, names=["label"] + dense_names + sparse_names,
                     dtype=dtypes, engine="c", quoting=csv.QUOTE_NONE, keep_default_na=False,
                     na_values=[""], na_filter=True)
    labels = df["label"].to_numpy(dtype=np.float32)
    x = df[dense_names].to_numpy(dtype=np.float64)
    missing = np.isnan(x)
    x = np.log1p(np.maximum(np.where(missing, 0.0, x), 0.0))
    x[missing] = 0.0
    dense = x.astype(np.float32)
    n = len(df)
    hexv = np.empty((n, NUM_SPARSE), dtype=np.uint32)
    miss = np.empty((n, NUM_SPARSE), dtype=bool)
    for j, c in enumerate(sparse_names):
        col = df[c].to_numpy(dtype=object)
        col[pd.isna(col)] = ""
        hexv[:, j], miss[:, j] = parse_hex_column(col, path, c)
    return labels, dense, hexv, miss


def cache_prefix(cache_dir, path):
    st = os.stat(path)
    key = "%s|%s|%d|%d" % (CACHE_VERSION, os.path.abspath(path), st.st_size, st.st_mtime_ns)
    h = hashlib.sha1(key.encode()).hexdigest()[:16]
    return os.path.join(cache_dir, "%s.%s" % (os.path.basename(path), h))


CACHE_PARTS = ("labels", "dense", "hex", "missing")


def load_file(path, cache_dir, stats):
    """(labels, dense, hex, missing) of one TSV file, from the cache when there."""
    prefix = cache_prefix(cache_dir, path) if cache_dir else None
    if prefix and all(os.path.exists("%s.%s.npy" % (prefix, p)) for p in CACHE_PARTS):
        stats["cached"] += 1
        return tuple(np.load("%s.%s.npy" % (prefix, p)) for p in CACHE_PARTS)
    arrays = parse_tsv(path)
    stats["parsed"] += 1
    if prefix:
        os.makedirs(cache_dir, exist_ok=True)
        for part, arr in zip(CACHE_PARTS, arrays):
            final = "%s.%s.npy" % (prefix, part)
            tmp = "%s.tmp%d.npy" % (final[:-4], os.getpid())
            np.save(tmp, arr)
            os.replace(tmp, final)
    return arrays


def load_split(files, cache_dir, buckets, stats):
    """Concatenated (labels f32 [N], dense f32 [N, 13], row indices i64 [N, 26])
    where row index = field * (buckets + 1) + (hex mod buckets, or buckets if missing)."""
    parts = [load_file(p, cache_dir, stats) for p in files]
    labels = np.concatenate([p[0] for p in parts])
    dense = np.concatenate([p[1] for p in parts])
    hexv = np.concatenate([p[2] for p in parts])
    miss = np.concatenate([p[3] for p in parts])
    local = np.where(miss, np.int64(buckets), hexv.astype(np.int64) % np.int64(buckets))
    offsets = np.arange(NUM_SPARSE, dtype=np.int64) * np.int64(buckets + 1)
    return labels, dense, local + offsets[None, :], miss


# --- metrics -------------------------------------------------------------------

def auc_exact(labels, scores):
    """Rank-based AUC (Mann-Whitney U), tied scores get their average rank."""
    labels = np.asarray(labels).astype(np.float64).ravel()
    scores = np.asarray(scores).astype(np.float64).ravel()
    pos = float(labels.sum())
    neg = float(len(labels) - pos)
    if pos == 0 or neg == 0:
        return 0.5
    order = np.argsort(scores, kind="mergesort")
    s = scores[order]
    first = np.r_[True, s[1:] != s[:-1]]
    group = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    counts = np.diff(np.r_[starts, len(s)])
    avg_rank = starts + (counts + 1) / 2.0  # 1-based average rank of each tie group
    ranks = avg_rank[group]
    rank_sum_pos = float(np.sum(ranks * labels[order]))
    return (rank_sum_pos - pos * (pos + 1) / 2.0) / (pos * neg)


def logloss_from_logits(labels, logits):
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    # log(1 + exp(-|z|)) + max(z, 0) - y z  ==  BCE(sigmoid(z), y)
    return float(np.mean(np.log1p(np.exp(-np.abs(z))) + np.maximum(z, 0) - y * z))


# --- environment ---------------------------------------------------------------

def blas_description(torch):
    cfg = torch.__config__.show()
    info = "?"
    for tok in cfg.replace(",", " ").split():
        if tok.startswith("BLAS_INFO="):
            info = tok.split("=", 1)[1]
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if "blas" in os.path.basename(path).lower() and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    core = "?"
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
            fn = lib.openblas_get_corename
            fn.restype = ctypes.c_char_p
            core = fn().decode()
            break
        except (OSError, AttributeError):
            continue
    return info, ",".join(os.path.realpath(p) for p in libs) or "none", core


# --- models --------------------------------------------------------------------

def build_model(torch, args, rows_per_field):
    nn = torch.nn
    D = args.dim
    F, n = NUM_SPARSE, NUM_DENSE
    total_rows = F * rows_per_field

    def uniform_table(dim, bound):
        t = nn.Embedding(total_rows, dim, sparse=True)
        with torch.no_grad():
            t.weight.uniform_(-bound, bound)
        return t

    def zero_table(dim):
        t = nn.Embedding(total_rows, dim, sparse=True)
        with torch.no_grad():
            t.weight.zero_()
        return t

    def emb_bound(default):
        if args.emb_init == "default":
            return default
        if args.emb_init == "rows":
            return math.sqrt(1.0 / rows_per_field)
        if args.emb_init == "dim":
            return math.sqrt(1.0 / D)
        return float(args.emb_init)

    def mlp(sizes, init=None):
        layers = []
        for i in range(len(sizes) - 1):
            lin = nn.Linear(sizes[i], sizes[i + 1])
            if init:
                init(lin)
            layers += [lin, nn.ReLU()]
        return layers

    def dlrm_init(lin):
        # facebookresearch/dlrm create_mlp: W ~ N(0, sqrt(2/(m+n))), b ~ N(0, sqrt(1/m)).
        m, k = lin.out_features, lin.in_features
        with torch.no_grad():
            lin.weight.normal_(0.0, math.sqrt(2.0 / (m + k)))
            lin.bias.normal_(0.0, math.sqrt(1.0 / m))

    missing_zero = args.missing == "zero"
    missing_rows = None
    if missing_zero:
        missing_rows = torch.arange(F, dtype=torch.int64) * rows_per_field + (rows_per_field - 1)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.kind = args.model
            # One table for all fields; deepfm's first-order weight is its
            # last column (width D + 1), lr's table is only that column.
            self.first_order = self.kind in ("lr", "deepfm")
            if self.first_order:
                self.dense_linear = nn.Linear(n, 1)
                with torch.no_grad():
                    self.dense_linear.weight.zero_()
                    self.dense_linear.bias.zero_()
            if self.kind == "lr":
                self.bound = 0.0
                self.table = zero_table(1)
                self.dense_init = "zeros"
            elif self.kind == "deepfm":
                self.bound = emb_bound(0.01)
                self.table = uniform_table(D + 1, self.bound)
                with torch.no_grad():
                    self.table.weight[:, D].zero_()
                self.dense_in_fm = args.dense_in_fm
                if self.dense_in_fm:
                    self.dense_vectors = nn.Parameter(torch.empty(n, D).uniform_(-0.01, 0.01))
                width = F * D + (n * D if self.dense_in_fm else n)
                self.mlp = nn.Sequential(*mlp([width, 400, 400, 400]), nn.Linear(400, 1))
                self.dense_init = "pytorch default (kaiming_uniform a=sqrt(5))"
            elif self.kind == "dlrm":
                self.bound = emb_bound(math.sqrt(1.0 / rows_per_field))
                self.table = uniform_table(D, self.bound)
                self.bottom = nn.Sequential(*mlp([n, 512, 256, D], dlrm_init))
                nv = F + 1
                li, lj = torch.tril_indices(nv, nv, offset=-1)
                self.register_buffer("li", li, persistent=False)
                self.register_buffer("lj", lj, persistent=False)
                top_out = nn.Linear(256, 1)
                dlrm_init(top_out)
                self.top = nn.Sequential(*mlp([D + nv * (nv - 1) // 2, 512, 256], dlrm_init),
                                         top_out)
                self.dense_init = "dlrm reference (W~N(0,sqrt(2/(in+out))), b~N(0,sqrt(1/out)))"
            elif self.kind == "dcn_v2":
                self.bound = emb_bound(math.sqrt(1.0 / rows_per_field))
                self.table = uniform_table(D, self.bound)
                w = n + F * D
                self.cross = nn.ModuleList([nn.Linear(w, w) for _ in range(args.cross_layers)])
                self.deep = nn.Sequential(*mlp([w, 400, 400]))
                self.out = nn.Linear(w + 400, 1)
                self.dense_init = "pytorch default (kaiming_uniform a=sqrt(5))"
            else:
                raise SystemExit("quality_torch: unknown --model %s" % self.kind)

        def forward(self, dense, idx):
            B = dense.shape[0]
            v = self.table(idx)  # [B, F, width]
            if missing_zero:
                v = v.masked_fill((idx == missing_rows[None, :]).unsqueeze(-1), 0.0)
            logit = None
            if self.first_order:
                logit = v[:, :, -1].sum(dim=1) + self.dense_linear(dense).view(B)
            if self.kind == "lr":
                return logit
            e = v[:, :, :D]  # [B, F, D]
            if self.kind == "deepfm":
                if self.dense_in_fm:
                    u = torch.cat([e, dense.unsqueeze(-1) * self.dense_vectors.unsqueeze(0)], 1)
                    deep_in = u.reshape(B, -1)  # the paper's DNN input: every field's vector
                else:
                    u = e
                    deep_in = torch.cat([dense, e.reshape(B, -1)], 1)
                s = u.sum(dim=1)
                fm = 0.5 * (s * s - (u * u).sum(dim=1)).sum(dim=1)
                return logit + fm + self.mlp(deep_in).view(B)
            if self.kind == "dlrm":
                z = self.bottom(dense)  # [B, D]
                t = torch.cat([z.unsqueeze(1), e], 1)  # [B, F + 1, D]
                gram = torch.bmm(t, t.transpose(1, 2))
                dots = gram[:, self.li, self.lj]
                return self.top(torch.cat([z, dots], 1)).view(B)
            # dcn_v2
            x0 = torch.cat([dense, e.reshape(B, -1)], 1)
            x = x0
            for layer in self.cross:
                x = x0 * layer(x) + x
            return self.out(torch.cat([x, self.deep(x0)], 1)).view(B)

    return Model()


# --- main ----------------------------------------------------------------------

def main():
    p = argparse.ArgumentParser(description="PyTorch CTR models from the papers, trained on "
                                "Criteo-format TSV (bench/run quality's peer)")
    p.add_argument("--model", required=True, choices=["lr", "deepfm", "dlrm", "dcn_v2"])
    p.add_argument("--train", required=True, help="files: comma-separated paths or globs")
    p.add_argument("--val", default="", help="validation files (optional)")
    p.add_argument("--test", default="", help="test files (optional)")
    p.add_argument("--cache", default="", help="directory for the parsed .npy arrays")
    p.add_argument("--buckets", type=int, default=1 << 20)
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--cross_layers", type=int, default=3)
    p.add_argument("--emb_lr", type=float, default=0.03)
    p.add_argument("--dense_lr", type=float, default=0.001)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--shuffle", action="store_true", help="permute the training rows once")
    p.add_argument("--dense_in_fm", action="store_true",
                   help="deepfm: dense features enter the FM as x_j * u_j (paper form)")
    p.add_argument("--emb_init", default="default",
                   help="embedding init bound: default (per model), rows, dim or a number")
    p.add_argument("--missing", default="row", choices=["row", "zero"],
                   help="an empty categorical: its field's own trained row, or zeros")
    p.add_argument("--max_steps", type=int, default=0, help="stop after N steps (0: all)")
    p.add_argument("--omp_wait_policy", default="",
                   help="set OMP_WAIT_POLICY (e.g. passive) before torch loads")
    args = p.parse_args()
    if args.omp_wait_policy:
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy.upper()
    if args.buckets < 1 or args.batch < 1 or args.epochs < 1 or args.threads < 1:
        raise SystemExit("quality_torch: --buckets, --batch, --epochs, --threads must be >= 1")

    import torch
    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    torch.manual_seed(args.seed)
    info, libs, core = blas_description(torch)
    print("info torch=%s threads=%d interop=%d blas=%s blas_libs=%s blas_core=%s "
          "OPENBLAS_CORETYPE=%s OMP_NUM_THREADS=%s OMP_WAIT_POLICY=%s"
          % (torch.__version__, torch.get_num_threads(), torch.get_num_interop_threads(), info,
             libs, core, os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
             os.environ.get("OMP_NUM_THREADS", "<unset>"),
             os.environ.get("OMP_WAIT_POLICY", "<unset>")), flush=True)

    # Data.
    t0 = time.time()
    stats = {"parsed": 0, "cached": 0}
    splits = {}
    for name, spec in (("train", args.train), ("val", args.val), ("test", args.test)):
        if spec:
            splits[name] = load_split(expand_files(spec), args.cache, args.buckets, stats)
    load_s = time.time() - t0
    print("data train_rows=%d val_rows=%d test_rows=%d load_seconds=%.1f parsed_files=%d "
          "cached_files=%d" % (len(splits["train"][0]),
                               len(splits["val"][0]) if "val" in splits else 0,
                               len(splits["test"][0]) if "test" in splits else 0, load_s,
                               stats["parsed"], stats["cached"]), flush=True)

    rows_per_field = args.buckets + 1
    model = build_model(torch, args, rows_per_field)
    tables = [model.table.weight]
    table_ids = {id(t) for t in tables}
    dense_params = [q for q in model.parameters() if id(q) not in table_ids]
    opt_emb = torch.optim.Adagrad(tables, lr=args.emb_lr)
    opt_dense = torch.optim.Adam(dense_params, lr=args.dense_lr, foreach=True)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    nparams = sum(q.numel() for q in model.parameters())
    print("model name=%s parameters=%d embedding_rows=%d dim=%d emb_init=uniform(+-%.6g) "
          "dense_init=%s missing=%s dense_in_fm=%d emb_lr=%g dense_lr=%g batch=%d epochs=%d "
          "seed=%d shuffle=%d" % (args.model, nparams, NUM_SPARSE * rows_per_field, args.dim,
                                  model.bound, model.dense_init.replace(" ", "_"), args.missing,
                                  int(args.dense_in_fm), args.emb_lr, args.dense_lr, args.batch,
                                  args.epochs, args.seed, int(args.shuffle)), flush=True)

    labels, dense, idx, _ = splits["train"]
    if args.shuffle:
        perm = np.random.RandomState(args.seed).permutation(len(labels))
        labels, dense, idx = labels[perm], dense[perm], idx[perm]
    y_t = torch.from_numpy(np.ascontiguousarray(labels))
    d_t = torch.from_numpy(np.ascontiguousarray(dense))
    i_t = torch.from_numpy(np.ascontiguousarray(idx))
    N = len(labels)
    steps_per_epoch = (N + args.batch - 1) // args.batch

    model.train()
    losses = []
    steps = 0
    examples = 0
    t0 = time.time()
    done = False
    for _ in range(args.epochs):
        for s in range(steps_per_epoch):
            lo, hi = s * args.batch, min(N, (s + 1) * args.batch)
            opt_emb.zero_grad(set_to_none=True)
            opt_dense.zero_grad(set_to_none=True)
            loss = loss_fn(model(d_t[lo:hi], i_t[lo:hi]), y_t[lo:hi])
            loss.backward()
            opt_emb.step()
            opt_dense.step()
            losses.append(float(loss.item()))
            steps += 1
            examples += hi - lo
            if not math.isfinite(losses[-1]):
                raise SystemExit("quality_torch: loss is %s at step %d" % (losses[-1], steps))
            if args.max_steps and steps >= args.max_steps:
                done = True
                break
        if done:
            break
    train_s = time.time() - t0
    print("train rows=%d steps=%d seconds=%.2f examples_per_sec=%.0f first_loss=%.5f "
          "last10_loss=%.5f" % (examples, steps, train_s, examples / train_s, losses[0],
                                float(np.mean(losses[-10:]))), flush=True)

    model.eval()
    for name in ("val", "test"):
        if name not in splits:
            continue
        lab, den, ix, _ = splits[name]
        t0 = time.time()
        out = []
        with torch.no_grad():
            dt, it = torch.from_numpy(den), torch.from_numpy(ix)
            for lo in range(0, len(lab), 65536):
                out.append(model(dt[lo:lo + 65536], it[lo:lo + 65536]).numpy().astype(np.float64))
        logits = np.concatenate(out)
        print("%s auc=%.6f logloss=%.6f rows=%d seconds=%.2f"
              % (name, auc_exact(lab, logits), logloss_from_logits(lab, logits), len(lab),
                 time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
