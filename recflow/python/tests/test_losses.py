"""tf.losses against NumPy: every loss, weights, every Reduction, collections,
gradients by finite differences, bad arguments."""

import numpy as np
import pytest

import recflow.compat.v1 as tf

R = tf.losses.Reduction
RNG = np.random.RandomState(0)
LABELS01 = RNG.randint(0, 2, size=(6, 3)).astype(np.float32)
PROBS = RNG.uniform(0.05, 0.95, size=(6, 3)).astype(np.float32)
PRED = RNG.randn(6, 3).astype(np.float32)
TARGET = RNG.randn(6, 3).astype(np.float32)


def _sigmoid(x):
  return 1 / (1 + np.exp(-x))


def _log_softmax(x):
  m = x.max(-1, keepdims=True)
  return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _reduce(losses, weights, reduction):
  w = np.broadcast_to(np.asarray(weights, np.float64), losses.shape)
  weighted = losses * w
  if reduction == R.NONE:
    return weighted
  total = weighted.sum()
  if reduction == R.SUM:
    return total
  if reduction == R.MEAN:
    d = w.sum()
  elif reduction == R.SUM_OVER_BATCH_SIZE:
    d = losses.size
  else:
    d = (w != 0).sum()
  return total / d if d else 0.0


CASES = {
    "log_loss": (lambda: tf.losses.log_loss(LABELS01, PROBS, **KW),
                 lambda: -LABELS01 * np.log(PROBS + 1e-7) -
                 (1 - LABELS01) * np.log(1 - PROBS + 1e-7)),
    "mean_squared_error": (lambda: tf.losses.mean_squared_error(TARGET, PRED, **KW),
                           lambda: (PRED - TARGET) ** 2),
    "absolute_difference": (lambda: tf.losses.absolute_difference(TARGET, PRED, **KW),
                            lambda: np.abs(PRED - TARGET)),
    "sigmoid_cross_entropy": (lambda: tf.losses.sigmoid_cross_entropy(LABELS01, PRED, **KW),
                              lambda: -(LABELS01 * np.log(_sigmoid(PRED)) +
                                        (1 - LABELS01) * np.log(1 - _sigmoid(PRED)))),
    "hinge_loss": (lambda: tf.losses.hinge_loss(LABELS01, PRED, **KW),
                   lambda: np.maximum(0, 1 - (2 * LABELS01 - 1) * PRED)),
    "huber_loss": (lambda: tf.losses.huber_loss(TARGET, PRED, delta=0.7, **KW),
                   lambda: np.where(np.abs(PRED - TARGET) <= 0.7, 0.5 * (PRED - TARGET) ** 2,
                                    0.7 * (np.abs(PRED - TARGET) - 0.35))),
}
KW = {}

WEIGHTS = [1.0, 0.0, 2.5, np.array([[1.0], [0.0], [2.0], [0.5], [0.0], [3.0]], np.float32),
           np.array([[0.0, 1.0, 2.0]], np.float32),
           RNG.choice([0.0, 1.0, 0.5], size=(6, 3)).astype(np.float32)]


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("weights_i", range(len(WEIGHTS)))
@pytest.mark.parametrize("reduction", [R.SUM_BY_NONZERO_WEIGHTS, R.MEAN, R.SUM,
                                       R.SUM_OVER_BATCH_SIZE, R.NONE])
def test_elementwise_losses_match_numpy(name, weights_i, reduction):
  KW.clear()
  KW.update(weights=WEIGHTS[weights_i], reduction=reduction)
  build, ref = CASES[name]
  loss = build()
  assert tf.get_collection(tf.GraphKeys.LOSSES) == [loss]
  with tf.Session() as sess:
    got = sess.run(loss)
  want = _reduce(ref().astype(np.float64), WEIGHTS[weights_i], reduction)
  np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", [R.SUM_BY_NONZERO_WEIGHTS, R.NONE])
def test_softmax_losses_match_numpy(smoothing, reduction):
  logits = RNG.randn(5, 4).astype(np.float32)
  labels = RNG.randint(0, 4, size=5)
  onehot = np.eye(4, dtype=np.float32)[labels]
  weights = np.array([1.0, 0.0, 2.0, 1.0, 0.5], np.float32)
  soft = tf.losses.softmax_cross_entropy(onehot, logits, weights=weights,
                                         label_smoothing=smoothing, reduction=reduction)
  sparse = tf.losses.sparse_softmax_cross_entropy(labels, logits, weights=weights,
                                                  reduction=reduction)
  sparse_2d = tf.losses.sparse_softmax_cross_entropy(labels[:, None], logits)
  smoothed = onehot * (1 - smoothing) + smoothing / 4
  with tf.Session() as sess:
    got_soft, got_sparse, got_2d = sess.run([soft, sparse, sparse_2d])
  ls = _log_softmax(logits.astype(np.float64))
  np.testing.assert_allclose(got_soft, _reduce(-(smoothed * ls).sum(-1), weights, reduction),
                             rtol=1e-5)
  np.testing.assert_allclose(got_sparse, _reduce(-ls[np.arange(5), labels], weights, reduction),
                             rtol=1e-5)
  np.testing.assert_allclose(got_2d, -ls[np.arange(5), labels].mean(), rtol=1e-5)


def test_sigmoid_cross_entropy_label_smoothing():
  loss = tf.losses.sigmoid_cross_entropy(LABELS01, PRED, label_smoothing=0.3)
  z = LABELS01 * 0.7 + 0.15
  want = (np.maximum(PRED, 0) - PRED * z + np.log1p(np.exp(-np.abs(PRED)))).mean()
  with tf.Session() as sess:
    np.testing.assert_allclose(sess.run(loss), want, rtol=1e-5)


def _numeric_grad(f, x, eps=1e-3):
  g = np.zeros_like(x, dtype=np.float64)
  for i in np.ndindex(*x.shape):
    xp, xm = x.copy(), x.copy()
    xp[i] += eps
    xm[i] -= eps
    g[i] = (f(xp) - f(xm)) / (2 * eps)
  return g


@pytest.mark.parametrize("name", ["log_loss", "mean_squared_error", "sigmoid_cross_entropy",
                                  "softmax_cross_entropy", "sparse_softmax_cross_entropy",
                                  "huber_loss", "absolute_difference", "hinge_loss"])
def test_loss_gradients_by_finite_differences(name):
  x = tf.placeholder(tf.float32, [6, 3])
  weights = WEIGHTS[3]
  labels = RNG.randint(0, 3, size=6)
  build = {
      "log_loss": lambda: tf.losses.log_loss(LABELS01, tf.sigmoid(x), weights),
      "mean_squared_error": lambda: tf.losses.mean_squared_error(TARGET, x, weights),
      "sigmoid_cross_entropy": lambda: tf.losses.sigmoid_cross_entropy(LABELS01, x, weights),
      "softmax_cross_entropy": lambda: tf.losses.softmax_cross_entropy(
          np.eye(3, dtype=np.float32)[labels], x, weights[:, 0], label_smoothing=0.1),
      "sparse_softmax_cross_entropy": lambda: tf.losses.sparse_softmax_cross_entropy(
          labels, x, weights[:, 0]),
      "huber_loss": lambda: tf.losses.huber_loss(TARGET, x, weights),
      "absolute_difference": lambda: tf.losses.absolute_difference(TARGET, x, weights),
      "hinge_loss": lambda: tf.losses.hinge_loss(LABELS01, x, weights),
  }[name]
  loss = build()
  grad = tf.gradients(loss, x)[0]
  x0 = (PRED + 0.05).astype(np.float32)  # away from the kinks of abs, hinge
  with tf.Session() as sess:
    got = sess.run(grad, {x: x0})
    want = _numeric_grad(lambda v: sess.run(loss, {x: v.astype(np.float32)}), x0)
  np.testing.assert_allclose(got, want, atol=3e-3, rtol=2e-2)


def test_total_and_regularization_losses():
  assert tf.Session().run(tf.losses.get_regularization_loss()) == 0.0
  with pytest.raises(ValueError, match="losses"):
    tf.losses.get_total_loss()
  w = tf.get_variable("w", [2], initializer=tf.constant_initializer([3.0, 4.0]),
                      regularizer=lambda v: 0.5 * tf.reduce_sum(tf.square(v)))
  a = tf.losses.mean_squared_error([1.0, 2.0], w)
  b = tf.losses.absolute_difference([0.0, 0.0], w, loss_collection=None)
  assert tf.losses.get_losses() == [a]
  assert len(tf.losses.get_regularization_losses()) == 1
  total = tf.losses.get_total_loss()
  no_reg = tf.losses.get_total_loss(add_regularization_losses=False)
  reg = tf.losses.get_regularization_loss()
  assert total.op.name == "total_loss"
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    t, n, r, bv = sess.run([total, no_reg, reg, b])
  assert r == pytest.approx(12.5)
  assert n == pytest.approx((4 + 4) / 2)
  assert t == pytest.approx(16.5)
  assert bv == pytest.approx(3.5)


def test_bad_arguments():
  with pytest.raises(ValueError, match="labels must not be None"):
    tf.losses.log_loss(None, PROBS)
  with pytest.raises(ValueError, match="predictions must not be None"):
    tf.losses.mean_squared_error(TARGET, None)
  with pytest.raises(ValueError, match="logits must not be None"):
    tf.losses.sigmoid_cross_entropy(LABELS01, None)
  with pytest.raises(ValueError, match="Invalid Reduction"):
    tf.losses.mean_squared_error(TARGET, PRED, reduction="avg")
  with pytest.raises(ValueError, match="predictions"):
    tf.losses.mean_squared_error(TARGET, PRED[:, :2])
  with pytest.raises(ValueError, match="weights"):
    tf.losses.mean_squared_error(TARGET, PRED, weights=np.ones((6, 2), np.float32))
  with pytest.raises(ValueError, match="weights"):
    tf.losses.mean_squared_error(TARGET, PRED, weights=np.ones(6, np.float32))
  with pytest.raises(TypeError, match="labels"):
    tf.losses.sparse_softmax_cross_entropy(np.zeros(6, np.float32), PRED)
  with pytest.raises(ValueError, match="labels"):
    tf.losses.sparse_softmax_cross_entropy(np.zeros((6, 3, 2), np.int32), PRED)
  with pytest.raises(ValueError, match="onehot_labels"):
    tf.losses.softmax_cross_entropy(np.zeros((6, 4), np.float32), PRED)
