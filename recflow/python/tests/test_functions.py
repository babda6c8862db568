"""Graph functions from Python: tracing (function.trace_function), Defun, the
graph's function library through GraphDef export/import, and tf.nest."""

import collections
import threading

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow.framework import function
from recflow.util import nest


def _rand(shape, seed):
  return np.random.RandomState(seed).uniform(-2, 2, size=shape).astype(np.float32)


# --- nest ---------------------------------------------------------------------

Point = collections.namedtuple("Point", ["x", "y"])


def test_nest_flatten_and_pack():
  s = {"b": (1, [2, 3]), "a": Point(4, None), "c": "text"}
  flat = nest.flatten(s)
  assert flat == [4, None, 1, 2, 3, "text"]  # sorted keys; None and strings are leaves
  packed = nest.pack_sequence_as(s, [10, 11, 12, 13, 14, 15])
  assert packed == {"a": Point(10, 11), "b": (12, [13, 14]), "c": 15}
  assert isinstance(packed["a"], Point) and isinstance(packed["b"][1], list)
  assert nest.flatten(7) == [7] and nest.pack_sequence_as(7, [8]) == 8
  od = collections.OrderedDict([("z", 1), ("a", 2)])
  assert nest.flatten(od) == [2, 1]
  assert list(nest.pack_sequence_as(od, [5, 6]).items()) == [("z", 6), ("a", 5)]
  with pytest.raises(ValueError, match="structure has 2 leaves but flat_sequence has 3"):
    nest.pack_sequence_as((1, 2), [1, 2, 3])


def test_nest_map_structure_and_assert():
  assert nest.map_structure(lambda a, b: a + b, (1, [2]), (10, [20])) == (11, [22])
  assert nest.map_structure(lambda a: a * 2, {"k": [1, 2]}) == {"k": [2, 4]}
  with pytest.raises(ValueError, match="same length"):
    nest.assert_same_structure((1, 2), (1, 2, 3))
  with pytest.raises(TypeError, match="same sequence type"):
    nest.assert_same_structure((1, 2), [1, 2])
  nest.assert_same_structure((1, 2), [1, 2], check_types=False)
  with pytest.raises(ValueError, match="same keys"):
    nest.assert_same_structure({"a": 1}, {"b": 1})
  assert nest.flatten_up_to((1, [2, 3]), ((4, 5), [6, (7, 8)])) == [(4, 5), 6, (7, 8)]
  assert tf.nest.flatten([1, (2,)]) == [1, 2]
  assert nest.is_nested([]) and not nest.is_nested("abc")


# --- tracing --------------------------------------------------------------------

def test_trace_and_call_with_captures_and_structures():
  w_value = _rand([3], 1)
  w = tf.constant(w_value, name="w")
  x = tf.placeholder(tf.float32, [None, 3], name="x")
  traced = function.trace_function(
      lambda a, b: {"sum": a + b, "scaled": (a * w, b)},
      [function.TensorSpec([None, 3], tf.float32), function.TensorSpec([None, 3], tf.float32)],
      name="affine")
  assert traced.name == "affine"
  assert traced.captured_inputs == [w]
  assert traced.input_types == [tf.float32, tf.float32, tf.float32]
  assert traced.output_types == [tf.float32] * 3
  assert traced.output_shapes[0].as_list() == [None, 3]
  assert not traced.is_stateful
  assert tf.get_default_graph()._is_function("affine")
  sig = traced.function_def.signature
  assert [a["name"] for a in sig["input_arg"]] == ["arg0", "arg1", "capture"]
  assert len(sig["output_arg"]) == 3
  out = traced(x, 2.0 * x)
  assert set(out) == {"sum", "scaled"} and isinstance(out["scaled"], tuple)
  assert out["sum"].op.type == "PartitionedCall"
  assert out["sum"].shape.as_list() == [None, 3]
  xv = _rand([4, 3], 2)
  with tf.Session() as sess:
    got = sess.run(out, {x: xv})
  np.testing.assert_allclose(got["sum"], 3 * xv, rtol=1e-6)
  np.testing.assert_allclose(got["scaled"][0], xv * w_value, rtol=1e-6)
  np.testing.assert_allclose(got["scaled"][1], 2 * xv, rtol=1e-6)


def test_stateful_body_uses_stateful_call_and_runs_effects():
  v = tf.Variable(np.float32(0.0), name="counter", use_resource=True)

  def bump(x):
    with tf.control_dependencies([v.assign_add(x)]):
      return tf.identity(x) * 2.0

  traced = function.trace_function(bump, [tf.float32])
  assert traced.is_stateful
  y = traced(tf.constant(1.5))
  assert y.op.type == "StatefulPartitionedCall"
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    assert sess.run(y) == 3.0
    sess.run(y)
    assert sess.run(v) == pytest.approx(3.0)


def test_nested_functions_and_nested_capture():
  outer_c = tf.constant(10.0, name="outer_c")
  inner = function.trace_function(lambda a: a + outer_c, [tf.float32], name="inner")

  def outer(a):
    return inner(a) * inner(a * 2.0)

  traced = function.trace_function(outer, [tf.float32], name="outer")
  # The inner function's capture is captured again by the outer function.
  assert traced.captured_inputs == [outer_c]
  assert set(tf.get_default_graph()._function_names()) >= {"inner", "outer"}
  y = traced(tf.constant(3.0))
  with tf.Session() as sess:
    assert sess.run(y) == pytest.approx((3 + 10) * (6 + 10))


def test_function_returning_its_argument_and_constants():
  traced = function.trace_function(lambda a: (a, 7, [a + 1]), [tf.int64])
  a, seven, rest = traced(tf.constant(np.int64(5)))
  assert seven.dtype == tf.int32
  with tf.Session() as sess:
    assert sess.run([a, seven, rest]) == [5, 7, [6]]


def test_library_survives_graph_def_export_and_import():
  traced = function.trace_function(lambda a: tf.square(a) + 1.0, [tf.float32], name="sq1")
  x = tf.placeholder(tf.float32, [], name="x")
  y = tf.identity(traced(x), name="y")
  gd = tf.get_default_graph().as_graph_def()
  gd2 = tf.GraphDef.FromString(gd.SerializeToString())
  with tf.Graph().as_default() as g:
    tf.import_graph_def(gd2, name="imported")
    assert g._is_function("sq1")
    assert g._get_function("sq1") == traced.function_def
    with tf.Session() as sess:
      assert sess.run("imported/y:0", {"imported/x:0": 3.0}) == 10.0
  # A second import into the same graph: the identical function is kept once.
  with tf.Graph().as_default() as g:
    tf.import_graph_def(gd2, name="a")
    tf.import_graph_def(gd2, name="b")
    assert g._function_names() == ["sq1"]
  del y


def test_add_function_conflicts_and_bad_bytes():
  g = tf.get_default_graph()
  f1 = function.trace_function(lambda a: a + 1.0, [tf.float32], name="same", add_to_graph=False)
  with tf.Graph().as_default():
    f2 = function.trace_function(lambda a: a * 2.0, [tf.float32], name="same",
                                 add_to_graph=False)
  g._add_function(f1)
  g._add_function(f1.function_def)  # identical: fine
  with pytest.raises(ValueError, match="cannot add function 'same'"):
    g._add_function(f2.function_def)
  with pytest.raises(Exception, match="not a serialized FunctionDef"):
    g._add_function(b"\xff\xff")
  assert g._get_function("nope") is None


def test_defun_tf1_style():
  @function.Defun(tf.float32, tf.float32)
  def mul_add(a, b):
    return a * b + a

  x = tf.placeholder(tf.float32, [None])
  y = mul_add(x, x)
  assert isinstance(y, tf.Tensor) and y.op.type == "PartitionedCall"
  assert mul_add.name.startswith("mul_add")
  assert [a["name"] for a in mul_add.definition.signature["input_arg"]] == ["a", "b"]
  xv = _rand([5], 3)
  with tf.Session() as sess:
    np.testing.assert_allclose(sess.run(y, {x: xv}), xv * xv + xv, rtol=1e-6)

  @function.Defun(func_name="PolyAdd")
  def poly(a):
    return a + a, a * a

  s, p = poly(tf.constant([1, 2, 3]))
  with tf.Session() as sess:
    assert sess.run(s).tolist() == [2, 4, 6] and sess.run(p).tolist() == [1, 4, 9]
  assert tf.get_default_graph()._is_function("PolyAdd")


def test_defun_refuses_gradients_and_bad_arguments():
  with pytest.raises(NotImplementedError, match="does not differentiate"):
    function.Defun(tf.float32, grad_func=lambda *a: a)

  @function.Defun(tf.float32)
  def one(a):
    return a

  with pytest.raises(ValueError, match="takes 1 arguments, got 2"):
    one(1.0, 2.0)
  with pytest.raises(TypeError, match="must be float32"):
    one(tf.constant("s"))


def test_tracing_errors_are_clear():
  with pytest.raises(TypeError, match="returned None at output 0"):
    function.trace_function(lambda a: None, [tf.float32])
  with pytest.raises(TypeError, match="returned an Operation"):
    function.trace_function(lambda a: tf.no_op(), [tf.float32])
  with pytest.raises(TypeError, match="input_signature entries"):
    function.trace_function(lambda a: a, [object()])
  with tf.Graph().as_default():
    other = tf.constant(1.0)
  with pytest.raises(ValueError, match="not from function"):
    function.trace_function(lambda a: a + other, [tf.float32])


def test_run_errors_name_the_function():
  traced = function.trace_function(lambda a: tf.reshape(a, [2, 2]), [tf.float32], name="rs")
  x = tf.placeholder(tf.float32, [None])
  y = traced(x)
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError, match="function 'rs'"):
      sess.run(y, {x: np.zeros([3], np.float32)})


def test_unknown_function_in_call_attr():
  x = tf.constant([1.0])
  y = tf.raw_ops.PartitionedCall(args=[x], Tout=[tf.float32], f="missing_fn")
  with tf.Session() as sess:
    with pytest.raises(tf.errors.NotFoundError, match="function 'missing_fn' is not in"):
      sess.run(y)


def test_concurrent_session_runs_of_a_function():
  traced = function.trace_function(lambda a: tf.reduce_sum(a * a), [tf.float32])
  x = tf.placeholder(tf.float32, [None])
  y = traced(x)
  results = {}
  with tf.Session() as sess:
    def work(i):
      xv = _rand([50], 100 + i)
      results[i] = (sess.run(y, {x: xv}), float(np.sum(xv * xv)))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
  assert len(results) == 8
  for got, want in results.values():
    assert got == pytest.approx(want, rel=1e-5)
