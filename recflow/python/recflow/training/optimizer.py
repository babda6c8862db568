"""tf.train.Optimizer: the TF 1.x optimizer protocol, with slots.

minimize = compute_gradients (tf.gradients over the trainable variables) +
apply_gradients (one update per variable, under "update_<var>", grouped, then
the global step incremented). A subclass implements _apply_dense /
_apply_sparse for reference variables and _resource_apply_dense /
_resource_apply_sparse for resource variables, and creates its slots in
_create_slots with _zeros_slot / _get_or_make_slot (Momentum, Adagrad, Adam
and Ftrl follow this shape; recflow's kernels for them exist: ApplyAdam,
ResourceSparseApplyAdagrad, ...).
"""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import control_flow_ops
from recflow.ops import gradients_impl
from recflow.ops import math_ops
from recflow.ops import state_ops
from recflow.ops import variables


class Optimizer(object):
  """Base class of optimizers (TF 1.x's tf.train.Optimizer)."""

  GATE_NONE = 0
  GATE_OP = 1
  GATE_GRAPH = 2

  def __init__(self, use_locking, name):
    if not name:
      raise ValueError("Must specify the optimizer name")
    self._use_locking = use_locking
    self._name = name
    self._slots = {}  # slot name -> {variable key -> slot variable}
    self._non_slot_dict = {}  # (name, graph) -> variable (Adam's beta1_power, ...)
    self._handle_vars = {}  # resource handle name -> its variable (for _resource_apply_*)

  def get_name(self):
    return self._name

  def minimize(self, loss, global_step=None, var_list=None, gate_gradients=GATE_OP,
               aggregation_method=None, colocate_gradients_with_ops=False, name=None,
               grad_loss=None):
    grads_and_vars = self.compute_gradients(
        loss, var_list=var_list, gate_gradients=gate_gradients,
        aggregation_method=aggregation_method,
        colocate_gradients_with_ops=colocate_gradients_with_ops, grad_loss=grad_loss)
    vars_with_grad = [v for g, v in grads_and_vars if g is not None]
    if not vars_with_grad:
      raise ValueError("No gradients provided for any variable, check your graph for ops that "
                       "do not support gradients, between variables %s and loss %s." %
                       ([str(v) for _, v in grads_and_vars], loss))
    return self.apply_gradients(grads_and_vars, global_step=global_step, name=name)

  def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                        aggregation_method=None, colocate_gradients_with_ops=False,
                        grad_loss=None):
    if callable(loss):
      raise NotImplementedError("minimize(loss) with a callable loss is eager-mode only")
    if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP, Optimizer.GATE_GRAPH):
      raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, Optimizer.GATE_OP, "
                       "Optimizer.GATE_GRAPH.  Not %s" % gate_gradients)
    loss = ops.convert_to_tensor(loss)
    if not loss.dtype.is_floating:
      raise ValueError("Invalid type %r for %s, expected: [float16, bfloat16, float32, "
                       "float64]." % (loss.dtype, loss.name))
    if var_list is None:
      var_list = (variables.trainable_variables() +
                  ops.get_collection(_TRAINABLE_HASH_TABLES))
    else:
      var_list = list(var_list)
    if not var_list:
      raise ValueError("No variables to optimize.")
    for v in var_list:
      if not isinstance(v, variables.Variable) and not _is_hash_table(v):
        raise TypeError("Argument is not a tf.Variable: %s" % v)
    grads = gradients_impl.gradients(
        loss, var_list, grad_ys=None if grad_loss is None else [grad_loss],
        aggregation_method=aggregation_method,
        colocate_gradients_with_ops=colocate_gradients_with_ops)
    if gate_gradients == Optimizer.GATE_GRAPH:
      dense = [g for g in grads if isinstance(g, ops.Tensor)]
      if dense:
        gated = control_flow_ops.tuple(dense)
        it = iter(gated)
        grads = [next(it) if isinstance(g, ops.Tensor) else g for g in grads]
    return list(zip(grads, var_list))

  def apply_gradients(self, grads_and_vars, global_step=None, name=None):
    grads_and_vars = tuple(grads_and_vars)
    if not grads_and_vars:
      raise ValueError("No variables provided.")
    converted = []
    for g, v in grads_and_vars:
      if g is not None and not isinstance(g, ops.IndexedSlices):
        try:
          g = ops.convert_to_tensor(g)
        except TypeError:
          raise TypeError("Gradient must be convertible to a Tensor or IndexedSlices, or None:"
                          " %s" % g)
      if not isinstance(v, variables.Variable) and not _is_hash_table(v):
        raise TypeError("Argument is not a tf.Variable: %s" % v)
      if _is_hash_table(v):
        self._check_hash_table(g, v)
      converted.append((g, v))
    var_list = [v for g, v in converted if g is not None]
    if not var_list:
      raise ValueError("No gradients provided for any variable: %s." %
                       ([str(v) for _, v in converted],))
    with ops.init_scope():
      self._create_slots([v for v in var_list if not _is_hash_table(v)])
    update_ops = []
    with ops.name_scope(name, self._name) as name:
      self._prepare()
      table_step = None
      for grad, var in converted:
        if grad is None:
          continue
        with ops.name_scope("update_" + var.op.name):
          if _is_hash_table(var):
            if table_step is None:
              table_step = _table_step(global_step)
            update_ops.append(self._apply_hash_table(grad, var, table_step))
          else:
            update_ops.append(self._apply(grad, var))
      if global_step is None:
        apply_updates = self._finish(update_ops, name)
      else:
        with ops.control_dependencies([self._finish(update_ops, "update")]):
          apply_updates = state_ops.assign_add(global_step, 1, name=name)
      if not isinstance(apply_updates, ops.Operation):
        apply_updates = apply_updates.op
      train_op = ops.get_collection_ref(ops.GraphKeys.TRAIN_OP)
      if apply_updates not in train_op:
        train_op.append(apply_updates)
      return apply_updates

  def _apply(self, grad, var):
    resource = getattr(var, "_is_resource_variable", False)
    if resource:
      self._handle_vars[var.handle.name] = var
    if isinstance(grad, ops.IndexedSlices):
      if resource:
        return self._resource_apply_sparse_duplicate_indices(grad.values, var.handle,
                                                             grad.indices)
      return self._apply_sparse_duplicate_indices(grad, var)
    if resource:
      return self._resource_apply_dense(grad, var.handle)
    return self._apply_dense(grad, var)

  # Hash embedding tables (recflow.embedding): their rows carry their slots,
  # so no slot variables; a sparse gradient over raw ids, applied with the
  # HashTableApply* op of the optimizer's kind (_hash_table_apply).
  _hash_table_kind = None  # the table optimizer attr a subclass's op needs

  def _check_hash_table(self, grad, table):
    if grad is not None and not isinstance(grad, ops.IndexedSlices):
      raise TypeError("The gradient of hash embedding table '%s' must be IndexedSlices over "
                      "its ids (a table has no dense form), got %s" % (table.name, grad))
    if self._hash_table_kind is None:
      raise NotImplementedError(
          "%s cannot train hash embedding table '%s': recflow's tables are trained by "
          "GradientDescent, Adagrad, Adam and Ftrl" % (type(self).__name__, table.name))
    if self._hash_table_kind != "any" and table.optimizer != self._hash_table_kind:
      raise ValueError(
          "%s cannot train hash embedding table '%s': its rows carry the slots of %r; create "
          "it with optimizer=%r" % (type(self).__name__, table.name, table.optimizer,
                                    self._hash_table_kind))

  def _apply_hash_table(self, grad, table, step):
    values, ids = grad.values, math_ops.cast(grad.indices, dtypes.int64)
    # EmbeddingBagGrad (the bag's gradient) gives each id once already.
    if grad.indices.op.type != "EmbeddingBagGrad":
      values, ids = _deduplicate_indexed_slices(values, ids)
    return self._hash_table_apply(table, ids, values, step)

  def _hash_table_apply(self, table, ids, values, step):
    raise NotImplementedError()

  # Slots.
  def get_slot_names(self):
    return sorted(self._slots.keys())

  def get_slot(self, var, name):
    named_slots = self._slots.get(name)
    if not named_slots:
      return None
    return named_slots.get(id(var))

  def _slot_dict(self, slot_name):
    return self._slots.setdefault(slot_name, {})

  def _get_or_make_slot(self, var, val, slot_name, op_name):
    named_slots = self._slot_dict(slot_name)
    if id(var) not in named_slots:
      with ops.name_scope(None):
        named_slots[id(var)] = variables.Variable(
            val, name=var.op.name + "/" + op_name, trainable=False,
            use_resource=getattr(var, "_is_resource_variable", False))
    return named_slots[id(var)]

  def _zeros_slot(self, var, slot_name, op_name):
    shape = var.get_shape().as_list()
    dtype = var.dtype.base_dtype

    def zeros():
      return array_ops.zeros(shape, dtype=dtype)
    return self._get_or_make_slot(var, zeros, slot_name, op_name)

  def _filled_slot(self, var, value, slot_name, op_name):
    """A slot shaped like `var`, every element `value` (Adagrad's and Ftrl's
    accumulators start at initial_accumulator_value)."""
    shape = var.get_shape().as_list()
    dtype = var.dtype.base_dtype

    def filled():
      return array_ops.fill(shape, ops.convert_to_tensor(value, dtype=dtype))
    return self._get_or_make_slot(var, filled, slot_name, op_name)

  def _var_of_handle(self, handle):
    """The variable whose handle _resource_apply_* was given (to find its slots)."""
    return self._handle_vars[handle.name]

  # Non-slot variables (one per graph, e.g. Adam's beta1_power), as TF 1.x.
  def _create_non_slot_variable(self, initial_value, name, colocate_with):
    graph = colocate_with.graph
    key = (name, graph)
    v = self._non_slot_dict.get(key)
    if v is None:
      with ops.colocate_with(colocate_with):
        v = variables.Variable(initial_value, name=name, trainable=False,
                               use_resource=getattr(colocate_with, "_is_resource_variable",
                                                    False))
      self._non_slot_dict[key] = v
    return v

  def _get_non_slot_variable(self, name, graph=None):
    return self._non_slot_dict.get((name, graph or ops.get_default_graph()))

  def _non_slot_variables(self):
    return list(self._non_slot_dict.values())

  # Sparse gradients: duplicate indices are summed first (TF's default), so
  # that a kernel applying rows one at a time sees each row once.
  def _apply_sparse_duplicate_indices(self, grad, var):
    values, indices = _deduplicate_indexed_slices(grad.values, grad.indices)
    return self._apply_sparse(ops.IndexedSlices(values, indices, grad.dense_shape), var)

  def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
    values, indices = _deduplicate_indexed_slices(grad, indices)
    return self._resource_apply_sparse(values, handle, indices)

  # What subclasses implement.
  def _create_slots(self, var_list):
    pass

  def _prepare(self):
    pass

  def _apply_dense(self, grad, var):
    raise NotImplementedError()

  def _apply_sparse(self, grad, var):
    raise NotImplementedError()

  def _resource_apply_dense(self, grad, handle):
    raise NotImplementedError()

  def _resource_apply_sparse(self, grad, handle, indices):
    raise NotImplementedError()

  def _finish(self, update_ops, name_scope):
    return control_flow_ops.group(*update_ops, name=name_scope)

  def variables(self):
    """The optimizer's variables (slots and non-slot variables) of the default graph,
    sorted by name as TF does."""
    graph = ops.get_default_graph()
    out = [v for v in self._non_slot_variables() if v.graph is graph]
    for named in self._slots.values():
      out.extend(v for v in named.values() if v.graph is graph)
    return sorted(out, key=lambda v: v.name)

  @staticmethod
  def _cast_to(value, dtype):
    if isinstance(value, ops.Tensor) and value.dtype.base_dtype == dtype:
      return value
    from recflow.ops import math_ops  # pylint: disable=g-import-not-at-top
    return math_ops.cast(value, dtype)


_TRAINABLE_HASH_TABLES = "recflow_trainable_hash_tables"  # recflow.embedding's collection


def _is_hash_table(v):
  return getattr(v, "_is_hash_table", False)


def _table_step(global_step):
  """The step a table update belongs to: global_step + 1 (the value the global
  step has after this update), or 0 (the table's own clock + 1) without one."""
  if global_step is None:
    return ops.convert_to_tensor(0, dtype=dtypes.int64, name="table_step")
  step = ops.convert_to_tensor(global_step)
  from recflow.ops import gen_ops as gen  # pylint: disable=g-import-not-at-top
  return gen.add_v2(math_ops.cast(step, dtypes.int64),
                    ops.convert_to_tensor(1, dtype=dtypes.int64), name="table_step")


def _deduplicate_indexed_slices(values, indices):
  """Sums the values of repeated indices: (summed values, unique indices)."""
  from recflow.ops import gen_ops as gen  # pylint: disable=g-import-not-at-top
  unique_indices, positions = gen.unique(indices)
  summed = gen.unsorted_segment_sum(values, positions, array_ops.shape(unique_indices)[0])
  return summed, unique_indices


_ = dtypes
