"""tf.nn.embedding_lookup over partitioned tables, embedding_lookup_sparse and
safe_embedding_lookup_sparse against NumPy; gradients by finite differences."""

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow.framework import ops


def _split(table, n, strategy):
  rows = table.shape[0]
  if strategy == "mod":
    return [table[i::n] for i in range(n)]
  per, extras = divmod(rows, n)
  out, start = [], 0
  for i in range(n):
    size = per + (1 if i < extras else 0)
    out.append(table[start:start + size])
    start += size
  return out


def _np_clip(rows, max_norm):
  if max_norm is None:
    return rows
  norm = np.sqrt((rows ** 2).sum(axis=-1, keepdims=True))
  return rows * max_norm / np.maximum(norm, max_norm)


@pytest.mark.parametrize("strategy", ["mod", "div"])
@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_embedding_lookup_partitioned_matches_numpy(strategy, n):
  rng = np.random.RandomState(n)
  table = rng.randn(11, 3).astype(np.float32)
  ids_np = rng.randint(0, 11, size=(4, 5))
  params = [tf.constant(p) for p in _split(table, n, strategy)]
  out = tf.nn.embedding_lookup(params, tf.constant(ids_np), partition_strategy=strategy)
  assert out.get_shape().as_list() == [4, 5, 3]
  with tf.Session() as sess:
    np.testing.assert_allclose(sess.run(out), table[ids_np], rtol=1e-6)


def test_embedding_lookup_div_with_unknown_table_sizes():
  table = np.arange(20, dtype=np.float32).reshape(10, 2)
  parts = _split(table, 3, "div")
  phs = [tf.placeholder(tf.float32, [None, 2]) for _ in parts]
  ids = np.array([0, 3, 4, 6, 7, 9], np.int64)
  out = tf.nn.embedding_lookup(phs, ids, partition_strategy="div")
  with tf.Session() as sess:
    got = sess.run(out, dict(zip(phs, parts)))
  np.testing.assert_allclose(got, table[ids])


@pytest.mark.parametrize("n", [1, 3])
def test_embedding_lookup_max_norm(n):
  rng = np.random.RandomState(0)
  table = (rng.randn(9, 4) * 3).astype(np.float32)
  ids = np.array([[0, 4], [8, 4]])
  out = tf.nn.embedding_lookup([tf.constant(p) for p in _split(table, n, "mod")], ids,
                               max_norm=1.5)
  with tf.Session() as sess:
    np.testing.assert_allclose(sess.run(out), _np_clip(table[ids], 1.5), rtol=1e-5)


def _numeric_grad(sess, loss, var, feed=None, eps=1e-3):
  value = sess.run(var)
  grad = np.zeros_like(value, dtype=np.float64)
  ph = tf.placeholder(var.dtype.base_dtype, var.get_shape())
  assign = tf.assign(var, ph)
  it = np.nditer(value, flags=["multi_index"])
  for _ in it:
    i = it.multi_index
    for sign in (1, -1):
      v = value.copy()
      v[i] += sign * eps
      sess.run(assign, {ph: v})
      grad[i] += sign * sess.run(loss, feed)
    grad[i] /= 2 * eps
  sess.run(assign, {ph: value})
  return grad


def _dense(g, shape):
  if isinstance(g, ops.IndexedSlicesValue):
    out = np.zeros(shape, np.float64)
    np.add.at(out, g.indices, g.values)
    return out
  return g


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_gradients_are_indexed_slices_per_table(strategy):
  rng = np.random.RandomState(1)
  table = rng.randn(7, 2).astype(np.float32)
  parts = _split(table, 3, strategy)
  tables = [tf.Variable(p, name="t%d" % i) for i, p in enumerate(parts)]
  ids = tf.constant([[1, 6], [2, 2], [0, 5]])
  out = tf.nn.embedding_lookup(tables, ids, partition_strategy=strategy, max_norm=1.0)
  coeff = tf.constant(rng.randn(3, 2, 2).astype(np.float32))
  loss = tf.reduce_sum(out * coeff)
  grads = tf.gradients(loss, tables)
  assert all(isinstance(g, ops.IndexedSlices) for g in grads)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got = sess.run(grads)
    for g, t in zip(got, tables):
      want = _numeric_grad(sess, loss, t)
      np.testing.assert_allclose(_dense(g, want.shape), want, atol=2e-2)


def _sparse_ids(rng, rows, cols, vocab, empty=()):
  indices, values = [], []
  for r in range(rows):
    if r in empty:
      continue
    for c in sorted(rng.choice(cols, size=rng.randint(1, cols + 1), replace=False)):
      indices.append([r, c])
      values.append(rng.randint(0, vocab))
  return np.array(indices, np.int64), np.array(values, np.int64)


def _np_lookup_sparse(table, indices, ids, weights, combiner, nrows):
  out = np.zeros((nrows, table.shape[1]), np.float64)
  for r in range(nrows):
    sel = indices[:, 0] == r
    if not sel.any():
      continue
    w = weights[sel] if weights is not None else np.ones(sel.sum())
    s = (table[ids[sel]] * w[:, None]).sum(0)
    if combiner == "mean":
      s /= w.sum()
    elif combiner == "sqrtn":
      s /= np.sqrt((w ** 2).sum())
    out[r] = s
  return out


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [1, 2])
def test_embedding_lookup_sparse_matches_numpy(combiner, weighted, n):
  rng = np.random.RandomState(3)
  table = rng.randn(10, 3).astype(np.float32)
  indices, ids = _sparse_ids(rng, 6, 4, 10, empty=(2,))
  weights = rng.rand(len(ids)).astype(np.float32) + 0.5 if weighted else None
  sp_ids = tf.SparseTensor(indices, ids, [6, 4])
  sp_w = tf.SparseTensor(indices, weights, [6, 4]) if weighted else None
  out = tf.nn.embedding_lookup_sparse([tf.constant(p) for p in _split(table, n, "mod")],
                                      sp_ids, sp_w, combiner=combiner)
  with tf.Session() as sess:
    got = sess.run(out)
  want = _np_lookup_sparse(table, indices, ids, weights, combiner, 6)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_embedding_lookup_sparse_drops_trailing_empty_rows_as_tf_1_15():
  sp = tf.SparseTensor([[0, 0], [1, 1]], tf.constant([1, 2], tf.int64), [4, 2])
  out = tf.nn.embedding_lookup_sparse(tf.constant(np.eye(3, dtype=np.float32)), sp, None,
                                      combiner="sum")
  with tf.Session() as sess:
    assert sess.run(out).shape == (2, 3)


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
def test_embedding_lookup_sparse_gradients(combiner):
  rng = np.random.RandomState(4)
  table = rng.randn(8, 2).astype(np.float32)
  indices, ids = _sparse_ids(rng, 4, 3, 8)
  weights = (rng.rand(len(ids)) + 0.5).astype(np.float32)
  tables = [tf.Variable(p) for p in _split(table, 2, "mod")]
  w = tf.Variable(weights)
  out = tf.nn.embedding_lookup_sparse(tables, tf.SparseTensor(indices, ids, [4, 3]),
                                      tf.SparseTensor(indices, w, [4, 3]), combiner=combiner)
  loss = tf.reduce_sum(out * tf.constant(rng.randn(4, 2).astype(np.float32)))
  grads = tf.gradients(loss, tables + [w])
  assert isinstance(grads[0], ops.IndexedSlices)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got = sess.run(grads)
    for g, v in zip(got, tables + [w]):
      want = _numeric_grad(sess, loss, v)
      np.testing.assert_allclose(_dense(g, want.shape), want, atol=2e-2)


def test_embedding_lookup_sparse_fed_through_sparse_placeholder():
  table = np.arange(12, dtype=np.float32).reshape(6, 2)
  sp = tf.sparse_placeholder(tf.int64, name="ids")
  out = tf.nn.embedding_lookup_sparse(tf.constant(table), sp, None, combiner="mean")
  with tf.Session() as sess:
    got = sess.run(out, {sp: tf.SparseTensorValue([[0, 0], [0, 1], [1, 0]], [1, 3, 5], [2, 2])})
  np.testing.assert_allclose(got, [(table[1] + table[3]) / 2, table[5]])


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn"])
@pytest.mark.parametrize("default_id", [None, 4])
@pytest.mark.parametrize("weighted", [False, True])
def test_safe_embedding_lookup_sparse_matches_numpy(combiner, default_id, weighted):
  rng = np.random.RandomState(5)
  table = rng.randn(9, 3).astype(np.float32)
  indices, ids = _sparse_ids(rng, 7, 4, 9, empty=(1, 6))
  ids[::3] = -1  # pruned
  weights = (rng.rand(len(ids)) + 0.2).astype(np.float32) if weighted else None
  if weighted:
    weights[1::4] = 0.0  # pruned unless combiner is sum
  sp_w = tf.SparseTensor(indices, weights, [7, 4]) if weighted else None
  out = tf.nn.safe_embedding_lookup_sparse([tf.constant(p) for p in _split(table, 3, "div")],
                                           tf.SparseTensor(indices, ids, [7, 4]), sp_w,
                                           combiner=combiner, default_id=default_id)
  with tf.Session() as sess:
    got = sess.run(out)
  keep = ids >= 0
  if weighted and combiner != "sum":
    keep &= weights > 0
  want = _np_lookup_sparse(table, indices[keep], ids[keep],
                           weights[keep] if weighted else None, combiner, 7)
  if default_id is not None:
    for r in range(7):
      if not (indices[keep][:, 0] == r).any():
        want[r] = table[default_id]
  assert got.shape == (7, 3)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_safe_embedding_lookup_sparse_rank_3_and_gradients():
  rng = np.random.RandomState(6)
  table = rng.randn(5, 2).astype(np.float32)
  indices = np.array([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 1, 1]], np.int64)
  ids = np.array([1, 4, -1, 2], np.int64)
  t = tf.Variable(table)
  out = tf.nn.safe_embedding_lookup_sparse(t, tf.SparseTensor(indices, ids, [2, 2, 2]),
                                           combiner="sqrtn", default_id=0)
  assert out.get_shape().as_list() == [None, None, 2]
  loss = tf.reduce_sum(out * tf.constant(rng.randn(2, 2, 2).astype(np.float32)))
  grad = tf.gradients(loss, t)[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got, g = sess.run([out, grad])
    want_grad = _numeric_grad(sess, loss, t)
  want = np.array([[(table[1] + table[4]) / np.sqrt(2), table[0]],
                   [table[0], table[2]]])
  np.testing.assert_allclose(got, want, rtol=1e-5)
  np.testing.assert_allclose(_dense(g, table.shape), want_grad, atol=2e-2)


def test_bad_arguments_name_the_argument():
  table = tf.constant(np.ones((3, 2), np.float32))
  sp = tf.SparseTensor([[0, 0]], tf.constant([1], tf.int64), [1, 1])
  with pytest.raises(ValueError, match="partition strategy"):
    tf.nn.embedding_lookup([table, table], [0], partition_strategy="hash")
  with pytest.raises(ValueError, match="param"):
    tf.nn.embedding_lookup([], [0])
  with pytest.raises(TypeError, match="ids"):
    tf.nn.embedding_lookup(table, [0.5])
  with pytest.raises(TypeError, match="sp_ids"):
    tf.nn.embedding_lookup_sparse(table, tf.constant([[1]]), None)
  with pytest.raises(TypeError, match="sp_weights"):
    tf.nn.embedding_lookup_sparse(table, sp, tf.constant([1.0]))
  with pytest.raises(ValueError, match="combiner"):
    tf.nn.embedding_lookup_sparse(table, sp, None, combiner="max")
  with pytest.raises(ValueError, match="combiner"):
    tf.nn.safe_embedding_lookup_sparse(table, sp, combiner="max")
  with pytest.raises(TypeError, match="sparse_ids"):
    tf.nn.safe_embedding_lookup_sparse(table, [[1]])
  with pytest.raises(TypeError, match="default_id"):
    tf.nn.safe_embedding_lookup_sparse(table, sp, default_id="0")
  with pytest.raises(ValueError, match="embedding_weights"):
    tf.nn.safe_embedding_lookup_sparse(None, sp)


@pytest.mark.parametrize("use_resource", [False, True])
def test_partitioned_tables_train_with_sparse_updates(use_resource):
  tables = [tf.get_variable("t%d" % i, [5, 2], initializer=tf.ones_initializer(),
                            use_resource=use_resource) for i in range(2)]
  sp = tf.SparseTensor([[0, 0], [1, 0], [1, 1]], tf.constant([3, 7, 7], tf.int64), [3, 2])
  out = tf.nn.safe_embedding_lookup_sparse(tables, sp, combiner="sum", default_id=9)
  assert out.get_shape().as_list() == [None, 2]
  loss = tf.reduce_sum(out)
  grads = tf.gradients(loss, tables)
  assert all(isinstance(g, ops.IndexedSlices) for g in grads)
  train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    t0, t1 = sess.run(tables)
  # "div" over 10 ids: 3 -> t0[3]; 7 -> t1[2] (twice); 9 (default, row 2) -> t1[4]
  want0 = np.ones((5, 2), np.float32)
  want0[3] -= 0.5
  want1 = np.ones((5, 2), np.float32)
  want1[2] -= 1.0
  want1[4] -= 0.5
  np.testing.assert_allclose(t0, want0)
  np.testing.assert_allclose(t1, want1)
