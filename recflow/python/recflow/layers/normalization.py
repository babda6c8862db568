"""tf.layers.BatchNormalization / batch_normalization (TensorFlow 1.15).

Variables "<scope>/gamma", "beta", "moving_mean", "moving_variance" (the
moving ones not trainable); in training, the moving averages are updated by
ops in UPDATE_OPS (run them with the train op: tf.control_dependencies on
tf.get_collection(tf.GraphKeys.UPDATE_OPS)). Always TF's non-fused
computation (moments over the batch, biased variance). `training` may be a
bool tensor: recflow picks the batch or moving statistics with a Select and
scales the update by where(training, 1 - momentum, 0), so no cond is needed.
"""

import numbers

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape
from recflow.layers import base
from recflow.layers import core
from recflow.ops import gen_ops as gen
from recflow.ops import init_ops
from recflow.ops import math_ops
from recflow.ops import nn_ops
from recflow.ops import state_ops


class BatchNormalization(base.Layer):
  """Normalizes over every axis but `axis` with batch statistics (training) or
  the moving averages (inference)."""

  def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
               beta_initializer=init_ops.zeros_initializer(),
               gamma_initializer=init_ops.ones_initializer(),
               moving_mean_initializer=init_ops.zeros_initializer(),
               moving_variance_initializer=init_ops.ones_initializer(), beta_regularizer=None,
               gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
               renorm=False, renorm_clipping=None, renorm_momentum=0.99, fused=None,
               trainable=True, virtual_batch_size=None, adjustment=None, name=None, **kwargs):
    super(BatchNormalization, self).__init__(name=name, trainable=trainable, **kwargs)
    if renorm or renorm_clipping is not None:
      raise NotImplementedError("batch renormalization is not supported by recflow yet")
    if virtual_batch_size is not None:
      raise NotImplementedError("virtual_batch_size is not supported by recflow yet")
    if adjustment is not None:
      raise NotImplementedError("adjustment is not supported by recflow yet")
    if isinstance(axis, (list, tuple)):
      self.axis = list(axis)
    elif isinstance(axis, numbers.Integral) and not isinstance(axis, bool):
      self.axis = [int(axis)]
    else:
      raise TypeError("axis must be an int or a list of ints, got %r" % (axis,))
    if not isinstance(momentum, numbers.Real) or not 0 <= momentum <= 1:
      raise ValueError("momentum must be a number in [0, 1], got %r" % (momentum,))
    if not isinstance(epsilon, numbers.Real) or epsilon < 0:
      raise ValueError("epsilon must be a non-negative number, got %r" % (epsilon,))
    self.momentum = float(momentum)
    self.epsilon = float(epsilon)
    self.center = center
    self.scale = scale
    self.beta_initializer = beta_initializer
    self.gamma_initializer = gamma_initializer
    self.moving_mean_initializer = moving_mean_initializer
    self.moving_variance_initializer = moving_variance_initializer
    self.beta_regularizer = beta_regularizer
    self.gamma_regularizer = gamma_regularizer
    self.beta_constraint = beta_constraint
    self.gamma_constraint = gamma_constraint
    self.fused = fused  # accepted; recflow computes the non-fused form

  def build(self, input_shape):
    input_shape = tensor_shape.TensorShape(input_shape)
    ndims = input_shape.ndims
    if ndims is None:
      raise ValueError("Input has undefined rank: %s" % input_shape)
    axis = []
    for a in self.axis:
      if not -ndims <= a < ndims:
        raise ValueError("Invalid axis: %d for input of rank %d" % (a, ndims))
      axis.append(a % ndims)
    if len(set(axis)) != len(axis):
      raise ValueError("Duplicate axis: %s" % self.axis)
    self.axis = axis
    param_shape = []
    for a in axis:
      if input_shape[a].value is None:
        raise ValueError("Input has undefined `axis` dimension. Input shape: %s" % input_shape)
      param_shape.append(input_shape[a].value)
    if len(axis) == 1:
      param_shape = param_shape[:1]
    dtype = self.dtype if self.dtype in (dtypes.float32, dtypes.float64) else dtypes.float32
    self.gamma = self.add_weight("gamma", param_shape, dtype, self.gamma_initializer,
                                 self.gamma_regularizer, True,
                                 self.gamma_constraint) if self.scale else None
    self.beta = self.add_weight("beta", param_shape, dtype, self.beta_initializer,
                                self.beta_regularizer, True,
                                self.beta_constraint) if self.center else None
    self.moving_mean = self.add_weight("moving_mean", param_shape, dtype,
                                       self.moving_mean_initializer, trainable=False)
    self.moving_variance = self.add_weight("moving_variance", param_shape, dtype,
                                           self.moving_variance_initializer, trainable=False)
    self.built = True

  def _assign_moving_average(self, variable, value, decay):
    with ops.name_scope(None, "AssignMovingAvg", [variable, value, decay]) as scope:
      delta = gen.mul(gen.sub(variable.read_value(), value), decay)
      return state_ops.assign_sub(variable, delta, name=scope)

  def call(self, inputs, training=False):
    training = core._training_tensor(training)  # pylint: disable=protected-access
    ndims = inputs.get_shape().ndims
    reduction_axes = [i for i in range(ndims) if i not in self.axis]
    broadcast = None
    if not (len(self.axis) == 1 and self.axis[0] == ndims - 1):
      broadcast = [1] * ndims
      for a in self.axis:
        broadcast[a] = inputs.get_shape()[a].value

    def _b(v):
      if v is None or broadcast is None:
        return v
      return gen.reshape(v, broadcast)

    x = math_ops.cast(inputs, self.moving_mean.dtype.base_dtype)
    moving_mean = self.moving_mean.read_value()
    moving_variance = self.moving_variance.read_value()
    if training is False:
      mean, variance = moving_mean, moving_variance
    else:
      batch_mean, batch_variance = nn_ops.moments(x, reduction_axes)
      if len(self.axis) > 1:
        batch_mean = gen.reshape(batch_mean, moving_mean.get_shape().as_list())
        batch_variance = gen.reshape(batch_variance, moving_variance.get_shape().as_list())
      decay = 1.0 - self.momentum
      if training is True:
        mean, variance = batch_mean, batch_variance
        decay_t = ops.convert_to_tensor(decay, dtype=x.dtype)
      else:
        mean = gen.select_v2(training, batch_mean, moving_mean)
        variance = gen.select_v2(training, batch_variance, moving_variance)
        decay_t = gen.select_v2(training, ops.convert_to_tensor(decay, dtype=x.dtype),
                                ops.convert_to_tensor(0.0, dtype=x.dtype))
      self.add_update(self._assign_moving_average(self.moving_mean, batch_mean, decay_t))
      self.add_update(self._assign_moving_average(self.moving_variance, batch_variance,
                                                  decay_t))
    outputs = nn_ops.batch_normalization(x, _b(mean), _b(variance), _b(self.beta),
                                         _b(self.gamma), self.epsilon)
    outputs = math_ops.cast(outputs, inputs.dtype.base_dtype)
    outputs.set_shape(inputs.get_shape())
    return outputs


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                        beta_initializer=init_ops.zeros_initializer(),
                        gamma_initializer=init_ops.ones_initializer(),
                        moving_mean_initializer=init_ops.zeros_initializer(),
                        moving_variance_initializer=init_ops.ones_initializer(),
                        beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                        gamma_constraint=None, training=False, trainable=True, name=None,
                        reuse=None, renorm=False, renorm_clipping=None, renorm_momentum=0.99,
                        fused=None, virtual_batch_size=None, adjustment=None):
  layer = BatchNormalization(
      axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
      beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
      moving_mean_initializer=moving_mean_initializer,
      moving_variance_initializer=moving_variance_initializer,
      beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
      beta_constraint=beta_constraint, gamma_constraint=gamma_constraint, renorm=renorm,
      renorm_clipping=renorm_clipping, renorm_momentum=renorm_momentum, fused=fused,
      trainable=trainable, virtual_batch_size=virtual_batch_size, adjustment=adjustment,
      name=name, _reuse=reuse, _scope=name)
  return layer.apply(inputs, training=training)

