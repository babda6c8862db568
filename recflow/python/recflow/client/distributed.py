"""A Session's distributed half: between-graph training on recflow's runtime.

tf.Session(server.target) on a chief or worker task runs its graph through a
_DistributedRunner instead of a plain in-process session. recflow's model is
not TF's master/worker device placement: every task builds the same graph;
the variables live on the ps tasks (recflow/distributed/placement.h places
them, honouring "/job:ps/task:K" from replica_device_setter), and the local
session keeps a per-step copy. What a run does depends on what it runs:

  - targets that run an optimizer's update ops (the train op): a training
    step: pull the variables (and rows) the step needs from the ps tasks,
    compute the gradients and the fetches, push the gradients; the ps tasks
    apply them with the variable's optimizer (distributed::Worker::TrainStep);
  - the global variables' initializer (tf.global_variables_initializer()):
    the chief initializes every ps task not initialized yet (sending the
    training graph to ps tasks started without one); other workers wait for
    the chief;
  - anything else with fetches: a pull (read-only) and a forward run;
  - only other targets (local variables' initializers): run locally.

The training graph sent to the ps tasks is what the update ops, the train
ops, the global variables' initializers and the global step need: the same on
every task whatever else each one adds (savers, hooks, summaries).
"""

from recflow import _pywrap
from recflow.framework import ops


def _is_variable_op(op):
  return op.type in ("VariableV2", "Variable", "VarHandleOp")


def _training_nodes(graph):
  """Names of the training graph's nodes, the global variables' {node: trainable},
  their initializers and the global step node."""
  global_vars = graph.get_collection(ops.GraphKeys.GLOBAL_VARIABLES)
  trainable = set(id(v) for v in graph.get_collection(ops.GraphKeys.TRAINABLE_VARIABLES))
  var_nodes = {}
  initializers = []
  for v in global_vars:
    var_nodes[v.op.name] = id(v) in trainable
    if v.initializer is not None:
      initializers.append(v.initializer)
  roots = list(initializers)
  for op in graph.get_operations():
    if "Apply" in op.type and op.inputs and op.inputs[0].op.name in var_nodes:
      roots.append(op)
  roots.extend(o if isinstance(o, ops.Operation) else o.op
               for o in graph.get_collection(ops.GraphKeys.TRAIN_OP))
  step_name = ""
  steps = graph.get_collection(ops.GraphKeys.GLOBAL_STEP)
  if steps:
    step_op = steps[0].op
    roots.append(step_op)
    step_name = step_op.name
  seen = set()
  stack = list(roots)
  while stack:
    op = stack.pop()
    if op.name in seen:
      continue
    seen.add(op.name)
    stack.extend(t.op for t in op.inputs)
    stack.extend(op.control_inputs)
  return seen, var_nodes, [i.name for i in initializers], step_name


class _DistributedRunner(object):
  """What BaseSession runs through when its target is a training task's Server."""

  def __init__(self, server, graph, config):
    self._server = server
    self._graph = graph
    self._config = config
    self._c = None
    self._nodes_sent = 0
    self._started = False
    self._init_ops = None
    self._update_targets = {}  # target -> its kind (see _kind)
    self.end_job_on_close = False  # MonitoredTrainingSession's chief ends the job

  @property
  def is_chief(self):
    return self._server.is_chief

  def _cluster(self):
    return self._server.cluster_spec.as_dict()

  def _worker(self):
    """The C++ worker, built at the first run from the graph as it is then."""
    n = self._graph._c_graph.num_nodes()  # pylint: disable=protected-access
    if self._c is None:
      cluster = self._cluster()
      if "ps" not in cluster:
        raise ValueError("the cluster has no ps job: recflow's distributed training keeps the "
                         "variables on ps tasks; cluster: %r" % (cluster,))
      nodes, var_nodes, initializers, step = _training_nodes(self._graph)
      task = self._server._task  # pylint: disable=protected-access
      cfg = self._config
      self._c = _pywrap.Worker(
          cluster["ps"], task["training_index"], task["is_chief"],
          _pywrap.check_cluster(cluster),
          int(cfg.inter_op_parallelism_threads), int(cfg.intra_op_parallelism_threads),
          True, self._graph._c_graph, n, sorted(nodes), var_nodes, initializers, step)  # pylint: disable=protected-access
      self._nodes_sent = n
    elif n > self._nodes_sent:
      self._c.extend(self._graph._c_graph, self._nodes_sent, n)  # pylint: disable=protected-access
      self._nodes_sent = n
    return self._c

  def _kind(self, c, target):
    """What running `target` means: "init", "update" (a training step) or "local"."""
    kind = self._update_targets.get(target)
    if kind is None:
      if self._is_init_target(target):
        kind = "init"
      elif c.is_update_target(target):
        kind = "update"
      else:
        kind = "local"
      self._update_targets[target] = kind
    return kind

  def _is_init_target(self, name):
    if self._init_ops is None:
      inits = set()
      for v in self._graph.get_collection(ops.GraphKeys.GLOBAL_VARIABLES):
        if v.initializer is not None:
          inits.add(v.initializer.name)
      self._init_ops = inits
    return self._only_initializers(self._graph.get_operation_by_name(name), 0)

  def _only_initializers(self, op, depth):
    """An initializer, or a NoOp grouping only initializers (through NoOps)."""
    if op.name in self._init_ops:
      return True
    controls = op.control_inputs
    if op.type != "NoOp" or op.inputs or not controls or depth > 8:
      return False
    return all(self._only_initializers(c, depth + 1) for c in controls)

  def start(self, restore_prefix=""):
    """The chief: initializes (or restores) the cluster; others wait for the chief."""
    c = self._worker()
    if self.is_chief:
      step = c.start_cluster(restore_prefix or "")
    else:
      step = c.wait_for_cluster()
    self._started = True
    return step

  def run(self, feed_names, feed_values, feed_types, fetch_names, targets):
    c = self._worker()
    kinds = [self._kind(c, t) for t in targets]
    train = [t for t, k in zip(targets, kinds) if k == "update"]
    fetch_names, stepping = self._training_fetches(c, fetch_names)
    train += stepping
    local_targets = [t for t, k in zip(targets, kinds) if k == "local"]
    if "init" in kinds:
      self.start()
      if not train and not local_targets and not fetch_names:
        return []
    if not self._started and not self.is_chief:
      self.start()  # a worker's first step waits for the chief's initialization
    if train:
      results, _, _ = c.train_step(feed_names, feed_values, feed_types, list(fetch_names),
                                   local_targets)
      return results
    if not fetch_names:
      return c.run_local(feed_names, feed_values, feed_types, [], local_targets)
    return c.evaluate(feed_names, feed_values, feed_types, list(fetch_names), local_targets)

  def _training_fetches(self, c, fetch_names):
    """TF-slim's train op -- the loss through an Identity that waits for the updates -- as a
    fetch: a training step fetching the loss. Returns (fetches, the update ops met)."""
    out, stepping = [], []
    for name in fetch_names:
      op_name = name.split(":")[0]
      if self._kind(c, op_name) == "update":
        op = self._graph.get_operation_by_name(op_name)
        source = op.inputs[0] if op.type == "Identity" and op.inputs else None
        if source is None or self._kind(c, source.op.name) == "update":
          raise ValueError(
              "fetching %s runs the update ops of a distributed training step; fetch the loss "
              "(or an Identity of it that waits for the updates) and run the train op as a "
              "target" % name)
        out.append(source.name)
        stepping.append(op_name)
      else:
        out.append(name)
    return out, stepping

  def save(self, directory, basename, max_to_keep, step):
    return self._worker().save(directory, basename, int(max_to_keep or 0), int(step))

  def restore(self, prefix):
    """The chief starts the cluster from `prefix` (ps tasks already initialized,
    a live cluster, are left as they are); other workers wait for the chief."""
    return self.start(prefix)

  def global_step(self):
    return self._worker().global_step()

  def stats(self):
    return self._worker().stats()

  def close(self):
    c, self._c = self._c, None
    if c is None:
      return
    try:
      if self.is_chief and self.end_job_on_close:
        c.end_job(self._server._task["num_training_workers"])  # pylint: disable=protected-access
      else:
        c.leave()
    finally:
      c.close()


def runner_for(target, graph, config):
  from recflow.training import server_lib  # pylint: disable=g-import-not-at-top
  return _DistributedRunner(server_lib.server_for_target(target), graph, config)
