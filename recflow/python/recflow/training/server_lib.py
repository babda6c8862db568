"""tf.train.ClusterSpec and tf.train.Server on recflow's distributed runtime.

A cluster is TensorFlow's: jobs ("ps", "worker", "chief") of tasks, each a
"host:port". Addresses and job names are checked by recflow's C++ parser
(recflow/distributed/cluster_spec.h), whose messages name the job and the
address at fault.

A Server is one task of a between-graph job (docs/python.md, "Distributed
training from Python"):
  - a "ps" task serves its share of the model over gRPC (a recflow PsServer).
    It starts without a graph: the chief sends its training graph when it
    initializes the cluster, and every ps adopts it. join() serves until the
    chief ends the job (or Ctrl-C / SIGTERM arrives), as TF's ps join()s.
  - a "chief" or "worker" task listens on its address too (gRPC health
    service) and is the `target` of this process's training Session:
    tf.Session(server.target) and MonitoredTrainingSession(master=server.target)
    run each step as pull, compute, push (recflow/client/distributed.py).
"""

import collections
import signal
import threading
import time

from recflow import _pywrap

# target -> Server of this process (Session(target) finds its cluster here).
_SERVERS = {}
_SERVERS_LOCK = threading.Lock()


def _normalize_job(job_name, tasks):
  """A job's tasks as a {index: address} dict (TF accepts lists and dicts)."""
  if isinstance(tasks, (list, tuple)):
    return {i: t for i, t in enumerate(tasks)}
  if isinstance(tasks, dict):
    out = {}
    for k, v in tasks.items():
      try:
        i = int(k)
      except (TypeError, ValueError):
        raise TypeError("Task index for job %r must be an integer, got %r" % (job_name, k))
      out[i] = v
    return out
  raise TypeError("The tasks for job %r must be a list or a dictionary from integers to "
                  "strings." % job_name)


class ClusterSpec(object):
  """A cluster as a set of jobs, each a set of task addresses (TF 1.x's ClusterSpec).

  ClusterSpec({"ps": ["h0:2222"], "worker": ["h1:2222", "h2:2222"]}), a job may be a
  dict {index: address}; or another ClusterSpec; or a ClusterDef-like object
  (`.job` entries with `.name` and `.tasks`). recflow needs every job's indices to
  be 0..n-1 and every address to be host:port (ValueError otherwise).
  """

  def __init__(self, cluster):
    if isinstance(cluster, ClusterSpec):
      jobs = {j: dict(t) for j, t in cluster._jobs.items()}  # pylint: disable=protected-access
    elif isinstance(cluster, dict):
      jobs = {}
      for job_name, tasks in cluster.items():
        if not isinstance(job_name, str):
          raise TypeError("Job names must be strings, got %r" % (job_name,))
        jobs[job_name] = _normalize_job(job_name, tasks)
    elif hasattr(cluster, "job"):
      jobs = {j.name: {int(k): v for k, v in dict(j.tasks).items()} for j in cluster.job}
    else:
      raise TypeError("`cluster` must be a dictionary mapping one or more job names to "
                      "lists of network addresses, or a `ClusterDef` protocol buffer")
    for job_name, tasks in jobs.items():
      for i, address in tasks.items():
        if not isinstance(address, str):
          raise TypeError("Task address %r of job %r must be a string" % (address, job_name))
      if tasks and sorted(tasks) != list(range(len(tasks))):
        raise ValueError("job %r has task indices %s; recflow's clusters need indices 0..%d"
                         % (job_name, sorted(tasks), len(tasks) - 1))
    self._jobs = {j: t for j, t in jobs.items() if t}
    _pywrap.check_cluster(self._lists())  # addresses and job names, by recflow's rules

  def _lists(self):
    return {j: [t[i] for i in range(len(t))] for j, t in self._jobs.items()}

  def __bool__(self):
    return bool(self._jobs)

  __nonzero__ = __bool__

  def __eq__(self, other):
    return isinstance(other, ClusterSpec) and self._jobs == other._jobs  # pylint: disable=protected-access

  def __ne__(self, other):
    return not self == other

  def __repr__(self):
    return "ClusterSpec(%r)" % self.as_dict()

  @property
  def jobs(self):
    return sorted(self._jobs)

  def _job(self, job_name):
    try:
      return self._jobs[job_name]
    except KeyError:
      raise ValueError("No such job in cluster: %r" % job_name)

  def num_tasks(self, job_name):
    return len(self._job(job_name))

  def task_indices(self, job_name):
    return sorted(self._job(job_name))

  def task_address(self, job_name, task_index):
    job = self._job(job_name)
    try:
      return job[task_index]
    except KeyError:
      raise ValueError("No task with index %r in job %r" % (task_index, job_name))

  def job_tasks(self, job_name):
    job = self._job(job_name)
    return [job[i] for i in range(len(job))]

  def as_dict(self):
    return self._lists()

  def as_cluster_def(self):
    """A ClusterDef-like value: `.job`, each with `.name` and `.tasks` ({index: address})."""
    return ClusterDef(job=[JobDef(name=j, tasks=dict(self._jobs[j])) for j in self.jobs])


JobDef = collections.namedtuple("JobDef", ["name", "tasks"])
ClusterDef = collections.namedtuple("ClusterDef", ["job"])


def parse_tf_config(text):
  """TF_CONFIG's JSON, checked by recflow's parser: {"cluster": {job: [address]},
  "task": {"type", "index"}, "is_chief", "training_index", "num_training_workers"}.
  ValueError naming TF_CONFIG and the field at fault."""
  return _pywrap.parse_tf_config(text)


class Server(object):
  """An in-process server of one task of a cluster (TF 1.x's tf.train.Server)."""

  def __init__(self, server_or_cluster_def, job_name=None, task_index=None, protocol=None,
               config=None, start=True):
    cluster = server_or_cluster_def
    if hasattr(cluster, "cluster") and not isinstance(cluster, (dict, ClusterSpec)):
      # A ServerDef-like value.
      job_name = job_name or getattr(cluster, "job_name", None)
      if task_index is None:
        task_index = getattr(cluster, "task_index", None)
      protocol = protocol or getattr(cluster, "protocol", None)
      cluster = cluster.cluster
    cluster = ClusterSpec(cluster)
    if not cluster:
      raise ValueError("The cluster of a Server must have at least one job")
    if job_name is None:
      if len(cluster.jobs) != 1:
        raise ValueError("Must specify an explicit `job_name`.")
      job_name = cluster.jobs[0]
    if job_name not in cluster.jobs:
      raise ValueError("job_name %r is not a job of the cluster; its jobs are: %s" %
                       (job_name, ", ".join(cluster.jobs)))
    if task_index is None:
      if cluster.num_tasks(job_name) != 1:
        raise ValueError("Must specify an explicit `task_index`.")
      task_index = 0
    if protocol not in (None, "grpc"):
      raise ValueError("recflow's servers speak gRPC only; protocol %r is not supported" %
                       (protocol,))
    self._cluster = cluster
    self._job_name = job_name
    self._task_index = int(task_index)
    self._config = config
    # Validates the task (and the cluster) with recflow's rules.
    self._task = _pywrap.task_config(cluster.as_dict(), job_name, self._task_index)
    self._address = cluster.task_address(job_name, self._task_index)
    self._impl = None
    self._lock = threading.Lock()
    if start:
      self.start()

  @property
  def target(self):
    """What a Session of this task connects to: "grpc://host:port"."""
    return "grpc://" + self._address

  @property
  def server_def(self):
    return ServerDef(cluster=self._cluster.as_cluster_def(), job_name=self._job_name,
                     task_index=self._task_index, protocol="grpc")

  @property
  def cluster_spec(self):
    return self._cluster

  @property
  def job_name(self):
    return self._job_name

  @property
  def task_index(self):
    return self._task_index

  @property
  def is_chief(self):
    """The chief initializes and checkpoints: the "chief" task, or worker 0 without one."""
    return self._task["is_chief"]

  @property
  def is_ps(self):
    return self._job_name == "ps"

  def start(self):
    """Starts listening on the task's address (idempotent)."""
    with self._lock:
      if self._impl is not None:
        return
      threads = 0
      if self._config is not None:
        threads = int(getattr(self._config, "intra_op_parallelism_threads", 0) or 0)
      if self.is_ps:
        self._impl = _pywrap.PsTask(self._cluster.as_dict(), self._task_index, threads)
      else:
        self._impl = _pywrap.TaskServer(self._address)
      with _SERVERS_LOCK:
        _SERVERS[self.target] = self

  def join(self):
    """A ps: serves until the chief ends the job (or a signal stops it). Other
    tasks: blocks until interrupted (TF's join blocks forever)."""
    self.start()
    if self.is_ps:
      with _sigterm_as_interrupt():
        self._impl.join()
      return
    with _sigterm_as_interrupt():
      while True:
        time.sleep(0.5)

  def stop(self):
    """recflow: stops serving (a ps drops its share of the model)."""
    with self._lock:
      if self._impl is None:
        return
      self._impl.stop()
      self._impl = None
      with _SERVERS_LOCK:
        if _SERVERS.get(self.target) is self:
          del _SERVERS[self.target]

  def _ps_status(self):
    return self._impl.status() if self.is_ps and self._impl is not None else None

  @staticmethod
  def create_local_server(config=None, start=True):
    raise NotImplementedError(
        "Server.create_local_server: recflow's servers are tasks of a ps/worker cluster; in "
        "one process use tf.Session() (docs/python.md, Distributed training from Python)")


ServerDef = collections.namedtuple("ServerDef", ["cluster", "job_name", "task_index",
                                                 "protocol"])


class _sigterm_as_interrupt(object):  # pylint: disable=invalid-name
  """While a ps join()s on the main thread, SIGTERM (a scheduler's stop) ends it as
  Ctrl-C does."""

  def __enter__(self):
    self._old = None
    if threading.current_thread() is threading.main_thread():
      try:
        self._old = signal.signal(signal.SIGTERM, _raise_interrupt)
      except (ValueError, OSError):
        self._old = None
    return self

  def __exit__(self, *exc):
    if self._old is not None:
      signal.signal(signal.SIGTERM, self._old)
    return False


def _raise_interrupt(signum, frame):
  raise KeyboardInterrupt("signal %d" % signum)


def server_for_target(target):
  """The Server of this process whose .target is `target` (ValueError otherwise)."""
  with _SERVERS_LOCK:
    server = _SERVERS.get(target)
  if server is None:
    known = sorted(_SERVERS)
    raise ValueError(
        "Session(target=%r): recflow connects a Session to a tf.train.Server of this process "
        "(pass its .target)%s" % (target, "; this process has: " + ", ".join(known)
                                  if known else "; this process has started none"))
  if server.is_ps:
    raise ValueError("Session(target=%r): that is a ps task; sessions run on the chief and "
                     "worker tasks" % target)
  return server
