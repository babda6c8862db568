"""tf.variable_scope and tf.get_variable, with TF 1.x's sharing rules.

Each graph has a variable store (name -> variable, for variables made by
get_variable) and a stack of VariableScopes. get_variable("w") in scope "a/b"
names the variable "a/b/w" whatever the name scopes; in a scope with
reuse=True it must exist (else ValueError), with reuse None/False it must not
(else ValueError), with tf.AUTO_REUSE it is made on first use.

With a partitioner, get_variable makes a PartitionedVariable as TF 1.x does:
parts "<name>/part_<i>" split along the one axis the partitioner returns > 1
for, the first (size % n) parts one row larger; each part is an ordinary
variable. Its initializer is called per part with a _PartitionInfo (random
initializers draw per part, VarianceScaling scales by the full shape); Zeros,
Ones and a scalar Constant give the same value per part; an array Constant and
an initial value (NumPy, list or Tensor) give each part its slice.
"""

from collections import abc as collections_abc
import contextlib

import numpy as np

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape
from recflow.ops import array_ops
from recflow.ops import init_ops
from recflow.ops import variables


class _ReuseMode(object):
  def __repr__(self):
    return "AUTO_REUSE"


AUTO_REUSE = _ReuseMode()


class VariableScope(object):
  """The variable-creation defaults of a scope (reuse, initializer, dtype, ...)."""

  def __init__(self, reuse, name="", initializer=None, regularizer=None, caching_device=None,
               partitioner=None, custom_getter=None, name_scope="", dtype=dtypes.float32,
               use_resource=None, constraint=None):
    self._name = name
    self._reuse = reuse
    self._initializer = initializer
    self._regularizer = regularizer
    self._caching_device = caching_device
    self._partitioner = partitioner
    self._custom_getter = custom_getter
    self._name_scope = name_scope
    self._dtype = dtype
    self._use_resource = use_resource
    self._constraint = constraint

  @property
  def name(self):
    return self._name

  @property
  def original_name_scope(self):
    return self._name_scope

  @property
  def reuse(self):
    return self._reuse

  @property
  def initializer(self):
    return self._initializer

  @property
  def dtype(self):
    return self._dtype

  @property
  def use_resource(self):
    return self._use_resource

  @property
  def regularizer(self):
    return self._regularizer

  @property
  def caching_device(self):
    return self._caching_device

  @property
  def partitioner(self):
    return self._partitioner

  @property
  def custom_getter(self):
    return self._custom_getter

  @property
  def constraint(self):
    return self._constraint

  def reuse_variables(self):
    self._reuse = True

  def set_initializer(self, initializer):
    self._initializer = initializer

  def set_dtype(self, dtype):
    self._dtype = dtype

  def set_use_resource(self, use_resource):
    self._use_resource = use_resource

  def set_regularizer(self, regularizer):
    self._regularizer = regularizer

  def set_partitioner(self, partitioner):
    self._partitioner = partitioner

  def set_custom_getter(self, custom_getter):
    self._custom_getter = custom_getter

  def set_caching_device(self, caching_device):
    self._caching_device = caching_device

  def get_variable(self, var_store, name, shape=None, dtype=None, initializer=None,
                   regularizer=None, reuse=None, trainable=None, collections=None,
                   caching_device=None, partitioner=None, validate_shape=True,
                   use_resource=None, custom_getter=None, constraint=None, **kwargs):
    if regularizer is None:
      regularizer = self._regularizer
    if partitioner is None:
      partitioner = self._partitioner
    if custom_getter is None:
      custom_getter = self._custom_getter
    if reuse is None:
      reuse = self._reuse
    if use_resource is None:
      use_resource = self._use_resource
    full_name = self.name + "/" + name if self.name else name
    with ops.name_scope(None):
      if dtype is not None and initializer is not None and not callable(initializer):
        init_dtype = ops.convert_to_tensor(initializer).dtype.base_dtype
        if init_dtype != dtypes.as_dtype(dtype).base_dtype:
          raise ValueError("Initializer type '%s' and explicit dtype '%s' don't match." %
                           (init_dtype, dtype))
      if initializer is None:
        initializer = self._initializer
      if constraint is None:
        constraint = self._constraint
      if dtype is None:
        dtype = self._dtype
      return var_store.get_variable(
          full_name, shape=shape, dtype=dtype, initializer=initializer,
          regularizer=regularizer, reuse=reuse, trainable=trainable, collections=collections,
          caching_device=caching_device, partitioner=partitioner,
          validate_shape=validate_shape, use_resource=use_resource,
          custom_getter=custom_getter, constraint=constraint, **kwargs)


class _VariableStore(object):
  """The variables get_variable made in one graph, by full name."""

  def __init__(self):
    self._vars = {}
    self._partitioned_vars = {}
    self.variable_scopes_count = {}

  def get_variable(self, name, shape=None, dtype=dtypes.float32, initializer=None,
                   regularizer=None, reuse=None, trainable=None, collections=None,
                   caching_device=None, partitioner=None, validate_shape=True,
                   use_resource=None, custom_getter=None, constraint=None,
                   synchronization=None, aggregation=None):
    if custom_getter is not None:
      if not callable(custom_getter):
        raise ValueError("Passed a custom_getter which is not callable: %s" % custom_getter)
      return custom_getter(self._true_getter, name, shape=shape, dtype=dtype,
                           initializer=initializer, regularizer=regularizer, reuse=reuse,
                           trainable=trainable, collections=collections,
                           caching_device=caching_device, partitioner=partitioner,
                           validate_shape=validate_shape, use_resource=use_resource,
                           constraint=constraint)
    return self._true_getter(name, shape=shape, dtype=dtype, initializer=initializer,
                             regularizer=regularizer, reuse=reuse, trainable=trainable,
                             collections=collections, caching_device=caching_device,
                             partitioner=partitioner, validate_shape=validate_shape,
                             use_resource=use_resource, constraint=constraint)

  def _true_getter(self, name, shape=None, dtype=dtypes.float32, initializer=None,
                   regularizer=None, reuse=None, trainable=None, collections=None,
                   caching_device=None, partitioner=None, validate_shape=True,
                   use_resource=None, constraint=None, **unused):
    # TF: a scalar (shape=[]) ignores the partitioner.
    is_scalar = (shape is not None and isinstance(shape, collections_abc.Sequence) and
                 not shape)
    if partitioner is not None and not is_scalar:
      if not callable(partitioner):
        raise ValueError("Partitioner must be callable, but received: %s" % (partitioner,))
      return self._get_partitioned_variable(
          name, partitioner, shape=shape, dtype=dtype, initializer=initializer,
          regularizer=regularizer, reuse=reuse, trainable=trainable, collections=collections,
          caching_device=caching_device, validate_shape=validate_shape,
          use_resource=use_resource)
    if name in self._partitioned_vars:
      raise ValueError("No partitioner was provided, but a partitioned version of the "
                       "variable was found: %s. Perhaps a variable of the same name was "
                       "already created with partitioning?" % name)
    return self._get_single_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                                     regularizer=regularizer, reuse=reuse,
                                     trainable=trainable, collections=collections,
                                     caching_device=caching_device,
                                     validate_shape=validate_shape,
                                     use_resource=use_resource)

  def _get_partitioned_variable(self, name, partitioner, shape=None, dtype=dtypes.float32,
                                initializer=None, regularizer=None, reuse=None,
                                trainable=None, collections=None, caching_device=None,
                                validate_shape=True, use_resource=None):
    """The PartitionedVariable `name`, made or reused (TF's _get_partitioned_variable)."""
    dtype = dtypes.as_dtype(dtype)
    if name in self._vars:
      raise ValueError("A partitioner was provided, but an unpartitioned version of the "
                       "variable was found: %s. Perhaps a variable of the same name was "
                       "already created without partitioning?" % name)
    shape = tensor_shape.as_shape(shape) if shape is not None else tensor_shape.unknown_shape()
    init_value = None  # the initial value as a NumPy array or a Tensor, when given one
    if initializer is not None and not callable(initializer):
      if isinstance(initializer, (ops.Tensor, variables.Variable)):
        init_value = ops.convert_to_tensor(initializer)
        init_shape = init_value.get_shape()
      else:
        init_value = np.asarray(initializer)
        if init_value.dtype.kind in "biuf" and dtype.is_numpy_compatible:
          init_value = init_value.astype(dtype.as_numpy_dtype)
        init_shape = tensor_shape.as_shape(init_value.shape)
      if not shape.is_compatible_with(init_shape):
        raise ValueError("Partitioned variable %s: the initial value has shape %s but the "
                         "specified shape is %s." % (name, init_shape, shape))
      shape = shape.merge_with(init_shape)
    partitions = _call_partitioner(partitioner, shape, dtype, name)
    if name in self._partitioned_vars:
      if reuse is False or reuse is None:
        raise ValueError("Partitioned variable with name %s already exists. Did you mean to "
                         "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?" % name)
      found = self._partitioned_vars[name]
      if not shape.is_compatible_with(found.get_shape()):
        raise ValueError("Trying to reuse partitioned variable %s, but specified shape %s and "
                         "found shape %s." % (name, shape, found.get_shape()))
      if not dtype.is_compatible_with(found.dtype):
        raise ValueError("Trying to reuse partitioned variable %s, but specified dtype %s and "
                         "found dtype %s." % (name, dtype.name, found.dtype.name))
      if partitions != found._get_partitions():  # pylint: disable=protected-access
        raise ValueError("Trying to reuse partitioned variable %s, but specified partitions "
                         "%s and found partitions %s." %
                         (name, partitions, found._get_partitions()))  # pylint: disable=protected-access
      return found
    if reuse is True:
      raise ValueError("PartitionedVariable %s does not exist, or was not created with "
                       "tf.get_variable(). Did you mean to set reuse=False or "
                       "reuse=tf.AUTO_REUSE in VarScope?" % name)
    if "%s/part_0" % name in self._vars:
      raise ValueError("Partitioner returned a different partitioning than what was already "
                       "found for %s: a variable %s/part_0 exists already." % (name, name))
    slice_dim = 0
    for i, p in enumerate(partitions):
      if p > 1:
        slice_dim = i
    num_slices = partitions[slice_dim]
    if initializer is not None and callable(initializer) and isinstance(initializer, type) \
        and issubclass(initializer, init_ops.Initializer):
      initializer = initializer(dtype=dtype)
    full_shape = shape.as_list()
    parts = []
    for i, (offset, part_shape) in enumerate(_iter_slices(full_shape, num_slices, slice_dim)):
      part_name = "%s/part_%d" % (name, i)
      info = _PartitionInfo(full_shape=full_shape, var_offset=offset)
      part_init = initializer
      if init_value is not None:
        if isinstance(init_value, np.ndarray):
          part_init = init_value[tuple(slice(o, o + n) for o, n in zip(offset, part_shape))]
        else:
          with ops.name_scope(part_name + "/PartitionedInitializer"):
            part_init = array_ops.slice(init_value, offset, part_shape)
      elif isinstance(initializer, init_ops.Constant) and np.ndim(initializer.value) > 0:
        value = np.asarray(initializer.value)
        if list(value.shape) != full_shape:
          if value.size != int(np.prod(full_shape)):
            raise ValueError("Partitioned variable %s: constant initializer value has %d "
                             "elements but the shape %s has %d." %
                             (name, value.size, full_shape, int(np.prod(full_shape))))
          value = value.reshape(full_shape)
        part_init = init_ops.Constant(
            value[tuple(slice(o, o + n) for o, n in zip(offset, part_shape))],
            dtype=initializer.dtype)
      v = self._get_single_variable(
          part_name, shape=part_shape if (init_value is None) else None, dtype=dtype,
          initializer=part_init, regularizer=regularizer, reuse=reuse, trainable=trainable,
          collections=collections, caching_device=caching_device,
          validate_shape=validate_shape, use_resource=use_resource, partition_info=info)
      v._set_save_slice_info(variables.SaveSliceInfo(  # pylint: disable=protected-access
          name, full_shape, offset, part_shape))
      parts.append(v)
    pv = variables.PartitionedVariable(name=name, shape=shape, dtype=dtype,
                                       variable_list=parts, partitions=partitions)
    self._partitioned_vars[name] = pv
    return pv

  def _get_single_variable(self, name, shape=None, dtype=dtypes.float32, initializer=None,
                           regularizer=None, reuse=None, trainable=None, collections=None,
                           caching_device=None, validate_shape=True, use_resource=None,
                           partition_info=None):
    dtype = dtypes.as_dtype(dtype)
    shape = tensor_shape.as_shape(shape) if shape is not None else tensor_shape.unknown_shape()
    if name in self._vars:
      if reuse is False or reuse is None:
        raise ValueError("Variable %s already exists, disallowed. Did you mean to set "
                         "reuse=True or reuse=tf.AUTO_REUSE in VarScope?" % name)
      found = self._vars[name]
      if not shape.is_compatible_with(found.get_shape()):
        raise ValueError("Trying to share variable %s, but specified shape %s and found shape "
                         "%s." % (name, shape, found.get_shape()))
      if not dtype.is_compatible_with(found.dtype):
        raise ValueError("Trying to share variable %s, but specified dtype %s and found dtype "
                         "%s." % (name, dtype.name, found.dtype.base_dtype.name))
      return found
    if reuse is True:
      raise ValueError("Variable %s does not exist, or was not created with "
                       "tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in "
                       "VarScope?" % name)
    if initializer is None:
      initializer, initializing_from_value = self._default_initializer(name, dtype)
    else:
      initializing_from_value = not callable(initializer)
    if initializing_from_value:
      if shape.ndims is not None and shape.dims:
        init_shape = ops.convert_to_tensor(initializer).get_shape()
        if not shape.is_compatible_with(init_shape):
          raise ValueError("If initializer is a constant, do not specify shape.")
      init_val = initializer
      variable_dtype = None
    else:
      if not shape.is_fully_defined():
        raise ValueError("Shape of a new variable (%s) must be fully defined, but instead was "
                         "%s." % (name, shape))
      if isinstance(initializer, type) and issubclass(initializer, init_ops.Initializer):
        initializer = initializer(dtype=dtype)
      shape_list = shape.as_list()

      def init_val():
        return initializer(shape_list, dtype=dtype, partition_info=partition_info)
      variable_dtype = dtype.base_dtype
    v = variables.Variable(initial_value=init_val, name=name, trainable=trainable,
                           collections=collections, caching_device=caching_device,
                           dtype=variable_dtype, validate_shape=validate_shape,
                           use_resource=use_resource)
    self._vars[name] = v
    if regularizer is not None:
      with ops.name_scope(name + "/Regularizer/"):
        loss = regularizer(v)
      if loss is not None:
        ops.add_to_collection(ops.GraphKeys.REGULARIZATION_LOSSES, loss)
    return v

  @staticmethod
  def _default_initializer(name, dtype):
    if dtype.is_floating:
      return init_ops.GlorotUniform(), False
    if dtype.is_integer or dtype.is_unsigned or dtype.is_bool:
      return init_ops.Zeros(), False
    raise ValueError("An initializer for variable %s of %s is required" % (name,
                                                                           dtype.base_dtype))


class _PartitionInfo(object):
  """Where a part sits in its partitioned variable (passed to initializers)."""

  def __init__(self, full_shape, var_offset):
    if len(full_shape) != len(var_offset):
      raise ValueError("Expected equal length, but `var_offset` is of length %d while "
                       "full_shape is of length %d." % (len(var_offset), len(full_shape)))
    self._full_shape = list(full_shape)
    self._var_offset = list(var_offset)

  @property
  def full_shape(self):
    return self._full_shape

  @property
  def var_offset(self):
    return self._var_offset

  def single_offset(self, shape):
    dim = self.single_slice_dim(shape)
    return 0 if dim is None else self._var_offset[dim]

  def single_slice_dim(self, shape):
    for i, (full, part) in enumerate(zip(self._full_shape, shape)):
      if full != part:
        return i
    return None


def _call_partitioner(partitioner, shape, dtype, name):
  """partitioner(shape=, dtype=), checked as TF checks it."""
  if not shape.is_fully_defined():
    raise ValueError("Shape of a new partitioned variable (%s) must be fully defined, but "
                     "instead was %s." % (name, shape))
  if shape.ndims < 1:
    raise ValueError("A partitioned Variable must have rank at least 1, shape: %s" % shape)
  slicing = partitioner(shape=shape, dtype=dtype)
  if not isinstance(slicing, collections_abc.Sequence) or isinstance(slicing, str):
    raise ValueError("Partitioner must return a sequence, but saw: %s" % (slicing,))
  if len(slicing) != shape.ndims:
    raise ValueError("Partitioner returned a partition list that does not match the "
                     "Variable's rank: %s vs. %s" % (slicing, shape))
  out = []
  for p in slicing:
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)):
      raise ValueError("Partitioner returned a non-integer number of partitions %r in %s "
                       "(for variable %s)" % (p, slicing, name))
    out.append(int(p))
  if any(p < 1 for p in out):
    raise ValueError("Partitioner returned zero partitions for some axes: %s" % (slicing,))
  if sum(p > 1 for p in out) > 1:
    raise ValueError("Can only slice a variable along one dimension: shape: %s, "
                     "partitioning: %s" % (shape, slicing))
  return out


def _iter_slices(full_shape, num_slices, slice_dim):
  """(offset, shape) of each part: the first (size % n) parts are one longer."""
  num_slices_with_excess = full_shape[slice_dim] % num_slices
  offset = [0] * len(full_shape)
  min_slice_len = full_shape[slice_dim] // num_slices
  for i in range(num_slices):
    shape = full_shape[:]
    shape[slice_dim] = min_slice_len + int(i < num_slices_with_excess)
    yield offset[:], shape
    offset[slice_dim] += shape[slice_dim]


def _store(graph):
  if graph._variable_store is None:  # pylint: disable=protected-access
    graph._variable_store = _VariableStore()  # pylint: disable=protected-access
  return graph._variable_store  # pylint: disable=protected-access


def _scope_stack(graph):
  if graph._variable_scope_stack is None:  # pylint: disable=protected-access
    graph._variable_scope_stack = [VariableScope(False)]  # pylint: disable=protected-access
  return graph._variable_scope_stack  # pylint: disable=protected-access


def get_variable_scope():
  return _scope_stack(ops.get_default_graph())[-1]


def _get_default_variable_store():
  return _store(ops.get_default_graph())


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=None, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None, constraint=None,
                 synchronization=None, aggregation=None):
  """Gets an existing variable or makes a new one (see the module doc)."""
  return get_variable_scope().get_variable(
      _get_default_variable_store(), name, shape=shape, dtype=dtype, initializer=initializer,
      regularizer=regularizer, trainable=trainable, collections=collections,
      caching_device=caching_device, partitioner=partitioner, validate_shape=validate_shape,
      use_resource=use_resource, custom_getter=custom_getter, constraint=constraint)


def get_local_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                       trainable=False, collections=None, **kwargs):
  collections = list(collections or []) + [ops.GraphKeys.LOCAL_VARIABLES]
  return get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                      regularizer=regularizer, trainable=False, collections=collections,
                      **kwargs)


class variable_scope(object):  # pylint: disable=invalid-name
  """TF 1.x's variable_scope: a variable scope and (by default) a name scope."""

  def __init__(self, name_or_scope, default_name=None, values=None, initializer=None,
               regularizer=None, caching_device=None, partitioner=None, custom_getter=None,
               reuse=None, dtype=None, use_resource=None, constraint=None,
               auxiliary_name_scope=True):
    if name_or_scope is None and default_name is None:
      raise TypeError("If default_name is None then name_or_scope is required")
    if not (reuse is True or reuse is False or reuse is None or reuse is AUTO_REUSE):
      raise ValueError("The reuse parameter must be True or False or None.")
    if values is not None and not isinstance(values, (list, tuple)):
      raise TypeError("The values parameter must be a list or tuple.")
    self._name_or_scope = name_or_scope
    self._default_name = default_name
    self._values = values
    self._reuse = reuse if reuse is not False else None
    self._kw = dict(initializer=initializer, regularizer=regularizer,
                    caching_device=caching_device, partitioner=partitioner,
                    custom_getter=custom_getter, dtype=dtype, use_resource=use_resource,
                    constraint=constraint)
    self._auxiliary_name_scope = auxiliary_name_scope
    self._stack = contextlib.ExitStack()

  def __enter__(self):
    try:
      return self._enter()
    except Exception:
      self._stack.close()
      raise

  def _enter(self):
    graph = ops._get_graph_from_inputs(self._values or [])  # pylint: disable=protected-access
    self._stack.enter_context(graph.as_default())
    stack = _scope_stack(graph)
    old = stack[-1]
    store = _store(graph)
    if self._name_or_scope is not None:
      if isinstance(self._name_or_scope, VariableScope):
        name = self._name_or_scope.name
        base = self._name_or_scope
        name_scope_str = self._name_or_scope.original_name_scope
        if self._auxiliary_name_scope and name_scope_str:
          self._stack.enter_context(graph.name_scope(name_scope_str))
        elif self._auxiliary_name_scope and name:
          self._stack.enter_context(graph.name_scope(None))
        # TF: re-entering the root scope (tf.get_variable_scope() at the top) keeps the
        # current name scope, so model_deploy's clones keep their "clone_N/" prefixes.
      else:
        if not isinstance(self._name_or_scope, str):
          raise TypeError("VariableScope: name_or_scope must be a string or VariableScope.")
        name = old.name + "/" + self._name_or_scope if old.name else self._name_or_scope
        base = old
        name_scope_str = ""
        if self._auxiliary_name_scope:
          name_scope_str = self._stack.enter_context(graph.name_scope(self._name_or_scope))
    else:
      prefix = old.name + "/" if old.name else ""
      name = prefix + self._default_name
      if store.variable_scopes_count.get(name, 0) > 0:
        idx = 1
        while store.variable_scopes_count.get("%s_%d" % (name, idx), 0) > 0:
          idx += 1
        name = "%s_%d" % (name, idx)
      base = old
      name_scope_str = ""
      if self._auxiliary_name_scope:
        name_scope_str = self._stack.enter_context(graph.name_scope(self._default_name))
    store.variable_scopes_count[name] = store.variable_scopes_count.get(name, 0) + 1
    # TF: leaving a scope entered by name forgets the default-named scopes opened
    # in it (re-entering "model" makes "model/dense" again, not "model/dense_1");
    # leaving a VariableScope object restores the counts as they were.
    self._new_name = name
    self._store = store
    self._old_subscopes = (dict(store.variable_scopes_count)
                           if isinstance(self._name_or_scope, VariableScope) else None)
    # TF 1.x: reuse=True (or AUTO_REUSE) sticks for every sub-scope.
    if isinstance(self._name_or_scope, VariableScope):
      reuse = self._reuse if self._reuse else base.reuse
    else:
      reuse = self._reuse or old.reuse
    kw = self._kw
    scope = VariableScope(
        reuse, name=name,
        initializer=kw["initializer"] if kw["initializer"] is not None else base.initializer,
        regularizer=kw["regularizer"] if kw["regularizer"] is not None else base.regularizer,
        caching_device=(kw["caching_device"] if kw["caching_device"] is not None
                        else base.caching_device),
        partitioner=kw["partitioner"] if kw["partitioner"] is not None else base.partitioner,
        custom_getter=(kw["custom_getter"] if kw["custom_getter"] is not None
                       else base.custom_getter),
        name_scope=name_scope_str or (base.original_name_scope
                                      if isinstance(self._name_or_scope, VariableScope)
                                      else ""),
        dtype=kw["dtype"] if kw["dtype"] is not None else base.dtype,
        use_resource=(kw["use_resource"] if kw["use_resource"] is not None
                      else base.use_resource),
        constraint=kw["constraint"] if kw["constraint"] is not None else base.constraint)
    stack.append(scope)
    self._graph = graph
    return scope

  def __exit__(self, *exc):
    _scope_stack(self._graph).pop()
    counts = self._store.variable_scopes_count
    if self._old_subscopes is not None:
      counts.clear()
      counts.update(self._old_subscopes)
    else:
      prefix = self._new_name + "/"
      for k in counts:
        if k.startswith(prefix):
          counts[k] = 0
    self._stack.close()
    return False


def variable_op_scope(values, name_or_scope, default_name=None, **kwargs):
  return variable_scope(name_or_scope, default_name=default_name, values=values, **kwargs)
