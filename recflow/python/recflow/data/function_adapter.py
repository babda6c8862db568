"""Graph functions for tf.data, over recflow.framework.function:

- `trace`: a map / filter / flat_map / interleave function traced into the
  graph's library, with TensorFlow's argument convention (a tuple element is
  unpacked into positional arguments; anything else is one argument), the
  tensors it captures (the op's other_arguments) and the element structure
  of its result;
- `capture_by_value`: the function a OneShotIterator calls to make its
  dataset: a copy of the ops that build the dataset (TensorFlow's
  capture_by_value), so it needs no arguments. A placeholder (or a variable)
  among them cannot be copied: ValueError, as in TensorFlow."""

import collections

from recflow.util import nest
from recflow.data import structure
from recflow.framework import ops


def _function_module():
  try:
    from recflow.framework import function  # pylint: disable=g-import-not-at-top
  except ImportError:
    function = None
  if function is None or not hasattr(function, "trace_function"):
    raise NotImplementedError("tf.data functions need recflow.framework.function "
                              "(graph functions), which this build does not have")
  return function


Traced = collections.namedtuple("Traced", ["func", "captured", "output_structure"])


def _signature(function, input_structure):
  specs = nest.map_structure(lambda s: function.TensorSpec(s.shape, s.dtype), input_structure)
  if isinstance(input_structure, tuple) and not hasattr(input_structure, "_fields"):
    return list(specs)  # unpacked into positional arguments, as TF does
  return [specs]


def _name(fn, what):
  base = getattr(fn, "__name__", None) or "fn"
  if base == "<lambda>":
    base = "lambda"
  return "%s_%s" % (what.replace("Dataset.", "").replace(".", "_"), base)


def trace(fn, input_structure, what, returns_dataset=False):
  """Traces fn for a dataset op (see the module doc)."""
  function = _function_module()
  from recflow.data import dataset_ops  # pylint: disable=g-import-not-at-top
  returned = {}

  def wrapper(*args):
    result = fn(*args)
    if returns_dataset:
      if not isinstance(result, dataset_ops.Dataset):
        raise TypeError("%s: the function must return a Dataset, got %r" % (what, result))
      returned["structure"] = result.element_spec
      return result._variant_tensor  # pylint: disable=protected-access
    if isinstance(result, list):
      result = tuple(result)  # TF: a list result is a tuple of components
    return result

  traced = function.trace_function(wrapper, _signature(function, input_structure),
                                   name=function._unique_name(_name(fn, what)))  # pylint: disable=protected-access
  if returns_dataset:
    out = returned["structure"]
  else:
    outputs = traced.structured_outputs
    flat = nest.flatten(outputs)
    out = nest.pack_sequence_as(
        outputs, [structure.Spec(t.dtype.base_dtype, t.shape) for t in flat])
  return Traced(traced, list(traced.captured_inputs), out)


_PLACEHOLDERS = ("Placeholder", "PlaceholderV2", "PlaceholderWithDefault")
_STATEFUL_SOURCES = ("VariableV2", "Variable", "VarHandleOp", "ReadVariableOp",
                     "IteratorV2", "Iterator", "AnonymousIterator")


def _copy_attrs(op):
  from recflow.framework import op_def_library  # pylint: disable=g-import-not-at-top
  attrs = {}
  for attr_def in op_def_library.get_op_def(op.type).attr:
    value = op.get_attr(attr_def.name)
    if attr_def.type == "func" and not isinstance(value, (str, bytes)):
      value = getattr(value, "name", value)
    attrs[attr_def.name] = value
  return attrs


def capture_by_value(variant_tensor, what):
  """A traced no-argument function returning a copy of `variant_tensor`."""
  function = _function_module()
  outer = variant_tensor.graph

  def factory():
    graph = ops.get_default_graph()
    copies = {}

    def copy(t):
      op = t.op
      if op.name not in copies:
        if op.type in _PLACEHOLDERS:
          raise ValueError("%s: Cannot capture a placeholder (name:%s, type:%s) by value; "
                           "use make_initializable_iterator and feed it" % (what, op.name,
                                                                            op.type))
        if op.type in _STATEFUL_SOURCES:
          raise ValueError("%s: Cannot capture a stateful node (name:%s, type:%s) by value"
                           % (what, op.name, op.type))
        inputs = [copy(i) for i in op.inputs]
        copies[op.name] = graph.create_op(op.type, inputs, attrs=_copy_attrs(op),
                                          name=op.name.replace("/", "_"))
      return copies[op.name].outputs[t.value_index]

    return copy(variant_tensor)

  with outer.as_default():
    return function.trace_function(factory, [], name=function._unique_name("make_dataset"),  # pylint: disable=protected-access
                                   graph=outer)
