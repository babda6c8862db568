"""The element structure of a dataset: a nest (tuple, list, dict, namedtuple)
of component specs, each a dtype and a TensorShape, flattened in nest order
into the output_types / output_shapes attrs of the dataset ops."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.framework import tensor_shape
from recflow.util import nest

class Spec(object):
  """One component: a dtype and a static shape (a leaf for nest, unlike a
  namedtuple)."""

  __slots__ = ("dtype", "shape")

  def __init__(self, dtype, shape):
    self.dtype = dtypes.as_dtype(dtype)
    self.shape = tensor_shape.as_shape(shape)

  def _key(self):
    dims = None if self.shape.ndims is None else tuple(self.shape.as_list())
    return (self.dtype, dims)

  def __eq__(self, other):
    return isinstance(other, Spec) and self._key() == other._key()

  def __ne__(self, other):
    return not self == other

  def __repr__(self):
    return "Spec(%s, %s)" % (self.dtype.name, self.shape)


def _check_leaf(value, what):
  if isinstance(value, (sparse_tensor.SparseTensor, sparse_tensor.SparseTensorValue)):
    raise NotImplementedError(
        "%s: SparseTensor components in tf.data are not supported by recflow; pass "
        "indices, values and dense_shape as separate components" % what)


def to_tensors(element, what):
  """The element's components as tensors (NumPy, lists, scalars converted).
  As in tf.data, tuples (namedtuples too) and dicts are structure; a list is
  one component (converted to a tensor), not a sequence of them."""
  counter = [0]

  def convert(v):
    if isinstance(v, dict):
      return type(v)((k, convert(v[k])) for k in v)
    if isinstance(v, tuple):
      children = [convert(c) for c in v]
      return type(v)(*children) if hasattr(v, "_fields") else tuple(children)
    _check_leaf(v, what)
    counter[0] += 1
    return ops.convert_to_tensor(v, name="component_%d" % (counter[0] - 1))

  return convert(element)


def spec_of(tensors, drop_first_dim=False):
  def one(t):
    shape = t.shape
    if drop_first_dim:
      if shape.ndims is not None and shape.ndims < 1:
        raise ValueError("from_tensor_slices: component %s is a scalar; every component "
                         "needs a first dimension to slice" % t.name)
      shape = tensor_shape.TensorShape(shape.dims[1:]) if shape.ndims is not None else shape
    return Spec(t.dtype.base_dtype, shape)
  return nest.map_structure(one, tensors)


def flat_types(structure):
  return [s.dtype for s in nest.flatten(structure)]


def flat_shapes(structure):
  return [s.shape for s in nest.flatten(structure)]


def types(structure):
  return nest.map_structure(lambda s: s.dtype, structure)


def shapes(structure):
  return nest.map_structure(lambda s: s.shape, structure)


def classes(structure):
  return nest.map_structure(lambda s: ops.Tensor, structure)


def pack(structure, flat_tensors):
  """flat_tensors (nest order) as the structure's nest; sets their static
  shapes from the structure when the op could not infer them."""
  specs = nest.flatten(structure)
  for t, s in zip(flat_tensors, specs):
    if t.dtype.base_dtype != s.dtype:
      raise TypeError("component %s is %s, expected %s" % (t.name, t.dtype, s.dtype))
    try:
      t.set_shape(s.shape)
    except ValueError:
      pass
  return nest.pack_sequence_as(structure, list(flat_tensors))


def from_types_and_shapes(output_types, output_shapes):
  """A structure from output_types / output_shapes nests of the same form."""
  flat_t = nest.flatten(output_types)
  flat_s = nest.flatten_up_to(output_types, output_shapes) if hasattr(
      nest, "flatten_up_to") else nest.flatten(output_shapes)
  specs = [Spec(dtypes.as_dtype(t), tensor_shape.as_shape(s)) for t, s in zip(flat_t, flat_s)]
  return nest.pack_sequence_as(output_types, specs)


def batched(structure, batch_dim):
  return nest.map_structure(
      lambda s: Spec(s.dtype, tensor_shape.TensorShape([batch_dim]).concatenate(s.shape)),
      structure)
