"""tf.saved_model: export from Python, load back in Python, in recflow's C++
(`recflow saved_model show|run`, `recflow serve`) and TensorFlow-written
SavedModels; (the protobuf bridge has test_proto_bridge.py)."""

import json
import os
import re
import subprocess
import threading
import urllib.request

import numpy as np
import pytest

import recflow.compat.v1 as tf

from test_saver import recflow_cli

HPT = "/work/shared/testdata/tf_serving/saved_model_half_plus_two_cpu/00000123"
if os.environ.get("RECFLOW_SOURCE_DIR"):
  _hpt = os.path.join(os.path.dirname(os.path.abspath(os.environ["RECFLOW_SOURCE_DIR"])),
                      "shared", "testdata", "tf_serving", "saved_model_half_plus_two_cpu",
                      "00000123")
  if os.path.isdir(_hpt):
    HPT = _hpt

X = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75], [0.0, 1.0, 1.0], [-2.0, 0.5, 0.3]],
             dtype=np.float32)
Y = np.array([[1.0], [0.0], [1.0], [0.0]], dtype=np.float32)


def build_and_train(sess):
  x = tf.placeholder(tf.float32, [None, 3], name="x")
  y = tf.placeholder(tf.float32, [None, 1], name="y")
  tf.set_random_seed(7)
  hidden = tf.layers.dense(x, 4, activation=tf.nn.relu, name="hidden")
  w = tf.get_variable("w", [4, 1], initializer=tf.glorot_uniform_initializer(seed=3))
  b = tf.get_variable("b", [1], initializer=tf.zeros_initializer())
  logits = tf.matmul(hidden, w) + b
  prob = tf.sigmoid(logits, name="prob")
  loss = tf.losses.sigmoid_cross_entropy(y, logits)
  train = tf.train.AdagradOptimizer(0.5).minimize(loss)
  sess.run(tf.global_variables_initializer())
  for _ in range(5):
    sess.run(train, {x: X, y: Y})
  return x, prob, sess.run(prob, {x: X})


def export_with_builder(export_dir, as_text=False):
  with tf.Graph().as_default(), tf.Session() as sess:
    x, prob, expected = build_and_train(sess)
    b = tf.saved_model.builder.SavedModelBuilder(export_dir)
    sig = tf.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"prob": prob})
    b.add_meta_graph_and_variables(
        sess, [tf.saved_model.tag_constants.SERVING],
        signature_def_map={"serving_default": sig, "predict": sig},
        main_op=tf.saved_model.main_op.main_op())
    path = b.save(as_text=as_text)
  return path, expected


# --- signatures ----------------------------------------------------------------

def test_build_tensor_info_and_signatures():
  x = tf.placeholder(tf.float32, [None, 3], name="x")
  info = tf.saved_model.utils.build_tensor_info(x)
  assert info.name == "x:0" and info.dtype == tf.float32.as_datatype_enum
  assert [d.size for d in info.tensor_shape.dim] == [-1, 3]
  assert tf.saved_model.utils.get_tensor_from_tensor_info(info).name == "x:0"
  assert tf.saved_model.build_tensor_info(tf.placeholder(tf.int64)).tensor_shape.unknown_rank
  sp = tf.sparse_placeholder(tf.float32, name="sp")
  sinfo = tf.saved_model.utils.build_tensor_info(sp)
  assert sinfo.WhichOneof("encoding") == "coo_sparse"
  assert sinfo.coo_sparse.values_tensor_name == sp.values.name
  back = tf.saved_model.utils.get_tensor_from_tensor_info(sinfo)
  assert back.indices.name == sp.indices.name

  sig = tf.saved_model.signature_def_utils.predict_signature_def({"x": x}, {"y": x * 2.0})
  assert sig.method_name == tf.saved_model.signature_constants.PREDICT_METHOD_NAME
  assert tf.saved_model.signature_def_utils.is_valid_signature(sig)
  with pytest.raises(ValueError):
    tf.saved_model.signature_def_utils.predict_signature_def({}, {"y": x})
  ex = tf.placeholder(tf.string, [None], name="ex")
  reg = tf.saved_model.signature_def_utils.regression_signature_def(ex, x)
  assert reg.method_name == "tensorflow/serving/regress"
  assert set(reg.inputs) == {"inputs"} and set(reg.outputs) == {"outputs"}
  assert tf.saved_model.is_valid_signature(reg)
  cls = tf.saved_model.signature_def_utils.classification_signature_def(ex, None, x)
  assert cls.method_name == "tensorflow/serving/classify"
  assert tf.saved_model.is_valid_signature(cls)
  with pytest.raises(ValueError):
    tf.saved_model.signature_def_utils.regression_signature_def(x, x)
  bad = tf.saved_model.build_signature_def({"inputs": info}, {"outputs": info},
                                           tf.saved_model.REGRESS_METHOD_NAME)
  assert not tf.saved_model.is_valid_signature(bad)
  assert not tf.saved_model.is_valid_signature(
      tf.saved_model.build_signature_def({"x": info}, {"y": info}, "custom"))
  # Serialization through the bridge keeps everything.
  again = type(sig).FromString(sig.SerializeToString())
  assert again == sig and again.inputs["x"].name == "x:0"


# --- export and load in Python -------------------------------------------------

def test_builder_layout_and_python_load(tmp_path):
  export_dir = str(tmp_path / "export")
  path, expected = export_with_builder(export_dir)
  assert path == os.path.join(export_dir, "saved_model.pb").encode()
  assert sorted(os.listdir(export_dir)) == ["saved_model.pb", "variables"]
  assert sorted(os.listdir(os.path.join(export_dir, "variables"))) == [
      "variables.data-00000-of-00001", "variables.index"]
  assert tf.saved_model.loader.maybe_saved_model_directory(export_dir)
  assert not tf.saved_model.loader.maybe_saved_model_directory(str(tmp_path))
  reader = tf.train.NewCheckpointReader(os.path.join(export_dir, "variables", "variables"))
  assert reader.has_tensor("hidden/kernel") and reader.has_tensor("w/Adagrad")

  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    mg = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING], export_dir)
    assert set(mg.signature_def) == {"serving_default", "predict"}
    sig = mg.signature_def["serving_default"]
    assert sig.method_name == "tensorflow/serving/predict"
    assert sig.inputs["x"].name == "x:0" and sig.outputs["prob"].name == "prob:0"
    assert sig.inputs["x"].dtype == tf.float32.as_datatype_enum
    assert [d.size for d in sig.inputs["x"].tensor_shape.dim] == [-1, 3]
    assert mg.meta_info_def.tags == ["serve"]
    assert mg.saver_def.restore_op_name == "save/restore_all"
    x = tf.saved_model.utils.get_tensor_from_tensor_info(sig.inputs["x"], g)
    prob = tf.saved_model.utils.get_tensor_from_tensor_info(sig.outputs["prob"], g)
    np.testing.assert_allclose(sess.run(prob, {x: X}), expected, rtol=1e-6)


def test_simple_save_and_load_as_text(tmp_path):
  export_dir = str(tmp_path / "simple")
  with tf.Graph().as_default(), tf.Session() as sess:
    x, prob, expected = build_and_train(sess)
    tf.saved_model.simple_save(sess, export_dir, {"x": x}, {"prob": prob})
  text_dir = str(tmp_path / "text")
  path, expected_text = export_with_builder(text_dir, as_text=True)
  assert path.endswith(b"saved_model.pbtxt")
  for d, want in ((export_dir, expected), (text_dir, expected_text)):
    with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
      mg = tf.saved_model.load(sess, ["serve"], d)
      sig = mg.signature_def["serving_default"]
      out = sess.run(sig.outputs["prob"].name, {sig.inputs["x"].name: X})
      np.testing.assert_allclose(out, want, rtol=1e-6)


def test_add_meta_graph_second_tag_set(tmp_path):
  export_dir = str(tmp_path / "two")
  with tf.Graph().as_default(), tf.Session() as sess:
    x, prob, expected = build_and_train(sess)
    b = tf.saved_model.Builder(export_dir)
    with pytest.raises(AssertionError):
      b.add_meta_graph(["eval"])
    b.add_meta_graph_and_variables(
        sess, ["serve"],
        {"serving_default": tf.saved_model.predict_signature_def({"x": x}, {"prob": prob})})
    with pytest.raises(AssertionError):
      b.add_meta_graph_and_variables(sess, ["train"])
    b.add_meta_graph(["eval", "gpu"])
    b.save()
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    mg = tf.saved_model.loader.load(sess, ["gpu", "eval"], export_dir)
    assert sorted(mg.meta_info_def.tags) == ["eval", "gpu"]
    np.testing.assert_allclose(sess.run("prob:0", {"x:0": X}), expected, rtol=1e-6)


def test_assets_are_copied_and_fed(tmp_path):
  asset = tmp_path / "vocab.txt"
  asset.write_text("a\nb\n")
  export_dir = str(tmp_path / "assets_export")
  with tf.Graph().as_default(), tf.Session() as sess:
    tf.get_variable("v", [1], initializer=tf.ones_initializer())
    path_t = tf.constant(str(asset), name="asset_path")
    tf.add_to_collection(tf.GraphKeys.ASSET_FILEPATHS, path_t)
    sess.run(tf.global_variables_initializer())
    init = tf.group(tf.identity(path_t), name="init_with_asset")
    b = tf.saved_model.builder.SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(sess, ["serve"], assets_collection=[path_t],
                                   legacy_init_op=init)
    b.save()
  assert (tmp_path / "assets_export" / "assets" / "vocab.txt").read_text() == "a\nb\n"
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    mg = tf.saved_model.loader.load(sess, ["serve"], export_dir)
    assert mg.asset_file_def[0]["filename"] == "vocab.txt"
    assert mg.collection_def["legacy_init_op"]["node_list"]["value"] == ["init_with_asset"]
    assert sess.run("v:0")[0] == 1.0


# --- bad inputs ------------------------------------------------------------------

def test_existing_non_empty_export_dir_raises(tmp_path):
  (tmp_path / "full").mkdir()
  (tmp_path / "full" / "x").write_text("x")
  with pytest.raises(AssertionError, match="already exists, and isn't empty"):
    tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "full"))
  (tmp_path / "empty").mkdir()
  tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "empty"))  # fine


def test_load_bad_inputs(tmp_path):
  with tf.Session() as sess:
    with pytest.raises(IOError, match="SavedModel file does not exist at"):
      tf.saved_model.loader.load(sess, ["serve"], str(tmp_path / "missing"))
  export_dir = str(tmp_path / "m")
  export_with_builder(export_dir)
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    with pytest.raises(RuntimeError) as e:
      tf.saved_model.loader.load(sess, ["train"], export_dir)
    assert "could not be found in SavedModel" in str(e.value)
    assert "available_tags: [['serve']]" in str(e.value)
  corrupt = tmp_path / "corrupt"
  corrupt.mkdir()
  (corrupt / "saved_model.pb").write_bytes(b"\x0a\xff\xff\xff garbage")
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    with pytest.raises(IOError, match="Cannot parse file .*saved_model.pb.*tensorflow.SavedModel"):
      tf.saved_model.loader.load(sess, ["serve"], str(corrupt))
  with pytest.raises(TypeError):
    tf.saved_model.builder.SavedModelBuilder(str(tmp_path / "t")).add_meta_graph_and_variables(
        tf.Session(), "serve")


# --- the C++ side loads what Python wrote ----------------------------------------

def _cli_or_skip():
  cli = recflow_cli()
  if cli is None:
    pytest.skip("no recflow binary (build/recflow) to load the SavedModel with")
  return cli


def _run_cli(*args):
  out = subprocess.run([_cli_or_skip()] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
  assert out.returncode == 0, out.stderr.decode() + out.stdout.decode()
  return out.stdout.decode()


def test_cpp_saved_model_show_and_run(tmp_path):
  _cli_or_skip()
  export_dir = str(tmp_path / "cpp")
  with tf.Graph().as_default(), tf.Session() as sess:
    x, prob, expected = build_and_train(sess)
    tf.saved_model.simple_save(sess, export_dir, {"x": x}, {"prob": prob})
  assert _run_cli("saved_model", "show", "--dir", export_dir).splitlines()[-1] == "'serve'"
  show = _run_cli("saved_model", "show", "--dir", export_dir, "--tag_set", "serve",
                  "--signature_def", "serving_default")
  assert "inputs['x'] tensor_info:" in show and "shape: (-1, 3)" in show
  assert "name: prob:0" in show and "tensorflow/serving/predict" in show
  np.save(str(tmp_path / "x.npy"), X)
  out = _run_cli("saved_model", "run", "--dir", export_dir, "--signature_def",
                 "serving_default", "--inputs", "x=" + str(tmp_path / "x.npy"),
                 "--outdir", str(tmp_path / "out"))
  assert "Result for output key prob:" in out
  np.testing.assert_allclose(np.load(str(tmp_path / "out" / "prob.npy")), expected, rtol=1e-5)


def test_cpp_serve_rest_predict(tmp_path):
  cli = _cli_or_skip()
  base = tmp_path / "served"
  base.mkdir()
  with tf.Graph().as_default(), tf.Session() as sess:
    x, prob, expected = build_and_train(sess)
    tf.saved_model.simple_save(sess, str(base / "1"), {"x": x}, {"prob": prob})
  proc = subprocess.Popen([cli, "serve", "--port=0", "--rest_api_port=auto", "--model_name=m",
                           "--model_base_path=" + str(base),
                           "--file_system_poll_wait_seconds=0"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  try:
    lines = []
    found = []

    def read():
      for raw in proc.stdout:
        line = raw.decode(errors="replace")
        lines.append(line)
        m = re.search(r"serving model m version 1 on http://([\d.]+):(\d+)", line)
        if m:
          found.append((m.group(1), int(m.group(2))))
          return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(60)
    assert found, "no 'serving model' line from recflow serve:\n" + "".join(lines)
    host, port = found[0]
    req = urllib.request.Request(
        "http://%s:%d/v1/models/m:predict" % (host, port),
        data=json.dumps({"instances": X.tolist()}).encode(),
        headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
      body = json.loads(resp.read().decode())
    got = np.array(body["predictions"], dtype=np.float32).reshape(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
  finally:
    proc.terminate()
    try:
      proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      proc.kill()
      proc.wait()
    proc.stdout.close()


# --- SavedModels written by TensorFlow ----------------------------------------------

def test_load_tensorflow_half_plus_two():
  if not os.path.isdir(HPT):
    pytest.skip("TensorFlow's half_plus_two SavedModel is not here (%s)" % HPT)
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    mg = tf.saved_model.loader.load(sess, [tf.saved_model.tag_constants.SERVING], HPT)
    assert mg.meta_info_def.tensorflow_version.startswith("1.")
    sig = mg.signature_def["serving_default"]
    assert sig.inputs["x"].name == "x:0" and sig.outputs["y"].name == "y:0"
    y = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: [[1.0], [2.0], [5.0]]})
    np.testing.assert_allclose(y, [[2.5], [3.0], [4.5]])
    assert "regress_x_to_y" in mg.signature_def
    assert mg.signature_def["regress_x_to_y"].method_name == "tensorflow/serving/regress"


def test_tensorflow2_saved_model_runs_through_its_functions():
  tf2 = os.path.join(os.path.dirname(os.path.dirname(HPT)), "saved_model_half_plus_two_tf2_cpu")
  versions = sorted(os.listdir(tf2)) if os.path.isdir(tf2) else []
  if not versions:
    pytest.skip("TensorFlow 2's half_plus_two SavedModel is not here (%s)" % tf2)
  # TF 2 SavedModels call library functions (StatefulPartitionedCall), which
  # the session's function runtime runs; its variables are read inside them.
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    mg = tf.saved_model.loader.load(sess, ["serve"], os.path.join(tf2, versions[0]))
    sig = mg.signature_def["serving_default"]
    x = sig.inputs["x"].name
    y = sig.outputs["y"].name
    assert g.get_tensor_by_name(y).op.type == "StatefulPartitionedCall"
    for value in (3.0, -4.0, 0.5):
      got = sess.run(y, {x: np.array([value], np.float32)})
      np.testing.assert_allclose(got, [value / 2 + 2], rtol=1e-6)


def test_import_scope_and_sparse_signature(tmp_path):
  export_dir = str(tmp_path / "scoped")
  with tf.Graph().as_default(), tf.Session() as sess:
    x = tf.placeholder(tf.float32, [None, 2], name="x")
    sp = tf.sparse_placeholder(tf.float32, name="sp")
    w = tf.get_variable("w", [2, 1], initializer=tf.ones_initializer())
    y = tf.matmul(x, w, name="y")
    s = tf.sparse.reduce_sum(sp, name="s")
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(w, [[2.0], [3.0]]))
    tf.saved_model.simple_save(sess, export_dir, {"x": x, "sp": sp}, {"y": y, "s": s})
  with tf.Graph().as_default() as g, tf.Session(graph=g) as sess:
    mg = tf.saved_model.loader.load(sess, ["serve"], export_dir, import_scope="m")
    sig = mg.signature_def["serving_default"]
    assert sig.inputs["sp"].WhichOneof("encoding") == "coo_sparse"
    get = tf.saved_model.utils.get_tensor_from_tensor_info
    yt = get(sig.outputs["y"], import_scope="m")
    spt = get(sig.inputs["sp"], import_scope="m")
    assert yt.name == "m/y:0" and spt.values.name.startswith("m/")
    out = sess.run([yt, get(sig.outputs["s"], import_scope="m")],
                   {get(sig.inputs["x"], import_scope="m"): [[1.0, 1.0]],
                    spt: tf.SparseTensorValue([[0, 0], [1, 2]], [1.5, 2.0], [2, 3])})
    np.testing.assert_allclose(out[0], [[5.0]])
    np.testing.assert_allclose(out[1], 3.5)
