"""tf.train.AdagradOptimizer: accum += grad^2; var -= lr * grad / sqrt(accum)."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import gen_ops as gen
from recflow.training import optimizer


class AdagradOptimizer(optimizer.Optimizer):
  """TF 1.x's AdagradOptimizer over recflow's ApplyAdagrad kernels. One slot,
  "accumulator" (variable "<var>/Adagrad"), starting at initial_accumulator_value."""

  def __init__(self, learning_rate, initial_accumulator_value=0.1, use_locking=False,
               name="Adagrad"):
    if initial_accumulator_value <= 0.0:
      raise ValueError("initial_accumulator_value must be positive: %s" %
                       initial_accumulator_value)
    super(AdagradOptimizer, self).__init__(use_locking, name)
    self._learning_rate = learning_rate
    self._initial_accumulator_value = initial_accumulator_value
    self._learning_rate_tensor = None

  _hash_table_kind = "adagrad"

  def _hash_table_apply(self, table, ids, values, step):
    # epsilon 0: TF 1's rule (ApplyAdagrad); the table's own
    # initial_accumulator_value started its accumulators.
    return gen.hash_table_apply_adagrad(table.handle, ids, values, self._lr(dtypes.float32),
                                        ops.convert_to_tensor(0.0, dtype=dtypes.float32), step)

  def _create_slots(self, var_list):
    for v in var_list:
      self._filled_slot(v, self._initial_accumulator_value, "accumulator", self._name)

  def _prepare(self):
    lr = self._learning_rate() if callable(self._learning_rate) else self._learning_rate
    self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")

  def _lr(self, dtype):
    return self._cast_to(self._learning_rate_tensor, dtype.base_dtype)

  def _apply_dense(self, grad, var):
    return gen.apply_adagrad(var, self.get_slot(var, "accumulator"), self._lr(var.dtype), grad,
                             use_locking=self._use_locking).op

  def _resource_apply_dense(self, grad, handle):
    acc = self.get_slot(self._var_of_handle(handle), "accumulator")
    return gen.resource_apply_adagrad(handle, acc.handle, self._lr(grad.dtype), grad,
                                      use_locking=self._use_locking)

  def _apply_sparse(self, grad, var):
    return gen.sparse_apply_adagrad(var, self.get_slot(var, "accumulator"), self._lr(var.dtype),
                                    grad.values, grad.indices, use_locking=self._use_locking).op

  def _resource_apply_sparse(self, grad, handle, indices):
    acc = self.get_slot(self._var_of_handle(handle), "accumulator")
    return gen.resource_sparse_apply_adagrad(handle, acc.handle, self._lr(grad.dtype), grad,
                                             indices, use_locking=self._use_locking)
