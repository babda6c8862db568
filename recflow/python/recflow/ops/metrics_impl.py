"""tf.metrics (TensorFlow 1.15): streaming metrics over local variables.

Each metric makes its variables with zeros in LOCAL_VARIABLES and
METRIC_VARIABLES (initialize them with tf.local_variables_initializer()) and
returns (value, update_op): update_op adds a batch and returns the metric
after it, value reads the accumulated metric.
"""

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops
from recflow.ops import state_ops
from recflow.ops import variable_scope as vs
from recflow.ops import variables


def metric_variable(shape, dtype, validate_shape=True, name=None):
  """A zero-initialized local variable in LOCAL_VARIABLES and METRIC_VARIABLES."""
  return variables.Variable(
      lambda: array_ops.zeros(shape, dtype), trainable=False,
      collections=[ops.GraphKeys.LOCAL_VARIABLES, ops.GraphKeys.METRIC_VARIABLES],
      validate_shape=validate_shape, name=name)


def _check_collections(arg, value):
  if value is not None and not isinstance(value, (list, tuple)):
    raise ValueError("%s must be a list or tuple of collection names, got %r" % (arg, value))


def _squeeze_last(t, other):
  """t without a trailing dimension of size 1 when it has one more dimension than
  other (TF's _remove_squeezable_dimensions)."""
  if t is None or other is None:
    return t
  r, o = t.get_shape().ndims, other.get_shape().ndims
  if r is not None and o is not None and r == o + 1 and t.get_shape()[-1].value == 1:
    return array_ops.squeeze(t, [r - 1])
  return t


def _remove_squeezable_dimensions(predictions, labels, weights):
  predictions = ops.convert_to_tensor(predictions, name="predictions")
  if labels is not None:
    labels = ops.convert_to_tensor(labels, name="labels")
    labels = _squeeze_last(labels, predictions)
    predictions = _squeeze_last(predictions, labels)
  if weights is not None:
    weights = ops.convert_to_tensor(weights, name="weights")
    weights = _squeeze_last(weights, predictions)
  return predictions, labels, weights


def _broadcast_weights(weights, values):
  w_shape, v_shape = weights.get_shape(), values.get_shape()
  if (w_shape.ndims is not None and v_shape.ndims is not None and w_shape.ndims not in
      (0, v_shape.ndims)):
    raise ValueError("weights can not be broadcast to values: weights.shape=%s, "
                     "values.shape=%s" % (w_shape, v_shape))
  if w_shape.is_fully_defined() and v_shape.is_fully_defined() and w_shape == v_shape:
    return weights
  return gen.mul(weights, array_ops.ones_like(values))


def _add_to(collections, value):
  if collections:
    ops.add_to_collections(collections, value)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
  """The (weighted) mean of all values seen: total / count."""
  _check_collections("metrics_collections", metrics_collections)
  _check_collections("updates_collections", updates_collections)
  with vs.variable_scope(name, "mean", [values, weights]):
    values = math_ops.cast(ops.convert_to_tensor(values, name="values"), dtypes.float32)
    total = metric_variable([], dtypes.float32, name="total")
    count = metric_variable([], dtypes.float32, name="count")
    if weights is None:
      num_values = math_ops.cast(array_ops.size(values), dtypes.float32)
    else:
      values, _, weights = _remove_squeezable_dimensions(values, None, weights)
      weights = _broadcast_weights(math_ops.cast(weights, dtypes.float32), values)
      values = gen.mul(values, weights)
      num_values = math_ops.reduce_sum(weights)
    update_total = state_ops.assign_add(total, math_ops.reduce_sum(values))
    with ops.control_dependencies([values]):
      update_count = state_ops.assign_add(count, num_values)
    value = gen.div_no_nan(total.read_value(), gen.maximum(count.read_value(), 0.0),
                           name="value")
    update_op = gen.div_no_nan(update_total, gen.maximum(update_count, 0.0), name="update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
  """The (weighted) fraction of predictions equal to labels."""
  if labels is None or predictions is None:
    raise ValueError("labels and predictions must not be None")
  predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
  if not predictions.get_shape().is_compatible_with(labels.get_shape()):
    raise ValueError("Shapes of predictions %s and labels %s are incompatible" %
                     (predictions.get_shape(), labels.get_shape()))
  if labels.dtype.base_dtype != predictions.dtype.base_dtype:
    predictions = math_ops.cast(predictions, labels.dtype.base_dtype)
  is_correct = math_ops.cast(gen.equal(predictions, labels), dtypes.float32)
  return mean(is_correct, weights, metrics_collections, updates_collections,
              name or "accuracy")


def _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights):
  """true_positives, false_negatives, true_negatives, false_positives per threshold
  (prediction > threshold is positive) as variables, and their update ops."""
  predictions = math_ops.cast(ops.convert_to_tensor(predictions, name="predictions"),
                              dtypes.float32)
  predictions, labels, weights = _remove_squeezable_dimensions(predictions, labels, weights)
  if not predictions.get_shape().is_compatible_with(labels.get_shape()):
    raise ValueError("Shapes of predictions %s and labels %s are incompatible" %
                     (predictions.get_shape(), labels.get_shape()))
  labels = math_ops.cast(labels, dtypes.bool)
  num_thresholds = len(thresholds)
  preds_row = gen.reshape(predictions, [1, -1])
  labels_row = gen.reshape(labels, [1, -1])
  thresh_col = constant_op.constant([[t] for t in thresholds], dtype=dtypes.float32)
  pred_is_pos = gen.greater(preds_row, thresh_col)  # [T, N] by broadcasting
  pred_is_neg = gen.logical_not(pred_is_pos)
  label_is_pos = gen.tile(labels_row, [num_thresholds, 1])
  label_is_neg = gen.logical_not(label_is_pos)
  weights_row = None
  if weights is not None:
    weights = _broadcast_weights(math_ops.cast(weights, dtypes.float32), predictions)
    weights_row = gen.reshape(weights, [1, -1])

  values, updates = {}, {}
  for key, name, a, b in (("tp", "true_positives", label_is_pos, pred_is_pos),
                          ("fn", "false_negatives", label_is_pos, pred_is_neg),
                          ("tn", "true_negatives", label_is_neg, pred_is_neg),
                          ("fp", "false_positives", label_is_neg, pred_is_pos)):
    var = metric_variable([num_thresholds], dtypes.float32, name=name)
    hit = math_ops.cast(gen.logical_and(a, b), dtypes.float32)
    if weights_row is not None:
      hit = gen.mul(hit, weights_row)
    updates[key] = state_ops.assign_add(var, math_ops.reduce_sum(hit, 1))
    values[key] = var.read_value()
  return values, updates


_SUMMATION_METHODS = ("trapezoidal", "careful_interpolation", "minoring", "majoring")


def auc(labels, predictions, weights=None, num_thresholds=200, metrics_collections=None,
        updates_collections=None, curve="ROC", name=None, summation_method="trapezoidal"):
  """TF 1.15's approximate AUC from confusion counts at num_thresholds thresholds
  evenly spaced in [0, 1] (plus -eps and 1 + eps). predictions are
  probabilities in [0, 1] (not checked at run time: recflow has no Assert op);
  labels are cast to bool."""
  _check_collections("metrics_collections", metrics_collections)
  _check_collections("updates_collections", updates_collections)
  if labels is None or predictions is None:
    raise ValueError("labels and predictions must not be None")
  if curve not in ("ROC", "PR"):
    raise ValueError("curve must be either ROC or PR, %s unknown" % (curve,))
  if summation_method not in _SUMMATION_METHODS:
    raise ValueError("Invalid summation_method: %s summation_method should be 'trapezoidal', "
                     "'careful_interpolation', 'minoring', or 'majoring'." %
                     (summation_method,))
  if isinstance(num_thresholds, bool) or not isinstance(num_thresholds, int):
    raise TypeError("num_thresholds must be an int, got %r" % (num_thresholds,))
  if num_thresholds < 2:
    raise ValueError("num_thresholds must be at least 2, got %d" % num_thresholds)
  with vs.variable_scope(name, "auc", [labels, predictions, weights]):
    kepsilon = 1e-7
    thresholds = [(i + 1) * 1.0 / (num_thresholds - 1) for i in range(num_thresholds - 2)]
    thresholds = [0.0 - kepsilon] + thresholds + [1.0 + kepsilon]
    values, updates = _confusion_matrix_at_thresholds(labels, predictions, thresholds, weights)
    epsilon = 1.0e-6
    n = num_thresholds

    def head(x):
      return x[:n - 1]

    def tail(x):
      return x[1:]

    def interpolate_pr_auc(tp, fp, fn, out_name):
      dtp = gen.sub(head(tp), tail(tp))
      p = gen.add_v2(tp, fp)
      prec_slope = gen.div_no_nan(dtp, gen.maximum(gen.sub(head(p), tail(p)), 0.0))
      intercept = gen.sub(tail(tp), gen.mul(prec_slope, tail(p)))
      both = gen.logical_and(gen.greater(head(p), 0.0), gen.greater(tail(p), 0.0))
      ratio = gen.select(both, gen.div_no_nan(head(p), gen.maximum(tail(p), 0.0)),
                         array_ops.ones_like(tail(p)))
      inc = gen.div_no_nan(gen.mul(prec_slope, gen.add_v2(dtp, gen.mul(intercept,
                                                                       gen.log(ratio)))),
                           gen.maximum(gen.add_v2(tail(tp), tail(fn)), 0.0))
      return math_ops.reduce_sum(inc, name=out_name)

    def compute_auc(tp, fn, tn, fp, out_name):
      if curve == "PR" and summation_method == "careful_interpolation":
        return interpolate_pr_auc(tp, fp, fn, out_name)
      rec = math_ops.truediv(gen.add_v2(tp, epsilon), gen.add_v2(gen.add_v2(tp, fn), epsilon))
      if curve == "ROC":
        x = math_ops.truediv(fp, gen.add_v2(gen.add_v2(fp, tn), epsilon))
        y = rec
      else:
        x = rec
        y = math_ops.truediv(gen.add_v2(tp, epsilon), gen.add_v2(gen.add_v2(tp, fp), epsilon))
      dx = gen.sub(head(x), tail(x))
      if summation_method in ("trapezoidal", "careful_interpolation"):
        height = gen.mul(gen.add_v2(head(y), tail(y)), 0.5)
      elif summation_method == "minoring":
        height = gen.minimum(head(y), tail(y))
      else:
        height = gen.maximum(head(y), tail(y))
      return math_ops.reduce_sum(gen.mul(dx, height), name=out_name)

    value = compute_auc(values["tp"], values["fn"], values["tn"], values["fp"], "value")
    update_op = compute_auc(updates["tp"], updates["fn"], updates["tn"], updates["fp"],
                            "update_op")
    _add_to(metrics_collections, value)
    _add_to(updates_collections, update_op)
    return value, update_op
