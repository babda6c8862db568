"""tf.nn: activations, losses, bias_add, embedding lookups (embedding_ops), dropout,
batch_normalization."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops.embedding_ops import (embedding_lookup, embedding_lookup_sparse,  # pylint: disable=unused-import
                                       safe_embedding_lookup_sparse)
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops
from recflow.ops import random_ops

relu = gen.relu
relu6 = gen.relu6
elu = gen.elu
selu = gen.selu
softplus = gen.softplus
sigmoid = math_ops.sigmoid
tanh = math_ops.tanh
l2_loss = gen.l2_loss


def leaky_relu(features, alpha=0.2, name=None):
  return gen.leaky_relu(features, alpha=alpha, name=name)


def _last_axis_only(op_name, logits, axis):
  if axis is None or axis == -1:
    return
  rank = ops.convert_to_tensor(logits).get_shape().ndims
  if rank is None or axis != rank - 1:
    raise NotImplementedError("tf.nn.%s(axis=%r): recflow's kernel works on the last axis only"
                              % (op_name, axis))


def softmax(logits, axis=None, name=None, dim=None):
  axis = axis if axis is not None else dim
  _last_axis_only("softmax", logits, axis)
  return gen.softmax(logits, name=name)


def log_softmax(logits, axis=None, name=None, dim=None):
  axis = axis if axis is not None else dim
  _last_axis_only("log_softmax", logits, axis)
  return gen.log_softmax(logits, name=name)


def bias_add(value, bias, data_format=None, name=None):
  with ops.name_scope(name, "BiasAdd", [value, bias]) as name:
    value = ops.convert_to_tensor(value, name="input")
    bias = ops.convert_to_tensor(bias, dtype=value.dtype, name="bias")
    if data_format is None:
      return gen.bias_add(value, bias, name=name)
    return gen.bias_add(value, bias, data_format=data_format, name=name)


def _ensure_xent_args(name, sentinel, labels, logits):
  if sentinel is not None:
    raise ValueError("Only call `%s` with named arguments (labels=..., logits=..., ...)" % name)
  if labels is None or logits is None:
    raise ValueError("Both labels and logits must be provided.")


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):  # pylint: disable=invalid-name
  """max(x, 0) - x * z + log(1 + exp(-|x|)) per element (recflow's fused op)."""
  _ensure_xent_args("sigmoid_cross_entropy_with_logits", _sentinel, labels, logits)
  with ops.name_scope(name, "logistic_loss", [logits, labels]) as name:
    logits = ops.convert_to_tensor(logits, name="logits")
    labels = ops.convert_to_tensor(labels, dtype=logits.dtype, name="labels")
    try:
      labels.get_shape().merge_with(logits.get_shape())
    except ValueError:
      raise ValueError("logits and labels must have the same shape (%s vs %s)" %
                       (logits.get_shape(), labels.get_shape()))
    return gen.sigmoid_cross_entropy_with_logits(logits, labels, name=name)


def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None, dim=-1,  # pylint: disable=invalid-name
                                         name=None, axis=None):
  _ensure_xent_args("softmax_cross_entropy_with_logits_v2", _sentinel, labels, logits)
  axis = axis if axis is not None else dim
  _last_axis_only("softmax_cross_entropy_with_logits", logits, axis)
  with ops.name_scope(name, "softmax_cross_entropy_with_logits", [logits, labels]) as name:
    logits = ops.convert_to_tensor(logits, name="logits")
    labels = ops.convert_to_tensor(labels, dtype=logits.dtype, name="labels")
    loss, _ = gen.softmax_cross_entropy_with_logits(logits, labels, name=name)
    return loss


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,  # pylint: disable=invalid-name
                                      name=None, axis=None):
  """TF 1.x's version: no gradient flows into labels."""
  _ensure_xent_args("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
  with ops.name_scope(name, "softmax_cross_entropy_with_logits_sg", [logits, labels]) as name:
    labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
    return softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits, dim=dim,
                                                name=name, axis=axis)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,  # pylint: disable=invalid-name
                                             name=None):
  _ensure_xent_args("sparse_softmax_cross_entropy_with_logits", _sentinel, labels, logits)
  with ops.name_scope(name, "SparseSoftmaxCrossEntropyWithLogits", [labels, logits]) as name:
    loss, _ = gen.sparse_softmax_cross_entropy_with_logits(logits, labels, name=name)
    return loss


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
  """x scaled by 1/keep_prob where kept, 0 elsewhere (TF 1.x signature)."""
  if keep_prob is not None and rate is not None:
    raise ValueError("Cannot specify both keep_prob and rate")
  if rate is None:
    if keep_prob is None:
      raise ValueError("keep_prob or rate must be given")
    rate = 1 - keep_prob if not isinstance(keep_prob, ops.Tensor) else math_ops.subtract(
        1.0, keep_prob)
  with ops.name_scope(name, "dropout", [x]) as name:
    x = ops.convert_to_tensor(x, name="x")
    if not x.dtype.is_floating:
      raise ValueError("x has to be a floating point tensor since it's going to be scaled. "
                       "Got a %s tensor instead." % x.dtype)
    rate = ops.convert_to_tensor(rate, dtype=x.dtype, name="rate")
    noise_shape = array_ops.shape(x) if noise_shape is None else noise_shape
    random_tensor = random_ops.random_uniform(noise_shape, seed=seed, dtype=x.dtype)
    keep_mask = math_ops.cast(gen.greater_equal(random_tensor, rate), x.dtype)
    scale = math_ops.truediv(1.0, math_ops.subtract(1.0, rate))
    return gen.mul(gen.mul(x, scale), keep_mask, name=name)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
  keepdims = bool(keepdims if keepdims is not None else keep_dims)
  with ops.name_scope(name, "moments", [x, axes]):
    x = ops.convert_to_tensor(x)
    mean = math_ops.reduce_mean(x, axes, keepdims=True, name="mean")
    variance = math_ops.reduce_mean(gen.squared_difference(x, array_ops.stop_gradient(mean)),
                                    axes, keepdims=True, name="variance")
    if not keepdims:
      mean = array_ops.squeeze(mean, axes)
      variance = array_ops.squeeze(variance, axes)
    return mean, variance


_ = dtypes


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
  """(x - mean) * scale / sqrt(variance + epsilon) + offset (TF's formula: x * inv +
  (offset - mean * inv))."""
  with ops.name_scope(name, "batchnorm", [x, mean, variance, scale, offset]):
    inv = gen.rsqrt(gen.add_v2(variance, variance_epsilon))
    if scale is not None:
      inv = gen.mul(inv, scale)
    x = ops.convert_to_tensor(x)
    shift = gen.neg(gen.mul(mean, inv)) if offset is None else gen.sub(offset,
                                                                       gen.mul(mean, inv))
    return gen.add_v2(gen.mul(x, math_ops.cast(inv, x.dtype)), math_ops.cast(shift, x.dtype))
