"""Array ops: placeholders, shapes, reshaping, slicing (Tensor.__getitem__), stacking."""

import numpy as np

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import op_def_library
from recflow.framework import ops
from recflow.framework import tensor_shape
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops

identity = gen.identity
reshape = gen.reshape
tile = gen.tile
fill = gen.fill
rank_internal = gen.rank
gather_nd = gen.gather_nd
scatter_nd = gen.scatter_nd
invert_permutation = gen.invert_permutation
unique = gen.unique
newaxis = None


def placeholder(dtype, shape=None, name=None):
  """A tensor that must be fed (sess.run(..., feed_dict={x: value}))."""
  if shape is None:
    return gen.placeholder(dtype=dtype, name=name)
  return gen.placeholder(dtype=dtype, shape=shape, name=name)


def placeholder_with_default(input, shape, name=None):  # pylint: disable=redefined-builtin
  return gen.placeholder_with_default(input, shape=shape, name=name)


def stop_gradient(input, name=None):  # pylint: disable=redefined-builtin
  """The input, with no gradient flowing through it.

  An Identity node marked `_stop_gradient` (recflow has no StopGradient op):
  tf.gradients treats it as TensorFlow treats StopGradient.
  """
  return op_def_library.apply_op("Identity", input=input, name=name or "StopGradient",
                                 _stop_gradient=True)


def shape(input, name=None, out_type=dtypes.int32):  # pylint: disable=redefined-builtin
  """The shape of `input` as a 1-D tensor (a constant when it is fully known)."""
  with ops.name_scope(name, "Shape", [input]) as name:
    if not isinstance(input, ops.Tensor):
      input = ops.convert_to_tensor(input)
    input_shape = input.get_shape()
    if input_shape.is_fully_defined():
      return constant_op.constant(input_shape.as_list(), out_type, name=name)
    return gen.shape(input, out_type=out_type, name=name)


def size(input, name=None, out_type=dtypes.int32):  # pylint: disable=redefined-builtin
  with ops.name_scope(name, "Size", [input]) as name:
    input = ops.convert_to_tensor(input)
    n = input.get_shape().num_elements()
    if n is not None:
      return constant_op.constant(n, out_type, name=name)
    return gen.size(input, out_type=out_type, name=name)


def rank(input, name=None):  # pylint: disable=redefined-builtin
  with ops.name_scope(name, "Rank", [input]) as name:
    input = ops.convert_to_tensor(input)
    r = input.get_shape().ndims
    if r is not None:
      return constant_op.constant(r, dtypes.int32, name=name)
    return gen.rank(input, name=name)


def _constant_if_small(value, shape_list, dtype, name):
  if shape_list is not None and int(np.prod(shape_list, dtype=np.int64)) < 1000:
    return constant_op.constant(value, dtype=dtype, shape=shape_list, name=name)
  return None


def _static_shape_list(shape_value):
  if isinstance(shape_value, tensor_shape.TensorShape):
    return shape_value.as_list() if shape_value.is_fully_defined() else None
  if isinstance(shape_value, (list, tuple)) and all(
      isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape_value):
    return [int(d) for d in shape_value]
  if isinstance(shape_value, (int, np.integer)) and not isinstance(shape_value, bool):
    return [int(shape_value)]
  return None


def zeros(shape, dtype=dtypes.float32, name=None):
  dtype = dtypes.as_dtype(dtype).base_dtype
  with ops.name_scope(name, "zeros", [shape]) as name:
    zero = "" if dtype == dtypes.string else (False if dtype == dtypes.bool else 0)
    small = _constant_if_small(zero, _static_shape_list(shape), dtype, name)
    if small is not None:
      return small
    return gen.fill(ops.convert_to_tensor(shape, dtype=dtypes.int32, name="shape"),
                    constant_op.constant(zero, dtype=dtype), name=name)


def ones(shape, dtype=dtypes.float32, name=None):
  dtype = dtypes.as_dtype(dtype).base_dtype
  with ops.name_scope(name, "ones", [shape]) as name:
    one = True if dtype == dtypes.bool else 1
    small = _constant_if_small(one, _static_shape_list(shape), dtype, name)
    if small is not None:
      return small
    return gen.fill(ops.convert_to_tensor(shape, dtype=dtypes.int32, name="shape"),
                    constant_op.constant(one, dtype=dtype), name=name)


def zeros_like(tensor, dtype=None, name=None, optimize=True):
  with ops.name_scope(name, "zeros_like", [tensor]) as name:
    tensor = ops.convert_to_tensor(tensor, name="tensor")
    if dtype is not None and dtypes.as_dtype(dtype).base_dtype != tensor.dtype.base_dtype:
      return zeros(shape(tensor), dtype=dtype, name=name)
    return gen.zeros_like(tensor, name=name)


def ones_like(tensor, dtype=None, name=None, optimize=True):
  with ops.name_scope(name, "ones_like", [tensor]) as name:
    tensor = ops.convert_to_tensor(tensor, name="tensor")
    if dtype is not None and dtypes.as_dtype(dtype).base_dtype != tensor.dtype.base_dtype:
      return ones(shape(tensor), dtype=dtype, name=name)
    return gen.ones_like(tensor, name=name)


def expand_dims(input, axis=None, name=None, dim=None):  # pylint: disable=redefined-builtin
  if axis is not None and dim is not None:
    raise ValueError("Cannot specify both 'axis' and 'dim'")
  axis = axis if axis is not None else dim
  if axis is None:
    raise ValueError("Must specify an axis argument to tf.expand_dims()")
  return gen.expand_dims(input, axis, name=name)


def squeeze(input, axis=None, name=None, squeeze_dims=None):  # pylint: disable=redefined-builtin
  if axis is not None and squeeze_dims is not None:
    raise ValueError("Cannot specify both 'axis' and 'squeeze_dims'")
  axis = axis if axis is not None else squeeze_dims
  if axis is None:
    axis = []
  elif np.isscalar(axis):
    axis = [axis]
  return gen.squeeze(input, squeeze_dims=list(axis), name=name)


def transpose(a, perm=None, name="transpose", conjugate=False):
  with ops.name_scope(name, "transpose", [a]) as name:
    a = ops.convert_to_tensor(a, name="a")
    if perm is None:
      r = a.get_shape().ndims
      if r is not None:
        perm = list(range(r - 1, -1, -1))
      else:
        rk = gen.rank(a)
        perm = gen.sub(gen.sub(rk, 1), math_ops.range(0, rk, 1))
    return gen.transpose(a, perm, name=name)


def concat(values, axis, name="concat"):
  if not isinstance(values, (list, tuple)):
    values = [values]
  if len(values) == 1:
    with ops.name_scope(name) as scope:
      return identity(ops.convert_to_tensor(values[0]), name=scope)
  return gen.concat_v2(values, axis, name=name)


def stack(values, axis=0, name="stack"):
  if axis == 0:
    try:
      return ops.convert_to_tensor(values, name=name)
    except (TypeError, ValueError):
      pass
  return gen.pack(values, axis=axis, name=name)


pack = stack


def unstack(value, num=None, axis=0, name="unstack"):
  if num is None:
    value = ops.convert_to_tensor(value)
    value_shape = value.get_shape()
    if value_shape.ndims is not None:
      if axis < -value_shape.ndims or axis >= value_shape.ndims:
        raise ValueError("axis = %d not in [%d, %d)" % (axis, -value_shape.ndims,
                                                        value_shape.ndims))
      num = value_shape.dims[axis].value
  if num is None:
    raise ValueError("Cannot infer num from shape %s" % value.get_shape())
  return gen.unpack(value, num=num, axis=axis, name=name)


unpack = unstack


def split(value, num_or_size_splits, axis=0, num=None, name="split"):
  if isinstance(num_or_size_splits, (int, np.integer)) and not isinstance(num_or_size_splits,
                                                                            bool):
    return gen.split(axis, value, num_split=int(num_or_size_splits), name=name)
  size_splits = ops.convert_to_tensor(num_or_size_splits)
  if num is None:
    shape_ = size_splits.get_shape()
    if shape_.ndims == 1 and shape_.dims[0].value is not None:
      num = shape_.dims[0].value
    else:
      raise ValueError("Cannot infer num from shape %s" % num_or_size_splits)
  return gen.split_v(value, size_splits, axis, num_split=num, name=name)


def slice(input_, begin, size, name=None):  # pylint: disable=redefined-builtin
  return gen.slice(input_, begin, size, name=name)


def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, var=None, name=None):
  if strides is None:
    strides = ones_like(begin)
  return gen.strided_slice(input_, begin, end, strides, begin_mask=begin_mask,
                           end_mask=end_mask, ellipsis_mask=ellipsis_mask,
                           new_axis_mask=new_axis_mask, shrink_axis_mask=shrink_axis_mask,
                           name=name)


def _check_index(idx):
  if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
    return
  if isinstance(idx, ops.Tensor) and idx.dtype.base_dtype in (dtypes.int32, dtypes.int64):
    if idx.get_shape().ndims in (None, 0):
      return
  raise TypeError("Only integers, slices (`:`), ellipsis (`...`), tf.newaxis (`None`) and "
                  "scalar tf.int32/tf.int64 tensors are valid indices, got %r" % (idx,))


def _slice_helper(tensor, slice_spec, var=None):
  """tensor[slice_spec] with NumPy's basic indexing, as one StridedSlice node."""
  if isinstance(slice_spec, bool) or (
      isinstance(slice_spec, ops.Tensor) and slice_spec.dtype == dtypes.bool) or (
          isinstance(slice_spec, np.ndarray) and slice_spec.dtype == bool):
    raise TypeError("boolean masks (tf.boolean_mask) are not supported by recflow yet")
  if not isinstance(slice_spec, (list, tuple)):
    slice_spec = [slice_spec]
  begin, end, strides = [], [], []
  index = 0
  new_axis_mask = shrink_axis_mask = begin_mask = end_mask = ellipsis_mask = 0
  for s in slice_spec:
    if _is_python_slice(s):
      if s.start is not None:
        _check_index(s.start)
        begin.append(s.start)
      else:
        begin.append(0)
        begin_mask |= (1 << index)
      if s.stop is not None:
        _check_index(s.stop)
        end.append(s.stop)
      else:
        end.append(0)
        end_mask |= (1 << index)
      if s.step is not None:
        _check_index(s.step)
        strides.append(s.step)
      else:
        strides.append(1)
    elif s is Ellipsis:
      begin.append(0)
      end.append(0)
      strides.append(1)
      ellipsis_mask |= (1 << index)
    elif s is None:
      begin.append(0)
      end.append(0)
      strides.append(1)
      new_axis_mask |= (1 << index)
    else:
      _check_index(s)
      begin.append(s)
      end.append(s + 1)
      strides.append(1)
      shrink_axis_mask |= (1 << index)
    index += 1
  with ops.name_scope(None, "strided_slice", [tensor] + begin + end + strides) as name:
    if begin:
      packed_begin, packed_end, packed_strides = (stack(begin), stack(end), stack(strides))
      if dtypes.int64 in (packed_begin.dtype, packed_end.dtype, packed_strides.dtype):
        packed_begin, packed_end, packed_strides = (
            math_ops.cast(t, dtypes.int64) for t in (packed_begin, packed_end, packed_strides))
    else:
      empty = constant_op.constant([], dtype=dtypes.int32)
      packed_begin = packed_end = packed_strides = empty
    return gen.strided_slice(tensor, packed_begin, packed_end, packed_strides,
                             begin_mask=begin_mask, end_mask=end_mask,
                             shrink_axis_mask=shrink_axis_mask, new_axis_mask=new_axis_mask,
                             ellipsis_mask=ellipsis_mask, name=name)


_SLICE_TYPE = type(np.s_[0:1])


def _is_python_slice(s):
  return isinstance(s, _SLICE_TYPE)


ops.Tensor._override_operator("__getitem__", _slice_helper)  # pylint: disable=protected-access


def gather(params, indices, validate_indices=None, name=None, axis=None, batch_dims=0):
  """params gathered at indices along axis (GatherV2; ResourceGather for resource
  variables, whose gradient then stays sparse)."""
  if batch_dims != 0:
    raise NotImplementedError("recflow's GatherV2 supports batch_dims = 0 only")
  if getattr(params, "_is_resource_variable", False) and (axis is None or axis == 0):
    return gen.resource_gather(params.handle, indices, dtype=params.dtype, name=name)
  return gen.gather_v2(params, indices, 0 if axis is None else axis, name=name)


def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
  with ops.name_scope(name, "one_hot", [indices, depth, on_value, off_value]) as name:
    on_exists = on_value is not None
    off_exists = off_value is not None
    if dtype is None:
      if on_exists:
        dtype = ops.convert_to_tensor(on_value).dtype.base_dtype
      elif off_exists:
        dtype = ops.convert_to_tensor(off_value).dtype.base_dtype
      else:
        dtype = dtypes.float32
    dtype = dtypes.as_dtype(dtype)
    on_value = ops.convert_to_tensor(on_value if on_exists else 1, dtype, name="on_value")
    off_value = ops.convert_to_tensor(off_value if off_exists else 0, dtype, name="off_value")
    return gen.one_hot(indices, depth, on_value, off_value,
                       axis=-1 if axis is None else axis, name=name)


def where(condition, x=None, y=None, name=None):
  """TF 1.x's where: Select(condition, x, y); with condition alone, the
  coordinates of its true elements (int64 [count, rank], row-major)."""
  if x is None and y is None:
    with ops.name_scope(name, "Where", [condition]) as name:
      condition = ops.convert_to_tensor(condition, preferred_dtype=dtypes.bool, name="condition")
      return gen.where(condition, name=name)
  if x is None or y is None:
    raise ValueError("x and y must both be non-None or both be None.")
  return gen.select(condition, x, y, name=name)


def where_v2(condition, x=None, y=None, name=None):
  if x is None or y is None:
    return where(condition, x, y, name)
  return gen.select_v2(condition, x, y, name=name)


def pad(tensor, paddings, mode="CONSTANT", name=None, constant_values=0):
  """Constant padding (recflow's Pad pads with zeros; other values are composed)."""
  if mode.upper() != "CONSTANT":
    raise NotImplementedError("tf.pad mode %r: recflow pads with constants only" % mode)
  with ops.name_scope(name, "Pad", [tensor]) as name:
    tensor = ops.convert_to_tensor(tensor, name="tensor")
    if isinstance(constant_values, (int, float)) and constant_values == 0:
      return gen.pad(tensor, paddings, name=name)
    c = ops.convert_to_tensor(constant_values, dtype=tensor.dtype, name="constant_values")
    return gen.add_v2(gen.pad(gen.sub(tensor, c), paddings), c, name=name)


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None):
  """A dense tensor with sparse_values at sparse_indices (composed from ScatterNd:
  indices must be unique, as TensorFlow requires)."""
  with ops.name_scope(name, "SparseToDense", [sparse_indices, output_shape, sparse_values]):
    indices = ops.convert_to_tensor(sparse_indices, name="sparse_indices")
    out_shape = ops.convert_to_tensor(output_shape, dtype=indices.dtype, name="output_shape")
    values = ops.convert_to_tensor(sparse_values, name="sparse_values")
    idx_rank = indices.get_shape().ndims
    if idx_rank == 0 or idx_rank == 1:
      indices = gen.reshape(indices, [-1, 1])
    if values.get_shape().ndims == 0:
      values = gen.fill(gen.strided_slice(gen.shape(indices), [0], [1], [1]), values)
    default = ops.convert_to_tensor(default_value, dtype=values.dtype, name="default_value")
    if constant_op.constant_value(default) is not None and not np.any(
        constant_op.constant_value(default)):
      return gen.scatter_nd(indices, values, out_shape)
    return gen.add_v2(gen.scatter_nd(indices, gen.sub(values, default), out_shape), default)


def _autopacking_conversion_function(v, dtype=None, name=None, as_ref=False):
  """Lists holding Tensors (or Variables) become a Pack of them, as in TensorFlow."""
  _ = as_ref
  if not _has_tensor(v):
    return NotImplemented
  inferred = _first_dtype(v)
  if dtype is not None and inferred is not None and dtype.base_dtype != inferred.base_dtype:
    raise TypeError("Cannot convert a list containing a tensor of dtype %s to %s (Tensor is: "
                    "%r)" % (inferred, dtype, v))
  return _autopack(v, (dtype or inferred).base_dtype, name or "packed")


def _has_tensor(v):
  if isinstance(v, (list, tuple)):
    return any(_has_tensor(x) for x in v)
  return isinstance(v, ops.Tensor) or hasattr(v, "_as_graph_element")


def _first_dtype(v):
  if isinstance(v, (list, tuple)):
    for x in v:
      d = _first_dtype(x)
      if d is not None:
        return d
    return None
  if isinstance(v, ops.Tensor) or hasattr(v, "_as_graph_element"):
    return ops.convert_to_tensor(v).dtype
  return None


def _autopack(v, dtype, name):
  with ops.name_scope(name) as scope:
    elems = []
    for i, x in enumerate(v):
      if isinstance(x, (list, tuple)):
        elems.append(_autopack(x, dtype, str(i)))
      else:
        elems.append(ops.convert_to_tensor(x, dtype=dtype))
    return gen.pack(elems, name=scope)


ops.register_tensor_conversion_function((list, tuple), _autopacking_conversion_function, 99)
