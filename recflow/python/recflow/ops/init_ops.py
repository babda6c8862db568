"""Initializers (tf.zeros_initializer, tf.glorot_uniform_initializer, ...), TF 1.x classes.

An initializer is called as `init(shape, dtype=None, partition_info=None)`
and returns a Tensor; get_variable calls it inside the variable's
"Initializer" name scope.
"""

import math

import numpy as np

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.ops import array_ops
from recflow.ops import random_ops


class Initializer(object):

  def __call__(self, shape, dtype=None, partition_info=None):
    raise NotImplementedError

  def get_config(self):
    return {}

  @classmethod
  def from_config(cls, config):
    return cls(**config)


def _float_dtype(dtype, default):
  dtype = dtypes.as_dtype(dtype if dtype is not None else default)
  if not dtype.is_floating:
    raise ValueError("Expected floating point type, got %s." % dtype)
  return dtype


class Zeros(Initializer):

  def __init__(self, dtype=dtypes.float32):
    self.dtype = dtypes.as_dtype(dtype)

  def __call__(self, shape, dtype=None, partition_info=None):
    return array_ops.zeros(shape, dtype if dtype is not None else self.dtype)

  def get_config(self):
    return {"dtype": self.dtype.name}


class Ones(Initializer):

  def __init__(self, dtype=dtypes.float32):
    self.dtype = dtypes.as_dtype(dtype)

  def __call__(self, shape, dtype=None, partition_info=None):
    return array_ops.ones(shape, dtype if dtype is not None else self.dtype)

  def get_config(self):
    return {"dtype": self.dtype.name}


class Constant(Initializer):

  def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
    if not (np.isscalar(value) or isinstance(value, (list, tuple, np.ndarray))):
      raise TypeError("Invalid type for initial value: %s (expected Python scalar, list or "
                      "tuple of values, or numpy.ndarray)." % type(value))
    self.value = value
    self.dtype = dtypes.as_dtype(dtype)
    self._verify_shape = verify_shape

  def __call__(self, shape, dtype=None, partition_info=None, verify_shape=None):
    dtype = dtype if dtype is not None else self.dtype
    return constant_op.constant(self.value, dtype=dtype, shape=shape,
                                verify_shape=self._verify_shape if verify_shape is None
                                else verify_shape)

  def get_config(self):
    return {"value": self.value, "dtype": self.dtype.name}


class RandomUniform(Initializer):

  def __init__(self, minval=0, maxval=None, seed=None, dtype=dtypes.float32):
    self.minval, self.maxval, self.seed = minval, maxval, seed
    self.dtype = dtypes.as_dtype(dtype)

  def __call__(self, shape, dtype=None, partition_info=None):
    return random_ops.random_uniform(shape, self.minval, self.maxval,
                                     dtype if dtype is not None else self.dtype,
                                     seed=self.seed)

  def get_config(self):
    return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed,
            "dtype": self.dtype.name}


class RandomNormal(Initializer):

  def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
    self.mean, self.stddev, self.seed = mean, stddev, seed
    self.dtype = _float_dtype(dtype, dtypes.float32)

  def __call__(self, shape, dtype=None, partition_info=None):
    return random_ops.random_normal(shape, self.mean, self.stddev,
                                    _float_dtype(dtype, self.dtype), seed=self.seed)

  def get_config(self):
    return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
            "dtype": self.dtype.name}


class TruncatedNormal(Initializer):

  def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
    self.mean, self.stddev, self.seed = mean, stddev, seed
    self.dtype = _float_dtype(dtype, dtypes.float32)

  def __call__(self, shape, dtype=None, partition_info=None):
    return random_ops.truncated_normal(shape, self.mean, self.stddev,
                                       _float_dtype(dtype, self.dtype), seed=self.seed)

  def get_config(self):
    return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
            "dtype": self.dtype.name}


def _compute_fans(shape):
  if len(shape) < 1:
    return 1, 1
  if len(shape) == 1:
    return shape[0], shape[0]
  if len(shape) == 2:
    return shape[0], shape[1]
  receptive_field = 1
  for dim in shape[:-2]:
    receptive_field *= dim
  return shape[-2] * receptive_field, shape[-1] * receptive_field


class VarianceScaling(Initializer):
  """TF 1.15's VarianceScaling: scale / fan, drawn from a (truncated) normal or uniform."""

  def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal", seed=None,
               dtype=dtypes.float32):
    if scale <= 0.:
      raise ValueError("`scale` must be positive float.")
    if mode not in {"fan_in", "fan_out", "fan_avg"}:
      raise ValueError("Invalid `mode` argument:", mode)
    distribution = distribution.lower()
    if distribution not in {"normal", "uniform", "truncated_normal", "untruncated_normal"}:
      raise ValueError("Invalid `distribution` argument:", distribution)
    self.scale, self.mode, self.distribution, self.seed = scale, mode, distribution, seed
    self.dtype = _float_dtype(dtype, dtypes.float32)

  def __call__(self, shape, dtype=None, partition_info=None):
    dtype = _float_dtype(dtype, self.dtype)
    shape = [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
    # TF: a part of a partitioned variable is scaled by the fans of the full variable.
    scale_shape = shape if partition_info is None else list(partition_info.full_shape)
    fan_in, fan_out = _compute_fans(scale_shape)
    scale = self.scale
    if self.mode == "fan_in":
      scale /= max(1., fan_in)
    elif self.mode == "fan_out":
      scale /= max(1., fan_out)
    else:
      scale /= max(1., (fan_in + fan_out) / 2.)
    if self.distribution in ("normal", "truncated_normal"):
      stddev = math.sqrt(scale) / .87962566103423978
      return random_ops.truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
    if self.distribution == "untruncated_normal":
      return random_ops.random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
    limit = math.sqrt(3.0 * scale)
    return random_ops.random_uniform(shape, -limit, limit, dtype, seed=self.seed)

  def get_config(self):
    return {"scale": self.scale, "mode": self.mode, "distribution": self.distribution,
            "seed": self.seed, "dtype": self.dtype.name}


class GlorotUniform(VarianceScaling):

  def __init__(self, seed=None, dtype=dtypes.float32):
    super(GlorotUniform, self).__init__(1.0, "fan_avg", "uniform", seed, dtype)

  def get_config(self):
    return {"seed": self.seed, "dtype": self.dtype.name}


class GlorotNormal(VarianceScaling):

  def __init__(self, seed=None, dtype=dtypes.float32):
    super(GlorotNormal, self).__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

  def get_config(self):
    return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed=None):
  return VarianceScaling(2., "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
  return VarianceScaling(2., "fan_in", "uniform", seed)


def lecun_normal(seed=None):
  return VarianceScaling(1., "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
  return VarianceScaling(1., "fan_in", "uniform", seed)


# TF 1.x's lower-case names.
zeros_initializer = Zeros
ones_initializer = Ones
constant_initializer = Constant
random_uniform_initializer = RandomUniform
random_normal_initializer = RandomNormal
truncated_normal_initializer = TruncatedNormal
variance_scaling_initializer = VarianceScaling
glorot_uniform_initializer = GlorotUniform
glorot_normal_initializer = GlorotNormal
