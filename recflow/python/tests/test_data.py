"""tf.data programs written for TensorFlow 1.15, with only the import changed,
and the errors recflow gives where it differs."""

import os

import numpy as np
import pytest

import recflow.compat.v1 as tf


def _drain(sess, next_element, limit=10000):
  out = []
  for _ in range(limit):
    try:
      out.append(sess.run(next_element))
    except tf.errors.OutOfRangeError:
      return out
  raise AssertionError("no end of sequence after %d elements" % limit)


def test_slices_of_features_and_labels_shuffle_batch_repeat():
  rng = np.random.RandomState(3)
  features = rng.rand(10, 3).astype(np.float32)
  labels = np.arange(10, dtype=np.int64)
  ds = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(10, seed=1).batch(4)
  ds = ds.repeat(2)
  assert ds.output_types == (tf.float32, tf.int64)
  assert ds.output_shapes[0].as_list() == [None, 3]
  it = ds.make_initializable_iterator()
  x, y = it.get_next()
  assert x.shape.as_list() == [None, 3]
  with tf.Session() as sess:
    sess.run(it.initializer)
    batches = _drain(sess, (x, y))
  assert [len(b[1]) for b in batches] == [4, 4, 2, 4, 4, 2]
  for epoch in (batches[:3], batches[3:]):
    ids = np.concatenate([b[1] for b in epoch])
    assert sorted(ids.tolist()) == list(range(10))
    for fx, fy in epoch:
      np.testing.assert_array_equal(fx, features[fy])  # pairs stay together


def test_initializable_iterator_with_a_fed_placeholder_restarts():
  data = tf.placeholder(tf.int64, shape=[None])
  ds = tf.data.Dataset.from_tensor_slices(data).batch(2, drop_remainder=True)
  assert ds.output_shapes.as_list() == [2]
  it = tf.data.make_initializable_iterator(ds)
  nxt = it.get_next()
  with tf.Session() as sess:
    sess.run(it.initializer, feed_dict={data: np.arange(5)})
    assert [b.tolist() for b in _drain(sess, nxt)] == [[0, 1], [2, 3]]
    sess.run(it.initializer, feed_dict={data: np.array([7, 8, 9])})
    assert [b.tolist() for b in _drain(sess, nxt)] == [[7, 8]]


def test_dicts_range_take_skip_shard_cache_prefetch():
  ds = tf.data.Dataset.from_tensor_slices({"a": np.arange(6), "b": np.arange(6) * 10.0})
  nxt = ds.skip(1).take(4).shard(2, 1).make_initializable_iterator()
  r = tf.data.Dataset.range(3, 12, 4).cache().repeat(2).prefetch(tf.data.experimental.AUTOTUNE)
  rit = r.make_initializable_iterator()
  el = nxt.get_next()
  assert sorted(el) == ["a", "b"]
  with tf.Session() as sess:
    sess.run([nxt.initializer, rit.initializer])
    got = _drain(sess, el)
    assert [(g["a"], g["b"]) for g in got] == [(2, 20.0), (4, 40.0)]
    assert _drain(sess, rit.get_next()) == [3, 7, 11, 3, 7, 11]


def test_zip_pairs_elements_until_the_shortest_ends():
  a = tf.data.Dataset.range(5)
  b = tf.data.Dataset.from_tensor_slices({"y": np.array([1.5, 2.5, 3.5], np.float32)})
  ds = tf.data.Dataset.zip((a, b)).batch(2)
  assert ds.output_types == (tf.int64, {"y": tf.float32})
  it = ds.make_initializable_iterator()
  with tf.Session() as sess:
    sess.run(it.initializer)
    got = _drain(sess, it.get_next())
  assert [(x.tolist(), d["y"].tolist()) for x, d in got] == [([0, 1], [1.5, 2.5]), ([2], [3.5])]


def test_from_tensors_and_mismatched_batch_shapes_fail_like_tensorflow():
  ds = tf.data.Dataset.from_tensors(np.array([[1, 2], [3, 4]], np.int32))
  it = ds.make_initializable_iterator()
  with tf.Session() as sess:
    sess.run(it.initializer)
    got = _drain(sess, it.get_next())
  assert len(got) == 1 and got[0].tolist() == [[1, 2], [3, 4]]

  bad = tf.data.Dataset.from_tensor_slices(np.arange(4)).batch(0)
  it = bad.make_initializable_iterator()
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="Batch size"):
      sess.run(it.initializer)


def test_iterator_errors_are_tensorflow_errors():
  ds = tf.data.Dataset.from_tensor_slices(np.arange(3))
  it = ds.make_initializable_iterator()
  nxt = it.get_next()
  with tf.Session() as sess:
    with pytest.raises(tf.errors.FailedPreconditionError, match="not been initialized"):
      sess.run(nxt)
    # A dataset is a variant: it cannot be fetched.
    with pytest.raises(TypeError, match="variant"):
      sess.run(ds._variant_tensor)  # pylint: disable=protected-access
    with pytest.raises(TypeError, match="variant"):
      sess.run(it.initializer, feed_dict={ds._variant_tensor: np.array(1)})  # pylint: disable=protected-access
  other = tf.data.Dataset.from_tensor_slices(np.arange(3.0))
  with pytest.raises(TypeError, match="output types"):
    it.make_initializer(other)


def test_text_line_dataset_over_written_files(tmp_path):
  paths = []
  for i, lines in enumerate([["a,1", "b,2"], ["c,3"]]):
    p = tmp_path / ("part-%d.csv" % i)
    p.write_text("\n".join(lines) + "\n")
    paths.append(str(p))
  ds = tf.data.TextLineDataset(paths)
  it = ds.make_initializable_iterator()
  with tf.Session() as sess:
    sess.run(it.initializer)
    assert _drain(sess, it.get_next()) == [b"a,1", b"b,2", b"c,3"]

  missing = str(tmp_path / "missing.txt")
  it = tf.data.TextLineDataset(missing).make_initializable_iterator()
  with tf.Session() as sess:
    sess.run(it.initializer)
    with pytest.raises(tf.errors.NotFoundError, match="missing.txt"):
      sess.run(it.get_next())
  with pytest.raises(NotImplementedError, match="GZIP"):
    tf.data.TFRecordDataset(paths, compression_type="GZIP")


def test_from_structure_and_string_handles_switch_between_datasets():
  train = tf.data.Dataset.from_tensor_slices(np.arange(3))
  val = tf.data.Dataset.from_tensor_slices(np.arange(100, 102))
  it = tf.data.Iterator.from_structure(train.output_types, train.output_shapes)
  nxt = it.get_next()
  with tf.Session() as sess:
    sess.run(it.make_initializer(train))
    assert _drain(sess, nxt) == [0, 1, 2]
    sess.run(it.make_initializer(val))
    assert _drain(sess, nxt) == [100, 101]

  handle = tf.placeholder(tf.string, shape=[])
  switch = tf.data.Iterator.from_string_handle(handle, train.output_types, train.output_shapes)
  a = train.make_initializable_iterator()
  b = val.make_initializable_iterator()
  with tf.Session() as sess:
    sess.run([a.initializer, b.initializer])
    ha, hb = sess.run([a.string_handle(), b.string_handle()])
    v = switch.get_next()
    assert sess.run(v, feed_dict={handle: ha}) == 0
    assert sess.run(v, feed_dict={handle: hb}) == 100
    assert sess.run(v, feed_dict={handle: ha}) == 1


# --- graph functions: map, filter, flat_map, interleave, one-shot iterators ---

def test_one_shot_iterator_over_numpy_slices_ends_with_out_of_range():
  ds = tf.data.Dataset.from_tensor_slices(np.arange(5, dtype=np.int64)).batch(2)
  it = ds.make_one_shot_iterator()
  nxt = it.get_next()
  with tf.Session() as sess:
    assert [b.tolist() for b in _drain(sess, nxt)] == [[0, 1], [2, 3], [4]]
  with pytest.raises(ValueError, match="Cannot capture a placeholder"):
    tf.data.make_one_shot_iterator(
        tf.data.Dataset.from_tensor_slices(tf.placeholder(tf.float32, [None])))


def test_map_with_a_python_function_capturing_a_tensor():
  scale = tf.constant(10.0)
  ds = tf.data.Dataset.from_tensor_slices(
      (np.arange(4, dtype=np.float32), np.array([b"a", b"b", b"c", b"d"])))
  ds = ds.map(lambda x, s: {"x": x * scale, "s": s}, num_parallel_calls=2)
  assert sorted(ds.output_types) == ["s", "x"]
  assert ds.output_types["x"] == tf.float32
  ds = ds.filter(lambda e: e["x"] > 5.0)
  it = ds.make_initializable_iterator()
  el = it.get_next()
  with tf.Session() as sess:
    sess.run(it.initializer)
    got = _drain(sess, el)
  assert [(g["x"], g["s"]) for g in got] == [(10.0, b"b"), (20.0, b"c"), (30.0, b"d")]


def test_interleave_and_flat_map_over_text_files(tmp_path):
  paths = []
  for i in range(3):
    p = tmp_path / ("f%d.txt" % i)
    p.write_text("".join("%d-%d\n" % (i, j) for j in range(2)))
    paths.append(str(p))
  files = tf.data.Dataset.from_tensor_slices(paths)
  inter = files.interleave(tf.data.TextLineDataset, cycle_length=2, block_length=1)
  flat = files.flat_map(lambda f: tf.data.TextLineDataset(f).map(lambda line: line))
  a = inter.make_one_shot_iterator().get_next()
  b = flat.make_initializable_iterator()
  with tf.Session() as sess:
    assert _drain(sess, a) == [b"0-0", b"1-0", b"0-1", b"1-1", b"2-0", b"2-1"]
    sess.run(b.initializer)
    assert _drain(sess, b.get_next()) == [b"0-0", b"0-1", b"1-0", b"1-1", b"2-0", b"2-1"]


def test_training_a_linear_model_from_a_dataset_until_out_of_range(tmp_path):
  rng = np.random.RandomState(0)
  x_data = rng.rand(256, 2).astype(np.float32)
  y_data = (x_data.dot(np.array([[3.0], [-2.0]], np.float32)) + 0.5).astype(np.float32)
  ds = tf.data.Dataset.from_tensor_slices((x_data, y_data)).shuffle(256, seed=5)
  ds = ds.batch(32).repeat(60).prefetch(2)
  x, y = ds.make_one_shot_iterator().get_next()
  w = tf.get_variable("w", [2, 1], initializer=tf.zeros_initializer())
  b = tf.get_variable("b", [], initializer=tf.zeros_initializer())
  loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
  step = tf.train.get_or_create_global_step()
  train_op = tf.train.GradientDescentOptimizer(0.5).minimize(loss, global_step=step)
  steps = 0
  with tf.train.MonitoredTrainingSession(checkpoint_dir=str(tmp_path)) as sess:
    while not sess.should_stop():
      sess.run(train_op)
      steps += 1
  assert steps == 60 * 8  # every batch once per epoch, then OutOfRangeError ended it
  reader = tf.train.load_checkpoint(str(tmp_path))
  np.testing.assert_allclose(reader.get_tensor("w").ravel(), [3.0, -2.0], atol=0.05)


def test_a_graph_def_holding_a_pipeline_imports_and_runs():
  offset = tf.constant(100, tf.int64)
  ds = tf.data.Dataset.range(6).map(lambda x: x + offset).filter(lambda x: x % 2 > 0)
  ds = ds.interleave(lambda x: tf.data.Dataset.from_tensors(x).repeat(2), cycle_length=2,
                     num_parallel_calls=2)
  nxt = ds.make_one_shot_iterator().get_next(name="next")
  graph_def = tf.get_default_graph().as_graph_def()
  ops_used = {n.op for n in graph_def.node}
  assert {"OneShotIterator", "IteratorGetNext"} <= ops_used
  with tf.Graph().as_default() as g:
    tf.import_graph_def(graph_def, name="")
    with tf.Session(graph=g) as sess:
      got = _drain(sess, g.get_tensor_by_name(nxt.name))
  assert got == [101, 103, 101, 103, 105, 105]
