"""Every registered op has a generated Python function; a sample runs against NumPy."""

import inspect
import math

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow import _pywrap
from recflow.framework import op_wrappers
from recflow.ops import gen_ops


def test_every_registered_op_has_a_python_function_and_a_raw_op():
  names = _pywrap.op_names()
  assert len(names) > 150
  missing = [n for n in names if not hasattr(gen_ops, op_wrappers.wrapper_name(n))]
  assert not missing
  missing_raw = [n for n in names if not hasattr(tf.raw_ops, n)]
  assert not missing_raw
  for n in names:
    fn = getattr(gen_ops, op_wrappers.wrapper_name(n))
    op_def = fn._op_def
    params = list(inspect.signature(fn).parameters)
    assert params[-1] == "name"
    for arg in op_def.input_arg:
      assert op_wrappers._py_param(arg.name) in params, (n, arg.name)  # pylint: disable=protected-access
    assert fn.__doc__ and "Args:" in fn.__doc__ and "Returns:" in fn.__doc__


def test_snake_case_names_follow_tensorflow():
  cases = {"MatMul": "mat_mul", "L2Loss": "l2_loss", "BatchMatMulV2": "batch_mat_mul_v2",
           "_FusedMatMul": "_fused_mat_mul", "Relu6": "relu6", "Log1p": "log1p",
           "ConcatV2": "concat_v2", "DecodeCSV": "decode_csv", "FIFOQueueV2": "fifo_queue_v2",
           "SigmoidCrossEntropyWithLogits": "sigmoid_cross_entropy_with_logits",
           "Conv2D": "conv2d", "AddV2": "add_v2"}
  for op, snake in cases.items():
    assert op_wrappers.snake_case(op) == snake
  # Python keywords get a trailing "_".
  assert op_wrappers.wrapper_name("If") == "if_"
  assert op_wrappers.wrapper_name("While") == "while_"
  assert op_wrappers.wrapper_name("StatelessIf") == "stateless_if"


def test_wrappers_infer_attrs_take_defaults_and_return_tensorflow_structures():
  a = tf.constant([[1.0, 2.0], [3.0, 4.0]])
  mm = gen_ops.mat_mul(a, a, transpose_b=True)
  assert mm.op.get_attr("T") == tf.float32
  assert mm.op.get_attr("transpose_a") is False and mm.op.get_attr("transpose_b") is True
  packed = gen_ops.pack([a, a, a], axis=1)
  assert packed.op.get_attr("N") == 3 and packed.shape.as_list() == [2, 3, 2]
  uniq = gen_ops.unique(tf.constant([3, 1, 3, 2]))
  assert type(uniq).__name__ == "Unique" and uniq._fields == ("y", "idx")
  parts = gen_ops.split(0, tf.constant(np.arange(6.0)), num_split=3)
  assert isinstance(parts, list) and len(parts) == 3
  noop = gen_ops.no_op()
  assert isinstance(noop, tf.Operation)
  raw = tf.raw_ops.Cast(x=tf.constant([1.7, -1.2]), DstT=tf.int32, name="cast_it")
  assert raw.name == "cast_it:0" and raw.dtype == tf.int32
  assert tf.embedding_bag is gen_ops.embedding_bag  # ops TF has no name for: tf.<snake>
  with pytest.raises(AttributeError):
    tf.no_such_function_anywhere  # pylint: disable=pointless-statement
  with tf.Session() as sess:
    out = sess.run([mm, packed, uniq, parts, raw])
  np.testing.assert_allclose(out[0], [[5, 11], [11, 25]])
  assert out[2].y.tolist() == [3, 1, 2] and out[2].idx.tolist() == [0, 1, 0, 2]
  assert [p.tolist() for p in out[3]] == [[0, 1], [2, 3], [4, 5]]
  assert out[4].tolist() == [1, -1]


def _random(shape, seed, dtype=np.float32):
  return np.random.RandomState(seed).normal(size=shape).astype(dtype)


def test_a_handful_of_ops_against_numpy():
  x_np = _random([4, 5], 1)
  y_np = _random([5, 3], 2)
  b_np = _random([3], 3)
  i_np = np.random.RandomState(4).randint(-7, 9, size=(4, 5)).astype(np.int32)
  j_np = np.random.RandomState(5).randint(1, 5, size=(4, 5)).astype(np.int32)
  x, y, b = tf.constant(x_np), tf.constant(y_np), tf.constant(b_np)
  i, j = tf.placeholder(tf.int32, [4, 5]), tf.placeholder(tf.int32, [4, 5])
  checks = {
      "matmul": (tf.matmul(x, y), x_np @ y_np),
      "matmul_t": (tf.matmul(y, x, transpose_a=True, transpose_b=True), (x_np @ y_np).T),
      "bias_relu": (tf.nn.relu(tf.nn.bias_add(tf.matmul(x, y), b)),
                    np.maximum(x_np @ y_np + b_np, 0)),
      "broadcast": (x + x[0], x_np + x_np[0]),
      "sum_keepdims": (tf.reduce_sum(x, axis=1, keepdims=True), x_np.sum(1, keepdims=True)),
      "mean_all": (tf.reduce_mean(x), x_np.mean()),
      "max_axis0": (tf.reduce_max(x, 0), x_np.max(0)),
      "sigmoid": (tf.sigmoid(x), 1 / (1 + np.exp(-x_np))),
      "softmax": (tf.nn.softmax(x), np.exp(x_np) / np.exp(x_np).sum(1, keepdims=True)),
      "slices": (x[1:, ::-2], x_np[1:, ::-2]),
      "index": (x[2], x_np[2]),
      "ellipsis_newaxis": (x[..., 1, None], x_np[..., 1, None]),
      "neg_pow": (-x ** 2, -x_np ** 2),
      "transpose": (tf.transpose(x), x_np.T),
      "concat": (tf.concat([x, x * 2], axis=1), np.concatenate([x_np, x_np * 2], 1)),
      "stack": (tf.stack([b, b], axis=1), np.stack([b_np, b_np], 1)),
      "gather": (tf.gather(x, [3, 0, 3]), x_np[[3, 0, 3]]),
      "one_hot": (tf.one_hot([0, 2], 3), np.eye(3, dtype=np.float32)[[0, 2]]),
      "tile": (tf.tile(b[None, :], [2, 2]), np.tile(b_np[None, :], [2, 2])),
      "pad": (tf.pad(b, [[1, 2]], constant_values=5.0), np.pad(b_np, [1, 2],
                                                               constant_values=5.0)),
      "where": (tf.where(x > 0, x, tf.zeros_like(x)), np.where(x_np > 0, x_np, 0)),
      "argmax": (tf.argmax(x, 1), x_np.argmax(1)),
      "cast": (tf.cast(x * 3, tf.int32), (x_np * 3).astype(np.int32)),
      "floordiv": (i // j, i_np // j_np),
      "mod": (i % j, i_np % j_np),
      "truediv_int": (i / j, i_np / j_np),
      "range": (tf.range(2, 11, 3), np.arange(2, 11, 3)),
      "square_diff": (tf.squared_difference(x, 1.0), (x_np - 1.0) ** 2),
      "xent": (tf.nn.sigmoid_cross_entropy_with_logits(labels=tf.ones_like(x), logits=x),
               np.maximum(x_np, 0) - x_np + np.log1p(np.exp(-np.abs(x_np)))),
  }
  with tf.Session() as sess:
    names = list(checks)
    got = sess.run([checks[n][0] for n in names], {i: i_np, j: j_np})
  for n, value in zip(names, got):
    want = checks[n][1]
    assert value.shape == np.shape(want), n
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5, err_msg=n)


def test_gradients_of_a_few_ops_against_finite_differences():
  x_np = _random([3, 4], 7, np.float64)
  x = tf.placeholder(tf.float64, [3, 4])
  w = tf.constant(_random([4, 2], 8, np.float64))
  funcs = {
      "matmul_tanh": lambda t: tf.reduce_sum(tf.tanh(tf.matmul(t, w))),
      "slice_square": lambda t: tf.reduce_sum(tf.square(t[1:, ::2])),
      "softplus_mean": lambda t: tf.reduce_mean(tf.nn.softplus(t) * t),
      "fan_out": lambda t: tf.reduce_sum(t * t + t),
  }
  with tf.Session() as sess:
    for name, f in funcs.items():
      y = f(x)
      (g,) = tf.gradients(y, [x])
      analytic = sess.run(g, {x: x_np})
      numeric = np.zeros_like(x_np)
      eps = 1e-6
      for idx in np.ndindex(*x_np.shape):
        plus, minus = x_np.copy(), x_np.copy()
        plus[idx] += eps
        minus[idx] -= eps
        numeric[idx] = (sess.run(y, {x: plus}) - sess.run(y, {x: minus})) / (2 * eps)
      np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6, err_msg=name)


def test_where_of_a_condition_alone_gives_coordinates_and_erf_bucketize_run():
  with tf.Graph().as_default():
    x = tf.constant([[0.0, 1.5], [-2.0, 0.0]])
    coords = tf.where(tf.not_equal(x, 0.0))
    assert coords.dtype == tf.int64 and coords.shape.as_list() == [None, 2]
    erf = tf.math.erf(tf.constant([0.5, -1.0]))
    buckets = tf.raw_ops.Bucketize(input=tf.constant([1.0, 5.0, 20.0]), boundaries=[2.0, 10.0])
    with tf.Session() as sess:
      c, e, b = sess.run([coords, erf, buckets])
  assert c.tolist() == [[0, 1], [1, 0]]
  np.testing.assert_allclose(e, [math.erf(0.5), math.erf(-1.0)], rtol=1e-6)
  assert b.tolist() == [0, 1, 2]


def test_a_list_attrs_minimum_is_its_length_not_its_values():
  # MaxPool's ksize is list(int) >= 4: four values of 1 and 2 are fine, three are not.
  with tf.Graph().as_default():
    x = tf.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
    pooled = tf.raw_ops.MaxPool(input=x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1],
                                padding="VALID")
    with pytest.raises(ValueError, match="list of length 3 less than minimum 4"):
      tf.raw_ops.MaxPool(input=x, ksize=[1, 2, 2], strides=[1, 2, 2, 1], padding="VALID")
    with tf.Session() as sess:
      out = sess.run(pooled)
  assert out.reshape(-1).tolist() == [5.0, 7.0, 13.0, 15.0]
