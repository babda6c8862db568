#!/usr/bin/python3
"""recflow's Python side of `bench/run session_overhead` (see bench/README.md).

The same 100-node AddV2 chain as bench/session_overhead.cc's --case=chain,
built with `import recflow.compat.v1 as tf` and run with Session.run from
Python, so that bench/run can put the Python row beside the C++ one:

  PYTHONPATH=build/python /usr/bin/python3 bench/session_overhead.py \
      --threads=2 --samples=10 --iters=1000

modes: python_run (sess.run(y, feed_dict={x: value})) and python_callable
(sess.make_callable(y, [x]), TF 1.x's way to cut per-call overhead), timed
interleaved. Output lines match the C++ binary's (info, output=, checksum=,
mode=), plus one `zero_copy` line describing a 1 MB float fetch (whether its
ndarray owns its data or points into recflow's buffer). --dump=PATH writes
the chain's output as raw float32. Inputs come from bench/peers'
gen(), as on the other sides.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
from session_overhead import gen  # pylint: disable=g-import-not-at-top,wrong-import-position

import recflow  # pylint: disable=g-import-not-at-top,wrong-import-position
import recflow.compat.v1 as tf  # pylint: disable=g-import-not-at-top,wrong-import-position


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--case", default="chain")
  p.add_argument("--threads", type=int, default=2)
  p.add_argument("--samples", type=int, default=10)
  p.add_argument("--iters", type=int, default=1000)
  p.add_argument("--warmup", type=int, default=200)
  p.add_argument("--chain_len", type=int, default=100)
  p.add_argument("--n", type=int, default=1024)  # accepted for bench/run's common flags
  p.add_argument("--dump", default="")
  args = p.parse_args()
  if args.case != "chain":
    print("bench/session_overhead.py: only --case=chain", file=sys.stderr)
    return 2
  print("info side=recflow_python case=chain threads=%d samples=%d python=%s recflow=%s" % (
      args.threads, args.samples, sys.executable, os.path.dirname(recflow.__file__)))

  x = tf.placeholder(tf.float32, [1, 16], name="x")
  c = tf.constant(gen(4, 16), name="c")
  y = x
  for i in range(args.chain_len):
    y = tf.add_v2(y, c, name="y" if i + 1 == args.chain_len else None)
  config = tf.ConfigProto(inter_op_parallelism_threads=args.threads,
                          intra_op_parallelism_threads=args.threads)
  sess = tf.Session(config=config)
  xv = gen(3, 16).reshape(1, 16)
  out = sess.run(y, {x: xv})  # prunes, builds and caches the executor
  print("output=%s" % ",".join("%.9g" % v for v in out.ravel()))
  print("shape=[1,16] checksum=%.9g abs_checksum=%.9g" % (
      float(out.astype(np.float64).sum()), float(np.abs(out.astype(np.float64)).sum())))
  if args.dump:
    out.astype("<f4").tofile(args.dump)

  call = sess.make_callable(y, [x])
  steps = {"python_run": lambda: sess.run(y, {x: xv}), "python_callable": lambda: call(xv)}
  for step in steps.values():
    for _ in range(args.warmup):
      step()
  samples = {m: [] for m in steps}
  for _ in range(args.samples):
    for mode, step in steps.items():
      t0 = time.perf_counter()
      for _ in range(args.iters):
        step()
      samples[mode].append((time.perf_counter() - t0) * 1e6 / args.iters)
  for mode, us in samples.items():
    print("mode=%s median_us=%.3f min_us=%.3f iters=%d samples_us=%s" % (
        mode, statistics.median(us), min(us), args.iters, ",".join("%.3f" % v for v in us)))

  # A 1 MB float fetch: zero copy means the array points into recflow's
  # buffer (its base is the capsule that owns a reference to it).
  z = tf.placeholder(tf.float32, [None])
  big = sess.run(z * 2.0, {z: np.ones(262144, np.float32)})
  print("zero_copy bytes=%d owndata=%d writeable=%d base=%s" % (
      big.nbytes, int(big.flags.owndata), int(big.flags.writeable), type(big.base).__name__))
  sess.close()
  return 0


if __name__ == "__main__":
  sys.exit(main())
