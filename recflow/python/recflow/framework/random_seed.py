"""Graph-level and op-level seeds, with TensorFlow 1.x's rules (get_seed)."""

from recflow.framework import ops

DEFAULT_GRAPH_SEED = 87654321
_MAXINT32 = 2**31 - 1


def _truncate_seed(seed):
  return seed % _MAXINT32


def get_seed(op_seed):
  """(graph seed, op seed) for a random op: deterministic when either is set;
  (None, None), i.e. fresh randomness per session, when neither is."""
  graph = ops.get_default_graph()
  global_seed = graph.seed
  if global_seed is not None:
    if op_seed is None:
      op_seed = graph._last_id  # pylint: disable=protected-access
    seeds = _truncate_seed(global_seed), _truncate_seed(op_seed)
  elif op_seed is not None:
    seeds = DEFAULT_GRAPH_SEED, _truncate_seed(op_seed)
  else:
    seeds = None, None
  if seeds == (0, 0):  # (0, 0) would mean "unseeded" to the kernels
    return 0, _MAXINT32
  return seeds


def set_random_seed(seed):
  """Sets the graph-level seed of the default graph."""
  ops.get_default_graph().seed = seed
