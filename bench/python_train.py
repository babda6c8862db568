#!/usr/bin/python3
"""bench/run python_train's recflow side from Python (see bench/README.md).

  PYTHONPATH=build/python /usr/bin/python3 bench/python_train.py --config=C.yaml \
      --data=TRAIN.tsv --threads=2

Builds the run config's zoo model (recflow.models.build over
batch_placeholders: the graph `recflow train` builds over its input
iterator, with the zoo's optimizers), reads the data through
recflow.models.Batches (the C++ pipeline `recflow train` reads it with) and
runs one epoch of Session.run(train_op, feed_dict) from Python. The clock
covers the loop from the first step to the last (as `recflow train`'s
"trained N steps ... examples/s" line). Prints key=value lines:

  info ...
  epoch steps=N examples=N seconds=S examples_per_sec=V first_loss=L last_loss=L
"""

import argparse
import os
import sys
import time

import recflow.compat.v1 as tf
from recflow import models


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--config", required=True)
  p.add_argument("--data", required=True)
  p.add_argument("--threads", type=int, default=2)
  args = p.parse_args()
  config = args.config
  graph = tf.Graph()
  with graph.as_default():
    batch = models.batch_placeholders(config)
    m = models.build(config, batch=batch)
    init = tf.global_variables_initializer()
  session_config = tf.ConfigProto(intra_op_parallelism_threads=args.threads,
                                  inter_op_parallelism_threads=args.threads)
  sess = tf.Session(graph=graph, config=session_config)
  sess.run(init)
  steps = examples = 0
  first_loss = last_loss = None
  data = models.Batches(config, args.data, epochs=1)
  train = sess.make_callable([m.train_op, m.loss], feed_list=batch)
  train_only = sess.make_callable(m.train_op, feed_list=batch)
  start = time.perf_counter()
  for b in data:
    if steps % 10 == 0:
      _, loss = train(*b)
      if first_loss is None:
        first_loss = float(loss)
      last_loss = float(loss)
    else:
      train_only(*b)
    steps += 1
    examples += len(b[0])
  seconds = time.perf_counter() - start
  print("info python=%s pid=%d threads=%d model=%s" % (
      sys.version.split()[0], os.getpid(), args.threads, m.model_type))
  print("epoch steps=%d examples=%d seconds=%.3f examples_per_sec=%.1f first_loss=%.6f "
        "last_loss=%.6f" % (steps, examples, seconds, examples / seconds, first_loss, last_loss))
  return 0


if __name__ == "__main__":
  sys.exit(main())
