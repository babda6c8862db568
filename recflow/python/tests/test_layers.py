"""tf.layers: dense / Dense, dropout, batch_normalization, flatten against NumPy;
variable names, reuse, collections, gradients by finite differences."""

import numpy as np
import pytest

import recflow.compat.v1 as tf


def _init(sess):
  sess.run(tf.global_variables_initializer())


def test_dense_names_values_and_collections():
  x = tf.placeholder(tf.float32, [None, 3])
  y = tf.layers.dense(x, 4, activation=tf.nn.relu,
                      kernel_initializer=tf.random_normal_initializer(seed=1),
                      bias_initializer=tf.constant_initializer(0.1))
  z = tf.layers.dense(y, 2)
  names = [v.op.name for v in tf.global_variables()]
  assert names == ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
  assert [v.op.name for v in tf.trainable_variables()] == names
  assert y.get_shape().as_list() == [None, 4] and z.get_shape().as_list() == [None, 2]
  assert y.op.name.startswith("dense/")
  xv = np.random.RandomState(0).randn(5, 3).astype(np.float32)
  with tf.Session() as sess:
    _init(sess)
    k, b, k1, b1, got = sess.run(tf.global_variables() + [z], {x: xv})
  np.testing.assert_allclose(b, 0.1)
  np.testing.assert_allclose(b1, 0.0)
  np.testing.assert_allclose(got, np.maximum(xv @ k + b, 0) @ k1 + b1, rtol=1e-5, atol=1e-6)


def test_dense_default_kernel_initializer_is_glorot_uniform():
  tf.layers.dense(tf.zeros([2, 300]), 200)
  with tf.Session() as sess:
    _init(sess)
    k = sess.run(tf.global_variables()[0])
  limit = np.sqrt(6.0 / 500)
  assert np.abs(k).max() <= limit and np.abs(k).max() > 0.9 * limit


def test_dense_name_and_reuse():
  x = tf.placeholder(tf.float32, [None, 3])
  a = tf.layers.dense(x, 2, name="fc")
  b = tf.layers.dense(x, 2, name="fc", reuse=True)
  assert [v.op.name for v in tf.global_variables()] == ["fc/kernel", "fc/bias"]
  with pytest.raises(ValueError, match="already exists"):
    tf.layers.dense(x, 2, name="fc")
  with tf.variable_scope("tower", reuse=tf.AUTO_REUSE):
    tf.layers.dense(x, 2, name="out")
    tf.layers.dense(x, 2, name="out")
  assert "tower/out/kernel" in [v.op.name for v in tf.global_variables()]
  assert len(tf.global_variables()) == 4
  with tf.Session() as sess:
    _init(sess)
    av, bv = sess.run([a, b], {x: np.ones((2, 3), np.float32)})
  np.testing.assert_array_equal(av, bv)


def test_dense_class_is_reused_across_calls_and_rank_3_inputs():
  layer = tf.layers.Dense(3, use_bias=False, name="proj")
  x = tf.placeholder(tf.float32, [None, 4, 5])
  y1 = layer(x)
  y2 = layer(x)
  assert len(tf.global_variables()) == 1 and layer.kernel.op.name == "proj/kernel"
  assert layer.trainable_variables == [layer.kernel] and layer.bias is None
  assert y1.get_shape().as_list() == [None, 4, 3]
  xv = np.random.RandomState(1).randn(2, 4, 5).astype(np.float32)
  with tf.Session() as sess:
    _init(sess)
    k, a, b = sess.run([layer.kernel, y1, y2], {x: xv})
  np.testing.assert_allclose(a, xv @ k, rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(a, b)


def test_dense_regularizers_go_to_regularization_losses():
  x = tf.ones([2, 3])
  layer = tf.layers.Dense(2, kernel_initializer=tf.ones_initializer(),
                          kernel_regularizer=lambda w: 0.5 * tf.reduce_sum(w),
                          bias_regularizer=lambda b: tf.reduce_sum(b + 1.0),
                          activity_regularizer=lambda o: tf.reduce_sum(o))
  layer(x)
  reg = tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)
  assert len(reg) == 3 and len(layer.losses) == 3
  with tf.Session() as sess:
    _init(sess)
    vals = sess.run(reg)
    total = sess.run(tf.losses.get_regularization_loss())
  # kernel 0.5 * 6, bias 2 * 1, activity sum(outputs) / batch = 12 / 2
  assert sorted(vals) == pytest.approx([2.0, 3.0, 6.0])
  assert total == pytest.approx(11.0)


def test_dense_gradients_by_finite_differences():
  rng = np.random.RandomState(2)
  x = tf.constant(rng.randn(4, 3).astype(np.float32))
  y = tf.layers.dense(x, 2, activation=tf.tanh)
  loss = tf.reduce_sum(y * tf.constant(rng.randn(4, 2).astype(np.float32)))
  k, b = tf.trainable_variables()
  gk, gb = tf.gradients(loss, [k, b])
  ph = tf.placeholder(tf.float32, [3, 2])
  assign = tf.assign(k, ph)
  with tf.Session() as sess:
    _init(sess)
    k0, got = sess.run([k, gk])
    want = np.zeros_like(k0)
    for i in np.ndindex(*k0.shape):
      for s in (1, -1):
        kv = k0.copy()
        kv[i] += s * 1e-3
        sess.run(assign, {ph: kv})
        want[i] += s * sess.run(loss) / 2e-3
  np.testing.assert_allclose(got, want, atol=2e-3)


def test_dense_bad_arguments():
  x = tf.placeholder(tf.float32, [None, 3])
  with pytest.raises(TypeError, match="units"):
    tf.layers.dense(x, 2.5)
  with pytest.raises(ValueError, match="units"):
    tf.layers.dense(x, 0)
  with pytest.raises(TypeError, match="activation"):
    tf.layers.dense(x, 2, activation="relu")
  with pytest.raises(ValueError, match="last dimension"):
    tf.layers.dense(tf.placeholder(tf.float32, [None, None]), 2)
  with pytest.raises(ValueError, match="min_ndim=2"):
    tf.layers.dense(tf.placeholder(tf.float32, [3]), 2)
  with pytest.raises(TypeError, match="foo"):
    tf.layers.Dense(2, foo=1)


def test_dropout_training_flag_bool_and_tensor():
  x = tf.ones([200, 50])
  off = tf.layers.dropout(x, rate=0.3)
  on = tf.layers.dropout(x, rate=0.3, training=True, seed=3)
  flag = tf.placeholder(tf.bool, [])
  dyn = tf.layers.dropout(x, rate=0.3, training=flag, seed=4)
  with tf.Session() as sess:
    np.testing.assert_array_equal(sess.run(off), 1.0)
    v = sess.run(on)
    np.testing.assert_array_equal(sess.run(dyn, {flag: False}), 1.0)
    d = sess.run(dyn, {flag: True})
  for out in (v, d):
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.7)}
    assert abs((out == 0).mean() - 0.3) < 0.03
  with pytest.raises(ValueError, match="rate"):
    tf.layers.dropout(x, rate=1.0)
  with pytest.raises(TypeError, match="training"):
    tf.layers.dropout(x, training="yes")
  with pytest.raises(TypeError, match="training"):
    tf.layers.dropout(x, training=tf.constant(1.0))


def test_flatten():
  x = tf.placeholder(tf.float32, [None, 2, 3, 4])
  y = tf.layers.flatten(x)
  assert y.get_shape().as_list() == [None, 24]
  zin = tf.placeholder(tf.float32, [None, None, 3])
  z = tf.layers.flatten(zin)
  xv = np.arange(48, dtype=np.float32).reshape(2, 2, 3, 4)
  with tf.Session() as sess:
    np.testing.assert_array_equal(sess.run(y, {x: xv}), xv.reshape(2, 24))
    np.testing.assert_array_equal(sess.run(z, {zin: xv.reshape(2, 8, 3)}), xv.reshape(2, 24))


@pytest.mark.parametrize("training_kind", ["bool", "tensor"])
def test_batch_normalization_training_and_inference(training_kind):
  rng = np.random.RandomState(5)
  xv = (rng.randn(16, 3) * [1.0, 2.0, 3.0] + [0.5, -1.0, 2.0]).astype(np.float32)
  x = tf.placeholder(tf.float32, [None, 3])
  flag = tf.placeholder(tf.bool, [])
  if training_kind == "bool":
    y_train = tf.layers.batch_normalization(x, momentum=0.9, training=True, name="bn")
    y_test = tf.layers.batch_normalization(x, momentum=0.9, training=False, name="bn",
                                           reuse=True)
    feed_train, feed_test = {x: xv}, {x: xv}
  else:
    y_train = y_test = tf.layers.batch_normalization(x, momentum=0.9, training=flag,
                                                     name="bn")
    feed_train, feed_test = {x: xv, flag: True}, {x: xv, flag: False}
  names = sorted(v.op.name for v in tf.global_variables())
  assert names == ["bn/beta", "bn/gamma", "bn/moving_mean", "bn/moving_variance"]
  assert sorted(v.op.name for v in tf.trainable_variables()) == ["bn/beta", "bn/gamma"]
  updates = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
  assert len(updates) == 2
  mean, var = xv.mean(0), xv.var(0)
  with tf.Session() as sess:
    _init(sess)
    got_test0 = sess.run(y_test, feed_test)
    np.testing.assert_allclose(sess.run(y_train, feed_train),
                               (xv - mean) / np.sqrt(var + 1e-3), rtol=1e-4, atol=1e-5)
    for _ in range(2):
      sess.run(updates, feed_train)
    if training_kind == "tensor":
      sess.run(updates, feed_test)  # no change when not training
    mm, mv = sess.run(tf.global_variables()[2:])
    got_test = sess.run(y_test, feed_test)
  np.testing.assert_allclose(got_test0, xv / np.sqrt(1 + 1e-3), rtol=1e-5)
  want_mm = mean * (1 - 0.9 ** 2)
  want_mv = 0.81 + var * (1 - 0.81)
  np.testing.assert_allclose(mm, want_mm, rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(mv, want_mv, rtol=1e-4)
  np.testing.assert_allclose(got_test, (xv - want_mm) / np.sqrt(want_mv + 1e-3), rtol=1e-4,
                             atol=1e-5)


def test_batch_normalization_axis_1_of_rank_4_and_gradient():
  rng = np.random.RandomState(6)
  xv = rng.randn(2, 3, 2, 2).astype(np.float32)
  x = tf.Variable(xv)
  y = tf.layers.batch_normalization(x, axis=1, training=True, epsilon=0.01,
                                    gamma_initializer=tf.constant_initializer(2.0),
                                    beta_initializer=tf.constant_initializer(0.5))
  assert tf.global_variables()[1].get_shape().as_list() == [3]
  coeff = rng.randn(2, 3, 2, 2).astype(np.float32)
  loss = tf.reduce_sum(y * coeff)
  g = tf.gradients(loss, x)[0]
  ph = tf.placeholder(tf.float32, xv.shape)
  assign = tf.assign(x, ph)
  mean = xv.mean((0, 2, 3), keepdims=True)
  var = xv.var((0, 2, 3), keepdims=True)
  with tf.Session() as sess:
    _init(sess)
    got, gv = sess.run([y, g])
    want_g = np.zeros_like(xv, dtype=np.float64)
    for i in np.ndindex(*xv.shape):
      for s in (1, -1):
        v = xv.copy()
        v[i] += s * 1e-2
        sess.run(assign, {ph: v})
        want_g[i] += s * sess.run(loss) / 2e-2
  np.testing.assert_allclose(got, 2 * (xv - mean) / np.sqrt(var + 0.01) + 0.5, rtol=1e-4,
                             atol=1e-5)
  np.testing.assert_allclose(gv, want_g, atol=5e-2)


def test_batch_normalization_bad_arguments():
  x = tf.placeholder(tf.float32, [None, 3])
  with pytest.raises(ValueError, match="axis"):
    tf.layers.batch_normalization(x, axis=2)
  with pytest.raises(ValueError, match="momentum"):
    tf.layers.batch_normalization(x, momentum=1.5)
  with pytest.raises(TypeError, match="axis"):
    tf.layers.batch_normalization(x, axis="last")
  with pytest.raises(NotImplementedError, match="renormalization"):
    tf.layers.batch_normalization(x, renorm=True)
  with pytest.raises(ValueError, match="undefined `axis` dimension"):
    tf.layers.batch_normalization(tf.placeholder(tf.float32, [None, None]))


def test_layers_in_a_reentered_scope_are_reused_as_in_tf():
  x = tf.placeholder(tf.float32, [None, 3])
  with tf.variable_scope("model"):
    y1 = tf.layers.dense(tf.layers.dense(x, 4), 2)
  with tf.variable_scope("model", reuse=True):
    y2 = tf.layers.dense(tf.layers.dense(x, 4), 2)
  with tf.variable_scope("model"):
    with pytest.raises(ValueError, match="already exists"):
      tf.layers.dense(x, 4)
  assert [v.op.name for v in tf.global_variables()] == [
      "model/dense/kernel", "model/dense/bias", "model/dense_1/kernel", "model/dense_1/bias"]
  xv = np.ones((2, 3), np.float32)
  with tf.Session() as sess:
    _init(sess)
    a, b = sess.run([y1, y2], {x: xv})
  np.testing.assert_array_equal(a, b)
