"""Nested structures of values: TensorFlow's `tf.nest`.

A structure is a leaf (anything else: a Tensor, a number, None, a string) or
a sequence of structures: a list, a tuple (namedtuples included) or a
mapping (dict, OrderedDict, any `collections.abc.Mapping`). Mappings are
walked in sorted key order, whatever their insertion order, so two dicts
with the same keys flatten alike. Strings and bytes are leaves, never
sequences.

  flatten({"b": (1, 2), "a": [3]})          -> [3, 1, 2]
  pack_sequence_as({"b": (0, 0), "a": [0]}, [3, 1, 2])
                                              -> {"a": [3], "b": (1, 2)}
  map_structure(lambda x, y: x + y, (1, [2]), (10, [20]))  -> (11, [22])
"""

import collections as _collections
import collections.abc as _abc

__all__ = ["is_nested", "is_sequence", "flatten", "pack_sequence_as", "map_structure",
           "assert_same_structure", "flatten_up_to"]


def _is_namedtuple(value):
  return isinstance(value, tuple) and hasattr(value, "_fields")


def is_nested(structure):
  """True for lists, tuples and mappings (the sequences nest walks into)."""
  return isinstance(structure, (list, tuple, _abc.Mapping))


is_sequence = is_nested  # TF 1.x's name


def _sorted_keys(mapping):
  try:
    return sorted(mapping)
  except TypeError:
    raise TypeError("nest only supports mappings with sortable keys; got keys %r"
                    % (list(mapping),))


def _children(structure):
  if isinstance(structure, _abc.Mapping):
    return [structure[k] for k in _sorted_keys(structure)]
  return list(structure)


def _rebuild(instance, children):
  """A sequence like `instance` holding `children` (in nest's order)."""
  if isinstance(instance, _abc.Mapping):
    by_key = dict(zip(_sorted_keys(instance), children))
    # Keep the instance's own key order and type.
    ordered = [(k, by_key[k]) for k in instance]
    if isinstance(instance, _collections.defaultdict):
      result = type(instance)(instance.default_factory)
      result.update(ordered)
      return result
    try:
      return type(instance)(ordered)
    except TypeError:
      return dict(ordered)
  if _is_namedtuple(instance):
    return type(instance)(*children)
  if isinstance(instance, tuple):
    return tuple(children)
  if isinstance(instance, list):
    return list(children)
  return type(instance)(children)


def flatten(structure, expand_composites=False):
  """The leaves of `structure`, depth first (mappings by sorted key).

  A leaf alone flattens to [leaf]. `expand_composites` is accepted for
  TensorFlow compatibility; composite tensors (SparseTensor) stay leaves."""
  del expand_composites
  if not is_nested(structure):
    return [structure]
  out = []
  stack = [structure]
  # Iterative, so deep structures do not hit the recursion limit.
  while stack:
    item = stack.pop()
    if is_nested(item):
      stack.extend(reversed(_children(item)))
    else:
      out.append(item)
  return out


def _count_leaves(structure):
  return len(flatten(structure))


def pack_sequence_as(structure, flat_sequence, expand_composites=False):
  """`flat_sequence` (a list of leaves) put into the shape of `structure`.

  ValueError when the number of leaves differs."""
  del expand_composites
  if not is_nested(flat_sequence):
    raise TypeError("flat_sequence must be a list or tuple, got %r" % (flat_sequence,))
  flat_sequence = list(flat_sequence)
  if not is_nested(structure):
    if len(flat_sequence) != 1:
      raise ValueError("Structure is a leaf but flat_sequence has %d elements"
                       % len(flat_sequence))
    return flat_sequence[0]
  expected = _count_leaves(structure)
  if expected != len(flat_sequence):
    raise ValueError("Could not pack sequence: structure has %d leaves but flat_sequence has "
                     "%d elements. Structure: %r" % (expected, len(flat_sequence), structure))
  position = [0]

  def pack(s):
    if not is_nested(s):
      value = flat_sequence[position[0]]
      position[0] += 1
      return value
    return _rebuild(s, [pack(c) for c in _children(s)])

  return pack(structure)


def assert_same_structure(nest1, nest2, check_types=True, expand_composites=False):
  """ValueError (TypeError for differing sequence types with check_types)
  unless both have the same nesting and number of leaves."""
  del expand_composites

  def check(a, b, path):
    a_nested, b_nested = is_nested(a), is_nested(b)
    if a_nested != b_nested:
      raise ValueError("The two structures don't have the same nested structure at %s: %r vs "
                       "%r" % (path or "the top", a, b))
    if not a_nested:
      return
    if check_types:
      ta = dict if isinstance(a, _abc.Mapping) else type(a)
      tb = dict if isinstance(b, _abc.Mapping) else type(b)
      if ta is not tb:
        raise TypeError("The two structures don't have the same sequence type at %s: %s vs %s"
                        % (path or "the top", type(a).__name__, type(b).__name__))
    if isinstance(a, _abc.Mapping):
      if set(a) != set(b):
        raise ValueError("The two structures don't have the same keys at %s: %s vs %s"
                         % (path or "the top", sorted(a), sorted(b)))
    elif len(a) != len(b):
      raise ValueError("The two structures don't have the same length at %s: %d vs %d"
                       % (path or "the top", len(a), len(b)))
    keys = _sorted_keys(a) if isinstance(a, _abc.Mapping) else range(len(a))
    for k in keys:
      check(a[k], b[k], "%s[%r]" % (path, k))

  check(nest1, nest2, "")


def map_structure(func, *structures, **kwargs):
  """func applied to the leaves of `structures` (which must match), packed as
  the first. `check_types` (default True) as in assert_same_structure."""
  if not callable(func):
    raise TypeError("func must be callable, got %r" % (func,))
  if not structures:
    raise ValueError("map_structure needs at least one structure")
  check_types = kwargs.pop("check_types", True)
  kwargs.pop("expand_composites", None)
  if kwargs:
    raise ValueError("Only check_types and expand_composites are valid keyword arguments, got "
                     "%s" % sorted(kwargs))
  for other in structures[1:]:
    assert_same_structure(structures[0], other, check_types=check_types)
  flat = [flatten(s) for s in structures]
  return pack_sequence_as(structures[0], [func(*leaves) for leaves in zip(*flat)])


def flatten_up_to(shallow_tree, input_tree):
  """`input_tree` flattened only as deep as `shallow_tree` goes: each leaf
  of shallow_tree picks the (possibly nested) part of input_tree at its
  place."""
  if not is_nested(shallow_tree):
    return [input_tree]
  if not is_nested(input_tree):
    raise TypeError("If shallow structure is a sequence, input must also be a sequence. "
                    "Input has type: %s." % type(input_tree).__name__)
  if isinstance(shallow_tree, _abc.Mapping):
    if not isinstance(input_tree, _abc.Mapping) or not set(shallow_tree) <= set(input_tree):
      raise ValueError("The input's keys do not include the shallow structure's keys %s"
                       % sorted(shallow_tree))
    pairs = [(shallow_tree[k], input_tree[k]) for k in _sorted_keys(shallow_tree)]
  else:
    if len(shallow_tree) != len(input_tree):
      raise ValueError("The shallow structure has length %d but the input has length %d"
                       % (len(shallow_tree), len(input_tree)))
    pairs = list(zip(shallow_tree, input_tree))
  out = []
  for s, i in pairs:
    out.extend(flatten_up_to(s, i))
  return out
