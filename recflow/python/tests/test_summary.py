"""tf.summary: the summary ops (names, tags, collections, values), FileWriter's
event files (TFRecord framing checked byte by byte here, read back with
tf.train.summary_iterator), FileWriterCache, SummarySaverHook and
MonitoredTrainingSession's default summaries."""

import glob
import os
import struct
import warnings

import numpy as np
import pytest

import recflow.compat.v1 as tf


# --- an independent check of the framing TensorBoard reads -----------------------

def _crc32c_table():
  table = []
  for i in range(256):
    c = i
    for _ in range(8):
      c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    table.append(c)
  return table


_TABLE = _crc32c_table()


def _masked_crc32c(data):
  c = 0xFFFFFFFF
  for b in data:
    c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
  c ^= 0xFFFFFFFF
  return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_framed_records(path):
  """The records of a TFRecord file, checking both masked crc32cs."""
  data = open(path, "rb").read()
  records, pos = [], 0
  while pos < len(data):
    header = data[pos:pos + 8]
    (length,) = struct.unpack("<Q", header)
    (length_crc,) = struct.unpack("<I", data[pos + 8:pos + 12])
    assert length_crc == _masked_crc32c(header), "bad length crc at %d" % pos
    payload = data[pos + 12:pos + 12 + length]
    (data_crc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
    assert data_crc == _masked_crc32c(payload), "bad data crc at %d" % pos
    records.append(payload)
    pos += 16 + length
  return records


def default_bucket_limits():
  v, pos = 1e-12, []
  while v < 1e20:
    pos.append(v)
    v *= 1.1
  return [-np.finfo(np.float64).max] + [-x for x in reversed(pos)] + [0.0] + pos + [
      np.finfo(np.float64).max]


def event_files(logdir):
  return sorted(glob.glob(os.path.join(str(logdir), "events.out.tfevents.*")))


# --- the ops -----------------------------------------------------------------------

def test_names_tags_and_collections():
  x = tf.constant(2.0)
  s1 = tf.summary.scalar("loss", x)
  with tf.name_scope("train"):
    s2 = tf.summary.scalar("loss", x)
    h = tf.summary.histogram("w", tf.constant([1.0, 2.0]), family="weights")
  s3 = tf.summary.scalar("bad name!", x, collections=["mine"])
  assert s1.op.type == "ScalarSummary" and s1.op.name == "loss"
  assert s2.op.name == "train/loss" and h.op.type == "HistogramSummary"
  assert h.op.name == "train/weights/w"
  assert s3.op.name == "bad_name_"
  assert tf.get_collection(tf.GraphKeys.SUMMARIES) == [s1, s2, h]
  assert tf.get_collection("mine") == [s3]
  assert s1.dtype == tf.string and s1.shape.as_list() == []
  merged = tf.summary.merge_all()
  assert merged.op.type == "MergeSummary" and len(merged.op.inputs) == 3
  assert tf.summary.merge_all(key="empty") is None
  with tf.Session() as sess:
    summary = tf.Summary.FromString(sess.run(merged))
    tags = [v.tag for v in summary.value]
    assert tags == ["loss", "train/loss", "weights/train/weights/w"]
    assert summary.value[0].simple_value == 2.0
    assert tf.Summary.FromString(sess.run(s3)).value[0].tag == "bad_name_"


def test_scalar_and_histogram_values():
  rng = np.random.RandomState(3)
  data = (rng.randn(500) * 4).astype(np.float32)
  v = tf.placeholder(tf.float32, [None])
  tags = tf.placeholder(tf.string, [2])
  pair = tf.placeholder(tf.float64, [2])
  h = tf.summary.histogram("h", v)
  s = tf.raw_ops.ScalarSummary(tags=tags, values=pair)
  with tf.Session() as sess:
    hs, ss = sess.run([h, s], {v: data, tags: [b"a", b"b"], pair: [0.25, -3.5]})
  scal = tf.Summary.FromString(ss)
  assert [(x.tag, x.simple_value) for x in scal.value] == [("a", 0.25), ("b", -3.5)]
  histo = tf.Summary.FromString(hs).value[0].histo
  d = data.astype(np.float64)
  assert histo.num == 500
  assert histo.min == d.min() and histo.max == d.max()
  np.testing.assert_allclose(histo.sum, d.sum(), rtol=1e-12)
  np.testing.assert_allclose(histo.sum_squares, (d * d).sum(), rtol=1e-12)
  limits = default_bucket_limits()
  counts = np.bincount(np.searchsorted(limits, d, side="right"), minlength=len(limits))
  # Non-empty buckets as TF encodes them; empty runs collapse to one empty bucket.
  got = dict(zip(histo.bucket_limit, histo.bucket))
  for i in np.nonzero(counts)[0]:
    assert got[limits[i]] == counts[i]
  assert sum(histo.bucket) == 500
  assert all(not (a == 0 and b == 0) for a, b in zip(histo.bucket, histo.bucket[1:]))


def test_tensor_and_text_summaries():
  t = tf.summary.tensor_summary("t", tf.constant([[1, 2], [3, 4]], tf.int64),
                                summary_description="counts")
  txt = tf.summary.text("note", tf.constant("hello"))
  with pytest.raises(ValueError):
    tf.summary.text("n", tf.constant(1.0))
  with tf.Session() as sess:
    tv, xv = sess.run([t, txt])
  value = tf.Summary.FromString(tv).value[0]
  assert value.tag == "t" and value.metadata.summary_description == "counts"
  np.testing.assert_array_equal(tf.make_ndarray(value.tensor), [[1, 2], [3, 4]])
  text = tf.Summary.FromString(xv).value[0]
  assert text.metadata.plugin_data.plugin_name == "text"
  assert tf.make_ndarray(text.tensor) == b"hello"


def test_bad_inputs_fail_at_run_time():
  v = tf.placeholder(tf.float32, [None])
  h = tf.summary.histogram("h", v)
  a = tf.summary.scalar("same", tf.constant(1.0))
  b = tf.summary.scalar("same", tf.constant(2.0))
  m = tf.summary.merge([a, b])
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="Nan in summary histogram for: h"):
      sess.run(h, {v: [1.0, np.nan]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="Infinity in summary histogram"):
      sess.run(h, {v: [np.inf]})
    # Two ops, one tag: TF's MergeSummary refuses the duplicate.
    assert a.op.name == "same" and b.op.name == "same_1"
    assert tf.Summary.FromString(sess.run(b)).value[0].tag == "same_1"
  bad = tf.summary.merge([tf.constant(b"\xff\xff")])
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="Could not parse"):
      sess.run(bad)
    sess.run(m)  # distinct tags merge fine
  with pytest.raises(TypeError):
    tf.summary.scalar("s", tf.constant("text"))


# --- FileWriter --------------------------------------------------------------------

def test_file_writer_events_read_back(tmp_path):
  x = tf.placeholder(tf.float32, [], name="value")
  s = tf.summary.scalar("x", x)
  logdir = str(tmp_path / "logs")
  with tf.summary.FileWriter(logdir, graph=tf.get_default_graph(),
                             filename_suffix=".v1") as writer:
    with tf.Session() as sess:
      for step in range(3):
        writer.add_summary(sess.run(s, {x: step * 1.5}), global_step=step)
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="y", simple_value=7.0)]), 10)
    writer.add_session_log(tf.SessionLog(status=tf.SessionLog.START), 11)
    writer.flush()
    assert writer.get_logdir() == logdir
  files = event_files(logdir)
  assert len(files) == 1 and files[0].endswith(".v1")
  records = read_framed_records(files[0])
  events = list(tf.train.summary_iterator(files[0]))
  assert [e.SerializeToString() for e in events] == [
      tf.Event.FromString(r).SerializeToString() for r in records]
  assert events[0].file_version == "brain.Event:2" and events[0].wall_time > 1.6e9
  graph = tf.GraphDef.FromString(events[1].graph_def)
  assert "value" in [n.name for n in graph.node]
  scalars = [(e.step, e.summary.value[0].tag, e.summary.value[0].simple_value)
             for e in events if e.summary is not None]
  assert scalars == [(0, "x", 0.0), (1, "x", 1.5), (2, "x", 3.0), (10, "y", 7.0)]
  assert events[-1].session_log.status == tf.SessionLog.START and events[-1].step == 11


def test_close_reopen_and_closed_writer_warns(tmp_path):
  logdir = str(tmp_path)
  writer = tf.summary.FileWriter(logdir)
  first = writer.path
  writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="a", simple_value=1.0)]), 1)
  writer.close()
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="a", simple_value=2.0)]), 2)
  assert "closed FileWriter" in str(caught[0].message)
  writer.reopen()
  assert writer.path != first and len(event_files(logdir)) == 2
  writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="a", simple_value=3.0)]), 3)
  writer.close()
  values = []
  for f in event_files(logdir):
    values += [e.summary.value[0].simple_value for e in tf.train.summary_iterator(f)
               if e.summary is not None]
  assert sorted(values) == [1.0, 3.0]
  with pytest.raises(TypeError):
    tf.summary.FileWriter(logdir).add_summary(42)


def test_metadata_written_once_per_tag(tmp_path):
  meta = tf.SummaryMetadata(display_name="d")
  with tf.summary.FileWriter(str(tmp_path)) as writer:
    for step in range(2):
      writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="t", simple_value=1.0,
                                                             metadata=meta)]), step)
    path = writer.path
  events = [e for e in tf.train.summary_iterator(path) if e.summary is not None]
  assert events[0].summary.value[0].metadata.display_name == "d"
  assert events[1].summary.value[0].metadata is None


def test_corrupt_event_file_is_a_clear_error(tmp_path):
  with tf.summary.FileWriter(str(tmp_path)) as writer:
    writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="a", simple_value=1.0)]), 1)
    path = writer.path
  raw = bytearray(open(path, "rb").read())
  raw[-6] ^= 0xFF
  open(path, "wb").write(bytes(raw))
  with pytest.raises(tf.errors.DataLossError, match=os.path.basename(path)):
    list(tf.train.summary_iterator(path))
  with pytest.raises(tf.errors.NotFoundError):
    list(tf.train.summary_iterator(str(tmp_path / "missing")))
  with pytest.raises(ValueError):
    tf.Summary.FromString(b"\xff\xff\xff")


def test_file_writer_cache(tmp_path):
  a = tf.summary.FileWriterCache.get(str(tmp_path / "a"))
  assert tf.summary.FileWriterCache.get(str(tmp_path / "a")) is a
  assert tf.summary.FileWriterCache.get(str(tmp_path / "b")) is not a
  tf.summary.FileWriterCache.clear()
  assert tf.summary.FileWriterCache.get(str(tmp_path / "a")) is not a
  tf.summary.FileWriterCache.clear()


# --- hooks ---------------------------------------------------------------------------

def _model():
  x = tf.placeholder(tf.float32, [None, 3], name="x")
  w = tf.get_variable("w", [3, 1], initializer=tf.ones_initializer())
  loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
  step = tf.train.get_or_create_global_step()
  train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, global_step=step)
  tf.summary.scalar("loss", loss)
  tf.summary.histogram("weights", w)
  return x, loss, train


def _scalars(logdir, tag):
  out = {}
  for f in event_files(logdir):
    for e in tf.train.summary_iterator(f):
      if e.summary is not None:
        for v in e.summary.value:
          if v.tag == tag:
            out[e.step] = v.simple_value
  return out


def test_monitored_training_session_writes_merged_summaries(tmp_path):
  tf.summary.FileWriterCache.clear()
  x, loss, train = _model()
  data = np.random.RandomState(1).randn(8, 3).astype(np.float32)
  ckpt = str(tmp_path / "ckpt")
  losses = {}
  with tf.train.MonitoredTrainingSession(checkpoint_dir=ckpt, save_summaries_steps=2,
                                         save_checkpoint_secs=None,
                                         log_step_count_steps=None) as sess:
    for i in range(5):
      l, _ = sess.run([loss, train], {x: data})
      losses[i + 1] = l  # the summary is written at the step after the run
  tf.summary.FileWriterCache.clear()
  got = _scalars(ckpt, "loss")
  assert sorted(got) == [1, 3, 5]
  for step, value in got.items():
    np.testing.assert_allclose(value, losses[step], rtol=1e-6)
  logs = [e for f in event_files(ckpt) for e in tf.train.summary_iterator(f)
          if e.session_log is not None]
  assert logs[0].session_log.status == tf.SessionLog.START and logs[0].step == 1
  histos = [e for f in event_files(ckpt) for e in tf.train.summary_iterator(f)
            if e.summary is not None and e.summary.value and e.summary.value[-1].tag == "weights"]
  assert [h.summary.value[-1].histo.num for h in histos] == [3.0, 3.0, 3.0]


def test_summary_saver_hook_with_summary_op_and_secs(tmp_path):
  tf.summary.FileWriterCache.clear()
  x, loss, train = _model()
  only = tf.summary.scalar("only", loss * 2.0, collections=[])
  with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
    tf.train.SummarySaverHook(save_steps=1, output_dir=str(tmp_path))
  out = str(tmp_path / "sum")
  hook = tf.train.SummarySaverHook(save_steps=1, output_dir=out, summary_op=only)
  data = np.ones((4, 3), np.float32)
  values = {}
  with tf.train.MonitoredSession(hooks=[hook]) as sess:
    for i in range(3):
      l, _ = sess.run([loss, train], {x: data})
      values[i + 1] = 2.0 * l
  tf.summary.FileWriterCache.clear()
  got = _scalars(out, "only")
  assert sorted(got) == [1, 2, 3]
  for step, value in got.items():
    np.testing.assert_allclose(value, values[step], rtol=1e-6)
  assert _scalars(out, "loss") == {}
