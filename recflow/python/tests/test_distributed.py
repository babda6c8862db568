"""Between-graph ps/worker training from Python (tf.train.ClusterSpec, Server,
replica_device_setter; Session / MonitoredTrainingSession on a Server's target)
on recflow's distributed runtime. docs/python.md, "Distributed training from
Python".

The job tests run examples/python/ps_worker.py (a TF 1.x script with only its
import changed) as ps and worker processes on 127.0.0.1 under TF_CONFIG; every
process is killed when a test ends, whatever happened.
"""

import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import conftest

import recflow.compat.v1 as tf

SOURCE_DIR = os.environ.get("RECFLOW_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", "..", ".."))
EXAMPLE = os.path.join(SOURCE_DIR, "examples", "python", "ps_worker.py")
JOB_TIMEOUT = 300  # seconds; a hung job fails the test instead of hanging it


def free_ports(n):
  """n distinct free ports on 127.0.0.1 (bound to port 0, read back, closed)."""
  socks = []
  try:
    for _ in range(n):
      s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
      s.bind(("127.0.0.1", 0))
      socks.append(s)
    return [s.getsockname()[1] for s in socks]
  finally:
    for s in socks:
      s.close()


def load_example():
  spec = importlib.util.spec_from_file_location("ps_worker_example", EXAMPLE)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


class Processes(object):
  """Started processes (each in its own process group, output to a file); on exit
  every one still running is killed."""

  def __init__(self, tmp_path):
    self._dir = tmp_path
    self._procs = {}

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    for proc, _ in self._procs.values():
      if proc.poll() is None:
        try:
          os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
          pass
        proc.wait()
    return False

  def start(self, name, argv, tf_config=None):
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
      env["TF_CONFIG"] = json.dumps(tf_config)
    env["PYTHONUNBUFFERED"] = "1"
    env["OPENBLAS_NUM_THREADS"] = "1"
    log = open(str(self._dir / (name + ".log")), "wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                            start_new_session=True)
    log.close()
    self._procs[name] = (proc, self._dir / (name + ".log"))
    return proc

  def output(self, name):
    return self._procs[name][1].read_text(errors="replace")

  def wait(self, name, timeout=JOB_TIMEOUT):
    proc = self._procs[name][0]
    try:
      code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      pytest.fail("%s did not finish within %d s; its output:\n%s\n%s" %
                  (name, timeout, self.output(name)[-4000:], self.all_output()))
    return code

  def all_output(self):
    return "\n".join("--- %s ---\n%s" % (n, self.output(n)[-3000:]) for n in self._procs)


def run_job(tmp_path, model_dir, cluster, steps):
  """Runs ps_worker.py as every task of `cluster`; returns the Processes' outputs."""
  outputs = {}
  with Processes(tmp_path) as procs:
    names = []
    for job in ("ps", "chief", "worker"):  # ps first, as a launcher would
      for index in range(len(cluster.get(job, []))):
        name = "%s%d" % (job, index)
        procs.start(name, [sys.executable, EXAMPLE, "--model_dir", str(model_dir),
                           "--steps", str(steps), "--log_every", "10"],
                    {"cluster": cluster, "task": {"type": job, "index": index}})
        names.append(name)
    for name in names:
      if not name.startswith("ps"):
        code = procs.wait(name)
        assert code == 0, "%s exited with %d:\n%s" % (name, code, procs.all_output())
    for name in names:
      if name.startswith("ps"):
        code = procs.wait(name, timeout=120)  # the chief ended the job
        assert code == 0, "%s exited with %d:\n%s" % (name, code, procs.all_output())
    for name in names:
      outputs[name] = procs.output(name)
  return outputs


def eval_losses(outputs):
  """(global step, held-out loss) of every task's reports, by global step."""
  found = []
  for output in outputs:
    found += [(int(step), float(loss)) for step, loss in
              re.findall(r"global step (\d+) eval loss ([0-9.]+)", output)]
  return sorted(found)


def restored_values(example, checkpoint):
  """The example's model restored from `checkpoint` in one process: (variable values,
  the global step, its loss on fresh data, the loss of a freshly initialized model)."""
  with tf.Graph().as_default():
    placeholders, loss, _, global_step = example.build_model()
    saver = tf.train.Saver()
    feed = example.Data(seed=7).batch(placeholders, size=4000)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      initial_loss = sess.run(loss, feed)
      saver.restore(sess, checkpoint)
      values = {v.op.name: sess.run(v) for v in tf.global_variables()}
      return values, sess.run(global_step), sess.run(loss, feed), initial_loss


@pytest.mark.parametrize("num_ps", [1, 2])
def test_between_graph_job_trains_and_checkpoints(tmp_path, num_ps):
  ports = free_ports(num_ps + 2)
  addresses = ["127.0.0.1:%d" % p for p in ports]
  cluster = {"ps": addresses[:num_ps], "worker": addresses[num_ps:]}
  model_dir = tmp_path / "model"
  steps = 300
  outputs = run_job(tmp_path, model_dir, cluster, steps)

  # Both workers trained the one model: its held-out loss went down.
  for name in ("worker0", "worker1"):
    assert "done after" in outputs[name], outputs[name]
  seen = eval_losses([outputs["worker0"], outputs["worker1"]])
  assert len(seen) >= 4, outputs
  assert seen[0][0] < 50 and seen[-1][0] > 200, seen
  assert seen[-1][1] < seen[0][1] - 0.05, "held-out loss did not decrease: %s" % seen
  for p in range(num_ps):
    assert "the job is done" in outputs["ps%d" % p], outputs["ps%d" % p]

  # The chief's checkpoint (every ps wrote its part) restores in one process.
  checkpoint = tf.train.latest_checkpoint(str(model_dir))
  assert checkpoint is not None, os.listdir(str(model_dir))
  ckpt_step = int(checkpoint.rsplit("-", 1)[1])
  assert ckpt_step >= steps
  example = load_example()
  values, step, loss, initial_loss = restored_values(example, checkpoint)
  reader = tf.train.NewCheckpointReader(checkpoint)
  names = set(reader.get_variable_to_shape_map())
  # The model, the global step and Adagrad's slots are all in it.
  assert {"embeddings", "w", "b", "global_step", "embeddings/Adagrad", "w/Adagrad"} <= names
  for name, value in values.items():
    np.testing.assert_array_equal(value, reader.get_tensor(name), err_msg=name)
  # The label is the step the chief read before saving; the other worker's
  # pushes may land before the ps tasks pause for the save (asynchronous
  # training: TensorFlow's CheckpointSaverHook reads the step the same way).
  assert step >= ckpt_step
  assert loss < initial_loss - 0.05, (loss, initial_loss)


def test_launch_exec_runs_the_python_job(tmp_path):
  launcher = os.path.join(conftest.build_dir(), "recflow")
  if not os.access(launcher, os.X_OK):
    pytest.skip("the recflow CLI is not built at %s (set RECFLOW_BUILD_DIR)" % launcher)
  model_dir = tmp_path / "model"
  with Processes(tmp_path) as procs:
    procs.start("launch", [launcher, "launch", "--exec", "--ps", "1", "--workers", "1", "--",
                           sys.executable, EXAMPLE, "--model_dir", str(model_dir),
                           "--steps", "60", "--log_every", "10"])
    code = procs.wait("launch")
    out = procs.output("launch")
  assert code == 0, out
  assert "[chief] chief 0: done after" in out, out
  assert "[worker0] worker 0: done after" in out, out
  assert tf.train.latest_checkpoint(str(model_dir)) is not None


# --- In one process: a ps and training tasks as threads of this process -------

def _model(hidden):
  x = tf.placeholder(tf.float32, [None, 3], name="x")
  y = tf.placeholder(tf.float32, [None], name="y")
  global_step = tf.train.get_or_create_global_step()
  w = tf.get_variable("w", [3, hidden], initializer=tf.constant_initializer(0.1))
  v = tf.get_variable("v", [hidden, 1], initializer=tf.constant_initializer(0.1))
  pred = tf.reshape(tf.matmul(tf.matmul(x, w), v), [-1])
  loss = tf.reduce_mean(tf.square(pred - y))
  train_op = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=global_step)
  return x, y, w, v, loss, train_op, global_step


def test_in_process_cluster_session_steps_and_graph_mismatch():
  ports = free_ports(4)
  cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:%d" % ports[0], "127.0.0.1:%d" % ports[1]],
                                  "worker": ["127.0.0.1:%d" % ports[2],
                                             "127.0.0.1:%d" % ports[3]]})
  servers = [tf.train.Server(cluster, "ps", 0), tf.train.Server(cluster, "ps", 1)]
  try:
    chief = tf.train.Server(cluster, job_name="worker", task_index=0)
    other = tf.train.Server(cluster, job_name="worker", task_index=1)
    servers += [chief, other]
    assert chief.is_chief and not other.is_chief
    assert chief.target == "grpc://127.0.0.1:%d" % ports[2]

    rng = np.random.RandomState(0)
    true_w = np.array([1.0, -2.0, 0.5], np.float32)
    data_x = rng.normal(size=(64, 3)).astype(np.float32)
    data_y = data_x.dot(true_w)

    graph = tf.Graph()
    with graph.as_default():
      with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:0",
                                                    cluster=cluster)):
        x, y, w, v, loss, train_op, global_step = _model(4)
      assert global_step.op.device == "/job:ps/task:0"
      assert w.op.device == "/job:ps/task:1"
      assert v.op.device == "/job:ps/task:0"
      assert loss.op.device == "/job:worker/task:0"
      feed = {x: data_x, y: data_y}
      sess = tf.Session(chief.target)
      sess.run(tf.global_variables_initializer())  # the chief initializes the cluster
      placement = sess._distributed.stats()["placement"]  # pylint: disable=protected-access
      assert placement["w"] == 1 and placement["v"] == 0  # replica_device_setter's choice
      before = sess.run(loss, feed)  # no train op: a pull and a forward run
      losses_seen = [sess.run([train_op, loss], feed)[1] for _ in range(40)]
      after = sess.run(loss, feed)
      assert sess.run(global_step) == 40
      assert before == pytest.approx(losses_seen[0], rel=1e-5)
      assert after < 0.5 * before, (before, after)

    # A worker whose graph differs from the chief's is refused clearly.
    with tf.Graph().as_default():
      with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x2, y2, _, _, loss2, train2, _ = _model(5)
      bad = tf.Session(other.target)
      with pytest.raises(tf.errors.FailedPreconditionError, match="different training graph"):
        bad.run([train2, loss2], {x2: data_x, y2: data_y})
      bad.close()

    # Another worker with the same graph trains on the same model.
    with tf.Graph().as_default():
      with tf.device(tf.train.replica_device_setter(worker_device="/job:worker/task:1",
                                                    cluster=cluster)):
        x3, y3, _, _, loss3, train3, step3 = _model(4)
      good = tf.Session(other.target)
      assert good.run(loss3, {x3: data_x, y3: data_y}) == pytest.approx(after, rel=1e-5)
      _, step_value = good.run([train3, step3], {x3: data_x, y3: data_y})
      assert step_value == 40  # read before this step's push
      assert good.run(step3) == 41
      good.close()
    sess.close()
  finally:
    for s in servers:
      s.stop()


def test_in_process_adam_resource_variables_save_and_restore(tmp_path):
  """Adam (beta powers replicated on the ps tasks, updated after each push) on
  resource variables; the chief's Saver.save writes a cluster checkpoint whose
  values are the ps tasks' and restores in a single-process Session."""
  ports = free_ports(2)
  cluster = tf.train.ClusterSpec({"ps": ["127.0.0.1:%d" % ports[0]],
                                  "worker": ["127.0.0.1:%d" % ports[1]]})
  ps = tf.train.Server(cluster, "ps", 0)
  chief = tf.train.Server(cluster, "worker", 0)
  rng = np.random.RandomState(1)
  data_x = rng.normal(size=(128, 3)).astype(np.float32)
  data_y = data_x.dot([0.5, -1.0, 2.0]).astype(np.float32)

  def model():
    x = tf.placeholder(tf.float32, [None, 3])
    y = tf.placeholder(tf.float32, [None])
    step = tf.train.get_or_create_global_step()
    w = tf.get_variable("w", [3], initializer=tf.zeros_initializer(), use_resource=True)
    loss = tf.reduce_mean(tf.square(tf.reduce_sum(x * w, axis=1) - y))
    train = tf.train.AdamOptimizer(0.1).minimize(loss, global_step=step)
    return x, y, w, loss, train, step

  try:
    with tf.Graph().as_default():
      with tf.device(tf.train.replica_device_setter(cluster=cluster)):
        x, y, w, loss, train, step = model()
      saver = tf.train.Saver()
      with tf.Session(chief.target) as sess:
        sess.run(tf.global_variables_initializer())
        first = sess.run(loss, {x: data_x, y: data_y})
        for _ in range(30):
          sess.run(train, {x: data_x, y: data_y})
        last = sess.run(loss, {x: data_x, y: data_y})
        assert last < 0.5 * first, (first, last)
        w_cluster = sess.run(w)
        path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
    assert path.endswith("model.ckpt-30"), path
    assert tf.train.latest_checkpoint(str(tmp_path)) == path
    reader = tf.train.NewCheckpointReader(path)
    np.testing.assert_array_equal(reader.get_tensor("w"), w_cluster)
    # Adam's beta powers followed the 30 steps on the ps.
    assert reader.get_tensor("beta1_power") == pytest.approx(0.9 ** 31, rel=1e-4)
    with tf.Graph().as_default():
      x, y, w, loss, train, step = model()
      with tf.Session() as single:
        tf.train.Saver().restore(single, path)
        np.testing.assert_array_equal(single.run(w), w_cluster)
        assert single.run(step) == 30
        assert single.run(loss, {x: data_x, y: data_y}) == pytest.approx(last, rel=1e-5)
  finally:
    chief.stop()
    ps.stop()


def test_ps_process_stops_on_sigterm(tmp_path):
  port = free_ports(1)[0]
  cluster = {"ps": ["127.0.0.1:%d" % port], "worker": ["127.0.0.1:1"]}
  with Processes(tmp_path) as procs:
    proc = procs.start("ps0", [sys.executable, EXAMPLE, "--model_dir", str(tmp_path / "m")],
                       {"cluster": cluster, "task": {"type": "ps", "index": 0}})
    # Once it serves (its port answers), SIGTERM ends it.
    for _ in range(600):
      with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
          break
      assert proc.poll() is None, procs.output("ps0")
      time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    procs.wait("ps0", timeout=60)
    assert "serving at" in procs.output("ps0")


# --- The API and its errors ---------------------------------------------------

def test_cluster_spec_api():
  spec = tf.train.ClusterSpec({"worker": ["w0:2222", "w1:2222"], "ps": {0: "p0:2222"}})
  assert spec.jobs == ["ps", "worker"]
  assert spec.num_tasks("worker") == 2
  assert spec.task_indices("worker") == [0, 1]
  assert spec.task_address("worker", 1) == "w1:2222"
  assert spec.job_tasks("ps") == ["p0:2222"]
  assert spec.as_dict() == {"ps": ["p0:2222"], "worker": ["w0:2222", "w1:2222"]}
  assert tf.train.ClusterSpec(spec) == spec
  assert tf.train.ClusterSpec(spec.as_cluster_def()) == spec
  assert bool(spec) and not tf.train.ClusterSpec({})
  with pytest.raises(ValueError, match="No such job"):
    spec.num_tasks("chief")


@pytest.mark.parametrize("cluster, error, message", [
    ({"ps": ["nohost"]}, ValueError, "address 'nohost' has no port"),
    ({"ps": ["h:99999"]}, ValueError, "bad port '99999'"),
    ({"ps": ["h:1"], "worker": ["h:1"]}, ValueError, "duplicate address 'h:1'"),
    ({"ps": "h:1"}, TypeError, "must be a list or a dictionary"),
    ({"ps": {0: "a:1", 2: "b:2"}}, ValueError, "indices 0..1"),
    ({"p s": ["a:1"]}, ValueError, "p s"),
    ({"ps": [1234]}, TypeError, "must be a string"),
])
def test_bad_cluster_specs(cluster, error, message):
  with pytest.raises(error, match=re.escape(message)):
    tf.train.ClusterSpec(cluster)


@pytest.mark.parametrize("tf_config, message", [
    ('{"cluster": {', "TF_CONFIG is not valid JSON"),
    ('{"task": {"type": "ps", "index": 0}}', 'TF_CONFIG has no "cluster"'),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "evaluatr", "index": 0}}',
     'task type "evaluatr" is not a job of the cluster'),
    ('{"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 3}}',
     "task index 3 is out of range"),
])
def test_bad_tf_config(monkeypatch, tf_config, message):
  monkeypatch.setenv("TF_CONFIG", tf_config)
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  with pytest.raises(ValueError, match=re.escape(message)):
    resolver.cluster_spec()


def test_tf_config_resolver(monkeypatch):
  monkeypatch.setenv("TF_CONFIG", json.dumps({
      "cluster": {"ps": ["a:1"], "worker": {"0": "b:2", "1": "c:3"}},
      "task": {"type": "worker", "index": "1"}, "environment": "cloud"}))
  resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
  assert resolver.cluster_spec().as_dict() == {"ps": ["a:1"], "worker": ["b:2", "c:3"]}
  assert (resolver.task_type, resolver.task_id) == ("worker", 1)
  assert resolver.master() == "grpc://c:3"
  assert resolver.environment == "cloud"
  monkeypatch.delenv("TF_CONFIG")
  assert not tf.distribute.cluster_resolver.TFConfigClusterResolver().cluster_spec()


def test_server_and_session_errors():
  cluster = {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2", "127.0.0.1:3"]}
  with pytest.raises(ValueError, match="job_name 'chief' is not a job of the cluster"):
    tf.train.Server(cluster, job_name="chief", task_index=0, start=False)
  with pytest.raises(ValueError, match="task_index 2 is out of range"):
    tf.train.Server(cluster, job_name="worker", task_index=2, start=False)
  with pytest.raises(ValueError, match="explicit `job_name`"):
    tf.train.Server(cluster, start=False)
  with pytest.raises(ValueError, match="explicit `task_index`"):
    tf.train.Server(cluster, job_name="worker", start=False)
  with pytest.raises(ValueError, match="gRPC only"):
    tf.train.Server(cluster, "ps", 0, protocol="grpc+verbs", start=False)
  with pytest.raises(ValueError, match="has started none|this process has"):
    tf.Session("grpc://127.0.0.1:9")


def test_replica_device_setter_placement():
  cluster = tf.train.ClusterSpec({"ps": ["a:1", "b:2", "c:3"], "worker": ["d:4"]})
  with tf.device(tf.train.replica_device_setter(cluster=cluster)):
    a = tf.Variable(1.0, name="a")
    b = tf.Variable(1.0, name="b")
    with tf.device("/job:ps/task:2"):
      c = tf.Variable(1.0, name="c")  # an inner device wins
    d = tf.get_variable("d", [2], use_resource=True)
    e = a + b
  assert [v.op.device for v in (a, b, c, d)] == [
      "/job:ps/task:0", "/job:ps/task:1", "/job:ps/task:2", "/job:ps/task:0"]
  assert e.op.device == "/job:worker"
  assert tf.train.replica_device_setter(cluster={"worker": ["d:4"]}) is None
  assert tf.train.replica_device_setter(ps_tasks=0) is None
  fn = tf.train.replica_device_setter(ps_tasks=2, ps_strategy=lambda op: 1)
  with tf.device(fn):
    f = tf.Variable(1.0, name="f")
  assert f.op.device == "/job:ps/task:1"
