"""tf.contrib.layers initializers: xavier_initializer and TF-slim's variance_scaling_initializer
(factor / mode / uniform, with its 1.3 truncated-normal correction)."""

import math

from recflow.framework import dtypes
from recflow.ops import random_ops

__all__ = ["xavier_initializer", "xavier_initializer_conv2d", "variance_scaling_initializer"]


def xavier_initializer(uniform=True, seed=None, dtype=dtypes.float32):
  """Glorot's initialization: variance 2 / (fan_in + fan_out)."""
  return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=uniform, seed=seed,
                                      dtype=dtype)


xavier_initializer_conv2d = xavier_initializer


def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False, seed=None,
                                 dtype=dtypes.float32):
  """Variance factor / n, n the fan in, fan out or their mean (mode 'FAN_IN', 'FAN_OUT',
  'FAN_AVG'); fans of a conv filter [h, w, in, out] count the receptive field. Uniform in
  +-sqrt(3 factor / n), or truncated normal with stddev sqrt(1.3 factor / n)."""
  if not dtypes.as_dtype(dtype).is_floating:
    raise TypeError("Cannot create initializer for non-floating point type.")
  if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
    raise TypeError("Unknown mode %s [FAN_IN, FAN_OUT, FAN_AVG]" % mode)

  def _initializer(shape, dtype=dtype, partition_info=None):
    del partition_info
    if not dtypes.as_dtype(dtype).is_floating:
      raise TypeError("Cannot create initializer for non-floating point type.")
    shape = [int(d) for d in (shape.as_list() if hasattr(shape, "as_list") else shape)]
    if shape:
      fan_in = float(shape[-2]) if len(shape) > 1 else float(shape[-1])
      fan_out = float(shape[-1])
    else:
      fan_in = fan_out = 1.0
    for dim in shape[:-2]:
      fan_in *= dim
      fan_out *= dim
    n = {"FAN_IN": fan_in, "FAN_OUT": fan_out, "FAN_AVG": (fan_in + fan_out) / 2.0}[mode]
    if uniform:
      limit = math.sqrt(3.0 * factor / n)
      return random_ops.random_uniform(shape, -limit, limit, dtype, seed=seed)
    return random_ops.truncated_normal(shape, 0.0, math.sqrt(1.3 * factor / n), dtype,
                                       seed=seed)
  return _initializer
