#!/usr/bin/python3
"""bench/run conv's LeNet side for recflow, from Python (see bench/README.md, "conv").

  PYTHONPATH=build/python /usr/bin/python3 bench/lenet_train.py --threads=2

TF-slim's LeNet (recflow.contrib.slim.nets.lenet under lenet_arg_scope:
conv 5x5x32 SAME + ReLU, max pool 2, conv 5x5x64 SAME + ReLU, max pool 2,
flatten, fc 1024 + ReLU, dropout 0.5, fc 10) on a fed batch [64, 28, 28, 1]
of random images and labels, sparse softmax cross-entropy (mean), momentum
SGD (lr 0.01, momentum 0.9). One step is one Session.run of the train op
(fetching the loss), on the same batch every step.

Initial weights, images and labels come from gen() (bench/peers/session_overhead.py),
so bench/peers/lenet_torch.py starts from the same numbers; see
lenet_torch.init_params(). First --check_steps steps run with dropout off
(is_training=False: the two frameworks draw different masks) and print their
losses; then the training graph (dropout on) is timed. Prints

  info ...
  losses mode=session_run values=l1,l2,...
  mode=session_run median_us=... min_us=... iters=N samples_us=...   (per step)
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import lenet_torch as spec  # noqa: E402  (init_params, make_batch; imports no torch)

import recflow.compat.v1 as tf  # noqa: E402
from recflow.contrib import slim  # noqa: E402
from recflow.contrib.slim.nets import lenet  # noqa: E402


def build(is_training, batch, params, lr, momentum):
  graph = tf.Graph()
  with graph.as_default():
    images = tf.placeholder(tf.float32, [batch, 28, 28, 1], name="images")
    labels = tf.placeholder(tf.int64, [batch], name="labels")
    with slim.arg_scope(lenet.lenet_arg_scope()):
      logits, _ = lenet.lenet(images, num_classes=10, is_training=is_training,
                              dropout_keep_prob=0.5)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.train.MomentumOptimizer(lr, momentum).minimize(loss)
    init = tf.global_variables_initializer()
    # The shared initial weights, by layer and kind.
    assigns = []
    for v in tf.trainable_variables():
      layer, kind = v.op.name.split("/")[-2:]
      assigns.append(tf.assign(v, tf.constant(params[layer][kind])))
  return graph, images, labels, loss, train_op, init, assigns


def make_session(graph, threads, init, assigns):
  config = tf.ConfigProto(intra_op_parallelism_threads=threads,
                          inter_op_parallelism_threads=threads)
  sess = tf.Session(graph=graph, config=config)
  sess.run(init)
  sess.run(assigns)
  return sess


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
  args = p.parse_args()

  params = spec.init_params()
  xn, yn = spec.make_batch(args.batch)
  print("info side=recflow python=%s threads=%d batch=%d layout=NHWC RECFLOW_CONV_IMPL=%s "
        "OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s" % (
            sys.version.split()[0], args.threads, args.batch,
            os.environ.get("RECFLOW_CONV_IMPL", "<unset>"),
            os.environ.get("OPENBLAS_CORETYPE", "<unset>"),
            os.environ.get("OPENBLAS_L2_SIZE", "<unset>")))

  # Correctness: the first steps without dropout.
  g, images, labels, loss, train_op, init, assigns = build(False, args.batch, params, args.lr,
                                                           args.momentum)
  sess = make_session(g, args.threads, init, assigns)
  feed = {images: xn, labels: yn}
  losses = []
  for _ in range(args.check_steps):
    _, l = sess.run([train_op, loss], feed)
    losses.append(float(l))
  print("losses mode=session_run values=%s" % ",".join("%.9g" % v for v in losses))
  sys.stdout.flush()
  sess.close()

  # Throughput: the training graph (dropout on).
  g, images, labels, loss, train_op, init, assigns = build(True, args.batch, params, args.lr,
                                                           args.momentum)
  sess = make_session(g, args.threads, init, assigns)
  feed = {images: xn, labels: yn}
  step = sess.make_callable([train_op, loss], feed_list=[images, labels])
  for _ in range(args.warmup):
    step(xn, yn)
  us = []
  last = None
  for _ in range(args.samples):
    t0 = time.perf_counter_ns()
    for _ in range(args.steps):
      _, last = step(xn, yn)
    us.append((time.perf_counter_ns() - t0) / 1e3 / args.steps)
  print("trained last_loss=%.6f" % float(last))
  print("mode=session_run median_us=%.1f min_us=%.1f iters=%d samples_us=%s" % (
      statistics.median(us), min(us), args.steps, ",".join("%.1f" % v for v in us)))
  return 0


if __name__ == "__main__":
  sys.exit(main())
