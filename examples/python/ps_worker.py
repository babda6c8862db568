"""A TensorFlow 1.x between-graph ps/worker training script, run by recflow.

The only recflow-specific line is the import. Every task runs this same script
under its own TF_CONFIG (what Kubeflow's TFJob operator, SageMaker or
`recflow launch --python` set):

  TF_CONFIG='{"cluster": {"ps": ["127.0.0.1:2222"],
                          "worker": ["127.0.0.1:2223", "127.0.0.1:2224"]},
              "task": {"type": "worker", "index": 0}}' \\
      python3 examples/python/ps_worker.py --model_dir /tmp/ps_worker --steps 400

A ps task serves until the chief ends the job; worker 0 (or the "chief" task)
initializes the cluster (or restores it from --model_dir), checkpoints into
--model_dir and ends the job. The model: a small click-through-rate model,
logistic regression over a dense part and the mean embedding of sparse ids
(tf.nn.embedding_lookup_sparse), trained with Adagrad on synthetic data drawn
from a fixed "true" model (each worker its own examples). See docs/python.md,
"Distributed training from Python".
"""

import argparse
import sys

import numpy as np

import recflow.compat.v1 as tf  # was: import tensorflow.compat.v1 as tf

VOCAB = 1000      # sparse ids 0..999
DIM = 8           # embedding width
DENSE = 4         # dense features
IDS_PER_ROW = 3
BATCH = 64


def build_model():
  """The training graph; returns (placeholders, loss, train_op, global_step)."""
  global_step = tf.train.get_or_create_global_step()
  ids = tf.sparse_placeholder(tf.int64, name="ids")
  dense = tf.placeholder(tf.float32, [None, DENSE], name="dense")
  labels = tf.placeholder(tf.float32, [None], name="labels")
  embeddings = tf.get_variable("embeddings", [VOCAB, DIM],
                               initializer=tf.random_normal_initializer(stddev=0.05, seed=1))
  pooled = tf.nn.embedding_lookup_sparse(embeddings, ids, None, combiner="mean")
  features = tf.concat([dense, pooled], axis=1)
  w = tf.get_variable("w", [DENSE + DIM, 1],
                      initializer=tf.random_normal_initializer(stddev=0.05, seed=2))
  b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
  logits = tf.reshape(tf.matmul(features, w) + b, [-1])
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits),
                        name="loss")
  train_op = tf.train.AdagradOptimizer(0.3).minimize(loss, global_step=global_step)
  return (ids, dense, labels), loss, train_op, global_step


class Data(object):
  """Examples of a fixed true model (the same on every task); `seed` picks which."""

  def __init__(self, seed):
    truth = np.random.RandomState(12345)
    self.id_weight = truth.normal(0, 1.5, VOCAB)
    self.dense_weight = truth.normal(0, 1.0, DENSE)
    self.rng = np.random.RandomState(seed)

  def batch(self, placeholders, size=BATCH):
    ids_ph, dense_ph, labels_ph = placeholders
    ids = self.rng.randint(0, VOCAB, size=(size, IDS_PER_ROW))
    dense = self.rng.normal(0, 1, size=(size, DENSE)).astype(np.float32)
    logit = dense.dot(self.dense_weight) + self.id_weight[ids].mean(axis=1)
    labels = (self.rng.uniform(size=size) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    indices = np.array([[r, k] for r in range(size) for k in range(IDS_PER_ROW)], np.int64)
    sparse = tf.SparseTensorValue(indices, ids.reshape(-1).astype(np.int64),
                                  np.array([size, IDS_PER_ROW], np.int64))
    return {ids_ph: sparse, dense_ph: dense, labels_ph: labels}


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--model_dir", required=True)
  parser.add_argument("--steps", type=int, default=400, help="global steps of the job")
  parser.add_argument("--log_every", type=int, default=20)
  args = parser.parse_args(argv)

  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  cluster = resolver.cluster_spec()
  job_name, task_index = resolver.task_type, resolver.task_id
  server = tf.train.Server(cluster, job_name=job_name, task_index=task_index)
  if job_name == "ps":
    print("ps %d: serving at %s" % (task_index, server.target), flush=True)
    server.join()
    print("ps %d: the job is done" % task_index, flush=True)
    return 0

  is_chief = job_name == "chief" or (job_name == "worker" and task_index == 0 and
                                     "chief" not in cluster.jobs)
  with tf.device(tf.train.replica_device_setter(
      worker_device="/job:%s/task:%d" % (job_name, task_index), cluster=cluster)):
    placeholders, loss, train_op, global_step = build_model()

  data = Data(seed=1000 + 17 * task_index + (100 if job_name == "chief" else 0))
  # Held-out examples: the loss on them, every log_every local steps, shows
  # the shared model improving (a run without the train op: a pull and a
  # forward pass).
  eval_feed = Data(seed=99).batch(placeholders, size=2000)
  hooks = [tf.train.StopAtStepHook(last_step=args.steps)]
  local_steps = 0
  with tf.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                         checkpoint_dir=args.model_dir, hooks=hooks,
                                         save_checkpoint_steps=100,
                                         log_step_count_steps=0) as sess:
    while not sess.should_stop():
      if local_steps % args.log_every == 0:
        eval_loss, step = sess.run([loss, global_step], feed_dict=eval_feed)
        print("%s %d: local step %d global step %d eval loss %.5f" %
              (job_name, task_index, local_steps, step, eval_loss), flush=True)
        if sess.should_stop():
          break
      sess.run(train_op, feed_dict=data.batch(placeholders))
      local_steps += 1
  print("%s %d: done after %d local steps" % (job_name, task_index, local_steps), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
