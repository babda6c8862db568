"""tf.train.AdamOptimizer (Kingma & Ba), TF 1.x's formulation:

  lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
  m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g^2
  var -= lr_t * m / (sqrt(v) + epsilon)

beta1^t and beta2^t are the non-slot variables "beta1_power" and "beta2_power",
multiplied by beta1/beta2 after each step's updates.
"""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import control_flow_ops
from recflow.ops import gen_ops as gen
from recflow.ops import state_ops
from recflow.training import optimizer


def _call_if_callable(v):
  return v() if callable(v) else v


class AdamOptimizer(optimizer.Optimizer):
  """TF 1.x's AdamOptimizer over recflow's ApplyAdam kernels. Slots "m" and "v"
  (variables "<var>/Adam" and "<var>/Adam_1").

  A sparse (IndexedSlices) gradient updates every row, as TensorFlow's
  AdamOptimizer does (m and v decay everywhere): the gradient is summed into a
  dense one and applied with ApplyAdam. recflow's lazy SparseApplyAdam (touched
  rows only) is tf.raw_ops.SparseApplyAdam.
  """

  def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
               use_locking=False, name="Adam"):
    super(AdamOptimizer, self).__init__(use_locking, name)
    self._lr = learning_rate
    self._beta1 = beta1
    self._beta2 = beta2
    self._epsilon = epsilon
    self._lr_t = self._beta1_t = self._beta2_t = self._epsilon_t = None

  _hash_table_kind = "adam"

  def _hash_table_apply(self, table, ids, values, step):
    # Lazy Adam on the batch's rows; the kernel takes beta^step (t = step) for
    # the bias correction, where dense variables use beta1_power/beta2_power.
    f = dtypes.float32
    return gen.hash_table_apply_adam(table.handle, ids, values, self._cast_to(self._lr_t, f),
                                     self._cast_to(self._beta1_t, f),
                                     self._cast_to(self._beta2_t, f),
                                     self._cast_to(self._epsilon_t, f), step)

  def _get_beta_accumulators(self, graph=None):
    graph = graph or ops.get_default_graph()
    return (self._get_non_slot_variable("beta1_power", graph=graph),
            self._get_non_slot_variable("beta2_power", graph=graph))

  def _create_slots(self, var_list):
    if not var_list:  # only hash tables: their rows hold m and v
      return
    first_var = min(var_list, key=lambda x: x.name)
    self._create_non_slot_variable(initial_value=self._beta1, name="beta1_power",
                                   colocate_with=first_var)
    self._create_non_slot_variable(initial_value=self._beta2, name="beta2_power",
                                   colocate_with=first_var)
    for v in var_list:
      self._zeros_slot(v, "m", self._name)
      self._zeros_slot(v, "v", self._name)

  def _prepare(self):
    self._lr_t = ops.convert_to_tensor(_call_if_callable(self._lr), name="learning_rate")
    self._beta1_t = ops.convert_to_tensor(_call_if_callable(self._beta1), name="beta1")
    self._beta2_t = ops.convert_to_tensor(_call_if_callable(self._beta2), name="beta2")
    self._epsilon_t = ops.convert_to_tensor(_call_if_callable(self._epsilon), name="epsilon")

  def _args(self, dtype, graph):
    dtype = dtype.base_dtype
    beta1_power, beta2_power = self._get_beta_accumulators(graph)
    return [self._cast_to(beta1_power.value(), dtype),
            self._cast_to(beta2_power.value(), dtype),
            self._cast_to(self._lr_t, dtype), self._cast_to(self._beta1_t, dtype),
            self._cast_to(self._beta2_t, dtype), self._cast_to(self._epsilon_t, dtype)]

  def _apply_dense(self, grad, var):
    return gen.apply_adam(var, self.get_slot(var, "m"), self.get_slot(var, "v"),
                          *(self._args(var.dtype, var.graph) + [grad]),
                          use_locking=self._use_locking).op

  def _resource_apply_dense(self, grad, handle):
    var = self._var_of_handle(handle)
    return gen.resource_apply_adam(handle, self.get_slot(var, "m").handle,
                                   self.get_slot(var, "v").handle,
                                   *(self._args(grad.dtype, var.graph) + [grad]),
                                   use_locking=self._use_locking)

  @staticmethod
  def _densify(values, indices, num_rows):
    return gen.unsorted_segment_sum(values, indices, num_rows)

  # Deduplication is part of densifying.
  def _apply_sparse_duplicate_indices(self, grad, var):
    return self._apply_sparse(grad, var)

  def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
    return self._resource_apply_sparse(grad, handle, indices)

  def _apply_sparse(self, grad, var):
    rows = array_ops.shape(var)[0]
    return self._apply_dense(self._densify(grad.values, grad.indices, rows), var)

  def _resource_apply_sparse(self, grad, handle, indices):
    rows = gen.variable_shape(handle)[0]
    return self._resource_apply_dense(self._densify(grad, indices, rows), handle)

  def _finish(self, update_ops, name_scope):
    beta1_power, beta2_power = self._get_beta_accumulators()
    if beta1_power is None:  # only hash tables were updated
      return control_flow_ops.group(*update_ops, name=name_scope)
    with ops.control_dependencies(update_ops):
      with ops.colocate_with(beta1_power):
        update_beta1 = state_ops.assign(beta1_power, beta1_power * self._beta1_t,
                                        use_locking=self._use_locking)
        update_beta2 = state_ops.assign(beta2_power, beta2_power * self._beta2_t,
                                        use_locking=self._use_locking)
    return control_flow_ops.group(*(update_ops + [update_beta1, update_beta2]),
                                  name=name_scope)
