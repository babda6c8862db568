"""tf.saved_model.main_op.main_op: the usual SavedModel main op."""

from recflow.ops import control_flow_ops
from recflow.ops import variables


def main_op():
  """Initializes the local variables (recflow has no lookup tables to
  initialize), grouped as TF's main_op."""
  return control_flow_ops.group(variables.local_variables_initializer())
