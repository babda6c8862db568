"""TF-slim's training loop (slim.learning): create_train_op and train.

    train_op = slim.learning.create_train_op(total_loss, optimizer)
    final_loss = slim.learning.train(train_op, logdir, number_of_steps=1000,
                                     save_interval_secs=60)

`train` runs on a MonitoredTrainingSession: it restores from the newest checkpoint
in logdir when there is one (else runs the init op and init_fn), saves checkpoints
every save_interval_secs and at the end, writes summaries every
save_summaries_secs, and stops at number_of_steps (the global step). It logs
"global step N: loss = L (S sec/step)" every log_every_n_steps. A loss that is NaN
or infinite stops training with an error naming the step (slim's check_numerics).
With master (a recflow grpc:// target) and is_chief it trains as a task of a ps
cluster, the way TF-slim does.
"""

import logging
import time

import numpy as np

from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import clip_ops
from recflow.ops import control_flow_ops
from recflow.ops import gen_ops as gen
from recflow.ops import variables as variables_lib
from recflow.summary import summary as summary_lib
from recflow.training import basic_session_run_hooks
from recflow.training import monitored_session
from recflow.training import training_util

__all__ = ["add_gradients_summaries", "clip_gradient_norms", "create_train_op",
           "multiply_gradients", "train", "train_step"]

_logger = logging.getLogger("recflow")
_USE_DEFAULT = object()
_USE_GLOBAL_STEP = object()


def clip_gradient_norms(gradients_to_variables, max_norm):
  """Each gradient clipped to norm max_norm (None gradients kept)."""
  clipped = []
  for grad, var in gradients_to_variables:
    if grad is not None:
      if isinstance(grad, ops.IndexedSlices):
        values = clip_ops.clip_by_norm(grad.values, max_norm)
        grad = ops.IndexedSlices(values, grad.indices, grad.dense_shape)
      else:
        grad = clip_ops.clip_by_norm(grad, max_norm)
    clipped.append((grad, var))
  return clipped


def multiply_gradients(grads_and_vars, gradient_multipliers):
  """Gradients of the variables (or variable names) in gradient_multipliers scaled by
  their multiplier."""
  if not isinstance(grads_and_vars, list):
    raise ValueError("`grads_and_vars` must be a list.")
  if not gradient_multipliers:
    raise ValueError("`gradient_multipliers` is empty.")
  out = []
  for grad, var in grads_and_vars:
    key = var if var in gradient_multipliers else var.op.name
    if grad is not None and key in gradient_multipliers:
      multiplier = ops.convert_to_tensor(gradient_multipliers[key], dtype=grad.dtype)
      if isinstance(grad, ops.IndexedSlices):
        grad = ops.IndexedSlices(gen.mul(grad.values, multiplier), grad.indices,
                                 grad.dense_shape)
      else:
        grad = gen.mul(grad, multiplier)
    out.append((grad, var))
  return out


def add_gradients_summaries(grads_and_vars):
  """A histogram of each gradient and a scalar of its norm."""
  summaries = []
  for grad, var in grads_and_vars:
    if grad is None:
      continue
    values = grad.values if isinstance(grad, ops.IndexedSlices) else grad
    summaries.append(summary_lib.histogram(var.op.name + "/gradient", values))
    summaries.append(summary_lib.scalar(var.op.name + "/gradient_norm",
                                        clip_ops.global_norm([values])))
  return summaries


def create_train_op(total_loss, optimizer, global_step=_USE_GLOBAL_STEP, update_ops=None,
                    variables_to_train=None, clip_gradient_norm=0, summarize_gradients=False,
                    gate_gradients=1, aggregation_method=None,
                    colocate_gradients_with_ops=False, gradient_multipliers=None,
                    check_numerics=True):
  """A tensor that, when run, runs the update ops (batch-norm statistics: UPDATE_OPS by
  default), computes the gradients of total_loss, applies them with optimizer (increasing
  global_step) and returns the loss as it was before the step. Added to TRAIN_OP."""
  del check_numerics  # learning.train checks the loss it fetches (see the module doc)
  if global_step is _USE_GLOBAL_STEP:
    global_step = training_util.get_or_create_global_step()
  global_update_ops = set(ops.get_collection(ops.GraphKeys.UPDATE_OPS))
  update_ops = global_update_ops if update_ops is None else set(update_ops)
  if not global_update_ops.issubset(update_ops):
    _logger.warning("update_ops in create_train_op does not contain all the update_ops in "
                    "GraphKeys.UPDATE_OPS")
  if update_ops:
    with ops.control_dependencies(sorted(update_ops, key=lambda o: o.name)):
      barrier = control_flow_ops.no_op(name="update_barrier")
    with ops.control_dependencies([barrier]):
      total_loss = array_ops.identity(total_loss)
  if variables_to_train is None:
    variables_to_train = variables_lib.trainable_variables()
  grads = optimizer.compute_gradients(
      total_loss, variables_to_train, gate_gradients=gate_gradients,
      aggregation_method=aggregation_method,
      colocate_gradients_with_ops=colocate_gradients_with_ops)
  if gradient_multipliers:
    with ops.name_scope("multiply_grads"):
      grads = multiply_gradients(grads, gradient_multipliers)
  if clip_gradient_norm > 0:
    with ops.name_scope("clip_grads"):
      grads = clip_gradient_norms(grads, clip_gradient_norm)
  if summarize_gradients:
    with ops.name_scope("summarize_grads"):
      add_gradients_summaries(grads)
  missing = [v.op.name for g, v in grads if g is None]
  if len(missing) == len(grads):
    raise ValueError("create_train_op: no gradient flows from the loss %s to any of the "
                     "variables to train (%s)" % (total_loss.name, ", ".join(missing[:5])))
  grad_updates = optimizer.apply_gradients([(g, v) for g, v in grads if g is not None],
                                           global_step=global_step)
  with ops.name_scope("train_op"):
    with ops.control_dependencies([grad_updates]):
      train_op = array_ops.identity(total_loss)
  train_ops = ops.get_collection_ref(ops.GraphKeys.TRAIN_OP)
  if train_op not in train_ops:
    train_ops.append(train_op)
  return train_op


def train_step(sess, train_op, global_step, train_step_kwargs):
  """One step: runs train_op and reads the global step; returns (loss, should_stop).
  train_step_kwargs may hold "number_of_steps" and "log_every_n_steps"."""
  start = time.time()
  total_loss, np_global_step = sess.run([train_op, global_step])
  elapsed = time.time() - start
  if not np.all(np.isfinite(total_loss)):
    raise FloatingPointError("slim.learning.train: the loss is %s at global step %d "
                             "(LossTensor is inf or nan)" % (total_loss, np_global_step))
  every = train_step_kwargs.get("log_every_n_steps")
  if every and np_global_step % every == 0:
    _logger.info("global step %d: loss = %.4f (%.3f sec/step)", np_global_step, total_loss,
                 elapsed)
  should_stop = False
  number_of_steps = train_step_kwargs.get("number_of_steps")
  if number_of_steps is not None and np_global_step >= number_of_steps:
    should_stop = True
  return total_loss, should_stop


def _default(value, default):
  return default if value is _USE_DEFAULT else value


def train(train_op, logdir, train_step_fn=train_step, train_step_kwargs=_USE_DEFAULT,
          log_every_n_steps=1, graph=None, master="", is_chief=True, global_step=None,
          number_of_steps=None, init_op=_USE_DEFAULT, init_feed_dict=None,
          local_init_op=_USE_DEFAULT, init_fn=None, ready_op=_USE_DEFAULT,
          summary_op=_USE_DEFAULT, save_summaries_secs=600, summary_writer=_USE_DEFAULT,
          startup_delay_steps=0, saver=None, save_interval_secs=600, sync_optimizer=None,
          session_config=None, session_wrapper=None, trace_every_n_steps=None,
          ignore_live_threads=False, hooks=None):
  """Runs train_op until number_of_steps (or forever) and returns the last loss.

  logdir holds checkpoints and summaries (None: neither). init_fn(sess) runs after the
  variables are initialized when no checkpoint was restored (e.g.
  assign_from_checkpoint_fn to fine-tune). `hooks` (a recflow addition) are more
  SessionRunHooks."""
  if train_op is None:
    raise ValueError("train_op cannot be None.")
  if sync_optimizer is not None:
    raise NotImplementedError("slim.learning.train(sync_optimizer=...) is not supported by "
                              "recflow; train asynchronously with ps tasks")
  if session_wrapper is not None or trace_every_n_steps:
    raise NotImplementedError("slim.learning.train: session_wrapper and trace_every_n_steps "
                              "are not supported by recflow")
  del ignore_live_threads, summary_writer
  if logdir is None and (summary_op is not _USE_DEFAULT or saver is not None):
    raise ValueError("Cannot provide summary_op or saver when logdir is None")
  graph = graph or train_op.graph
  with graph.as_default():
    if global_step is None:
      global_step = training_util.get_or_create_global_step()
    if train_step_kwargs is _USE_DEFAULT:
      train_step_kwargs = {"number_of_steps": number_of_steps,
                           "log_every_n_steps": log_every_n_steps}
    if summary_op is _USE_DEFAULT:
      summary_op = summary_lib.merge_all()
    scaffold = monitored_session.Scaffold(
        init_op=_default(init_op, None), init_feed_dict=init_feed_dict,
        init_fn=(lambda _, sess: init_fn(sess)) if init_fn else None,
        ready_op=_default(ready_op, None), local_init_op=_default(local_init_op, None),
        summary_op=summary_op, saver=saver)
    all_hooks = list(hooks or [])
    if number_of_steps is not None:
      all_hooks.append(basic_session_run_hooks.StopAtStepHook(last_step=number_of_steps))
    if startup_delay_steps and not is_chief:
      all_hooks.append(basic_session_run_hooks.GlobalStepWaiterHook(startup_delay_steps))
    with monitored_session.MonitoredTrainingSession(
        master=master, is_chief=is_chief, checkpoint_dir=logdir, scaffold=scaffold,
        hooks=all_hooks, save_checkpoint_secs=save_interval_secs if logdir else None,
        save_summaries_secs=save_summaries_secs if summary_op is not None else None,
        save_summaries_steps=None, config=session_config, log_step_count_steps=0) as sess:
      total_loss = None
      while not sess.should_stop():
        total_loss, should_stop = train_step_fn(sess, train_op, global_step,
                                                train_step_kwargs)
        if should_stop:
          break
    if total_loss is not None:
      _logger.info("Finished training! Saving model to disk.")
    return total_loss
