"""TF-slim's layers (tf.contrib.layers): conv2d, separable_conv2d, fully_connected, batch_norm,
max_pool2d, avg_pool2d, flatten, dropout, one_hot_encoding, softmax, bias_add, repeat, stack.

Each layer opens a variable scope (`scope`, or a default name made unique: "Conv",
"Conv_1", ...) and makes its parameters with `model_variable`, so they are in
MODEL_VARIABLES and obey arg_scope's `device`. Every function takes arg_scope
arguments. `outputs_collections` names collections the output is added to, with
the layer's scope name as its alias (utils.convert_collection_to_dict turns them
into end points). Defaults are TF 1.15's: relu activations, Glorot-uniform weights,
zero biases, no bias when a normalizer_fn is given.

Two-dimensional convolutions and pooling only (4-D inputs, NHWC or NCHW).
"""

import functools

from recflow.contrib.framework import variables
from recflow.contrib.framework.arg_scope import add_arg_scope
from recflow.contrib.layers import initializers
from recflow.contrib.layers import utils
from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.layers import core as core_layers
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import init_ops
from recflow.ops import math_ops
from recflow.ops import nn_ops
from recflow.ops import state_ops
from recflow.ops import variable_scope

__all__ = ["avg_pool2d", "batch_norm", "bias_add", "conv2d", "convolution", "convolution2d",
           "dropout", "flatten", "fully_connected", "linear", "max_pool2d",
           "one_hot_encoding", "relu", "relu6", "repeat", "separable_conv2d",
           "separable_convolution2d", "softmax", "stack"]

DATA_FORMAT_NHWC = "NHWC"
DATA_FORMAT_NCHW = "NCHW"


def _data_format(data_format, layer):
  if data_format is None:
    return DATA_FORMAT_NHWC
  if data_format not in (DATA_FORMAT_NHWC, DATA_FORMAT_NCHW):
    raise ValueError("%s: data_format must be 'NHWC' or 'NCHW', got %r" % (layer, data_format))
  return data_format


def _padding(padding, layer):
  if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
    raise ValueError("%s: padding must be 'SAME' or 'VALID', got %r" % (layer, padding))
  return padding.upper()


def _four_d(inputs, layer):
  inputs = ops.convert_to_tensor(inputs)
  rank = inputs.get_shape().ndims
  if rank is None:
    raise ValueError("%s: the rank of the input %s must be known (4-D)" % (layer, inputs.name))
  if rank != 4:
    raise ValueError("%s: recflow's slim layers convolve and pool 4-D inputs ([batch, height, "
                     "width, channels] or NCHW); %s has rank %d" % (layer, inputs.name, rank))
  return inputs


def _channels(inputs, data_format, layer):
  dim = inputs.get_shape()[1 if data_format == DATA_FORMAT_NCHW else -1].value
  if dim is None:
    raise ValueError("%s: the number of channels of %s must be known statically (shape %s)"
                     % (layer, inputs.name, inputs.get_shape()))
  return dim


def _nhwc_list(h, w, data_format, edge=1):
  return [edge, edge, h, w] if data_format == DATA_FORMAT_NCHW else [edge, h, w, edge]


def _model_variable(name, shape, dtype, initializer, regularizer, variables_collections,
                    trainable):
  return variables.model_variable(
      name, shape=shape, dtype=dtype, initializer=initializer, regularizer=regularizer,
      collections=utils.get_variable_collections(variables_collections, name),
      trainable=trainable)


def _finish(outputs, normalizer_fn, normalizer_params, activation_fn, outputs_collections,
            alias):
  if normalizer_fn is not None:
    outputs = normalizer_fn(outputs, **(normalizer_params or {}))
  if activation_fn is not None:
    outputs = activation_fn(outputs)
  return utils.collect_named_outputs(outputs_collections, alias, outputs)


def _biases(outputs, num, dtype, normalizer_fn, biases_initializer, biases_regularizer,
            variables_collections, trainable, data_format):
  if normalizer_fn is not None or biases_initializer is None:
    return outputs
  biases = _model_variable("biases", [num], dtype, biases_initializer, biases_regularizer,
                           variables_collections, trainable)
  return nn_ops.bias_add(outputs, biases, data_format=data_format)


@add_arg_scope
def convolution2d(inputs, num_outputs, kernel_size, stride=1, padding="SAME", data_format=None,
                  rate=1, activation_fn=nn_ops.relu, normalizer_fn=None, normalizer_params=None,
                  weights_initializer=initializers.xavier_initializer(),
                  weights_regularizer=None,
                  biases_initializer=init_ops.zeros_initializer(), biases_regularizer=None,
                  reuse=None, variables_collections=None, outputs_collections=None,
                  trainable=True, scope=None):
  """A 2-D convolution with `num_outputs` filters of kernel_size ([h, w] or an int),
  variables "weights" [h, w, in, num_outputs] and "biases" [num_outputs], then
  normalizer_fn and activation_fn."""
  data_format = _data_format(data_format, "conv2d")
  padding = _padding(padding, "conv2d")
  if not isinstance(num_outputs, int) or isinstance(num_outputs, bool) or num_outputs <= 0:
    raise ValueError("conv2d: num_outputs must be a positive int, got %r" % (num_outputs,))
  with variable_scope.variable_scope(scope, "Conv", [inputs], reuse=reuse) as sc:
    inputs = _four_d(inputs, "conv2d")
    kh, kw = utils.two_element_tuple(kernel_size)
    sh, sw = utils.two_element_tuple(stride)
    rh, rw = utils.two_element_tuple(rate)
    if (rh > 1 or rw > 1) and (sh > 1 or sw > 1):
      raise ValueError("conv2d: stride > 1 is not supported in conjunction with rate > 1 "
                       "(stride %r, rate %r)" % (stride, rate))
    dtype = inputs.dtype.base_dtype
    weights = _model_variable("weights", [kh, kw, _channels(inputs, data_format, "conv2d"),
                                          num_outputs], dtype, weights_initializer,
                              weights_regularizer, variables_collections, trainable)
    outputs = nn_ops.conv2d(inputs, weights, _nhwc_list(sh, sw, data_format), padding,
                            data_format=data_format,
                            dilations=_nhwc_list(rh, rw, data_format))
    outputs = _biases(outputs, num_outputs, dtype, normalizer_fn, biases_initializer,
                      biases_regularizer, variables_collections, trainable, data_format)
    return _finish(outputs, normalizer_fn, normalizer_params, activation_fn,
                   outputs_collections, sc.name)


conv2d = convolution2d
convolution = convolution2d


@add_arg_scope
def separable_convolution2d(inputs, num_outputs, kernel_size, depth_multiplier=1, stride=1,
                            padding="SAME", data_format=DATA_FORMAT_NHWC, rate=1,
                            activation_fn=nn_ops.relu, normalizer_fn=None,
                            normalizer_params=None,
                            weights_initializer=initializers.xavier_initializer(),
                            pointwise_initializer=None, weights_regularizer=None,
                            biases_initializer=init_ops.zeros_initializer(),
                            biases_regularizer=None, reuse=None, variables_collections=None,
                            outputs_collections=None, trainable=True, scope=None):
  """A depthwise convolution ("depthwise_weights" [h, w, in, depth_multiplier]) followed,
  when num_outputs is not None, by a 1x1 convolution ("pointwise_weights"
  [1, 1, in * depth_multiplier, num_outputs]); num_outputs None gives the depthwise part
  only, as MobileNet uses it."""
  data_format = _data_format(data_format, "separable_conv2d")
  padding = _padding(padding, "separable_conv2d")
  with variable_scope.variable_scope(scope, "SeparableConv2d", [inputs], reuse=reuse) as sc:
    inputs = _four_d(inputs, "separable_conv2d")
    kh, kw = utils.two_element_tuple(kernel_size)
    sh, sw = utils.two_element_tuple(stride)
    rh, rw = utils.two_element_tuple(rate)
    dtype = inputs.dtype.base_dtype
    in_channels = _channels(inputs, data_format, "separable_conv2d")
    depthwise = _model_variable("depthwise_weights", [kh, kw, in_channels, depth_multiplier],
                                dtype, weights_initializer, weights_regularizer,
                                variables_collections, trainable)
    strides = _nhwc_list(sh, sw, data_format)
    rates = [rh, rw] if rh > 1 or rw > 1 else None
    if num_outputs is not None:
      pointwise = _model_variable(
          "pointwise_weights", [1, 1, in_channels * depth_multiplier, num_outputs], dtype,
          pointwise_initializer or weights_initializer, weights_regularizer,
          variables_collections, trainable)
      outputs = nn_ops.separable_conv2d(inputs, depthwise, pointwise, strides, padding,
                                        rate=rates, data_format=data_format)
      num = num_outputs
    else:
      outputs = nn_ops.depthwise_conv2d(inputs, depthwise, strides, padding, rate=rates,
                                        data_format=data_format)
      num = in_channels * depth_multiplier
    outputs = _biases(outputs, num, dtype, normalizer_fn, biases_initializer,
                      biases_regularizer, variables_collections, trainable, data_format)
    return _finish(outputs, normalizer_fn, normalizer_params, activation_fn,
                   outputs_collections, sc.name)


separable_conv2d = separable_convolution2d


@add_arg_scope
def fully_connected(inputs, num_outputs, activation_fn=nn_ops.relu, normalizer_fn=None,
                    normalizer_params=None,
                    weights_initializer=initializers.xavier_initializer(),
                    weights_regularizer=None, biases_initializer=init_ops.zeros_initializer(),
                    biases_regularizer=None, reuse=None, variables_collections=None,
                    outputs_collections=None, trainable=True, scope=None):
  """inputs [..., in] times "weights" [in, num_outputs] plus "biases", then normalizer_fn
  and activation_fn. Inputs of rank > 2 are multiplied along their last dimension."""
  if not isinstance(num_outputs, int) or isinstance(num_outputs, bool):
    raise ValueError("num_outputs type should be an int, got %s." % type(num_outputs))
  with variable_scope.variable_scope(scope, "fully_connected", [inputs], reuse=reuse) as sc:
    inputs = ops.convert_to_tensor(inputs)
    in_dim = utils.last_dimension(inputs.get_shape(), min_rank=2)
    dtype = inputs.dtype.base_dtype
    weights = _model_variable("weights", [in_dim, num_outputs], dtype, weights_initializer,
                              weights_regularizer, variables_collections, trainable)
    shape = inputs.get_shape()
    if shape.ndims == 2:
      outputs = math_ops.matmul(inputs, weights)
    else:
      flat = gen.reshape(inputs, [-1, in_dim])
      outputs = math_ops.matmul(flat, weights)
      lead = shape.as_list()[:-1]
      if all(d is not None for d in lead):
        outputs = gen.reshape(outputs, lead + [num_outputs])
      else:
        outputs = gen.reshape(outputs, array_ops.concat(
            [array_ops.shape(inputs)[:-1], constant_op.constant([num_outputs], dtypes.int32)],
            0))
        outputs.set_shape(lead + [num_outputs])
    if normalizer_fn is None and biases_initializer is not None:
      biases = _model_variable("biases", [num_outputs], dtype, biases_initializer,
                               biases_regularizer, variables_collections, trainable)
      outputs = nn_ops.bias_add(outputs, biases)
    return _finish(outputs, normalizer_fn, normalizer_params, activation_fn,
                   outputs_collections, sc.name)


linear = functools.partial(fully_connected, activation_fn=None)
relu = functools.partial(fully_connected, activation_fn=nn_ops.relu)
relu6 = functools.partial(fully_connected, activation_fn=nn_ops.relu6)


def _training(is_training):
  try:
    return core_layers._training_tensor(is_training)  # pylint: disable=protected-access
  except TypeError:
    raise TypeError("is_training must be a Python bool or a bool tensor, got %r"
                    % (is_training,))


@add_arg_scope
def batch_norm(inputs, decay=0.999, center=True, scale=False, epsilon=0.001, activation_fn=None,
               param_initializers=None, param_regularizers=None,
               updates_collections=ops.GraphKeys.UPDATE_OPS, is_training=True, reuse=None,
               variables_collections=None, outputs_collections=None, trainable=True,
               batch_weights=None, fused=None, data_format=DATA_FORMAT_NHWC,
               zero_debias_moving_mean=False, scope=None, renorm=False, renorm_clipping=None,
               renorm_decay=0.99, adjustment=None):
  """Batch normalization over every axis but the channels (the last, or axis 1 with NCHW).

  Variables "beta" (center), "gamma" (scale), "moving_mean" and "moving_variance" (not
  trainable). Training (is_training True, or a bool tensor that is true) normalizes with
  the batch's statistics and moves the moving averages by (1 - decay) toward them: the
  update ops go to updates_collections (run them with the train op; slim's
  create_train_op does), or, with updates_collections=None, run before the output.
  Inference uses the moving averages. `fused` is accepted; recflow computes TF's non-fused
  formula (batch variance without Bessel's correction)."""
  del fused
  if batch_weights is not None:
    raise NotImplementedError("batch_norm(batch_weights=...) is not supported by recflow")
  if zero_debias_moving_mean:
    raise NotImplementedError("batch_norm(zero_debias_moving_mean=True) is not supported by "
                              "recflow")
  if renorm or renorm_clipping is not None or adjustment is not None:
    raise NotImplementedError("batch_norm: renorm and adjustment are not supported by recflow")
  del renorm_decay
  data_format = _data_format(data_format, "batch_norm")
  with variable_scope.variable_scope(scope, "BatchNorm", [inputs], reuse=reuse) as sc:
    inputs = ops.convert_to_tensor(inputs)
    shape = inputs.get_shape()
    rank = shape.ndims
    if rank is None:
      raise ValueError("Inputs %s has undefined rank." % inputs.name)
    if rank < 2:
      raise ValueError("batch_norm: inputs %s must have rank >= 2, got %d" % (inputs.name, rank))
    axis = 1 if data_format == DATA_FORMAT_NCHW and rank > 2 else rank - 1
    channels = shape[axis].value
    if channels is None:
      raise ValueError("Inputs %s has undefined channels dimension %s." % (inputs.name, shape))
    dtype = inputs.dtype.base_dtype
    inits = param_initializers or {}
    regs = param_regularizers or {}
    beta = gamma = None
    if center:
      beta = _model_variable("beta", [channels], dtype,
                             inits.get("beta", init_ops.zeros_initializer()), regs.get("beta"),
                             variables_collections, trainable)
    if scale:
      gamma = _model_variable("gamma", [channels], dtype,
                              inits.get("gamma", init_ops.ones_initializer()),
                              regs.get("gamma"), variables_collections, trainable)
    moving_mean = _model_variable("moving_mean", [channels], dtype,
                                  inits.get("moving_mean", init_ops.zeros_initializer()), None,
                                  variables_collections, False)
    moving_variance = _model_variable("moving_variance", [channels], dtype,
                                      inits.get("moving_variance", init_ops.ones_initializer()),
                                      None, variables_collections, False)
    training = _training(is_training)
    if training is False:
      mean, variance = moving_mean.read_value(), moving_variance.read_value()
    else:
      axes = [i for i in range(rank) if i != axis]
      batch_mean, batch_variance = nn_ops.moments(inputs, axes)
      one_minus_decay = ops.convert_to_tensor(1.0 - decay, dtype=dtype)
      if training is not True:
        one_minus_decay = gen.select_v2(training, one_minus_decay,
                                        array_ops.zeros_like(one_minus_decay))
      with ops.name_scope(None, "AssignMovingAvg"):
        update_mean = state_ops.assign_sub(
            moving_mean, gen.mul(gen.sub(moving_mean.read_value(), batch_mean),
                                 one_minus_decay))
      with ops.name_scope(None, "AssignMovingAvg_1"):
        update_variance = state_ops.assign_sub(
            moving_variance, gen.mul(gen.sub(moving_variance.read_value(), batch_variance),
                                     one_minus_decay))
      if updates_collections is None:
        with ops.control_dependencies([update_mean, update_variance]):
          batch_mean = array_ops.identity(batch_mean)
          batch_variance = array_ops.identity(batch_variance)
      else:
        ops.add_to_collections(updates_collections, update_mean)
        ops.add_to_collections(updates_collections, update_variance)
      if training is True:
        mean, variance = batch_mean, batch_variance
      else:
        mean = gen.select_v2(training, batch_mean, moving_mean.read_value())
        variance = gen.select_v2(training, batch_variance, moving_variance.read_value())
    if axis != rank - 1:
      bshape = [1] * rank
      bshape[axis] = channels
      mean, variance = gen.reshape(mean, bshape), gen.reshape(variance, bshape)
      beta = gen.reshape(beta, bshape) if beta is not None else None
      gamma = gen.reshape(gamma, bshape) if gamma is not None else None
    outputs = nn_ops.batch_normalization(inputs, mean, variance, beta, gamma, epsilon)
    outputs.set_shape(shape)
    if activation_fn is not None:
      outputs = activation_fn(outputs)
    return utils.collect_named_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def bias_add(inputs, activation_fn=None, initializer=init_ops.zeros_initializer(),
             regularizer=None, reuse=None, variables_collections=None, outputs_collections=None,
             trainable=True, data_format=DATA_FORMAT_NHWC, scope=None):
  """inputs plus a "biases" variable over the channels, then activation_fn."""
  data_format = _data_format(data_format, "bias_add")
  with variable_scope.variable_scope(scope, "BiasAdd", [inputs], reuse=reuse) as sc:
    inputs = ops.convert_to_tensor(inputs)
    rank = inputs.get_shape().ndims
    axis = 1 if data_format == DATA_FORMAT_NCHW and rank and rank > 2 else -1
    num = inputs.get_shape()[axis].value
    if num is None:
      raise ValueError("bias_add: the channel dimension of %s must be known" % inputs.name)
    biases = _model_variable("biases", [num], inputs.dtype.base_dtype, initializer,
                             regularizer, variables_collections, trainable)
    outputs = nn_ops.bias_add(inputs, biases, data_format=data_format)
    if activation_fn is not None:
      outputs = activation_fn(outputs)
    return utils.collect_named_outputs(outputs_collections, sc.name, outputs)


def _pool(fn, default_name, layer, inputs, kernel_size, stride, padding, data_format,
          outputs_collections, scope):
  data_format = _data_format(data_format, layer)
  padding = _padding(padding, layer)
  with ops.name_scope(scope, default_name, [inputs]) as sc:
    inputs = _four_d(inputs, layer)
    kh, kw = utils.two_element_tuple(kernel_size)
    sh, sw = utils.two_element_tuple(stride)
    outputs = fn(inputs, _nhwc_list(kh, kw, data_format), _nhwc_list(sh, sw, data_format),
                 padding, data_format=data_format)
    return utils.collect_named_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def max_pool2d(inputs, kernel_size, stride=2, padding="VALID", data_format=DATA_FORMAT_NHWC,
               outputs_collections=None, scope=None):
  """The maximum of each kernel_size window, stepping by stride."""
  return _pool(nn_ops.max_pool, "MaxPool2D", "max_pool2d", inputs, kernel_size, stride,
               padding, data_format, outputs_collections, scope)


@add_arg_scope
def avg_pool2d(inputs, kernel_size, stride=2, padding="VALID", data_format=DATA_FORMAT_NHWC,
               outputs_collections=None, scope=None):
  """The mean of each kernel_size window (its in-bounds part), stepping by stride."""
  return _pool(nn_ops.avg_pool, "AvgPool2D", "avg_pool2d", inputs, kernel_size, stride,
               padding, data_format, outputs_collections, scope)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True, outputs_collections=None,
            scope=None, seed=None):
  """Keeps each input with probability keep_prob (scaled by 1 / keep_prob) when training;
  the identity otherwise. is_training may be a bool tensor."""
  with variable_scope.variable_scope(scope, "Dropout", [inputs]) as sc:
    inputs = ops.convert_to_tensor(inputs)
    outputs = core_layers.dropout(inputs, rate=1 - keep_prob, noise_shape=noise_shape,
                                  seed=seed, training=_training(is_training))
    return utils.collect_named_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None):
  """[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]."""
  with ops.name_scope(scope, "Flatten", [inputs]) as sc:
    inputs = ops.convert_to_tensor(inputs)
    if inputs.get_shape().ndims is not None and inputs.get_shape().ndims < 2:
      raise ValueError("Inputs must have a least 2 dimensions: %s has shape %s"
                       % (inputs.name, inputs.get_shape()))
    outputs = core_layers.Flatten().call(inputs)
    return utils.collect_named_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def one_hot_encoding(labels, num_classes, on_value=1.0, off_value=0.0, outputs_collections=None,
                     scope=None):
  """labels [batch] -> [batch, num_classes] with on_value at each label."""
  with ops.name_scope(scope, "OneHotEncoding", [labels, num_classes]) as sc:
    labels = ops.convert_to_tensor(labels)
    if labels.dtype == dtypes.int32:
      labels = math_ops.cast(labels, dtypes.int64)
    outputs = array_ops.one_hot(labels, num_classes, on_value=on_value, off_value=off_value)
    return utils.collect_named_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def softmax(logits, scope=None):
  """Softmax over the last dimension, for logits of any rank >= 2."""
  with variable_scope.variable_scope(scope, "softmax", [logits]):
    logits = ops.convert_to_tensor(logits)
    shape = logits.get_shape()
    num = utils.last_dimension(shape, min_rank=2)
    if shape.ndims == 2:
      return nn_ops.softmax(logits)
    flat = gen.reshape(logits, [-1, num])
    out = gen.reshape(nn_ops.softmax(flat), array_ops.shape(logits))
    out.set_shape(shape)
    return out


def _layer_name(layer):
  if hasattr(layer, "__name__"):
    return layer.__name__
  if hasattr(layer, "func") and hasattr(layer.func, "__name__"):
    return layer.func.__name__
  return None


def repeat(inputs, repetitions, layer, *args, **kwargs):
  """layer applied repetitions times, in scopes "<scope>/<scope>_1", "_2", ... (scope
  defaults to the layer's name), e.g. repeat(net, 2, conv2d, 64, [3, 3], scope='conv1')."""
  scope = kwargs.pop("scope", None)
  with variable_scope.variable_scope(scope, "Repeat", [inputs]):
    inputs = ops.convert_to_tensor(inputs)
    if scope is None:
      scope = _layer_name(layer) or "repeat"
    outputs = inputs
    for i in range(repetitions):
      kwargs["scope"] = scope + "_" + str(i + 1)
      outputs = layer(outputs, *args, **kwargs)
    return outputs


def stack(inputs, layer, stack_args, **kwargs):
  """layer applied once per element of stack_args (a tuple of positional arguments, or one
  argument), in scopes "<scope>/<scope>_1", ..., e.g.
  stack(x, fully_connected, [32, 64, 128], scope='fc')."""
  scope = kwargs.pop("scope", None)
  if not isinstance(stack_args, (list, tuple)):
    raise ValueError("stack_args need to be a list or tuple")
  with variable_scope.variable_scope(scope, "Stack", [inputs]):
    inputs = ops.convert_to_tensor(inputs)
    if scope is None:
      scope = _layer_name(layer) or "stack"
    outputs = inputs
    for i, arg in enumerate(stack_args):
      kwargs["scope"] = scope + "_" + str(i + 1)
      if isinstance(arg, tuple):
        outputs = layer(outputs, *arg, **kwargs)
      else:
        outputs = layer(outputs, arg, **kwargs)
    return outputs
