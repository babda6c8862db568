"""tf.train.ExponentialMovingAverage and assign_moving_average (TF 1.x's,
without zero debiasing of variables, as TF's apply() does for variables)."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import control_flow_ops
from recflow.ops import math_ops
from recflow.ops import state_ops
from recflow.ops import variables


def assign_moving_average(variable, value, decay, zero_debias=True, name=None):
  """variable -= (1 - decay) * (variable - value); returns the new value."""
  if zero_debias:
    raise NotImplementedError("assign_moving_average(zero_debias=True) is not supported by "
                              "recflow yet; pass zero_debias=False")
  with ops.name_scope(name, "AssignMovingAvg", [variable, value, decay]) as scope:
    if isinstance(value, variables.Variable):
      # A fresh read, ordered by the caller's control dependencies (recflow's
      # reads are snapshots; TF's ref reads happen when the update runs).
      value = value.read_value()
    decay = ops.convert_to_tensor(1.0, dtype=variable.dtype.base_dtype) - math_ops.cast(
        decay, variable.dtype.base_dtype)
    update_delta = (variable - value) * decay
    return state_ops.assign_sub(variable, update_delta, name=scope)


class ExponentialMovingAverage(object):
  """Shadow variables ("<var>/ExponentialMovingAverage") that follow variables:
  shadow -= (1 - decay) * (shadow - var) each time the op apply() returns runs;
  with num_updates, decay is min(decay, (1 + num_updates) / (10 + num_updates))."""

  def __init__(self, decay, num_updates=None, zero_debias=False,
               name="ExponentialMovingAverage"):
    if zero_debias:
      raise NotImplementedError("ExponentialMovingAverage(zero_debias=True) is not supported "
                                "by recflow yet")
    self._decay = decay
    self._num_updates = num_updates
    self._zero_debias = zero_debias
    self._name = name
    self._averages = {}

  @property
  def name(self):
    return self._name

  def apply(self, var_list=None):
    if var_list is None:
      var_list = variables.trainable_variables()
    var_list = list(var_list)
    for var in var_list:
      if var.dtype.base_dtype not in (dtypes.float16, dtypes.float32, dtypes.float64):
        raise TypeError("The variables must be half, float, or double: %s" % var.name)
      if var in self._averages:
        raise ValueError("Moving average already computed for: %s" % var.name)
      if not isinstance(var, variables.Variable):
        raise TypeError("ExponentialMovingAverage.apply: recflow averages variables only, "
                        "not %s" % (var,))
      with ops.init_scope(), ops.name_scope(None), ops.colocate_with(var.op):
        avg = variables.Variable(var.initial_value, name=var.op.name + "/" + self._name,
                                 trainable=False,
                                 use_resource=getattr(var, "_is_resource_variable", False))
      ops.add_to_collection(ops.GraphKeys.MOVING_AVERAGE_VARIABLES, var)
      self._averages[var] = avg
    with ops.name_scope(self._name) as scope:
      decay = ops.convert_to_tensor(self._decay, name="decay")
      if self._num_updates is not None:
        num_updates = math_ops.cast(self._num_updates, dtypes.float32, name="num_updates")
        decay = math_ops.minimum(decay, (1.0 + num_updates) / (10.0 + num_updates))
      updates = [assign_moving_average(self._averages[var], var, decay, zero_debias=False)
                 for var in var_list]
      return control_flow_ops.group(*updates, name=scope)

  def average(self, var):
    return self._averages.get(var)

  def average_name(self, var):
    if var in self._averages:
      return self._averages[var].op.name
    return var.op.name + "/" + self._name

  def variables_to_restore(self, moving_avg_variables=None):
    """{checkpoint name: variable} restoring each averaged variable from its
    shadow's name and every other global variable from its own."""
    name_map = {}
    if moving_avg_variables is None:
      moving_avg_variables = (variables.trainable_variables() +
                              variables.moving_average_variables())
    moving_avg_variables = list(moving_avg_variables)
    for v in moving_avg_variables:
      name_map[self.average_name(v)] = v
    averaged = set(id(v) for v in moving_avg_variables)
    for v in variables.global_variables():
      if id(v) not in averaged and v.op.name not in name_map:
        name_map[v.op.name] = v
    return name_map
