"""TF-slim's evaluation (slim.evaluation): evaluate_once restores a checkpoint and runs the
metric updates, evaluation_loop does so for each new checkpoint of a directory.

    names_to_values, names_to_updates = slim.metrics.aggregate_metric_map({
        "accuracy": slim.metrics.streaming_accuracy(predictions, labels)})
    values = slim.evaluation.evaluate_once("", checkpoint_path, logdir, num_evals=10,
                                           eval_op=list(names_to_updates.values()),
                                           final_op=names_to_values)

The eval_op runs num_evals times, or until the input is exhausted (an OutOfRangeError
from a dataset of one epoch ends the evaluation early, as TF's queues did); then the
final_op's value is returned, and the summary op's value (tf.summary.merge_all() by
default) is written to logdir at the checkpoint's global step.
"""

import logging
import os
import time

from recflow.client import session as session_lib
from recflow.framework import errors
from recflow.framework import ops
from recflow.ops import control_flow_ops
from recflow.ops import variables as variables_lib
from recflow.summary import summary as summary_lib
from recflow.summary import writer as writer_lib
from recflow.training import checkpoint_management
from recflow.training import saver as saver_lib
from recflow.training import training_util

__all__ = ["evaluate_once", "evaluation_loop", "wait_for_new_checkpoint",
           "checkpoints_iterator"]

_logger = logging.getLogger("recflow")
_USE_DEFAULT = object()


def _run_evaluation(sess, num_evals, eval_op, eval_op_feed_dict):
  done = 0
  while num_evals is None or done < num_evals:
    try:
      sess.run(eval_op, feed_dict=eval_op_feed_dict)
    except errors.OutOfRangeError:
      _logger.info("Evaluation input exhausted after %d of %s evaluations", done,
                   num_evals if num_evals is not None else "unbounded")
      break
    done += 1
    if num_evals and (done % max(1, num_evals // 10) == 0 or done == num_evals):
      _logger.info("Evaluation [%d/%d]", done, num_evals)
  return done


def evaluate_once(master, checkpoint_path, logdir, num_evals=1, initial_op=None,
                  initial_op_feed_dict=None, eval_op=None, eval_op_feed_dict=None,
                  final_op=None, final_op_feed_dict=None, summary_op=_USE_DEFAULT,
                  summary_op_feed_dict=None, variables_to_restore=None, session_config=None,
                  hooks=None):
  """Restores checkpoint_path into a new session, runs initial_op, eval_op num_evals times
  (None: until the input ends) and returns final_op's value."""
  if hooks:
    raise NotImplementedError("slim.evaluation.evaluate_once(hooks=...) is not supported by "
                              "recflow")
  if not checkpoint_path or not checkpoint_management.checkpoint_exists(checkpoint_path):
    raise ValueError("evaluate_once: no checkpoint at %r" % (checkpoint_path,))
  graph = ops.get_default_graph()
  if summary_op is _USE_DEFAULT:
    summary_op = summary_lib.merge_all()
  saver = saver_lib.Saver(variables_to_restore if variables_to_restore is not None
                          else variables_lib.global_variables())
  local_init = control_flow_ops.group(variables_lib.local_variables_initializer(),
                                      *ops.get_collection(ops.GraphKeys.TABLE_INITIALIZERS))
  _logger.info("Starting evaluation of %s", checkpoint_path)
  start = time.time()
  with session_lib.Session(master, graph=graph, config=session_config) as sess:
    saver.restore(sess, checkpoint_path)
    sess.run(local_init)
    if initial_op is not None:
      sess.run(initial_op, feed_dict=initial_op_feed_dict)
    if eval_op is not None:
      _run_evaluation(sess, num_evals, eval_op, eval_op_feed_dict)
    final_value = None
    if final_op is not None:
      final_value = sess.run(final_op, feed_dict=final_op_feed_dict)
    if summary_op is not None and logdir:
      step_tensor = training_util.get_global_step(graph)
      step = int(sess.run(step_tensor)) if step_tensor is not None else 0
      summary = sess.run(summary_op, feed_dict=summary_op_feed_dict)
      writer = writer_lib.FileWriter(logdir)
      writer.add_summary(summary, step)
      writer.close()
  _logger.info("Finished evaluation of %s in %.1f s", checkpoint_path, time.time() - start)
  return final_value


def wait_for_new_checkpoint(checkpoint_dir, last_checkpoint=None, seconds_to_sleep=1,
                            timeout=None):
  """The newest checkpoint of checkpoint_dir once it differs from last_checkpoint; None
  after timeout seconds."""
  deadline = None if timeout is None else time.time() + timeout
  while True:
    path = checkpoint_management.latest_checkpoint(checkpoint_dir)
    if path is not None and path != last_checkpoint:
      return path
    if deadline is not None and time.time() + seconds_to_sleep > deadline:
      return None
    time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None):
  """Yields each new checkpoint of checkpoint_dir, at most one per min_interval_secs,
  until none appears for timeout seconds."""
  checkpoint_path = None
  while True:
    new_path = wait_for_new_checkpoint(checkpoint_dir, checkpoint_path, timeout=timeout)
    if new_path is None:
      return
    start = time.time()
    checkpoint_path = new_path
    yield checkpoint_path
    wait = min_interval_secs - (time.time() - start)
    if wait > 0:
      time.sleep(wait)


def evaluation_loop(master, checkpoint_dir, logdir, num_evals=1, initial_op=None,
                    initial_op_feed_dict=None, init_fn=None, eval_op=None,
                    eval_op_feed_dict=None, final_op=None, final_op_feed_dict=None,
                    summary_op=_USE_DEFAULT, summary_op_feed_dict=None,
                    variables_to_restore=None, eval_interval_secs=60,
                    max_number_of_evaluations=None, session_config=None, timeout=None,
                    hooks=None):
  """evaluate_once on each new checkpoint of checkpoint_dir, every eval_interval_secs at
  most, until max_number_of_evaluations or no new checkpoint for timeout seconds. Returns
  the last final_op value."""
  if init_fn is not None:
    raise NotImplementedError("slim.evaluation.evaluation_loop(init_fn=...) is not supported "
                              "by recflow")
  if not os.path.isdir(checkpoint_dir):
    raise ValueError("evaluation_loop: %r is not a directory" % (checkpoint_dir,))
  final_value = None
  count = 0
  for path in checkpoints_iterator(checkpoint_dir, eval_interval_secs, timeout):
    final_value = evaluate_once(master, path, logdir, num_evals, initial_op,
                                initial_op_feed_dict, eval_op, eval_op_feed_dict, final_op,
                                final_op_feed_dict, summary_op, summary_op_feed_dict,
                                variables_to_restore, session_config, hooks)
    count += 1
    if max_number_of_evaluations is not None and count >= max_number_of_evaluations:
      break
  return final_value
