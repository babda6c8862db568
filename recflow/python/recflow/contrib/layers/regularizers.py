"""tf.contrib.layers regularizers: functions of a weight tensor returning a scalar loss (or
None), given to variables as `regularizer=` / `weights_regularizer=`."""

import numbers

from recflow.framework import ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops

__all__ = ["l1_regularizer", "l2_regularizer", "l1_l2_regularizer", "sum_regularizer",
           "apply_regularization"]


def _check_scale(scale):
  """TF's checks: an int is refused (a likely typo for a float), a negative number too. A
  tensor passes through."""
  if isinstance(scale, numbers.Integral):
    raise ValueError("scale cannot be an integer: %s" % (scale,))
  if isinstance(scale, numbers.Real) and scale < 0.:
    raise ValueError("Setting a scale less than 0 on a regularizer: %g" % scale)
  return scale


def _disabled(scale):
  return isinstance(scale, numbers.Real) and scale == 0.


def l1_regularizer(scale, scope=None):
  """scale * sum(|w|); a scale of 0 adds no loss."""
  scale = _check_scale(scale)
  if _disabled(scale):
    return lambda _: None

  def l1(weights):
    with ops.name_scope(scope, "l1_regularizer", [weights]) as name:
      my_scale = ops.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
      return gen.mul(my_scale, math_ops.reduce_sum(gen.abs(weights)), name=name)
  return l1


def l2_regularizer(scale, scope=None):
  """scale * sum(w ** 2) / 2 (tf.nn.l2_loss); a scale of 0 adds no loss."""
  scale = _check_scale(scale)
  if _disabled(scale):
    return lambda _: None

  def l2(weights):
    with ops.name_scope(scope, "l2_regularizer", [weights]) as name:
      my_scale = ops.convert_to_tensor(scale, dtype=weights.dtype.base_dtype, name="scale")
      return gen.mul(my_scale, gen.l2_loss(weights), name=name)
  return l2


def sum_regularizer(regularizer_list, scope=None):
  """The sum of the regularizers' losses (those that are not None)."""
  regularizer_list = [r for r in regularizer_list if r]
  if not regularizer_list:
    return None

  def sum_reg(weights):
    with ops.name_scope(scope, "sum_regularizer", [weights]) as name:
      losses = [r(weights) for r in regularizer_list]
      losses = [l for l in losses if l is not None]
      if not losses:
        return None
      return math_ops.add_n(losses, name=name)
  return sum_reg


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
  if _disabled(scale_l1) and _disabled(scale_l2):
    return lambda _: None
  return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)], scope=scope)


def apply_regularization(regularizer, weights_list=None):
  """The sum of regularizer over weights_list (default: the WEIGHTS collection), also added
  to REGULARIZATION_LOSSES."""
  if not weights_list:
    weights_list = ops.get_collection(ops.GraphKeys.WEIGHTS)
  if not weights_list:
    raise ValueError("No weights to regularize.")
  with ops.name_scope("get_regularization_penalty", values=weights_list) as scope:
    penalties = [regularizer(w) for w in weights_list]
    penalties = [p for p in penalties if p is not None]
    if not penalties:
      return ops.convert_to_tensor(0.0)
    summed = math_ops.add_n(penalties, name=scope)
    ops.add_to_collection(ops.GraphKeys.REGULARIZATION_LOSSES, summed)
    return summed
