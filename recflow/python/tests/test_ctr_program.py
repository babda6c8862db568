"""A TensorFlow 1.15 CTR program (DeepFM-like), only the import line changed:
SparseTensor feeds, embedding_lookup_sparse over partitioned tables,
tf.layers.dense, tf.losses.log_loss, GradientDescentOptimizer, tf.metrics.auc."""

import numpy as np

import recflow.compat.v1 as tf  # was: import tensorflow as tf

FIELDS = 3
VOCAB = 60
EMB = 4


def make_data(rng, n, true_w):
  """Per example and field 1..3 ids; the click probability follows a hidden
  logistic model over the ids' weights."""
  batches = []
  logits = np.zeros(n)
  for f in range(FIELDS):
    indices, values = [], []
    for i in range(n):
      ids = rng.choice(VOCAB, size=rng.randint(1, 4), replace=False)
      for j, v in enumerate(sorted(ids)):
        indices.append([i, j])
        values.append(v)
      logits[i] += true_w[f, ids].mean()
    batches.append(tf.SparseTensorValue(np.array(indices, np.int64),
                                        np.array(values, np.int64), np.array([n, 3], np.int64)))
  labels = (rng.rand(n) < 1 / (1 + np.exp(-2.5 * logits))).astype(np.float32)
  return batches, labels


def test_deepfm_like_ctr_model_trains_and_reaches_auc():
  rng = np.random.RandomState(7)
  true_w = rng.randn(FIELDS, VOCAB)
  train_x, train_y = make_data(rng, 4096, true_w)
  test_x, test_y = make_data(rng, 2048, true_w)

  tf.set_random_seed(1)
  features = [tf.sparse_placeholder(tf.int64, name="field_%d" % f) for f in range(FIELDS)]
  label = tf.placeholder(tf.float32, [None], name="label")
  with tf.variable_scope("deepfm"):
    first_tables = [tf.get_variable("first_%d" % p, [VOCAB * FIELDS // 2, 1],
                                    initializer=tf.zeros_initializer()) for p in range(2)]
    emb_tables = [tf.get_variable("emb_%d" % p, [VOCAB * FIELDS // 2, EMB],
                                  initializer=tf.random_normal_initializer(stddev=0.05))
                  for p in range(2)]
    first_order, field_embs = [], []
    for f, sp in enumerate(features):
      shifted = tf.SparseTensor(sp.indices, sp.values + f * VOCAB, sp.dense_shape)
      first_order.append(tf.nn.embedding_lookup_sparse(first_tables, shifted, None,
                                                       combiner="mean"))
      field_embs.append(tf.nn.embedding_lookup_sparse(emb_tables, shifted, None,
                                                      combiner="mean"))
    linear = tf.add_n(first_order)                       # [batch, 1]
    stacked = tf.stack(field_embs, axis=1)               # [batch, fields, emb]
    sum_sq = tf.square(tf.reduce_sum(stacked, axis=1))
    sq_sum = tf.reduce_sum(tf.square(stacked), axis=1)
    fm = 0.5 * tf.reduce_sum(sum_sq - sq_sum, axis=1, keepdims=True)
    deep = tf.layers.dense(tf.reshape(stacked, [-1, FIELDS * EMB]), 16, activation=tf.nn.relu)
    deep = tf.layers.dense(deep, 1)
    logit = tf.reshape(linear + fm + deep, [-1])
  prob = tf.sigmoid(logit)
  loss = tf.losses.log_loss(label, prob)
  train_op = tf.train.GradientDescentOptimizer(0.5).minimize(
      loss, global_step=tf.train.get_or_create_global_step())
  auc, auc_update = tf.metrics.auc(label, prob)

  def batch(xs, ys, idx):
    feed = {label: ys[idx]}
    for sp, value in zip(features, xs):
      rows = np.isin(value.indices[:, 0], idx)
      remap = np.full(len(ys), -1)
      remap[idx] = np.arange(len(idx))
      ind = value.indices[rows].copy()
      ind[:, 0] = remap[ind[:, 0]]
      order = np.lexsort((ind[:, 1], ind[:, 0]))
      feed[sp] = (ind[order], value.values[rows][order], [len(idx), 3])
    return feed

  with tf.Session() as sess:
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    losses = []
    for step in range(300):
      idx = np.sort(rng.choice(len(train_y), 256, replace=False))
      _, l = sess.run([train_op, loss], batch(train_x, train_y, idx))
      losses.append(l)
    for start in range(0, len(test_y), 512):
      sess.run(auc_update, batch(test_x, test_y, np.arange(start, start + 512)))
    test_auc = sess.run(auc)
  print("loss %.3f -> %.3f, test auc %.3f" % (np.mean(losses[:30]), np.mean(losses[-30:]),
                                              test_auc))
  assert np.mean(losses[-30:]) < np.mean(losses[:30]) - 0.05
  assert test_auc > 0.7, test_auc


def test_batch_norm_and_dropout_with_a_training_placeholder_and_update_ops():
  rng = np.random.RandomState(0)
  x_data = rng.randn(512, 4).astype(np.float32) * 5 + 3
  y_data = (x_data[:, :1] > 3).astype(np.float32)
  x = tf.placeholder(tf.float32, [None, 4])
  y = tf.placeholder(tf.float32, [None, 1])
  is_training = tf.placeholder_with_default(False, [])
  h = tf.layers.batch_normalization(x, training=is_training)
  h = tf.layers.dense(h, 8, activation=tf.nn.relu)
  h = tf.layers.dropout(h, 0.1, training=is_training)
  logits = tf.layers.dense(h, 1)
  loss = tf.losses.sigmoid_cross_entropy(y, logits)
  with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
  accuracy, accuracy_update = tf.metrics.accuracy(y, tf.cast(logits > 0, tf.float32))
  moving_mean = [v for v in tf.global_variables() if "moving_mean" in v.op.name][0]
  with tf.Session() as sess:
    sess.run([tf.global_variables_initializer(), tf.local_variables_initializer()])
    for _ in range(200):
      sess.run(train, {x: x_data, y: y_data, is_training: True})
    sess.run(accuracy_update, {x: x_data, y: y_data})
    acc, mm = sess.run([accuracy, moving_mean])
  assert acc > 0.9
  np.testing.assert_allclose(mm, x_data.mean(0) * (1 - 0.99 ** 200), rtol=1e-3)
