"""tf.train.SessionRunHook and the values hooks exchange with MonitoredSession:
SessionRunArgs, SessionRunContext, SessionRunValues (TF 1.x's protocol)."""

import collections


class SessionRunHook(object):
  """Hook into MonitoredSession: begin (before the graph is finalized),
  after_create_session, before_run / after_run around each run, end."""

  def begin(self):
    pass

  def after_create_session(self, session, coord):  # pylint: disable=unused-argument
    pass

  def before_run(self, run_context):  # pylint: disable=unused-argument
    return None

  def after_run(self, run_context, run_values):  # pylint: disable=unused-argument
    pass

  def end(self, session):  # pylint: disable=unused-argument
    pass


class SessionRunArgs(collections.namedtuple("SessionRunArgs",
                                            ["fetches", "feed_dict", "options"])):
  """What a hook adds to a run: fetches, feeds, RunOptions."""

  def __new__(cls, fetches, feed_dict=None, options=None):
    return super(SessionRunArgs, cls).__new__(cls, fetches, feed_dict, options)


class SessionRunContext(object):
  """The run being made (original_args, session) and a way to ask for a stop."""

  def __init__(self, original_args, session):
    self._original_args = original_args
    self._session = session
    self._stop_requested = False

  @property
  def original_args(self):
    return self._original_args

  @property
  def session(self):
    return self._session

  @property
  def stop_requested(self):
    return self._stop_requested

  def request_stop(self):
    self._stop_requested = True


class SessionRunValues(collections.namedtuple("SessionRunValues",
                                              ["results", "options", "run_metadata"])):
  """The results of a hook's SessionRunArgs fetches, with the run's options and
  metadata."""
