"""Programs written for TensorFlow 1.15, with only the import line changed."""

import collections

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow.framework import ops


def test_linear_regression_with_feed_dict_reaches_the_known_answer():
  rng = np.random.RandomState(42)
  x_data = rng.rand(200, 3).astype(np.float32)
  true_w = np.array([[2.0], [-3.5], [0.75]], np.float32)
  true_b = 1.25
  y_data = x_data.dot(true_w) + true_b + rng.normal(0, 1e-3, (200, 1)).astype(np.float32)

  x = tf.placeholder(tf.float32, shape=[None, 3], name="x")
  y = tf.placeholder(tf.float32, shape=[None, 1], name="y")
  with tf.variable_scope("linear"):
    w = tf.get_variable("w", shape=[3, 1], initializer=tf.zeros_initializer())
    b = tf.get_variable("b", shape=[], initializer=tf.zeros_initializer())
  pred = tf.matmul(x, w) + b
  loss = tf.reduce_mean(tf.square(pred - y))
  global_step = tf.train.get_or_create_global_step()
  train_op = tf.train.GradientDescentOptimizer(learning_rate=0.5).minimize(
      loss, global_step=global_step)
  init = tf.global_variables_initializer()

  with tf.Session() as sess:
    sess.run(init)
    for _ in range(1500):
      batch = rng.randint(0, 200, size=50)
      _, loss_value = sess.run([train_op, loss],
                               feed_dict={x: x_data[batch], y: y_data[batch]})
    w_value, b_value, step = sess.run([w, b, global_step])
  assert loss_value < 1e-4
  np.testing.assert_allclose(w_value, true_w, atol=1e-2)
  assert abs(b_value - true_b) < 1e-2
  assert step == 1500
  assert w.name == "linear/w:0" and b.name == "linear/b:0"
  assert [v.name for v in tf.trainable_variables()] == ["linear/w:0", "linear/b:0"]


def test_resource_variables_train_the_same_way():
  x = tf.placeholder(tf.float32, [None, 1])
  y = tf.placeholder(tf.float32, [None, 1])
  with tf.variable_scope("m", use_resource=True):
    w = tf.get_variable("w", [1, 1], initializer=tf.constant_initializer(0.0))
  assert w.dtype == tf.float32 and w.handle.dtype == tf.resource
  loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - y))
  train = tf.train.GradientDescentOptimizer(0.3).minimize(loss)
  xs = np.linspace(0, 1, 20, dtype=np.float32).reshape(-1, 1)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for _ in range(300):
      sess.run(train, {x: xs, y: 3 * xs})
    assert abs(sess.run(w)[0, 0] - 3.0) < 1e-3


def test_logistic_regression_with_sigmoid_cross_entropy():
  rng = np.random.RandomState(1)
  features = rng.normal(size=(400, 2)).astype(np.float32)
  labels = (features[:, :1] + 2 * features[:, 1:] > 0).astype(np.float32)
  x = tf.placeholder(tf.float32, [None, 2])
  y = tf.placeholder(tf.float32, [None, 1])
  w = tf.Variable(tf.random_normal([2, 1], stddev=0.1, seed=3), name="w")
  b = tf.Variable(tf.zeros([1]), name="b")
  logits = tf.nn.bias_add(tf.matmul(x, w), b)
  loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits))
  accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), y), tf.float32))
  opt = tf.train.GradientDescentOptimizer(1.0)
  grads_and_vars = opt.compute_gradients(loss)
  assert [v for _, v in grads_and_vars] == [w, b]
  train = opt.apply_gradients(grads_and_vars)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    first = sess.run(loss, {x: features, y: labels})
    for _ in range(200):
      sess.run(train, {x: features, y: labels})
    last, acc = sess.run([loss, accuracy], {x: features, y: labels})
  assert last < first / 3
  assert acc > 0.97


def test_mlp_with_relu_and_name_scopes():
  x = tf.placeholder(tf.float32, [None, 4], name="input")
  with tf.name_scope("hidden"):
    w1 = tf.Variable(tf.truncated_normal([4, 8], stddev=0.5, seed=1), name="weights")
    h = tf.nn.relu(tf.matmul(x, w1))
  with tf.name_scope("output"):
    w2 = tf.Variable(tf.truncated_normal([8, 1], stddev=0.5, seed=2), name="weights")
    out = tf.sigmoid(tf.matmul(h, w2), name="prob")
  assert w1.op.name == "hidden/weights"
  assert out.name == "output/prob:0"
  assert out.shape.as_list() == [None, 1]
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    value = sess.run(out, {x: np.ones((5, 4), np.float32)})
  assert value.shape == (5, 1) and ((value > 0) & (value < 1)).all()


def test_custom_op_zero_out_with_a_python_gradient(zero_out_path):
  zero_out_module = tf.load_op_library(zero_out_path)
  assert tf.load_op_library(zero_out_path) is zero_out_module

  # TensorFlow's "Create an op" guide, verbatim but for the import.
  @ops.RegisterGradient("ZeroOut")
  def _zero_out_grad(op, grad):
    to_zero = op.inputs[0]
    shape = tf.shape(to_zero)
    index = tf.zeros_like(shape)
    first_grad = tf.reshape(grad, [-1])[0]
    to_zero_grad = tf.sparse_to_dense([index], shape, first_grad, 0)
    return [to_zero_grad]

  x = tf.placeholder(tf.float32, [2, 2])
  z = zero_out_module.zero_out(x)
  assert z.op.type == "ZeroOut" and z.shape.as_list() == [2, 2]
  dz = tf.gradients(tf.reduce_sum(z * 3.0), [x])[0]
  with tf.Session() as sess:
    value, grad = sess.run([z, dz], {x: [[5, 7], [3, 9]]})
  np.testing.assert_array_equal(value, [[5, 0], [0, 0]])
  np.testing.assert_array_equal(grad, [[3, 0], [0, 0]])
  # The generated wrapper: attrs with defaults, docs from the OpDef, raw_ops form.
  y = zero_out_module.zero_out(tf.constant([[5, 7], [3, 9]]), preserve_index=2)
  raw = tf.raw_ops.ZeroOut(to_zero=tf.constant([1, 2, 3], tf.int64), preserve_index=1)
  with tf.Session() as sess:
    np.testing.assert_array_equal(sess.run(y), [[0, 0], [3, 0]])
    np.testing.assert_array_equal(sess.run(raw), [0, 2, 0])
  assert "Zeros every element of the input except one" in zero_out_module.zero_out.__doc__
  assert "preserve_index" in zero_out_module.zero_out.__doc__
  with pytest.raises(ValueError, match="preserve_index"):
    zero_out_module.zero_out(tf.constant([1.0]), preserve_index=-1)
  with pytest.raises(TypeError, match="allowed values"):
    zero_out_module.zero_out(tf.constant([True]))
  with pytest.raises(TypeError, match="keyword arguments only"):
    tf.raw_ops.ZeroOut(tf.constant([1.0]))
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="preserve_index is 9"):
      sess.run(zero_out_module.zero_out(x, preserve_index=9), {x: np.ones((2, 2))})


def test_nested_fetch_structures():
  a = tf.constant(1.0, name="a")
  b = tf.constant([2, 3], name="b")
  c = tf.placeholder(tf.string, [], name="c")
  noop = tf.no_op(name="nothing")
  Point = collections.namedtuple("Point", ["x", "y"])
  fetches = {"scalars": [a, (b, a)], "point": Point(x=a, y=b), "op": noop,
             "names": ["a:0", "b:0"], "string": c,
             "ordered": collections.OrderedDict([("z", a), ("y", "b:0")])}
  with tf.Session() as sess:
    out = sess.run(fetches, feed_dict={"c:0": b"hello"})
  assert out["scalars"][0] == 1.0
  assert isinstance(out["scalars"][1], tuple)
  np.testing.assert_array_equal(out["scalars"][1][0], [2, 3])
  assert isinstance(out["point"], Point) and out["point"].x == 1.0
  assert out["op"] is None
  assert out["names"][0] == 1.0
  assert out["string"] == b"hello"
  assert list(out["ordered"].keys()) == ["z", "y"]
  with tf.Session() as sess:
    assert sess.run(noop) is None
    assert sess.run("nothing") is None
    assert sess.run([]) == []


def test_interactive_session_and_eval():
  sess = tf.InteractiveSession()
  try:
    x = tf.constant([[1.0, 2.0]])
    y = tf.matmul(x, x, transpose_b=True)
    assert y.eval() == 5.0
    v = tf.Variable(3.0)
    v.initializer.run()
    assert v.eval() == 3.0
    v.load(7.0)
    assert sess.run(v) == 7.0
    assert tf.get_default_session() is sess
  finally:
    sess.close()
  assert tf.get_default_session() is None
