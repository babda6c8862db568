"""tf.losses (TensorFlow 1.15): weighted losses with a Reduction, added to the
LOSSES collection; get_total_loss and get_regularization_loss."""

import numbers

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops
from recflow.ops import nn_ops


class Reduction(object):
  """How compute_weighted_loss reduces the weighted losses (TF 1.15's keys)."""

  NONE = "none"
  SUM = "weighted_sum"
  SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
  MEAN = "weighted_mean"
  SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
  SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

  @classmethod
  def all(cls):
    return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE, cls.SUM_OVER_NONZERO_WEIGHTS,
            cls.SUM_BY_NONZERO_WEIGHTS)

  @classmethod
  def validate(cls, key):
    if key not in cls.all():
      raise ValueError("Invalid Reduction Key %s (reduction must be one of %s)." %
                       (key, ", ".join(sorted(set(cls.all())))))


def _check_broadcastable(weights, values):
  """TF's rule: weights are a scalar, or have values' rank with each dimension 1
  or equal to values'. Checked on static shapes."""
  w_shape = weights.get_shape()
  v_shape = values.get_shape()
  if w_shape.ndims is None or v_shape.ndims is None or w_shape.ndims == 0:
    return
  if w_shape.ndims != v_shape.ndims:
    raise ValueError("weights can not be broadcast to values. values.rank=%d. "
                     "weights.rank=%d. values.shape=%s. weights.shape=%s." %
                     (v_shape.ndims, w_shape.ndims, v_shape, w_shape))
  for w, v in zip(w_shape.dims, v_shape.dims):
    if w.value is not None and v.value is not None and w.value not in (1, v.value):
      raise ValueError("weights can not be broadcast to values. values.shape=%s. "
                       "weights.shape=%s." % (v_shape, w_shape))


def _num_present(losses, weights):
  """The number of losses with a non-zero weight (weights broadcast to losses)."""
  if isinstance(weights, numbers.Number) and not isinstance(weights, bool) and weights != 0.0:
    return _num_elements(losses)
  with ops.name_scope(None, "num_present", [losses, weights]) as scope:
    weights = math_ops.cast(weights, dtypes.float32)
    present = gen.select_v2(gen.equal(weights, 0.0), array_ops.zeros_like(weights),
                            array_ops.ones_like(weights))
    present = gen.mul(present, array_ops.ones_like(losses))
    return math_ops.reduce_sum(present, name=scope)


def _num_elements(losses):
  with ops.name_scope(None, "num_elements", [losses]) as scope:
    return math_ops.cast(array_ops.size(losses, name=scope), losses.dtype)


def add_loss(loss, loss_collection=ops.GraphKeys.LOSSES):
  if loss_collection:
    ops.add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=ops.GraphKeys.LOSSES):
  return ops.get_collection(loss_collection, scope)


def get_regularization_losses(scope=None):
  return ops.get_collection(ops.GraphKeys.REGULARIZATION_LOSSES, scope)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
  losses = get_regularization_losses(scope)
  if losses:
    return math_ops.add_n(losses, name=name)
  return constant_op.constant(0.0)


def get_total_loss(add_regularization_losses=True, name="total_loss", scope=None):
  losses = get_losses(scope=scope)
  if add_regularization_losses:
    losses += get_regularization_losses(scope=scope)
  if not losses:
    raise ValueError("No losses in the LOSSES collection%s" %
                     (" (or REGULARIZATION_LOSSES)" if add_regularization_losses else ""))
  return math_ops.add_n(losses, name=name)


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=ops.GraphKeys.LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
  """losses * weights, reduced by `reduction` (a scalar unless NONE)."""
  Reduction.validate(reduction)
  with ops.name_scope(scope, "weighted_loss", [losses, weights]):
    losses = ops.convert_to_tensor(losses)
    input_dtype = losses.dtype.base_dtype
    if not input_dtype.is_floating:
      raise TypeError("losses must be a floating point tensor, got %s" % input_dtype.name)
    losses = math_ops.cast(losses, dtypes.float32)
    weights_t = math_ops.cast(ops.convert_to_tensor(weights), dtypes.float32)
    _check_broadcastable(weights_t, losses)
    weighted_losses = gen.mul(losses, weights_t)
    if reduction == Reduction.NONE:
      loss = weighted_losses
    else:
      loss = math_ops.reduce_sum(weighted_losses)
      if reduction == Reduction.MEAN:
        loss = gen.div_no_nan(loss, math_ops.reduce_sum(gen.mul(array_ops.ones_like(losses),
                                                                weights_t)), name="value")
      elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
        loss = gen.div_no_nan(loss, _num_present(losses, weights), name="value")
      elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
        loss = gen.div_no_nan(loss, _num_elements(losses), name="value")
    loss = math_ops.cast(loss, input_dtype)
    add_loss(loss, loss_collection)
    return loss


def _not_none(**kwargs):
  for k, v in kwargs.items():
    if v is None:
      raise ValueError("%s must not be None." % k)


def _compatible(a, b, a_name, b_name):
  if not a.get_shape().is_compatible_with(b.get_shape()):
    raise ValueError("Shapes of %s %s and %s %s are incompatible" %
                     (a_name, a.get_shape(), b_name, b.get_shape()))


def _float_pair(labels, predictions, p_name="predictions"):
  predictions = math_ops.cast(ops.convert_to_tensor(predictions, name=p_name), dtypes.float32)
  labels = math_ops.cast(ops.convert_to_tensor(labels, name="labels"), dtypes.float32)
  _compatible(predictions, labels, p_name, "labels")
  return labels, predictions


_LOSSES = ops.GraphKeys.LOSSES
_DEFAULT_REDUCTION = Reduction.SUM_BY_NONZERO_WEIGHTS


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=_LOSSES,
                        reduction=_DEFAULT_REDUCTION):
  _not_none(labels=labels, predictions=predictions)
  with ops.name_scope(scope, "absolute_difference", [predictions, labels, weights]) as scope:
    labels, predictions = _float_pair(labels, predictions)
    losses = gen.abs(gen.sub(predictions, labels))
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=_LOSSES,
                       reduction=_DEFAULT_REDUCTION):
  _not_none(labels=labels, predictions=predictions)
  with ops.name_scope(scope, "mean_squared_error", [predictions, labels, weights]) as scope:
    labels, predictions = _float_pair(labels, predictions)
    losses = gen.squared_difference(predictions, labels)
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=_LOSSES, reduction=_DEFAULT_REDUCTION):
  """-labels * log(predictions + epsilon) - (1 - labels) * log(1 - predictions + epsilon)."""
  _not_none(labels=labels, predictions=predictions)
  with ops.name_scope(scope, "log_loss", [predictions, labels, weights]) as scope:
    labels, predictions = _float_pair(labels, predictions)
    losses = gen.sub(
        gen.neg(gen.mul(labels, gen.log(gen.add_v2(predictions, epsilon)))),
        gen.mul(gen.sub(1.0, labels), gen.log(gen.add_v2(gen.sub(1.0, predictions), epsilon))))
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=_LOSSES,
               reduction=_DEFAULT_REDUCTION):
  """max(0, 1 - (2 * labels - 1) * logits) for labels in {0, 1}."""
  _not_none(labels=labels, logits=logits)
  with ops.name_scope(scope, "hinge_loss", [logits, labels, weights]) as scope:
    labels, logits = _float_pair(labels, logits, "logits")
    all_ones = array_ops.ones_like(labels)
    labels = gen.sub(gen.mul(2.0, labels), all_ones)
    losses = gen.relu(gen.sub(all_ones, gen.mul(labels, logits)))
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=_LOSSES, reduction=_DEFAULT_REDUCTION):
  _not_none(labels=labels, predictions=predictions)
  with ops.name_scope(scope, "huber_loss", [predictions, labels, weights]) as scope:
    labels, predictions = _float_pair(labels, predictions)
    abs_error = gen.abs(gen.sub(predictions, labels))
    quadratic = gen.minimum(abs_error, float(delta))
    linear = gen.sub(abs_error, quadratic)
    losses = gen.add_v2(gen.mul(0.5, gen.mul(quadratic, quadratic)),
                        gen.mul(float(delta), linear))
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=_LOSSES, reduction=_DEFAULT_REDUCTION):
  """sigmoid_cross_entropy_with_logits, labels smoothed towards 1/2."""
  _not_none(multi_class_labels=multi_class_labels, logits=logits)
  with ops.name_scope(scope, "sigmoid_cross_entropy_loss",
                      [logits, multi_class_labels, weights]) as scope:
    logits = ops.convert_to_tensor(logits, name="logits")
    labels = math_ops.cast(multi_class_labels, logits.dtype)
    _compatible(logits, labels, "logits", "multi_class_labels")
    if label_smoothing > 0:
      labels = gen.add_v2(gen.mul(labels, 1.0 - label_smoothing), 0.5 * label_smoothing)
    losses = nn_ops.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                      name="xentropy")
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=_LOSSES, reduction=_DEFAULT_REDUCTION):
  """softmax_cross_entropy_with_logits per example ([batch]); labels smoothed
  towards 1/num_classes; no gradient into the labels."""
  _not_none(onehot_labels=onehot_labels, logits=logits)
  with ops.name_scope(scope, "softmax_cross_entropy_loss",
                      [logits, onehot_labels, weights]) as scope:
    logits = ops.convert_to_tensor(logits, name="logits")
    labels = math_ops.cast(onehot_labels, logits.dtype)
    _compatible(logits, labels, "logits", "onehot_labels")
    if label_smoothing > 0:
      num_classes = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype)
      labels = gen.add_v2(gen.mul(labels, 1.0 - label_smoothing),
                          math_ops.truediv(float(label_smoothing), num_classes))
    labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
    losses = nn_ops.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits,
                                                         name="xentropy")
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=_LOSSES, reduction=_DEFAULT_REDUCTION):
  """sparse_softmax_cross_entropy_with_logits; labels [batch] (or [batch, 1])."""
  _not_none(labels=labels, logits=logits)
  with ops.name_scope(scope, "sparse_softmax_cross_entropy_loss",
                      [logits, labels, weights]) as scope:
    logits = ops.convert_to_tensor(logits, name="logits")
    labels = ops.convert_to_tensor(labels, name="labels")
    if not labels.dtype.is_integer:
      raise TypeError("labels must be int32 or int64, got %s" % labels.dtype.name)
    labels = math_ops.cast(labels, dtypes.int64)
    l_rank, g_rank = labels.get_shape().ndims, logits.get_shape().ndims
    if l_rank is not None and g_rank is not None:
      if l_rank == g_rank and labels.get_shape()[-1].value in (1, None):
        labels = array_ops.squeeze(labels, [l_rank - 1])
        l_rank -= 1
      if l_rank != g_rank - 1:
        raise ValueError("labels must have rank %d (logits' rank - 1), got shape %s for "
                         "logits %s" % (g_rank - 1, labels.get_shape(), logits.get_shape()))
    losses = nn_ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                             name="xentropy")
    return compute_weighted_loss(losses, weights, scope, loss_collection, reduction=reduction)
