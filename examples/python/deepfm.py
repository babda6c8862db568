#!/usr/bin/python3
"""DeepFM written from scratch in TensorFlow 1.x style, trained, exported and
served with recflow (only the import line differs from TensorFlow 1.15).

  build/recflow gen-data --rows 100000 --test_rows 10000 --out /tmp/ctr_data
  PYTHONPATH=build/python /usr/bin/python3 examples/python/deepfm.py \\
      --train '/tmp/ctr_data/train-*' --model_dir /tmp/deepfm \\
      --export_dir /tmp/deepfm_serving/1 --steps 300
  build/recflow serve --model_name=deepfm --model_base_path=/tmp/deepfm_serving \\
      --rest_api_port=8501 --port=0
  curl -d '{"inputs": {"dense": [[0.1, 0, 2, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]],
                       "ids": [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
                                16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26]]}}' \\
      -X POST http://127.0.0.1:8501/v1/models/deepfm:predict

The model (Guo et al. 2017): per field f = 1..26 a first-order weight w_f(id)
and an embedding v_f(id) (tf.get_variable tables of --buckets rows each; a
raw id goes to bucket id mod buckets, as hashing into buckets does), looked
up with tf.nn.embedding_lookup_sparse; the 13 dense features enter the
linear part and, through a projection, the FM; the deep part is an MLP
(tf.layers.dense) over the dense features and the 26 embeddings.

  logit = b + <w_dense, x> + sum_f w_f + FM(v_1..v_26, x W_proj) + MLP(...)

Training runs under tf.train.MonitoredTrainingSession with StopAtStepHook,
CheckpointSaverHook and LoggingTensorHook. The export is a second graph (the
same model code over serving placeholders: "dense" float [B, 13] and "ids"
int64 [B, 26], 0 for a missing value) restored from the last checkpoint and
written by SavedModelBuilder; `recflow serve` serves it.

Input: input_fn() below is the one place that reads data: a tf.data
pipeline (TextLineDataset -> batch -> map -> repeat -> prefetch) over
`recflow gen-data` / Criteo TSV files whose map runs recflow's C++ Criteo
parser (recflow.data.parse_criteo); each field becomes a SparseTensor of one
id per example (a missing value is id 0, as in the serving signature).
"""

import argparse
import glob
import sys

import recflow.compat.v1 as tf
from recflow import data as rdata

NUM_DENSE = 13
NUM_FIELDS = 26


# --- Input: the one place that reads data ------------------------------------------

def input_fn(patterns, batch_size, epochs):
  """(labels [B], dense [B, 13], ids [B, 26]) tensors of the next batch of the
  Criteo TSV files: a tf.data pipeline whose map runs recflow's C++ Criteo
  parser (recflow.data.parse_criteo) on each batch of lines. A field with no
  value is id 0, as the serving signature takes it. The iterator's end
  (OutOfRangeError) stops MonitoredTrainingSession after `epochs` passes
  (0: forever)."""
  files = sorted(f for p in patterns.split(",") for f in glob.glob(p))
  if not files:
    raise ValueError("--train matches no files: %s" % patterns)
  ds = tf.data.TextLineDataset(files).batch(batch_size)
  ds = ds.map(lambda lines: rdata.parse_criteo(lines, sparse_tensors=False),
              num_parallel_calls=2)
  ds = ds.repeat(epochs if epochs > 0 else None).prefetch(2)
  batch = rdata.to_sparse_tensors(tf.data.make_one_shot_iterator(ds).get_next())
  # One id per field and example (Criteo): the SparseTensor [B, <=1] as [B, 1].
  # (dense_shape [B, 1] even when no example of the batch has the field.)
  columns = []
  for f in range(NUM_FIELDS):
    sp = batch["C%d" % (f + 1)]
    shape = tf.stack([sp.dense_shape[0], tf.constant(1, tf.int64)])
    columns.append(tf.sparse.to_dense(tf.SparseTensor(sp.indices, sp.values, shape),
                                      default_value=0))
  ids = tf.concat(columns, axis=1)
  return batch["labels"], batch["dense"], ids


def field_sparse_tensors(ids):
  """The 26 fields of ids [B, 26] as SparseTensors [B, 1] (one id per example)."""
  batch = tf.shape(ids, out_type=tf.int64)[0]
  rows = tf.range(batch)
  indices = tf.stack([rows, tf.zeros_like(rows)], axis=1)
  shape = tf.stack([batch, tf.constant(1, tf.int64)])
  return [tf.SparseTensor(indices, ids[:, f], shape) for f in range(NUM_FIELDS)]


# --- The model --------------------------------------------------------------------

def deepfm_logits(dense, fields, buckets, dim, hidden_units):
  """DeepFM's logit [B] from dense [B, 13] and 26 SparseTensors of raw ids."""
  init = tf.truncated_normal_initializer(stddev=0.05)
  firsts, vectors = [], []
  for f, sp in enumerate(fields):
    bucketed = tf.SparseTensor(sp.indices, tf.math.floormod(sp.values, buckets), sp.dense_shape)
    w = tf.get_variable("linear/C%d" % (f + 1), [buckets, 1], initializer=init)
    v = tf.get_variable("embedding/C%d" % (f + 1), [buckets, dim], initializer=init)
    firsts.append(tf.nn.embedding_lookup_sparse(w, bucketed, None, combiner="sum"))
    vectors.append(tf.nn.embedding_lookup_sparse(v, bucketed, None, combiner="sum"))
  # Linear part.
  w_dense = tf.get_variable("linear/dense", [NUM_DENSE, 1], initializer=init)
  bias = tf.get_variable("linear/bias", [1], initializer=tf.zeros_initializer())
  linear = tf.add_n(firsts) + tf.matmul(dense, w_dense) + bias           # [B, 1]
  # FM over the fields' vectors and the dense features' projection.
  proj = tf.get_variable("fm/dense_projection", [NUM_DENSE, dim], initializer=init)
  fm_in = tf.stack(vectors + [tf.matmul(dense, proj)], axis=1)           # [B, 27, dim]
  square_of_sum = tf.square(tf.reduce_sum(fm_in, axis=1))
  sum_of_square = tf.reduce_sum(tf.square(fm_in), axis=1)
  fm = 0.5 * tf.reduce_sum(square_of_sum - sum_of_square, axis=1, keepdims=True)
  # Deep part.
  h = tf.concat([dense] + vectors, axis=1)
  for i, units in enumerate(hidden_units):
    h = tf.layers.dense(h, units, activation=tf.nn.relu, name="mlp_%d" % i)
  deep = tf.layers.dense(h, 1, name="mlp_logit")
  return tf.reshape(linear + fm + deep, [-1])


# --- Train, export -----------------------------------------------------------------

def train(args):
  hidden = [int(u) for u in args.hidden_units.split(",") if u]
  with tf.Graph().as_default():
    labels, dense, ids = input_fn(args.train, args.batch_size, args.epochs)
    logits = deepfm_logits(dense, field_sparse_tensors(ids), args.buckets, args.dim, hidden)
    loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(args.learning_rate).minimize(loss, global_step=global_step)
    hooks = [tf.train.StopAtStepHook(last_step=args.steps),
             tf.train.LoggingTensorHook({"step": global_step, "loss": loss},
                                        every_n_iter=args.log_every)]
    saver_hook = tf.train.CheckpointSaverHook(args.model_dir, save_steps=args.save_steps)
    last = None
    with tf.train.MonitoredTrainingSession(checkpoint_dir=args.model_dir, hooks=hooks,
                                           chief_only_hooks=[saver_hook],
                                           save_checkpoint_secs=None,
                                           save_checkpoint_steps=None) as sess:
      while not sess.should_stop():
        _, last = sess.run([train_op, loss])
  return last


def export(args):
  """The serving graph, restored from the last checkpoint, as a SavedModel."""
  hidden = [int(u) for u in args.hidden_units.split(",") if u]
  with tf.Graph().as_default():
    dense = tf.placeholder(tf.float32, [None, NUM_DENSE], name="dense")
    ids = tf.placeholder(tf.int64, [None, NUM_FIELDS], name="ids")
    logits = deepfm_logits(dense, field_sparse_tensors(ids), args.buckets, args.dim, hidden)
    prob = tf.sigmoid(logits, name="probabilities")
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, tf.train.latest_checkpoint(args.model_dir))
      builder = tf.saved_model.builder.SavedModelBuilder(args.export_dir)
      sig = tf.saved_model.signature_def_utils.predict_signature_def(
          inputs={"dense": dense, "ids": ids}, outputs={"probabilities": prob})
      builder.add_meta_graph_and_variables(
          sess, [tf.saved_model.tag_constants.SERVING],
          signature_def_map={"serving_default": sig})
      builder.save()


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--train", required=True, help="Criteo TSV files (globs, comma-separated)")
  p.add_argument("--model_dir", required=True)
  p.add_argument("--export_dir", help="where to write the SavedModel (a version directory)")
  p.add_argument("--steps", type=int, default=300)
  p.add_argument("--epochs", type=int, default=0, help="passes over the data (0: forever)")
  p.add_argument("--batch_size", type=int, default=1024)
  p.add_argument("--buckets", type=int, default=10000, help="rows of each field's tables")
  p.add_argument("--dim", type=int, default=8)
  p.add_argument("--hidden_units", default="64,32")
  p.add_argument("--learning_rate", type=float, default=0.001)
  p.add_argument("--save_steps", type=int, default=100)
  p.add_argument("--log_every", type=int, default=50)
  args = p.parse_args(argv)
  last = train(args)
  print("trained to step %d, last loss %s" % (args.steps, last))
  if args.export_dir:
    export(args)
    print("exported %s" % args.export_dir)
  return 0


if __name__ == "__main__":
  sys.exit(main())
