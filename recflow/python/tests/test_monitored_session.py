"""MonitoredTrainingSession, MonitoredSession, SingularMonitoredSession and the
basic hooks: hook order, stopping, checkpoints, resuming, clean ends."""

import logging
import os

import numpy as np
import pytest

import recflow.compat.v1 as tf

RNG = np.random.RandomState(0)
X_DATA = RNG.randn(256, 4).astype(np.float32)
TRUE_W = np.array([[1.5], [-2.0], [0.5], [1.0]], np.float32)
Y_DATA = (X_DATA.dot(TRUE_W) + 0.3 > 0).astype(np.float32)


def logistic_regression(optimizer=None):
  x = tf.placeholder(tf.float32, [None, 4], name="x")
  y = tf.placeholder(tf.float32, [None, 1], name="y")
  w = tf.get_variable("w", [4, 1], initializer=tf.zeros_initializer())
  b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
  logits = tf.matmul(x, w) + b
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
  step = tf.train.get_or_create_global_step()
  opt = optimizer or tf.train.AdamOptimizer(0.1)
  train_op = opt.minimize(loss, global_step=step)
  return x, y, loss, train_op, step


def batch(i):
  idx = np.arange(i * 32, i * 32 + 32) % 256
  return X_DATA[idx], Y_DATA[idx]


class RecordingHook(tf.train.SessionRunHook):
  """Records the calls it gets, in a log shared by several hooks."""

  def __init__(self, name, log, fetch=None):
    self.name = name
    self.log = log
    self.fetch = fetch
    self.results = []

  def begin(self):
    self.log.append((self.name, "begin", tf.get_default_graph().finalized))

  def after_create_session(self, session, coord):
    self.log.append((self.name, "after_create_session", tf.get_default_graph().finalized))
    assert isinstance(coord, tf.train.Coordinator)

  def before_run(self, run_context):
    self.log.append((self.name, "before_run"))
    if self.fetch is not None:
      return tf.train.SessionRunArgs(self.fetch)
    return None

  def after_run(self, run_context, run_values):
    self.log.append((self.name, "after_run"))
    self.results.append(run_values.results)

  def end(self, session):
    self.log.append((self.name, "end"))


def test_trains_logistic_regression_to_decreasing_loss_and_stops_at_step(tmp_path):
  x, y, loss, train_op, step = logistic_regression()
  losses = []
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), hooks=[tf.train.StopAtStepHook(last_step=60)],
      save_checkpoint_steps=25, log_step_count_steps=10) as sess:
    i = 0
    while not sess.should_stop():
      xb, yb = batch(i)
      _, l = sess.run([train_op, loss], {x: xb, y: yb})
      losses.append(l)
      i += 1
  assert len(losses) == 60
  assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:5])
  assert losses[0] == pytest.approx(np.log(2.0), rel=1e-5)
  ckpt = tf.train.latest_checkpoint(str(tmp_path))
  assert ckpt == os.path.join(str(tmp_path), "model.ckpt-60")
  state = tf.train.get_checkpoint_state(str(tmp_path))
  steps = [int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths]
  assert steps == [0, 25, 50, 60]
  assert os.path.exists(os.path.join(str(tmp_path), "graph.pbtxt"))


def test_resumes_from_checkpoint_at_saved_global_step(tmp_path):
  x, y, loss, train_op, step = logistic_regression()
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), hooks=[tf.train.StopAtStepHook(num_steps=30)],
      save_checkpoint_secs=None, save_checkpoint_steps=1000) as sess:
    while not sess.should_stop():
      sess.run(train_op, dict(zip((x, y), batch(0))))
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-30")
  with tf.Graph().as_default():
    w = tf.get_variable("w", [4, 1])
    with tf.Session() as plain:
      tf.train.Saver([w]).restore(plain, tf.train.latest_checkpoint(str(tmp_path)))
      w_saved = plain.run(w)
  assert np.abs(w_saved).sum() > 0

  tf.reset_default_graph()
  x, y, loss, train_op, step = logistic_regression()
  seen = []
  with tf.train.MonitoredTrainingSession(
      checkpoint_dir=str(tmp_path), hooks=[tf.train.StopAtStepHook(num_steps=10)],
      save_checkpoint_steps=1000) as sess:
    first = sess.run(step)
    np.testing.assert_array_equal(sess.run("w:0"), w_saved)
    while not sess.should_stop():
      seen.append(sess.run([train_op, step], dict(zip((x, y), batch(0))))[1])
  assert first == 30
  assert len(seen) == 10
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-40")


def test_hooks_are_called_in_tf_order(tmp_path):
  x, y, loss, train_op, step = logistic_regression()
  log = []
  chief = RecordingHook("chief", log)
  a = RecordingHook("a", log, fetch=loss)
  b = RecordingHook("b", log, fetch={"step": step})
  with tf.train.MonitoredTrainingSession(hooks=[a, b], chief_only_hooks=[chief],
                                         log_step_count_steps=None) as sess:
    assert tf.get_default_graph().finalized
    for i in range(2):
      sess.run(train_op, dict(zip((x, y), batch(i))))
  assert log == [
      ("chief", "begin", False), ("a", "begin", False), ("b", "begin", False),
      ("chief", "after_create_session", True), ("a", "after_create_session", True),
      ("b", "after_create_session", True),
      ("chief", "before_run"), ("a", "before_run"), ("b", "before_run"),
      ("chief", "after_run"), ("a", "after_run"), ("b", "after_run"),
      ("chief", "before_run"), ("a", "before_run"), ("b", "before_run"),
      ("chief", "after_run"), ("a", "after_run"), ("b", "after_run"),
      ("chief", "end"), ("a", "end"), ("b", "end")]
  assert chief.results == [None, None]
  assert a.results[0] == pytest.approx(np.log(2.0), rel=1e-5)
  assert [r["step"] for r in b.results] in ([0, 1], [1, 2])


def test_out_of_range_ends_training_cleanly_and_runs_end_hooks(tmp_path):
  x, y, loss, train_op, step = logistic_regression()
  log = []

  class EndOfInput(tf.train.SessionRunHook):
    def __init__(self):
      self.n = 0

    def before_run(self, run_context):
      self.n += 1
      if self.n > 5:
        raise tf.errors.OutOfRangeError(None, None, "End of sequence")

  with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path),
                                         hooks=[EndOfInput(), RecordingHook("r", log)]) as sess:
    while not sess.should_stop():
      sess.run(train_op, dict(zip((x, y), batch(0))))
  assert log[-1] == ("r", "end")
  # The CheckpointSaverHook saved the last step at the end.
  assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-5")


def test_other_errors_propagate_without_end_hooks():
  x, y, loss, train_op, step = logistic_regression()
  log = []
  with pytest.raises(ValueError, match="boom"):
    with tf.train.MonitoredSession(hooks=[RecordingHook("r", log)]) as sess:
      sess.run(train_op, dict(zip((x, y), batch(0))))
      raise ValueError("boom")
  assert ("r", "end") not in log


def test_nan_tensor_hook():
  v = tf.Variable(1.0)
  loss = tf.log(v - 1.0) * 0.0  # log(0) * 0 = NaN
  step = tf.train.get_or_create_global_step()
  train_op = tf.assign_add(step, 1)
  with pytest.raises(tf.train.NanLossDuringTrainingError, match="NaN loss during training"):
    with tf.train.MonitoredSession(hooks=[tf.train.NanTensorHook(loss)]) as sess:
      sess.run(train_op)
  tf.reset_default_graph()
  v = tf.Variable(1.0)
  loss = tf.log(v - 1.0) * 0.0
  with tf.train.SingularMonitoredSession(
      hooks=[tf.train.NanTensorHook(loss, fail_on_nan_loss=False)]) as sess:
    sess.run(v)
    assert sess.should_stop()
    with pytest.raises(RuntimeError, match="should_stop"):
      sess.run(v)


def test_logging_tensor_hook_and_step_counter(caplog):
  x, y, loss, train_op, step = logistic_regression()
  caplog.set_level(logging.INFO, logger="recflow")
  hooks = [tf.train.LoggingTensorHook({"loss": loss, "step": step.name}, every_n_iter=2),
           tf.train.LoggingTensorHook([step.name], at_end=True,
                                      formatter=lambda v: "final %d" % v[step.name]),
           tf.train.StepCounterHook(every_n_steps=2),
           tf.train.StopAtStepHook(num_steps=5)]
  with tf.train.SingularMonitoredSession(hooks=hooks) as sess:
    while not sess.should_stop():
      sess.run(train_op, dict(zip((x, y), batch(0))))
  messages = [r.getMessage() for r in caplog.records]
  logged = [m for m in messages if m.startswith("loss = ")]
  assert len(logged) == 3  # iterations 0, 2, 4
  assert ", step = " in logged[0]
  assert [m for m in messages if m.startswith("final ")] == ["final 5"]
  assert any(m.startswith("global_step/sec: ") for m in messages)
  with pytest.raises(ValueError):
    tf.train.LoggingTensorHook([loss])
  with pytest.raises(ValueError):
    tf.train.StopAtStepHook()


def test_hooks_feed_and_conflicts():
  p = tf.placeholder(tf.float32, [])
  q = p * 2.0
  tf.train.get_or_create_global_step()
  with tf.train.MonitoredSession(hooks=[tf.train.FeedFnHook(lambda: {p: 3.0})]) as sess:
    assert sess.run(q) == 6.0
    with pytest.raises(RuntimeError, match="fed by a SessionRunHook and user"):
      sess.run(q, {p: 1.0})


def test_stop_at_step_needs_global_step():
  tf.Variable(1.0)
  with pytest.raises(RuntimeError, match="Global step should be created"):
    tf.train.MonitoredSession(hooks=[tf.train.StopAtStepHook(num_steps=1)])


def test_scaffold_init_fn_and_checkpoint_filename(tmp_path):
  v = tf.Variable(1.0, name="v")
  set_v = tf.assign(v, 5.0)  # built before the graph is finalized
  called = []

  def init_fn(scaffold, sess):
    called.append(scaffold)
    sess.run(set_v)
  scaffold = tf.train.Scaffold(init_fn=init_fn)
  with tf.train.SingularMonitoredSession(scaffold=scaffold) as sess:
    assert sess.run(v) == 5.0
    path = scaffold.saver.save(sess.raw_session(), str(tmp_path / "m"))
  assert called == [scaffold]
  tf.reset_default_graph()
  v = tf.Variable(0.0, name="v")
  with tf.train.SingularMonitoredSession(checkpoint_filename_with_path=path) as sess:
    assert sess.run(v) == 5.0


def test_checkpoint_saver_hook_every_n_steps_with_listener(tmp_path):
  x, y, loss, train_op, step = logistic_regression(tf.train.GradientDescentOptimizer(0.1))
  saves = []

  class Listener(tf.train.CheckpointSaverListener):
    def after_save(self, session, global_step_value):
      saves.append(global_step_value)
      return global_step_value >= 6  # stop training after this save

  saver = tf.train.Saver(max_to_keep=2)
  hook = tf.train.CheckpointSaverHook(str(tmp_path), save_steps=3, saver=saver,
                                      listeners=[Listener()])
  with tf.train.MonitoredSession(hooks=[hook]) as sess:
    n = 0
    while not sess.should_stop():
      sess.run(train_op, dict(zip((x, y), batch(0))))
      n += 1
  assert saves == [0, 3, 6]
  assert n == 6
  assert saver.last_checkpoints == [os.path.join(str(tmp_path), "model.ckpt-%d" % s)
                                    for s in (3, 6)]
  with pytest.raises(ValueError):
    tf.train.CheckpointSaverHook(str(tmp_path))


def test_run_step_fn():
  x, y, loss, train_op, step = logistic_regression()
  steps = []

  def step_fn(step_context):
    step_context.run_with_hooks(train_op, dict(zip((x, y), batch(0))))
    steps.append(step_context.session.run(step))
    if steps[-1] >= 3:
      step_context.request_stop()  # raises StopIteration: the with block ends cleanly
  with tf.train.MonitoredSession() as sess:
    while not sess.should_stop():
      sess.run_step_fn(step_fn)
  assert steps == [1, 2, 3]
  with tf.Graph().as_default():
    with tf.train.MonitoredSession() as sess:
      with pytest.raises(ValueError, match="step_context"):
        sess.run_step_fn(lambda ctx: None)


def test_close_unfinalizes_the_graph_and_twice_is_an_error():
  tf.Variable(1.0)
  sess = tf.train.MonitoredSession()
  assert tf.get_default_graph().finalized
  sess.close()
  assert not tf.get_default_graph().finalized
  with pytest.raises(RuntimeError, match="already closed"):
    sess.close()
  with pytest.raises(RuntimeError, match="already closed"):
    sess.run(tf.global_variables()[0])
  assert sess.should_stop()


def test_hooks_see_run_options_and_metadata():
  v = tf.Variable(1.0)
  seen = []

  class OptionsHook(tf.train.SessionRunHook):
    def before_run(self, run_context):
      return tf.train.SessionRunArgs(None, options=tf.RunOptions(timeout_in_ms=5000))

    def after_run(self, run_context, run_values):
      seen.append((run_values.options.timeout_in_ms, run_values.run_metadata is not None))
  with tf.train.MonitoredSession(hooks=[OptionsHook()]) as sess:
    assert sess.run(v) == 1.0
  assert seen == [(5000, True)]
