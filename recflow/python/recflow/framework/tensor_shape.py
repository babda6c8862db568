"""TensorShape and Dimension with TensorFlow 1.x's (v1) behaviour.

As in TF 1.15, indexing a shape gives a `Dimension` (`x.shape[1].value`,
`int(x.shape[1])`), comparisons with an unknown dimension give None, and
`as_list()` gives ints and None.
"""


class Dimension(object):
  """One dimension of a shape: an int, or unknown (value None)."""

  __slots__ = ("_value",)

  def __init__(self, value):
    if value is None or isinstance(value, Dimension) and value.value is None:
      self._value = None
      return
    if isinstance(value, Dimension):
      value = value.value
    if isinstance(value, (bytes, str, float)) or isinstance(value, bool):
      raise TypeError("Dimension value must be integer or None, got %r" % (value,))
    try:
      self._value = int(value.__index__())
    except AttributeError:
      raise TypeError("Dimension value must be integer or None, got %r of type %s"
                      % (value, type(value).__name__))
    if self._value < 0:
      raise ValueError("Dimension %d must be >= 0" % self._value)

  @property
  def value(self):
    return self._value

  def __repr__(self):
    return "Dimension(%r)" % (self._value,)

  def __str__(self):
    return "?" if self._value is None else str(self._value)

  def __int__(self):
    if self._value is None:
      raise TypeError("int() of an unknown Dimension")
    return self._value

  def __index__(self):
    return self.__int__()

  def __hash__(self):
    return hash(self._value)

  def _compare(self, other, fn):
    try:
      other = as_dimension(other)
    except (TypeError, ValueError):
      return NotImplemented
    if self._value is None or other.value is None:
      return None
    return fn(self._value, other.value)

  def __eq__(self, other):
    return self._compare(other, lambda a, b: a == b)

  def __ne__(self, other):
    return self._compare(other, lambda a, b: a != b)

  def __lt__(self, other):
    return self._compare(other, lambda a, b: a < b)

  def __le__(self, other):
    return self._compare(other, lambda a, b: a <= b)

  def __gt__(self, other):
    return self._compare(other, lambda a, b: a > b)

  def __ge__(self, other):
    return self._compare(other, lambda a, b: a >= b)

  def _arith(self, other, fn):
    other = as_dimension(other)
    if self._value is None or other.value is None:
      return Dimension(None)
    return Dimension(fn(self._value, other.value))

  def __add__(self, other):
    return self._arith(other, lambda a, b: a + b)

  __radd__ = __add__

  def __sub__(self, other):
    return self._arith(other, lambda a, b: a - b)

  def __rsub__(self, other):
    return as_dimension(other) - self

  def __mul__(self, other):
    return self._arith(other, lambda a, b: a * b)

  __rmul__ = __mul__

  def __floordiv__(self, other):
    return self._arith(other, lambda a, b: a // b)

  def __rfloordiv__(self, other):
    return as_dimension(other) // self

  def __mod__(self, other):
    return self._arith(other, lambda a, b: a % b)

  def is_compatible_with(self, other):
    other = as_dimension(other)
    return self._value is None or other.value is None or self._value == other.value

  def assert_is_compatible_with(self, other):
    if not self.is_compatible_with(other):
      raise ValueError("Dimensions %s and %s are not compatible" % (self, other))

  def merge_with(self, other):
    other = as_dimension(other)
    self.assert_is_compatible_with(other)
    return Dimension(other.value if self._value is None else self._value)


def as_dimension(value):
  return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension):
  return dimension.value if isinstance(dimension, Dimension) else dimension


class TensorShape(object):
  """The shape of a tensor as graph construction knows it."""

  __slots__ = ("_dims",)

  def __init__(self, dims):
    if dims is None:
      self._dims = None
    elif isinstance(dims, TensorShape):
      self._dims = None if dims._dims is None else list(dims._dims)
    elif isinstance(dims, (bytes, str)):
      raise TypeError("A shape cannot be built from the string %r" % (dims,))
    else:
      try:
        dims_iter = iter(dims)
      except TypeError:
        self._dims = [as_dimension(dims)]  # a scalar: a vector shape of that size
      else:
        self._dims = [Dimension(None) if _is_unknown(d) else as_dimension(d)
                      for d in dims_iter]

  @property
  def dims(self):
    return self._dims

  @property
  def ndims(self):
    return None if self._dims is None else len(self._dims)

  rank = ndims

  def __repr__(self):
    if self._dims is None:
      return "TensorShape(None)"
    return "TensorShape(%r)" % self._dims

  def __str__(self):
    if self._dims is None:
      return "<unknown>"
    if len(self._dims) == 1:
      return "(%s,)" % self._dims[0]
    return "(%s)" % ", ".join(str(d) for d in self._dims)

  def __len__(self):
    if self._dims is None:
      raise ValueError("Cannot take the length of shape with unknown rank.")
    return len(self._dims)

  def __bool__(self):
    return self._dims is not None

  def __iter__(self):
    if self._dims is None:
      raise ValueError("Cannot iterate over a shape with unknown rank.")
    return iter(self._dims)

  def __getitem__(self, key):
    if self._dims is not None:
      if isinstance(key, slice):
        return TensorShape(self._dims[key])
      return self._dims[key]
    if isinstance(key, slice):
      start, stop = key.start, key.stop
      if key.step is not None or start is not None and start < 0 or stop is None or stop < 0:
        return unknown_shape()
      return unknown_shape(rank=max(stop - (start or 0), 0))
    return Dimension(None)

  def num_elements(self):
    if not self.is_fully_defined():
      return None
    n = 1
    for d in self._dims:
      n *= d.value
    return n

  def is_fully_defined(self):
    return self._dims is not None and all(d.value is not None for d in self._dims)

  def assert_is_fully_defined(self):
    if not self.is_fully_defined():
      raise ValueError("Shape %s is not fully defined" % self)

  def is_compatible_with(self, other):
    other = as_shape(other)
    if self._dims is None or other.dims is None:
      return True
    if len(self._dims) != len(other.dims):
      return False
    return all(a.is_compatible_with(b) for a, b in zip(self._dims, other.dims))

  def assert_is_compatible_with(self, other):
    if not self.is_compatible_with(other):
      raise ValueError("Shapes %s and %s are incompatible" % (self, as_shape(other)))

  def merge_with(self, other):
    other = as_shape(other)
    if self._dims is None:
      return other
    if other.dims is None:
      return self
    if len(self._dims) != len(other.dims):
      raise ValueError("Shapes %s and %s are not compatible" % (self, other))
    try:
      return TensorShape([a.merge_with(b) for a, b in zip(self._dims, other.dims)])
    except ValueError:
      raise ValueError("Shapes %s and %s are not compatible" % (self, other))

  def concatenate(self, other):
    other = as_shape(other)
    if self._dims is None or other.dims is None:
      return unknown_shape()
    return TensorShape(self._dims + other.dims)

  def with_rank(self, rank):
    try:
      return self.merge_with(unknown_shape(rank=rank))
    except ValueError:
      raise ValueError("Shape %s must have rank %d" % (self, rank))

  def with_rank_at_least(self, rank):
    if self.ndims is not None and self.ndims < rank:
      raise ValueError("Shape %s must have rank at least %d" % (self, rank))
    return self

  def with_rank_at_most(self, rank):
    if self.ndims is not None and self.ndims > rank:
      raise ValueError("Shape %s must have rank at most %d" % (self, rank))
    return self

  def assert_has_rank(self, rank):
    if self.ndims not in (None, rank):
      raise ValueError("Shape %s must have rank %d" % (self, rank))

  def assert_same_rank(self, other):
    other = as_shape(other)
    if self.ndims is not None and other.ndims is not None and self.ndims != other.ndims:
      raise ValueError("Shapes %s and %s must have the same rank" % (self, other))

  def as_list(self):
    if self._dims is None:
      raise ValueError("as_list() is not defined on an unknown TensorShape.")
    return [d.value for d in self._dims]

  def most_specific_compatible_shape(self, other):
    other = as_shape(other)
    if self._dims is None or other.dims is None or len(self._dims) != len(other.dims):
      return unknown_shape()
    return TensorShape([a.value if a.value == b.value else None
                        for a, b in zip(self._dims, other.dims)])

  def _as_dims_or_none(self):
    """None (unknown rank) or a list of int / None: the attr form."""
    return None if self._dims is None else [d.value for d in self._dims]

  def __eq__(self, other):
    try:
      other = as_shape(other)
    except TypeError:
      return NotImplemented
    return self._as_dims_or_none() == other._as_dims_or_none()

  def __ne__(self, other):
    result = self.__eq__(other)
    return result if result is NotImplemented else not result

  def __hash__(self):
    return hash(None if self._dims is None else tuple(d.value for d in self._dims))


def _is_unknown(d):
  return d is None or (isinstance(d, Dimension) and d.value is None) or (
      isinstance(d, int) and not isinstance(d, bool) and d == -1)


def as_shape(shape):
  return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None, ndims=None):
  if rank is None:
    rank = ndims
  return TensorShape(None if rank is None else [None] * rank)


def scalar():
  return TensorShape([])


def vector(length):
  return TensorShape([length])


def matrix(rows, cols):
  return TensorShape([rows, cols])
