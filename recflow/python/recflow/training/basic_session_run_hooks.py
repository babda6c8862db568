"""TF 1.x's basic SessionRunHooks: StopAtStepHook, CheckpointSaverHook,
LoggingTensorHook, NanTensorHook, StepCounterHook, SummarySaverHook,
FeedFnHook, FinalOpsHook, and the SecondOrStepTimer they share. The hooks that
write to an output directory share one FileWriter per directory
(tf.summary.FileWriterCache), as in TF."""

import logging
import os
import time

import numpy as np

from recflow.framework import ops
from recflow.framework.graph_io import write_graph
from recflow.summary import summary_pb
from recflow.summary.writer import FileWriterCache
from recflow.training import training_util
from recflow.training.session_run_hook import SessionRunArgs
from recflow.training.session_run_hook import SessionRunHook

_logger = logging.getLogger("recflow")


def _as_graph_element(obj):
  graph = ops.get_default_graph()
  if not isinstance(obj, str):
    if hasattr(obj, "_as_graph_element"):
      obj = obj._as_graph_element()  # pylint: disable=protected-access
    if not isinstance(obj, (ops.Tensor, ops.Operation)) or obj.graph is not graph:
      raise ValueError("Passed %s should have graph attribute that is equal to current "
                       "graph %s." % (obj, graph))
    return obj
  if ":" in obj:
    return graph.as_graph_element(obj)
  element = graph.as_graph_element(obj + ":0")
  try:
    graph.as_graph_element(obj + ":1")
  except (KeyError, ValueError):
    return element
  raise ValueError("Name %s is ambiguous, as this `Operation` has multiple outputs (at least "
                   "2)." % obj)


class SecondOrStepTimer(object):
  """Triggers every every_secs seconds or every every_steps steps (one of them)."""

  def __init__(self, every_secs=None, every_steps=None):
    self._last_triggered_step = None
    self._last_triggered_time = None
    self._every_secs = every_secs
    self._every_steps = every_steps
    if every_secs is None and every_steps is None:
      raise ValueError("Either every_secs or every_steps should be provided.")
    if every_secs is not None and every_steps is not None:
      raise ValueError("Can not provide both every_secs and every_steps.")

  def reset(self):
    self._last_triggered_step = None
    self._last_triggered_time = None

  def should_trigger_for_step(self, step):
    if self._last_triggered_step is None:
      return True
    if self._last_triggered_step == step:
      return False
    if self._every_secs is not None:
      if time.time() >= self._last_triggered_time + self._every_secs:
        return True
    if self._every_steps is not None:
      if step >= self._last_triggered_step + self._every_steps:
        return True
    return False

  def update_last_triggered_step(self, step):
    """Records a trigger at step; returns (elapsed secs, elapsed steps) since the
    last one, or (None, None) the first time."""
    now = time.time()
    if self._last_triggered_time is None:
      elapsed_secs = elapsed_steps = None
    else:
      elapsed_secs = now - self._last_triggered_time
      elapsed_steps = step - self._last_triggered_step
    self._last_triggered_time = now
    self._last_triggered_step = step
    return elapsed_secs, elapsed_steps

  def last_triggered_step(self):
    return self._last_triggered_step


class NeverTriggerTimer(SecondOrStepTimer):

  def __init__(self):  # pylint: disable=super-init-not-called
    self._last_triggered_step = None
    self._last_triggered_time = None

  def should_trigger_for_step(self, step):
    return False

  def update_last_triggered_step(self, step):
    return (None, None)


def _require_global_step(hook_name):
  step = training_util.get_global_step()
  if step is None:
    raise RuntimeError("Global step should be created to use %s." % hook_name)
  return step


class LoggingTensorHook(SessionRunHook):
  """Logs the given tensors every N local steps, every N seconds, or at the end."""

  def __init__(self, tensors, every_n_iter=None, every_n_secs=None, at_end=False,
               formatter=None):
    only_log_at_end = at_end and every_n_iter is None and every_n_secs is None
    if not only_log_at_end and (every_n_iter is None) == (every_n_secs is None):
      raise ValueError("either at_end and/or exactly one of every_n_iter and every_n_secs "
                       "must be provided.")
    if every_n_iter is not None and every_n_iter <= 0:
      raise ValueError("invalid every_n_iter=%s." % every_n_iter)
    if not isinstance(tensors, dict):
      self._tag_order = list(tensors)
      tensors = {item: item for item in tensors}
    else:
      self._tag_order = sorted(tensors.keys())
    self._tensors = tensors
    self._formatter = formatter
    self._timer = (NeverTriggerTimer() if only_log_at_end else
                   SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter))
    self._log_at_end = at_end

  def begin(self):
    self._timer.reset()
    self._iter_count = 0
    self._current_tensors = {tag: _as_graph_element(t) for tag, t in self._tensors.items()}

  def before_run(self, run_context):  # pylint: disable=unused-argument
    self._should_trigger = self._timer.should_trigger_for_step(self._iter_count)
    if self._should_trigger:
      return SessionRunArgs(self._current_tensors)
    return None

  def _log_tensors(self, tensor_values):
    original = np.get_printoptions()
    np.set_printoptions(suppress=True)
    try:
      elapsed_secs, _ = self._timer.update_last_triggered_step(self._iter_count)
      if self._formatter:
        _logger.info(self._formatter(tensor_values))
      else:
        stats = ["%s = %s" % (tag, tensor_values[tag]) for tag in self._tag_order]
        if elapsed_secs is not None:
          _logger.info("%s (%.3f sec)", ", ".join(stats), elapsed_secs)
        else:
          _logger.info("%s", ", ".join(stats))
    finally:
      np.set_printoptions(**original)

  def after_run(self, run_context, run_values):
    if self._should_trigger:
      self._log_tensors(run_values.results)
    self._iter_count += 1

  def end(self, session):
    if self._log_at_end:
      self._log_tensors(session.run(self._current_tensors))


class StopAtStepHook(SessionRunHook):
  """Requests a stop after num_steps more steps, or once the global step reaches
  last_step."""

  def __init__(self, num_steps=None, last_step=None):
    if num_steps is None and last_step is None:
      raise ValueError("One of num_steps or last_step must be specified.")
    if num_steps is not None and last_step is not None:
      raise ValueError("Only one of num_steps or last_step can be specified.")
    self._num_steps = num_steps
    self._last_step = last_step

  def begin(self):
    self._global_step_tensor = _require_global_step("StopAtStepHook")

  def after_create_session(self, session, coord):
    if self._last_step is None:
      global_step = session.run(self._global_step_tensor)
      self._last_step = int(global_step) + self._num_steps

  def before_run(self, run_context):  # pylint: disable=unused-argument
    return SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    global_step = int(run_values.results) + 1
    if global_step >= self._last_step:
      # The fetched value may predate this step's increment: read it again.
      step = int(run_context.session.run(self._global_step_tensor))
      if step >= self._last_step:
        run_context.request_stop()


class CheckpointSaverListener(object):
  """Called around the saves of a CheckpointSaverHook; after_save returning True
  stops training."""

  def begin(self):
    pass

  def before_save(self, session, global_step_value):
    pass

  def after_save(self, session, global_step_value):
    pass

  def end(self, session, global_step_value):
    pass


class CheckpointSaverHook(SessionRunHook):
  """Saves a checkpoint every N steps or seconds, when the session is created and
  at the end."""

  def __init__(self, checkpoint_dir, save_secs=None, save_steps=None, saver=None,
               checkpoint_basename="model.ckpt", scaffold=None, listeners=None,
               save_graph_def=True):
    _logger.info("Create CheckpointSaverHook.")
    if saver is not None and scaffold is not None:
      raise ValueError("You cannot provide both saver and scaffold.")
    self._saver = saver
    self._checkpoint_dir = checkpoint_dir
    self._save_path = os.path.join(checkpoint_dir, checkpoint_basename)
    self._scaffold = scaffold
    self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
    self._listeners = listeners or []
    self._steps_per_run = 1
    self._save_graph_def = save_graph_def

  def _set_steps_per_run(self, steps_per_run):
    self._steps_per_run = steps_per_run

  def begin(self):
    os.makedirs(self._checkpoint_dir, exist_ok=True)
    self._summary_writer = FileWriterCache.get(self._checkpoint_dir)
    self._global_step_tensor = _require_global_step("CheckpointSaverHook")
    for l in self._listeners:
      l.begin()

  def after_create_session(self, session, coord):
    global_step = int(session.run(self._global_step_tensor))
    if self._save_graph_def:
      write_graph(ops.get_default_graph(), self._checkpoint_dir, "graph.pbtxt")
      self._summary_writer.add_graph(ops.get_default_graph())
    self._save(session, global_step)
    self._timer.update_last_triggered_step(global_step)

  def before_run(self, run_context):  # pylint: disable=unused-argument
    return SessionRunArgs(self._global_step_tensor)

  def after_run(self, run_context, run_values):
    stale_global_step = int(run_values.results)
    if self._timer.should_trigger_for_step(stale_global_step + self._steps_per_run):
      global_step = int(run_context.session.run(self._global_step_tensor))
      if self._timer.should_trigger_for_step(global_step):
        self._timer.update_last_triggered_step(global_step)
        if self._save(run_context.session, global_step):
          run_context.request_stop()

  def end(self, session):
    last_step = int(session.run(self._global_step_tensor))
    if last_step != self._timer.last_triggered_step():
      self._save(session, last_step)
    for l in self._listeners:
      l.end(session, last_step)

  def _save(self, session, step):
    _logger.info("Saving checkpoints for %d into %s.", step, self._save_path)
    for l in self._listeners:
      l.before_save(session, step)
    self._get_saver().save(session, self._save_path, global_step=step,
                           write_meta_graph=self._save_graph_def)
    self._summary_writer.add_session_log(
        summary_pb.SessionLog(status=summary_pb.SessionLog.CHECKPOINT,
                              checkpoint_path=self._save_path), step)
    should_stop = False
    for l in self._listeners:
      if l.after_save(session, step):
        _logger.info("A CheckpointSaverListener requested that training be stopped. "
                     "listener: %s", l)
        should_stop = True
    return should_stop

  def _get_saver(self):
    if self._saver is not None:
      return self._saver
    if self._scaffold is not None:
      return self._scaffold.saver
    savers = ops.get_collection(ops.GraphKeys.SAVERS)
    if not savers:
      raise RuntimeError("No items in collection {}. Please add a saver to the collection or "
                         "provide a saver or scaffold.".format(ops.GraphKeys.SAVERS))
    if len(savers) > 1:
      raise RuntimeError("More than one item in collection {}. Please indicate which one to "
                         "use by passing it to the constructor.".format(ops.GraphKeys.SAVERS))
    self._saver = savers[0]
    return savers[0]


class StepCounterHook(SessionRunHook):
  """Logs global steps per second ("global_step/sec") and, given an output_dir
  or a summary_writer, writes it as a scalar summary."""

  def __init__(self, every_n_steps=100, every_n_secs=None, output_dir=None,
               summary_writer=None):
    if (every_n_steps is None) == (every_n_secs is None):
      raise ValueError("exactly one of every_n_steps and every_n_secs should be provided.")
    self._timer = SecondOrStepTimer(every_steps=every_n_steps, every_secs=every_n_secs)
    self._output_dir = output_dir
    self._summary_writer = summary_writer
    self._steps_per_run = 1
    self._last_rate = None

  def _set_steps_per_run(self, steps_per_run):
    self._steps_per_run = steps_per_run

  def begin(self):
    if self._summary_writer is None and self._output_dir:
      self._summary_writer = FileWriterCache.get(self._output_dir)
    self._global_step_tensor = _require_global_step("StepCounterHook")
    self._summary_tag = training_util.get_global_step().op.name + "/sec"

  def before_run(self, run_context):  # pylint: disable=unused-argument
    return SessionRunArgs(self._global_step_tensor)

  def _log_and_record(self, elapsed_steps, elapsed_time, global_step):
    steps_per_sec = elapsed_steps / elapsed_time
    self._last_rate = steps_per_sec
    if self._summary_writer is not None:
      summary = summary_pb.Summary(value=[summary_pb.Summary.Value(
          tag=self._summary_tag, simple_value=steps_per_sec)])
      self._summary_writer.add_summary(summary, global_step)
    _logger.info("%s: %g", self._summary_tag, steps_per_sec)

  def after_run(self, run_context, run_values):
    stale_global_step = int(run_values.results)
    if self._timer.should_trigger_for_step(stale_global_step + self._steps_per_run):
      global_step = int(run_context.session.run(self._global_step_tensor))
      if self._timer.should_trigger_for_step(global_step):
        elapsed_time, elapsed_steps = self._timer.update_last_triggered_step(global_step)
        if elapsed_time is not None and elapsed_time > 0:
          self._log_and_record(elapsed_steps, elapsed_time, global_step)
    if stale_global_step == getattr(self, "_last_global_step", None):
      _logger.debug("It seems that global step (tf.train.get_global_step) has not been "
                    "increased. Current value (could be stable): %s vs previous value: %s.",
                    stale_global_step, self._last_global_step)
    self._last_global_step = stale_global_step


class SummarySaverHook(SessionRunHook):
  """Runs the summary op every save_steps steps or save_secs seconds and
  writes its result to output_dir (or summary_writer), with a SessionLog START
  event at the first step, as TF does. The op is `summary_op` (a tensor or a
  list of tensors), or the scaffold's (by default tf.summary.merge_all())."""

  def __init__(self, save_steps=None, save_secs=None, output_dir=None, summary_writer=None,
               scaffold=None, summary_op=None):
    if ((scaffold is None and summary_op is None) or
        (scaffold is not None and summary_op is not None)):
      raise ValueError("Exactly one of scaffold or summary_op must be provided.")
    self._summary_op = summary_op
    self._summary_writer = summary_writer
    self._output_dir = output_dir
    self._scaffold = scaffold
    self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)

  def begin(self):
    if self._summary_writer is None and self._output_dir:
      self._summary_writer = FileWriterCache.get(self._output_dir)
    self._next_step = None
    self._global_step_tensor = training_util.get_global_step()
    if self._global_step_tensor is None:
      raise RuntimeError("Global step should be created to use SummarySaverHook.")

  def before_run(self, run_context):  # pylint: disable=unused-argument
    self._request_summary = (self._next_step is None or
                             self._timer.should_trigger_for_step(self._next_step))
    requests = {"global_step": self._global_step_tensor}
    if self._request_summary:
      summary_op = self._get_summary_op()
      if summary_op is not None:
        requests["summary"] = summary_op
    return SessionRunArgs(requests)

  def after_run(self, run_context, run_values):
    if not self._summary_writer:
      return
    global_step = int(run_values.results["global_step"]) + 1
    if self._next_step is None or self._request_summary:
      global_step = int(run_context.session.run(self._global_step_tensor))
    if self._next_step is None:
      self._summary_writer.add_session_log(
          summary_pb.SessionLog(status=summary_pb.SessionLog.START), global_step)
    if self._request_summary:
      self._timer.update_last_triggered_step(global_step)
      for summary in run_values.results.get("summary", []):
        self._summary_writer.add_summary(summary, global_step)
    self._next_step = global_step + 1

  def end(self, session=None):  # pylint: disable=unused-argument
    if self._summary_writer:
      self._summary_writer.flush()

  def _get_summary_op(self):
    summary_op = self._summary_op
    if summary_op is None and self._scaffold is not None:
      summary_op = self._scaffold.summary_op
    if summary_op is None:
      return None
    if not isinstance(summary_op, list):
      return [summary_op]
    return summary_op


class NanLossDuringTrainingError(RuntimeError):

  def __str__(self):
    return "NaN loss during training."


class NanTensorHook(SessionRunHook):
  """Raises NanLossDuringTrainingError (or requests a stop) when the loss is NaN."""

  def __init__(self, loss_tensor, fail_on_nan_loss=True):
    self._loss_tensor = loss_tensor
    self._fail_on_nan_loss = fail_on_nan_loss

  def before_run(self, run_context):  # pylint: disable=unused-argument
    return SessionRunArgs(self._loss_tensor)

  def after_run(self, run_context, run_values):
    if np.isnan(run_values.results):
      failure_message = "Model diverged with loss = NaN."
      if self._fail_on_nan_loss:
        _logger.error(failure_message)
        raise NanLossDuringTrainingError
      _logger.warning(failure_message)
      run_context.request_stop()


class FeedFnHook(SessionRunHook):
  """Adds feed_fn()'s feeds to every run."""

  def __init__(self, feed_fn):
    self.feed_fn = feed_fn

  def before_run(self, run_context):  # pylint: disable=unused-argument
    return SessionRunArgs(fetches=None, feed_dict=self.feed_fn())


class FinalOpsHook(SessionRunHook):
  """Runs final_ops when the session ends; their values in final_ops_values."""

  def __init__(self, final_ops, final_ops_feed_dict=None):
    self._final_ops = final_ops
    self._final_ops_feed_dict = final_ops_feed_dict
    self._final_ops_values = None

  @property
  def final_ops_values(self):
    return self._final_ops_values

  def end(self, session):
    if self._final_ops is not None:
      self._final_ops_values = session.run(self._final_ops, feed_dict=self._final_ops_feed_dict)


class GlobalStepWaiterHook(SessionRunHook):
  """Delays the first run until the global step reaches wait_until_step."""

  def __init__(self, wait_until_step):
    self._wait_until_step = wait_until_step

  def begin(self):
    self._worker_is_started = False
    self._global_step_tensor = _require_global_step("GlobalStepWaiterHook")

  def before_run(self, run_context):
    if self._worker_is_started or self._wait_until_step <= 0:
      self._worker_is_started = True
      return None
    while True:
      current = int(run_context.session.run(self._global_step_tensor))
      if current >= self._wait_until_step:
        self._worker_is_started = True
        return None
      time.sleep(0.5)
