"""tf.variable_scope and tf.get_variable, with TF 1.x's sharing rules.

Each graph has a variable store (name -> variable, for variables made by
get_variable) and a stack of VariableScopes. get_variable("w") in scope "a/b"
names the variable "a/b/w" whatever the name scopes; in a scope with
reuse=True it must exist (else ValueError), with reuse None/False it must not
(else ValueError), with tf.AUTO_REUSE it is made on first use. Partitioned
variables are not supported yet (a partitioner raises NotImplementedError).
"""

import contextlib

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import tensor_shape
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
    self.variable_scopes_count = {}

  def get_variable(self, name, shape=None, dtype=dtypes.float32, initializer=None,
                   regularizer=None, reuse=None, trainable=None, collections=None,
                   caching_device=None, partitioner=None, validate_shape=True,
                   use_resource=None, custom_getter=None, constraint=None,
                   synchronization=None, aggregation=None):
    if partitioner is not None:
      raise NotImplementedError(
          "get_variable('%s', partitioner=...): partitioned variables are not supported by "
          "recflow's Python layer yet (recflow shards embedding tables itself: see "
          "docs/python.md)" % name)
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
                             validate_shape=validate_shape, use_resource=use_resource,
                             constraint=constraint)

  def _true_getter(self, name, shape=None, dtype=dtypes.float32, initializer=None,
                   regularizer=None, reuse=None, trainable=None, collections=None,
                   caching_device=None, partitioner=None, validate_shape=True,
                   use_resource=None, constraint=None, **unused):
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
        return initializer(shape_list, dtype=dtype, partition_info=None)
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
        elif self._auxiliary_name_scope:
          self._stack.enter_context(graph.name_scope(None))
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
