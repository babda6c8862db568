"""tf.train.replica_device_setter: variables to the ps tasks, the rest to the worker.

As TF 1.x: a device function for `tf.device(...)` that gives every variable op
(VariableV2, VarHandleOp, ...) the device "/job:ps/task:K", K chosen by
`ps_strategy` (round-robin by default, in creation order), and every other op
`worker_device`; a device already set by an inner `tf.device` wins field by
field. recflow's placement (recflow/distributed/placement.h, PlanTraining)
keeps a variable pinned to "/job:ps/task:K" on that ps task; optimizer slots go
with their variable. Other device fields are recorded and otherwise ignored
(recflow runs on CPU).
"""

from recflow.framework import ops

# TF's default ps_ops.
STANDARD_PS_OPS = ("Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
                   "MutableHashTableV2", "MutableHashTableOfTensors",
                   "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
                   "MutableDenseHashTableV2", "VarHandleOp")


class _RoundRobinStrategy(object):
  """Task k for the k-th ps op, modulo the number of ps tasks."""

  def __init__(self, num_tasks):
    self._num_tasks = num_tasks
    self._next_task = 0

  def __call__(self, unused_op):
    task = self._next_task
    self._next_task = (self._next_task + 1) % self._num_tasks
    return task


def _merged(base, override):
  """`base` with every field `override` sets replaced (DeviceSpec.make_merged_spec)."""
  spec = ops.DeviceSpec.from_string(base)
  spec.merge_from(ops.DeviceSpec.from_string(override))
  return spec.to_string()


class _ReplicaDeviceChooser(object):

  def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops, ps_strategy):
    self._ps_tasks = ps_tasks
    self._ps_device = ps_device
    self._worker_device = worker_device
    self._merge_devices = merge_devices
    self._ps_ops = ps_ops
    self._ps_strategy = ps_strategy

  def device_function(self, op):
    if not self._merge_devices and op.device:
      return op.device
    current = op.device or ""
    op_type = op.type
    if self._ps_tasks and self._ps_device and op_type in self._ps_ops:
      ps_device = ops.DeviceSpec.from_string(self._ps_device)
      current_job = ops.DeviceSpec.from_string(current).job
      if ps_device.job and (not current_job or current_job == ps_device.job):
        ps_device.task = self._ps_strategy(op)
      return _merged(ps_device.to_string(), current)
    return _merged(self._worker_device or "", current)


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker",
                          merge_devices=True, cluster=None, ps_ops=None, ps_strategy=None):
  """A device function placing variables on the ps tasks (TF 1.x's).

  With `cluster` (a ClusterSpec or dict), ps_tasks is its "ps" job's size. None when
  there are no ps tasks (then `tf.device(None)` places nothing), as TF.
  """
  from recflow.training import server_lib  # pylint: disable=g-import-not-at-top
  if cluster is not None:
    if isinstance(cluster, server_lib.ClusterSpec):
      cluster_spec = cluster.as_dict()
    else:
      cluster_spec = server_lib.ClusterSpec(cluster).as_dict()
    ps_job_name = ops.DeviceSpec.from_string(ps_device or "").job
    if ps_job_name not in cluster_spec:
      return None
    ps_tasks = len(cluster_spec[ps_job_name])
  if ps_tasks == 0:
    return None
  if ps_ops is None:
    ps_ops = list(STANDARD_PS_OPS)
  if not merge_devices:
    import logging  # pylint: disable=g-import-not-at-top
    logging.getLogger("recflow").warning(
        "DEPRECATION: It is recommended to set merge_devices=true in replica_device_setter")
  if ps_strategy is None:
    ps_strategy = _RoundRobinStrategy(ps_tasks)
  if not callable(ps_strategy):
    raise TypeError("ps_strategy must be callable")
  chooser = _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device, merge_devices, ps_ops,
                                  ps_strategy)
  return chooser.device_function
