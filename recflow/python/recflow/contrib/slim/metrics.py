"""TF-slim's metrics (tf.contrib.metrics): streaming metrics with slim's argument order
(predictions first) over tf.metrics, and aggregate_metric_map."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops
from recflow.ops import metrics_impl

__all__ = ["aggregate_metric_map", "aggregate_metrics", "streaming_accuracy", "streaming_auc",
           "streaming_mean", "streaming_mean_absolute_error", "streaming_mean_squared_error",
           "streaming_recall_at_k"]


def streaming_accuracy(predictions, labels, weights=None, metrics_collections=None,
                       updates_collections=None, name=None):
  """(accuracy, update_op): the fraction of predictions equal to labels so far."""
  return metrics_impl.accuracy(labels, predictions, weights, metrics_collections,
                               updates_collections, name)


def streaming_mean(values, weights=None, metrics_collections=None, updates_collections=None,
                   name=None):
  return metrics_impl.mean(values, weights, metrics_collections, updates_collections, name)


def streaming_auc(predictions, labels, weights=None, num_thresholds=200,
                  metrics_collections=None, updates_collections=None, curve="ROC", name=None,
                  summation_method="trapezoidal"):
  return metrics_impl.auc(labels, predictions, weights=weights, num_thresholds=num_thresholds,
                          metrics_collections=metrics_collections,
                          updates_collections=updates_collections, curve=curve, name=name,
                          summation_method=summation_method)


def streaming_mean_absolute_error(predictions, labels, weights=None, metrics_collections=None,
                                  updates_collections=None, name=None):
  with ops.name_scope(name, "mean_absolute_error", [predictions, labels]):
    errors = gen.abs(gen.sub(math_ops.cast(predictions, dtypes.float32),
                             math_ops.cast(labels, dtypes.float32)))
    return metrics_impl.mean(errors, weights, metrics_collections, updates_collections,
                             "mean_absolute_error")


def streaming_mean_squared_error(predictions, labels, weights=None, metrics_collections=None,
                                 updates_collections=None, name=None):
  with ops.name_scope(name, "mean_squared_error", [predictions, labels]):
    errors = gen.squared_difference(math_ops.cast(predictions, dtypes.float32),
                                    math_ops.cast(labels, dtypes.float32))
    return metrics_impl.mean(errors, weights, metrics_collections, updates_collections,
                             "mean_squared_error")


def streaming_recall_at_k(predictions, labels, k, weights=None, metrics_collections=None,
                          updates_collections=None, name=None):
  """The fraction of examples whose label is among the k largest predictions (ties count
  as in the top k when the label's score reaches the k-th largest)."""
  with ops.name_scope(name, "recall_at_%d" % k, [predictions, labels]):
    predictions = math_ops.cast(predictions, dtypes.float32)
    labels = math_ops.cast(labels, dtypes.int32)
    num_classes = predictions.get_shape()[-1].value
    if num_classes is None:
      raise ValueError("streaming_recall_at_k: the number of classes of %s must be known"
                       % predictions.name)
    if not 0 < k:
      raise ValueError("streaming_recall_at_k: k must be positive, got %d" % k)
    label_score = math_ops.reduce_sum(
        gen.mul(predictions, array_ops.one_hot(labels, num_classes, dtype=dtypes.float32)),
        axis=-1, keepdims=True)
    higher = math_ops.reduce_sum(math_ops.cast(gen.greater(predictions, label_score),
                                               dtypes.float32), axis=-1)
    in_top_k = math_ops.cast(gen.less(higher, float(k)), dtypes.float32)
    return metrics_impl.mean(in_top_k, weights, metrics_collections, updates_collections,
                             "recall_at_%d" % k)


def aggregate_metrics(*value_update_tuples):
  """([values], [update ops]) from (value, update_op) pairs."""
  if not value_update_tuples:
    raise ValueError("Expected at least one value_tensor/update_op pair")
  values, updates = zip(*value_update_tuples)
  return list(values), list(updates)


def aggregate_metric_map(names_to_tuples):
  """({name: value}, {name: update_op}) from {name: (value, update_op)}."""
  values, updates = {}, {}
  for name in sorted(names_to_tuples):
    values[name], updates[name] = names_to_tuples[name]
  return values, updates
