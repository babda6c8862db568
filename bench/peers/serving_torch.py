#!/usr/bin/python3
"""TorchScript peer of `bench/run serving` (see bench/README.md, "serving").

  /usr/bin/python3 bench/peers/serving_torch.py --weights=FILE [--port=0]
      [--threads=2] [--embedding_dim=16 --vocabulary_size=100000
       --hidden_units=256,128]

The zoo's DeepFM as bench/peers/train_e2e_torch.py defines it (its build()),
loaded with the weights of recflow's export (bench_serving --case=dump writes
them from the export's variables/ bundle in train_e2e's weights format), in
both of its embedding layouts (per_field: one EmbeddingBag per field; fused:
one bag over all fields, the request converted by train_e2e's make_batches),
each compiled with torch.jit.trace + torch.jit.freeze. At startup both are
timed (request conversion + forward, median of alternating calls) at
1, 8, 64 and 256 rows, and a request
is served by the faster one for its size (--layout forces one). Served by a stdlib
http.server.ThreadingHTTPServer (HTTP/1.1 keep-alive, TCP_NODELAY, one
thread per connection) speaking TF Serving's REST predict API in the
columnar form recflow's export takes:

  POST /v1/models/NAME:predict
  {"inputs": {"dense": [[13 floats] x B], "C1/ids": [...],
              "C1/row_splits": [B+1], ..., "C26/..."}}
  -> {"outputs": {"logits": [B], "probabilities": [B]}}

(json.loads / json.dumps from the stdlib; the forward pass under
torch.inference_mode; torch.set_num_threads(T), set_num_interop_threads(T)).
Row-format ("instances") requests are answered 400. Prints
`info ...` and then `listening port=P` once it accepts connections.
"""

import argparse
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_e2e_torch as e2e  # noqa: E402  (the DeepFM definition and weight loader)

NUM_DENSE = 13
NUM_FIELDS = 26
LAYOUTS = ("per_field", "fused")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--weights", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--embedding_dim", type=int, default=16)
    p.add_argument("--vocabulary_size", type=int, default=100000)
    p.add_argument("--hidden_units", default="256,128")
    p.add_argument("--layout", default="auto", choices=("auto",) + LAYOUTS)
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(args.threads)
    except RuntimeError:
        pass
    # build() wants the training flags too; they are unused here.
    margs = argparse.Namespace(model="deepfm", embedding_dim=args.embedding_dim,
                               vocabulary_size=args.vocabulary_size,
                               hidden_units=args.hidden_units, bottom_units="64", emb_lr=0.1,
                               emb_acc0=0.001, dense_lr=0.001, beta1=0.9, beta2=0.999,
                               epsilon=1e-8)
    weights = e2e.read_weights(args.weights)
    V = args.vocabulary_size

    def compile_layout(mode):
        """The model in one embedding layout, traced and frozen."""
        _, predict, _ = e2e.build(torch, margs, mode, NUM_DENSE, NUM_FIELDS, weights)
        # The nn.Module is a free variable of build()'s predict closure.
        cells = dict(zip(predict.__code__.co_freevars,
                         (c.cell_contents for c in predict.__closure__)))
        model = cells["model"].eval()
        for prm in model.parameters():
            prm.requires_grad_(False)
        d, s = to_inputs(example(4), mode)
        with torch.no_grad():
            traced = torch.jit.freeze(torch.jit.trace(model, (d, s), check_trace=False))
            if not torch.allclose(model(d, s), traced(d, s), atol=1e-6):
                sys.exit("serving_torch: the traced %s model differs from the eager one" % mode)
        return traced

    def to_inputs(inputs, mode):
        dense = np.asarray(inputs["dense"], dtype=np.float32).reshape(-1, NUM_DENSE)
        rows = dense.shape[0]
        fields = []
        for f in range(NUM_FIELDS):
            ids = np.asarray(inputs["C%d/ids" % (f + 1)], dtype=np.int64).reshape(-1)
            splits = np.asarray(inputs["C%d/row_splits" % (f + 1)], dtype=np.int64).reshape(-1)
            if (len(splits) != rows + 1 or splits[0] != 0 or splits[-1] != len(ids)
                    or np.any(np.diff(splits) < 0)):
                raise ValueError("C%d/row_splits %s does not split %d ids into %d rows"
                                 % (f + 1, splits.tolist()[:8], len(ids), rows))
            fields.append((splits, ids))
        if mode == "per_field":
            return torch.from_numpy(dense), tuple(
                (torch.from_numpy(ids), torch.from_numpy(splits[:-1])) for splits, ids in fields)
        # fused: train_e2e_torch's own batch layout code (example-major bags).
        (_, den, sparse), = e2e.make_batches(
            torch, (np.zeros(rows, dtype=np.float32), dense, fields), rows, "fused", V)
        return den, sparse

    def example(rows, seed=0):
        rng = np.random.RandomState(seed)
        ex = {"dense": (4 * rng.rand(rows, NUM_DENSE)).tolist()}
        for f in range(NUM_FIELDS):
            ex["C%d/ids" % (f + 1)] = ((f << 32) | rng.randint(0, 1 << 24, size=rows)).tolist()
            ex["C%d/row_splits" % (f + 1)] = list(range(rows + 1))
        return ex

    models = {m: compile_layout(m) for m in LAYOUTS}
    del weights

    # Both layouts compute the same; per request size (the nearest probed
    # size at or below it) the one that ran the conversion + forward faster
    # at startup serves it.
    probe_sizes = (1, 8, 64, 256)
    best_layout = {}
    probe_text = []
    for rows in probe_sizes:
        ex = example(rows, seed=rows)
        samples = {m: [] for m in LAYOUTS}
        outs = {}
        with torch.inference_mode():
            for m in LAYOUTS:
                for _ in range(3):
                    outs[m] = models[m](*to_inputs(ex, m))
            # Alternating, per-call times, medians (robust to a busy machine).
            for _ in range(25 if rows <= 64 else 12):
                for m in LAYOUTS:
                    t0 = time.perf_counter()
                    models[m](*to_inputs(ex, m))
                    samples[m].append(time.perf_counter() - t0)
        times = {m: sorted(v)[len(v) // 2] for m, v in samples.items()}
        if not torch.allclose(outs["per_field"], outs["fused"], atol=1e-5):
            sys.exit("serving_torch: the layouts disagree")
        best_layout[rows] = min(LAYOUTS, key=lambda m: times[m])
        probe_text.append("%d:%s(%s)" % (rows, best_layout[rows], "/".join(
            "%.3fms" % (1e3 * times[m]) for m in LAYOUTS)))
    if args.layout != "auto":
        best_layout = {rows: args.layout for rows in probe_sizes}

    def layout_for(rows):
        size = max([s for s in probe_sizes if s <= rows] or [1])
        return best_layout[size]

    def score(body):
        req = json.loads(body)
        inputs = req.get("inputs")
        if not isinstance(inputs, dict):
            raise ValueError("expected columnar {\"inputs\": {...}}")
        rows = len(inputs["dense"]) if isinstance(inputs.get("dense"), list) else 0
        mode = layout_for(rows)
        d, s = to_inputs(inputs, mode)
        with torch.inference_mode():
            logits = models[mode](d, s)
            probs = torch.sigmoid(logits)
        return json.dumps({"outputs": {"logits": logits.tolist(),
                                       "probabilities": probs.tolist()}}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def log_message(self, *a):
            pass

        def _reply(self, code, payload):
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self):
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            if not self.path.endswith(":predict"):
                self._reply(404, b'{"error": "only :predict is served"}')
                return
            try:
                out = score(body)
            except (ValueError, KeyError, TypeError, RuntimeError) as e:
                self._reply(400, json.dumps({"error": str(e)}).encode())
                return
            self._reply(200, out)

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        request_queue_size = 128

    srv = Server(("127.0.0.1", args.port), Handler)
    print("info side=torch torch=%s threads=%d interop=%d server=ThreadingHTTPServer "
          "model=torch.jit.trace+freeze layouts=%s OPENBLAS_CORETYPE=%s "
          "OMP_WAIT_POLICY=%s blas_core=%s" % (torch.__version__, torch.get_num_threads(),
                            torch.get_num_interop_threads(), ",".join(probe_text),
                            os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
                            os.environ.get("OMP_WAIT_POLICY", "<unset>"),
                            e2e.blas_info(torch)[1]), flush=True)
    print("listening port=%d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
