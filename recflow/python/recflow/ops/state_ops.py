"""Ops on TF 1.x reference variables (VariableV2): assign, assign_add, assign_sub."""

from recflow.framework import ops
from recflow.ops import gen_ops as gen


def variable_op_v2(shape, dtype, name="Variable", container="", shared_name=""):
  return gen.variable_v2(shape=shape, dtype=dtype, name=name, container=container,
                         shared_name=shared_name)


def _is_ref_variable(ref):
  return hasattr(ref, "_ref") and not getattr(ref, "_is_resource_variable", False)


def assign(ref, value, validate_shape=None, use_locking=None, name=None):
  """ref = value; returns the variable's new value (a ref tensor)."""
  if getattr(ref, "_is_resource_variable", False):
    return ref.assign(value, use_locking=use_locking, name=name)
  kwargs = {}
  if validate_shape is not None:
    kwargs["validate_shape"] = validate_shape
  if use_locking is not None:
    kwargs["use_locking"] = use_locking
  return gen.assign(ref, value, name=name, **kwargs)


def assign_add(ref, value, use_locking=None, name=None):
  if getattr(ref, "_is_resource_variable", False):
    return ref.assign_add(value, use_locking=use_locking, name=name)
  return gen.assign_add(ref, value, use_locking=bool(use_locking), name=name)


def assign_sub(ref, value, use_locking=None, name=None):
  if getattr(ref, "_is_resource_variable", False):
    return ref.assign_sub(value, use_locking=use_locking, name=name)
  return gen.assign_sub(ref, value, use_locking=bool(use_locking), name=name)


def is_variable_initialized(ref, name=None):
  raise NotImplementedError("tf.is_variable_initialized: recflow has no IsVariableInitialized "
                            "op yet")
