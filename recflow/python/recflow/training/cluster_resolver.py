"""tf.distribute.cluster_resolver.TFConfigClusterResolver: the cluster and this
task from the TF_CONFIG environment variable, parsed and checked by recflow's C++
parser (recflow/distributed/cluster_spec.h; its errors, naming TF_CONFIG and the
field, become ValueError)."""

import json
import os

from recflow.training import server_lib


class TFConfigClusterResolver(object):
  """Reads TF_CONFIG: {"cluster": {...}, "task": {"type": ..., "index": ...}}."""

  def __init__(self, task_type=None, task_id=None, rpc_layer=None, environment=None):
    self._task_type = task_type
    self._task_id = task_id
    self._rpc_layer = rpc_layer
    self._environment = environment
    self._parsed = None

  def _config(self):
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
      return None
    if self._parsed is None or self._parsed[0] != text:
      self._parsed = (text, server_lib.parse_tf_config(text))
    return self._parsed[1]

  def cluster_spec(self):
    config = self._config()
    return server_lib.ClusterSpec(config["cluster"] if config else {})

  @property
  def task_type(self):
    if self._task_type is not None:
      return self._task_type
    config = self._config()
    return config["task"]["type"] if config else None

  @task_type.setter
  def task_type(self, value):
    self._task_type = value

  @property
  def task_id(self):
    if self._task_id is not None:
      return self._task_id
    config = self._config()
    return config["task"]["index"] if config else None

  @task_id.setter
  def task_id(self, value):
    self._task_id = value

  @property
  def rpc_layer(self):
    if self._rpc_layer is not None:
      return self._rpc_layer
    text = os.environ.get("TF_CONFIG", "")
    try:
      return json.loads(text).get("rpc_layer") if text.strip() else None
    except ValueError:
      return None

  @property
  def environment(self):
    if self._environment is not None:
      return self._environment
    text = os.environ.get("TF_CONFIG", "")
    try:
      return json.loads(text).get("environment", "") if text.strip() else ""
    except ValueError:
      return ""

  def master(self, task_type=None, task_id=None, rpc_layer=None):
    """"grpc://host:port" of the task (this one by default); "" without a cluster."""
    task_type = task_type if task_type is not None else self.task_type
    task_id = task_id if task_id is not None else self.task_id
    spec = self.cluster_spec()
    if task_type is None or task_id is None or not spec or task_type not in spec.jobs:
      return ""
    layer = rpc_layer or self.rpc_layer or "grpc"
    return "%s://%s" % (layer, spec.task_address(task_type, task_id))

  def num_accelerators(self, task_type=None, task_id=None, config_proto=None):
    return {}
