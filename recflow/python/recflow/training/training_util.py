"""The global step: get_global_step, create_global_step, get_or_create_global_step."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import init_ops
from recflow.ops import variable_scope


def get_global_step(graph=None):
  graph = graph or ops.get_default_graph()
  steps = graph.get_collection(ops.GraphKeys.GLOBAL_STEP)
  if len(steps) == 1:
    return steps[0]
  if len(steps) > 1:
    raise TypeError("Multiple tensors in global_step collection.")
  try:
    return graph.get_tensor_by_name("global_step:0")
  except KeyError:
    return None


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
