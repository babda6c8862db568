"""tf.train.MomentumOptimizer: accum = momentum * accum + grad; var -= lr * accum
(Nesterov: var -= lr * (grad + momentum * accum))."""

from recflow.framework import ops
from recflow.ops import gen_ops as gen
from recflow.training import optimizer


def _call_if_callable(v):
  return v() if callable(v) else v


class MomentumOptimizer(optimizer.Optimizer):
  """TF 1.x's MomentumOptimizer over recflow's ApplyMomentum kernels. One slot,
  "momentum" (variable "<var>/Momentum")."""

  def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
               use_nesterov=False):
    super(MomentumOptimizer, self).__init__(use_locking, name)
    self._learning_rate = learning_rate
    self._momentum = momentum
    self._use_nesterov = use_nesterov

  def _create_slots(self, var_list):
    for v in var_list:
      self._zeros_slot(v, "momentum", self._name)

  def _prepare(self):
    self._learning_rate_tensor = ops.convert_to_tensor(
        _call_if_callable(self._learning_rate), name="learning_rate")
    self._momentum_tensor = ops.convert_to_tensor(_call_if_callable(self._momentum),
                                                  name="momentum")

  def _hyper(self, dtype):
    return (self._cast_to(self._learning_rate_tensor, dtype.base_dtype),
            self._cast_to(self._momentum_tensor, dtype.base_dtype))

  def _apply_dense(self, grad, var):
    lr, mom = self._hyper(var.dtype)
    return gen.apply_momentum(var, self.get_slot(var, "momentum"), lr, grad, mom,
                              use_locking=self._use_locking,
                              use_nesterov=self._use_nesterov).op

  def _resource_apply_dense(self, grad, handle):
    var = self._var_of_handle(handle)
    lr, mom = self._hyper(grad.dtype)
    return gen.resource_apply_momentum(handle, self.get_slot(var, "momentum").handle, lr, grad,
                                       mom, use_locking=self._use_locking,
                                       use_nesterov=self._use_nesterov)

  def _apply_sparse(self, grad, var):
    lr, mom = self._hyper(var.dtype)
    return gen.sparse_apply_momentum(var, self.get_slot(var, "momentum"), lr, grad.values,
                                     grad.indices, mom, use_locking=self._use_locking,
                                     use_nesterov=self._use_nesterov).op

  def _resource_apply_sparse(self, grad, handle, indices):
    var = self._var_of_handle(handle)
    lr, mom = self._hyper(grad.dtype)
    return gen.resource_sparse_apply_momentum(handle, self.get_slot(var, "momentum").handle, lr,
                                              grad, indices, mom, use_locking=self._use_locking,
                                              use_nesterov=self._use_nesterov)
