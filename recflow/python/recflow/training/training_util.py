"""The global step: get_global_step, create_global_step, get_or_create_global_step."""

import logging

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import init_ops
from recflow.ops import variable_scope


def get_global_step(graph=None):
  """The global step variable (the GLOBAL_STEP collection's one, else the tensor
  "global_step:0"), or None; several in the collection: None, logged as TF does."""
  graph = graph or ops.get_default_graph()
  steps = graph.get_collection(ops.GraphKeys.GLOBAL_STEP)
  if len(steps) == 1:
    step = steps[0]
  elif not steps:
    try:
      step = graph.get_tensor_by_name("global_step:0")
    except KeyError:
      return None
  else:
    logging.getLogger("recflow").error("Multiple tensors in global_step collection.")
    return None
  assert_global_step(step)
  return step


def assert_global_step(global_step_tensor):
  """TypeError unless global_step_tensor is an integer scalar Variable or Tensor."""
  from recflow.ops import variables  # pylint: disable=g-import-not-at-top
  if not isinstance(global_step_tensor, (variables.Variable, ops.Tensor)):
    raise TypeError("Existing \"global_step\" must be a Variable or Tensor: %s." %
                    global_step_tensor)
  if not global_step_tensor.dtype.base_dtype.is_integer:
    raise TypeError("Existing \"global_step\" does not have integer type: %s" %
                    global_step_tensor.dtype)
  shape = global_step_tensor.get_shape()
  if shape.ndims != 0 and shape.is_fully_defined():
    raise TypeError("Existing \"global_step\" is not scalar: %s" % shape)


def create_global_step(graph=None):
  graph = graph or ops.get_default_graph()
  if get_global_step(graph) is not None:
    raise ValueError("\"global_step\" already exists.")
  with graph.as_default(), ops.name_scope(None):
    return variable_scope.get_variable(
        ops.GraphKeys.GLOBAL_STEP, shape=[], dtype=dtypes.int64,
        initializer=init_ops.zeros_initializer(), trainable=False,
        collections=[ops.GraphKeys.GLOBAL_VARIABLES, ops.GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph=None):
  graph = graph or ops.get_default_graph()
  step = get_global_step(graph)
  return step if step is not None else create_global_step(graph)


def global_step(sess, global_step_tensor):
  return int(sess.run(global_step_tensor))
