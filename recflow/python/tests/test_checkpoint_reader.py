"""tf.train.NewCheckpointReader, list_variables, load_variable: a Python reader
of the V2 checkpoints Saver writes."""

import numpy as np
import pytest

import recflow.compat.v1 as tf


def save_some(tmp_path, many=False):
  values = {
      "w": np.arange(12, dtype=np.float32).reshape(3, 4),
      "scope/b": np.array([1, -2, 3], np.int64),
      "d": np.array(2.5, np.float64),
      "flags": np.array([True, False]),
      "i32": np.array([[7]], np.int32),
  }
  if many:  # enough keys for several data blocks and restart points
    for i in range(300):
      values["many/var_%03d" % i] = np.full([2], i, np.float32)
  for name, v in values.items():
    tf.Variable(v, name=name)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = tf.train.Saver().save(sess, str(tmp_path / "model.ckpt"), global_step=3)
  return path, values


@pytest.mark.parametrize("many", [False, True], ids=["few", "many"])
def test_reader_returns_saved_values(tmp_path, many):
  path, values = save_some(tmp_path, many)
  reader = tf.train.NewCheckpointReader(path)
  assert sorted(reader.get_variable_to_shape_map()) == sorted(values)
  for name, v in values.items():
    got = reader.get_tensor(name)
    assert got.dtype == v.dtype, name
    np.testing.assert_array_equal(got, v, err_msg=name)
    assert reader.get_variable_to_shape_map()[name] == list(v.shape)
    assert reader.get_variable_to_dtype_map()[name] == tf.as_dtype(v.dtype)
  assert reader.has_tensor("w") and not reader.has_tensor("nope")
  with pytest.raises(tf.errors.NotFoundError, match="nope"):
    reader.get_tensor("nope")


def test_list_and_load_variable_from_directory(tmp_path):
  path, values = save_some(tmp_path)
  listed = tf.train.list_variables(str(tmp_path))
  assert listed == [(n, list(values[n].shape)) for n in sorted(values)]
  np.testing.assert_array_equal(tf.train.load_variable(str(tmp_path), "scope/b"),
                                values["scope/b"])
  np.testing.assert_array_equal(tf.train.load_variable(path, "w:0"), values["w"])
  with pytest.raises(tf.errors.NotFoundError):
    tf.train.NewCheckpointReader(str(tmp_path / "missing"))
  with pytest.raises(ValueError, match="Couldn't find"):
    tf.train.load_checkpoint(_empty_dir(tmp_path))


def _empty_dir(tmp_path):
  d = tmp_path / "empty"
  d.mkdir()
  return str(d)


def test_adam_slots_readable_by_name(tmp_path):
  w = tf.Variable([1.0, 2.0], name="w")
  train = tf.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(w * w))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    path = tf.train.Saver().save(sess, str(tmp_path / "m"))
  names = [n for n, _ in tf.train.list_variables(path)]
  assert names == ["beta1_power", "beta2_power", "w", "w/Adam", "w/Adam_1"]
  assert tf.train.load_variable(path, "beta1_power") == pytest.approx(0.81)


def test_init_from_checkpoint_by_name_scope_and_variable(tmp_path):
  path, values = save_some(tmp_path)
  tf.reset_default_graph()
  with tf.variable_scope("new"):
    b = tf.get_variable("b", [3], dtype=tf.int64, initializer=tf.zeros_initializer())
  w = tf.get_variable("weights", [3, 4], initializer=tf.zeros_initializer())
  d = tf.Variable(0.0, dtype=tf.float64, name="dd", use_resource=True)
  untouched = tf.get_variable("untouched", [2], initializer=tf.ones_initializer())
  tf.train.init_from_checkpoint(str(tmp_path), {"scope/": "new/", "w": "weights", "d": d})
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    np.testing.assert_array_equal(sess.run(b), values["scope/b"])
    np.testing.assert_array_equal(sess.run(w), values["w"])
    assert sess.run(d) == 2.5
    np.testing.assert_array_equal(sess.run(untouched), [1.0, 1.0])
  with pytest.raises(ValueError, match="not found"):
    tf.train.init_from_checkpoint(path, {"nope": "weights"})
  with pytest.raises(ValueError, match="doesn't match"):
    tf.train.init_from_checkpoint(path, {"scope/b": "weights"})
