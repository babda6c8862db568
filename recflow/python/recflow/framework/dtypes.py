"""DType: TensorFlow's element types, with TensorFlow's names and enum numbers.

`tf.float32.as_datatype_enum == 1`, `tf.float32_ref` is 101, and so on: the
numbers are TensorFlow's `DataType` enum, which recflow's C++ core uses too.
"""

import builtins as _builtins

import numpy as np

from recflow import _pywrap


class DType(object):
  """An element type: tf.float32, tf.int64, tf.string, ..."""

  __slots__ = ("_type_enum",)

  def __init__(self, type_enum):
    type_enum = int(type_enum)
    if type_enum not in _NAMES:
      raise TypeError("%d is not a valid DataType" % type_enum)
    self._type_enum = type_enum

  @property
  def as_datatype_enum(self):
    return self._type_enum

  @property
  def name(self):
    return _NAMES[self._type_enum]

  @property
  def is_ref_dtype(self):
    return self._type_enum > 100

  @property
  def base_dtype(self):
    return _INTERN[self._type_enum - 100] if self.is_ref_dtype else self

  @property
  def real_dtype(self):
    base = self.base_dtype
    if base == complex64:
      return float32
    if base == complex128:
      return float64
    return base

  @property
  def _as_ref(self):
    return self if self.is_ref_dtype else _INTERN[self._type_enum + 100]

  @property
  def as_numpy_dtype(self):
    np_type = _TO_NUMPY.get(self.base_dtype._type_enum)
    if np_type is None:
      raise TypeError("%s has no NumPy equivalent" % self.name)
    return np_type

  @property
  def is_numpy_compatible(self):
    return self.base_dtype._type_enum in _TO_NUMPY

  @property
  def is_bool(self):
    return self.base_dtype == bool

  @property
  def is_floating(self):
    return self.base_dtype in (float16, bfloat16, float32, float64)

  @property
  def is_complex(self):
    return self.base_dtype in (complex64, complex128)

  @property
  def is_integer(self):
    return self.base_dtype in (int8, int16, int32, int64, uint8, uint16, uint32, uint64)

  @property
  def is_unsigned(self):
    return self.base_dtype in (uint8, uint16, uint32, uint64, bool)

  @property
  def is_quantized(self):
    return self.base_dtype in (qint8, quint8, qint16, quint16, qint32)

  @property
  def min(self):
    base = self.base_dtype
    if base.is_floating and base != bfloat16:
      return np.finfo(base.as_numpy_dtype).min
    if base.is_integer:
      return np.iinfo(base.as_numpy_dtype).min
    if base == bool:
      return False
    raise TypeError("Cannot find minimum value of %s." % self)

  @property
  def max(self):
    base = self.base_dtype
    if base.is_floating and base != bfloat16:
      return np.finfo(base.as_numpy_dtype).max
    if base.is_integer:
      return np.iinfo(base.as_numpy_dtype).max
    if base == bool:
      return True
    raise TypeError("Cannot find maximum value of %s." % self)

  @property
  def size(self):
    if self.base_dtype in (string, resource, variant):
      return 1
    return np.dtype(self.as_numpy_dtype).itemsize

  def is_compatible_with(self, other):
    other = as_dtype(other)
    return self._type_enum in (other.as_datatype_enum, other.base_dtype.as_datatype_enum)

  def __eq__(self, other):
    if other is None:
      return False
    if isinstance(other, DType):
      return self._type_enum == other._type_enum
    try:
      return self._type_enum == as_dtype(other)._type_enum
    except TypeError:
      return False

  def __ne__(self, other):
    return not self.__eq__(other)

  def __hash__(self):
    return self._type_enum

  def __reduce__(self):
    return as_dtype, (self.name,)

  def __repr__(self):
    return "tf." + self.name

  def __str__(self):
    return "<dtype: %r>" % self.name


# TensorFlow's enum numbers and Python names.
_NAMES = {
    0: "invalid", 1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16",
    6: "int8", 7: "string", 8: "complex64", 9: "int64", 10: "bool", 11: "qint8",
    12: "quint8", 13: "qint32", 14: "bfloat16", 15: "qint16", 16: "quint16",
    17: "uint16", 18: "complex128", 19: "float16", 20: "resource", 21: "variant",
    22: "uint32", 23: "uint64",
}
for _n in list(_NAMES):
  if _n:
    _NAMES[_n + 100] = _NAMES[_n] + "_ref"

_INTERN = {}
for _n in _NAMES:
  _INTERN[_n] = DType.__new__(DType)
  _INTERN[_n]._type_enum = _n

invalid = _INTERN[0]
float32, float64, int32, uint8, int16, int8, string, complex64, int64 = (
    _INTERN[n] for n in (1, 2, 3, 4, 5, 6, 7, 8, 9))
bool, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16 = (  # pylint: disable=redefined-builtin
    _INTERN[n] for n in (10, 11, 12, 13, 14, 15, 16, 17))
complex128, float16, resource, variant, uint32, uint64 = (
    _INTERN[n] for n in (18, 19, 20, 21, 22, 23))
half = float16
float = float32  # pylint: disable=redefined-builtin
double = float64
float32_ref, float64_ref, int32_ref, uint8_ref, int16_ref, int8_ref, string_ref = (
    _INTERN[n] for n in (101, 102, 103, 104, 105, 106, 107))
complex64_ref, int64_ref, bool_ref, bfloat16_ref, uint16_ref, complex128_ref = (
    _INTERN[n] for n in (108, 109, 110, 114, 117, 118))
float16_ref, uint32_ref, uint64_ref, resource_ref = (_INTERN[n] for n in (119, 122, 123, 120))
half_ref = float16_ref

_TO_NUMPY = {
    1: np.float32, 2: np.float64, 3: np.int32, 4: np.uint8, 5: np.int16, 6: np.int8,
    7: object, 8: np.complex64, 9: np.int64, 10: np.bool_, 17: np.uint16,
    18: np.complex128, 19: np.float16, 22: np.uint32, 23: np.uint64,
}

_FROM_NUMPY = {
    np.dtype(np.float32): float32, np.dtype(np.float64): float64, np.dtype(np.int32): int32,
    np.dtype(np.uint8): uint8, np.dtype(np.int16): int16, np.dtype(np.int8): int8,
    np.dtype(np.complex64): complex64, np.dtype(np.int64): int64,
    np.dtype(np.bool_): bool, np.dtype(np.uint16): uint16,
    np.dtype(np.complex128): complex128, np.dtype(np.float16): float16,
    np.dtype(np.uint32): uint32, np.dtype(np.uint64): uint64, np.dtype(object): string,
}

_BY_NAME = {name: _INTERN[n] for n, name in _NAMES.items()}
_BY_NAME.update({"float": float32, "double": float64, "half": float16})


def as_dtype(type_value):
  """A DType from a DType, an enum number, a name, a NumPy type or dtype."""
  if isinstance(type_value, DType):
    return type_value
  if isinstance(type_value, (int, np.integer)) and not isinstance(type_value, _builtins.bool):
    d = _INTERN.get(int(type_value))
    if d is not None and int(type_value) != 0:
      return d
    raise TypeError("Cannot convert value %r to a TensorFlow DType." % (type_value,))
  if isinstance(type_value, str):
    d = _BY_NAME.get(type_value)
    if d is None and type_value.startswith("DT_"):
      d = _BY_NAME.get(_pywrap_name_to_python(type_value))
    if d is not None and d is not invalid:
      return d
    raise TypeError("Cannot convert value %r to a TensorFlow DType." % (type_value,))
  if type_value is _builtins.float:
    return float32
  if type_value is _builtins.bool:
    return bool
  if type_value in (_builtins.str, _builtins.bytes, _builtins.object):
    return string
  try:
    np_dtype = np.dtype(type_value)
  except TypeError:
    np_dtype = None
  if np_dtype is not None:
    if np_dtype.kind in "SU":
      return string
    d = _FROM_NUMPY.get(np_dtype.newbyteorder("=") if np_dtype.byteorder == ">" else np_dtype)
    if d is not None:
      return d
  raise TypeError("Cannot convert value %r to a TensorFlow DType." % (type_value,))


def _pywrap_name_to_python(dt_name):
  """'DT_FLOAT' -> 'float32' (TensorFlow's C++ spelling to its Python one)."""
  name = dt_name[3:].lower()
  return {"float": "float32", "double": "float64", "half": "float16"}.get(name, name)


def recflow_name(dtype):
  """recflow's C++ name of a dtype ('float' for tf.float32)."""
  return _pywrap.dtype_name(as_dtype(dtype).as_datatype_enum)


QUANTIZED_DTYPES = frozenset([qint8, quint8, qint16, quint16, qint32])
