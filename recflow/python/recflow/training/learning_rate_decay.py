"""TF 1.x's learning-rate decays (tf.train.exponential_decay, ...), built from
graph ops: each returns a scalar tensor of the learning rate's dtype that
follows global_step when the graph runs."""

import math

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


def _check_step(global_step, fn):
  if global_step is None:
    raise ValueError("global_step is required for %s." % fn)


def _float_args(learning_rate, global_step, *others):
  lr = ops.convert_to_tensor(learning_rate, name="learning_rate")
  dtype = lr.dtype.base_dtype
  if not dtype.is_floating:
    lr = math_ops.cast(lr, dtypes.float32)
    dtype = dtypes.float32
  step = math_ops.cast(global_step, dtype)
  return [lr, step] + [math_ops.cast(o, dtype) for o in others]


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
  """learning_rate * decay_rate ^ (global_step / decay_steps) (the exponent floored
  when staircase)."""
  _check_step(global_step, "exponential_decay")
  with ops.name_scope(name, "ExponentialDecay",
                      [learning_rate, global_step, decay_steps, decay_rate]) as name:
    lr, step, steps, rate = _float_args(learning_rate, global_step, decay_steps, decay_rate)
    p = step / steps
    if staircase:
      p = math_ops.floor(p)
    return math_ops.multiply(lr, gen.pow(rate, p), name=name)


def natural_exp_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
  """learning_rate * exp(-decay_rate * global_step / decay_steps)."""
  _check_step(global_step, "natural_exp_decay")
  with ops.name_scope(name, "NaturalExpDecay",
                      [learning_rate, global_step, decay_rate]) as name:
    lr, step, steps, rate = _float_args(learning_rate, global_step, decay_steps, decay_rate)
    p = step / steps
    if staircase:
      p = math_ops.floor(p)
    return math_ops.multiply(lr, math_ops.exp(math_ops.negative(rate) * p), name=name)


def inverse_time_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                       name=None):
  """learning_rate / (1 + decay_rate * global_step / decay_steps)."""
  _check_step(global_step, "inverse_time_decay")
  with ops.name_scope(name, "InverseTimeDecay",
                      [learning_rate, global_step, decay_rate]) as name:
    lr, step, steps, rate = _float_args(learning_rate, global_step, decay_steps, decay_rate)
    p = step / steps
    if staircase:
      p = math_ops.floor(p)
    return math_ops.truediv(lr, 1.0 + rate * p, name=name)


def polynomial_decay(learning_rate, global_step, decay_steps, end_learning_rate=0.0001,
                     power=1.0, cycle=False, name=None):
  """(learning_rate - end) * (1 - step / decay_steps) ^ power + end, with step capped
  at decay_steps, or with decay_steps stretched to the next multiple when cycle."""
  _check_step(global_step, "polynomial_decay")
  with ops.name_scope(name, "PolynomialDecay",
                      [learning_rate, global_step, decay_steps, end_learning_rate,
                       power]) as name:
    lr, step, steps, end, pw = _float_args(learning_rate, global_step, decay_steps,
                                           end_learning_rate, power)
    if cycle:
      multiplier = array_ops.where(math_ops.equal(step, 0.0), array_ops.ones_like(step),
                                   math_ops.ceil(step / steps))
      steps = steps * multiplier
    else:
      step = math_ops.minimum(step, steps)
    p = step / steps
    return math_ops.add(math_ops.multiply(lr - end, gen.pow(1.0 - p, pw)), end, name=name)


def piecewise_constant(x, boundaries, values, name=None):
  """values[0] while x <= boundaries[0], values[i] for boundaries[i-1] < x <=
  boundaries[i], values[-1] after the last boundary (nested selects; TF uses
  tf.case)."""
  if len(boundaries) != len(values) - 1:
    raise ValueError("The length of boundaries should be 1 less than the length of values")
  with ops.name_scope(name, "PiecewiseConstant", [x] + list(boundaries) + list(values)) as name:
    x = ops.convert_to_tensor(x)
    bs = []
    for b in boundaries:
      b = ops.convert_to_tensor(b) if not x.dtype.is_integer or isinstance(b, ops.Tensor) \
          else ops.convert_to_tensor(b, dtype=x.dtype.base_dtype)
      if b.dtype.base_dtype != x.dtype.base_dtype:
        if (x.dtype.base_dtype == dtypes.int64 and b.dtype.base_dtype == dtypes.int32) or \
           (x.dtype.is_floating and b.dtype.is_integer):
          b = math_ops.cast(b, x.dtype.base_dtype)
        else:
          raise ValueError("Boundaries (%s) must have the same dtype as x (%s)." %
                           (b.dtype.base_dtype, x.dtype.base_dtype))
      bs.append(b)
    vs = [ops.convert_to_tensor(v) for v in values]
    for v in vs[1:]:
      if v.dtype.base_dtype != vs[0].dtype.base_dtype:
        raise ValueError("Values must have elements all with the same dtype (%s vs %s)." %
                         (vs[0].dtype.base_dtype, v.dtype.base_dtype))
    result = vs[-1]
    for i in range(len(bs) - 1, -1, -1):
      last = i == 0
      result = array_ops.where(math_ops.less_equal(x, bs[i]), vs[i], result,
                               name=name if last else None)
    if not bs:
      result = array_ops.identity(result, name=name)
    return result


def _cos_pi(x):
  """cos(pi * x) for x in [0, 1] (recflow has no Cos op): -sin(y), y = pi*x - pi/2
  in [-pi/2, pi/2], by its Taylor series to y^17 (error below 1e-13)."""
  y = x * math.pi - math.pi / 2
  y2 = y * y
  # sin(y) = y (1 - y2/3! (1 - y2/(4*5) (1 - y2/(6*7) (...))))
  acc = 1.0
  for k in range(8, 0, -1):
    acc = 1.0 - y2 / float((2 * k) * (2 * k + 1)) * acc
  return math_ops.negative(y * acc)


def cosine_decay(learning_rate, global_step, decay_steps, alpha=0.0, name=None):
  """learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) /
  decay_steps)) + alpha)."""
  _check_step(global_step, "cosine_decay")
  with ops.name_scope(name, "CosineDecay", [learning_rate, global_step]) as name:
    lr, step, steps, a = _float_args(learning_rate, global_step, decay_steps, alpha)
    step = math_ops.minimum(step, steps)
    completed = step / steps
    cosine_decayed = 0.5 * (1.0 + _cos_pi(completed))
    decayed = (1.0 - a) * cosine_decayed + a
    return math_ops.multiply(lr, decayed, name=name)
