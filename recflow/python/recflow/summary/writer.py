"""tf.summary.FileWriter and FileWriterCache (TF 1.x,
tensorflow/python/summary/writer/), over recflow's C++ event file writer
(train/summary_writer.h, the one `recflow train` uses).

A file is LOGDIR/events.out.tfevents.<seconds>.<host><suffix>: TFRecord
framing (length, masked crc32c of it, data, masked crc32c of it) of
tensorflow.Event protos, the first one `file_version: "brain.Event:2"`, so
TensorBoard reads it. Events are written as they are added (so `max_queue`
has nothing to bound) and reach the disk on flush(), close() and when
`flush_secs` have passed since the last flush (checked as events are added;
there is no background thread). add_summary of bytes never leaves C++."""

import threading
import time
import warnings

import numpy as np

from recflow import _pywrap
from recflow.framework import ops
from recflow.summary import summary_pb


class FileWriter(object):
  """Writes Summary protos and events to an event file in `logdir`."""

  def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None,
               filename_suffix=None, session=None):
    if session is not None:
      raise NotImplementedError("FileWriter(session=...) (TF 2's summary writer resource) "
                                "is not supported by recflow")
    self._logdir = str(logdir)
    self._max_queue = max(int(max_queue), 1)  # accepted; events are written at once
    self._flush_secs = flush_secs
    self._suffix = filename_suffix or ""
    self._writer = _pywrap.EventFileWriter(self._logdir, self._suffix)
    self._last_flush = time.time()
    self._closed = False
    self._lock = threading.Lock()
    self._seen_summary_tags = set()
    self._session_run_tags = set()
    if graph is not None or graph_def is not None:
      self.add_graph(graph=graph, graph_def=graph_def)

  def __enter__(self):
    return self

  def __exit__(self, unused_type, unused_value, unused_traceback):
    self.close()

  def get_logdir(self):
    return self._logdir

  @property
  def path(self):
    """The current event file (recflow's addition)."""
    return self._writer.path

  def _warn_if_closed(self):
    if self._closed:
      warnings.warn("Attempting to use a closed FileWriter. The operation will be a noop "
                    "unless the FileWriter is explicitly reopened.")
      return True
    return False

  def add_event(self, event):
    """Writes `event` (an Event, or its serialized bytes) as it is."""
    if self._warn_if_closed():
      return
    data = event if isinstance(event, bytes) else event.SerializeToString()
    with self._lock:
      self._writer.write_event(data)
      self._maybe_flush_locked()

  def _maybe_flush_locked(self):
    if self._flush_secs is not None and time.time() - self._last_flush >= self._flush_secs:
      self._flush_locked()

  def _add_event(self, event, step):
    event.wall_time = time.time()
    if step is not None:
      event.step = int(step)
    self.add_event(event)

  def add_summary(self, summary, global_step=None):
    """Adds a Summary (or the bytes a summary op output) at `global_step`.
    Metadata of a tag already written is dropped, as TensorFlow does."""
    if isinstance(summary, np.ndarray) and summary.shape == () and summary.dtype.kind in "OS":
      summary = summary.item()  # a string scalar fetched by Session.run
    if isinstance(summary, summary_pb.Summary):
      summary = summary.SerializeToString()
    elif not isinstance(summary, (bytes, bytearray)):
      raise TypeError("add_summary takes a Summary or its serialized bytes (the value of a "
                      "summary op), got %s" % type(summary).__name__)
    if self._warn_if_closed():
      return
    with self._lock:
      self._writer.write_summary(bytes(summary), 0 if global_step is None else int(global_step),
                                 time.time(), self._seen_summary_tags)
      self._maybe_flush_locked()

  def add_session_log(self, session_log, global_step=None):
    self._add_event(summary_pb.Event(session_log=session_log), global_step)

  def add_graph(self, graph, global_step=None, graph_def=None):
    """Adds a Graph (as its GraphDef with shapes) or a GraphDef for
    TensorBoard's graph tab."""
    if graph is not None and graph_def is not None:
      raise ValueError("Please pass only graph, or graph_def (deprecated), but not both.")
    graph = graph if graph is not None else graph_def
    if isinstance(graph, ops.Graph):
      data = graph.as_graph_def(add_shapes=True).SerializeToString()
    elif hasattr(graph, "SerializeToString"):
      data = graph.SerializeToString()
    else:
      raise TypeError("The passed graph must be an instance of `Graph` or the deprecated "
                      "`GraphDef`")
    self._add_event(summary_pb.Event(graph_def=data), global_step)

  def add_meta_graph(self, meta_graph_def, global_step=None):
    if not hasattr(meta_graph_def, "SerializeToString"):
      raise TypeError("meta_graph_def must be type MetaGraphDef, saw type: %s" %
                      type(meta_graph_def))
    self._add_event(summary_pb.Event(meta_graph_def=meta_graph_def.SerializeToString()),
                    global_step)

  def add_run_metadata(self, run_metadata, tag, global_step=None):
    """Adds a serialized RunMetadata (bytes, or an object with
    SerializeToString) under `tag`."""
    if tag in self._session_run_tags:
      raise ValueError("The provided tag was already used for this event type")
    self._session_run_tags.add(tag)
    data = run_metadata if isinstance(run_metadata, bytes) else run_metadata.SerializeToString()
    tagged = summary_pb.TaggedRunMetadata(tag=tag, run_metadata=data)
    self._add_event(summary_pb.Event(tagged_run_metadata=tagged), global_step)

  def _flush_locked(self):
    self._writer.flush()
    self._last_flush = time.time()

  def flush(self):
    if self._warn_if_closed():
      return
    with self._lock:
      self._flush_locked()

  def close(self):
    """Flushes and closes the file; later calls warn and do nothing until
    reopen()."""
    with self._lock:
      if not self._closed:
        self._writer.close()
      self._closed = True

  def reopen(self):
    """After close(): continues in a new event file in the same logdir."""
    with self._lock:
      if self._closed:
        self._writer = _pywrap.EventFileWriter(self._logdir, self._suffix)
        self._last_flush = time.time()
        self._closed = False


class FileWriterCache(object):
  """One FileWriter per logdir, shared (what the hooks use)."""
  _cache = {}
  _lock = threading.RLock()

  @staticmethod
  def clear():
    """Closes and forgets every cached writer."""
    with FileWriterCache._lock:
      for item in FileWriterCache._cache.values():
        item.close()
      FileWriterCache._cache = {}

  @staticmethod
  def get(logdir):
    """The writer for `logdir`, made (with the default graph) on first use."""
    with FileWriterCache._lock:
      if logdir not in FileWriterCache._cache:
        FileWriterCache._cache[logdir] = FileWriter(logdir, graph=ops.get_default_graph())
      return FileWriterCache._cache[logdir]


def summary_iterator(path):
  """tf.train.summary_iterator: the Events of an event file, in order
  (records crc-checked by recflow's record reader)."""
  for record in _pywrap.read_event_records(str(path)):
    yield summary_pb.Event.FromString(record)
