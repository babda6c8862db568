"""recflow.data.parse_criteo / parse_libsvm / parse_csv: recflow's C++ text
parsers as graph ops over a batch of lines fed through a placeholder, their
dicts of tensors and SparseTensors, use with the embedding lookups, and bad
lines under both error modes."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
import recflow.data


def _unsigned(v):
  """An int64 id as the uint64 fingerprint it holds."""
  return int(v) & ((1 << 64) - 1)


def _criteo_line(label, dense, cats):
  return "\t".join([str(label)] + ["" if d is None else str(d) for d in dense] +
                   ["" if c is None else "%08x" % c for c in cats])


def _random_criteo(rng, n, num_dense=13, num_cat=26):
  lines, rows = [], []
  for _ in range(n):
    label = int(rng.randint(0, 2))
    dense = [None if rng.rand() < 0.2 else int(rng.randint(-3, 5000)) for _ in range(num_dense)]
    cats = [None if rng.rand() < 0.15 else int(rng.randint(0, 1 << 32)) for _ in range(num_cat)]
    lines.append(_criteo_line(label, dense, cats))
    rows.append((label, dense, cats))
  return lines, rows


def test_parse_criteo_values_and_layout():
  rng = np.random.RandomState(3)
  lines, rows = _random_criteo(rng, 64)
  ph = tf.placeholder(tf.string, [None])
  batch = recflow.data.parse_criteo(ph, error_mode="fail")
  assert set(batch) == ({"labels", "dense", "num_skipped"} |
                        {"C%d" % i for i in range(1, 27)} |
                        {"C%d/row_splits" % i for i in range(1, 27)})
  assert batch["dense"].shape.as_list() == [None, 13]
  assert isinstance(batch["C5"], tf.SparseTensor)
  assert batch["C5"].values.dtype == tf.int64
  assert batch["labels"].op.type == "RecflowParseCriteo"
  with tf.Session() as sess:
    out = sess.run(batch, {ph: lines})
  np.testing.assert_array_equal(out["labels"], [r[0] for r in rows])
  want_dense = np.array([[0.0 if d is None else np.log1p(max(d, 0)) for d in r[1]]
                         for r in rows], np.float32)
  np.testing.assert_allclose(out["dense"], want_dense, rtol=1e-6)
  for k in range(26):
    present = [(b, r[2][k]) for b, r in enumerate(rows) if r[2][k] is not None]
    sp = out["C%d" % (k + 1)]
    np.testing.assert_array_equal(sp.values, [(k << 32) | v for _, v in present])
    np.testing.assert_array_equal(sp.indices, np.array([[b, 0] for b, _ in present]).reshape(-1, 2))
    np.testing.assert_array_equal(sp.dense_shape, [64, 1 if present else 0])
    splits = np.concatenate([[0], np.cumsum([r[2][k] is not None for r in rows])])
    np.testing.assert_array_equal(out["C%d/row_splits" % (k + 1)], splits)
  assert out["num_skipped"] == 0


def test_parse_criteo_feeds_embedding_lookups():
  # The SparseTensor goes to embedding_lookup_sparse, the row splits to
  # embedding_bag; both give the per-example mean of the rows.
  lines = [_criteo_line(1, [1, 2], [3, 0]), _criteo_line(0, [None, 4], [None, 1]),
           _criteo_line(1, [7, None], [2, 2])]
  batch = recflow.data.parse_criteo(tf.constant(lines), num_dense=2, num_categorical=2,
                                    id_mode="hex", error_mode="fail")
  table = tf.constant(np.arange(8 * 3, dtype=np.float32).reshape(8, 3))
  # Hex ids of field k are (k << 32) | value: take them modulo 8 for the table.
  sp = batch["C2"]
  ids = tf.SparseTensor(sp.indices, tf.floormod(sp.values, 8), sp.dense_shape)
  looked = tf.nn.embedding_lookup_sparse(table, ids, None, combiner="mean")
  bag = tf.embedding_bag(table, tf.floormod(sp.values, 8), batch["C2/row_splits"],
                         tf.constant([], tf.float32), combiner="mean")
  with tf.Session() as sess:
    a, b = sess.run([looked, bag])
  t = np.arange(24, dtype=np.float32).reshape(8, 3)
  np.testing.assert_allclose(a, t[[0, 1, 2]])
  np.testing.assert_allclose(b, t[[0, 1, 2]])


def test_parse_criteo_bad_lines():
  good = _criteo_line(1, [1, 2], [3, 4])
  short = "1\t1\t2\t00000003"
  ph = tf.placeholder(tf.string, [None])
  origins = tf.placeholder(tf.string, [None])
  fail = recflow.data.parse_criteo(ph, num_dense=2, num_categorical=2, error_mode="fail",
                                   origins=origins)
  skip = recflow.data.parse_criteo(ph, num_dense=2, num_categorical=2)
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
      sess.run(fail["labels"], {ph: [good, short], origins: ["d.tsv:9", "d.tsv:10"]})
    assert "d.tsv:10" in str(e.value) and "wrong_field_count" in str(e.value)
    with pytest.raises(tf.errors.InvalidArgumentError, match="row 1"):
      sess.run(fail["labels"], {ph: [good, short], origins: []})
    labels, skipped, c1 = sess.run([skip["labels"], skip["num_skipped"], skip["C1"]],
                                   {ph: [short, good, short, good]})
  np.testing.assert_array_equal(labels, [1, 1])
  assert skipped == 2
  np.testing.assert_array_equal(c1.dense_shape, [2, 1])
  with pytest.raises(ValueError, match="error_mode"):
    recflow.data.parse_criteo(ph, error_mode="ignore")


def test_parse_criteo_sequences_and_hash_ids():
  lines = ["1\t5\tab\tcd\t0000000c,000000cd", "0\t\t\tef\t"]
  batch = recflow.data.parse_criteo(lines, num_dense=1, num_categorical=2,
                                    sequence_fields=[1], error_mode="fail")
  assert "H1" in batch and "H1/row_splits" in batch
  hashed = recflow.data.parse_criteo(["1\t2\tuser\titem"], num_dense=1, num_categorical=2,
                                     id_mode="hash", error_mode="fail")
  bucket = tf.string_to_hash_bucket_fast(tf.constant(["user", "item"]), 1000003)
  with tf.Session() as sess:
    out, h, want = sess.run([batch, hashed, bucket])
  np.testing.assert_array_equal(out["H1"].values, [(1 << 32) | 0x0c, (1 << 32) | 0xcd])
  np.testing.assert_array_equal(out["H1/row_splits"], [0, 2, 2])
  np.testing.assert_array_equal(out["C2"].values, [(1 << 32) | 0xcd, (1 << 32) | 0xef])
  # hash ids are Fingerprint64 of the text, StringToHashBucketFast's hash.
  got = [_unsigned(h["C1"].values[0]) % 1000003, _unsigned(h["C2"].values[0]) % 1000003]
  assert got == list(want)


def test_parse_libsvm():
  ph = tf.placeholder(tf.string, [None])
  batch = recflow.data.parse_libsvm(ph, feature_name="x", error_mode="fail")
  assert set(batch) == {"labels", "x", "x/weights", "x/row_splits", "num_skipped"}
  table = tf.constant(np.arange(12 * 2, dtype=np.float32).reshape(12, 2))
  summed = tf.nn.embedding_lookup_sparse(table, batch["x"], batch["x/weights"], combiner="sum")
  with tf.Session() as sess:
    out, s = sess.run([batch, summed], {ph: ["1 3:0.5 10:2", "-1 4:1 # comment", "+1 7:1.5"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad_label"):
      sess.run(batch["labels"], {ph: ["3 1:1"]})
  np.testing.assert_array_equal(out["labels"], [1, 0, 1])
  np.testing.assert_array_equal(out["x"].values, [3, 10, 4, 7])
  np.testing.assert_array_equal(out["x/weights"].values, [0.5, 2, 1, 1.5])
  np.testing.assert_array_equal(out["x"].indices, [[0, 0], [0, 1], [1, 0], [2, 0]])
  np.testing.assert_array_equal(out["x/row_splits"], [0, 2, 3, 4])
  t = np.arange(24, dtype=np.float32).reshape(12, 2)
  np.testing.assert_allclose(s, [0.5 * t[3] + 2 * t[10], t[4], 1.5 * t[7]])
  with pytest.raises(ValueError, match="feature_name"):
    recflow.data.parse_libsvm(ph, feature_name="labels")


def test_parse_csv():
  columns = [
      recflow.data.CsvColumn("clicked", "label"),
      recflow.data.CsvColumn("price", default_value=-1.0),
      ("cats", "sparse", "int64", "|"),
      {"name": "city", "kind": "sparse"},
      recflow.data.CsvColumn("note", "ignore"),
      "age",
  ]
  ph = tf.placeholder(tf.string, [None])
  batch = recflow.data.parse_csv(ph, columns, has_header=True, error_mode="fail")
  assert set(batch) == {"labels", "dense", "num_skipped", "cats", "cats/row_splits", "city",
                        "city/row_splits"}
  assert batch["dense"].shape.as_list() == [None, 2]
  bucket = tf.string_to_hash_bucket_fast(tf.constant(["paris", "new york, ny"]), 999983)
  with tf.Session() as sess:
    out, want = sess.run([batch, bucket], {ph: [
        "clicked,price,cats,city,note,age",
        "1,9.5,3|4|5,paris,whatever,30",
        "0,,,\"new york, ny\",,41"]})
    with pytest.raises(tf.errors.InvalidArgumentError, match="wrong_field_count"):
      sess.run(batch["labels"], {ph: ["1,2,3"]})
  np.testing.assert_array_equal(out["labels"], [1, 0])
  np.testing.assert_array_equal(out["dense"], [[9.5, 30], [-1, 41]])
  np.testing.assert_array_equal(out["cats"].values, [3, 4, 5])
  np.testing.assert_array_equal(out["cats/row_splits"], [0, 3, 3])
  np.testing.assert_array_equal(out["cats"].dense_shape, [2, 3])
  assert [_unsigned(v) % 999983 for v in out["city"].values] == list(want)
  assert out["num_skipped"] == 1  # the header
  with pytest.raises(ValueError, match="reserved"):
    recflow.data.parse_csv(ph, [recflow.data.CsvColumn("dense", "sparse")])
  with pytest.raises(TypeError):
    recflow.data.parse_csv(ph, [3.5])


def test_plain_tensor_form_for_tf_data_and_to_sparse_tensors():
  # sparse_tensors=False: only plain tensors (what a tf.data element holds);
  # to_sparse_tensors gives back the SparseTensor form with the same values.
  lines = ["1 3:0.5 10:2", "0", "1 7:1.5"]
  plain = recflow.data.parse_libsvm(lines, sparse_tensors=False, error_mode="fail")
  assert set(plain) == {"labels", "num_skipped", "features/indices", "features/values",
                        "features/dense_shape", "features/weights", "features/row_splits"}
  assert all(isinstance(v, tf.Tensor) for v in plain.values())
  rebuilt = recflow.data.to_sparse_tensors(plain)
  direct = recflow.data.parse_libsvm(lines, error_mode="fail")
  assert set(rebuilt) == set(direct)
  crit = recflow.data.parse_criteo([_criteo_line(1, [2], [5, None])], num_dense=1,
                                   num_categorical=2, sparse_tensors=False)
  assert "C1/values" in crit and "C1" not in crit
  crit_sp = recflow.data.to_sparse_tensors(crit)
  with tf.Session() as sess:
    a, b, c = sess.run([rebuilt, direct, crit_sp])
  for key in ("features", "features/weights"):
    np.testing.assert_array_equal(a[key].indices, b[key].indices)
    np.testing.assert_array_equal(a[key].values, b[key].values)
    np.testing.assert_array_equal(a[key].dense_shape, b[key].dense_shape)
  np.testing.assert_array_equal(c["C1"].values, [5])
  np.testing.assert_array_equal(c["C2"].dense_shape, [1, 0])
  with pytest.raises(ValueError, match="no matching"):
    recflow.data.to_sparse_tensors({"x/indices": plain["features/indices"]})
