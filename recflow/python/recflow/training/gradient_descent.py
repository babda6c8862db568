"""tf.train.GradientDescentOptimizer: var -= learning_rate * grad."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import gen_ops as gen
from recflow.training import optimizer


class GradientDescentOptimizer(optimizer.Optimizer):
  """Plain gradient descent, with recflow's ApplyGradientDescent kernels (and the
  sparse ones for IndexedSlices gradients of gathers)."""

  def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
    super(GradientDescentOptimizer, self).__init__(use_locking, name)
    self._learning_rate = learning_rate
    self._learning_rate_tensor = None

  _hash_table_kind = "any"  # plain SGD needs no slot: every table

  def _hash_table_apply(self, table, ids, values, step):
    return gen.hash_table_apply_gradient_descent(table.handle, ids, values,
                                                 self._lr(dtypes.float32), step)

  def _prepare(self):
    lr = self._learning_rate() if callable(self._learning_rate) else self._learning_rate
    self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")

  def _lr(self, dtype):
    return self._cast_to(self._learning_rate_tensor, dtype.base_dtype)

  def _apply_dense(self, grad, var):
    return gen.apply_gradient_descent(var, self._lr(var.dtype), grad,
                                      use_locking=self._use_locking).op

  def _resource_apply_dense(self, grad, handle):
    return gen.resource_apply_gradient_descent(handle, self._lr(grad.dtype), grad,
                                               use_locking=self._use_locking)

  # The kernels add repeated rows one after the other, which is what summing
  # them first gives: no deduplication (as TF).
  def _apply_sparse_duplicate_indices(self, grad, var):
    return self._apply_sparse(grad, var)

  def _resource_apply_sparse_duplicate_indices(self, grad, handle, indices):
    return self._resource_apply_sparse(grad, handle, indices)

  def _apply_sparse(self, grad, var):
    return gen.sparse_apply_gradient_descent(var, self._lr(var.dtype), grad.values,
                                             grad.indices, use_locking=self._use_locking).op

  def _resource_apply_sparse(self, grad, handle, indices):
    return gen.resource_sparse_apply_gradient_descent(handle, self._lr(grad.dtype), grad,
                                                      indices, use_locking=self._use_locking)
