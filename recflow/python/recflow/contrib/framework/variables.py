"""Variable helpers of tf.contrib.framework (TF-slim's `slim.variable`, `slim.model_variable`,
`slim.get_variables_to_restore`, `slim.assign_from_checkpoint_fn`, ...).

A model variable is a global variable also in the MODEL_VARIABLES collection: the
parameters of the model (weights, biases, batch-norm statistics) as opposed to
training state such as the global step or optimizer slots. Both `variable` and
`model_variable` take arg_scope arguments, `device` among them, which is how
model_deploy places variables on ps tasks.
"""

import re

from recflow.contrib.framework.arg_scope import add_arg_scope
from recflow.framework import ops
from recflow.ops import variable_scope as vs
from recflow.ops import variables as variables_lib
from recflow.training import saver as saver_lib
from recflow.training import py_checkpoint_reader
from recflow.training.training_util import (assert_global_step, create_global_step,  # pylint: disable=unused-import
                                            get_global_step, get_or_create_global_step)

__all__ = ["add_model_variable", "assert_global_step", "assign_from_checkpoint_fn",
           "create_global_step", "get_global_step", "get_local_variables",
           "get_model_variables", "get_or_create_global_step", "get_trainable_variables",
           "get_unique_variable", "get_variables", "get_variables_by_name",
           "get_variables_by_suffix", "get_variables_to_restore", "local_variable",
           "model_variable", "variable", "VariableDeviceChooser", "filter_variables"]


def local_variable(initial_value, validate_shape=True, name=None, use_resource=None):
  """A variable in LOCAL_VARIABLES (not saved, initialized by the local init op)."""
  del use_resource
  return variables_lib.Variable(initial_value, trainable=False,
                                collections=[ops.GraphKeys.LOCAL_VARIABLES],
                                validate_shape=validate_shape, name=name)


@add_arg_scope
def variable(name, shape=None, dtype=None, initializer=None, regularizer=None, trainable=True,
             collections=None, caching_device=None, device=None, partitioner=None,
             custom_getter=None, use_resource=None, synchronization=None, aggregation=None):
  """tf.get_variable on `device` (a string or a function of the op), in `collections`
  (GLOBAL_VARIABLES by default) and TRAINABLE_VARIABLES when trainable."""
  del synchronization, aggregation
  collections = list(collections if collections is not None
                     else [ops.GraphKeys.GLOBAL_VARIABLES])
  if ops.GraphKeys.GLOBAL_VARIABLES not in collections and \
     ops.GraphKeys.LOCAL_VARIABLES not in collections:
    collections.append(ops.GraphKeys.GLOBAL_VARIABLES)
  collections = list(dict.fromkeys(collections))
  with ops.device(device if device is not None else ""):
    return vs.get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                           regularizer=regularizer, trainable=trainable,
                           collections=collections, caching_device=caching_device,
                           partitioner=partitioner, custom_getter=custom_getter,
                           use_resource=use_resource)


@add_arg_scope
def model_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                   trainable=True, collections=None, caching_device=None, device=None,
                   partitioner=None, custom_getter=None, use_resource=None,
                   synchronization=None, aggregation=None):
  """`variable`, also added to MODEL_VARIABLES."""
  collections = list(collections or []) + [ops.GraphKeys.GLOBAL_VARIABLES,
                                           ops.GraphKeys.MODEL_VARIABLES]
  return variable(name, shape=shape, dtype=dtype, initializer=initializer,
                  regularizer=regularizer, trainable=trainable, collections=collections,
                  caching_device=caching_device, device=device, partitioner=partitioner,
                  custom_getter=custom_getter, use_resource=use_resource,
                  synchronization=synchronization, aggregation=aggregation)


def add_model_variable(var):
  if var not in ops.get_collection(ops.GraphKeys.MODEL_VARIABLES):
    ops.add_to_collection(ops.GraphKeys.MODEL_VARIABLES, var)


def _op_name(v):
  return v.op.name


def get_variables(scope=None, suffix=None, collection=ops.GraphKeys.GLOBAL_VARIABLES):
  """The variables of `collection` whose names start with scope (a string or a
  VariableScope) and, given a suffix, end with it."""
  if isinstance(scope, vs.VariableScope):
    scope = scope.name
  if suffix is not None:
    if ":" not in suffix:
      suffix += ":"
    scope = (scope or "") + ".*" + suffix
  return ops.get_collection(collection, scope)


def get_model_variables(scope=None, suffix=None):
  return get_variables(scope, suffix, ops.GraphKeys.MODEL_VARIABLES)


def get_local_variables(scope=None, suffix=None):
  return get_variables(scope, suffix, ops.GraphKeys.LOCAL_VARIABLES)


def get_trainable_variables(scope=None, suffix=None):
  return get_variables(scope, suffix, ops.GraphKeys.TRAINABLE_VARIABLES)


def get_variables_to_restore(include=None, exclude=None):
  """The global variables under one of the `include` scopes (all when None) and under none
  of the `exclude` scopes, e.g. everything but the logits layer to fine-tune a net."""
  if include is None:
    candidates = get_variables()
  else:
    if not isinstance(include, (list, tuple)):
      raise TypeError("include is provided but is not a list or a tuple.")
    candidates = []
    for scope in include:
      candidates += get_variables(scope)
  excluded = []
  if exclude is not None:
    if not isinstance(exclude, (list, tuple)):
      raise TypeError("exclude is provided but is not a list or a tuple.")
    for scope in exclude:
      excluded += get_variables(scope)
  return [v for v in candidates if v not in excluded]


def get_variables_by_suffix(suffix, scope=None):
  return get_variables(scope=scope, suffix=suffix)


def get_variables_by_name(given_name, scope=None):
  """The variables whose last name component is given_name."""
  suffix = "/" + given_name + ":|^" + given_name + ":"
  return get_variables(scope=scope, suffix=suffix)


def get_unique_variable(var_op_name):
  """The one variable named var_op_name; ValueError when there is none or several."""
  candidates = [v for v in get_variables(scope=var_op_name) if _op_name(v) == var_op_name]
  if not candidates:
    raise ValueError("Couldn't find variable %s" % var_op_name)
  if len(candidates) > 1:
    raise ValueError("Variable %s does not uniquely identify a variable" % var_op_name)
  return candidates[0]


def filter_variables(var_list, include_patterns=None, exclude_patterns=None,
                     reg_search=True):
  """The variables of var_list whose names match an include pattern (all when None) and no
  exclude pattern; re.search (reg_search) or re.match."""
  match = re.search if reg_search else re.match
  out = []
  for v in var_list:
    name = _op_name(v)
    if include_patterns is not None and not any(match(p, name) for p in include_patterns):
      continue
    if exclude_patterns is not None and any(match(p, name) for p in exclude_patterns):
      continue
    out.append(v)
  return out


def assign_from_checkpoint_fn(model_path, var_list, ignore_missing_vars=False,
                              reshape_variables=False):
  """A function of a session restoring var_list (a list, or a dict from checkpoint name to
  variable) from model_path; with ignore_missing_vars, variables the checkpoint lacks are
  skipped (with a warning) rather than an error; reshape_variables restores a checkpoint
  tensor into a variable of another shape with as many elements. Returns None when nothing is left to
  restore."""
  if not var_list:
    raise ValueError("var_list cannot be empty")
  if isinstance(var_list, (list, tuple)):
    var_list = {_op_name(v): v for v in var_list}
  if ignore_missing_vars:
    reader = py_checkpoint_reader.NewCheckpointReader(model_path)
    kept = {}
    for name, v in var_list.items():
      if reader.has_tensor(name):
        kept[name] = v
      else:
        import logging  # pylint: disable=import-outside-toplevel
        logging.getLogger("recflow").warning("Variable %s missing in checkpoint %s", name,
                                             model_path)
    var_list = kept
  if not var_list:
    return None
  saver = saver_lib.Saver(var_list, reshape=reshape_variables)

  def callback(session):
    saver.restore(session, model_path)
  return callback


class VariableDeviceChooser(object):
  """A device function placing variables round robin on num_tasks ps tasks
  (/job:<job_name>/task:<i>), other ops on device_type:device_index."""

  def __init__(self, num_tasks=0, job_name="ps", device_type="CPU", device_index=0,
               replica=None):
    self._job_name = job_name
    self._device_type = device_type
    self._device_index = device_index
    self._replica = replica
    self._num_tasks = num_tasks
    self._next_task_id = 0

  def __call__(self, op):
    device_spec = ops.DeviceSpec(replica=self._replica, device_type=self._device_type,
                                 device_index=self._device_index)
    if self._num_tasks > 0:
      task_id = self._next_task_id
      self._next_task_id = (self._next_task_id + 1) % self._num_tasks
      device_spec = ops.DeviceSpec(job=self._job_name, replica=self._replica, task=task_id,
                                   device_type=self._device_type,
                                   device_index=self._device_index)
    return device_spec.to_string()
