"""tf.gradients: symbolic differentiation over the Python graph.

TensorFlow 1.x's algorithm: find the ops on a path from some x to some y,
walk them from the ys backwards in dependency order, sum the gradients of
outputs that fan out (AddN; IndexedSlices are concatenated while every
contribution is sparse), and call each op's gradient function under the name
scope "<op name>_grad". The function is looked up first in the Python
registry (tf.RegisterGradient / ops.RegisterGradient, which also honours
Graph.gradient_override_map) and then in recflow's C++ registry
(ops/*_grad.cc); a C++ sparse gradient function (gathers, embedding bags)
returns IndexedSlices, as TensorFlow's Python ones do. Ops registered as not
differentiable, tf.stop_gradient and `stop_gradients` stop the flow; an op on
a path with no gradient at all is a LookupError naming it.
"""

import collections

from recflow import _pywrap
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


def _as_list(x):
  if x is None:
    return []
  return list(x) if isinstance(x, (list, tuple)) else [x]


def _is_trainable(tensor):
  dtype = tensor.dtype.base_dtype
  return dtype.is_floating or dtype.is_complex or dtype in (dtypes.resource, dtypes.variant)


def _is_stop_gradient(op):
  if op._is_stop_gradient is None:  # pylint: disable=protected-access
    op._is_stop_gradient = (op.type == "Identity" and  # pylint: disable=protected-access
                            "_stop_gradient" in op._attr_names())  # pylint: disable=protected-access
  return op._is_stop_gradient  # pylint: disable=protected-access


def _cc_gradient(op, out_grads):
  """Runs recflow's C++ gradient function for `op`."""
  graph = op.graph
  pairs = []
  for g in out_grads:
    if isinstance(g, ops.IndexedSlices):
      g = ops.convert_to_tensor(g)
    pairs.append(g._as_tf_output())  # pylint: disable=protected-access
  results = graph._c_graph.cc_gradient(op._id, pairs, graph.get_name_scope(), True)  # pylint: disable=protected-access
  graph._sync()  # pylint: disable=protected-access
  out = []
  for r in results:
    if r is None:
      out.append(None)
    elif r[0] == "sparse":
      values, indices, dense_shape = (graph._op_by_id(i).outputs[k] for i, k in r[1:])  # pylint: disable=protected-access
      out.append(ops.IndexedSlices(values, indices, dense_shape))
    else:
      out.append(graph._op_by_id(r[0]).outputs[r[1]])  # pylint: disable=protected-access
  return out


_NO_GRADIENT = object()


def _gradient_function(op):
  """(kind, fn): ("python", f), ("cc", None), or (None, None) for no gradient."""
  if _is_stop_gradient(op):
    return None, None
  try:
    fn = ops.get_gradient_function(op)
  except KeyError:
    fn = _NO_GRADIENT
  if fn is None:
    return None, None
  if fn is not _NO_GRADIENT:
    return "python", fn
  if ops.gradient_op_type(op) != op.type:
    # gradient_override_map names Python gradients; recflow's C++ ones cannot be overridden.
    raise LookupError("No gradient defined for operation '%s' (op type: %s; "
                      "gradient_override_map names '%s', which has no Python gradient "
                      "registered)" % (op.name, op.type, ops.gradient_op_type(op)))
  kind = _pywrap.cc_gradient_kind(op.type)
  if kind == "dense":
    return "cc", None
  if kind == "none":
    return None, None
  raise LookupError("No gradient defined for operation '%s' (op type: %s)" % (op.name, op.type))


def _mark_reached(from_ops):
  reached = set()
  queue = collections.deque(from_ops)
  while queue:
    op = queue.popleft()
    if op._id in reached:  # pylint: disable=protected-access
      continue
    reached.add(op._id)  # pylint: disable=protected-access
    for output in op.outputs:
      queue.extend(output.consumers())
  return reached


def _pending_count(to_ops, from_ops):
  reached = _mark_reached(from_ops)
  reachable_to_ops = set(op._id for op in to_ops if op._id in reached)  # pylint: disable=protected-access
  between = set()
  between_list = []
  queue = collections.deque(to_ops)
  while queue:
    op = queue.popleft()
    if op._id in reached:  # pylint: disable=protected-access
      between.add(op._id)  # pylint: disable=protected-access
      between_list.append(op)
      reached.remove(op._id)  # pylint: disable=protected-access
      for inp in op.inputs:
        queue.append(inp.op)
  pending = collections.defaultdict(int)
  for op in between_list:
    for x in op.inputs:
      if x.op._id in between:  # pylint: disable=protected-access
        pending[x.op._id] += 1  # pylint: disable=protected-access
  return reachable_to_ops, pending


def _set_grad(grads, t, grad):
  op_grads = grads.get(t.op._id)  # pylint: disable=protected-access
  if op_grads is None:
    op_grads = [[] for _ in t.op.outputs]
    grads[t.op._id] = op_grads  # pylint: disable=protected-access
  op_grads[t.value_index].append(grad)


def _aggregate(grad_list):
  if not grad_list:
    return None
  if len(grad_list) == 1:
    return grad_list[0]
  if all(isinstance(g, ops.IndexedSlices) for g in grad_list):
    values = array_ops.concat([g.values for g in grad_list], 0)
    indices = array_ops.concat([math_ops.cast(g.indices, dtypes.int64) for g in grad_list], 0)
    return ops.IndexedSlices(values, indices, grad_list[0].dense_shape)
  dense = [ops.convert_to_tensor(g) for g in grad_list]
  return math_ops.add_n(dense)


def _aggregated_grads(grads, op):
  out = grads.get(op._id)  # pylint: disable=protected-access
  if out is None:
    return [None] * len(op.outputs)
  for i, grad_list in enumerate(out):
    out[i] = [_aggregate(grad_list)] if len(grad_list) > 1 else grad_list
  return [g[0] if g else None for g in out]


def _default_grad_ys(grad_ys, ys):
  out = []
  for i, (y, grad_y) in enumerate(zip(ys, grad_ys)):
    if grad_y is None:
      if y.dtype.is_complex:
        raise TypeError("Gradients of complex tensors must set grad_ys (y.dtype = %r)" %
                        y.dtype)
      with ops.name_scope("grad_ys_%d" % i) as scope:
        one = ops.convert_to_tensor(1, dtype=y.dtype.base_dtype)
        out.append(gen.fill(array_ops.shape(y), one, name=scope))
      continue
    if isinstance(grad_y, ops.IndexedSlices):
      out.append(grad_y)
      continue
    grad_y = ops.convert_to_tensor(grad_y, name="grad_ys_%d" % i)
    if grad_y.dtype.base_dtype != y.dtype.base_dtype:
      raise TypeError("Gradient type %s generated for tensor %s with type %s must be the same "
                      "type" % (grad_y.dtype.name, y.name, y.dtype.name))
    out.append(grad_y)
  return out


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
              gate_gradients=False, aggregation_method=None, stop_gradients=None,
              unconnected_gradients="none"):
  """The symbolic derivatives of sum(ys) with respect to each x in xs.

  Returns one entry per x: a Tensor, IndexedSlices (a gather's sparse
  gradient), or None when x does not reach any y (or, with
  unconnected_gradients="zero", zeros).
  """
  ys = _as_list(ys)
  xs = _as_list(xs)
  stop_gradients = _as_list(stop_gradients)
  grad_ys = [None] * len(ys) if grad_ys is None else _as_list(grad_ys)
  if len(grad_ys) != len(ys):
    raise ValueError("Passed %d grad_ys for %d ys" % (len(grad_ys), len(ys)))
  if unconnected_gradients not in ("none", "zero"):
    raise ValueError("Unknown value for unconnected_gradients: %r" % unconnected_gradients)
  graph = ops._get_graph_from_inputs(ys + xs + stop_gradients + grad_ys)  # pylint: disable=protected-access
  with graph.as_default(), ops.name_scope(name, "gradients", ys + xs + stop_gradients):
    xs = [x.handle if (getattr(x, "_is_resource_variable", False) or
                       getattr(x, "_is_hash_table", False)) else x for x in xs]
    xs = [ops.internal_convert_to_tensor_or_indexed_slices(x, name="x", as_ref=True)
          for x in xs]
    ys = [ops.convert_to_tensor_or_indexed_slices(y, name="y") for y in ys]
    grad_ys = _default_grad_ys(grad_ys, ys)
    to_ops = [t.op for t in ys]
    from_ops = [t.op for t in xs]
    stop_gradient_ids = set(ops.convert_to_tensor(t).op._id for t in stop_gradients)  # pylint: disable=protected-access
    reachable_to_ops, pending = _pending_count(to_ops, from_ops)
    grads = {}
    for y, grad_y in zip(ys, grad_ys):
      _set_grad(grads, y, grad_y)
    queue = collections.deque()
    to_ops_set = set()
    for op in to_ops:
      if pending[op._id] == 0 and op._id not in to_ops_set and op._id in reachable_to_ops:  # pylint: disable=protected-access
        to_ops_set.add(op._id)  # pylint: disable=protected-access
        queue.append(op)
    stop_ops = set(stop_gradient_ids)
    for op in from_ops:
      if all(pending[inp.op._id] == 0 for inp in op.inputs):  # pylint: disable=protected-access
        stop_ops.add(op._id)  # pylint: disable=protected-access
    while queue:
      op = queue.popleft()
      out_grads = _aggregated_grads(grads, op)
      in_grads = [None] * len(op.inputs)
      if any(g is not None for g in out_grads) and op._id not in stop_ops:  # pylint: disable=protected-access
        kind, grad_fn = _gradient_function(op)
        if kind is not None:
          for i, out_grad in enumerate(out_grads):
            if out_grad is None and (kind == "cc" or _is_trainable(op.outputs[i])):
              out_grads[i] = array_ops.zeros_like(op.outputs[i])
          with ops.name_scope(op.name + "_grad"):
            if kind == "python":
              in_grads = _as_list(grad_fn(op, *out_grads))
            else:
              in_grads = _cc_gradient(op, out_grads)
          if len(in_grads) != len(op.inputs):
            raise ValueError("Num gradients %d generated for op %s do not match num inputs %d"
                             % (len(in_grads), op.name, len(op.inputs)))
      for i, (t_in, in_grad) in enumerate(zip(op.inputs, in_grads)):
        if in_grad is None:
          continue
        if isinstance(in_grad, ops.Tensor) and t_in.dtype != dtypes.resource:
          try:
            in_grad.set_shape(t_in.get_shape())
          except ValueError:
            raise ValueError("Incompatible shapes between op input and calculated input "
                             "gradient. Forward operation: %s. Input index: %d. Original "
                             "input shape: %s. Calculated input gradient shape: %s" %
                             (op.name, i, t_in.shape, in_grad.shape))
        _set_grad(grads, t_in, in_grad)
      for x in op.inputs:
        pending[x.op._id] -= 1  # pylint: disable=protected-access
        if pending[x.op._id] == 0:  # pylint: disable=protected-access
          queue.append(x.op)
    results = []
    for x in xs:
      op_grads = grads.get(x.op._id)  # pylint: disable=protected-access
      g = _aggregate(op_grads[x.value_index]) if op_grads else None
      if g is None and unconnected_gradients == "zero":
        g = array_ops.zeros_like(x)
      results.append(g)
    return results


@ops.RegisterGradient("Identity")
def _identity_grad(op, grad):
  """Passes dense and sparse (IndexedSlices) gradients through, as TF does."""
  return grad


@ops.RegisterGradient("ReadVariableOp")
def _read_variable_grad(op, grad):
  """The gradient of a resource variable's read flows to its handle, as in TF."""
  return grad
