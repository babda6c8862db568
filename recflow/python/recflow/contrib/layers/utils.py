"""tf.contrib.layers.utils: named outputs (end points) and small argument helpers."""

import collections as _collections

from recflow.framework import ops

__all__ = ["collect_named_outputs", "append_tensor_alias", "gather_tensors_aliases",
           "get_tensor_aliases", "convert_collection_to_dict", "get_variable_collections",
           "n_positive_integers", "two_element_tuple", "smart_cond", "constant_value",
           "last_dimension"]


def append_tensor_alias(tensor, alias):
  """Adds alias (a scope name; a trailing '/' is dropped) to tensor.aliases."""
  if alias[-1] == "/":
    alias = alias[:-1]
  if hasattr(tensor, "aliases"):
    tensor.aliases.append(alias)
  else:
    tensor.aliases = [alias]
  return tensor


def collect_named_outputs(collections, alias, outputs):
  """Gives outputs the alias and adds it to each collection (none when None)."""
  if collections:
    append_tensor_alias(outputs, alias)
    ops.add_to_collections(collections, outputs)
  return outputs


def get_tensor_aliases(tensor):
  if hasattr(tensor, "aliases"):
    return list(tensor.aliases)
  name = tensor.name
  return [name[:-2] if name.endswith(":0") else name]


def gather_tensors_aliases(tensors):
  aliases = []
  for tensor in tensors:
    aliases += get_tensor_aliases(tensor)
  return aliases


def convert_collection_to_dict(collection, clear_collection=False):
  """An OrderedDict alias -> tensor of a collection of named outputs (the end points)."""
  out = _collections.OrderedDict()
  for tensor in ops.get_collection(collection):
    for alias in get_tensor_aliases(tensor):
      out[alias] = tensor
  if clear_collection:
    del ops.get_collection_ref(collection)[:]
  return out


def get_variable_collections(variables_collections, name):
  """variables_collections may be a dict of per-variable collections or one list."""
  if isinstance(variables_collections, dict):
    return variables_collections.get(name, None)
  return variables_collections


def n_positive_integers(n, value):
  """value as a tuple of n positive ints: an int repeated, or n ints."""
  if isinstance(value, int) and not isinstance(value, bool):
    if value > 0:
      return (value,) * n
  else:
    try:
      value = tuple(int(v) if v is not None else v for v in value)
    except TypeError:
      value = None
    if value is not None and len(value) == n and all(v is not None and v > 0 for v in value):
      return value
  raise ValueError("Expected an int or a list/tuple of length %d of positive ints, got %r"
                   % (n, value))


def two_element_tuple(int_or_tuple):
  """(a, b) from an int or a 2-element list/tuple/TensorShape."""
  if isinstance(int_or_tuple, (list, tuple)):
    if len(int_or_tuple) != 2:
      raise ValueError("Must be a list with 2 elements: %s" % (int_or_tuple,))
    return int(int_or_tuple[0]), int(int_or_tuple[1])
  if isinstance(int_or_tuple, int) and not isinstance(int_or_tuple, bool):
    return int(int_or_tuple), int(int_or_tuple)
  if hasattr(int_or_tuple, "as_list"):
    return two_element_tuple(int_or_tuple.as_list())
  raise ValueError("Must be an int, a list with 2 elements or a TensorShape of length 2, "
                   "got %r" % (int_or_tuple,))


def constant_value(value_or_tensor_or_var, dtype=None):
  """A Python bool/number as is; None for a tensor whose value is not known statically."""
  del dtype
  if isinstance(value_or_tensor_or_var, (ops.Tensor,)) or hasattr(value_or_tensor_or_var, "op"):
    return None
  return value_or_tensor_or_var


def smart_cond(pred, fn1, fn2, name=None):
  """fn1() or fn2() when pred is a Python bool; tf.cond otherwise."""
  if isinstance(pred, bool):
    return fn1() if pred else fn2()
  from recflow.ops import control_flow_ops  # pylint: disable=import-outside-toplevel
  return control_flow_ops.cond(pred, fn1, fn2, name=name)


def last_dimension(shape, min_rank=1):
  """The static last dimension of shape; ValueError naming what is unknown."""
  dims = shape.dims if hasattr(shape, "dims") else None
  if dims is None:
    raise ValueError("dims of shape must be known but is None")
  if len(dims) < min_rank:
    raise ValueError("rank of shape must be at least %d not: %d" % (min_rank, len(dims)))
  value = dims[-1].value if hasattr(dims[-1], "value") else dims[-1]
  if value is None:
    raise ValueError("last dimension shape must be known but is None")
  return value

