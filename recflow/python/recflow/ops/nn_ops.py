"""tf.nn: activations, losses, bias_add, embedding lookups (embedding_ops), dropout,
batch_normalization, convolutions and pooling."""

import numbers

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


# --- convolutions and pooling ---------------------------------------------------------------


def _spatial_list(value, arg_name, op_name, data_format, n=2, batch_and_channel=1):
  """TF 2's _get_sequence: an int, or n (spatial) or n + 2 (full) values -> n + 2 values in
  data_format order, the batch and channel entries `batch_and_channel`."""
  if value is None:
    value = 1
  if isinstance(value, numbers.Integral) and not isinstance(value, bool):
    value = [int(value)]
  value = [int(v) for v in value]
  channels_first = data_format is not None and data_format.startswith("NC")
  if len(value) == 1:
    value = value * n
  if len(value) == n:
    edge = [batch_and_channel]
    return edge * 2 + value if channels_first else edge + value + edge
  if len(value) == n + 2:
    return value
  raise ValueError("%s: %s should be an int or a list of 1, %d or %d ints, got %r"
                   % (op_name, arg_name, n, n + 2, value))


def _padding_attrs(padding, data_format, op_name):
  """(padding, explicit_paddings): a list of (before, after) pairs, one per input dimension,
  becomes TF's EXPLICIT padding."""
  if isinstance(padding, str):
    if padding.upper() not in ("SAME", "VALID"):
      raise ValueError("%s: padding must be 'SAME', 'VALID' or a list of [before, after] pairs, "
                       "got %r" % (op_name, padding))
    return padding.upper(), []
  pairs = [list(p) for p in padding]
  if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
    raise ValueError("%s: explicit padding must be 4 [before, after] pairs (one per dimension "
                     "of the %s input), got %r" % (op_name, data_format or "NHWC", padding))
  return "EXPLICIT", [int(v) for p in pairs for v in p]


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # pylint: disable=redefined-builtin
           data_format="NHWC", dilations=None, name=None, filters=None):
  """tf.nn.conv2d: input [batch, height, width, in_channels] (NHWC) convolved with filter
  [filter_height, filter_width, in_channels, out_channels]. strides / dilations: an int, 2
  spatial values or 4 values in data_format order; padding 'SAME', 'VALID' or explicit
  [before, after] pairs per dimension."""
  del use_cudnn_on_gpu
  if filter is not None and filters is not None:
    raise ValueError("conv2d: give filter or filters, not both")
  filter = filters if filter is None else filter
  if filter is None or strides is None or padding is None:
    raise ValueError("conv2d needs input, filter, strides and padding")
  data_format = data_format or "NHWC"
  padding, explicit = _padding_attrs(padding, data_format, "conv2d")
  return gen.conv2d(input, filter,
                    strides=_spatial_list(strides, "strides", "conv2d", data_format),
                    padding=padding, explicit_paddings=explicit, data_format=data_format,
                    dilations=_spatial_list(dilations, "dilations", "conv2d", data_format),
                    name=name)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None,  # pylint: disable=redefined-builtin
                          padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
                          dilations=None, name=None, filters=None):
  del use_cudnn_on_gpu
  filter = filters if filter is None else filter
  padding, explicit = _padding_attrs(padding, data_format, "conv2d_backprop_input")
  return gen.conv2d_backprop_input(
      input_sizes, filter, out_backprop,
      strides=_spatial_list(strides, "strides", "conv2d_backprop_input", data_format),
      padding=padding, explicit_paddings=explicit, data_format=data_format,
      dilations=_spatial_list(dilations, "dilations", "conv2d_backprop_input", data_format),
      name=name)


def conv2d_transpose(value=None, filter=None, output_shape=None, strides=None,  # pylint: disable=redefined-builtin
                     padding="SAME", data_format="NHWC", name=None, input=None, filters=None,
                     dilations=None):
  """The transpose (gradient) of conv2d: filter is [height, width, output_channels,
  in_channels]."""
  value = input if value is None else value
  filter = filters if filter is None else filter
  with ops.name_scope(name, "conv2d_transpose", [value, filter, output_shape]) as name:
    output_shape = ops.convert_to_tensor(output_shape, dtype=dtypes.int32, name="output_shape")
    return conv2d_backprop_input(output_shape, filter, value, strides, padding,
                                 data_format=data_format, dilations=dilations, name=name)


def depthwise_conv2d_native(input, filter, strides, padding, data_format="NHWC",  # pylint: disable=redefined-builtin
                            dilations=None, name=None):
  padding, explicit = _padding_attrs(padding, data_format, "depthwise_conv2d_native")
  return gen.depthwise_conv2d_native(
      input, filter, strides=_spatial_list(strides, "strides", "depthwise_conv2d", data_format),
      padding=padding, explicit_paddings=explicit, data_format=data_format,
      dilations=_spatial_list(dilations, "dilations", "depthwise_conv2d", data_format),
      name=name)


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None,  # pylint: disable=redefined-builtin
                     data_format=None, dilations=None):
  """Each input channel convolved with its own filter[:, :, c, :] (channel multiplier the
  last filter dimension). rate (or dilations) dilates the filter."""
  data_format = data_format or "NHWC"
  if rate is not None and dilations is not None:
    raise ValueError("depthwise_conv2d: give rate or dilations, not both")
  rate = dilations if rate is None else rate
  with ops.name_scope(name, "depthwise", [input, filter]) as name:
    return depthwise_conv2d_native(input, filter, strides, padding, data_format=data_format,
                                   dilations=rate, name=name)


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides, padding, rate=None,  # pylint: disable=redefined-builtin
                     name=None, data_format=None, dilations=None):
  """A depthwise convolution ([h, w, in, multiplier]) followed by a 1x1 convolution
  ([1, 1, in * multiplier, out]), as TF computes it."""
  data_format = data_format or "NHWC"
  with ops.name_scope(name, "separable_conv2d",
                      [input, depthwise_filter, pointwise_filter]) as name:
    depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding, rate=rate,
                                 name="depthwise", data_format=data_format,
                                 dilations=dilations)
    return conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], "VALID", data_format=data_format,
                  name=name)


def _pool(op, op_name, value, ksize, strides, padding, data_format, name):
  data_format = data_format or "NHWC"
  if isinstance(padding, str):
    padding = padding.upper()
  if padding not in ("SAME", "VALID"):
    raise ValueError("%s: padding must be 'SAME' or 'VALID', got %r" % (op_name, padding))
  return op(value, ksize=_spatial_list(ksize, "ksize", op_name, data_format),
            strides=_spatial_list(strides, "strides", op_name, data_format), padding=padding,
            data_format=data_format, name=name)


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # pylint: disable=redefined-builtin
  """The maximum of each ksize window, stepping by strides (ints, 2 or 4 values)."""
  value = input if value is None else value
  return _pool(gen.max_pool, "max_pool", value, ksize, strides, padding, data_format, name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None, input=None):  # pylint: disable=redefined-builtin
  """The mean of each ksize window over its in-bounds elements."""
  value = input if value is None else value
  return _pool(gen.avg_pool, "avg_pool", value, ksize, strides, padding, data_format, name)


max_pool2d = max_pool
avg_pool2d = avg_pool


def convolution(input, filter, padding, strides=None, dilation_rate=None, name=None,  # pylint: disable=redefined-builtin
                data_format=None, filters=None, dilations=None):
  """tf.nn.convolution for 2-D spatial inputs (4-D tensors)."""
  filter = filters if filter is None else filter
  dilation_rate = dilations if dilation_rate is None else dilation_rate
  rank = ops.convert_to_tensor(input).get_shape().ndims
  if rank is not None and rank != 4:
    raise NotImplementedError("tf.nn.convolution: recflow has 2-D convolutions only (a 4-D "
                              "input), got rank %d" % rank)
  return conv2d(input, filter, strides or 1, padding, data_format=data_format or "NHWC",
                dilations=dilation_rate, name=name)
