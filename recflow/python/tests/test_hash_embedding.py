"""recflow.embedding: hash embedding tables from Python: lookups, training with
the tf.train optimizers, admission, eviction, Saver and SavedModel round
trips, a SavedModel with a table served by `recflow serve`."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow import embedding

import serving_util

BIG = 1 << 40  # raw ids far beyond any vocabulary


def _data(rng, n=256, ids_per_row=3, num_ids=40):
  """Rows of raw 64-bit ids (some negative) whose label is a function of the ids."""
  pool = np.array([BIG * (k + 1) + 7 * k - (k % 3) * (1 << 62) for k in range(num_ids)],
                  dtype=np.int64)
  good = rng.rand(num_ids) < 0.5
  rows = rng.randint(0, num_ids, size=(n, ids_per_row))
  labels = (good[rows].mean(axis=1) > 0.5).astype(np.float32)
  return pool[rows], labels


def _sparse(ids):
  n, k = ids.shape
  idx = np.array([[r, c] for r in range(n) for c in range(k)], dtype=np.int64)
  return tf.SparseTensorValue(idx, ids.reshape(-1), np.array([n, k], dtype=np.int64))


def _model(table, combiner="mean"):
  sp = tf.sparse_placeholder(tf.int64, name="ids")
  y = tf.placeholder(tf.float32, [None], name="y")
  emb = table.lookup_sparse(sp, combiner=combiner)
  w = tf.get_variable("w", [table.dim, 1], initializer=tf.ones_initializer())
  logits = tf.reshape(tf.matmul(emb, w), [-1])
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
  return sp, y, logits, loss


@pytest.mark.parametrize("opt_name,table_opt", [
    ("sgd", "sgd"), ("adagrad", "adagrad"), ("adam", "adam"), ("ftrl", "ftrl")])
def test_training_lowers_the_loss_on_raw_64bit_ids(opt_name, table_opt):
  rng = np.random.RandomState(3)
  ids, labels = _data(rng)
  table = embedding.HashEmbeddingTable("emb", dim=4, optimizer=table_opt, seed=5,
                                       initializer=tf.random_uniform_initializer(-0.1, 0.1))
  sp, y, _, loss = _model(table)
  gs = tf.train.get_or_create_global_step()
  opt = {"sgd": lambda: tf.train.GradientDescentOptimizer(1.0),
         "adagrad": lambda: tf.train.AdagradOptimizer(0.5),
         "adam": lambda: tf.train.AdamOptimizer(0.05),
         "ftrl": lambda: tf.train.FtrlOptimizer(0.5)}[opt_name]()
  train = opt.minimize(loss, global_step=gs)  # the table and the variable w
  ops = [o.type for o in tf.get_default_graph().get_operations()]
  assert {"sgd": "HashTableApplyGradientDescent", "adagrad": "HashTableApplyAdagrad",
          "adam": "HashTableApplyAdam", "ftrl": "HashTableApplyFtrl"}[opt_name] in ops
  feed = {sp: _sparse(ids), y: labels}
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss, feed)
    w0 = sess.run("w:0")
    for _ in range(60):
      sess.run(train, feed)
    last = sess.run(loss, feed)
    keys, values, _, _, versions = sess.run(table.export())
    assert sess.run(gs) == 60
    assert not np.array_equal(sess.run("w:0"), w0)  # the dense variable trained too
  assert last < 0.8 * first, (first, last)
  assert len(keys) == len(np.unique(ids)) and set(keys) == set(np.unique(ids))
  assert list(keys) == sorted(keys)
  assert versions.max() == 60  # stamped with global_step + 1 of the last update


def test_lookup_and_lookup_sparse_match_numpy():
  table = embedding.HashEmbeddingTable("t", dim=3, initializer="normal", seed=1)
  ids = np.array([[5, -BIG], [BIG, 5]], dtype=np.int64)
  dense = table.lookup(ids)
  assert dense.get_shape().as_list() == [2, 2, 3]
  sp = tf.sparse_placeholder(tf.int64)
  wsp = tf.sparse_placeholder(tf.float32)
  outs = {c: table.lookup_sparse(sp, combiner=c) for c in ("sum", "mean", "sqrtn")}
  weighted = tf.nn.embedding_lookup_sparse(table, sp, wsp, combiner="sum")
  bag = table.embedding_bag(tf.constant([5, BIG, -BIG], tf.int64),
                            tf.constant([0, 2, 2, 3], tf.int64), combiner="mean")
  sv = tf.SparseTensorValue(np.array([[0, 0], [0, 1], [1, 0]]), np.array([5, BIG, -BIG]),
                            np.array([2, 2]))
  wv = tf.SparseTensorValue(sv.indices, np.array([2.0, 0.5, 1.0], np.float32), sv.dense_shape)
  with tf.Session() as sess:
    rows = sess.run(dense)
    row = {5: rows[0, 0], -BIG: rows[0, 1], BIG: rows[1, 0]}
    np.testing.assert_array_equal(rows[1, 1], rows[0, 0])
    got = sess.run(outs, {sp: sv})
    np.testing.assert_allclose(got["sum"][0], row[5] + row[BIG], rtol=1e-6)
    np.testing.assert_allclose(got["mean"][0], (row[5] + row[BIG]) / 2, rtol=1e-6)
    np.testing.assert_allclose(got["sqrtn"][0], (row[5] + row[BIG]) / np.sqrt(2), rtol=1e-6)
    np.testing.assert_allclose(got["sum"][1], row[-BIG], rtol=1e-6)
    np.testing.assert_allclose(sess.run(weighted, {sp: sv, wsp: wv})[0],
                               2 * row[5] + 0.5 * row[BIG], rtol=1e-6)
    b = sess.run(bag)
    np.testing.assert_allclose(b[0], (row[5] + row[BIG]) / 2, rtol=1e-6)
    np.testing.assert_array_equal(b[1], np.zeros(3))  # an empty bag
    assert sess.run(table.size()) == 3


def test_admission_by_count_and_serve_mode():
  table = embedding.HashEmbeddingTable("adm", dim=2, admission_min_count=3,
                                       default_value=0.5)
  ids = tf.placeholder(tf.int64, [None])
  train_rows = table.lookup(ids)
  served = table.lookup(ids, mode="serve")
  with tf.Session() as sess:
    sess.run(train_rows, {ids: [BIG, 7]})
    sess.run(train_rows, {ids: [BIG]})
    assert sess.run(table.size()) == 0  # BIG seen twice, 7 once
    out = sess.run(train_rows, {ids: [BIG, 7]})
    assert sess.run(table.size()) == 1  # BIG admitted on its third sighting
    np.testing.assert_array_equal(out[1], [0.5, 0.5])  # 7: the default value
    for _ in range(5):
      sess.run(served, {ids: [9]})
    assert sess.run(table.size()) == 1  # serve mode never inserts


def test_tiered_table_trains_like_an_untiered_one(tmp_path):
  ids = tf.placeholder(tf.int64, [None])
  tiered = embedding.HashEmbeddingTable("tiered", dim=4, optimizer="adagrad", seed=3,
                                        num_shards=4, dram_budget_bytes=4096,
                                        cold_dir=str(tmp_path / "cold"))
  plain = embedding.HashEmbeddingTable("plain", dim=4, optimizer="adagrad", seed=3,
                                       num_shards=4)
  loss = tf.reduce_sum(tf.square(tiered.lookup(ids))) + tf.reduce_sum(
      tf.square(plain.lookup(ids)))
  train = tf.train.AdagradOptimizer(0.1).minimize(loss)
  prefetch = tiered.prefetch(ids)
  rng = np.random.RandomState(4)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(20):
      batch = rng.randint(0, 2000, size=64).astype(np.int64)
      sess.run(prefetch, {ids: batch})
      sess.run(train, {ids: batch})
    assert sess.run(tiered.size()) == sess.run(plain.size())
    k1, v1 = sess.run(tiered.export()[:2])
    k2, v2 = sess.run(plain.export()[:2])
    assert len(list((tmp_path / "cold").iterdir())) == 4  # one cold file per shard
  np.testing.assert_array_equal(k1, k2)
  np.testing.assert_allclose(v1, v2, rtol=0, atol=0)
  assert not list((tmp_path / "cold").iterdir())  # gone with the session's table
  with pytest.raises(ValueError, match="needs a cold_dir"):
    embedding.HashEmbeddingTable("bad", dim=2, dram_budget_bytes=1024)


def test_eviction_by_age_and_frequency():
  gs = tf.train.get_or_create_global_step()
  step = tf.placeholder(tf.int64, [])
  old = embedding.HashEmbeddingTable("old", dim=2, max_age_steps=3)
  rare = embedding.HashEmbeddingTable("rare", dim=2, min_frequency=2)
  ids = tf.placeholder(tf.int64, [None])
  loss = tf.reduce_sum(old.lookup(ids)) + tf.reduce_sum(rare.lookup(ids))
  train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
  evict_old, evict_rare = old.evict(step), rare.evict()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train, {ids: [1, 2, 2]})  # step 1: 1 and 2
    for _ in range(5):
      sess.run(train, {ids: [2]})       # steps 2..6: 2 only
    assert sess.run(old.size()) == 2
    assert sess.run(evict_old, {step: 6}) == 1  # 1 was last updated at step 1
    assert sess.run(old.size()) == 1
    assert sess.run(evict_old, {step: 6}) == 0
    assert sess.run(evict_rare) == 1  # id 1 was looked up once (min_frequency 2)
    assert sess.run(rare.size()) == 1


def test_eviction_by_frequency_and_hook():
  gs = tf.train.get_or_create_global_step()
  rare = embedding.HashEmbeddingTable("rare", dim=2, min_frequency=3)
  ids = tf.placeholder(tf.int64, [None])
  loss = tf.reduce_sum(rare.lookup(ids))
  train = tf.train.GradientDescentOptimizer(0.1).minimize(loss, global_step=gs)
  size = rare.size()
  hook = embedding.EvictionHook(every_n_steps=2)
  with tf.train.MonitoredSession(hooks=[hook]) as sess:
    sess.run(train, {ids: [1, 5, 5, 5]})  # step 1: 1 once, 5 three times
    assert sess.run(size) == 2
    sess.run(train, {ids: [5]})  # step 2
    sess.run(train, {ids: [5]})  # step 3: two steps since the hook's start: evicts 1
    assert sess.run(size) == 1


def test_saver_round_trip(tmp_path):
  rng = np.random.RandomState(4)
  ids, labels = _data(rng, n=64)
  table = embedding.HashEmbeddingTable("emb", dim=4, optimizer="adagrad", seed=2)
  sp, y, logits, loss = _model(table)
  train = tf.train.AdagradOptimizer(0.3).minimize(loss)
  saver = tf.train.Saver()
  feed = {sp: _sparse(ids), y: labels}
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(5):
      sess.run(train, feed)
    before = sess.run(logits, feed)
    exported = sess.run(table.export())
    path = saver.save(sess, str(tmp_path / "model.ckpt"))
  reader = tf.train.NewCheckpointReader(path)
  for k in ("keys", "values", "slots", "frequencies", "versions"):
    assert reader.has_tensor("emb/" + k), k
  np.testing.assert_array_equal(reader.get_tensor("emb/keys"), exported[0])
  assert reader.get_tensor("emb/slots").shape == (len(exported[0]), 1, 4)  # Adagrad's accum
  tf.reset_default_graph()
  table = embedding.HashEmbeddingTable("emb", dim=4, optimizer="adagrad", seed=99)
  sp, y, logits, loss = _model(table)
  feed = {sp: _sparse(ids), y: labels}
  with tf.Session() as sess:
    tf.train.Saver().restore(sess, path)
    after = sess.run(table.export())  # (before a training lookup counts frequencies)
    np.testing.assert_allclose(sess.run(logits, feed), before, rtol=1e-6)
  for a, b in zip(exported, after):
    np.testing.assert_array_equal(a, b)


def _train_and_export(export_dir, rng):
  """Trains a small model with a table, exports a serving graph (mode="serve")."""
  ids, labels = _data(rng, n=128, ids_per_row=1)
  table = embedding.HashEmbeddingTable("emb", dim=3, optimizer="adagrad", seed=1)
  x = tf.placeholder(tf.int64, [None], name="x")
  y = tf.placeholder(tf.float32, [None])
  w = tf.get_variable("w", [3, 1], initializer=tf.ones_initializer())
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
      labels=y, logits=tf.reshape(tf.matmul(table.lookup(x), w), [-1])))
  train = tf.train.AdagradOptimizer(0.5).minimize(loss)
  served_prob = tf.sigmoid(tf.reshape(tf.matmul(table.lookup(x, mode="serve"), w), [-1]),
                           name="prob")
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(10):
      sess.run(train, {x: ids[:, 0], y: labels})
    query = np.concatenate([ids[:8, 0], [12345]])  # 12345: never seen
    expected = sess.run(served_prob, {x: query})
    tf.saved_model.simple_save(sess, export_dir, {"x": x}, {"prob": served_prob})
  return query, expected


def test_saved_model_round_trip_in_python(tmp_path):
  export_dir = str(tmp_path / "sm")
  query, expected = _train_and_export(export_dir, np.random.RandomState(5))
  tf.reset_default_graph()
  with tf.Session() as sess:
    mg = tf.saved_model.loader.load(sess, ["serve"], export_dir)
    sig = mg.signature_def["serving_default"]
    got = sess.run(sig.outputs["prob"].name, {sig.inputs["x"].name: query})
  np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_saved_model_with_a_table_served_by_recflow_serve(tmp_path):
  serving_util.cli_or_skip()
  base = tmp_path / "served"
  base.mkdir()
  query, expected = _train_and_export(str(base / "1"), np.random.RandomState(6))
  with serving_util.Server("emb_model", base) as server:
    body = server.predict({"instances": [int(q) for q in query]})
  got = np.array(body["predictions"], dtype=np.float32).reshape(expected.shape)
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_errors_name_the_table_and_the_problem():
  with pytest.raises(ValueError, match="dim must be an int >= 1"):
    embedding.HashEmbeddingTable("t", dim=0)
  with pytest.raises(ValueError, match="optimizer must be one of"):
    embedding.HashEmbeddingTable("t", dim=2, optimizer="rmsprop")
  with pytest.raises(ValueError, match="not both"):
    embedding.HashEmbeddingTable("t", dim=2, admission_min_count=2, admission_probability=0.5)
  with pytest.raises(TypeError, match="is not supported"):
    embedding.HashEmbeddingTable("t", dim=2, initializer=tf.glorot_uniform_initializer())
  table = embedding.HashEmbeddingTable("t", dim=2, optimizer="adagrad")
  with pytest.raises(TypeError, match="ids must be int64 or int32"):
    table.lookup(tf.constant([1.5]))
  with pytest.raises(ValueError, match="mode must be"):
    table.lookup(tf.constant([1], tf.int64), mode="eval")
  loss = tf.reduce_sum(table.lookup(tf.constant([1, 2], tf.int64)))
  with pytest.raises(ValueError, match="'t'.*create it with optimizer='adam'"):
    tf.train.AdamOptimizer(0.1).minimize(loss)
  with pytest.raises(NotImplementedError, match="MomentumOptimizer cannot train hash "
                                                "embedding table 't'"):
    tf.train.MomentumOptimizer(0.1, 0.9).minimize(loss)
  with pytest.raises(ValueError, match="never split"):
    tf.nn.embedding_lookup([table, table], tf.constant([1], tf.int64))
  # A bad attr fails the first run, naming it.
  bad = embedding.HashEmbeddingTable("bad", dim=2, num_shards=3)
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="num_shards"):
      sess.run(bad.size())
