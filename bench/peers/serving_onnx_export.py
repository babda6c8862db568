#!/usr/bin/python3
"""ONNX export of the serving DeepFM for the ONNX Runtime peer of `bench/run
serving` (bench/peers/serving_ort.js; see bench/README.md, "serving").

  /usr/bin/python3 bench/peers/serving_onnx_export.py --weights=FILE --out=MODEL.onnx
      [--embedding_dim=16 --vocabulary_size=100000 --hidden_units=256,128]

The model is train_e2e_torch.py's DeepFM (its build(), fused layout: one
table of 26 * V rows whose 17th column is the first-order weight) loaded
with the export's weights (bench_serving --case=dump), traced by
torch.onnx.export with one change: the embedding bags become a single
Gather, since the ONNX model takes exactly one id per field and row:

  inputs   dense [B, 13] float32, ids [B, 26] int64 (raw ids, as in the
           request: (field << 32) | value)
  outputs  logits [B], probabilities [B] (sigmoid of logits)

B is a dynamic axis. Bucketing is the model's own torch.remainder(ids, V)
(floor mod; exported as ONNX Mod fmod=0, which has the same sign rule),
plus field * V for the fused table, all inside the graph.

With --int8, also MODEL_int8.onnx (beside MODEL.onnx): the same graph with
the MLP's hidden layers (Gemms whose weights have >= 128 rows and columns)
dynamically quantized, in the pattern ONNX Runtime's own quantize_dynamic
emits and its optimizer fuses (MatMulIntegerToFloat / DynamicQuantizeMatMul):
DynamicQuantizeLinear of the activations (uint8, per tensor, per call) ->
MatMulInteger with the weights as int8 per output column (symmetric, 7-bit
as quantize_dynamic's reduce_range: AVX2's u8 x s8 products saturate at
8 bits) -> Cast -> Mul by the two scales -> Add bias. Its check file
carries a tolerance (the serving peer is no longer expected to match
float32 to 1e-5).

Checks before writing: the gather model against build()'s bag model (eager,
through train_e2e_torch.make_batches, as serving_torch.py's fused layout)
on random rows, including negative and > 2^32 ids. Writes MODEL.onnx and
MODEL.onnx.check.json ({"dense", "ids", "logits", "probabilities"} of those
rows, torch's answers), which serving_ort.js runs through its own request
parser and the ONNX Runtime session at startup and refuses to serve when
they differ by more than 1e-5 (onnxruntime is not importable by Debian's
Python, so the ONNX side is checked there). Prints `export ...`.
"""

import argparse
import json
import os
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_e2e_torch as e2e  # noqa: E402  (the DeepFM definition and weight loader)

NUM_DENSE = 13
NUM_FIELDS = 26
CHECK_ROWS = 16
OPSET = 13
# The int8 model's check: max abs difference from torch's float32 logits and
# probabilities that serving_ort.js accepts at startup.
INT8_TOLERANCE = 0.05


def check_rows(rows, seed=7):
    """Random requests: dense in [0, 4), ids (field << 32) | value with a few
    negative and large ones (all within +-2^53, exact as JSON numbers)."""
    rng = np.random.RandomState(seed)
    dense = (4 * rng.rand(rows, NUM_DENSE)).astype(np.float32)
    ids = np.empty((rows, NUM_FIELDS), dtype=np.int64)
    for f in range(NUM_FIELDS):
        ids[:, f] = (f << 32) | rng.randint(0, 1 << 24, size=rows)
    ids[0, :4] = [-1, -100001, -(1 << 40) - 3, (1 << 52) + 12345]
    ids[1, 5] = 0
    return dense, ids


def quantize_int8(src, dst, min_dim=128):
    """Writes `src` with its large Gemms (transB=1, constant weights) as
    dynamically quantized int8 matmuls; returns the names of the Gemms."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    m = onnx.load(src)
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    nodes, done, drop = [], [], set()
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        w = inits.get(n.input[1]) if n.op_type == "Gemm" and len(n.input) == 3 else None
        if (w is None or n.input[2] not in inits or attrs.get("transB", 0) != 1
                or attrs.get("transA", 0) != 0 or attrs.get("alpha", 1.0) != 1.0
                or attrs.get("beta", 1.0) != 1.0 or min(w.dims) < min_dim):
            nodes.append(n)
            continue
        wt = numpy_helper.to_array(w).T.astype(np.float32)  # [K, N]
        scale = np.abs(wt).max(axis=0) / 63.0
        scale[scale == 0] = 1.0
        wq = np.clip(np.rint(wt / scale), -63, 63).astype(np.int8)
        p = n.name.strip("/").replace("/", "_") or n.output[0]
        g.initializer.extend([
            numpy_helper.from_array(wq, p + "_Wq"),
            numpy_helper.from_array(np.zeros(wq.shape[1], dtype=np.int8), p + "_Wzp"),
            numpy_helper.from_array(scale.astype(np.float32), p + "_Ws")])
        x = n.input[0]
        nodes += [
            helper.make_node("DynamicQuantizeLinear", [x], [p + "_Xq", p + "_Xs", p + "_Xzp"],
                             name=p + "_quant"),
            helper.make_node("MatMulInteger", [p + "_Xq", p + "_Wq", p + "_Xzp", p + "_Wzp"],
                             [p + "_Yi"], name=p + "_matmul"),
            helper.make_node("Cast", [p + "_Yi"], [p + "_Yf"], to=TensorProto.FLOAT,
                             name=p + "_cast"),
            helper.make_node("Mul", [p + "_Xs", p + "_Ws"], [p + "_S"], name=p + "_scale"),
            helper.make_node("Mul", [p + "_Yf", p + "_S"], [p + "_Y"], name=p + "_rescale"),
            helper.make_node("Add", [p + "_Y", n.input[2]], [n.output[0]], name=p + "_bias")]
        drop.add(n.input[1])
        done.append("%s[%s]" % (n.name, "x".join(str(d) for d in w.dims)))
    del g.node[:]
    g.node.extend(nodes)
    keep = [i for i in g.initializer if i.name not in drop]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(m)
    onnx.save(m, dst)
    return done


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--embedding_dim", type=int, default=16)
    p.add_argument("--vocabulary_size", type=int, default=100000)
    p.add_argument("--hidden_units", default="256,128")
    p.add_argument("--int8", action="store_true",
                   help="also write MODEL_int8.onnx (MLP dynamically quantized)")
    args = p.parse_args()

    import torch

    t0 = time.perf_counter()
    V, D = args.vocabulary_size, args.embedding_dim
    # build() wants the training flags too; they are unused here.
    margs = argparse.Namespace(model="deepfm", embedding_dim=D, vocabulary_size=V,
                               hidden_units=args.hidden_units, bottom_units="64", emb_lr=0.1,
                               emb_acc0=0.001, dense_lr=0.001, beta1=0.9, beta2=0.999,
                               epsilon=1e-8)
    _, predict, _ = e2e.build(torch, margs, "fused", NUM_DENSE, NUM_FIELDS,
                              e2e.read_weights(args.weights))
    # The nn.Module is a free variable of build()'s predict closure.
    cells = dict(zip(predict.__code__.co_freevars,
                     (c.cell_contents for c in predict.__closure__)))
    model = cells["model"].eval()
    for prm in model.parameters():
        prm.requires_grad_(False)

    dense, ids = check_rows(CHECK_ROWS)
    fields = [(np.arange(CHECK_ROWS + 1, dtype=np.int64), np.ascontiguousarray(ids[:, f]))
              for f in range(NUM_FIELDS)]
    (_, den, sparse), = e2e.make_batches(
        torch, (np.zeros(CHECK_ROWS, dtype=np.float32), dense, fields), CHECK_ROWS, "fused", V)
    with torch.no_grad():
        want = model(den, sparse)

    # One id per bag: a bag's sum is the row itself, so the fused table is
    # read with one Gather. forward() (the DeepFM math) is build()'s own; only
    # its embed() is replaced, on this instance.
    base = torch.arange(NUM_FIELDS, dtype=torch.int64).view(1, NUM_FIELDS) * V

    def embed_gather(self, ids2d, bsz):
        e = torch.nn.functional.embedding(torch.remainder(ids2d, V) + base, self.table.weight)
        return e[:, :, :D], e[:, :, D].sum(1)

    model.embed = types.MethodType(embed_gather, model)

    class Serving(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, dense, ids):
            logits = self.m(dense, ids)
            return logits, torch.sigmoid(logits)

    wrapper = Serving(model).eval()
    dense_t, ids_t = torch.from_numpy(dense), torch.from_numpy(ids)
    with torch.no_grad():
        got, probs = wrapper(dense_t, ids_t)
    diff = float((got - want).abs().max())
    if diff > 1e-5:
        sys.exit("serving_onnx_export: the gather model differs from build()'s bag model by %g"
                 % diff)

    tmp = args.out + ".tmp"
    with torch.no_grad():
        torch.onnx.export(wrapper, (dense_t, ids_t), tmp, input_names=["dense", "ids"],
                          output_names=["logits", "probabilities"],
                          dynamic_axes={"dense": {0: "batch"}, "ids": {0: "batch"},
                                        "logits": {0: "batch"}, "probabilities": {0: "batch"}},
                          opset_version=OPSET, do_constant_folding=True)
    ops = "?"
    try:
        import onnx
        m = onnx.load(tmp)
        onnx.checker.check_model(m)
        ops = ",".join(sorted({n.op_type for n in m.graph.node}))
    except ImportError:
        pass
    check = {"dense": dense.tolist(), "ids": ids.tolist(), "logits": got.tolist(),
             "probabilities": probs.tolist(), "tolerance": 1e-5}
    int8_text = ""
    if args.int8:
        q = os.path.splitext(args.out)[0] + "_int8.onnx"
        layers = quantize_int8(tmp, q + ".tmp")
        with open(q + ".check.json", "w") as f:
            json.dump(dict(check, tolerance=INT8_TOLERANCE), f)
        os.replace(q + ".tmp", q)
        int8_text = " int8=%s int8_layers=%s int8_bytes=%d" % (q, ",".join(layers),
                                                               os.path.getsize(q))
    with open(args.out + ".check.json", "w") as f:
        json.dump(check, f)
    os.replace(tmp, args.out)
    print("export out=%s bytes=%d opset=%d ops=%s torch=%s gather_vs_bags_max_abs_diff=%.3g%s "
          "seconds=%.1f" % (args.out, os.path.getsize(args.out), OPSET, ops, torch.__version__,
                            diff, int8_text, time.perf_counter() - t0), flush=True)


if __name__ == "__main__":
    main()
