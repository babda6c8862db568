"""tf.SparseTensor and tf.SparseTensorValue (TensorFlow 1.x's COO sparse tensor).

A SparseTensor is three dense tensors: `indices` (int64 [N, rank]), `values`
([N]) and `dense_shape` (int64 [rank]). It is not a node: ops take its parts.
Session.run feeds it from a SparseTensorValue or an (indices, values, shape)
tuple and fetches it as a SparseTensorValue (client/session.py).
"""

import collections

import numpy as np

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape


class SparseTensorValue(collections.namedtuple("SparseTensorValue",
                                               ["indices", "values", "dense_shape"])):
  """The value of a SparseTensor: NumPy indices, values and dense_shape."""

  __slots__ = ()

  def __repr__(self):
    return "SparseTensorValue(indices=%r, values=%r, dense_shape=%r)" % tuple(self)


class SparseTensor(ops._TensorLike):  # pylint: disable=protected-access
  """A sparse tensor: values at indices of a tensor of shape dense_shape."""

  @classmethod
  def from_value(cls, sparse_tensor_value):
    if not is_sparse(sparse_tensor_value):
      raise TypeError("Neither a SparseTensor nor SparseTensorValue: %s." %
                      (sparse_tensor_value,))
    return SparseTensor(indices=sparse_tensor_value.indices,
                        values=sparse_tensor_value.values,
                        dense_shape=sparse_tensor_value.dense_shape)

  def __init__(self, indices, values, dense_shape):
    with ops.name_scope(None, "SparseTensor", [indices, values, dense_shape]):
      indices = ops.convert_to_tensor(indices, name="indices", dtype=dtypes.int64)
      values = ops.convert_to_tensor(values, name="values")
      dense_shape = ops.convert_to_tensor(dense_shape, name="dense_shape",
                                          dtype=dtypes.int64)
    indices_shape = indices.get_shape()
    if indices_shape.ndims is not None and indices_shape.ndims != 2:
      raise ValueError("indices must be a matrix [N, rank], got shape %s" % indices_shape)
    values_shape = values.get_shape()
    if values_shape.ndims is not None and values_shape.ndims != 1:
      raise ValueError("values must be a vector [N], got shape %s" % values_shape)
    shape_shape = dense_shape.get_shape()
    if shape_shape.ndims is not None and shape_shape.ndims != 1:
      raise ValueError("dense_shape must be a vector [rank], got shape %s" % shape_shape)
    n_i = indices_shape[0].value if indices_shape.ndims else None
    n_v = values_shape[0].value if values_shape.ndims else None
    if n_i is not None and n_v is not None and n_i != n_v:
      raise ValueError("indices has %d rows but values has %d elements" % (n_i, n_v))
    r_i = indices_shape[1].value if indices_shape.ndims else None
    r_s = shape_shape[0].value if shape_shape.ndims else None
    if r_i is not None and r_s is not None and r_i != r_s:
      raise ValueError("indices has %d columns but dense_shape has %d elements" % (r_i, r_s))
    self._indices = indices
    self._values = values
    self._dense_shape = dense_shape

  @property
  def indices(self):
    return self._indices

  @property
  def values(self):
    return self._values

  @property
  def dense_shape(self):
    return self._dense_shape

  @property
  def op(self):
    return self._values.op

  @property
  def dtype(self):
    return self._values.dtype

  @property
  def graph(self):
    return self._values.graph

  @property
  def shape(self):
    return self.get_shape()

  def get_shape(self):
    """The static dense shape: known when dense_shape is a constant."""
    from recflow.framework import constant_op  # pylint: disable=g-import-not-at-top
    value = constant_op.constant_value(self._dense_shape)
    if value is not None:
      return tensor_shape.TensorShape([int(d) for d in value])
    rank = self._dense_shape.get_shape()
    if rank.ndims == 1 and rank[0].value is not None:
      return tensor_shape.unknown_shape(rank[0].value)
    return tensor_shape.unknown_shape()

  def eval(self, feed_dict=None, session=None):
    session = session or ops.get_default_session()
    if session is None:
      raise ValueError("Cannot evaluate a SparseTensor without a default session")
    return session.run(self, feed_dict=feed_dict)

  def with_values(self, new_values):
    return SparseTensor(self._indices, new_values, self._dense_shape)

  def consumers(self):
    return self._values.consumers()

  def __repr__(self):
    return "SparseTensor(indices=%s, values=%s, dense_shape=%s)" % (
        self._indices, self._values, self._dense_shape)


def is_sparse(x):
  return isinstance(x, (SparseTensor, SparseTensorValue))


def convert_to_tensor_or_sparse_tensor(value, dtype=None, name=None):
  """value as a SparseTensor when it is sparse (a SparseTensorValue becomes
  constants), else as a Tensor."""
  if dtype is not None:
    dtype = dtypes.as_dtype(dtype)
  if isinstance(value, SparseTensorValue):
    value = SparseTensor.from_value(value)
  if isinstance(value, SparseTensor):
    if dtype and not dtype.is_compatible_with(value.dtype):
      raise RuntimeError("Sparse dtype: requested = %s, actual = %s" % (dtype.name,
                                                                       value.dtype.name))
    return value
  return ops.convert_to_tensor(value, dtype=dtype, name=name)


def sparse_value_parts(value, what):
  """(indices, values, dense_shape) of a SparseTensorValue or a 3-tuple fed for a
  SparseTensor, as NumPy arrays (indices and shape int64)."""
  if isinstance(value, SparseTensorValue) or (isinstance(value, (tuple, list)) and
                                              len(value) == 3):
    indices, values, shape = value
  else:
    raise TypeError("The value fed for the SparseTensor %s must be a SparseTensorValue or an "
                    "(indices, values, dense_shape) tuple, got %s" % (what, type(value).__name__))
  indices = np.asarray(indices, dtype=np.int64)
  if indices.ndim == 1 and indices.size == 0:
    indices = indices.reshape(0, len(np.asarray(shape).reshape(-1)))
  return indices, values, np.asarray(shape, dtype=np.int64)

