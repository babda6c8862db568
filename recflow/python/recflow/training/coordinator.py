"""tf.train.Coordinator: a stop flag shared by threads, with the first exception
reported to it re-raised by join()."""

import threading
import time


class Coordinator(object):

  def __init__(self, clean_stop_exception_types=None):
    if clean_stop_exception_types is None:
      from recflow.framework import errors  # pylint: disable=g-import-not-at-top
      clean_stop_exception_types = (errors.OutOfRangeError,)
    self._clean_stop_exception_types = tuple(clean_stop_exception_types)
    self._lock = threading.Lock()
    self._stop_event = threading.Event()
    self._exc_info_to_raise = None
    self._joined = False
    self._registered_threads = set()

  def request_stop(self, ex=None):
    with self._lock:
      if ex is not None and self._exc_info_to_raise is None and not self._joined:
        if isinstance(ex, tuple):
          exc_info = ex
        else:
          exc_info = (type(ex), ex, ex.__traceback__)
        if not issubclass(exc_info[0], self._clean_stop_exception_types):
          self._exc_info_to_raise = exc_info
      self._stop_event.set()

  def clear_stop(self):
    with self._lock:
      self._joined = False
      self._exc_info_to_raise = None
      self._stop_event.clear()

  def should_stop(self):
    return self._stop_event.is_set()

  def stop_on_exception(self):
    coord = self

    class _Ctx(object):

      def __enter__(self):
        return self

      def __exit__(self, exc_type, exc_value, tb):
        if exc_type is None:
          return False
        coord.request_stop((exc_type, exc_value, tb))
        return True
    return _Ctx()

  def wait_for_stop(self, timeout=None):
    return self._stop_event.wait(timeout)

  def register_thread(self, thread):
    with self._lock:
      self._registered_threads.add(thread)

  def join(self, threads=None, stop_grace_period_secs=120, ignore_live_threads=False):
    threads = set(threads or []) | self._registered_threads
    while any(t.is_alive() for t in threads) and not self.wait_for_stop(0.1):
      pass
    deadline = time.time() + stop_grace_period_secs
    for t in threads:
      t.join(max(0.0, deadline - time.time()))
    self._registered_threads = set()
    with self._lock:
      self._joined = True
      exc_info = self._exc_info_to_raise
    if exc_info:
      raise exc_info[1].with_traceback(exc_info[2])
    stragglers = [t.name for t in threads if t.is_alive()]
    if stragglers and not ignore_live_threads:
      raise RuntimeError("Coordinator stopped with threads still running: %s" %
                         " ".join(stragglers))

  @property
  def joined(self):
    return self._joined

  def raise_requested_exception(self):
    with self._lock:
      if self._exc_info_to_raise:
        raise self._exc_info_to_raise[1].with_traceback(self._exc_info_to_raise[2])
