"""Bad input to the bindings gives a Python exception, never a crash."""

import gc
import threading

import numpy as np
import pytest

import recflow.compat.v1 as tf
from recflow import _pywrap


def _session_with_placeholder(dtype=tf.float32, shape=None):
  x = tf.placeholder(dtype, shape, name="x")
  y = tf.identity(x, name="y")
  return tf.Session(), x, y


# --- Feeds ---------------------------------------------------------------------

def test_feed_of_the_wrong_shape_is_a_value_error():
  sess, x, y = _session_with_placeholder(shape=[None, 2])
  with pytest.raises(ValueError, match=r"Cannot feed value of shape \(3,\) for Tensor 'x:0'"):
    sess.run(y, {x: np.ones(3, np.float32)})


def test_feed_of_an_unconvertible_dtype_is_an_error():
  sess, x, y = _session_with_placeholder()
  with pytest.raises(ValueError):
    sess.run(y, {x: np.array(["a", "b"])})
  with pytest.raises(TypeError, match="larger type"):
    sess.run(tf.identity(tf.placeholder(tf.int32, [])), {"Placeholder:0": 2**40})
  s2, xs, ys = _session_with_placeholder(tf.string, [2])
  with pytest.raises(TypeError, match="string tensor"):
    s2.run(ys, {xs: np.array([1.0, 2.0])})


def test_feed_values_are_converted_as_tensorflow_converts_them():
  sess, x, y = _session_with_placeholder(tf.float32, [2])
  out = sess.run(y, {x: [1, 2]})  # ints to float32, as np.asarray(..., float32)
  assert out.dtype == np.float32 and out.tolist() == [1.0, 2.0]
  out = sess.run(y, {x: np.array([1.5, 2.5], np.float64)})
  assert out.dtype == np.float32


def test_none_and_tensors_are_refused_as_feed_values_and_fetches():
  sess, x, y = _session_with_placeholder()
  with pytest.raises(TypeError, match="None"):
    sess.run(y, {x: None})
  with pytest.raises(TypeError, match="cannot be a tf.Tensor"):
    sess.run(y, {x: tf.constant(1.0)})
  with pytest.raises(TypeError, match="Fetch argument None"):
    sess.run(None)
  with pytest.raises(TypeError, match="Fetch argument None"):
    sess.run([y, None])
  with pytest.raises(TypeError, match="feed_dict"):
    sess.run(y, feed_dict=[(x, 1.0)])
  with pytest.raises(TypeError, match="Cannot interpret feed_dict key"):
    sess.run(y, {"no_such_node:0": 1.0})
  with pytest.raises(ValueError, match="cannot be interpreted as a Tensor"):
    sess.run("no_such_node:0")
  with pytest.raises(TypeError, match="invalid type"):
    sess.run(object())


def test_object_arrays_are_refused_for_numeric_tensors():
  sess, x, y = _session_with_placeholder(tf.float32, [2])
  with pytest.raises(TypeError, match="dtype object"):
    sess.run(y, {x: np.array([1.0, 2.0], dtype=object)})
  # String tensors take object arrays of bytes or str, and nothing else in them.
  s2, xs, ys = _session_with_placeholder(tf.string, [2])
  assert s2.run(ys, {xs: np.array([b"a", "\u00e9"], dtype=object)}).tolist() == [
      b"a", "\u00e9".encode()]
  with pytest.raises(TypeError, match="element 1 of the object array is int"):
    s2.run(ys, {xs: np.array([b"a", 3], dtype=object)})


def test_read_only_and_non_contiguous_arrays_are_fed_correctly():
  sess, x, y = _session_with_placeholder(tf.float32, [None, None])
  base = np.arange(48, dtype=np.float32).reshape(6, 8)
  read_only = base.copy()
  read_only.flags.writeable = False
  for value in (read_only, base[::2, 1::3], base.T, np.asfortranarray(base),
                base.astype(">f4"), np.broadcast_to(base[:1], (4, 8))):
    np.testing.assert_array_equal(sess.run(y, {x: value}), np.asarray(value, np.float32))


def test_a_huge_feed_is_a_resource_exhausted_error_not_a_crash():
  sess, x, y = _session_with_placeholder(tf.float32, [None])
  huge = np.broadcast_to(np.float32(1), (1 << 40,))  # a 4 TB view of 4 bytes
  with pytest.raises(tf.errors.ResourceExhaustedError, match="out of memory"):
    sess.run(y, {x: huge})
  assert sess.run(y, {x: [1.0]}).tolist() == [1.0]  # the session still works


# --- Running -------------------------------------------------------------------

def test_errors_are_tensorflow_exception_classes_naming_the_node():
  x = tf.placeholder(tf.float32, [None], name="needs_feed")
  y = tf.square(x, name="sq")
  v = tf.Variable(1.0, name="never_initialized")
  with tf.Session() as sess:
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
      sess.run(y)
    assert "needs_feed" in str(info.value)
    assert info.value.op is not None and info.value.op.name == "needs_feed"
    assert info.value.error_code == tf.errors.INVALID_ARGUMENT
    assert isinstance(info.value, tf.errors.OpError)
    with pytest.raises(tf.errors.OpError, match="never_initialized"):
      sess.run(v)


def test_resource_handles_cannot_be_fetched_or_fed():
  with tf.variable_scope("r", use_resource=True):
    v = tf.get_variable("v", [2], initializer=tf.zeros_initializer())
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    with pytest.raises(TypeError, match="resource handle"):
      sess.run(v.handle)
    with pytest.raises(TypeError, match="resource handle"):
      sess.run(v.handle, {v.handle: 0})
    assert sess.run(v).tolist() == [0.0, 0.0]


def test_use_after_close_is_a_runtime_error():
  sess, x, y = _session_with_placeholder(tf.float32, [])
  assert sess.run(y, {x: 2.0}) == 2.0
  sess.close()
  sess.close()  # twice is fine
  with pytest.raises(RuntimeError, match="closed Session"):
    sess.run(y, {x: 2.0})
  with tf.Session() as s2:
    pass
  with pytest.raises(RuntimeError, match="closed Session"):
    s2.run(y, {x: 1.0})
  raw = _pywrap.Session(1, 1, True)
  raw.close()
  with pytest.raises(RuntimeError, match="closed Session"):
    raw.run([], [], [], ["y:0"], [])


def test_closing_while_another_thread_runs_is_safe():
  a = tf.placeholder(tf.float32, [512, 512])
  out = a
  for _ in range(20):
    out = tf.matmul(out, a) * 1e-3
  sess = tf.Session()
  value = np.ones((512, 512), np.float32) * 0.01
  results = []

  def worker():
    for _ in range(10):
      try:
        results.append(sess.run(out, {a: value}).shape)
      except RuntimeError as e:
        results.append(str(e))
        return

  t = threading.Thread(target=worker)
  t.start()
  sess.close()
  t.join()
  assert all(r == (512, 512) or "closed Session" in r for r in results)


def test_a_graph_from_another_thread():
  graph = tf.Graph()
  with graph.as_default():
    x = tf.placeholder(tf.float32, [], name="x")
  errors = []

  def build(k):
    try:
      with graph.as_default():
        acc = x
        for i in range(100):
          acc = tf.add(acc, float(i), name="t%d_add" % k)
      results[k] = acc
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  results = {}
  threads = [threading.Thread(target=build, args=(k,)) for k in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert not errors
  names = [op.name for op in graph.get_operations()]
  assert len(names) == len(set(names)) == 1 + 4 * 100 * 2  # each add has its constant
  # The default graph is per thread, as in TensorFlow.
  seen = []
  with graph.as_default():
    t = threading.Thread(target=lambda: seen.append(tf.get_default_graph() is graph))
    t.start()
    t.join()
  assert seen == [False]
  # Several threads run one session at once.
  sess = tf.Session(graph=graph)
  outs = {}

  def run(k):
    outs[k] = [float(sess.run(results[k], {x: float(j)})) for j in range(20)]

  threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  for k in range(4):
    assert outs[k] == [j + 4950.0 for j in range(20)]
  sess.close()


# --- Graph construction ---------------------------------------------------------

def test_graph_construction_errors_name_the_op_and_argument():
  a = tf.constant([[1.0, 2.0]], name="a")
  with pytest.raises(ValueError, match=r"node 'MatMul' \(MatMul\).*inner dimensions"):
    tf.matmul(a, a)
  with pytest.raises(TypeError, match="Input 'y' of 'AddV2' Op has type int32 that does not "
                                      "match type float32 of argument 'x'"):
    tf.add_v2(a, tf.constant(1))
  with pytest.raises(TypeError, match="Expected float32 passed to parameter 'y'"):
    tf.add_v2(a, "text")
  with pytest.raises(TypeError, match="Expected bool for argument 'transpose_a'"):
    tf.matmul(a, a, transpose_a="yes")
  with pytest.raises(TypeError, match="Expected float32 passed to parameter 'b'"):
    tf.raw_ops.MatMul(a=a, b=None)
  with pytest.raises(TypeError, match="unexpected keyword arguments: bogus"):
    tf.raw_ops.MatMul(a=a, b=a, bogus=1)
  with pytest.raises(TypeError, match="No argument for input b"):
    tf.raw_ops.MatMul(a=a)
  with pytest.raises(TypeError, match="Expected int32, got 1.5"):
    tf.constant(1.5, dtype=tf.int32)
  with pytest.raises(TypeError, match="Failed to convert object of type"):
    tf.constant({"a": 1})
  with pytest.raises(ValueError, match="not a valid"):
    tf.constant(1.0, name="bad name!")
  with pytest.raises(TypeError, match="mutable tensor"):
    tf.assign(a, a)
  with pytest.raises(TypeError, match="Expected DataType for argument 'dtype'"):
    tf.placeholder("not a dtype")
  # Nothing half-built was left behind.
  assert [op.type for op in a.graph.get_operations()] == ["Const", "Const"]
  with pytest.raises(ValueError, match="must be from the same graph"):
    with tf.Graph().as_default():
      tf.identity(a) + tf.constant(1.0)


def test_finalized_graph_refuses_new_ops():
  g = tf.Graph()
  with g.as_default():
    tf.constant(1.0)
  g.finalize()
  with g.as_default():
    with pytest.raises(RuntimeError, match="finalized"):
      tf.constant(2.0)


def test_raw_binding_misuse_raises():
  g = _pywrap.Graph()
  with pytest.raises(tf.errors.NotFoundError, match="NoSuchOp"):
    g.add_node("NoSuchOp", "n", [], [], {}, "")
  with pytest.raises(IndexError):
    g.add_node("Identity", "i", [(5, 0)], [], {}, "")
  with pytest.raises(TypeError):
    g.add_node("Identity", "i", ["x"], [], {}, "")
  with pytest.raises(ValueError, match="input arguments"):
    g.add_node("Identity", "i", [], [], {}, "")
  with pytest.raises(TypeError, match="no attr 'nope'"):
    g.add_node("Placeholder", "p", [], [], {"dtype": 1, "nope": 1}, "")
  with pytest.raises(TypeError, match="Expected a DType"):
    g.add_node("Placeholder", "p", [], [], {"dtype": "float"}, "")
  with pytest.raises(ValueError, match="not a valid DataType"):
    g.add_node("Placeholder", "p", [], [], {"dtype": 999}, "")
  node, types = g.add_node("Placeholder", "p", [], [], {"dtype": 1, "shape": [2]}, "")
  assert (node, types) == (0, [1])
  with pytest.raises(tf.errors.AlreadyExistsError):
    g.add_node("Placeholder", "p", [], [], {"dtype": 1}, "")
  with pytest.raises(IndexError):
    g.node_output_shape(0, 3)
  with pytest.raises(IndexError):
    g.node_summary(-1)
  with pytest.raises(ValueError, match="has no attr named"):
    g.node_attr(0, "missing")
  with pytest.raises(tf.errors.InvalidArgumentError, match="not a serialized GraphDef"):
    g.import_graph_def(b"\xff\xff garbage", "imp", {})
  assert g.num_nodes() == 1
  s = _pywrap.Session(1, 1, True)
  s.extend(g, 0, -1)
  with pytest.raises(ValueError, match="feed names"):
    s.run(["p"], [], [1], ["p:0"], [])
  with pytest.raises(ValueError, match="not a DataType"):
    s.run(["p"], [np.ones(2, np.float32)], [77], ["p:0"], [])
  with pytest.raises(TypeError, match="is None"):
    s.run(["p"], [None], [1], ["p:0"], [])
  with pytest.raises(TypeError, match="array of int64 but the tensor is float"):
    s.run(["p"], [np.ones(2, np.int64)], [1], ["p:0"], [])
  with pytest.raises(TypeError):
    _pywrap.Session(None, 1, True)
  with pytest.raises(TypeError):
    s.extend(None, 0, -1)
  with pytest.raises(TypeError):
    _pywrap.tensor_roundtrip(np.array([np.datetime64("2020-01-01")]))
  with pytest.raises(ValueError):
    _pywrap.tensor_roundtrip([[1, 2], [3]])


def test_loading_a_missing_or_bad_op_library_raises(tmp_path):
  with pytest.raises(tf.errors.NotFoundError):
    tf.load_op_library(str(tmp_path / "missing.so"))
  bad = tmp_path / "bad.so"
  bad.write_bytes(b"not an ELF file")
  with pytest.raises(tf.errors.InvalidArgumentError):
    tf.load_op_library(str(bad))


def test_import_graph_def_errors():
  with pytest.raises(ValueError, match="not a serialized GraphDef"):
    tf.import_graph_def(b"\xff\xff\xff")
  dangling = _pywrap.graph_def_from_text(
      'node { name: "y" op: "Identity" input: "missing" '
      'attr { key: "T" value { type: DT_FLOAT } } }')
  with pytest.raises(ValueError, match="input 'missing'"):
    tf.import_graph_def(dangling)
  assert tf.get_default_graph().get_operations() == []
  with pytest.raises(TypeError):
    tf.import_graph_def(3)


def test_gradient_errors():
  x = tf.placeholder(tf.float32, [2])
  with tf.get_default_graph().gradient_override_map({"Square": "NoSuchGradient"}):
    y = tf.square(x)
  with pytest.raises(LookupError, match="No gradient defined for operation 'Square'"):
    tf.gradients(y, x)
  gc.collect()
