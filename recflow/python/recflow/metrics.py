"""recflow.metrics: the evaluation metrics of `recflow train` / `recflow eval`
over NumPy arrays, computed by recflow's C++ (train/metrics.h).

  auc(labels, predictions, weights=None)             exact, tie-aware ROC AUC
  gauc(labels, predictions, groups, weights=None)    per-group AUC, weighted
  logloss(labels, predictions, weights=None, eps=1e-7)
  binary_metrics(labels, predictions, weights=None, groups=None, threshold=0.5)

Labels are 0/1 (any value > 0.5 is a click), predictions probabilities in
[0, 1]. AUC counts tied predictions half (the Mann-Whitney statistic; what
sklearn.metrics.roc_auc_score gives) and is 0.5 when a class is missing. GAUC
is the mean of the per-group AUCs weighted by each group's impressions
(summed weights), over the groups that have both classes. Groups are any ids
(ints, strings). Mismatched lengths or predictions outside [0, 1] raise
tf.errors.InvalidArgumentError with recflow's message.
"""

import numpy as np

from recflow import _pywrap


def _flat(name, values, dtype):
  if values is None:
    raise ValueError("%s must not be None" % name)
  arr = np.asarray(values)
  if arr.dtype == object:
    raise TypeError("%s must be numeric, got an object array" % name)
  return np.ascontiguousarray(arr.reshape(-1), dtype=dtype)


def _groups(groups):
  arr = np.asarray(groups).reshape(-1)
  if arr.dtype.kind in "iub":
    return np.ascontiguousarray(arr, dtype=np.int64)
  # Strings or other ids: number them.
  _, inverse = np.unique(arr, return_inverse=True)
  return np.ascontiguousarray(inverse, dtype=np.int64)


def binary_metrics(labels, predictions, weights=None, groups=None, threshold=0.5, eps=1e-7):
  """Every metric of recflow's evaluator as a dict: count, weight, auc,
  logloss, mean_prediction, observed_ctr, calibration, accuracy (prediction >
  threshold), and with `groups` gauc and gauc_users (groups that entered it)."""
  labels = _flat("labels", labels, np.float32)
  predictions = _flat("predictions", predictions, np.float32)
  if weights is not None:
    weights = _flat("weights", weights, np.float32)
  if groups is not None:
    groups = _groups(groups)
  return _pywrap.binary_metrics(labels, predictions, weights, groups, float(threshold),
                                float(eps))


def auc(labels, predictions, weights=None):
  """Exact ROC AUC (ties count half); 0.5 without both classes."""
  return binary_metrics(labels, predictions, weights)["auc"]


def gauc(labels, predictions, groups, weights=None):
  """Group AUC: per-group AUCs weighted by the groups' impressions, over the
  groups with both classes (0.0 when there is none)."""
  if groups is None:
    raise ValueError("gauc needs groups (a user id per example)")
  return binary_metrics(labels, predictions, weights, groups)["gauc"]


def logloss(labels, predictions, weights=None, eps=1e-7):
  """Mean (weighted) binary cross-entropy, predictions clipped to [eps, 1 - eps]."""
  return binary_metrics(labels, predictions, weights, eps=eps)["logloss"]
