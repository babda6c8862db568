"""tf.train.MonitoredSession, SingularMonitoredSession, MonitoredTrainingSession,
Scaffold and the session creators (TF 1.x's semantics, one process).

Order of hook calls, as TF: begin() of every hook; the Scaffold finalizes the
graph; the session is created (restored from the newest checkpoint of
checkpoint_dir if there is one, else initialized); after_create_session() of
every hook; then around each run() before_run() of every hook, the run with
the hooks' fetches and feeds merged in, after_run() of every hook; on close
without an error, end() of every hook, then the session closes. Leaving a
`with` block on OutOfRangeError (end of input) or StopIteration is a clean end.
"""

import inspect
import logging

from recflow.client import session as session_lib
from recflow.framework import errors
from recflow.framework import ops
from recflow.ops import control_flow_ops
from recflow.ops import variables
from recflow.summary import summary
from recflow.training import basic_session_run_hooks
from recflow.training import checkpoint_management
from recflow.training import coordinator
from recflow.training import saver as saver_lib
from recflow.training.session_run_hook import SessionRunArgs
from recflow.training.session_run_hook import SessionRunContext
from recflow.training.session_run_hook import SessionRunValues

_logger = logging.getLogger("recflow")

USE_DEFAULT = object()


class Scaffold(object):
  """The init op, local init op, init feeds/fn and saver a MonitoredSession uses;
  finalize() fills in the defaults and finalizes the graph."""

  def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
               ready_for_local_init_op=None, local_init_op=None, summary_op=None, saver=None,
               copy_from_scaffold=None):
    if copy_from_scaffold is not None:
      if not isinstance(copy_from_scaffold, Scaffold):
        raise TypeError("copy_from_scaffold is not a Scaffold instance.")
      coalesce = lambda a, b: a if a is not None else b
      init_op = coalesce(init_op, copy_from_scaffold.init_op)
      init_feed_dict = coalesce(init_feed_dict, copy_from_scaffold._init_feed_dict)  # pylint: disable=protected-access
      init_fn = coalesce(init_fn, copy_from_scaffold._user_init_fn)  # pylint: disable=protected-access
      ready_op = coalesce(ready_op, copy_from_scaffold.ready_op)
      ready_for_local_init_op = coalesce(ready_for_local_init_op,
                                         copy_from_scaffold.ready_for_local_init_op)
      local_init_op = coalesce(local_init_op, copy_from_scaffold.local_init_op)
      summary_op = coalesce(summary_op, copy_from_scaffold.summary_op)
      saver = coalesce(saver, copy_from_scaffold.saver)
    self._user_init_fn = init_fn
    self._init_fn = (lambda sess: init_fn(self, sess)) if init_fn else None
    self._init_op = init_op
    self._init_feed_dict = init_feed_dict
    self._ready_op = ready_op
    self._ready_for_local_init_op = ready_for_local_init_op
    self._local_init_op = local_init_op
    self._summary_op = summary_op
    self._saver = saver

  def finalize(self):
    graph = ops.get_default_graph()
    if self._init_op is None:
      self._init_op = Scaffold.get_or_default(
          "init_op", ops.GraphKeys.INIT_OP,
          lambda: variables.global_variables_initializer())
    if self._local_init_op is None:
      self._local_init_op = Scaffold.get_or_default(
          "local_init_op", ops.GraphKeys.LOCAL_INIT_OP, Scaffold.default_local_init_op)
    if self._summary_op is None:
      self._summary_op = Scaffold.get_or_default(
          "summary_op", ops.GraphKeys.SUMMARY_OP, summary.merge_all)
    if self._saver is None:
      self._saver = _get_saver_or_default()
    graph.finalize()
    _logger.info("Graph was finalized.")
    return self

  @property
  def init_fn(self):
    return self._init_fn

  @property
  def init_op(self):
    return self._init_op

  @property
  def ready_op(self):
    return self._ready_op

  @property
  def ready_for_local_init_op(self):
    return self._ready_for_local_init_op

  @property
  def local_init_op(self):
    return self._local_init_op

  @property
  def summary_op(self):
    return self._summary_op

  @property
  def saver(self):
    return self._saver

  @property
  def init_feed_dict(self):
    return self._init_feed_dict

  @staticmethod
  def get_or_default(arg_name, collection_key, default_constructor):
    elements = ops.get_collection(collection_key)
    if elements:
      if len(elements) > 1:
        raise RuntimeError("More than one item in the collection \"%s\". Please indicate which "
                           "one to use by passing it to the tf.Scaffold constructor as:  "
                           "tf.Scaffold(%s=item to use)" % (collection_key, arg_name))
      return elements[0]
    op = default_constructor()
    if op is not None:
      ops.add_to_collection(collection_key, op)
    return op

  @staticmethod
  def default_local_init_op():
    return control_flow_ops.group(variables.local_variables_initializer())


def _get_saver_or_default():
  savers = ops.get_collection(ops.GraphKeys.SAVERS)
  if savers:
    if len(savers) > 1:
      raise RuntimeError("More than one item in collection {}. Please indicate which one to use "
                         "by passing it to the constructor.".format(ops.GraphKeys.SAVERS))
    return savers[0]
  saver = saver_lib.Saver(sharded=True, allow_empty=True)
  if saver is not None:
    ops.add_to_collection(ops.GraphKeys.SAVERS, saver)
  return saver


class SessionCreator(object):

  def create_session(self):
    raise NotImplementedError("create_session is not implemented for {}.".format(self))


class ChiefSessionCreator(SessionCreator):
  """Creates a session, restores it from a checkpoint if there is one (the given
  file, else the newest in checkpoint_dir), else runs the init op and init_fn;
  then the local init op."""

  def __init__(self, scaffold=None, master="", config=None, checkpoint_dir=None,
               checkpoint_filename_with_path=None):
    self._checkpoint_dir = checkpoint_dir
    self._checkpoint_filename_with_path = checkpoint_filename_with_path
    self._scaffold = scaffold or Scaffold()
    self._master = master
    self._config = config

  def create_session(self):
    self._scaffold.finalize()
    sess = session_lib.Session(self._master, graph=ops.get_default_graph(),
                               config=self._config)
    try:
      restored = self._restore(sess)
      if not restored:
        if self._scaffold.init_op is not None:
          sess.run(self._scaffold.init_op, feed_dict=self._scaffold.init_feed_dict)
        if self._scaffold.init_fn:
          self._scaffold.init_fn(sess)
      if self._scaffold.local_init_op is not None:
        sess.run(self._scaffold.local_init_op)
    except BaseException:
      sess.close()
      raise
    return sess

  def _restore(self, sess):
    saver = self._scaffold.saver
    if self._checkpoint_filename_with_path:
      saver.restore(sess, self._checkpoint_filename_with_path)
      return True
    if not self._checkpoint_dir:
      return False
    state = checkpoint_management.get_checkpoint_state(self._checkpoint_dir)
    if not state or not state.model_checkpoint_path:
      _logger.info("Checkpoint not found in %s", self._checkpoint_dir)
      return False
    if not checkpoint_management.checkpoint_exists(state.model_checkpoint_path):
      _logger.info("Checkpoint %s not found", state.model_checkpoint_path)
      return False
    saver.restore(sess, state.model_checkpoint_path)
    saver.recover_last_checkpoints(state.all_model_checkpoint_paths)
    return True


class WorkerSessionCreator(SessionCreator):
  """A non-chief session: waits until the chief has initialized (or restored) the
  cluster, then runs the local init op. `master` must be a training task's
  tf.train.Server target (recflow's distributed runtime)."""

  def __init__(self, scaffold=None, master="", config=None, max_wait_secs=30 * 60):
    self._scaffold = scaffold or Scaffold()
    self._master = master
    self._config = config
    self._max_wait_secs = max_wait_secs

  def create_session(self):
    if not self._master:
      raise ValueError("WorkerSessionCreator (is_chief=False) needs master=server.target of "
                       "this task's tf.train.Server: a non-chief worker waits for the chief "
                       "of a cluster")
    self._scaffold.finalize()
    sess = session_lib.Session(self._master, graph=ops.get_default_graph(),
                               config=self._config)
    try:
      sess._distributed.start()  # pylint: disable=protected-access
      if self._scaffold.local_init_op is not None:
        sess.run(self._scaffold.local_init_op)
    except BaseException:
      sess.close()
      raise
    return sess


class _HookedSession(object):
  """Runs with the hooks' SessionRunArgs merged in, as TF's _HookedSession."""

  def __init__(self, sess, hooks):
    self._sess = sess
    self._hooks = hooks
    self._should_stop = False

  def should_stop(self):
    return self._should_stop

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    if self.should_stop():
      raise RuntimeError("Run called even after should_stop requested.")
    actual_fetches = {"caller": fetches}
    run_context = SessionRunContext(original_args=SessionRunArgs(fetches, feed_dict),
                                    session=self._sess)
    options = options or session_lib.RunOptions()
    feed_dict = self._call_hook_before_run(run_context, actual_fetches, feed_dict, options)
    run_metadata = run_metadata or session_lib.RunMetadata()
    outputs = self._sess.run(actual_fetches, feed_dict=feed_dict, options=options,
                             run_metadata=run_metadata)
    for hook in self._hooks:
      hook.after_run(run_context,
                     SessionRunValues(results=outputs[hook] if hook in outputs else None,
                                      options=options, run_metadata=run_metadata))
    self._should_stop = self._should_stop or run_context.stop_requested
    return outputs["caller"]

  def _call_hook_before_run(self, run_context, fetch_dict, user_feed_dict, options):
    hook_feeds = {}
    for hook in self._hooks:
      request = hook.before_run(run_context)
      if request is None:
        continue
      if request.fetches is not None:
        fetch_dict[hook] = request.fetches
      if request.feed_dict:
        _raise_if_feeds_intersect(hook_feeds, request.feed_dict,
                                  "Same tensor is fed by two hooks.")
        hook_feeds.update(request.feed_dict)
      if request.options is not None:
        _merge_run_options(options, request.options)
    if not hook_feeds:
      return user_feed_dict
    if not user_feed_dict:
      return hook_feeds
    _raise_if_feeds_intersect(user_feed_dict, hook_feeds,
                              "Same tensor is fed by a SessionRunHook and user.")
    hook_feeds.update(user_feed_dict)
    return hook_feeds


def _raise_if_feeds_intersect(feeds1, feeds2, message):
  intersection = set(feeds1.keys()) & set(feeds2.keys())
  if intersection:
    raise RuntimeError(message + " Conflict(s): " + str(list(intersection)))


def _merge_run_options(options, incoming):
  """Numbers: the larger; flags: either (TF's merge into options)."""
  for field in ("trace_level", "timeout_in_ms", "inter_op_thread_pool"):
    setattr(options, field, max(getattr(options, field), getattr(incoming, field)))
  for field in ("output_partition_graphs", "report_tensor_allocations_upon_oom"):
    setattr(options, field, getattr(options, field) or getattr(incoming, field))


class _MonitoredSession(object):

  def __init__(self, session_creator, hooks, should_recover=False,
               stop_grace_period_secs=120):
    self._graph_was_finalized = ops.get_default_graph().finalized
    self._hooks = list(hooks or [])
    for h in self._hooks:
      h.begin()
    self._session_creator = session_creator or ChiefSessionCreator()
    self._stop_grace_period_secs = stop_grace_period_secs
    self._tf_sess = None
    self._coord = None
    self._sess = None
    self._closed = False
    self._create_session()

  def _create_session(self):
    self._tf_sess = self._session_creator.create_session()
    self._coord = coordinator.Coordinator(clean_stop_exception_types=[])
    try:
      for hook in self._hooks:
        hook.after_create_session(self._tf_sess, self._coord)
    except BaseException:
      self._tf_sess.close()
      raise
    self._sess = _HookedSession(self._tf_sess, self._hooks)

  @property
  def graph(self):
    return self._tf_sess.graph

  def _tf_sess_or_raise(self):
    if self._tf_sess is None or self._closed:
      raise RuntimeError("Session is already closed.")
    return self._tf_sess

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    if self._sess is None or self._closed:
      raise RuntimeError("Session is already closed.")
    try:
      return self._sess.run(fetches, feed_dict=feed_dict, options=options,
                            run_metadata=run_metadata)
    except BaseException as e:
      if not isinstance(e, (errors.OutOfRangeError, StopIteration)):
        self._coord.request_stop(e)
      raise

  def run_step_fn(self, step_fn):
    """step_fn(step_context): step_context.run_with_hooks(...) is this session's
    run, step_context.session the raw session; step_context.request_stop()
    raises StopIteration, which ends a `with` block cleanly."""
    args = tuple(inspect.signature(step_fn).parameters)
    if inspect.ismethod(step_fn):
      args = ("self",) + args
    if args != ("step_context",) and args != ("self", "step_context"):
      raise ValueError("`step_fn` may either have one `step_context` argument, or `self` and "
                       "`step_context` arguments if it's an instance method. Got {} "
                       "instead.".format(args))
    return step_fn(_StepContext(self._tf_sess_or_raise(), self.run))

  def should_stop(self):
    return (self._sess is None or self._closed or self._sess.should_stop() or
            self._coord.should_stop())

  def close(self):
    self._close_internal()

  def _close_internal(self, exception_type=None):
    if self._closed:
      raise RuntimeError("Session is already closed.")
    try:
      if not exception_type and self._tf_sess is not None:
        for h in self._hooks:
          h.end(self._tf_sess)
    finally:
      self._closed = True
      try:
        if self._coord is not None:
          self._coord.request_stop()
      finally:
        if self._tf_sess is not None:
          self._tf_sess.close()
        self._sess = None
        if not self._graph_was_finalized:
          ops.get_default_graph()._unsafe_unfinalize()  # pylint: disable=protected-access

  def __enter__(self):
    return self

  def __exit__(self, exception_type, exception_value, traceback):
    if exception_type in (errors.OutOfRangeError, StopIteration):
      exception_type = None
    self._close_internal(exception_type)
    return exception_type is None


class _StepContext(object):

  def __init__(self, session, run_with_hooks_fn):
    self._session = session
    self._run_with_hooks_fn = run_with_hooks_fn

  @property
  def session(self):
    return self._session

  def run_with_hooks(self, *args, **kwargs):
    return self._run_with_hooks_fn(*args, **kwargs)

  def request_stop(self):
    raise StopIteration("step_fn has requested the iterations to stop.")


class MonitoredSession(_MonitoredSession):
  """A session that runs hooks, creates/restores itself through a session
  creator, and ends cleanly on OutOfRangeError. (TF also recreates sessions after
  AbortedError/UnavailableError from remote workers; recflow runs in one
  process, so errors propagate.)"""

  def __init__(self, session_creator=None, hooks=None, stop_grace_period_secs=120):
    super(MonitoredSession, self).__init__(session_creator, hooks, should_recover=True,
                                           stop_grace_period_secs=stop_grace_period_secs)


class SingularMonitoredSession(_MonitoredSession):
  """A MonitoredSession over a ChiefSessionCreator, with raw_session()."""

  def __init__(self, hooks=None, scaffold=None, master="", config=None, checkpoint_dir=None,
               stop_grace_period_secs=120, checkpoint_filename_with_path=None):
    session_creator = ChiefSessionCreator(
        scaffold=scaffold, master=master, config=config, checkpoint_dir=checkpoint_dir,
        checkpoint_filename_with_path=checkpoint_filename_with_path)
    super(SingularMonitoredSession, self).__init__(
        session_creator, hooks, should_recover=False,
        stop_grace_period_secs=stop_grace_period_secs)

  def raw_session(self):
    return self._tf_sess_or_raise()


def MonitoredTrainingSession(master="", is_chief=True, checkpoint_dir=None, scaffold=None,  # pylint: disable=invalid-name
                             hooks=None, chief_only_hooks=None,
                             save_checkpoint_secs=USE_DEFAULT, save_summaries_steps=USE_DEFAULT,
                             save_summaries_secs=USE_DEFAULT, config=None,
                             stop_grace_period_secs=120, log_step_count_steps=100,
                             max_wait_secs=7200, save_checkpoint_steps=USE_DEFAULT,
                             summary_dir=None):
  """A MonitoredSession for training: restores from / checkpoints into
  checkpoint_dir (every 600 s by default, or save_checkpoint_steps), logs steps
  per second every log_step_count_steps, and writes the scaffold's summary op
  (tf.summary.merge_all() by default) every save_summaries_steps (100 by
  default) or save_summaries_secs to summary_dir (default checkpoint_dir).
  Hook order: chief_only_hooks, then StepCounterHook, SummarySaverHook and
  CheckpointSaverHook, then hooks."""
  if save_checkpoint_secs is USE_DEFAULT and save_checkpoint_steps is USE_DEFAULT:
    save_checkpoint_steps = None
    save_checkpoint_secs = 600
  elif save_checkpoint_secs is USE_DEFAULT:
    save_checkpoint_secs = None
  elif save_checkpoint_steps is USE_DEFAULT:
    save_checkpoint_steps = None
  if save_summaries_steps is USE_DEFAULT and save_summaries_secs is USE_DEFAULT:
    save_summaries_steps = 100
    save_summaries_secs = None
  elif save_summaries_secs is USE_DEFAULT:
    save_summaries_secs = None
  elif save_summaries_steps is USE_DEFAULT:
    save_summaries_steps = None
  _ = max_wait_secs
  scaffold = scaffold or Scaffold()
  if not is_chief:
    return MonitoredSession(
        session_creator=WorkerSessionCreator(scaffold=scaffold, master=master, config=config),
        hooks=hooks or [], stop_grace_period_secs=stop_grace_period_secs)
  all_hooks = []
  if chief_only_hooks:
    all_hooks.extend(chief_only_hooks)
  session_creator = ChiefSessionCreator(scaffold=scaffold, checkpoint_dir=checkpoint_dir,
                                        master=master, config=config)
  summary_dir = summary_dir or checkpoint_dir
  if summary_dir:
    if log_step_count_steps and log_step_count_steps > 0:
      all_hooks.append(basic_session_run_hooks.StepCounterHook(
          output_dir=summary_dir, every_n_steps=log_step_count_steps))
    if ((save_summaries_steps and save_summaries_steps > 0) or
        (save_summaries_secs and save_summaries_secs > 0)):
      all_hooks.append(basic_session_run_hooks.SummarySaverHook(
          scaffold=scaffold, save_steps=save_summaries_steps, save_secs=save_summaries_secs,
          output_dir=summary_dir))
  if checkpoint_dir:
    if ((save_checkpoint_secs and save_checkpoint_secs > 0) or
        (save_checkpoint_steps and save_checkpoint_steps > 0)):
      all_hooks.append(basic_session_run_hooks.CheckpointSaverHook(
          checkpoint_dir, save_steps=save_checkpoint_steps, save_secs=save_checkpoint_secs,
          scaffold=scaffold))
  if hooks:
    all_hooks.extend(hooks)
  sess = MonitoredSession(session_creator=session_creator, hooks=all_hooks,
                          stop_grace_period_secs=stop_grace_period_secs)
  distributed = getattr(sess._tf_sess, "_distributed", None)  # pylint: disable=protected-access
  if distributed is not None:
    # The chief of a cluster ends the job when its session closes: it waits
    # for the other workers to finish, then stops the ps tasks.
    distributed.end_job_on_close = True
  return sess
