"""Partitioned variables: TF 1.x programs with only the import changed.

Partitioners, get_variable(partitioner=...) / variable_scope(partitioner=...),
PartitionedVariable, embedding lookups over one, training and Saver round
trips, all checked against NumPy.
"""

import os

import numpy as np
import pytest

import recflow.compat.v1 as tf


def _div_split(rows, n):
  per, extras = divmod(rows, n)
  return [per + (1 if i < extras else 0) for i in range(n)]


def test_fixed_size_partitioner_shapes_and_names():
  v = tf.get_variable("emb", shape=[10, 3], initializer=tf.zeros_initializer(),
                      partitioner=tf.fixed_size_partitioner(3))
  parts = list(v)
  assert len(v) == 3
  assert [p.get_shape().as_list() for p in parts] == [[4, 3], [3, 3], [3, 3]]
  assert [p.op.name for p in parts] == ["emb/part_0", "emb/part_1", "emb/part_2"]
  assert v.name == "emb"
  assert v.get_shape().as_list() == [10, 3]
  assert v.dtype == tf.float32
  assert v._get_partitions() == [3, 1]
  assert v._get_variable_list() == parts
  names = [x.op.name for x in tf.global_variables()]
  assert names == ["emb/part_0", "emb/part_1", "emb/part_2"]
  assert [x.op.name for x in tf.trainable_variables()] == names


def test_fixed_size_partitioner_caps_at_axis_size():
  p = tf.fixed_size_partitioner(8)
  assert p(shape=tf.TensorShape([3, 5]), dtype=tf.float32) == [3, 1]
  assert tf.fixed_size_partitioner(2, axis=1)(shape=tf.TensorShape([3, 5]),
                                              dtype=tf.float32) == [1, 2]


def test_min_max_variable_partitioner_shapes():
  # 100 x 64 float32 = 25600 bytes; min slice 4096 bytes -> ceil(6.25) = 7, capped at 4.
  part = tf.min_max_variable_partitioner(max_partitions=4, min_slice_size=4096)
  assert part(shape=tf.TensorShape([100, 64]), dtype=tf.float32) == [4, 1]
  part = tf.min_max_variable_partitioner(max_partitions=10, min_slice_size=4096)
  assert part(shape=tf.TensorShape([100, 64]), dtype=tf.float32) == [7, 1]
  # Small variables stay in one part.
  assert part(shape=tf.TensorShape([4, 2]), dtype=tf.float32) == [1, 1]
  with tf.variable_scope("s", partitioner=part):
    v = tf.get_variable("w", shape=[100, 64])
  assert [p.get_shape().as_list() for p in v] == [[15, 64]] * 2 + [[14, 64]] * 5
  with pytest.raises(ValueError, match="along axis 2"):
    tf.min_max_variable_partitioner(axis=2)(shape=tf.TensorShape([4, 4]), dtype=tf.float32)


def test_variable_axis_size_partitioner():
  # 10 x 8 float32: a row is 32 bytes; 100 bytes -> 3 rows a shard -> 4 shards.
  part = tf.variable_axis_size_partitioner(max_shard_bytes=100)
  assert part(shape=tf.TensorShape([10, 8]), dtype=tf.float32) == [4, 1]
  part = tf.variable_axis_size_partitioner(max_shard_bytes=100, max_shards=2)
  assert part(shape=tf.TensorShape([10, 8]), dtype=tf.float32) == [2, 1]
  with pytest.raises(ValueError, match="positive"):
    tf.variable_axis_size_partitioner(max_shard_bytes=0)


def test_constant_and_value_initializers_give_slices():
  rng = np.random.RandomState(0)
  full = rng.randn(7, 3).astype(np.float32)
  a = tf.get_variable("a", initializer=full, partitioner=tf.fixed_size_partitioner(3))
  b = tf.get_variable("b", shape=[7, 3], initializer=tf.constant_initializer(full),
                      partitioner=tf.fixed_size_partitioner(2))
  c = tf.get_variable("c", initializer=tf.constant(full), partitioner=tf.fixed_size_partitioner(4))
  d = tf.get_variable("d", shape=[5, 2], initializer=tf.ones_initializer(),
                      partitioner=tf.fixed_size_partitioner(2))
  e = tf.get_variable("e", shape=[6, 4], initializer=tf.random_uniform_initializer(-1., 1.),
                      partitioner=tf.fixed_size_partitioner(3))
  assert [p.get_shape().as_list()[0] for p in a] == _div_split(7, 3)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for v in (a, b, c):
      np.testing.assert_array_equal(sess.run(tf.convert_to_tensor(v)), full)
      np.testing.assert_array_equal(np.concatenate(sess.run(list(v))), full)
    np.testing.assert_array_equal(sess.run(d.as_tensor()), np.ones([5, 2], np.float32))
    e_val = sess.run(e.as_tensor())
    assert e_val.shape == (6, 4)
    assert np.all(np.abs(e_val) <= 1.0) and np.std(e_val) > 0


def test_embedding_lookup_matches_concatenated_value():
  rng = np.random.RandomState(1)
  full = rng.randn(11, 4).astype(np.float32)
  emb = tf.get_variable("emb", initializer=full, partitioner=tf.fixed_size_partitioner(3))
  ids_np = rng.randint(0, 11, size=(5, 3)).astype(np.int64)
  out = tf.nn.embedding_lookup(emb, tf.constant(ids_np), partition_strategy="div")
  assert out.get_shape().as_list() == [5, 3, 4]
  # As in TF, the default "mod" strategy treats the parts as a mod-sharded table.
  out_mod = tf.nn.embedding_lookup(emb, tf.constant(ids_np))
  mod_table = np.zeros_like(full)
  parts = np.split(full, np.cumsum(_div_split(11, 3))[:-1])
  for i in range(11):
    mod_table[i] = parts[i % 3][i // 3]
  sp = tf.SparseTensor(indices=[[0, 0], [0, 1], [1, 0], [2, 0], [2, 1], [2, 2]],
                       values=tf.constant([1, 7, 10, 0, 5, 5], tf.int64),
                       dense_shape=[3, 3])
  sparse_out = tf.nn.embedding_lookup_sparse(emb, sp, None, partition_strategy="div",
                                             combiner="sum")
  safe_out = tf.nn.safe_embedding_lookup_sparse(emb, sp, None, combiner="mean")
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    np.testing.assert_allclose(sess.run(out), full[ids_np], rtol=1e-6)
    np.testing.assert_allclose(sess.run(out_mod), mod_table[ids_np], rtol=1e-6)
    expect_sum = np.stack([full[1] + full[7], full[10], full[0] + 2 * full[5]])
    np.testing.assert_allclose(sess.run(sparse_out), expect_sum, rtol=1e-5)
    expect_mean = np.stack([(full[1] + full[7]) / 2, full[10], (full[0] + 2 * full[5]) / 3])
    np.testing.assert_allclose(sess.run(safe_out), expect_mean, rtol=1e-5)


def test_gradient_descent_changes_only_looked_up_rows():
  rng = np.random.RandomState(2)
  full = rng.randn(10, 3).astype(np.float32)
  emb = tf.get_variable("emb", initializer=full, partitioner=tf.fixed_size_partitioner(4))
  ids = tf.constant([1, 5, 9, 5], tf.int64)
  rows = tf.nn.embedding_lookup(emb, ids, partition_strategy="div")
  loss = tf.reduce_sum(tf.square(rows))
  train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    after = sess.run(emb.as_tensor())
  expect = full.copy()
  for i, count in ((1, 1), (5, 2), (9, 1)):
    expect[i] = full[i] - 0.1 * 2 * count * full[i]
  np.testing.assert_allclose(after, expect, rtol=1e-5, atol=1e-6)
  untouched = [i for i in range(10) if i not in (1, 5, 9)]
  np.testing.assert_array_equal(after[untouched], full[untouched])


def test_saver_round_trip(tmp_path):
  rng = np.random.RandomState(3)
  full = rng.randn(9, 2).astype(np.float32)
  emb = tf.get_variable("emb", initializer=full, partitioner=tf.fixed_size_partitioner(2))
  saver = tf.train.Saver()
  prefix = os.path.join(str(tmp_path), "model.ckpt")
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    saver.save(sess, prefix)
  # One sliced entry under the full name, as TensorFlow's Saver writes it.
  assert tf.train.list_variables(prefix) == [("emb", [9, 2])]
  np.testing.assert_array_equal(tf.train.load_variable(prefix, "emb"), full)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run([p.assign(tf.zeros_like(p)) for p in emb])
    saver.restore(sess, prefix)
    np.testing.assert_array_equal(sess.run(emb.as_tensor()), full)
  # A Saver given the PartitionedVariable itself, or a dict naming it, saves
  # and restores the same entry.
  for var_list in ([emb], {"emb": emb}):
    saver2 = tf.train.Saver(var_list)
    with tf.Session() as sess:
      saver2.restore(sess, prefix)
      np.testing.assert_array_equal(sess.run(emb.as_tensor()), full)


def test_saver_writes_slice_specs(tmp_path):
  rng = np.random.RandomState(5)
  full = rng.randn(7, 3).astype(np.float32)
  emb = tf.get_variable("emb", initializer=full, partitioner=tf.fixed_size_partitioner(3))
  assert [p._save_slice_info.spec for p in emb] == ["7 3 0,3:0,3", "7 3 3,2:0,3",
                                                   "7 3 5,2:0,3"]
  saver = tf.train.Saver()
  g = tf.get_default_graph()
  specs = g.get_tensor_by_name("save/SaveV2/shape_and_slices:0")
  names = g.get_tensor_by_name("save/SaveV2/tensor_names:0")
  with tf.Session() as sess:
    assert list(sess.run(names)) == [b"emb"] * 3
    assert list(sess.run(specs)) == [b"7 3 0,3:0,3", b"7 3 3,2:0,3", b"7 3 5,2:0,3"]
    sess.run(tf.global_variables_initializer())
    prefix = saver.save(sess, os.path.join(str(tmp_path), "m"))
  reader = tf.train.NewCheckpointReader(prefix)
  assert reader.get_variable_to_shape_map() == {"emb": [7, 3]}
  np.testing.assert_array_equal(reader.get_tensor("emb"), full)


def test_restore_into_another_partitioning(tmp_path):
  # Saved in 2 parts, restored into 3 and into an unpartitioned variable:
  # each RestoreV2 slice is read from the saved parts that cover it.
  rng = np.random.RandomState(6)
  full = rng.randn(10, 4).astype(np.float32)
  prefix = os.path.join(str(tmp_path), "m")
  with tf.Graph().as_default():
    tf.get_variable("w", initializer=full, partitioner=tf.fixed_size_partitioner(2))
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver().save(sess, prefix)
  with tf.Graph().as_default():
    w = tf.get_variable("w", shape=[10, 4], initializer=tf.zeros_initializer(),
                        partitioner=tf.fixed_size_partitioner(3))
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, prefix)
      np.testing.assert_array_equal(sess.run(w.as_tensor()), full)
  with tf.Graph().as_default():
    w = tf.get_variable("w", shape=[10, 4], initializer=tf.zeros_initializer())
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, prefix)
      np.testing.assert_array_equal(sess.run(w), full)


def test_restores_old_part_layout(tmp_path):
  # Checkpoints recflow wrote before sliced entries hold "<name>/part_<i>".
  rng = np.random.RandomState(7)
  full = rng.randn(5, 2).astype(np.float32)
  bias = rng.randn(2).astype(np.float32)
  prefix = os.path.join(str(tmp_path), "old")
  with tf.Graph().as_default():
    emb = tf.get_variable("emb", initializer=full, partitioner=tf.fixed_size_partitioner(2))
    b = tf.get_variable("b", initializer=bias)
    parts = list(emb)
    old = tf.train.Saver({"emb/part_0": parts[0], "emb/part_1": parts[1], "b": b})
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      old.save(sess, prefix)
    assert sorted(n for n, _ in tf.train.list_variables(prefix)) == [
        "b", "emb/part_0", "emb/part_1"]
    saver = tf.train.Saver()
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run([p.assign(tf.zeros_like(p)) for p in emb] + [b.assign(tf.zeros_like(b))])
      saver.restore(sess, prefix)
      np.testing.assert_array_equal(sess.run(emb.as_tensor()), full)
      np.testing.assert_array_equal(sess.run(b), bias)


def test_slice_restore_errors(tmp_path):
  prefix = os.path.join(str(tmp_path), "m")
  with tf.Graph().as_default():
    tf.get_variable("w", shape=[6, 2], initializer=tf.ones_initializer())
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      tf.train.Saver().save(sess, prefix)
  # A partitioned variable whose full shape differs from the checkpoint's.
  with tf.Graph().as_default():
    tf.get_variable("w", shape=[8, 2], initializer=tf.zeros_initializer(),
                    partitioner=tf.fixed_size_partitioner(2))
    with tf.Session() as sess:
      with pytest.raises(tf.errors.InvalidArgumentError, match="8,2"):
        tf.train.Saver().restore(sess, prefix)
  # Mixing a part and a whole variable under one name.
  with tf.Graph().as_default():
    w = tf.get_variable("w", shape=[8, 2], partitioner=tf.fixed_size_partitioner(2))
    v = tf.get_variable("v", shape=[3])
    with pytest.raises(ValueError, match="Slices must all be slices"):
      tf.train.Saver({"w": [list(w)[0], v]})


def test_reuse_returns_same_partitioned_variable():
  part = tf.fixed_size_partitioner(2)
  with tf.variable_scope("m", partitioner=part):
    v = tf.get_variable("w", shape=[6, 2])
  with tf.variable_scope("m", reuse=True):
    assert tf.get_variable("w", shape=[6, 2], partitioner=part) is v
  with tf.variable_scope("m", partitioner=part, reuse=tf.AUTO_REUSE):
    assert tf.get_variable("w", shape=[6, 2]) is v
  with tf.variable_scope("m", partitioner=part):
    with pytest.raises(ValueError, match="already exists"):
      tf.get_variable("w", shape=[6, 2])
  with tf.variable_scope("m", reuse=True):
    with pytest.raises(ValueError, match="specified shape"):
      tf.get_variable("w", shape=[7, 2], partitioner=part)
    with pytest.raises(ValueError, match="specified partitions"):
      tf.get_variable("w", shape=[6, 2], partitioner=tf.fixed_size_partitioner(3))
    with pytest.raises(ValueError, match="does not exist"):
      tf.get_variable("other", shape=[6, 2], partitioner=part)
    with pytest.raises(ValueError, match="partitioned version"):
      tf.get_variable("w", shape=[6, 2])
  assert len(tf.global_variables()) == 2


def test_bad_partitioner_results_raise_clear_errors():
  with pytest.raises(ValueError, match="does not match the Variable's rank"):
    tf.get_variable("a", shape=[4, 2], partitioner=lambda shape, dtype: [2])
  with pytest.raises(ValueError, match="non-integer"):
    tf.get_variable("b", shape=[4, 2], partitioner=lambda shape, dtype: [2.0, 1])
  with pytest.raises(ValueError, match="must return a sequence"):
    tf.get_variable("c", shape=[4, 2], partitioner=lambda shape, dtype: 2)
  with pytest.raises(ValueError, match="zero partitions"):
    tf.get_variable("d", shape=[4, 2], partitioner=lambda shape, dtype: [0, 1])
  with pytest.raises(ValueError, match="one dimension"):
    tf.get_variable("e", shape=[4, 2], partitioner=lambda shape, dtype: [2, 2])
  with pytest.raises(ValueError, match="fully defined"):
    tf.get_variable("f", shape=[None, 2], initializer=tf.zeros_initializer(),
                    partitioner=tf.fixed_size_partitioner(2))
  tf.get_variable("g", shape=[4, 2])
  with tf.variable_scope(tf.get_variable_scope(), reuse=tf.AUTO_REUSE):
    with pytest.raises(ValueError, match="unpartitioned version"):
      tf.get_variable("g", shape=[4, 2], partitioner=tf.fixed_size_partitioner(2))
  assert [v.op.name for v in tf.global_variables()] == ["g"]


def test_dense_layer_in_partitioned_scope_trains():
  rng = np.random.RandomState(4)
  x = tf.constant(rng.randn(4, 6).astype(np.float32))
  with tf.variable_scope("net", partitioner=tf.fixed_size_partitioner(2)):
    y = tf.layers.dense(x, 3)
  assert [v.op.name for v in tf.trainable_variables()] == [
      "net/dense/kernel/part_0", "net/dense/kernel/part_1",
      "net/dense/bias/part_0", "net/dense/bias/part_1"]
  loss = tf.reduce_sum(tf.square(y))
  train = tf.train.GradientDescentOptimizer(0.01).minimize(loss)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    before = sess.run(loss)
    sess.run(train)
    assert sess.run(loss) < before


def test_estimator_like_export_with_vocabulary(tmp_path):
  # A partitioned embedding (restored from sliced entries) looked up through
  # a vocabulary table initialized from an asset by the legacy init op, as
  # tf.estimator exports are; loaded by the Python loader in a new graph.
  from recflow.ops import gen_ops as gen  # pylint: disable=g-import-not-at-top
  rng = np.random.RandomState(8)
  vocab = ["red", "green", "blue", "cyan"]
  full = rng.randn(5, 3).astype(np.float32)
  asset = tmp_path / "vocab.txt"
  asset.write_text("".join(w + "\n" for w in vocab))
  export_dir = str(tmp_path / "export")
  with tf.Graph().as_default(), tf.Session() as sess:
    emb = tf.get_variable("emb", initializer=full, partitioner=tf.fixed_size_partitioner(2))
    path_t = tf.constant(str(asset), name="asset_path")
    tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, path_t)
    table = gen.hash_table_v2(key_dtype=tf.string, value_dtype=tf.int64,
                              shared_name="hash_table_vocab", name="hash_table")
    init_table = gen.initialize_table_from_text_file_v2(table, path_t, key_index=-1,
                                                        value_index=-2, name="table_init")
    words = tf.placeholder(tf.string, [None], name="words")
    ids = gen.lookup_table_find_v2(table, words, tf.constant(4, tf.int64), name="ids")
    tf.identity(tf.gather(emb.as_tensor(), ids), name="rows")
    gen.lookup_table_size_v2(table, name="table_size")
    sess.run(tf.global_variables_initializer())
    b = tf.saved_model.builder.SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(sess, ["serve"], assets_collection=[path_t],
                                   legacy_init_op=tf.group(init_table, name="group_deps"))
    b.save()
  prefix = os.path.join(export_dir, "variables", "variables")
  assert tf.train.list_variables(prefix) == [("emb", [5, 3])]
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    tf.saved_model.loader.load(sess, ["serve"], export_dir)
    assert sess.run("table_size:0") == 4
    got = sess.run("rows:0", {"words:0": ["blue", "nope", "red"]})
    np.testing.assert_array_equal(got, full[[2, 4, 0]])
