"""tf.train.init_from_checkpoint: variables whose initializers restore their
values from a checkpoint (TF 1.x's assignment_map rules)."""

import logging

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import gen_ops as gen
from recflow.ops import state_ops
from recflow.ops import variable_scope
from recflow.ops import variables
from recflow.training import py_checkpoint_reader

_logger = logging.getLogger("recflow")


def _store_vars():
  return dict(variable_scope._get_default_variable_store()._vars)  # pylint: disable=protected-access


def _set_checkpoint_initializer(variable, ckpt_file, tensor_name):
  """Makes variable's initializer an assignment of tensor_name read from ckpt_file."""
  with ops.init_scope(), ops.name_scope(None):
    restore_op = gen.restore_v2(constant_op.constant(ckpt_file, dtype=dtypes.string),
                                constant_op.constant([tensor_name], dtype=dtypes.string),
                                constant_op.constant([""], dtype=dtypes.string),
                                dtypes=[variable.dtype.base_dtype],
                                name="checkpoint_initializer")
    if not isinstance(restore_op, ops.Tensor):
      restore_op = restore_op[0]
    restore_op.set_shape(variable.get_shape())
    if getattr(variable, "_is_resource_variable", False):
      init_op = gen.assign_variable_op(variable.handle, restore_op)
    else:
      init_op = state_ops.assign(variable, restore_op).op
  variable._initializer_op = init_op  # pylint: disable=protected-access
  variable._initial_value = restore_op  # pylint: disable=protected-access


def init_from_checkpoint(ckpt_dir_or_file, assignment_map):
  """Replaces the initializers of the variables named in assignment_map with
  restores from the checkpoint. Keys are checkpoint names or scopes ("old/");
  values are variables, variable names or scopes ("new/"); "/" is the root."""
  reader = py_checkpoint_reader.load_checkpoint(ckpt_dir_or_file)
  ckpt_file = py_checkpoint_reader._get_checkpoint_filename(ckpt_dir_or_file)  # pylint: disable=protected-access
  variable_map = reader.get_variable_to_shape_map()
  store_vars = _store_vars()
  for var in variables.global_variables():
    store_vars.setdefault(var.op.name, var)
  for tensor_name_in_ckpt, current in sorted(assignment_map.items(), key=lambda x: x[0]):
    var = None
    if isinstance(current, variables.Variable):
      var = current
    elif isinstance(current, str) and current in store_vars:
      var = store_vars[current]
    elif not isinstance(current, str):
      raise TypeError("Unsupported assignment_map value %r (a variable or a name)" % (current,))
    if var is not None:
      if tensor_name_in_ckpt not in variable_map:
        raise ValueError("Tensor %s is not found in %s checkpoint %s" %
                         (tensor_name_in_ckpt, ckpt_dir_or_file, variable_map))
      if not var.get_shape().is_compatible_with(variable_map[tensor_name_in_ckpt]):
        raise ValueError("Shape of variable %s (%s) doesn't match with shape of tensor %s (%s)"
                         " from checkpoint reader." %
                         (var.name, var.get_shape(), tensor_name_in_ckpt,
                          variable_map[tensor_name_in_ckpt]))
      _logger.debug("Initialize variable %s from checkpoint %s with %s", var.op.name,
                    ckpt_dir_or_file, tensor_name_in_ckpt)
      _set_checkpoint_initializer(var, ckpt_file, tensor_name_in_ckpt)
      continue
    scopes = current[:current.rindex("/")] if "/" in current else ""
    if not tensor_name_in_ckpt.endswith("/"):
      raise ValueError("Assignment map with scope only name {} should map to scope only {}. "
                       "Should be 'scope/': 'other_scope/'.".format(scopes,
                                                                    tensor_name_in_ckpt))
    for var_name, var in sorted(store_vars.items()):
      if scopes and not var_name.startswith(scopes + "/"):
        continue
      full_tensor_name = var_name[len(scopes):] if scopes else var_name
      if full_tensor_name != var_name:
        full_tensor_name = full_tensor_name[1:]
      if tensor_name_in_ckpt != "/":
        full_tensor_name = tensor_name_in_ckpt + full_tensor_name
      if full_tensor_name not in variable_map:
        raise ValueError("Tensor %s (%s in %s) is not found in %s checkpoint" %
                         (full_tensor_name, var_name[len(scopes) + 1:], tensor_name_in_ckpt,
                          ckpt_dir_or_file))
      _set_checkpoint_initializer(var, ckpt_file, full_tensor_name)
