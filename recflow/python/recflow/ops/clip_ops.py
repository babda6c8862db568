"""tf.clip_by_value, tf.clip_by_norm, tf.global_norm, tf.clip_by_global_norm
(TF 1.x's formulas; IndexedSlices are clipped through their values)."""

import numbers

from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


def clip_by_value(t, clip_value_min, clip_value_max, name=None):
  with ops.name_scope(name, "clip_by_value", [t, clip_value_min, clip_value_max]) as name:
    values = ops.convert_to_tensor(t.values if isinstance(t, ops.IndexedSlices) else t,
                                   name="t")
    t_min = math_ops.minimum(values, clip_value_max)
    clipped = math_ops.maximum(t_min, clip_value_min, name=name)
    if isinstance(t, ops.IndexedSlices):
      return ops.IndexedSlices(clipped, t.indices, t.dense_shape)
    return clipped


def clip_by_norm(t, clip_norm, axes=None, name=None):
  """t * clip_norm / max(l2norm(t, axes), clip_norm); zero norms leave t as is."""
  with ops.name_scope(name, "clip_by_norm", [t, clip_norm]) as name:
    values = ops.convert_to_tensor(t.values if isinstance(t, ops.IndexedSlices) else t,
                                   name="t")
    l2sum = math_ops.reduce_sum(values * values, axes, keepdims=True)
    pred = math_ops.greater(l2sum, array_ops.zeros_like(l2sum))
    l2sum_safe = array_ops.where(pred, l2sum, array_ops.ones_like(l2sum))
    l2norm = array_ops.where(pred, math_ops.sqrt(l2sum_safe), l2sum)
    clip_norm = ops.convert_to_tensor(clip_norm, dtype=values.dtype.base_dtype)
    intermediate = values * clip_norm
    clipped = array_ops.identity(intermediate / math_ops.maximum(l2norm, clip_norm), name=name)
    if isinstance(t, ops.IndexedSlices):
      return ops.IndexedSlices(clipped, t.indices, t.dense_shape)
    return clipped


def global_norm(t_list, name=None):
  """sqrt(sum(l2norm(t) ** 2 for t in t_list)); None entries are skipped."""
  if isinstance(t_list, (ops.Tensor, ops.IndexedSlices)) or not hasattr(t_list, "__iter__"):
    raise TypeError("t_list should be a sequence")
  t_list = list(t_list)
  with ops.name_scope(name, "global_norm", [t for t in t_list if t is not None]) as name:
    half_squared_norms = []
    for i, t in enumerate(t_list):
      if t is None:
        continue
      values = t.values if isinstance(t, ops.IndexedSlices) else t
      values = ops.convert_to_tensor(values, name="t_%d" % i)
      half_squared_norms.append(gen.l2_loss(values))
    if not half_squared_norms:
      return ops.convert_to_tensor(0.0, name=name)
    dtype = half_squared_norms[0].dtype
    half_squared_norm = math_ops.reduce_sum(array_ops.stack(half_squared_norms))
    return math_ops.sqrt(half_squared_norm * ops.convert_to_tensor(2.0, dtype=dtype),
                         name="global_norm")


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
  """(list of t * clip_norm / max(global_norm, clip_norm), global_norm). An
  infinite or NaN global norm makes every entry NaN, as in TF."""
  if isinstance(t_list, (ops.Tensor, ops.IndexedSlices)) or not hasattr(t_list, "__iter__"):
    raise TypeError("t_list should be a sequence")
  t_list = list(t_list)
  if use_norm is None:
    use_norm = global_norm(t_list, name)
  with ops.name_scope(name, "clip_by_global_norm",
                      [t for t in t_list if t is not None] + [clip_norm]) as name:
    use_norm = ops.convert_to_tensor(use_norm)
    dtype = use_norm.dtype.base_dtype
    if isinstance(clip_norm, numbers.Number):
      clip_norm = float(clip_norm)
    clip_norm = ops.convert_to_tensor(clip_norm, dtype=dtype)
    one = ops.convert_to_tensor(1.0, dtype=dtype)
    scale_for_finite = clip_norm * math_ops.minimum(one / use_norm, one / clip_norm)
    scale = scale_for_finite + (use_norm - use_norm)  # NaN when the norm is not finite
    clipped = []
    for i, t in enumerate(t_list):
      if t is None:
        clipped.append(None)
        continue
      values = ops.convert_to_tensor(t.values if isinstance(t, ops.IndexedSlices) else t,
                                     name="t_%d" % i)
      c = array_ops.identity(values * math_ops.cast(scale, values.dtype.base_dtype),
                             name="%s_%d" % (name.rstrip("/"), i) if name else None)
      clipped.append(ops.IndexedSlices(c, t.indices, t.dense_shape)
                     if isinstance(t, ops.IndexedSlices) else c)
    return clipped, use_norm


def clip_by_average_norm(t, clip_norm, name=None):
  """t * clip_norm / max(l2norm(t) / size(t), clip_norm)."""
  with ops.name_scope(name, "clip_by_average_norm", [t, clip_norm]) as name:
    t = ops.convert_to_tensor(t, name="t")
    n_element = math_ops.cast(array_ops.size(t), t.dtype.base_dtype)
    l2norm_inv = math_ops.rsqrt(math_ops.reduce_sum(t * t))
    clip_norm = ops.convert_to_tensor(clip_norm, dtype=t.dtype.base_dtype)
    return array_ops.identity(
        t * clip_norm * math_ops.minimum(l2norm_inv * n_element, 1.0 / clip_norm), name=name)
