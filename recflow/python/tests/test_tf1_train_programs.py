"""TensorFlow 1.15 training programs (tf.train: Adam, decays, clipping,
MonitoredTrainingSession, Saver), with only the import line changed."""

import numpy as np

import recflow.compat.v1 as tf


def make_data(n=512, seed=1):
  rng = np.random.RandomState(seed)
  dense = rng.randn(n, 3).astype(np.float32)
  ids = rng.randint(0, 20, size=(n,)).astype(np.int64)
  id_effect = np.linspace(-2.0, 2.0, 20).astype(np.float32)
  logits = dense.dot(np.array([1.0, -1.0, 0.5], np.float32)) + id_effect[ids]
  labels = (logits > 0).astype(np.float32).reshape(-1, 1)
  return dense, ids, labels


def build_model():
  dense = tf.placeholder(tf.float32, [None, 3], name="dense")
  ids = tf.placeholder(tf.int64, [None], name="ids")
  labels = tf.placeholder(tf.float32, [None, 1], name="labels")
  with tf.variable_scope("model"):
    emb = tf.get_variable("embedding", [20, 4],
                          initializer=tf.random_normal_initializer(stddev=0.1, seed=3))
    w = tf.get_variable("w", [7, 1], initializer=tf.glorot_uniform_initializer(seed=4))
    b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
  features = tf.concat([dense, tf.nn.embedding_lookup(emb, ids)], axis=1)
  logits = tf.matmul(features, w) + b
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits))
  accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), labels),
                                    tf.float32))
  return dense, ids, labels, loss, accuracy


def test_adam_with_monitored_training_session_then_restore_and_evaluate(tmp_path):
  model_dir = str(tmp_path / "model")
  x_dense, x_ids, y = make_data()
  tf.logging.set_verbosity(tf.logging.INFO)

  dense, ids, labels, loss, accuracy = build_model()
  global_step = tf.train.get_or_create_global_step()
  learning_rate = tf.train.exponential_decay(0.05, global_step, 100, 0.9, staircase=True)
  optimizer = tf.train.AdamOptimizer(learning_rate=learning_rate)
  grads_and_vars = optimizer.compute_gradients(loss)
  grads, tvars = zip(*grads_and_vars)
  assert isinstance(grads[0], tf.IndexedSlices)  # the embedding's gradient
  clipped, _ = tf.clip_by_global_norm(grads, 5.0)
  train_op = optimizer.apply_gradients(zip(clipped, tvars), global_step=global_step)

  hooks = [tf.train.StopAtStepHook(last_step=300),
           tf.train.NanTensorHook(loss),
           tf.train.LoggingTensorHook({"loss": loss, "step": global_step}, every_n_iter=100)]
  losses = []
  with tf.train.MonitoredTrainingSession(checkpoint_dir=model_dir, hooks=hooks,
                                         save_checkpoint_steps=100,
                                         config=tf.ConfigProto(
                                             intra_op_parallelism_threads=1)) as mon_sess:
    i = 0
    while not mon_sess.should_stop():
      sl = slice((i * 64) % 512, (i * 64) % 512 + 64)
      _, loss_value = mon_sess.run([train_op, loss], feed_dict={
          dense: x_dense[sl], ids: x_ids[sl], labels: y[sl]})
      losses.append(loss_value)
      i += 1
  assert len(losses) == 300
  assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:20])
  ckpt = tf.train.latest_checkpoint(model_dir)
  assert ckpt.endswith("model.ckpt-300")

  tf.reset_default_graph()
  dense, ids, labels, loss, accuracy = build_model()
  tf.train.get_or_create_global_step()
  saver = tf.train.Saver(tf.global_variables())
  with tf.Session() as sess:
    saver.restore(sess, ckpt)
    acc = sess.run(accuracy, {dense: x_dense, ids: x_ids, labels: y})
    assert sess.run(tf.train.get_global_step()) == 300
  assert acc > 0.9
