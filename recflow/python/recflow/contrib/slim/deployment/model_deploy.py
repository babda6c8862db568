"""model_deploy: a model replicated into clones, with variables on ps tasks, as TF-slim's
research repository deploys it.

    config = model_deploy.DeploymentConfig(num_clones=2)
    with tf.device(config.variables_device()):
      global_step = tf.train.get_or_create_global_step()
    clones = model_deploy.create_clones(config, clone_fn, [batch_iterator])
    total_loss, grads_and_vars = model_deploy.optimize_clones(clones, optimizer)
    train_op = optimizer.apply_gradients(grads_and_vars, global_step=global_step)

Each clone calls model_fn in its own name scope ("clone_0", "clone_1", ...) sharing the
variables, which are made on variables_device(): /device:CPU:0, or with num_ps_tasks the
ps tasks round robin (/job:ps/task:i). A clone's loss is the sum of the LOSSES its model_fn
added (scaled by 1 / num_clones), the first clone's also the regularization losses; the
gradients of the clones are summed. On a CPU machine clones split a step's work into
independent subgraphs that recflow's executor runs concurrently.
"""

import collections

from recflow.contrib import slim
from recflow.framework import ops
from recflow.ops import control_flow_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops
from recflow.ops import variable_scope
from recflow.summary import summary as summary_lib

__all__ = ["create_clones", "deploy", "optimize_clones", "DeployedModel", "DeploymentConfig",
           "Clone"]

Clone = collections.namedtuple("Clone", ["outputs", "scope", "device"])
DeployedModel = collections.namedtuple("DeployedModel",
                                       ["train_op", "summary_op", "total_loss", "clones"])


class DeploymentConfig(object):
  """num_clones copies of the model on this machine (CPU: clone_on_cpu is accepted and
  always true here), replica replica_id of num_replicas worker tasks, variables on
  num_ps_tasks ps tasks (0: on this machine)."""

  def __init__(self, num_clones=1, clone_on_cpu=False, replica_id=0, num_replicas=1,
               num_ps_tasks=0, worker_job_name="worker", ps_job_name="ps"):
    del clone_on_cpu  # recflow runs on CPUs
    if num_clones < 1:
      raise ValueError("num_clones must be positive, got %r" % (num_clones,))
    if num_replicas > 1 and num_ps_tasks < 1:
      raise ValueError("When using replicas num_ps_tasks must be positive")
    if num_replicas > 1 or num_ps_tasks > 0:
      if not worker_job_name:
        raise ValueError("Must specify worker_job_name when using replicas")
      if not ps_job_name:
        raise ValueError("Must specify ps_job_name when using parameter server")
    if replica_id >= num_replicas:
      raise ValueError("replica_id must be less than num_replicas")
    self._num_clones = num_clones
    self._replica_id = replica_id
    self._num_replicas = num_replicas
    self._num_ps_tasks = num_ps_tasks
    self._ps_device = "/job:" + ps_job_name if num_ps_tasks > 0 else ""
    self._worker_device = ("/job:" + worker_job_name
                           if num_ps_tasks > 0 else "")

  @property
  def num_clones(self):
    return self._num_clones

  @property
  def clone_on_cpu(self):
    return True

  @property
  def replica_id(self):
    return self._replica_id

  @property
  def num_replicas(self):
    return self._num_replicas

  @property
  def num_ps_tasks(self):
    return self._num_ps_tasks

  @property
  def ps_device(self):
    return self._ps_device

  @property
  def worker_device(self):
    return self._worker_device

  def caching_device(self):
    """None: variables are read where they live."""
    return None

  def clone_device(self, clone_index):
    if clone_index >= self._num_clones:
      raise ValueError("clone_index must be less than num_clones")
    return self._worker_device + "/device:CPU:0"

  def clone_scope(self, clone_index):
    if clone_index >= self._num_clones:
      raise ValueError("clone_index must be less than num_clones")
    return "clone_%d" % clone_index if self._num_clones > 1 else ""

  def optimizer_device(self):
    return self._worker_device + "/device:CPU:0"

  def inputs_device(self):
    return self._worker_device + "/device:CPU:0"

  def variables_device(self):
    """A device string, or with ps tasks a function placing each variable on the next ps
    task in turn (other ops where they are)."""
    device = self._ps_device + "/device:CPU:0"
    if not self._num_ps_tasks:
      return device
    chooser = _PSDeviceChooser(device, self._num_ps_tasks)
    return chooser.choose


class _PSDeviceChooser(object):

  def __init__(self, device, tasks):
    self._device = device
    self._tasks = tasks
    self._task = 0

  def choose(self, op):
    if op.device:
      return op.device
    if op.type.startswith("Variable") or op.type in ("VarHandleOp", "HashTableV2",
                                                     "MutableHashTableV2"):
      task = self._task
      self._task = (self._task + 1) % self._tasks
      spec = ops.DeviceSpec.from_string(self._device)
      spec.task = task
      return spec.to_string()
    return op.device


def create_clones(config, model_fn, args=None, kwargs=None):
  """config.num_clones calls of model_fn(*args, **kwargs), each in its clone's name scope
  and device, sharing variables (made on config.variables_device()). Returns the Clones."""
  clones = []
  args = args or []
  kwargs = kwargs or {}
  with slim.arg_scope([slim.model_variable, slim.variable], device=config.variables_device()):
    for i in range(config.num_clones):
      with ops.name_scope(config.clone_scope(i)) as clone_scope:
        clone_device = config.clone_device(i)
        with ops.device(clone_device):
          with variable_scope.variable_scope(variable_scope.get_variable_scope(),
                                             reuse=True if i > 0 else None):
            outputs = model_fn(*args, **kwargs)
          clones.append(Clone(outputs, clone_scope, clone_device))
  return clones


def _gather_clone_loss(clone, num_clones, regularization_losses):
  sum_loss = clone_loss = regularization_loss = None
  with ops.device(clone.device):
    all_losses = []
    clone_losses = ops.get_collection(ops.GraphKeys.LOSSES, clone.scope or None)
    if clone_losses:
      clone_loss = math_ops.add_n(clone_losses, name="clone_loss")
      if num_clones > 1:
        clone_loss = gen.real_div(clone_loss, float(num_clones), name="scaled_clone_loss")
      all_losses.append(clone_loss)
    if regularization_losses:
      regularization_loss = math_ops.add_n(regularization_losses, name="regularization_loss")
      all_losses.append(regularization_loss)
    if all_losses:
      sum_loss = math_ops.add_n(all_losses)
  if clone_loss is not None:
    summary_lib.scalar("/".join(p for p in ["Losses", clone.scope.rstrip("/"), "clone_loss"]
                                if p), clone_loss)
  if regularization_loss is not None:
    summary_lib.scalar("Losses/regularization_loss", regularization_loss)
  return sum_loss


def _sum_clones_gradients(clone_grads):
  sums = []
  for grad_and_vars in zip(*clone_grads):
    var = grad_and_vars[0][1]
    grads = []
    for g, v in grad_and_vars:
      if v is not var:
        raise ValueError("model_deploy: the clones' gradients are not of the same variables "
                         "(%s vs %s)" % (v.op.name, var.op.name))
      if g is not None:
        grads.append(ops.convert_to_tensor(g) if isinstance(g, ops.IndexedSlices) else g)
    if grads:
      total = grads[0] if len(grads) == 1 else math_ops.add_n(
          grads, name=var.op.name + "/sum_grads")
      sums.append((total, var))
  return sums


def optimize_clones(clones, optimizer, regularization_losses=None, **kwargs):
  """(total_loss, grads_and_vars): the clones' losses summed, and their gradients summed
  per variable (kwargs go to optimizer.compute_gradients). regularization_losses default
  to the REGULARIZATION_LOSSES collection and count once."""
  grads_and_vars = []
  clones_losses = []
  num_clones = len(clones)
  if regularization_losses is None:
    regularization_losses = ops.get_collection(ops.GraphKeys.REGULARIZATION_LOSSES)
  for clone in clones:
    with ops.name_scope(clone.scope or None):
      loss = _gather_clone_loss(clone, num_clones, regularization_losses)
      if loss is not None:
        with ops.device(clone.device):
          grads_and_vars.append(optimizer.compute_gradients(loss, **kwargs))
        clones_losses.append(loss)
      regularization_losses = None
  if not clones_losses:
    raise ValueError("optimize_clones: no clone added a loss (model_fn must add its losses, "
                     "e.g. with tf.losses.softmax_cross_entropy)")
  total_loss = math_ops.add_n(clones_losses, name="total_loss")
  return total_loss, _sum_clones_gradients(grads_and_vars)


def deploy(config, model_fn, args=None, kwargs=None, optimizer=None,
           summarize_gradients=False):
  """create_clones and, with an optimizer, optimize_clones and a train op that runs the
  first clone's update ops (batch-norm statistics) and returns the total loss."""
  del summarize_gradients
  with ops.device(config.variables_device()):
    global_step = slim.get_or_create_global_step()
  clones = create_clones(config, model_fn, args, kwargs)
  first = clones[0]
  update_ops = ops.get_collection(ops.GraphKeys.UPDATE_OPS, first.scope or None)
  train_op = total_loss = None
  if optimizer is not None:
    with ops.device(config.optimizer_device()):
      total_loss, grads = optimize_clones(clones, optimizer)
      if grads:
        grad_updates = optimizer.apply_gradients(grads, global_step=global_step)
        update_ops = list(update_ops) + [grad_updates]
      with ops.control_dependencies([control_flow_ops.group(*update_ops)]):
        train_op = gen.identity(total_loss, name="train_op")
  else:
    losses = [_gather_clone_loss(c, len(clones), None) for c in clones]
    losses = [l for l in losses if l is not None]
    if losses:
      total_loss = math_ops.add_n(losses, name="total_loss")
  summary_op = summary_lib.merge_all()
  return DeployedModel(train_op, summary_op, total_loss, clones)
