"""tf.SparseTensor, sparse placeholders fed and fetched through Session.run,
tf.sparse.to_dense and reduce_sum against NumPy."""

import numpy as np
import pytest

import recflow.compat.v1 as tf


def _dense(indices, values, shape, default=0):
  out = np.full(shape, default, dtype=np.asarray(values).dtype)
  for i, v in zip(indices, values):
    out[tuple(i)] = v
  return out


def test_sparse_tensor_parts_and_static_shape():
  sp = tf.SparseTensor(indices=[[0, 1], [2, 3]], values=[1.0, 2.0], dense_shape=[3, 4])
  assert sp.indices.dtype == tf.int64 and sp.dense_shape.dtype == tf.int64
  assert sp.dtype == tf.float32
  assert sp.get_shape().as_list() == [3, 4]
  assert sp.graph is tf.get_default_graph()
  with tf.Session() as sess:
    value = sess.run(sp)
  assert isinstance(value, tf.SparseTensorValue)
  np.testing.assert_array_equal(value.indices, [[0, 1], [2, 3]])
  np.testing.assert_array_equal(value.values, [1.0, 2.0])
  np.testing.assert_array_equal(value.dense_shape, [3, 4])


def test_sparse_placeholder_names_shapes_and_feeds():
  sp = tf.sparse_placeholder(tf.float32, name="feat")
  assert sp.indices.name == "feat/indices:0"
  assert sp.values.name == "feat/values:0"
  assert sp.dense_shape.name == "feat/shape:0"
  dense = tf.sparse.to_dense(sp, default_value=-1.0)
  value = tf.SparseTensorValue([[0, 0], [1, 2]], np.array([3.0, 4.0], np.float32), [2, 3])
  with tf.Session() as sess:
    got_value, got_tuple, fetched = sess.run(
        [dense, dense, sp], {sp: value})
    got_tuple = sess.run(dense, {sp: ([[1, 1]], [7.0], [2, 2])})
    np.testing.assert_array_equal(got_value, _dense(value.indices, value.values, (2, 3), -1))
    np.testing.assert_array_equal(got_tuple, [[-1, -1], [-1, 7]])
    np.testing.assert_array_equal(fetched.values, value.values)
    # A fed SparseTensor fetched in a nested structure.
    out = sess.run({"a": [sp]}, {sp: value})
    assert isinstance(out["a"][0], tf.SparseTensorValue)


def test_sparse_placeholder_with_known_shape_makes_a_constant_shape():
  sp = tf.sparse_placeholder(tf.int64, shape=[4, 5], name="ids")
  assert sp.dense_shape.op.type == "Const"
  assert sp.get_shape().as_list() == [4, 5]
  sp2 = tf.sparse_placeholder(tf.int64, shape=[None, 5])
  assert sp2.dense_shape.op.type == "Placeholder"
  assert sp2.indices.get_shape().as_list() == [None, 2]
  with tf.Session() as sess:
    d = sess.run(tf.sparse_tensor_to_dense(sp), {sp: ([[3, 4]], [9], [4, 5])})
    assert d[3, 4] == 9 and d.sum() == 9
    with pytest.raises(ValueError, match="dense_shape"):
      sess.run(tf.sparse_tensor_to_dense(sp), {sp: ([[0, 0]], [9], [5, 5])})


def test_sparse_feed_bad_values():
  sp = tf.sparse_placeholder(tf.float32)
  d = tf.sparse.to_dense(sp)
  with tf.Session() as sess:
    with pytest.raises(TypeError, match="SparseTensorValue"):
      sess.run(d, {sp: np.zeros((2, 2))})
    with pytest.raises(TypeError, match="SparseTensorValue"):
      sess.run(d, {sp: ([[0, 0]], [1.0])})


def test_sparse_tensor_bad_arguments():
  with pytest.raises(ValueError, match="indices"):
    tf.SparseTensor([0, 1], [1.0, 2.0], [2])
  with pytest.raises(ValueError, match="values"):
    tf.SparseTensor([[0], [1]], [[1.0], [2.0]], [2])
  with pytest.raises(ValueError, match="indices has 2 rows but values has 3"):
    tf.SparseTensor([[0], [1]], [1.0, 2.0, 3.0], [3])
  with pytest.raises(ValueError, match="dense_shape"):
    tf.SparseTensor([[0, 1]], [1.0], [2])
  with pytest.raises(TypeError, match="sp_input"):
    tf.sparse.to_dense(tf.constant([1.0]))
  with pytest.raises(TypeError, match="sp_input"):
    tf.sparse.reduce_sum([1.0])


def test_to_dense_matches_numpy_and_has_a_gradient():
  rng = np.random.RandomState(0)
  flat = rng.choice(24, size=7, replace=False)
  indices = np.stack(np.unravel_index(flat, (2, 3, 4)), axis=1)
  values = tf.Variable(rng.randn(7).astype(np.float32))
  dense = tf.sparse.to_dense(tf.SparseTensor(indices, values, [2, 3, 4]), default_value=0.5)
  coeff = rng.randn(2, 3, 4).astype(np.float32)
  grad = tf.gradients(tf.reduce_sum(dense * coeff), values)[0]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got, g, v = sess.run([dense, grad, values])
  np.testing.assert_allclose(got, _dense(indices, v, (2, 3, 4), 0.5), rtol=1e-6)
  np.testing.assert_allclose(g, coeff[tuple(indices.T)], rtol=1e-6)


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, [0, 2], (1, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_sum_matches_numpy(axis, keepdims):
  rng = np.random.RandomState(1)
  flat = rng.choice(60, size=15, replace=False)
  indices = np.stack(np.unravel_index(flat, (3, 4, 5)), axis=1)
  values = rng.randn(15).astype(np.float32)
  sp = tf.SparseTensor(indices, values, [3, 4, 5])
  out = tf.sparse.reduce_sum(sp, axis=axis, keepdims=keepdims)
  want = _dense(indices, values, (3, 4, 5)).sum(
      axis=None if axis is None else tuple(np.atleast_1d(axis)), keepdims=keepdims)
  with tf.Session() as sess:
    np.testing.assert_allclose(sess.run(out), want, rtol=1e-5, atol=1e-6)


def test_reduce_sum_bad_axis():
  sp = tf.SparseTensor([[0, 0]], [1.0], [2, 2])
  with pytest.raises(ValueError, match="axis"):
    tf.sparse.reduce_sum(sp, axis=2)


def test_missing_sparse_ops_say_so():
  sp = tf.SparseTensor([[0, 0]], [1.0], [2, 2])
  with pytest.raises(NotImplementedError, match="sort"):
    tf.sparse.reorder(sp)
  with pytest.raises(NotImplementedError, match="Where"):
    tf.sparse_retain(sp, [True])


@pytest.mark.parametrize("adjoint_a", [False, True])
@pytest.mark.parametrize("adjoint_b", [False, True])
def test_sparse_dense_matmul_and_gradients(adjoint_a, adjoint_b):
  rng = np.random.RandomState(2)
  flat = rng.choice(12, size=6, replace=False)
  indices = np.stack(np.unravel_index(flat, (3, 4)), axis=1)
  values = tf.Variable(rng.randn(6).astype(np.float32))
  a_dense_shape = (3, 4)
  b_np = rng.randn(*((3, 5) if adjoint_a else (4, 5))).astype(np.float32)
  b = tf.Variable(b_np.T.copy() if adjoint_b else b_np)
  out = tf.sparse.sparse_dense_matmul(tf.SparseTensor(indices, values, a_dense_shape), b,
                                      adjoint_a=adjoint_a, adjoint_b=adjoint_b)
  coeff = rng.randn(4 if adjoint_a else 3, 5).astype(np.float32)
  loss = tf.reduce_sum(out * coeff)
  gv, gb = tf.gradients(loss, [values, b])
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got, v, g_values, g_b = sess.run([out, values, gv, tf.convert_to_tensor(gb)])
  a = _dense(indices, v, a_dense_shape)
  a = a.T if adjoint_a else a
  np.testing.assert_allclose(got, a @ b_np, rtol=1e-5, atol=1e-5)
  # d loss / d a = coeff @ b^T, read at the indices; d loss / d b = a^T @ coeff
  da = coeff @ b_np.T
  da = da.T if adjoint_a else da
  np.testing.assert_allclose(g_values, da[tuple(indices.T)], rtol=1e-4, atol=1e-5)
  db = a.T @ coeff
  np.testing.assert_allclose(g_b, db.T if adjoint_b else db, rtol=1e-4, atol=1e-5)


def test_sparse_dense_matmul_bad_arguments():
  sp = tf.SparseTensor([[0, 0]], [1.0], [2, 2])
  with pytest.raises(TypeError, match="sp_a"):
    tf.sparse.sparse_dense_matmul(tf.ones([2, 2]), tf.ones([2, 2]))
  with pytest.raises(TypeError, match="dtype"):
    tf.sparse.sparse_dense_matmul(sp, tf.ones([2, 2], tf.float64))
  with pytest.raises(ValueError, match="b must be a matrix"):
    tf.sparse.sparse_dense_matmul(sp, tf.ones([2]))
