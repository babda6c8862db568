"""Grouping and control dependencies (tf.group, tf.tuple, tf.no_op).

recflow has no control-flow ops (Switch/Merge/Enter/Exit), so tf.cond,
tf.case and tf.while_loop raise NotImplementedError saying so.
"""

import builtins

from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen


def no_op(name=None):
  return gen.no_op(name=name)


def _flatten(inputs):
  for x in inputs:
    if isinstance(x, (list, builtins.tuple)):
      for y in _flatten(x):
        yield y
    elif x is not None:
      yield x


def group(*inputs, **kwargs):
  """An op that runs after every input (ops or tensors, nested lists allowed)."""
  name = kwargs.pop("name", None)
  if kwargs:
    raise TypeError("Unknown keyword arguments: " + ", ".join(kwargs.keys()))
  inputs = list(_flatten(inputs))
  with ops.name_scope(name, "group_deps", inputs) as name:
    if not inputs:
      return no_op(name=name)
    deps = []
    for x in inputs:
      if isinstance(x, ops.Operation):
        deps.append(x)
      else:
        el = ops.get_default_graph().as_graph_element(x)
        deps.append(el.op if isinstance(el, ops.Tensor) else el)
    with ops.control_dependencies(deps):
      return no_op(name=name)


def tuple(tensors, name=None, control_inputs=None):  # pylint: disable=redefined-builtin
  """The tensors, each available only after all of them (and control_inputs) are."""
  with ops.name_scope(name, "tuple", tensors) as name:
    tensors = [t if t is None else ops.convert_to_tensor(t) for t in tensors]
    gating = [t.op for t in tensors if t is not None] + list(control_inputs or [])
    gate = group(*gating)
    out = []
    with ops.control_dependencies([gate]):
      for t in tensors:
        out.append(None if t is None else array_ops.identity(t))
    return out


def with_dependencies(dependencies, output_tensor, name=None):
  with ops.name_scope(name, "control_dependency", list(dependencies) + [output_tensor]) as name:
    with ops.control_dependencies(dependencies):
      return array_ops.identity(ops.convert_to_tensor(output_tensor), name=name)


def _no_control_flow(what):
  def fn(*args, **kwargs):
    raise NotImplementedError(
        "%s: recflow has no control-flow ops (Switch/Merge/Enter/Exit) yet, so graphs cannot "
        "branch or loop. Compute both branches and pick with tf.where, or unroll the loop in "
        "Python (docs/python.md, What is missing)." % what)
  fn.__name__ = what.split(".")[-1]
  return fn


cond = _no_control_flow("tf.cond")
case = _no_control_flow("tf.case")
while_loop = _no_control_flow("tf.while_loop")
