"""tf.constant and the conversion of Python values to Tensors.

Python values become NumPy arrays by TensorFlow's rules (make_tensor_proto):
Python floats are float32, ints int32 (int64 when they do not fit), bools
bool, str/bytes string; NumPy arrays keep their dtype unless one is asked
for; a requested dtype must be able to hold the values (1.5 is not an int32).
"""

import numbers

import numpy as np

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape


def _flatten(value):
  if isinstance(value, (list, tuple)):
    for v in value:
      for x in _flatten(v):
        yield x
  else:
    yield value


def _infer_dtype(values):
  """TensorFlow's dtype for Python (non-NumPy) values."""
  kinds = set()
  big_int = False
  for v in values:
    if isinstance(v, (bytes, str)):
      kinds.add("string")
    elif isinstance(v, (bool, np.bool_)):
      kinds.add("bool")
    elif isinstance(v, (numbers.Integral, np.integer)):
      kinds.add("int")
      if not -2**31 <= int(v) < 2**31:
        big_int = True
    elif isinstance(v, (numbers.Real, np.floating)):
      kinds.add("float")
    elif isinstance(v, (numbers.Complex, np.complexfloating)):
      kinds.add("complex")
    elif isinstance(v, np.ndarray):
      return None  # lists of arrays: let NumPy decide
    else:
      raise TypeError("Failed to convert object of type %s to Tensor. Contents: %s. Consider "
                      "casting elements to a supported type." % (type(v), _short(v)))
  if not kinds:
    return dtypes.float32
  if "string" in kinds:
    if len(kinds) > 1:
      raise TypeError("Failed to convert a list mixing strings and numbers to a Tensor.")
    return dtypes.string
  if "complex" in kinds:
    return dtypes.complex128
  if "float" in kinds:
    return dtypes.float32
  if "int" in kinds:
    return dtypes.int64 if big_int else dtypes.int32
  return dtypes.bool


def _short(v):
  text = repr(v)
  return text if len(text) < 80 else text[:77] + "..."


def _check_compatible(values, dtype):
  """TypeError when a Python value cannot be of `dtype` (as TF's _AssertCompatible)."""
  for v in values:
    if isinstance(v, np.ndarray):
      continue
    ok = True
    if dtype == dtypes.string:
      ok = isinstance(v, (bytes, str))
    elif dtype == dtypes.bool:
      ok = isinstance(v, (bool, np.bool_))
    elif dtype.is_integer:
      ok = isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool)
      if ok and not dtype.min <= int(v) <= dtype.max:
        raise TypeError("Value %d does not fit in %s" % (int(v), dtype.name))
    elif dtype.is_floating:
      ok = (isinstance(v, (numbers.Real, np.floating, np.integer))
            and not isinstance(v, (bool, np.bool_)))
    elif dtype.is_complex:
      ok = isinstance(v, (numbers.Number, np.number)) and not isinstance(v, (bool, np.bool_))
    if not ok:
      raise TypeError("Expected %s, got %s of type '%s' instead." %
                      (dtype.name, _short(v), type(v).__name__))


def to_ndarray(value, dtype=None):
  """`value` as a NumPy array by TensorFlow's conversion rules; `dtype` a DType or None.
  Strings come back as object arrays of bytes/str."""
  if dtype is not None:
    dtype = dtypes.as_dtype(dtype).base_dtype
  if isinstance(value, (np.ndarray, np.generic)):
    arr = np.asarray(value)
    if arr.dtype.kind in "SUO":
      if dtype is not None and dtype != dtypes.string:
        if arr.dtype.kind == "O":
          raise TypeError("Cannot convert an object array to %s; object arrays are taken only "
                          "as strings" % dtype.name)
        raise TypeError("Cannot convert a string array to %s" % dtype.name)
      if arr.dtype.kind == "O":
        _check_compatible(arr.ravel(), dtypes.string)
      return arr
    if dtype is None:
      dtypes.as_dtype(arr.dtype)  # TypeError for dtypes recflow cannot hold
      return arr
    if dtype == dtypes.string:
      raise TypeError("Expected string, got an array of %s" % arr.dtype)
    if not dtype.is_numpy_compatible:
      raise TypeError("%s has no NumPy equivalent" % dtype.name)
    return arr.astype(dtype.as_numpy_dtype, copy=False)
  if isinstance(value, (ops.Tensor, ops.IndexedSlices)):
    raise TypeError("Cannot convert a symbolic Tensor (%s) to a constant" % value.name)
  flat = list(_flatten(value))
  if dtype is None:
    dtype = _infer_dtype(flat)
  else:
    _check_compatible(flat, dtype)
  if dtype is None:  # nested arrays
    arr = np.array(value)
    dtypes.as_dtype(arr.dtype)
    return arr
  try:
    if dtype == dtypes.string:
      arr = np.array(value, dtype=object)
      for v in arr.ravel():  # ragged lists leave lists behind
        if not isinstance(v, (bytes, str)):
          raise ValueError("Argument must be a dense tensor: %s" % _short(value))
      return arr
    if not dtype.is_numpy_compatible:
      raise TypeError("%s has no NumPy equivalent" % dtype.name)
    return np.array(value, dtype=dtype.as_numpy_dtype)
  except ValueError as e:
    raise ValueError("Argument must be a dense tensor: %s - %s" % (_short(value), e))


def constant(value, dtype=None, shape=None, name="Const", verify_shape=False):
  """A Const node holding `value` (TF 1.x semantics: a smaller value fills
  `shape` by repeating its last element)."""
  arr = to_ndarray(value, dtype)
  tf_dtype = dtypes.as_dtype(dtype).base_dtype if dtype is not None else dtypes.as_dtype(
      arr.dtype)
  if shape is not None:
    shape = tensor_shape.as_shape(shape)
    if not shape.is_fully_defined():
      raise ValueError("shape of a constant must be fully defined, got %s" % shape)
    dims = shape.as_list()
    n = int(np.prod(dims, dtype=np.int64))
    if arr.size == n:
      arr = arr.reshape(dims)
    elif verify_shape:
      raise TypeError("Expected Tensor's shape: %s, got %s." % (tuple(dims), arr.shape))
    elif arr.size == 0:
      raise ValueError("cannot fill shape %s from an empty value" % (tuple(dims),))
    elif arr.size < n:
      flat = arr.ravel()
      arr = np.concatenate([flat, np.repeat(flat[-1:], n - flat.size)]).reshape(dims)
    else:
      raise ValueError("Too many elements provided. Needed at most %d, but received %d"
                       % (n, arr.size))
  g = ops.get_default_graph()
  op = g._create_op_internal(  # pylint: disable=protected-access
      "Const", [], {"value": arr, "dtype": tf_dtype.as_datatype_enum}, name)
  return op.outputs[0]


def _constant_tensor_conversion_function(v, dtype=None, name=None, as_ref=False):
  _ = as_ref
  return constant(v, dtype=dtype, name=name or "Const")


ops.register_tensor_conversion_function((list, tuple), _constant_tensor_conversion_function,
                                        100)
ops.register_tensor_conversion_function(object, _constant_tensor_conversion_function, 200)


def _shape_conversion_function(s, dtype=None, name=None, as_ref=False):
  _ = as_ref
  if not s.is_fully_defined():
    raise ValueError("Cannot convert a partially known TensorShape to a Tensor: %s" % s)
  if dtype is None:
    dtype = dtypes.int64 if any(d > 2**31 - 1 for d in s.as_list()) else dtypes.int32
  return constant(s.as_list(), dtype=dtype, name=name or "packed")


ops.register_tensor_conversion_function(tensor_shape.TensorShape, _shape_conversion_function,
                                        100)


def _dimension_conversion_function(d, dtype=None, name=None, as_ref=False):
  _ = as_ref
  if d.value is None:
    raise ValueError("Cannot convert an unknown Dimension to a Tensor: %s" % d)
  return constant(d.value, dtype=dtype or dtypes.int32, name=name or "Const")


ops.register_tensor_conversion_function(tensor_shape.Dimension, _dimension_conversion_function,
                                        100)


def is_constant(tensor_or_op):
  op = tensor_or_op.op if isinstance(tensor_or_op, ops.Tensor) else tensor_or_op
  return op.type == "Const"


def constant_value(tensor):
  """The value of `tensor` when it is a Const's output (else None): TF's
  tensor_util.constant_value, for the cases recflow can see in Python."""
  if not isinstance(tensor, ops.Tensor):
    raise TypeError("%r is not a Tensor" % (tensor,))
  if tensor.op.type == "Const":
    return tensor.op.get_attr("value")
  if tensor.op.type == "Shape":
    shape = tensor.op.inputs[0].get_shape()
    if shape.is_fully_defined():
      return np.array(shape.as_list(), dtype=tensor.dtype.as_numpy_dtype)
  if tensor.op.type == "Identity":
    return constant_value(tensor.op.inputs[0])
  return None
