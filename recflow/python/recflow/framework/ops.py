"""Graph, Operation and Tensor: TensorFlow 1.x's graph-building core.

A Python `Graph` wraps recflow's C++ graph (`_pywrap.Graph`): nodes live in
C++ (dtypes and shapes are inferred there as nodes are added, and a bad node
never enters the graph); Python keeps what TensorFlow keeps in Python: name
scopes, control-dependency and device stacks, collections, the default-graph
stack. `Operation` and `Tensor` objects are thin handles (graph, node id,
output index) created on demand.

Thread-safety: as in TensorFlow, build a graph from one thread at a time;
the name, control-dependency and device stacks are per thread, and every
call into the C++ graph holds the GIL, so concurrent use cannot corrupt it.
"""

import collections
import contextlib
import re
import threading

import numpy as np

from recflow import _pywrap
from recflow.framework import dtypes
from recflow.framework import errors
from recflow.framework import tensor_shape

_VALID_OP_NAME_REGEX = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_./-]*$")
_VALID_SCOPE_NAME_REGEX = re.compile(r"^[A-Za-z0-9_./-]*$")


class GraphKeys(object):
  """Standard names of graph collections (TensorFlow's)."""
  GLOBAL_VARIABLES = "variables"
  VARIABLES = GLOBAL_VARIABLES
  LOCAL_VARIABLES = "local_variables"
  METRIC_VARIABLES = "metric_variables"
  MODEL_VARIABLES = "model_variables"
  TRAINABLE_VARIABLES = "trainable_variables"
  TRAINABLE_RESOURCE_VARIABLES = "trainable_resource_variables"
  SUMMARIES = "summaries"
  QUEUE_RUNNERS = "queue_runners"
  TABLE_INITIALIZERS = "table_initializer"
  ASSET_FILEPATHS = "asset_filepaths"
  MOVING_AVERAGE_VARIABLES = "moving_average_variables"
  REGULARIZATION_LOSSES = "regularization_losses"
  CONCATENATED_VARIABLES = "concatenated_variables"
  SAVERS = "savers"
  WEIGHTS = "weights"
  BIASES = "biases"
  ACTIVATIONS = "activations"
  UPDATE_OPS = "update_ops"
  LOSSES = "losses"
  SAVEABLE_OBJECTS = "saveable_objects"
  RESOURCES = "resources"
  LOCAL_RESOURCES = "local_resources"
  INIT_OP = "init_op"
  LOCAL_INIT_OP = "local_init_op"
  READY_OP = "ready_op"
  READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
  SUMMARY_OP = "summary_op"
  GLOBAL_STEP = "global_step"
  EVAL_STEP = "eval_step"
  TRAIN_OP = "train_op"
  COND_CONTEXT = "cond_context"
  WHILE_CONTEXT = "while_context"


# --- Tensor ----------------------------------------------------------------

class _TensorLike(object):
  """Marker base of Tensor-like graph values (Tensor, IndexedSlices)."""


class Tensor(_TensorLike):
  """One output of an Operation: a symbolic value computed when a Session runs.

  Operators (+, *, [], <, ...) are installed by recflow.ops.math_ops and
  array_ops, as TensorFlow does. As in TF 1.x, `==` is identity and a Tensor
  is hashable.
  """

  OVERLOADABLE_OPERATORS = {
      "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__div__",
      "__rdiv__", "__truediv__", "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__",
      "__rmod__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__rand__", "__or__",
      "__ror__", "__xor__", "__rxor__", "__getitem__", "__pow__", "__rpow__", "__invert__",
      "__neg__", "__abs__", "__matmul__", "__rmatmul__",
  }

  # NumPy defers to our reflected operators (np.float32(2) * t is a Tensor).
  __array_priority__ = 100

  def __init__(self, op, value_index, dtype):
    self._op = op
    self._value_index = value_index
    self._dtype = dtype
    self._shape_val = None       # what C++ inferred, merged with set_shape calls

  @property
  def op(self):
    return self._op

  @property
  def dtype(self):
    return self._dtype

  @property
  def graph(self):
    return self._op.graph

  @property
  def name(self):
    return "%s:%d" % (self._op.name, self._value_index)

  @property
  def device(self):
    return self._op.device

  @property
  def value_index(self):
    return self._value_index

  @property
  def shape(self):
    if self._shape_val is None:
      dims = self._op.graph._c_graph.node_output_shape(self._op._id, self._value_index)
      self._shape_val = tensor_shape.TensorShape(dims)
    return self._shape_val

  def get_shape(self):
    return self.shape

  def set_shape(self, shape):
    """Refines this tensor's static shape (Python-side; C++ inference is unchanged)."""
    self._shape_val = self.shape.merge_with(shape)

  @property
  def _is_ref_dtype(self):
    return self._dtype.is_ref_dtype

  def _as_tf_output(self):
    return (self._op._id, self._value_index)

  def consumers(self):
    graph = self._op.graph
    return [graph._op_by_id(dst) for dst, _, src_output in
            graph._c_graph.node_consumers(self._op._id) if src_output == self._value_index]

  def eval(self, feed_dict=None, session=None):
    return _eval_using_default_session(self, feed_dict, self.graph, session)

  def experimental_ref(self):
    return self

  def __repr__(self):
    return "<tf.Tensor '%s' shape=%s dtype=%s>" % (self.name, self.get_shape(), self._dtype.name)

  def __str__(self):
    return "Tensor(\"%s\"%s%s%s)" % (
        self.name,
        (", shape=%s" % self.get_shape()) if self.get_shape().ndims is not None else "",
        (", dtype=%s" % self._dtype.name) if self._dtype else "",
        (", device=%s" % self.device) if self.device else "")

  # As in TF 1.x, == is identity and a Tensor hashes by identity: Python's
  # defaults (object.__eq__, object.__hash__), which are also the fastest
  # (Session.run looks tensors up in dicts on every call).

  def __bool__(self):
    raise TypeError("Using a `tf.Tensor` as a Python `bool` is not allowed. "
                    "Use `if t is not None:` instead of `if t:` to test if a "
                    "tensor is defined, and use TensorFlow ops such as "
                    "tf.cond to execute subgraphs conditioned on the value of "
                    "a tensor.")

  def __iter__(self):
    raise TypeError("Tensor objects are only iterable when eager execution is enabled. "
                    "To iterate over this tensor use tf.map_fn.")

  def __len__(self):
    raise TypeError("len is not well defined for symbolic Tensors. (%s) Please call "
                    "`x.shape` rather than `len(x)` for shape information." % self.name)

  def __array__(self, dtype=None):
    raise NotImplementedError("Cannot convert a symbolic Tensor (%s) to a numpy array." %
                              self.name)

  def __reduce__(self):
    raise TypeError("a Tensor is part of a graph and cannot be pickled")

  @staticmethod
  def _override_operator(operator, func):
    if operator not in Tensor.OVERLOADABLE_OPERATORS:
      raise ValueError("Overriding %s is disallowed" % operator)
    setattr(Tensor, operator, func)


class IndexedSlices(_TensorLike):
  """A sparse representation of a tensor's slices along dim 0 (gradients of gathers)."""

  def __init__(self, values, indices, dense_shape=None):
    self._values = values
    self._indices = indices
    self._dense_shape = dense_shape

  @property
  def values(self):
    return self._values

  @property
  def indices(self):
    return self._indices

  @property
  def dense_shape(self):
    return self._dense_shape

  @property
  def name(self):
    return self._values.name

  @property
  def device(self):
    return self._values.device

  @property
  def op(self):
    return self._values.op

  @property
  def dtype(self):
    return self._values.dtype

  @property
  def graph(self):
    return self._values.graph

  def __neg__(self):
    from recflow.ops import math_ops  # pylint: disable=g-import-not-at-top
    return IndexedSlices(math_ops.negative(self._values), self._indices, self._dense_shape)

  def __repr__(self):
    return "IndexedSlices(indices=%s, values=%s%s)" % (
        self._indices, self._values,
        (", dense_shape=%s" % self._dense_shape) if self._dense_shape is not None else "")


IndexedSlicesValue = collections.namedtuple("IndexedSlicesValue",
                                            ["values", "indices", "dense_shape"])


# --- Operation -------------------------------------------------------------

class Operation(object):
  """A node of the graph: an op with its inputs, attrs and outputs."""

  def __init__(self, graph, node_id, name, op_type, device, output_types, inputs=None):
    self._graph = graph
    self._id = node_id
    self._name = name
    self._type = op_type
    self._device = device
    self._outputs = [Tensor(self, i, _dtype_or_invalid(t)) for i, t in enumerate(output_types)]
    self._inputs_val = inputs
    self._control_inputs_val = None
    self._is_stop_gradient = None

  @property
  def name(self):
    return self._name

  @property
  def type(self):
    return self._type

  @property
  def graph(self):
    return self._graph

  @property
  def device(self):
    return self._device

  @property
  def outputs(self):
    return self._outputs

  def values(self):
    return tuple(self._outputs)

  @property
  def inputs(self):
    if self._inputs_val is None:
      graph = self._graph
      self._inputs_val = tuple(
          graph._op_by_id(src)._outputs[index]
          for src, index in graph._c_graph.node_inputs(self._id))
    return self._inputs_val

  @property
  def _input_types(self):
    return [dtypes.as_dtype(t) for t in self._graph._c_graph.node_input_types(self._id)]

  @property
  def control_inputs(self):
    if self._control_inputs_val is None:
      graph = self._graph
      self._control_inputs_val = [graph._op_by_id(i)
                                  for i in graph._c_graph.node_control_inputs(self._id)]
    return self._control_inputs_val

  @property
  def _control_outputs(self):
    return [self._graph._op_by_id(i) for i in self._graph._c_graph.node_control_outputs(self._id)]

  @property
  def node_def(self):
    """The node as a serialized NodeDef (bytes)."""
    return self._graph._c_graph.node_def(self._id)

  @property
  def op_def(self):
    from recflow.framework import op_def_library  # pylint: disable=g-import-not-at-top
    return op_def_library.get_op_def(self._type)

  @property
  def traceback(self):
    return []

  def get_attr(self, name):
    """The attr's value: DType for types, TensorShape for shapes, bytes for strings,
    a NumPy array for tensors (TensorFlow returns protos for the last two)."""
    kind, value = self._graph._c_graph.node_attr(self._id, name)
    return attr_value_to_python(kind, value)

  def _attr_names(self):
    return self._graph._c_graph.node_attr_names(self._id)

  def colocation_groups(self):
    return [("loc:@%s" % self._name).encode()]

  def run(self, feed_dict=None, session=None):
    _run_using_default_session(self, feed_dict, self.graph, session)

  def __repr__(self):
    return "<tf.Operation '%s' type=%s>" % (self._name, self._type)

  def __str__(self):
    return "name: %r\nop: %r\n" % (self._name, self._type)


def attr_value_to_python(kind, value):
  """(kind, value) from the C++ module to TensorFlow's Python spellings."""
  if kind == "type":
    return _dtype_or_invalid(value)
  if kind == "list(type)":
    return [_dtype_or_invalid(v) for v in value]
  if kind == "shape":
    return tensor_shape.TensorShape(value)
  if kind == "list(shape)":
    return [tensor_shape.TensorShape(v) for v in value]
  return value


def _dtype_or_invalid(enum):
  return dtypes._INTERN.get(enum, dtypes.invalid)  # pylint: disable=protected-access


class _NodeForDeviceFunction(object):
  """What a device function sees of a node that is about to be created."""

  def __init__(self, name, op_type, attrs, device):
    self.name = name
    self.type = op_type
    self.device = device
    self._attrs = attrs

  @property
  def node_def(self):
    return self

  @property
  def op(self):
    return self.type

  def get_attr(self, name):
    return self._attrs[name]

  def _set_device(self, device):
    self.device = device


# --- Devices -----------------------------------------------------------------

class DeviceSpec(object):
  """A (partial) device name: /job:ps/replica:0/task:1/device:CPU:0."""

  _FIELDS = ("job", "replica", "task", "device_type", "device_index")

  def __init__(self, job=None, replica=None, task=None, device_type=None, device_index=None):
    self.job = job
    self.replica = None if replica is None else int(replica)
    self.task = None if task is None else int(task)
    self.device_type = device_type.upper() if device_type and device_type != "*" else device_type
    self.device_index = device_index

  @classmethod
  def from_string(cls, spec):
    d = cls()
    for part in (spec or "").split("/"):
      if not part:
        continue
      y = part.split(":")
      key = y[0].lower()
      if len(y) == 2 and key == "job":
        d.job = y[1]
      elif len(y) == 2 and key == "replica":
        d.replica = int(y[1])
      elif len(y) == 2 and key == "task":
        d.task = int(y[1])
      elif len(y) in (1, 2) and key in ("cpu", "gpu"):
        d.device_type = key.upper()
        d.device_index = None if len(y) == 1 or y[1] == "*" else int(y[1])
      elif len(y) == 3 and key == "device":
        d.device_type = y[1].upper()
        d.device_index = None if y[2] == "*" else int(y[2])
      else:
        raise ValueError("Unknown attribute: '%s' in '%s'" % (part, spec))
    return d

  def merge_from(self, other):
    for f in self._FIELDS:
      if getattr(other, f) is not None:
        setattr(self, f, getattr(other, f))

  def to_string(self):
    out = ""
    if self.job is not None:
      out += "/job:" + self.job
    if self.replica is not None:
      out += "/replica:%d" % self.replica
    if self.task is not None:
      out += "/task:%d" % self.task
    if self.device_type is not None:
      out += "/device:%s:%s" % (self.device_type,
                                "*" if self.device_index is None else self.device_index)
    return out

  def __str__(self):
    return self.to_string()


def _merge_device(inner, outer):
  """The device `inner` (already chosen) completed by the fields `outer` sets."""
  spec = DeviceSpec.from_string(outer)
  spec.merge_from(DeviceSpec.from_string(inner))
  return spec.to_string()


# --- Graph -----------------------------------------------------------------

class _ControlDependenciesController(object):

  def __init__(self, graph, control_inputs):
    self._graph = graph
    self._control_inputs = control_inputs  # None clears the outer ones
    self._seen_ids = set()
    self._old_stack = None

  @property
  def control_inputs(self):
    return self._control_inputs

  def add_op(self, op):
    self._seen_ids.add(op._id)

  def op_in_group(self, op):
    return op._id in self._seen_ids

  def __enter__(self):
    if self._control_inputs is None:
      self._old_stack = self._graph._control_dependencies_stack
      self._graph._control_dependencies_stack = []
    self._graph._control_dependencies_stack.append(self)
    return self

  def __exit__(self, *args):
    self._graph._control_dependencies_stack.pop()
    if self._control_inputs is None:
      self._graph._control_dependencies_stack = self._old_stack
    return False


class Graph(object):
  """A TensorFlow computation, as a dataflow graph (recflow's C++ Graph inside)."""

  def __init__(self):
    self._c_graph = _pywrap.Graph()
    self._lock = threading.RLock()
    self._ops = []                 # by node id; None until first asked for
    self._names_in_use = {}
    self._thread_local = threading.local()
    self._collections = {}
    self._seed = None
    self._finalized = False
    self._unfeedable = set()
    self._unfetchable = set()
    self._building_function = False
    self._gradient_override_map = {}
    self._variable_store = None    # recflow.ops.variable_scope's
    self._variable_scope_stack = None

  # Thread-local stacks (TensorFlow keeps these per thread too).
  @property
  def _name_stack(self):
    return getattr(self._thread_local, "name_stack", "")

  @_name_stack.setter
  def _name_stack(self, value):
    self._thread_local.name_stack = value

  @property
  def _control_dependencies_stack(self):
    tl = self._thread_local
    if not hasattr(tl, "control_dependencies_stack"):
      tl.control_dependencies_stack = []
    return tl.control_dependencies_stack

  @_control_dependencies_stack.setter
  def _control_dependencies_stack(self, value):
    self._thread_local.control_dependencies_stack = value

  @property
  def _device_function_stack(self):
    tl = self._thread_local
    if not hasattr(tl, "device_function_stack"):
      tl.device_function_stack = []
    return tl.device_function_stack

  # Properties.
  @property
  def version(self):
    return self._c_graph.num_nodes()

  @property
  def _last_id(self):
    return self._c_graph.num_nodes()

  @property
  def seed(self):
    return self._seed

  @seed.setter
  def seed(self, seed):
    self._seed = seed

  @property
  def finalized(self):
    return self._finalized

  @property
  def building_function(self):
    return self._building_function

  @property
  def graph_def_versions(self):
    """The graph's VersionDef fields: producer, min_consumer, bad_consumers.

    A new graph has recflow's (GRAPH_DEF_VERSION); importing a GraphDef
    written by an older producer lowers it, as TensorFlow's importer does.
    """
    producer, min_consumer, bad = self._c_graph.versions()
    return VersionDef(producer, min_consumer, list(bad))

  def finalize(self):
    self._finalized = True

  def _unsafe_unfinalize(self):
    self._finalized = False

  def _check_not_finalized(self):
    if self._finalized:
      raise RuntimeError("Graph is finalized and cannot be modified.")

  @contextlib.contextmanager
  def as_default(self):
    _default_graph_stack.push(self)
    try:
      yield self
    finally:
      _default_graph_stack.pop(self)

  # Nodes.
  def _sync(self):
    """Makes room for nodes C++ added (gradient functions, imports)."""
    n = self._c_graph.num_nodes()
    if len(self._ops) < n:
      self._ops.extend([None] * (n - len(self._ops)))

  def _op_by_id(self, node_id):
    if node_id >= len(self._ops):
      self._sync()
    op = self._ops[node_id]
    if op is None:
      name, op_type, device, output_types = self._c_graph.node_summary(node_id)
      op = Operation(self, node_id, name, op_type, device, output_types)
      self._ops[node_id] = op
      self._names_in_use.setdefault(name.lower(), 1)
    return op

  def _create_op_internal(self, op_type, input_args, attrs, name, compute_device=True):
    """Adds a node. `input_args`: one entry per input argument of the op, a
    Tensor or a list of Tensors; `attrs`: values in the C++ module's spellings.
    `name`: a scope name ("x/") is used as is, anything else is made unique."""
    with self._lock:
      self._check_not_finalized()
      if name and name[-1] == "/":
        name = name[:-1]
      else:
        name = self.unique_name(name or op_type)
      if not _VALID_OP_NAME_REGEX.match(name):
        raise ValueError("'%s' is not a valid node name" % name)
      flat = []
      c_inputs = []
      for arg in input_args:
        if isinstance(arg, (list, tuple)):
          for t in arg:
            self._check_input(t, op_type)
          flat.extend(arg)
          c_inputs.append([(t._op._id, t._value_index) for t in arg])
        else:
          self._check_input(arg, op_type)
          flat.append(arg)
          c_inputs.append((arg._op._id, arg._value_index))
      control_ops = self._control_dependencies_for_inputs([t._op for t in flat])
      device = self._device_for(name, op_type, attrs) if compute_device else ""
      if self._gradient_override_map and op_type in self._gradient_override_map:
        attrs = dict(attrs)
        attrs["_gradient_op_type"] = self._gradient_override_map[op_type]
      self._sync()
      try:
        node_id, output_types = self._c_graph.add_node(
            op_type, name, c_inputs, [c._id for c in control_ops], attrs, device)
      except (errors.InvalidArgumentError, errors.NotFoundError,
              errors.AlreadyExistsError) as e:
        raise ValueError(e.message)
      op = Operation(self, node_id, name, op_type, device, output_types, tuple(flat))
      self._ops.append(op)
      self._names_in_use.setdefault(name.lower(), 1)
      for controller in self._control_dependencies_stack:
        controller.add_op(op)
      return op

  def _check_input(self, t, op_type):
    if not isinstance(t, Tensor):
      raise TypeError("Input to op '%s' must be a Tensor, got %r" % (op_type, t))
    if t.graph is not self:
      raise ValueError("Tensor %s must be from the same graph as the op '%s' being created."
                       % (t, op_type))

  def create_op(self, op_type, inputs, dtypes=None, input_types=None, name=None,  # pylint: disable=redefined-outer-name
                attrs=None, op_def=None, compute_shapes=True, compute_device=True):
    """TF 1.x's low-level node creation: flat inputs, attrs in Python spellings."""
    from recflow.framework import op_def_library  # pylint: disable=g-import-not-at-top
    op_def = op_def or op_def_library.get_op_def(op_type)
    args = op_def_library.group_flat_inputs(op_def, list(inputs), attrs or {})
    c_attrs = op_def_library.attrs_to_c(op_def, attrs or {})
    return self._create_op_internal(op_type, args, c_attrs, name, compute_device)

  def get_operations(self):
    self._sync()
    return [self._op_by_id(i) for i in range(len(self._ops))]

  def _get_operation_by_name_or_none(self, name):
    node_id = self._c_graph.find_node(name)
    return None if node_id < 0 else self._op_by_id(node_id)

  def get_operation_by_name(self, name):
    if not isinstance(name, str):
      raise TypeError("Operation names are strings (or similar), not %s." % type(name).__name__)
    return self.as_graph_element(name, allow_tensor=False, allow_operation=True)

  def get_tensor_by_name(self, name):
    if not isinstance(name, str):
      raise TypeError("Tensor names are strings (or similar), not %s." % type(name).__name__)
    return self.as_graph_element(name, allow_tensor=True, allow_operation=False)

  def as_graph_element(self, obj, allow_tensor=True, allow_operation=True):
    with self._lock:
      return self._as_graph_element_locked(obj, allow_tensor, allow_operation)

  def _as_graph_element_locked(self, obj, allow_tensor, allow_operation):
    if allow_tensor and allow_operation:
      types_str = "Tensor or Operation"
    elif allow_tensor:
      types_str = "Tensor"
    elif allow_operation:
      types_str = "Operation"
    else:
      raise ValueError("allow_tensor and allow_operation can't both be False.")
    temp_obj = _as_graph_element(obj)
    if temp_obj is not None:
      obj = temp_obj
    if isinstance(obj, str):
      name = obj
      if ":" in name and allow_tensor:
        try:
          op_name, out_n = name.split(":")
          out_n = int(out_n)
        except ValueError:
          raise ValueError("The name %s looks a like a Tensor name, but is not a valid one. "
                           "Tensor names must be of the form \"<op_name>:<output_index>\"."
                           % repr(name))
        op = self._get_operation_by_name_or_none(op_name)
        if op is None:
          raise KeyError("The name %s refers to a Tensor which does not exist. The operation, "
                         "%s, does not exist in the graph." % (repr(name), repr(op_name)))
        try:
          return op.outputs[out_n]
        except IndexError:
          raise KeyError("The name %s refers to a Tensor which does not exist. The operation, "
                         "%s, exists but only has %s outputs." %
                         (repr(name), repr(op_name), len(op.outputs)))
      elif ":" in name and not allow_tensor:
        raise ValueError("Name %s appears to refer to a Tensor, not a %s." %
                         (repr(name), types_str))
      elif ":" not in name and allow_operation:
        op = self._get_operation_by_name_or_none(name)
        if op is None:
          raise KeyError("The name %s refers to an Operation not in the graph." % repr(name))
        return op
      else:
        op = self._get_operation_by_name_or_none(name)
        if op is not None:
          raise ValueError("The name %s refers to an Operation, not a %s. Tensor names must "
                           "be of the form \"<op_name>:<output_index>\"." %
                           (repr(name), types_str))
        raise ValueError("The name %s looks like an (invalid) Operation name, not a %s." %
                         (repr(name), types_str))
    elif isinstance(obj, Tensor) and allow_tensor:
      if obj.graph is not self:
        raise ValueError("Tensor %s is not an element of this graph." % obj)
      return obj
    elif isinstance(obj, Operation) and allow_operation:
      if obj.graph is not self:
        raise ValueError("Operation %s is not an element of this graph." % obj)
      return obj
    raise TypeError("Can not convert a %s into a %s." % (type(obj).__name__, types_str))

  # Names.
  def get_name_scope(self):
    return self._name_stack

  def unique_name(self, name, mark_as_used=True):
    if self._name_stack:
      name = self._name_stack + "/" + name
    name_key = name.lower()
    i = self._names_in_use.get(name_key, 0)
    if mark_as_used:
      self._names_in_use[name_key] = i + 1
    if i > 0 or self._c_graph.find_node(name) >= 0:
      base, base_key = name, name_key
      i = max(i, 1)
      while True:
        name_key = "%s_%d" % (base_key, i)
        candidate = "%s_%d" % (base, i)
        i += 1
        if name_key not in self._names_in_use and self._c_graph.find_node(candidate) < 0:
          break
      if mark_as_used:
        self._names_in_use[name_key] = 1
      name = candidate
    return name

  @contextlib.contextmanager
  def name_scope(self, name):
    if name:
      if isinstance(name, bytes):
        name = name.decode()
      if not isinstance(name, str):
        raise TypeError("name for name_scope must be a string, not %r" % (name,))
      if self._name_stack:
        if not _VALID_SCOPE_NAME_REGEX.match(name):
          raise ValueError("'%s' is not a valid scope name" % name)
      elif not _VALID_OP_NAME_REGEX.match(name):
        raise ValueError("'%s' is not a valid scope name" % name)
    old_stack = self._name_stack
    if not name:
      new_stack = ""
      returned = ""
    elif name[-1] == "/":
      new_stack = name[:-1]
      returned = name
    else:
      new_stack = self.unique_name(name)
      returned = new_stack + "/"
    self._name_stack = new_stack
    try:
      yield returned
    finally:
      self._name_stack = old_stack

  # Control dependencies.
  def control_dependencies(self, control_inputs):
    if control_inputs is None:
      return _ControlDependenciesController(self, None)
    control_ops = []
    current = self._current_control_dependencies()
    for c in control_inputs:
      if isinstance(c, IndexedSlices):
        c = c.op
      c = self.as_graph_element(c)
      if isinstance(c, Tensor):
        c = c.op
      elif not isinstance(c, Operation):
        raise TypeError("Control input must be Operation or Tensor: %s" % c)
      if c._id not in current:
        control_ops.append(c)
        current.add(c._id)
    return _ControlDependenciesController(self, control_ops)

  def _current_control_dependencies(self):
    ret = set()
    for controller in self._control_dependencies_stack:
      if controller.control_inputs is not None:
        for op in controller.control_inputs:
          ret.add(op._id)
    return ret

  def _control_dependencies_for_inputs(self, input_ops):
    ret = []
    input_ids = set(op._id for op in input_ops)
    seen = set()
    for controller in self._control_dependencies_stack:
      if controller.control_inputs is None:
        continue
      if any(controller.op_in_group(op) for op in input_ops):
        continue
      for c in controller.control_inputs:
        if c._id not in input_ids and c._id not in seen:
          seen.add(c._id)
          ret.append(c)
    return ret

  # Devices.
  @contextlib.contextmanager
  def device(self, device_name_or_function):
    self._device_function_stack.append(device_name_or_function)
    try:
      yield
    finally:
      self._device_function_stack.pop()

  def _device_for(self, name, op_type, attrs):
    stack = self._device_function_stack
    if not stack:
      return ""
    device = ""
    node = None
    for spec in reversed(stack):  # innermost first; outer ones fill in the rest
      if spec is None:
        break
      if callable(spec):
        if node is None:
          node = _NodeForDeviceFunction(name, op_type, attrs, device)
        node.device = device
        result = spec(node)
        spec = result if isinstance(result, str) else (result.to_string() if result else "")
      elif isinstance(spec, DeviceSpec):
        spec = spec.to_string()
      device = _merge_device(device, spec) if device else DeviceSpec.from_string(spec).to_string()
    return device

  @contextlib.contextmanager
  def colocate_with(self, op, ignore_existing=False):
    """Accepted for compatibility; recflow places every node on its one CPU device."""
    yield

  @contextlib.contextmanager
  def gradient_override_map(self, op_type_map):
    if not isinstance(op_type_map, dict):
      raise TypeError("op_type_map must be a dictionary mapping strings to strings")
    saved = dict(self._gradient_override_map)
    self._gradient_override_map.update(op_type_map)
    try:
      yield
    finally:
      self._gradient_override_map = saved

  # Collections.
  def add_to_collection(self, name, value):
    self._check_not_finalized()
    with self._lock:
      self._collections.setdefault(name, []).append(value)

  def add_to_collections(self, names, value):
    names = (names,) if isinstance(names, str) else set(names)
    for name in names:
      self.add_to_collection(name, value)

  def get_collection_ref(self, name):
    with self._lock:
      return self._collections.setdefault(name, [])

  def get_collection(self, name, scope=None):
    with self._lock:
      items = self._collections.get(name)
      if items is None:
        return []
      if scope is None:
        return list(items)
      regex = re.compile(scope)
      return [item for item in items
              if hasattr(item, "name") and isinstance(item.name, str) and regex.match(item.name)]

  def get_all_collection_keys(self):
    with self._lock:
      return [k for k in self._collections if isinstance(k, str)]

  def clear_collection(self, name):
    self._check_not_finalized()
    with self._lock:
      self._collections.pop(name, None)

  # Feeding and fetching.
  def prevent_feeding(self, tensor):
    self._unfeedable.add(tensor)

  def is_feedable(self, tensor):
    return tensor not in self._unfeedable

  def prevent_fetching(self, op):
    self._unfetchable.add(op)

  def is_fetchable(self, tensor_or_op):
    if isinstance(tensor_or_op, Tensor):
      return tensor_or_op.op not in self._unfetchable
    return tensor_or_op not in self._unfetchable

  # Function library (recflow.framework.function).
  def _add_function(self, function):
    """Adds a function to this graph's library: a traced or Defun function
    (with the functions it calls), a function.FunctionDef, or its serialized
    bytes. An identical function of the same name is kept; a different one
    is a ValueError."""
    if hasattr(function, "add_to_graph"):
      function.add_to_graph(self)
      return
    data = function if isinstance(function, bytes) else function.SerializeToString()
    with self._lock:
      self._check_not_finalized()
      try:
        _pywrap.graph_add_function(self._c_graph, data)
      except errors.InvalidArgumentError as e:
        raise ValueError(e.message)

  def _is_function(self, name):
    return name in _pywrap.graph_function_names(self._c_graph)

  def _get_function(self, name):
    """The library's function `name` as a function.FunctionDef, or None."""
    from recflow.framework import function  # pylint: disable=g-import-not-at-top
    data = _pywrap.graph_get_function(self._c_graph, name)
    return None if data is None else function.FunctionDef(data)

  def _function_names(self):
    return list(_pywrap.graph_function_names(self._c_graph))

  # GraphDef.
  def as_graph_def(self, from_version=None, add_shapes=False):
    from recflow.framework import graph_io  # pylint: disable=g-import-not-at-top
    return graph_io.GraphDef(self._c_graph.to_graph_def(from_version or 0, -1))

  @property
  def graph_def(self):
    return self.as_graph_def()


VersionDef = collections.namedtuple("VersionDef", ["producer", "min_consumer", "bad_consumers"])


# --- Default graph and session stacks --------------------------------------

class _DefaultStack(threading.local):

  def __init__(self):
    super(_DefaultStack, self).__init__()
    self.stack = []

  def get_default(self):
    return self.stack[-1] if self.stack else None

  def push(self, value):
    self.stack.append(value)

  def pop(self, value):
    if self.stack and self.stack[-1] is value:
      self.stack.pop()
    else:
      # Exited out of order (a generator kept a context open): remove it anyway.
      for i in range(len(self.stack) - 1, -1, -1):
        if self.stack[i] is value:
          del self.stack[i]
          break

  def is_nested(self):
    return len(self.stack) > 0


class _DefaultGraphStack(_DefaultStack):
  _global_default_graph = None
  _global_lock = threading.Lock()

  def get_default(self):
    ret = super(_DefaultGraphStack, self).get_default()
    if ret is None:
      ret = self._get_global()
    return ret

  @classmethod
  def _get_global(cls):
    with cls._global_lock:
      if cls._global_default_graph is None:
        cls._global_default_graph = Graph()
      return cls._global_default_graph

  @classmethod
  def reset_global(cls):
    with cls._global_lock:
      cls._global_default_graph = None


_default_graph_stack = _DefaultGraphStack()
_default_session_stack = _DefaultStack()


def get_default_graph():
  """The innermost `as_default` graph of this thread, else the global default graph."""
  return _default_graph_stack.get_default()


def reset_default_graph():
  if _default_graph_stack.is_nested():
    raise AssertionError("Do not use tf.reset_default_graph() to clear nested graphs. If you "
                         "need a cleared graph, exit the nesting and create a new graph.")
  _DefaultGraphStack.reset_global()


def has_default_graph():
  return len(_default_graph_stack.stack) >= 1


def get_default_session():
  return _default_session_stack.get_default()


@contextlib.contextmanager
def default_session(session):
  _default_session_stack.push(session)
  try:
    yield session
  finally:
    _default_session_stack.pop(session)


def _eval_using_default_session(tensors, feed_dict, graph, session=None):
  if session is None:
    session = get_default_session()
    if session is None:
      raise ValueError("Cannot evaluate tensor using `eval()`: No default session is "
                       "registered. Use `with sess.as_default()` or pass an explicit session "
                       "to `eval(session=sess)`")
    if session.graph is not graph:
      raise ValueError("Cannot use the default session to evaluate tensor: the tensor's graph "
                       "is different from the session's graph. Pass an explicit session to "
                       "`eval(session=sess)`.")
  elif session.graph is not graph:
    raise ValueError("Cannot use the given session to evaluate tensor: the tensor's graph is "
                     "different from the session's graph.")
  return session.run(tensors, feed_dict)


def _run_using_default_session(operation, feed_dict, graph, session=None):
  if session is None:
    session = get_default_session()
    if session is None:
      raise ValueError("Cannot execute operation using `run()`: No default session is "
                       "registered. Use `with sess.as_default():` or pass an explicit "
                       "session to `run(session=sess)`")
    if session.graph is not graph:
      raise ValueError("Cannot use the default session to execute operation: the "
                       "operation's graph is different from the session's graph. Pass an "
                       "explicit session to run(session=sess).")
  elif session.graph is not graph:
    raise ValueError("Cannot use the given session to execute operation: the operation's "
                     "graph is different from the session's graph.")
  session.run(operation, feed_dict)


# --- Module-level wrappers over the default graph --------------------------

def _as_graph_element(obj):
  conv_fn = getattr(obj, "_as_graph_element", None)
  if conv_fn and callable(conv_fn):
    return conv_fn()
  return None


def _get_graph_from_inputs(op_input_list, graph=None):
  """The graph of the Tensors among the inputs (all must share it), else the default."""
  if graph is not None and not isinstance(graph, Graph):
    raise TypeError("Input graph needs to be a Graph: %s" % graph)
  # While a function is traced, its graph takes every op; it captures the
  # outer tensors among the inputs (TensorFlow does the same).
  default = get_default_graph()
  if graph is None and default.building_function:
    return default
  original = None
  for op_input in op_input_list:
    graph_element = None
    if isinstance(op_input, (Operation, _TensorLike)):
      graph_element = op_input
    else:
      graph_element = _as_graph_element(op_input)
    if graph_element is not None:
      if graph is None:
        original = graph_element
        graph = graph_element.graph
      elif original is not None and graph_element.graph is not graph:
        raise ValueError("%s must be from the same graph as %s." % (graph_element, original))
      elif original is None and graph_element.graph is not graph:
        raise ValueError("%s is not from the passed-in graph." % graph_element)
  return graph or get_default_graph()


class name_scope(object):  # pylint: disable=invalid-name
  """TF 1.x's `tf.name_scope(name, default_name=None, values=None)`."""

  def __init__(self, name, default_name=None, values=None):
    self._name = default_name if name is None else name
    self._default_name = default_name
    self._values = values
    self._ctx = None
    self._graph_ctx = None

  @property
  def name(self):
    return self._name

  def __enter__(self):
    if self._name is None and self._values is not None:
      raise ValueError("At least one of name (%s) and default_name (%s) must be provided."
                       % (self._name, self._default_name))
    g = _get_graph_from_inputs(self._values or [])
    self._graph_ctx = g.as_default()
    self._graph_ctx.__enter__()
    try:
      self._ctx = g.name_scope(self._name)
      return self._ctx.__enter__()
    except Exception:
      self._graph_ctx.__exit__(None, None, None)
      raise

  def __exit__(self, *exc):
    self._ctx.__exit__(*exc)
    self._graph_ctx.__exit__(*exc)
    return False


def name_from_scope_name(name):
  return name[:-1] if (name and name[-1] == "/") else name


def control_dependencies(control_inputs):
  return get_default_graph().control_dependencies(control_inputs)


def device(device_name_or_function):
  return get_default_graph().device(device_name_or_function)


def colocate_with(op, ignore_existing=False):
  return get_default_graph().colocate_with(op, ignore_existing)


@contextlib.contextmanager
def init_scope():
  """Clears control dependencies, as TF's init_scope does in graph mode."""
  with get_default_graph().control_dependencies(None):
    yield


def add_to_collection(name, value):
  get_default_graph().add_to_collection(name, value)


def add_to_collections(names, value):
  get_default_graph().add_to_collections(names, value)


def get_collection_ref(key):
  return get_default_graph().get_collection_ref(key)


def get_collection(key, scope=None):
  return get_default_graph().get_collection(key, scope)


def get_all_collection_keys():
  return get_default_graph().get_all_collection_keys()


def get_name_scope():
  return get_default_graph().get_name_scope()


# --- Tensor conversion -----------------------------------------------------

_tensor_conversion_func_registry = {}   # priority -> [(base_type, fn)]
_tensor_conversion_cache = {}           # type -> [(base_type, fn)] in priority order
_conversion_lock = threading.Lock()


def register_tensor_conversion_function(base_type, conversion_func, priority=100):
  """fn(value, dtype=None, name=None, as_ref=False) -> Tensor, or NotImplemented."""
  if not callable(conversion_func):
    raise TypeError("conversion_func must be callable.")
  with _conversion_lock:
    _tensor_conversion_func_registry.setdefault(priority, []).append(
        (base_type, conversion_func))
    _tensor_conversion_cache.clear()


def _conversion_functions_for(value_type):
  funcs = _tensor_conversion_cache.get(value_type)
  if funcs is None:
    with _conversion_lock:
      funcs = []
      for _, entries in sorted(_tensor_conversion_func_registry.items()):
        funcs.extend((base, fn) for base, fn in entries if issubclass(value_type, base))
      _tensor_conversion_cache[value_type] = funcs
  return funcs


def internal_convert_to_tensor(value, dtype=None, name=None, as_ref=False,
                               preferred_dtype=None):
  if dtype is not None:
    dtype = dtypes.as_dtype(dtype)
  if isinstance(value, Tensor):
    if dtype is not None and not dtype.is_compatible_with(value.dtype):
      raise ValueError("Tensor conversion requested dtype %s for Tensor with dtype %s: %r"
                       % (dtype.name, value.dtype.name, value))
    return value
  if preferred_dtype is not None:
    preferred_dtype = dtypes.as_dtype(preferred_dtype)
  for base_type, conversion_func in _conversion_functions_for(type(value)):
    if dtype is None and preferred_dtype is not None:
      try:
        ret = conversion_func(value, dtype=preferred_dtype, name=name, as_ref=as_ref)
      except (TypeError, ValueError):
        ret = None
      if ret is not None and ret is not NotImplemented:
        return ret
    ret = conversion_func(value, dtype=dtype, name=name, as_ref=as_ref)
    if ret is NotImplemented:
      continue
    if not isinstance(ret, Tensor):
      raise RuntimeError("%sConversion function %r for type %s returned non-Tensor: %r" %
                         ("", conversion_func, base_type, ret))
    if dtype is not None and not dtype.is_compatible_with(ret.dtype):
      raise RuntimeError("Conversion function %r for type %s returned incompatible dtype: "
                         "requested = %s, actual = %s" % (conversion_func, base_type,
                                                          dtype.name, ret.dtype.name))
    return ret
  raise TypeError("Cannot convert %r with type %s to Tensor: no conversion function "
                  "registered." % (value, type(value)))


def convert_to_tensor(value, dtype=None, name=None, preferred_dtype=None, dtype_hint=None):
  return internal_convert_to_tensor(value, dtype, name, as_ref=False,
                                    preferred_dtype=preferred_dtype or dtype_hint)


def internal_convert_n_to_tensor(values, dtype=None, name=None, as_ref=False,
                                 preferred_dtype=None):
  if not isinstance(values, (list, tuple)):
    raise TypeError("values must be a sequence.")
  return [internal_convert_to_tensor(v, dtype=dtype, as_ref=as_ref,
                                     name=None if name is None else "%s_%d" % (name, i),
                                     preferred_dtype=preferred_dtype)
          for i, v in enumerate(values)]


def convert_n_to_tensor(values, dtype=None, name=None, preferred_dtype=None):
  return internal_convert_n_to_tensor(values, dtype, name, False, preferred_dtype)


def convert_to_tensor_or_indexed_slices(value, dtype=None, name=None):
  return internal_convert_to_tensor_or_indexed_slices(value, dtype, name, as_ref=False)


def internal_convert_to_tensor_or_indexed_slices(value, dtype=None, name=None, as_ref=False):
  if isinstance(value, IndexedSlices):
    if dtype and not dtypes.as_dtype(dtype).is_compatible_with(value.dtype):
      raise ValueError("Tensor conversion requested dtype %s for Tensor with dtype %s: %r"
                       % (dtypes.as_dtype(dtype).name, value.dtype.name, str(value)))
    return value
  return internal_convert_to_tensor(value, dtype=dtype, name=name, as_ref=as_ref)


def is_dense_tensor_like(t):
  return isinstance(t, Tensor)


# --- Gradient registry -----------------------------------------------------

_gradient_registry = {}


class RegisterGradient(object):
  """Decorator registering a Python gradient function for an op type:

    @tf.RegisterGradient("ZeroOut")
    def _zero_out_grad(op, grad): ...

  Python gradients take precedence over recflow's C++ ones (tf.gradients
  looks here first).
  """

  def __init__(self, op_type):
    if not isinstance(op_type, str):
      raise TypeError("op_type must be a string")
    self._op_type = op_type

  def __call__(self, f):
    if self._op_type in _gradient_registry:
      raise KeyError("Registering two gradient with name '%s'!" % self._op_type)
    _gradient_registry[self._op_type] = f
    return f


def NotDifferentiable(op_type):  # pylint: disable=invalid-name
  if not isinstance(op_type, str):
    raise TypeError("op_type must be a string")
  if op_type in _gradient_registry:
    raise KeyError("Registering two gradient with name '%s'!" % op_type)
  _gradient_registry[op_type] = None


NoGradient = NotDifferentiable


def gradient_op_type(op):
  """The op type whose gradient applies to `op` (gradient_override_map aware)."""
  if "_gradient_op_type" in op._attr_names():
    value = op.get_attr("_gradient_op_type")
    return value.decode() if isinstance(value, bytes) else value
  return op.type


def get_gradient_function(op):
  """The Python gradient function of op's type; KeyError when none is registered."""
  if not op.inputs:
    return None
  return _gradient_registry[gradient_op_type(op)]


def _python_gradient_registered(op_type):
  return op_type in _gradient_registry


def _np_dtype_of(tensor):
  return np.dtype(tensor.dtype.as_numpy_dtype)
