"""tf.train.FtrlOptimizer: FTRL-proximal (McMahan et al. 2013), TF 1.x's
formulation, with optional online L2 shrinkage (ApplyFtrlV2)."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import gen_ops as gen
from recflow.training import optimizer


class FtrlOptimizer(optimizer.Optimizer):
  """TF 1.x's FtrlOptimizer over recflow's ApplyFtrl / ApplyFtrlV2 kernels. Slots
  "accum" (initial_accumulator_value, variable "<var>/Ftrl") and "linear" (zeros,
  "<var>/Ftrl_1")."""

  def __init__(self, learning_rate, learning_rate_power=-0.5, initial_accumulator_value=0.1,
               l1_regularization_strength=0.0, l2_regularization_strength=0.0,
               use_locking=False, name="Ftrl", accum_name=None, linear_name=None,
               l2_shrinkage_regularization_strength=0.0):
    super(FtrlOptimizer, self).__init__(use_locking, name)
    if initial_accumulator_value < 0.0:
      raise ValueError("initial_accumulator_value %f needs to be positive or zero" %
                       initial_accumulator_value)
    if learning_rate_power > 0.0:
      raise ValueError("learning_rate_power %f needs to be negative or zero" %
                       learning_rate_power)
    if l1_regularization_strength < 0.0:
      raise ValueError("l1_regularization_strength %f needs to be positive or zero" %
                       l1_regularization_strength)
    if l2_regularization_strength < 0.0:
      raise ValueError("l2_regularization_strength %f needs to be positive or zero" %
                       l2_regularization_strength)
    if l2_shrinkage_regularization_strength < 0.0:
      raise ValueError("l2_shrinkage_regularization_strength %f needs to be positive or zero" %
                       l2_shrinkage_regularization_strength)
    self._learning_rate = learning_rate
    self._learning_rate_power = learning_rate_power
    self._initial_accumulator_value = initial_accumulator_value
    self._l1_regularization_strength = l1_regularization_strength
    self._l2_regularization_strength = l2_regularization_strength
    self._l2_shrinkage_regularization_strength = l2_shrinkage_regularization_strength
    self._accum_name = accum_name
    self._linear_name = linear_name

  _hash_table_kind = "ftrl"

  def _hash_table_apply(self, table, ids, values, step):
    c = lambda t: self._cast_to(t, dtypes.float32)
    return gen.hash_table_apply_ftrl(table.handle, ids, values, c(self._learning_rate_tensor),
                                     c(self._l1_tensor), c(self._l2_tensor),
                                     c(self._l2_shrinkage_tensor),
                                     c(self._learning_rate_power_tensor), step)

  def _create_slots(self, var_list):
    for v in var_list:
      self._filled_slot(v, self._initial_accumulator_value, "accum", self._accum_name or self._name)
      self._zeros_slot(v, "linear", self._linear_name or self._name)

  def _prepare(self):
    lr = self._learning_rate() if callable(self._learning_rate) else self._learning_rate
    self._learning_rate_tensor = ops.convert_to_tensor(lr, name="learning_rate")
    self._l1_tensor = ops.convert_to_tensor(self._l1_regularization_strength,
                                            name="l1_regularization_strength")
    self._l2_tensor = ops.convert_to_tensor(self._l2_regularization_strength,
                                            name="l2_regularization_strength")
    self._l2_shrinkage_tensor = ops.convert_to_tensor(
        self._l2_shrinkage_regularization_strength,
        name="l2_shrinkage_regularization_strength")
    self._learning_rate_power_tensor = ops.convert_to_tensor(self._learning_rate_power,
                                                             name="learning_rate_power")

  def _hyper(self, dtype):
    dtype = dtype.base_dtype
    c = lambda t: self._cast_to(t, dtype)
    if self._l2_shrinkage_regularization_strength <= 0.0:
      return [c(self._learning_rate_tensor), c(self._l1_tensor), c(self._l2_tensor),
              c(self._learning_rate_power_tensor)]
    return [c(self._learning_rate_tensor), c(self._l1_tensor), c(self._l2_tensor),
            c(self._l2_shrinkage_tensor), c(self._learning_rate_power_tensor)]

  def _v2(self):
    return self._l2_shrinkage_regularization_strength > 0.0

  def _apply_dense(self, grad, var):
    fn = gen.apply_ftrl_v2 if self._v2() else gen.apply_ftrl
    return fn(var, self.get_slot(var, "accum"), self.get_slot(var, "linear"), grad,
              *self._hyper(var.dtype), use_locking=self._use_locking).op

  def _resource_apply_dense(self, grad, handle):
    var = self._var_of_handle(handle)
    fn = gen.resource_apply_ftrl_v2 if self._v2() else gen.resource_apply_ftrl
    return fn(handle, self.get_slot(var, "accum").handle, self.get_slot(var, "linear").handle,
              grad, *self._hyper(grad.dtype), use_locking=self._use_locking)

  def _apply_sparse(self, grad, var):
    fn = gen.sparse_apply_ftrl_v2 if self._v2() else gen.sparse_apply_ftrl
    return fn(var, self.get_slot(var, "accum"), self.get_slot(var, "linear"), grad.values,
              grad.indices, *self._hyper(var.dtype), use_locking=self._use_locking).op

  def _resource_apply_sparse(self, grad, handle, indices):
    var = self._var_of_handle(handle)
    fn = gen.resource_sparse_apply_ftrl_v2 if self._v2() else gen.resource_sparse_apply_ftrl
    return fn(handle, self.get_slot(var, "accum").handle, self.get_slot(var, "linear").handle,
              grad, indices, *self._hyper(grad.dtype), use_locking=self._use_locking)
