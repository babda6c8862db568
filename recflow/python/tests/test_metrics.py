"""tf.metrics.auc (TF 1.15's bucketed AUC), accuracy and mean against NumPy."""

import numpy as np
import pytest

import recflow.compat.v1 as tf


def _exact_roc_auc(labels, scores, weights=None):
  w = np.ones_like(scores) if weights is None else weights
  pos, neg = labels > 0, labels <= 0
  order = np.argsort(scores)
  s, wl = scores[order], w[order]
  # Mann-Whitney with ties counted half, weighted.
  total = 0.0
  wn_below = 0.0
  i = 0
  while i < len(s):
    j = i
    while j < len(s) and s[j] == s[i]:
      j += 1
    block = order[i:j]
    wp_block = (w[block] * pos[block]).sum()
    wn_block = (w[block] * neg[block]).sum()
    total += wp_block * (wn_below + 0.5 * wn_block)
    wn_below += wn_block
    i = j
  _ = wl
  return total / ((w * pos).sum() * (w * neg).sum())


def _bucketed(labels, scores, weights, num_thresholds, curve, method):
  """TF 1.15's formula in NumPy."""
  eps = 1e-7
  th = np.array([-eps] + [(i + 1) / (num_thresholds - 1) for i in range(num_thresholds - 2)] +
                [1 + eps])
  w = np.ones_like(scores) if weights is None else weights
  pp = scores[None, :] > th[:, None]
  lp = labels[None, :] > 0
  tp = ((pp & lp) * w).sum(1)
  fn = ((~pp & lp) * w).sum(1)
  tn = ((~pp & ~lp) * w).sum(1)
  fp = ((pp & ~lp) * w).sum(1)
  e = 1e-6
  rec = (tp + e) / (tp + fn + e)
  if curve == "ROC":
    x, y = fp / (fp + tn + e), rec
  else:
    x, y = rec, (tp + e) / (tp + fp + e)
  h = {"trapezoidal": (y[:-1] + y[1:]) / 2, "minoring": np.minimum(y[:-1], y[1:]),
       "majoring": np.maximum(y[:-1], y[1:])}[method]
  return ((x[:-1] - x[1:]) * h).sum()


def _data(n=4000, seed=0):
  rng = np.random.RandomState(seed)
  labels = (rng.rand(n) < 0.3).astype(np.int64)
  scores = 1 / (1 + np.exp(-(rng.randn(n) + 1.2 * labels)))
  return labels, scores.astype(np.float32)


def test_auc_matches_exact_auc_in_batches_and_variables_are_local():
  labels, scores = _data()
  lab = tf.placeholder(tf.int64, [None])
  pred = tf.placeholder(tf.float32, [None])
  value, update = tf.metrics.auc(lab, pred)
  names = sorted(v.op.name for v in tf.local_variables())
  assert names == ["auc/false_negatives", "auc/false_positives", "auc/true_negatives",
                   "auc/true_positives"]
  assert sorted(v.op.name for v in tf.get_collection(tf.GraphKeys.METRIC_VARIABLES)) == names
  assert tf.global_variables() == [] and tf.trainable_variables() == []
  with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    for i in range(0, len(labels), 1000):
      last = sess.run(update, {lab: labels[i:i + 1000], pred: scores[i:i + 1000]})
    got = sess.run(value)
    assert got == pytest.approx(last, abs=1e-6)
    sess.run(tf.local_variables_initializer())
    assert sess.run(value) == pytest.approx(0.0, abs=1e-6)
  exact = _exact_roc_auc(labels, scores.astype(np.float64))
  assert abs(got - exact) < 2e-3
  assert got == pytest.approx(_bucketed(labels, scores, None, 200, "ROC", "trapezoidal"),
                              abs=1e-4)


@pytest.mark.parametrize("curve,method", [("ROC", "trapezoidal"), ("ROC", "minoring"),
                                          ("ROC", "majoring"), ("PR", "trapezoidal"),
                                          ("PR", "minoring"), ("PR", "majoring"),
                                          ("ROC", "careful_interpolation")])
def test_auc_curves_and_summation_methods_with_weights(curve, method):
  labels, scores = _data(2000, seed=1)
  weights = np.random.RandomState(2).rand(2000).astype(np.float32)
  value, update = tf.metrics.auc(labels.astype(np.float32), scores, weights=weights,
                                 num_thresholds=50, curve=curve, summation_method=method)
  with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    sess.run(update)
    got = sess.run(value)
  want = _bucketed(labels, scores, weights, 50, curve,
                   "trapezoidal" if method == "careful_interpolation" else method)
  assert got == pytest.approx(want, abs=2e-4)


def test_pr_auc_careful_interpolation_is_close_to_average_precision():
  labels, scores = _data(3000, seed=3)
  value, update = tf.metrics.auc(labels, scores, curve="PR",
                                 summation_method="careful_interpolation", num_thresholds=500)
  with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    got = sess.run(update)
  order = np.argsort(-scores)
  hits = labels[order]
  precision = np.cumsum(hits) / np.arange(1, len(hits) + 1)
  ap = (precision * hits).sum() / hits.sum()
  assert abs(got - ap) < 1e-2


def test_auc_with_named_scope_and_collections():
  value, update = tf.metrics.auc([1, 0], [0.9, 0.1], name="my_auc",
                                 metrics_collections=["m"], updates_collections=["u"])
  assert tf.get_collection("m") == [value] and tf.get_collection("u") == [update]
  assert tf.local_variables()[0].op.name.startswith("my_auc/")
  with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    assert sess.run(update) == pytest.approx(1.0, abs=1e-5)


def test_accuracy_and_mean():
  rng = np.random.RandomState(4)
  labels = rng.randint(0, 3, size=(50,))
  preds = rng.randint(0, 3, size=(50,))
  weights = rng.rand(50).astype(np.float32)
  values = rng.randn(50, 2).astype(np.float32)
  lab = tf.placeholder(tf.int64, [None])
  prd = tf.placeholder(tf.int32, [None, 1])
  w = tf.placeholder(tf.float32, [None])
  acc, acc_up = tf.metrics.accuracy(lab, prd)
  wacc, wacc_up = tf.metrics.accuracy(lab, prd, weights=w)
  vals = tf.placeholder(tf.float32, [None, 2])
  m, m_up = tf.metrics.mean(vals)
  wm, wm_up = tf.metrics.mean(vals, weights=tf.constant([[1.0, 0.0]]))
  # As in TensorFlow, the count update waits for `values` (here a feed).
  count_update = m_up.op.inputs[1].op.inputs[0].op
  assert count_update.type == "AssignAdd"
  assert vals.op in count_update.control_inputs
  names = sorted(v.op.name for v in tf.local_variables())
  assert names == ["accuracy/count", "accuracy/total", "accuracy_1/count", "accuracy_1/total",
                   "mean/count", "mean/total", "mean_1/count", "mean_1/total"]
  with tf.Session() as sess:
    sess.run(tf.local_variables_initializer())
    for i in (0, 25):
      sl = slice(i, i + 25)
      sess.run([acc_up, wacc_up, m_up, wm_up],
               {lab: labels[sl], prd: preds[sl, None], w: weights[sl], vals: values[sl]})
    got = sess.run([acc, wacc, m, wm])
  correct = (labels == preds).astype(np.float64)
  np.testing.assert_allclose(got, [correct.mean(), (correct * weights).sum() / weights.sum(),
                                   values.mean(), values[:, 0].mean()], rtol=1e-5)


def test_bad_arguments():
  with pytest.raises(ValueError, match="curve"):
    tf.metrics.auc([1], [0.5], curve="DET")
  with pytest.raises(ValueError, match="summation_method"):
    tf.metrics.auc([1], [0.5], summation_method="simpson")
  with pytest.raises(ValueError, match="num_thresholds"):
    tf.metrics.auc([1], [0.5], num_thresholds=1)
  with pytest.raises(TypeError, match="num_thresholds"):
    tf.metrics.auc([1], [0.5], num_thresholds=2.5)
  with pytest.raises(ValueError, match="predictions"):
    tf.metrics.auc([1, 0], [0.5, 0.2, 0.1])
  with pytest.raises(ValueError, match="metrics_collections"):
    tf.metrics.mean([1.0], metrics_collections="m")
  with pytest.raises(ValueError, match="labels"):
    tf.metrics.accuracy([1, 2], [1, 2, 3])
  with pytest.raises(ValueError, match="weights"):
    tf.metrics.mean(np.ones((2, 3)), weights=np.ones((2, 3, 4)))
