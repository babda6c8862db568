"""tf.layers.Dense/dense, Dropout/dropout, Flatten/flatten (TensorFlow 1.15)."""

import numbers

import numpy as np

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape
from recflow.layers import base
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import init_ops
from recflow.ops import math_ops
from recflow.ops import nn_ops


class Dense(base.Layer):
  """outputs = activation(inputs @ kernel + bias); variables "<scope>/kernel"
  [input_dim, units] and "<scope>/bias" [units]."""

  def __init__(self, units, activation=None, use_bias=True, kernel_initializer=None,
               bias_initializer=init_ops.zeros_initializer(), kernel_regularizer=None,
               bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
               bias_constraint=None, trainable=True, name=None, **kwargs):
    super(Dense, self).__init__(trainable=trainable, name=name,
                                activity_regularizer=activity_regularizer, **kwargs)
    if isinstance(units, bool) or not isinstance(units, (numbers.Integral, np.integer)):
      raise TypeError("units must be a positive int, got %r" % (units,))
    if units <= 0:
      raise ValueError("units must be a positive int, got %d" % units)
    if activation is not None and not callable(activation):
      raise TypeError("activation must be callable or None, got %r" % (activation,))
    self.units = int(units)
    self.activation = activation
    self.use_bias = use_bias
    self.kernel_initializer = kernel_initializer
    self.bias_initializer = bias_initializer
    self.kernel_regularizer = kernel_regularizer
    self.bias_regularizer = bias_regularizer
    self.kernel_constraint = kernel_constraint
    self.bias_constraint = bias_constraint
    self.kernel = None
    self.bias = None

  def build(self, input_shape):
    input_shape = tensor_shape.TensorShape(input_shape)
    if input_shape.ndims is None or input_shape.ndims < 2:
      raise ValueError("Input 0 of layer %s is incompatible with the layer: expected "
                       "min_ndim=2, found shape %s" % (self.name, input_shape))
    last = input_shape[-1].value
    if last is None:
      raise ValueError("The last dimension of the inputs to `Dense` should be defined. "
                       "Found `None`.")
    self.kernel = self.add_weight("kernel", shape=[last, self.units],
                                  initializer=self.kernel_initializer,
                                  regularizer=self.kernel_regularizer,
                                  constraint=self.kernel_constraint, trainable=True)
    if self.use_bias:
      self.bias = self.add_weight("bias", shape=[self.units], initializer=self.bias_initializer,
                                  regularizer=self.bias_regularizer,
                                  constraint=self.bias_constraint, trainable=True)
    self.built = True

  def call(self, inputs):
    inputs = math_ops.cast(inputs, self.dtype)
    shape = inputs.get_shape()
    if shape.ndims > 2:
      flat = gen.reshape(inputs, [-1, shape[-1].value])
      out = math_ops.matmul(flat, self.kernel)
      out_shape = array_ops.concat([array_ops.shape(inputs)[:-1], [self.units]], 0)
      outputs = gen.reshape(out, out_shape)
      outputs.set_shape(shape[:-1].concatenate([self.units]))
    else:
      outputs = math_ops.matmul(inputs, self.kernel)
    if self.use_bias:
      outputs = nn_ops.bias_add(outputs, self.bias)
    if self.activation is not None:
      outputs = self.activation(outputs)
    return outputs


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer=init_ops.zeros_initializer(), kernel_regularizer=None,
          bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
          bias_constraint=None, trainable=True, name=None, reuse=None):
  layer = Dense(units, activation=activation, use_bias=use_bias,
                kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
                kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
                activity_regularizer=activity_regularizer, kernel_constraint=kernel_constraint,
                bias_constraint=bias_constraint, trainable=trainable, name=name,
                _scope=name, _reuse=reuse)
  return layer.apply(inputs)


def _training_tensor(training):
  """A Python bool as is; a tensor as a bool tensor."""
  if isinstance(training, (bool, np.bool_)):
    return bool(training)
  if isinstance(training, ops.Tensor) or hasattr(training, "_as_graph_element"):
    t = ops.convert_to_tensor(training, name="training")
    if t.dtype.base_dtype != dtypes.bool:
      raise TypeError("training must be a Python bool or a bool tensor, got %s" %
                      t.dtype.name)
    return t
  raise TypeError("training must be a Python bool or a bool tensor, got %r" % (training,))


class Dropout(base.Layer):
  """Zeroes a fraction `rate` of the inputs and scales the rest by 1/(1 - rate)
  when training. `training` may be a bool tensor: recflow then drops with rate
  where(training, rate, 0), which is the identity when false (no cond needed)."""

  def __init__(self, rate=0.5, noise_shape=None, seed=None, name=None, **kwargs):
    super(Dropout, self).__init__(name=name, **kwargs)
    if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
      raise ValueError("rate must be a scalar in [0, 1), got %r" % (rate,))
    self.rate = rate
    self.noise_shape = noise_shape
    self.seed = seed

  def call(self, inputs, training=False):
    training = _training_tensor(training)
    if training is False:
      return array_ops.identity(inputs)
    if training is True:
      rate = self.rate
    else:
      rate_t = ops.convert_to_tensor(self.rate, dtype=inputs.dtype, name="rate")
      rate = gen.select(training, rate_t, array_ops.zeros_like(rate_t))
    return nn_ops.dropout(inputs, noise_shape=self.noise_shape, seed=self.seed, rate=rate)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
  layer = Dropout(rate, noise_shape=noise_shape, seed=seed, name=name)
  return layer.apply(inputs, training=training)


class Flatten(base.Layer):
  """[batch, d1, d2, ...] -> [batch, d1 * d2 * ...]."""

  def __init__(self, data_format=None, **kwargs):
    super(Flatten, self).__init__(**kwargs)
    if data_format not in (None, "channels_last", "channels_first"):
      raise ValueError("data_format must be 'channels_last' or 'channels_first', got %r" %
                       (data_format,))
    self.data_format = data_format

  def call(self, inputs):
    shape = inputs.get_shape()
    if self.data_format == "channels_first" and shape.ndims is not None and shape.ndims > 2:
      inputs = array_ops.transpose(inputs, [0] + list(range(2, shape.ndims)) + [1])
      shape = inputs.get_shape()
    if shape.ndims is not None and shape.ndims <= 1:
      return gen.expand_dims(inputs, 1)
    rest = shape[1:].num_elements() if shape.ndims is not None else None
    if rest is not None:
      out = gen.reshape(inputs, [-1, rest])
      out.set_shape([shape[0].value, rest])
      return out
    batch = array_ops.shape(inputs)[:1]
    return gen.reshape(inputs, array_ops.concat(
        [batch, constant_op.constant([-1], dtypes.int32)], 0))


def flatten(inputs, name=None, data_format="channels_last"):
  return Flatten(name=name, data_format=data_format).apply(inputs)
