"""tf.Variable: TF 1.x reference variables (VariableV2) and resource variables.

`tf.Variable(...)` makes a RefVariable, as TF 1.x does by default: a
VariableV2 node "w", its initializer "w/Assign" and its read "w/read"; with
use_resource=True (or a variable_scope that says so) a ResourceVariable: a
VarHandleOp "w", "w/Assign" (AssignVariableOp) and reads through
ReadVariableOp. Inside recflow both are the same resource in the session's
ResourceMgr (CONVENTIONS: variables are resources behind handles).
"""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape
from recflow.ops import array_ops
from recflow.ops import control_flow_ops
from recflow.ops import gen_ops as gen
from recflow.ops import state_ops


class VariableMetaclass(type):
  """Makes tf.Variable(...) build a RefVariable or a ResourceVariable."""

  def __call__(cls, *args, **kwargs):
    if cls is Variable:
      use_resource = kwargs.pop("use_resource", None)
      if use_resource is None:
        from recflow.ops import variable_scope  # pylint: disable=g-import-not-at-top
        use_resource = variable_scope.get_variable_scope().use_resource
      target = ResourceVariable if use_resource else RefVariable
      return target(*args, **kwargs)
    return super(VariableMetaclass, cls).__call__(*args, **kwargs)


class Variable(metaclass=VariableMetaclass):
  """The common face of RefVariable and ResourceVariable."""

  _is_resource_variable = False

  def __init__(self, *args, **kwargs):
    raise NotImplementedError("Variable is created through its subclasses")

  # Shared accessors.
  @property
  def initializer(self):
    return self._initializer_op

  @property
  def initial_value(self):
    return self._initial_value

  @property
  def trainable(self):
    return self._trainable

  @property
  def constraint(self):
    return None

  @property
  def graph(self):
    return self._graph

  @property
  def shape(self):
    return self._shape

  def get_shape(self):
    return self._shape

  def eval(self, session=None):
    return self._graph_element.eval(session=session)

  def initialized_value(self):
    with ops.init_scope():
      return self.read_value()

  def load(self, value, session=None):
    """Assigns `value` by running the initializer with it fed."""
    session = session or ops.get_default_session()
    if session is None:
      raise ValueError("Either session argument should be provided or default session should "
                       "be established")
    session.run(self._initializer_op, {self._initializer_op.inputs[1]: value})

  def _as_graph_element(self):
    return self._graph_element

  def to_proto(self, export_scope=None):
    raise NotImplementedError("Variable.to_proto: recflow's Python layer has no VariableDef "
                              "export yet")

  def __hash__(self):
    return id(self)

  def __eq__(self, other):
    return self is other

  def __ne__(self, other):
    return self is not other

  def _get_save_slice_info(self):
    return getattr(self, "_save_slice_info", None)

  def _set_save_slice_info(self, save_slice_info):
    self._save_slice_info = save_slice_info

  def __iter__(self):
    raise TypeError("'Variable' object is not iterable.")

  def __bool__(self):
    raise TypeError("Using a `tf.Variable` as a Python `bool` is not allowed.")

  def __repr__(self):
    return "<tf.Variable '%s' shape=%s dtype=%s>" % (self.name, self.get_shape(),
                                                     self.dtype.name)

  @staticmethod
  def _overload_all_operators():
    for operator in ops.Tensor.OVERLOADABLE_OPERATORS:
      Variable._overload_operator(operator)

  @staticmethod
  def _overload_operator(operator):
    tensor_oper = getattr(ops.Tensor, operator)

    def _run_op(a, *args, **kwargs):
      return tensor_oper(a.value(), *args, **kwargs)

    _run_op.__name__ = operator
    setattr(Variable, operator, _run_op)


def _common_init(self, initial_value, trainable, collections, validate_shape, name, dtype,
                 shape, default_name):
  if initial_value is None:
    raise ValueError("initial_value must be specified.")
  if collections is None:
    collections = [ops.GraphKeys.GLOBAL_VARIABLES]
  if not isinstance(collections, (list, tuple, set)):
    raise ValueError("collections argument to Variable constructor must be a list, tuple, or "
                     "set. Got %s of type %s" % (collections, type(collections)))
  collections = list(collections)
  if trainable is None:
    trainable = True
  if trainable and ops.GraphKeys.TRAINABLE_VARIABLES not in collections:
    collections.append(ops.GraphKeys.TRAINABLE_VARIABLES)
  self._trainable = trainable
  return collections


class RefVariable(Variable):
  """A TF 1.x variable: a VariableV2 node holding a tensor across Session.run calls."""

  def __init__(self, initial_value=None, trainable=None, collections=None, validate_shape=True,
               caching_device=None, name=None, variable_def=None, dtype=None,
               expected_shape=None, import_scope=None, constraint=None, synchronization=None,
               aggregation=None, shape=None):
    if variable_def is not None:
      raise NotImplementedError("Variable(variable_def=...): recflow's Python layer cannot "
                                "restore variables from a VariableDef yet")
    if constraint is not None:
      raise NotImplementedError("Variable(constraint=...) is not supported by recflow yet")
    collections = _common_init(self, initial_value, trainable, collections, validate_shape,
                               name, dtype, shape, "Variable")
    init_from_fn = callable(initial_value)
    with ops.init_scope():
      with ops.name_scope(name, "Variable", [] if init_from_fn else [initial_value]) as name:
        if init_from_fn:
          with ops.name_scope("Initializer"):
            self._initial_value = ops.convert_to_tensor(initial_value(), name="initial_value",
                                                        dtype=dtype)
        else:
          self._initial_value = ops.convert_to_tensor(initial_value, name="initial_value",
                                                      dtype=dtype)
        if shape is not None:
          var_shape = tensor_shape.as_shape(shape)
        elif validate_shape:
          var_shape = self._initial_value.get_shape()
        else:
          var_shape = tensor_shape.unknown_shape()
        if validate_shape and not var_shape.is_fully_defined():
          raise ValueError("initial_value must have a shape specified: %s" %
                           self._initial_value)
        self._variable = state_ops.variable_op_v2(var_shape,
                                                  self._initial_value.dtype.base_dtype,
                                                  name=name)
        self._initializer_op = state_ops.assign(self._variable, self._initial_value,
                                                validate_shape=validate_shape).op
        self._snapshot = array_ops.identity(self._variable, name="read")
    self._graph = self._variable.graph
    self._shape = var_shape if validate_shape else self._variable.get_shape()
    self._graph_element = self._snapshot
    ops.add_to_collections(collections, self)

  @property
  def name(self):
    return self._variable.name

  @property
  def op(self):
    return self._variable.op

  @property
  def dtype(self):
    return self._variable.dtype

  @property
  def device(self):
    return self._variable.device

  def value(self):
    return self._snapshot

  def read_value(self):
    return array_ops.identity(self._variable, name="read")

  def _ref(self):
    return self._variable

  def assign(self, value, use_locking=False, name=None, read_value=True):
    return state_ops.assign(self._variable, value, use_locking=use_locking, name=name)

  def assign_add(self, delta, use_locking=False, name=None, read_value=True):
    return state_ops.assign_add(self._variable, delta, use_locking=use_locking, name=name)

  def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
    return state_ops.assign_sub(self._variable, delta, use_locking=use_locking, name=name)


class ResourceVariable(Variable):
  """A variable behind a resource handle (VarHandleOp + ReadVariableOp)."""

  _is_resource_variable = True

  def __init__(self, initial_value=None, trainable=None, collections=None, validate_shape=True,
               caching_device=None, name=None, dtype=None, variable_def=None,
               import_scope=None, constraint=None, distribute_strategy=None,
               synchronization=None, aggregation=None, shape=None):
    if variable_def is not None:
      raise NotImplementedError("ResourceVariable(variable_def=...) is not supported yet")
    if constraint is not None:
      raise NotImplementedError("Variable(constraint=...) is not supported by recflow yet")
    collections = _common_init(self, initial_value, trainable, collections, validate_shape,
                               name, dtype, shape, "Variable")
    if self._trainable and ops.GraphKeys.TRAINABLE_RESOURCE_VARIABLES not in collections:
      pass  # TF keeps resource variables in TRAINABLE_VARIABLES; nothing more to do
    init_from_fn = callable(initial_value)
    with ops.init_scope():
      with ops.name_scope(name, "Variable", [] if init_from_fn else [initial_value]) as name:
        handle_name = ops.name_from_scope_name(name)
        if init_from_fn:
          with ops.name_scope("Initializer"):
            initial_value = ops.convert_to_tensor(initial_value(), name="initial_value",
                                                  dtype=dtype)
        else:
          initial_value = ops.convert_to_tensor(initial_value, name="initial_value",
                                                dtype=dtype)
        self._initial_value = initial_value
        var_shape = (tensor_shape.as_shape(shape) if shape is not None
                     else initial_value.get_shape())
        if validate_shape and not var_shape.is_fully_defined():
          raise ValueError("initial_value must have a shape specified: %s" % initial_value)
        self._dtype = initial_value.dtype.base_dtype
        self._shape = var_shape
        self._handle = gen.var_handle_op(dtype=self._dtype, shape=var_shape,
                                         shared_name=handle_name, name=name)
        with ops.name_scope("Assign") as n:
          self._initializer_op = gen.assign_variable_op(self._handle, initial_value, name=n)
        with ops.name_scope("Read"):
          self._graph_element = self._read_variable_op()
    self._graph = self._handle.graph
    ops.add_to_collections(collections, self)

  @property
  def handle(self):
    return self._handle

  @property
  def name(self):
    return self._handle.name

  @property
  def op(self):
    return self._handle.op

  @property
  def dtype(self):
    return self._dtype

  @property
  def device(self):
    return self._handle.device

  def _read_variable_op(self):
    value = gen.read_variable_op(self._handle, dtype=self._dtype)
    value.set_shape(self._shape)
    return value

  def value(self):
    return self._graph_element

  def read_value(self):
    with ops.name_scope("Read"):
      value = self._read_variable_op()
    return array_ops.identity(value)

  def _ref(self):
    return self._handle

  def _assign_then_read(self, op, read_value):
    if not read_value:
      return op
    with ops.control_dependencies([op]):
      return self.read_value()

  def assign(self, value, use_locking=None, name=None, read_value=True):
    value = ops.convert_to_tensor(value, dtype=self._dtype)
    self._shape.assert_is_compatible_with(value.get_shape())
    return self._assign_then_read(gen.assign_variable_op(self._handle, value, name=name),
                                  read_value)

  def assign_add(self, delta, use_locking=None, name=None, read_value=True):
    delta = ops.convert_to_tensor(delta, dtype=self._dtype)
    return self._assign_then_read(gen.assign_add_variable_op(self._handle, delta, name=name),
                                  read_value)

  def assign_sub(self, delta, use_locking=None, name=None, read_value=True):
    delta = ops.convert_to_tensor(delta, dtype=self._dtype)
    return self._assign_then_read(gen.assign_sub_variable_op(self._handle, delta, name=name),
                                  read_value)

  def sparse_read(self, indices, name=None):
    return gen.resource_gather(self._handle, indices, dtype=self._dtype, name=name)


VariableV1 = Variable


def _variable_to_tensor(v, dtype=None, name=None, as_ref=False):
  if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(v.dtype):
    raise ValueError("Incompatible type conversion requested to type '%s' for variable of "
                     "type '%s'" % (dtypes.as_dtype(dtype).name, v.dtype.name))
  return v._ref() if as_ref else v.value()  # pylint: disable=protected-access


ops.register_tensor_conversion_function(Variable, _variable_to_tensor)
Variable._overload_all_operators()  # pylint: disable=protected-access


# --- Collections and initializers -------------------------------------------

def global_variables(scope=None):
  return ops.get_collection(ops.GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def local_variables(scope=None):
  return ops.get_collection(ops.GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
  return ops.get_collection(ops.GraphKeys.MODEL_VARIABLES, scope)


def trainable_variables(scope=None):
  return ops.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES, scope)


def moving_average_variables(scope=None):
  return ops.get_collection(ops.GraphKeys.MOVING_AVERAGE_VARIABLES, scope)


def variables_initializer(var_list, name="init"):
  """An op running the initializers of var_list (a NoOp when empty)."""
  if var_list:
    return control_flow_ops.group(*[v.initializer for v in var_list], name=name)
  return control_flow_ops.no_op(name=name)


initialize_variables = variables_initializer


def global_variables_initializer():
  return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer():
  return variables_initializer(local_variables())


initialize_local_variables = local_variables_initializer


# --- Partitioned variables --------------------------------------------------


class SaveSliceInfo(object):
  """Where a part sits in its full variable (TF's Variable.SaveSliceInfo).

  The Saver saves each part as the slice `spec` of one checkpoint entry
  under full_name, as TensorFlow's Saver does.
  """

  def __init__(self, full_name=None, full_shape=None, var_offset=None, var_shape=None):
    self.full_name = full_name
    self.full_shape = list(full_shape)
    self.var_offset = list(var_offset)
    self.var_shape = list(var_shape)

  @property
  def spec(self):
    """TF's shape_and_slice string: "<full shape> <offset,len:...>"."""
    full = " ".join(str(d) for d in self.full_shape) + " "
    return full + ":".join("%d,%d" % (o, n) for o, n in zip(self.var_offset, self.var_shape))


Variable.SaveSliceInfo = SaveSliceInfo


class PartitionedVariable(object):
  """TF 1.x's PartitionedVariable: one logical variable stored as parts.

  get_variable(..., partitioner=...) makes it. Each part is an ordinary
  variable named "<name>/part_<i>" (in the collections, trained like any
  other, saved as a slice of the checkpoint entry "<name>"); the
  PartitionedVariable itself is in no collection.
  Iterating gives the parts in offset order; converting it to a tensor
  concatenates them along the partitioned axis.
  """

  def __init__(self, name, shape, dtype, variable_list, partitions):
    if not isinstance(variable_list, (list, tuple)):
      raise TypeError("variable_list is not a list or tuple: %s" % (variable_list,))
    if not isinstance(partitions, (list, tuple)):
      raise TypeError("partitions is not a list or tuple: %s" % (partitions,))
    if not all(p >= 1 for p in partitions):
      raise ValueError("partition values must be positive: %s" % (partitions,))
    if not variable_list:
      raise ValueError("variable_list may not be empty")
    self._variable_list = list(variable_list)
    self._name = name
    self._shape = tensor_shape.as_shape(shape)
    self._dtype = dtypes.as_dtype(dtype)
    self._partitions = list(partitions)
    self._as_tensor = None

  def __iter__(self):
    return iter(self._variable_list)

  def __len__(self):
    axes = self._partition_axes()
    if len(axes) > 1:
      raise ValueError("Cannot get a length of %d > 1 partitions" % len(axes))
    return len(self._variable_list)

  def _partition_axes(self):
    if all(p == 1 for p in self._partitions):
      return [0]
    return [i for i, p in enumerate(self._partitions) if p > 1]

  def _concat(self):
    axes = self._partition_axes()
    if len(axes) > 1:
      raise NotImplementedError("Cannot concatenate along more than one dimension: %s. "
                                "Multi-axis partition concat is not supported" % (axes,))
    with ops.name_scope(self._name + "/ConcatPartitions/"):
      concatenated = array_ops.concat([v.value() for v in self._variable_list], axes[0])
    with ops.name_scope(None):
      return array_ops.identity(concatenated, name=self._name)

  def as_tensor(self):
    """The full value: the parts concatenated along the partitioned axis."""
    with ops.control_dependencies(None):
      return self._concat()

  @staticmethod
  def _TensorConversionFunction(v, dtype=None, name=None, as_ref=False):  # pylint: disable=invalid-name
    _ = name
    if dtype is not None and not dtypes.as_dtype(dtype).is_compatible_with(v.dtype):
      raise ValueError("Incompatible type conversion requested to type '%s' for variable of "
                       "type '%s'" % (dtypes.as_dtype(dtype).name, v.dtype.name))
    if as_ref:
      raise NotImplementedError("PartitionedVariable doesn't support being used as a "
                                "reference.")
    return v.as_tensor()

  @property
  def name(self):
    return self._name

  @property
  def dtype(self):
    return self._dtype

  @property
  def shape(self):
    return self.get_shape()

  def get_shape(self):
    return self._shape

  @property
  def graph(self):
    return self._variable_list[0].graph

  def _get_variable_list(self):
    return self._variable_list

  def _get_partitions(self):
    return self._partitions

  def assign(self, value, use_locking=False, name=None, read_value=True):
    """Assigns `value` (the full shape) to the parts, slice by slice."""
    _ = name
    value = ops.convert_to_tensor(value, dtype=self._dtype)
    axis = self._partition_axes()[0]
    ops_out = []
    offset = 0
    for v in self._variable_list:
      n = v.get_shape()[axis].value
      begin = [0] * self._shape.ndims
      begin[axis] = offset
      size = [-1] * self._shape.ndims
      size[axis] = n
      ops_out.append(v.assign(array_ops.slice(value, begin, size), use_locking=use_locking,
                              read_value=read_value))
      offset += n
    return ops_out

  def __repr__(self):
    return "<tf.PartitionedVariable '%s' shape=%s dtype=%s parts=%d>" % (
        self._name, self._shape, self._dtype.name, len(self._variable_list))


ops.register_tensor_conversion_function(PartitionedVariable,
                                        PartitionedVariable._TensorConversionFunction)  # pylint: disable=protected-access
