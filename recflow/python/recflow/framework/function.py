"""Graph functions from Python: tracing a callable into a FunctionDef.

  traced = function.trace_function(
      lambda x, y: {"sum": x + y, "scaled": x * w},      # w: an outer tensor
      [function.TensorSpec([None], tf.float32), function.TensorSpec([None], tf.float32)])
  traced.name               # the function's name in the graph's library
  traced.captured_inputs    # [w]: outer tensors passed after the arguments
  out = traced(a, b)        # a (Stateful)PartitionedCall node: {"sum": .., "scaled": ..}

`trace_function` runs the callable once on placeholders in a temporary
`FuncGraph`, whose ops become the FunctionDef's body (C++ writes their inputs
in function-body form). An outer-graph tensor the callable uses is captured:
the FuncGraph gets a placeholder for it, the function an extra argument after
the declared ones, and `captured_inputs` records the outer tensor, so that a
caller passes it: a call node does that itself; a kernel that takes the
function by attr (tf.data's MapDataset) takes them as `other_arguments`, with
`Targuments` their dtypes. Results may be any structure of tf.nest (a tensor,
tuple, list, dict; leaves converted with convert_to_tensor);
`structured_outputs` keeps it and `pack_outputs` rebuilds it from a flat list.

`Defun` is TF 1.x's decorator (tensorflow.python.framework.function.Defun) on
top: calling the decorated function in a graph traces it there (once per
graph and input types), adds it to the graph's library and adds a call node.
recflow calls through PartitionedCall (StatefulPartitionedCall when the body
has stateful ops) rather than a node whose op is the function's name
(GraphDefs that do that still import and run). Gradients through calls are
not supported: grad_func / python_grad_func are refused.
"""

import inspect
import itertools
import re
import threading

from recflow import _pywrap
from recflow.framework import dtypes
from recflow.framework import errors
from recflow.framework import ops
from recflow.framework import proto_bridge
from recflow.framework import tensor_shape
from recflow.util import nest

__all__ = ["TensorSpec", "FunctionDef", "FuncGraph", "TracedFunction", "trace_function",
           "Defun"]


class TensorSpec(object):
  """The dtype and shape of a function argument (tf.TensorSpec)."""

  def __init__(self, shape, dtype=dtypes.float32, name=None):
    self._shape = tensor_shape.TensorShape(shape)
    self._dtype = dtypes.as_dtype(dtype)
    self._name = name

  @property
  def shape(self):
    return self._shape

  @property
  def dtype(self):
    return self._dtype

  @property
  def name(self):
    return self._name

  def _key(self):
    shape = None if self._shape.ndims is None else tuple(self._shape.as_list())
    return (self._dtype, shape)

  def __eq__(self, other):
    return isinstance(other, TensorSpec) and self._key() == other._key()

  def __ne__(self, other):
    return not self == other

  def __hash__(self):
    return hash(self._key())

  def __repr__(self):
    return "TensorSpec(shape=%s, dtype=%r, name=%r)" % (self._shape, self._dtype, self._name)


def _as_spec(value):
  if isinstance(value, TensorSpec):
    return value
  if isinstance(value, ops.Tensor):
    return TensorSpec(value.shape, value.dtype.base_dtype)
  try:
    return TensorSpec(None, dtypes.as_dtype(value))
  except (TypeError, ValueError):
    raise TypeError("input_signature entries must be TensorSpecs, DTypes or Tensors, got %r"
                    % (value,))


class FunctionDef(object):
  """A serialized FunctionDef (TensorFlow's wire format) with the parts of
  the protobuf class programs use, as graph_io.GraphDef does for GraphDef."""

  def __init__(self, serialized=b""):
    self._serialized = bytes(serialized)
    self._decoded = None

  @classmethod
  def FromString(cls, serialized):  # pylint: disable=invalid-name
    f = cls(serialized)
    f._decode()
    return f

  def ParseFromString(self, serialized):  # pylint: disable=invalid-name
    self._serialized = bytes(serialized)
    self._decoded = None
    self._decode()
    return len(self._serialized)

  def SerializeToString(self):  # pylint: disable=invalid-name
    return self._serialized

  def _decode(self):
    if self._decoded is None:
      self._decoded = proto_bridge.decode("tensorflow.FunctionDef", self._serialized,
                                          enums_as_ints=True)
    return self._decoded

  @property
  def signature(self):
    """The signature as a dict (name, input_arg, output_arg, is_stateful ...)."""
    return self._decode().get("signature", {})

  @property
  def name(self):
    return self.signature.get("name", "")

  def __str__(self):
    return proto_bridge.to_text("tensorflow.FunctionDef", self._serialized)

  def __eq__(self, other):
    # By content: the wire bytes of protobuf maps (attr, ret) vary in order.
    return isinstance(other, FunctionDef) and (self._serialized == other._serialized or
                                               self._decode() == other._decode())

  def __ne__(self, other):
    return not self == other

  def __hash__(self):
    return hash(self.name)


class FuncGraph(ops.Graph):
  """The graph a function is traced in. Ops created while it is the default
  graph land in it; a tensor of an enclosing graph used as an input is
  captured (see `capture`)."""

  def __init__(self, name, outer_graph):
    super(FuncGraph, self).__init__()
    self.name = name
    self.outer_graph = outer_graph
    self._building_function = True
    self.seed = outer_graph.seed
    self.inputs = []    # placeholders: the declared arguments, then the captures
    self.outputs = []   # flat result tensors
    self.structured_outputs = None
    self._captures = {}       # key of an outer tensor -> (outer tensor, placeholder)
    self._capture_order = []  # keys, in capture order

  @property
  def captures(self):
    """(outer tensor, placeholder) pairs, in the order captured."""
    return [self._captures[k] for k in self._capture_order]

  @property
  def external_captures(self):
    return [outer for outer, _ in self.captures]

  @property
  def internal_captures(self):
    return [inner for _, inner in self.captures]

  def _placeholder(self, dtype, shape, name):
    """A Placeholder at the root of this graph, with no control inputs."""
    saved_stack = self._name_stack
    self._name_stack = ""
    try:
      with self.control_dependencies(None):
        dims = None if shape.ndims is None else [d for d in _dims(shape)]
        op = self._create_op_internal(
            "Placeholder", [], {"dtype": dtype.base_dtype.as_datatype_enum, "shape": dims},
            name)
    finally:
      self._name_stack = saved_stack
    return op.outputs[0]

  def capture(self, tensor):
    """The placeholder standing for `tensor`, a tensor of an enclosing graph
    (made on first use; the same one after)."""
    if tensor.graph is self:
      return tensor
    if tensor.graph is not self.outer_graph:
      if isinstance(self.outer_graph, FuncGraph):
        tensor = self.outer_graph.capture(tensor)  # through the enclosing function
      else:
        raise ValueError("Tensor %s is not from function '%s''s graph or a graph enclosing it"
                         % (tensor.name, self.name))
    key = (tensor.op._id, tensor.value_index)  # pylint: disable=protected-access
    if key not in self._captures:
      inner = self._placeholder(tensor.dtype, tensor.shape, "capture")
      self._captures[key] = (tensor, inner)
      self._capture_order.append(key)
      self.inputs.append(inner)
    return self._captures[key][1]

  def _maybe_capture(self, value):
    if isinstance(value, ops.Tensor) and value.graph is not self:
      return self.capture(value)
    return value

  def _create_op_internal(self, op_type, input_args, attrs, name, compute_device=True):
    captured = []
    for arg in input_args:
      if isinstance(arg, (list, tuple)):
        captured.append([self._maybe_capture(t) for t in arg])
      else:
        captured.append(self._maybe_capture(arg))
    return super(FuncGraph, self)._create_op_internal(op_type, captured, attrs, name,
                                                      compute_device)


def _dims(shape):
  for d in shape.as_list():
    yield None if d is None or d < 0 else int(d)


_name_lock = threading.Lock()
_name_counter = itertools.count()
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.\-]")


def _unique_function_name(python_func):
  return _unique_name(getattr(python_func, "__name__", "function") or "function")


def _unique_name(base):
  base = _INVALID_NAME_CHARS.sub("_", base)
  if base == "_lambda_":
    base = "lambda"
  with _name_lock:
    return "%s_%d" % (base, next(_name_counter))


class TracedFunction(object):
  """A Python callable traced into a graph function (see the module doc).

  Attributes: name; function_def (FunctionDef); graph (the FuncGraph);
  outer_graph; captured_inputs (outer tensors, passed after the arguments);
  input_signature (as given); input_types / output_types (flat DTypes, the
  captures' dtypes included in input_types); output_shapes (flat
  TensorShapes); structured_outputs (the callable's result, with the
  FuncGraph's tensors as leaves); is_stateful."""

  def __init__(self, name, func_graph, function_def, input_signature, num_args):
    self.name = name
    self.graph = func_graph
    self.outer_graph = func_graph.outer_graph
    self.function_def = function_def
    self.input_signature = input_signature
    self.structured_outputs = func_graph.structured_outputs
    self._num_args = num_args
    self.input_types = [t.dtype.base_dtype for t in func_graph.inputs]
    self.output_types = [t.dtype.base_dtype for t in func_graph.outputs]
    self.output_shapes = [t.shape for t in func_graph.outputs]
    self.is_stateful = bool(function_def.signature.get("is_stateful", False))

  @property
  def captured_inputs(self):
    return self.graph.external_captures

  @property
  def definition(self):  # TF 1.x's _DefinedFunction spelling
    return self.function_def

  def add_to_graph(self, graph=None):
    """Adds this function, and the functions its body calls, to the library
    of `graph` (default: the default graph)."""
    graph = graph or ops.get_default_graph()
    for fname in _pywrap.graph_function_names(self.graph._c_graph):  # pylint: disable=protected-access
      graph._add_function(_pywrap.graph_get_function(self.graph._c_graph, fname))  # pylint: disable=protected-access
    graph._add_function(self.function_def.SerializeToString())  # pylint: disable=protected-access

  def pack_outputs(self, flat_outputs):
    """`flat_outputs` (one per output) in the structure the callable returned."""
    return nest.pack_sequence_as(self.structured_outputs, list(flat_outputs))

  def call_flat(self, flat_args, name=None):
    """Adds a call node to the default graph on `flat_args` (one per declared
    argument, flattened; captured inputs are appended here) and returns its
    flat outputs (the call Operation when there are none)."""
    flat_args = list(flat_args)
    if len(flat_args) != self._num_args:
      raise ValueError("Function '%s' takes %d argument tensors, got %d"
                       % (self.name, self._num_args, len(flat_args)))
    args = []
    for i, (value, dtype) in enumerate(zip(flat_args, self.input_types)):
      try:
        args.append(ops.convert_to_tensor(value, dtype=dtype))
      except (TypeError, ValueError) as e:
        raise TypeError("Argument %d of function '%s' must be %s: %s"
                        % (i, self.name, dtype.name, e))
    inputs = args + list(self.captured_inputs)
    graph = ops._get_graph_from_inputs(inputs)  # pylint: disable=protected-access
    if not isinstance(graph, FuncGraph) and graph is not self.outer_graph and self.captured_inputs:
      raise ValueError("Function '%s' captures tensors of another graph; trace it in the graph "
                       "that calls it" % self.name)
    self.add_to_graph(graph)
    op_type = "StatefulPartitionedCall" if self.is_stateful else "PartitionedCall"
    attrs = {"Tin": [t.dtype.base_dtype.as_datatype_enum for t in inputs],
             "Tout": [t.as_datatype_enum for t in self.output_types],
             "f": self.name}
    op = graph._create_op_internal(op_type, [inputs], attrs, name or self.name)  # pylint: disable=protected-access
    if not op.outputs:
      return op
    outputs = list(op.outputs)
    for t, shape in zip(outputs, self.output_shapes):
      t.set_shape(shape)
    return outputs

  def __call__(self, *args, **kwargs):
    """Calls the function on arguments structured as its input_signature;
    returns results structured as the callable returned them."""
    name = kwargs.pop("name", None)
    if kwargs:
      raise TypeError("Unexpected keyword arguments: %s" % sorted(kwargs))
    flat = nest.flatten(list(args))
    outputs = self.call_flat(flat, name=name)
    if isinstance(outputs, ops.Operation):
      return outputs
    return self.pack_outputs(outputs)


def _convert_output(value, index, fname):
  if value is None:
    raise TypeError("Function '%s' returned None at output %d; functions must return tensors "
                    "(or values convertible to tensors)" % (fname, index))
  if isinstance(value, ops.Operation):
    raise TypeError("Function '%s' returned an Operation (%s) at output %d; return tensors "
                    "(use tf.identity under tf.control_dependencies to order effects)"
                    % (fname, value.name, index))
  try:
    return ops.convert_to_tensor(value)
  except (TypeError, ValueError) as e:
    raise TypeError("Function '%s': output %d (%r) is not convertible to a tensor: %s"
                    % (fname, index, value, e))


def trace_function(python_func, input_signature=(), name=None, graph=None, add_to_graph=True,
                   arg_names=None, output_names=None):
  """Traces `python_func` into a graph function.

  Args:
    python_func: called once, as python_func(*args), where args has one entry
      per entry of input_signature, each built of placeholders with the same
      nesting.
    input_signature: a list of positional arguments, each a (nested)
      structure of TensorSpec (or DType, meaning an unknown shape).
    name: the function's name (default: the callable's name plus a number,
      unique in this process).
    graph: the graph whose tensors the function may capture and whose
      library gets it (default: the default graph).
    add_to_graph: add the function to `graph`'s library now.
    arg_names: optional names for the flat arguments (the FunctionDef's
      input_arg names; default: from the placeholders).
    output_names: optional names for the flat results (output_arg names;
      default: output_0, output_1, ...).

  Returns:
    A TracedFunction.
  """
  outer = graph if graph is not None else ops.get_default_graph()
  name = name or _unique_function_name(python_func)
  input_signature = list(input_signature)
  flat_specs = [_as_spec(s) for s in nest.flatten(input_signature)]
  if arg_names is not None and len(arg_names) != len(flat_specs):
    raise ValueError("arg_names has %d names for %d arguments" % (len(arg_names),
                                                                  len(flat_specs)))
  func_graph = FuncGraph(name, outer)
  with func_graph.as_default():
    placeholders = []
    for i, spec in enumerate(flat_specs):
      pname = (arg_names[i] if arg_names else None) or spec.name or "arg%d" % i
      placeholders.append(func_graph._placeholder(spec.dtype, spec.shape, pname))  # pylint: disable=protected-access
    func_graph.inputs = list(placeholders)
    args = nest.pack_sequence_as(input_signature, placeholders)
    result = python_func(*args)
    flat_results = nest.flatten(result)
    flat_outputs = []
    for i, value in enumerate(flat_results):
      t = _convert_output(value, i, name)
      flat_outputs.append(func_graph._maybe_capture(t))  # pylint: disable=protected-access
  func_graph.outputs = flat_outputs
  func_graph.structured_outputs = nest.pack_sequence_as(result, flat_outputs)
  input_ids = [t.op._id for t in func_graph.inputs]  # pylint: disable=protected-access
  names = []
  if arg_names:
    names = [_INVALID_NAME_CHARS.sub("_", n).lower() for n in arg_names]
    names += ["capture_%d" % i for i in range(len(func_graph.inputs) - len(names))]
  doc = inspect.getdoc(python_func) or ""
  try:
    serialized = _pywrap.graph_to_function_def(
        func_graph._c_graph, name, input_ids, names,  # pylint: disable=protected-access
        [(t.op._id, t.value_index) for t in flat_outputs], list(output_names or []), [],  # pylint: disable=protected-access
        doc)
  except errors.OpError as e:
    raise ValueError(e.message)
  traced = TracedFunction(name, func_graph, FunctionDef(serialized), input_signature,
                          len(flat_specs))
  if add_to_graph:
    traced.add_to_graph(outer)
  return traced


class Defun(object):
  """TF 1.x's function decorator: `@Defun(tf.float32, tf.float32)`.

  The decorated function, called in a graph, is traced there (once per graph
  and argument dtypes; with no dtypes given, they are taken from the call's
  arguments), added to the graph's library, and called through a
  PartitionedCall node. Keyword arguments: func_name (the library name),
  out_names (result names), shape_func (a function of the call Operation
  returning the result shapes); other keyword arguments (noinline,
  compiled, ...) are accepted and ignored. grad_func and python_grad_func
  raise NotImplementedError: recflow does not differentiate through calls.
  """

  def __init__(self, *input_types, **kwargs):
    self._input_types = [dtypes.as_dtype(t) for t in input_types]
    self._func_name = kwargs.pop("func_name", None)
    self._out_names = kwargs.pop("out_names", None)
    self._shape_func = kwargs.pop("shape_func", None)
    if kwargs.pop("grad_func", None) is not None or kwargs.pop("python_grad_func",
                                                               None) is not None:
      raise NotImplementedError("Defun: grad_func / python_grad_func are not supported; "
                                "recflow does not differentiate through function calls")

  def __call__(self, func):
    if not callable(func):
      raise TypeError("Defun must decorate a callable, got %r" % (func,))
    return _DefinedFunction(func, self._input_types, self._func_name, self._out_names,
                            self._shape_func)


class _DefinedFunction(object):
  """What Defun returns: callable in a graph; `name`, `definition`,
  `captured_inputs` refer to the trace in the default graph."""

  def __init__(self, func, input_types, func_name, out_names, shape_func):
    self._func = func
    self._input_types = input_types
    self._func_name = func_name
    self._out_names = out_names
    self._shape_func = shape_func
    self._traces = {}  # (graph, input dtypes) -> TracedFunction
    self._lock = threading.Lock()
    try:
      params = list(inspect.signature(func).parameters.values())
      self._arg_names = [p.name for p in params
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
      self._arg_names = []
    self.__name__ = getattr(func, "__name__", "function")
    self.__doc__ = getattr(func, "__doc__", None)

  def _trace(self, graph, types):
    key = (id(graph), tuple(t.as_datatype_enum for t in types))
    with self._lock:
      traced = self._traces.get(key)
      if traced is None or traced.outer_graph is not graph:
        name = self._func_name
        if name is None:
          name = _unique_function_name(self._func)
        elif any(k[0] == id(graph) and k != key for k in self._traces):
          name = _unique_name(name)  # another dtype signature in the same graph
        names = self._arg_names if len(self._arg_names) == len(types) else None
        traced = trace_function(self._func, list(types), name=name, graph=graph,
                                add_to_graph=False, arg_names=names,
                                output_names=self._out_names)
        self._traces[key] = traced
    return traced

  def _default_trace(self):
    if not self._input_types:
      raise ValueError("Defun '%s' declares no input types; it is traced when called"
                       % self.__name__)
    return self._trace(ops.get_default_graph(), self._input_types)

  @property
  def name(self):
    return self._default_trace().name

  @property
  def definition(self):
    return self._default_trace().function_def

  @property
  def captured_inputs(self):
    return self._default_trace().captured_inputs

  def add_to_graph(self, g):
    self._trace(g, self._input_types).add_to_graph(g)

  def __call__(self, *args, **kwargs):
    name = kwargs.pop("name", None)
    if kwargs:
      raise TypeError("Unexpected keyword arguments: %s" % sorted(kwargs))
    graph = ops.get_default_graph()
    if self._input_types:
      if len(args) != len(self._input_types):
        raise ValueError("Defun '%s' takes %d arguments, got %d"
                         % (self.__name__, len(self._input_types), len(args)))
      types = self._input_types
    else:
      tensors = [ops.convert_to_tensor(a) for a in args]
      args = tensors
      types = [t.dtype.base_dtype for t in tensors]
    traced = self._trace(graph, types)
    outputs = traced.call_flat(list(args), name=name)
    if isinstance(outputs, ops.Operation):
      return outputs
    if self._shape_func is not None and outputs:
      for t, shape in zip(outputs, self._shape_func(outputs[0].op)):
        t.set_shape(shape)
    structured = traced.pack_outputs(outputs)
    if isinstance(structured, list) and len(structured) == 1 and len(outputs) == 1:
      return structured[0]
    return structured
