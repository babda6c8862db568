"""Graph building with TF 1.x semantics: names, scopes, dtypes, shapes, variables, gradients."""

import os

import numpy as np
import pytest

import recflow.compat.v1 as tf


def test_dtypes_are_tensorflows():
  assert tf.float32.as_datatype_enum == 1 and tf.int64.as_datatype_enum == 9
  assert tf.string.as_datatype_enum == 7 and tf.resource.as_datatype_enum == 20
  assert tf.float32_ref.as_datatype_enum == 101 if hasattr(tf, "float32_ref") else True
  assert tf.as_dtype(np.float64) == tf.float64 and tf.as_dtype("int32") == tf.int32
  assert tf.float32 == np.float32 and tf.float32 != tf.float64
  assert tf.as_dtype(1) is tf.float32 and tf.float32.as_numpy_dtype is np.float32
  assert tf.float32.is_floating and tf.int8.is_integer and not tf.string.is_floating
  assert tf.int32.max == 2**31 - 1
  assert repr(tf.float32) == "tf.float32"


def test_tensor_and_operation_attributes():
  x = tf.placeholder(tf.float32, [None, 3], name="x")
  w = tf.constant(np.ones((3, 2), np.float32), name="w")
  y = tf.matmul(x, w, name="y")
  assert y.name == "y:0" and y.op.name == "y" and y.op.type == "MatMul"
  assert y.dtype == tf.float32 and y.graph is tf.get_default_graph()
  assert list(y.op.inputs) == [x, w] and y.op.outputs == [y]
  assert x.consumers() == [y.op]
  assert isinstance(y.shape, tf.TensorShape)
  assert y.shape.as_list() == [None, 2] and y.get_shape().ndims == 2
  assert y.shape.dims[1].value == 2 and y.shape[1].value == 2 and int(y.shape[1]) == 2
  assert y.shape[0].value is None and str(y.shape) == "(?, 2)"
  assert y.op.get_attr("T") == tf.float32 and y.op.get_attr("transpose_a") is False
  assert x.op.get_attr("shape").as_list() == [None, 3]
  np.testing.assert_array_equal(w.op.get_attr("value"), np.ones((3, 2)))
  with pytest.raises(ValueError, match="has no attr named"):
    y.op.get_attr("nope")
  with pytest.raises(TypeError, match="Python `bool`"):
    bool(y)
  with pytest.raises(TypeError):
    iter(y)
  assert (y == y) is True and {y: 1}[y] == 1  # identity, hashable (TF 1.x)
  y.set_shape([5, 2])
  assert y.shape.as_list() == [5, 2]
  with pytest.raises(ValueError):
    y.set_shape([5, 3])
  unknown = tf.placeholder(tf.int32)
  assert unknown.shape.ndims is None and str(unknown.shape) == "<unknown>"
  with pytest.raises(ValueError):
    unknown.shape.as_list()
  assert tf.get_default_graph().get_tensor_by_name("y:0") is y
  assert tf.get_default_graph().get_operation_by_name("x") is x.op
  with pytest.raises(KeyError):
    tf.get_default_graph().get_operation_by_name("nope")


def test_names_and_name_scopes():
  c1 = tf.constant(1)
  c2 = tf.constant(2)
  assert (c1.op.name, c2.op.name) == ("Const", "Const_1")
  with tf.name_scope("outer"):
    with tf.name_scope("inner") as scope:
      assert scope == "outer/inner/"
      a = tf.constant(3, name="a")
    with tf.name_scope("inner"):
      b = tf.constant(4, name="a")
    with tf.name_scope(scope):  # re-entering by its full name
      c = tf.constant(5, name="a")
    with tf.name_scope(None):
      d = tf.constant(6, name="top")
    e = tf.add(a, b, name="sum")
  assert a.op.name == "outer/inner/a" and b.op.name == "outer/inner_1/a"
  assert c.op.name == "outer/inner/a_1" and d.op.name == "top"
  assert e.op.name == "outer/sum"
  f = tf.add(c1, 10)
  assert f.op.name == "Add" and f.op.inputs[1].op.name == "Add/y"
  g = c1 + c2  # names are unique ignoring case, as in TensorFlow ("Add" took "add")
  assert g.op.name == "add_1" and g.op.type == "AddV2"
  with tf.name_scope("s", "default", [c1]) as s:
    assert s == "s/"
  with tf.name_scope(None, "default", [c1]) as s:
    assert s == "default/"


def test_control_dependencies_and_group():
  v = tf.Variable(0.0, name="v")
  inc = tf.assign_add(v, 1.0)
  with tf.control_dependencies([inc]):
    read = tf.identity(v.read_value(), name="read_after_inc")
    with tf.control_dependencies(None):
      free = tf.constant(1.0, name="free")
  assert read.op.inputs[0].op.control_inputs == [inc.op]
  assert free.op.control_inputs == []
  grouped = tf.group(inc, read, name="both")
  assert grouped.type == "NoOp" and set(grouped.control_inputs) == {inc.op, read.op}
  with tf.Session() as sess:
    sess.run(v.initializer)
    assert sess.run(read) == 1.0
    assert sess.run(read) == 2.0
    sess.run(grouped)
    assert sess.run(v) == 3.0


def test_devices_are_recorded():
  with tf.device("/job:ps/task:1"):
    with tf.device("/cpu:0"):
      a = tf.constant(1.0)
    b = tf.constant(2.0)
    with tf.device(None):
      c = tf.constant(3.0)
  with tf.device(lambda op: "/device:CPU:0" if op.type == "Const" else ""):
    d = tf.constant(4.0)
  assert a.device == "/job:ps/task:1/device:CPU:0"
  assert b.device == "/job:ps/task:1" and c.device == "" and d.device == "/device:CPU:0"
  with tf.Session() as sess:
    assert sess.run(a + b + c + d) == 10.0


def test_default_graphs():
  g = tf.Graph()
  outer = tf.get_default_graph()
  with g.as_default():
    assert tf.get_default_graph() is g
    with pytest.raises(AssertionError):
      tf.reset_default_graph()
  assert tf.get_default_graph() is outer
  tf.reset_default_graph()
  assert tf.get_default_graph() is not outer


def test_get_variable_and_variable_scope_sharing():
  with tf.variable_scope("layer", initializer=tf.constant_initializer(0.5)):
    w = tf.get_variable("w", [2, 3])
    with pytest.raises(ValueError, match="already exists, disallowed"):
      tf.get_variable("w", [2, 3])
  with tf.variable_scope("layer", reuse=True):
    assert tf.get_variable("w", [2, 3]) is w
    with pytest.raises(ValueError, match="does not exist"):
      tf.get_variable("other", [1])
    with pytest.raises(ValueError, match="Trying to share variable layer/w"):
      tf.get_variable("w", [3, 3])
  with tf.variable_scope("layer") as scope:
    scope.reuse_variables()
    assert tf.get_variable("w") is w
  with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
    a1 = tf.get_variable("a", [1], initializer=tf.ones_initializer())
  with tf.variable_scope("auto", reuse=tf.AUTO_REUSE):
    a2 = tf.get_variable("a", [1])
  assert a1 is a2
  with tf.variable_scope(None, default_name="dense"):
    d0 = tf.get_variable("k", [1])
  with tf.variable_scope(None, default_name="dense"):
    d1 = tf.get_variable("k", [1])
  assert (d0.name, d1.name) == ("dense/k:0", "dense_1/k:0")
  with tf.name_scope("ignored_by_get_variable"):
    free = tf.get_variable("free", [], dtype=tf.int64)
  assert free.name == "free:0" and free.dtype.base_dtype == tf.int64
  with tf.variable_scope("outer"):
    with tf.variable_scope("inner"):
      nested = tf.get_variable("v", [2], initializer=tf.zeros_initializer())
      assert tf.get_variable_scope().name == "outer/inner"
  assert nested.name == "outer/inner/v:0"
  p = tf.get_variable("p", [4, 2], partitioner=lambda shape, dtype: [2, 1])
  assert [part.name for part in p] == ["p/part_0:0", "p/part_1:0"]
  with pytest.raises(ValueError, match="must be fully defined"):
    tf.get_variable("undefined", [None, 2])
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    assert sess.run(w).tolist() == [[0.5] * 3] * 2 and sess.run(a1).tolist() == [1.0]
  assert w in tf.global_variables() and w in tf.trainable_variables()


def test_initializers_shapes_dtypes_and_seeds():
  tf.set_random_seed(7)
  inits = {
      "zeros": tf.zeros_initializer(), "ones": tf.ones_initializer(),
      "const": tf.constant_initializer([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
      "normal": tf.random_normal_initializer(mean=1.0, stddev=0.1),
      "trunc": tf.truncated_normal_initializer(stddev=0.1),
      "uniform": tf.random_uniform_initializer(-1.0, 1.0),
      "glorot": tf.glorot_uniform_initializer(), "glorot_n": tf.glorot_normal_initializer(),
      "scaling": tf.variance_scaling_initializer(scale=2.0),
  }
  vs = {k: tf.get_variable(k, [2, 3], initializer=init) for k, init in inits.items()}
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    got = sess.run(vs)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    again = sess.run(vs)
  for k, v in got.items():
    assert v.shape == (2, 3) and v.dtype == np.float32
    np.testing.assert_array_equal(v, again[k])  # graph seed set: deterministic
  assert (got["zeros"] == 0).all() and (got["ones"] == 1).all()
  assert got["const"].ravel().tolist() == [1, 2, 3, 4, 5, 6]
  assert abs(got["normal"].mean() - 1.0) < 0.3 and (np.abs(got["trunc"]) < 0.2).all()
  limit = np.sqrt(6.0 / 5.0)
  assert (np.abs(got["glorot"]) <= limit).all() and (np.abs(got["uniform"]) <= 1).all()


def test_gradients_fan_out_stop_gradient_and_unconnected():
  x = tf.placeholder(tf.float32, [], name="x")
  y = x * x + 3.0 * x
  z = tf.stop_gradient(x * x) + x
  other = tf.placeholder(tf.float32, [])
  gx, gz, gnone = tf.gradients([y], [x])[0], tf.gradients(z, x)[0], tf.gradients(y, other)[0]
  assert gnone is None
  assert gx.op.name.startswith("gradients")
  (gzero,) = tf.gradients(y, other, unconnected_gradients="zero")
  (gy2,) = tf.gradients(y, x, grad_ys=tf.constant(2.0))
  s = tf.shape(tf.fill(tf.cast([x, x], tf.int32), 1.0))
  assert tf.gradients(tf.cast(s, tf.float32), x) == [None]  # integer path: nothing flows
  with tf.Session() as sess:
    out = sess.run([gx, gz, gzero, gy2], {x: 2.0, other: 1.0})
  assert out == [7.0, 1.0, 0.0, 14.0]


def test_gather_gradients_are_indexed_slices_and_train_sparsely():
  for use_resource in (False, True):
    tf.reset_default_graph()
    with tf.variable_scope("emb", use_resource=use_resource):
      table = tf.get_variable("table", [6, 2], initializer=tf.ones_initializer())
    ids = tf.placeholder(tf.int32, [None])
    loss = tf.reduce_sum(tf.nn.embedding_lookup(table, ids))
    (grad,) = tf.gradients(loss, [table])
    assert isinstance(grad, tf.IndexedSlices)
    train = tf.train.GradientDescentOptimizer(0.5).minimize(loss)
    with tf.Session() as sess:
      sess.run(tf.global_variables_initializer())
      sess.run(train, {ids: [1, 3, 3]})
      np.testing.assert_allclose(sess.run(table)[:, 0], [1, 0.5, 1, 0, 1, 1])
      dense = sess.run(tf.convert_to_tensor(grad), {ids: [0, 0]})
      np.testing.assert_allclose(dense[:, 0], [2, 0, 0, 0, 0, 0])


def test_python_gradient_overrides_and_not_differentiable():
  @tf.RegisterGradient("DoubleTheGradient")
  def _double(op, grad):
    return 2.0 * grad * 2.0 * op.inputs[0]

  x = tf.constant(3.0)
  with tf.get_default_graph().gradient_override_map({"Square": "DoubleTheGradient"}):
    y = tf.square(x)
  (g,) = tf.gradients(y, x)
  with pytest.raises(KeyError, match="Registering two gradient"):
    tf.RegisterGradient("DoubleTheGradient")(lambda op, g: g)
  with tf.Session() as sess:
    assert sess.run(g) == 12.0


def test_graph_def_export_and_import(tmp_path):
  x = tf.placeholder(tf.float32, [None], name="x")
  y = tf.multiply(x, 3.0, name="y")
  graph_def = tf.get_default_graph().as_graph_def()
  assert [n.name for n in graph_def.node] == ["x", "y/y", "y"]
  assert graph_def.node[2].op == "Mul" and graph_def.node[2].input == ["x", "y/y"]
  path = tf.train.write_graph(graph_def, str(tmp_path), "graph.pbtxt")
  assert 'name: "y"' in open(path).read()
  with tf.Graph().as_default() as g2:
    feed = tf.constant([1.0, 2.0], name="feed")
    (out,) = tf.import_graph_def(graph_def, input_map={"x:0": feed}, return_elements=["y:0"],
                                 name="imported")
    (again,) = tf.import_graph_def(graph_def.SerializeToString(), return_elements=["y"])
    assert out.name == "imported/y:0" and again.name == "import/y"
    with tf.Session(graph=g2) as sess:
      assert sess.run(out).tolist() == [3.0, 6.0]
      assert sess.run("import/y:0", {"import/x:0": [1.0]}).tolist() == [3.0]
  restored = tf.GraphDef()
  restored.ParseFromString(graph_def.SerializeToString())
  assert restored == graph_def and restored.ByteSize() > 0


def test_session_config_run_options_and_make_callable():
  x = tf.placeholder(tf.float32, [2])
  y = tf.reduce_sum(x * 2.0)
  config = tf.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=2)
  config.graph_options.optimizer_options.opt_level = tf.OptimizerOptions.L0
  with pytest.raises(ValueError, match="no \"nope\" field"):
    tf.ConfigProto(nope=1)
  with tf.Session(config=config) as sess:
    options = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
    metadata = tf.RunMetadata()
    assert sess.run(y, {x: [1.0, 2.0]}, options=options, run_metadata=metadata) == 6.0
    assert {s.op for s in metadata.step_stats} >= {"Mul", "Sum"}
    assert metadata.chrome_trace.startswith("{")
    fn = sess.make_callable([y, x], feed_list=[x])
    out = fn(np.array([1.0, 1.0], np.float32))
    assert out[0] == 4.0 and out[1].tolist() == [1.0, 1.0]
    assert sess.list_devices()[0].device_type == "CPU"
  with pytest.raises(ValueError, match="tf.train.Server of this process"):
    tf.Session("grpc://localhost:2222")  # a target must be a Server of this process
  with pytest.raises(NotImplementedError, match="control-flow"):
    tf.cond(x[0] > 0, lambda: x, lambda: -x)


def test_the_quickstart_example_runs():
  source = os.path.join(os.environ.get("RECFLOW_SOURCE_DIR", os.path.join(
      os.path.dirname(__file__), "..", "..", "..")), "examples", "python", "quickstart.py")
  if not os.path.exists(source):
    pytest.skip("examples/python/quickstart.py not present")
  namespace = {"__name__": "quickstart"}
  exec(compile(open(source).read(), source, "exec"), namespace)  # pylint: disable=exec-used
  result = namespace["main"]()
  assert result["loss"] < 1e-3


_OLD_PLACEHOLDER_GRAPH = """
node { name: "Placeholder" op: "Placeholder"
       attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { } } } }
node { name: "add/y" op: "Const"
       attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 1.0 } } } }
node { name: "add" op: "Add" input: "Placeholder" input: "add/y"
       attr { key: "T" value { type: DT_FLOAT } } }
versions { producer: %d }
"""


def test_import_of_a_producer_21_graph_reads_a_scalar_placeholder_shape_as_unknown():
  from recflow import _pywrap  # pylint: disable=g-import-not-at-top
  assert tf.GRAPH_DEF_VERSION > 21
  old = _pywrap.graph_def_from_text(_OLD_PLACEHOLDER_GRAPH % 21)
  with tf.Graph().as_default() as g:
    assert g.graph_def_versions.producer == tf.GRAPH_DEF_VERSION
    p, ret = tf.import_graph_def(old, return_elements=["Placeholder:0", "add:0"])
    assert p.shape.ndims is None  # TensorFlow 1.0 wrote "any shape" as {}
    assert g.graph_def_versions.producer == 21  # the older writer's rules from now on
    with tf.Session() as sess:
      assert sess.run(ret, {p: [1.0, 2.0]}).tolist() == [2.0, 3.0]
  new = _pywrap.graph_def_from_text(_OLD_PLACEHOLDER_GRAPH % 22)
  with tf.Graph().as_default():
    p, ret = tf.import_graph_def(new, return_elements=["Placeholder:0", "add:0"])
    assert p.shape.ndims == 0
    with tf.Session() as sess:
      with pytest.raises(ValueError, match="Cannot feed value of shape"):
        sess.run(ret, {p: [1.0, 2.0]})
  refused = _pywrap.graph_def_from_text(
      (_OLD_PLACEHOLDER_GRAPH % 22).replace("producer: 22", "producer: 22 min_consumer: 99999"))
  with tf.Graph().as_default():
    with pytest.raises(ValueError, match="min_consumer"):
      tf.import_graph_def(refused)
