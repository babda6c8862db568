"""tf.math: arithmetic, reductions, comparisons, matmul, cast; Tensor operators."""

import builtins

import numpy as np

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import gen_ops as gen

# Element-wise ops that map one to one onto recflow ops (TensorFlow's names).
abs = gen.abs  # pylint: disable=redefined-builtin
negative = gen.neg
neg = gen.neg
sign = gen.sign
square = gen.square
sqrt = gen.sqrt
rsqrt = gen.rsqrt
exp = gen.exp
log = gen.log
log1p = gen.log1p
erf = gen.erf
sigmoid = gen.sigmoid
tanh = gen.tanh
maximum = gen.maximum
minimum = gen.minimum
pow = gen.pow  # pylint: disable=redefined-builtin
squared_difference = gen.squared_difference
div_no_nan = gen.div_no_nan
realdiv = gen.real_div
floormod = gen.floor_mod
mod = gen.floor_mod
equal = gen.equal
not_equal = gen.not_equal
less = gen.less
less_equal = gen.less_equal
greater = gen.greater
greater_equal = gen.greater_equal
logical_and = gen.logical_and
logical_or = gen.logical_or
logical_not = gen.logical_not
subtract = gen.sub
multiply = gen.mul
add = gen.add
add_v2 = gen.add_v2


def logical_xor(x, y, name="LogicalXor"):
  with ops.name_scope(name, "LogicalXor", [x, y]) as name:
    return logical_and(logical_or(x, y), logical_not(logical_and(x, y)), name=name)


def cast(x, dtype, name=None):
  """x as `dtype` (x itself when it already has it), as tf.cast."""
  base_type = dtypes.as_dtype(dtype).base_dtype
  if isinstance(x, ops.IndexedSlices):
    return ops.IndexedSlices(cast(x.values, base_type, name=name), x.indices, x.dense_shape)
  with ops.name_scope(name, "Cast", [x]) as name:
    x = ops.convert_to_tensor(x, name="x")
    if x.dtype.base_dtype == base_type:
      return x
    return gen.cast(x, base_type, name=name)


def to_float(x, name="ToFloat"):
  return cast(x, dtypes.float32, name=name)


def to_double(x, name="ToDouble"):
  return cast(x, dtypes.float64, name=name)


def to_int32(x, name="ToInt32"):
  return cast(x, dtypes.int32, name=name)


def to_int64(x, name="ToInt64"):
  return cast(x, dtypes.int64, name=name)


def saturate_cast(value, dtype, name=None):
  return cast(value, dtype, name=name)


_TRUEDIV_TABLE = {
    dtypes.uint8: dtypes.float32, dtypes.int8: dtypes.float32, dtypes.uint16: dtypes.float32,
    dtypes.int16: dtypes.float32, dtypes.int32: dtypes.float64, dtypes.int64: dtypes.float64,
    dtypes.bfloat16: None, dtypes.float16: None, dtypes.float32: None, dtypes.float64: None,
    dtypes.complex64: None, dtypes.complex128: None,
}


def truediv(x, y, name=None):
  """x / y with Python 3 semantics: integers are divided as floats."""
  with ops.name_scope(name, "truediv", [x, y]) as name:
    x = ops.convert_to_tensor(x, name="x")
    y = ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
    x_dtype = x.dtype.base_dtype
    if x_dtype not in _TRUEDIV_TABLE:
      raise TypeError("Invalid dtype %r in __truediv__" % x_dtype)
    dtype = _TRUEDIV_TABLE[x_dtype]
    if dtype is not None:
      x = cast(x, dtype)
      y = cast(y, dtype)
    return gen.real_div(x, y, name=name)


divide = truediv
div = truediv


def floor(x, name=None):
  """floor(x) for floating x (composed: recflow has no Floor op)."""
  with ops.name_scope(name, "Floor", [x]) as name:
    x = ops.convert_to_tensor(x, name="x")
    return gen.sub(x, gen.floor_mod(x, constant_op.constant(1, dtype=x.dtype)), name=name)


def ceil(x, name=None):
  with ops.name_scope(name, "Ceil", [x]) as name:
    x = ops.convert_to_tensor(x, name="x")
    return negative(floor(negative(x)), name=name)


def floordiv(x, y, name=None):
  """floor(x / y) (composed from FloorMod: recflow has no FloorDiv op)."""
  with ops.name_scope(name, "floordiv", [x, y]) as name:
    x = ops.convert_to_tensor(x, name="x")
    y = ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
    if x.dtype.is_integer:
      exact = gen.sub(x, gen.floor_mod(x, y))  # divisible by y
      return cast(gen.real_div(cast(exact, dtypes.float64), cast(y, dtypes.float64)),
                  x.dtype.base_dtype, name=name)
    return floor(gen.real_div(x, y), name=name)


floor_div = floordiv


def reciprocal(x, name=None):
  with ops.name_scope(name, "Reciprocal", [x]) as name:
    x = ops.convert_to_tensor(x, name="x")
    return gen.real_div(constant_op.constant(1, dtype=x.dtype.base_dtype), x, name=name)


def scalar_mul(scalar, x, name=None):
  with ops.name_scope(name, "scalar_mul", [scalar, x]) as name:
    x = ops.convert_to_tensor(x, name="x")
    scalar = ops.convert_to_tensor(scalar, dtype=x.dtype.base_dtype, name="scalar")
    return gen.mul(scalar, x, name=name)


def add_n(inputs, name=None):
  """The sum of a list of tensors of the same shape and dtype."""
  if not inputs or not isinstance(inputs, (list, tuple)):
    raise ValueError("inputs must be a list of at least one Tensor with the same dtype and "
                     "shape")
  inputs = ops.convert_n_to_tensor(inputs)
  if len(inputs) == 1:
    from recflow.ops import array_ops  # pylint: disable=g-import-not-at-top
    return array_ops.identity(inputs[0], name=name) if name else inputs[0]
  return gen.add_n(inputs, name=name)


accumulate_n = add_n


def matmul(a, b, transpose_a=False, transpose_b=False, adjoint_a=False, adjoint_b=False,
           a_is_sparse=False, b_is_sparse=False, name=None):
  """a @ b: MatMul for matrices, BatchMatMulV2 for higher ranks."""
  with ops.name_scope(name, "MatMul", [a, b]) as name:
    if transpose_a and adjoint_a:
      raise ValueError("Only one of transpose_a and adjoint_a can be True.")
    if transpose_b and adjoint_b:
      raise ValueError("Only one of transpose_b and adjoint_b can be True.")
    a = ops.convert_to_tensor(a, name="a")
    b = ops.convert_to_tensor(b, name="b", dtype=a.dtype.base_dtype)
    a_rank, b_rank = a.get_shape().ndims, b.get_shape().ndims
    if (a_rank is not None and a_rank > 2) or (b_rank is not None and b_rank > 2):
      return gen.batch_mat_mul_v2(a, b, adj_x=transpose_a or adjoint_a,
                                  adj_y=transpose_b or adjoint_b, name=name)
    return gen.mat_mul(a, b, transpose_a=transpose_a or adjoint_a,
                       transpose_b=transpose_b or adjoint_b, name=name)


def _reduction_dims(x, axis):
  if axis is not None:
    return axis
  rank = x.get_shape().ndims
  if rank is not None:
    return constant_op.constant(np.arange(rank, dtype=np.int32))
  return gen.range(0, gen.rank(x), 1)


def _reduce(op_fn, default_name, input_tensor, axis, keepdims, name, reduction_indices,
            keep_dims):
  if axis is not None and reduction_indices is not None:
    raise ValueError("Cannot specify both 'axis' and 'reduction_indices'.")
  if keepdims is not None and keep_dims is not None:
    raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'.")
  axis = axis if axis is not None else reduction_indices
  keepdims = bool(keepdims if keepdims is not None else keep_dims)
  with ops.name_scope(name, default_name, [input_tensor]) as name:
    x = ops.convert_to_tensor(input_tensor, name="input_tensor")
    return op_fn(x, _reduction_dims(x, axis), keep_dims=keepdims, name=name)


def reduce_sum(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
  return _reduce(gen.sum, "Sum", input_tensor, axis, keepdims, name, reduction_indices,
                 keep_dims)


def reduce_mean(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
  return _reduce(gen.mean, "Mean", input_tensor, axis, keepdims, name, reduction_indices,
                 keep_dims)


def reduce_max(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
  return _reduce(gen.max, "Max", input_tensor, axis, keepdims, name, reduction_indices,
                 keep_dims)


def reduce_min(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
  return _reduce(gen.min, "Min", input_tensor, axis, keepdims, name, reduction_indices,
                 keep_dims)


def reduce_prod(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
                keep_dims=None):
  return _reduce(gen.prod, "Prod", input_tensor, axis, keepdims, name, reduction_indices,
                 keep_dims)


def reduce_all(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
  """Logical and over axes (composed as a Min of the bools cast to int32)."""
  with ops.name_scope(name, "All", [input_tensor]) as name:
    as_int = cast(ops.convert_to_tensor(input_tensor, dtype=dtypes.bool), dtypes.int32)
    r = reduce_min(as_int, axis, keepdims, None, reduction_indices, keep_dims)
    return cast(r, dtypes.bool, name=name)


def reduce_any(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
               keep_dims=None):
  """Logical or over axes (composed as a Max of the bools cast to int32)."""
  with ops.name_scope(name, "Any", [input_tensor]) as name:
    as_int = cast(ops.convert_to_tensor(input_tensor, dtype=dtypes.bool), dtypes.int32)
    r = reduce_max(as_int, axis, keepdims, None, reduction_indices, keep_dims)
    return cast(r, dtypes.bool, name=name)


def argmax(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # pylint: disable=redefined-builtin
  if axis is not None and dimension is not None:
    raise ValueError("Cannot specify both 'axis' and 'dimension'")
  axis = axis if axis is not None else (dimension if dimension is not None else 0)
  return gen.arg_max(input, axis, output_type=output_type, name=name)


def argmin(input, axis=None, name=None, dimension=None, output_type=dtypes.int64):  # pylint: disable=redefined-builtin
  if axis is not None and dimension is not None:
    raise ValueError("Cannot specify both 'axis' and 'dimension'")
  axis = axis if axis is not None else (dimension if dimension is not None else 0)
  return gen.arg_min(input, axis, output_type=output_type, name=name)


def range(start, limit=None, delta=1, dtype=None, name="range"):  # pylint: disable=redefined-builtin
  """[start, start + delta, ...) below limit; range(n) is [0, n)."""
  if limit is None:
    start, limit = 0, start
  with ops.name_scope(name, "Range", [start, limit, delta]) as name:
    start = ops.convert_to_tensor(start, dtype=dtype, name="start")
    limit = ops.convert_to_tensor(limit, dtype=dtype, name="limit")
    delta = ops.convert_to_tensor(delta, dtype=dtype, name="delta")
    if dtype is None:
      order = [dtypes.int32, dtypes.int64, dtypes.float32, dtypes.float64]
      inferred = builtins.max([t.dtype for t in (start, limit, delta)], key=order.index)
      start, limit, delta = (cast(t, inferred) for t in (start, limit, delta))
    return gen.range(start, limit, delta, name=name)


def sigmoid_cross_entropy(logits, labels, name=None):
  return gen.sigmoid_cross_entropy_with_logits(logits, labels, name=name)


# --- Tensor operators ------------------------------------------------------

def _add_dispatch(x, y, name=None):
  if x.dtype == dtypes.string:
    return gen.add(x, y, name=name)
  return gen.add_v2(x, y, name=name)


def _binary_operator(func, op_name):
  """x <op> y and y <op> x for Tensors, converting the other side to x's dtype."""

  def binary_op_wrapper(x, y):
    with ops.name_scope(None, op_name, [x, y]) as name:
      if not isinstance(y, ops.Tensor):
        try:
          y = ops.convert_to_tensor(y, dtype=x.dtype.base_dtype, name="y")
        except TypeError:
          if hasattr(type(y), "__r%s__" % op_name):
            return NotImplemented
          raise
      return func(x, y, name=name)

  def r_binary_op_wrapper(y, x):
    with ops.name_scope(None, op_name, [x, y]) as name:
      x = ops.convert_to_tensor(x, dtype=y.dtype.base_dtype, name="x")
      return func(x, y, name=name)

  ops.Tensor._override_operator("__%s__" % op_name, binary_op_wrapper)  # pylint: disable=protected-access
  ops.Tensor._override_operator("__r%s__" % op_name, r_binary_op_wrapper)  # pylint: disable=protected-access


def _matmul_operator(a, b, name=None):
  return matmul(a, b, name=name)


_binary_operator(_add_dispatch, "add")
_binary_operator(gen.sub, "sub")
_binary_operator(gen.mul, "mul")
_binary_operator(truediv, "truediv")
_binary_operator(truediv, "div")
_binary_operator(floordiv, "floordiv")
_binary_operator(gen.floor_mod, "mod")
_binary_operator(gen.pow, "pow")
_binary_operator(gen.logical_and, "and")
_binary_operator(gen.logical_or, "or")
_binary_operator(logical_xor, "xor")
_binary_operator(_matmul_operator, "matmul")
ops.Tensor._override_operator("__lt__", gen.less)  # pylint: disable=protected-access
ops.Tensor._override_operator("__le__", gen.less_equal)  # pylint: disable=protected-access
ops.Tensor._override_operator("__gt__", gen.greater)  # pylint: disable=protected-access
ops.Tensor._override_operator("__ge__", gen.greater_equal)  # pylint: disable=protected-access
ops.Tensor._override_operator("__neg__", gen.neg)  # pylint: disable=protected-access
ops.Tensor._override_operator("__abs__", gen.abs)  # pylint: disable=protected-access
ops.Tensor._override_operator("__invert__", gen.logical_not)  # pylint: disable=protected-access


def _indexed_slices_to_tensor(value, dtype=None, name=None, as_ref=False):
  """IndexedSlices -> dense, by UnsortedSegmentSum (as TensorFlow does)."""
  _ = as_ref
  if dtype and not dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
    raise ValueError("Tensor conversion requested dtype %s for IndexedSlices with dtype %s" %
                     (dtypes.as_dtype(dtype).name, value.dtype.name))
  if value.dense_shape is None:
    raise ValueError("Tensor conversion requested for IndexedSlices without dense_shape: %s"
                     % str(value))
  with ops.name_scope(name, "IndexedSlicesToDense", [value.values]) as scope:
    num_segments = gen.strided_slice(value.dense_shape, [0], [1], [1], shrink_axis_mask=1)
    return gen.unsorted_segment_sum(value.values, value.indices, num_segments, name=scope)


ops.register_tensor_conversion_function(ops.IndexedSlices, _indexed_slices_to_tensor)

