"""recflow.metrics: AUC, GAUC and logloss over NumPy arrays, computed by
recflow's C++ evaluator, against plain NumPy references written here."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow import metrics


def ref_auc(labels, preds, weights=None):
  """Mann-Whitney: P(score of a positive > score of a negative), ties half,
  over all weighted pairs."""
  labels = np.asarray(labels) > 0.5
  preds = np.asarray(preds, np.float64)
  w = np.ones(len(preds)) if weights is None else np.asarray(weights, np.float64)
  pos, neg = np.nonzero(labels)[0], np.nonzero(~labels)[0]
  if len(pos) == 0 or len(neg) == 0:
    return 0.5
  p, n = preds[pos][:, None], preds[neg][None, :]
  pair_w = w[pos][:, None] * w[neg][None, :]
  wins = (p > n) + 0.5 * (p == n)
  return float((wins * pair_w).sum() / pair_w.sum())


def ref_gauc(labels, preds, groups, weights=None):
  labels = np.asarray(labels)
  w = np.ones(len(preds)) if weights is None else np.asarray(weights, np.float64)
  num = den = 0.0
  for g in np.unique(groups):
    m = np.asarray(groups) == g
    lab = labels[m] > 0.5
    if lab.all() or (~lab).all():
      continue
    num += w[m].sum() * ref_auc(labels[m], np.asarray(preds)[m], w[m])
    den += w[m].sum()
  return num / den if den else 0.0


def ref_logloss(labels, preds, weights=None, eps=1e-7):
  p = np.clip(np.asarray(preds, np.float64), eps, 1 - eps)
  y = np.asarray(labels) > 0.5
  w = np.ones(len(p)) if weights is None else np.asarray(weights, np.float64)
  return float(-(w * np.where(y, np.log(p), np.log1p(-p))).sum() / w.sum())


def data(n, seed):
  rng = np.random.RandomState(seed)
  labels = (rng.rand(n) < 0.3).astype(np.float32)
  # Rounded so that ties occur; correlated with the labels.
  preds = np.clip(np.round(0.3 * labels + 0.7 * rng.rand(n), 2), 0, 1).astype(np.float32)
  groups = rng.randint(0, 12, n).astype(np.int64)
  weights = rng.uniform(0.5, 2.0, n).astype(np.float32)
  return labels, preds, groups, weights


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_gauc_logloss_match_references(seed):
  labels, preds, groups, weights = data(400, seed)
  assert metrics.auc(labels, preds) == pytest.approx(ref_auc(labels, preds), abs=1e-9)
  assert metrics.auc(labels, preds, weights) == pytest.approx(
      ref_auc(labels, preds, weights), abs=1e-6)
  assert metrics.gauc(labels, preds, groups) == pytest.approx(
      ref_gauc(labels, preds, groups), abs=1e-9)
  assert metrics.gauc(labels, preds, groups, weights) == pytest.approx(
      ref_gauc(labels, preds, groups, weights), abs=1e-6)
  assert metrics.logloss(labels, preds) == pytest.approx(ref_logloss(labels, preds), rel=1e-6)
  assert metrics.logloss(labels, preds, weights, eps=1e-3) == pytest.approx(
      ref_logloss(labels, preds, weights, eps=1e-3), rel=1e-6)


def test_binary_metrics_and_string_groups():
  labels, preds, groups, _ = data(300, 5)
  names = np.array(["user%d" % g for g in groups])
  r = metrics.binary_metrics(labels.reshape(-1, 1), preds.reshape(-1, 1), groups=names)
  assert r["count"] == 300
  assert r["gauc"] == pytest.approx(ref_gauc(labels, preds, groups), abs=1e-9)
  users_with_both = sum(1 for g in np.unique(groups)
                        if 0 < labels[groups == g].sum() < (groups == g).sum())
  assert r["gauc_users"] == users_with_both
  assert r["observed_ctr"] == pytest.approx(labels.mean(), rel=1e-6)
  assert r["accuracy"] == pytest.approx(((preds > 0.5) == (labels > 0.5)).mean(), rel=1e-6)
  assert "gauc" not in metrics.binary_metrics(labels, preds)


def test_one_class_and_bad_inputs():
  assert metrics.auc([1, 1, 1], [0.2, 0.5, 0.9]) == 0.5
  assert metrics.gauc([1, 0, 1], [0.2, 0.5, 0.9], [1, 2, 3]) == 0.0
  with pytest.raises(tf.errors.InvalidArgumentError, match="3 predictions but 2 labels"):
    metrics.auc([1, 0], [0.1, 0.2, 0.3])
  with pytest.raises(tf.errors.InvalidArgumentError, match="probabilities in"):
    metrics.logloss([1, 0], [0.1, 1.5])
  with pytest.raises(tf.errors.InvalidArgumentError, match="probabilities in"):
    metrics.auc([1, 0], [0.1, np.nan])
  with pytest.raises(ValueError):
    metrics.gauc([1, 0], [0.1, 0.2], None)
  with pytest.raises(TypeError):
    metrics.auc(np.array([object(), 1]), [0.1, 0.2])
  with pytest.raises(ValueError):
    metrics.auc(None, [0.1])
