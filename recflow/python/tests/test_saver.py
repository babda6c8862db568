"""tf.train.Saver: V2 checkpoints through SaveV2/RestoreV2, TF's node names, the
`checkpoint` state file, max_to_keep, errors; files read by recflow's C++."""

import os
import subprocess

import numpy as np
import pytest

import recflow.compat.v1 as tf


def make_vars(use_resource=False, scale=1.0):
  w = tf.get_variable("w", initializer=np.arange(6, dtype=np.float32).reshape(2, 3) * scale,
                      use_resource=use_resource)
  with tf.variable_scope("layer"):
    b = tf.get_variable("b", initializer=np.array([1, 2, 3], np.int64) * int(scale),
                        use_resource=use_resource)
  step = tf.train.get_or_create_global_step()
  return w, b, step


@pytest.mark.parametrize("use_resource", [False, True], ids=["ref", "resource"])
def test_round_trip_into_a_new_graph(tmp_path, use_resource):
  w, b, step = make_vars(use_resource)
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(tf.assign(step, 7))
    path = saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step)
  assert path == str(tmp_path / "model.ckpt-7")
  assert os.path.exists(path + ".index")
  assert os.path.exists(path + ".data-00000-of-00001")
  assert os.path.exists(path + ".meta")

  with tf.Graph().as_default():
    w2, b2, step2 = make_vars(use_resource, scale=0.0)
    saver2 = tf.train.Saver()
    with tf.Session() as sess:
      saver2.restore(sess, path)
      np.testing.assert_array_equal(sess.run(w2), np.arange(6).reshape(2, 3))
      np.testing.assert_array_equal(sess.run(b2), [1, 2, 3])
      assert sess.run(step2) == 7


def test_graph_nodes_are_named_as_tf_names_them():
  make_vars()
  saver = tf.train.Saver()
  g = tf.get_default_graph()
  for name in ["save/Const", "save/SaveV2", "save/control_dependency", "save/RestoreV2",
               "save/restore_all", "save/Assign"]:
    g.get_operation_by_name(name)
  assert saver.saver_def.filename_tensor_name == "save/Const:0"
  assert saver.saver_def.save_tensor_name == "save/control_dependency:0"
  assert saver.saver_def.restore_op_name == "save/restore_all"
  names = g.get_operation_by_name("save/SaveV2").inputs[1].op.get_attr("value")
  assert [n.decode() if isinstance(n, bytes) else n for n in names.tolist()] == \
      ["global_step", "layer/b", "w"]
  tf.train.Saver()
  g.get_operation_by_name("save_1/SaveV2")


def test_var_list_as_dict_and_list(tmp_path):
  w, b, _ = make_vars()
  saver = tf.train.Saver({"renamed": w})
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = saver.save(sess, str(tmp_path / "m"))
  with tf.Graph().as_default():
    v = tf.get_variable("other", initializer=np.zeros([2, 3], np.float32))
    with tf.Session() as sess:
      tf.train.Saver({"renamed": v}).restore(sess, path)
      np.testing.assert_array_equal(sess.run(v), np.arange(6).reshape(2, 3))
  with pytest.raises(ValueError, match="same name"):
    with tf.Graph().as_default():
      a = tf.Variable(1.0, name="a")
      tf.train.Saver([a, a])  # the same variable twice is fine
      with tf.variable_scope("x"):
        pass
      tf.train.Saver([a, _SameName(a)])
  with pytest.raises(ValueError, match="No variables to save"):
    with tf.Graph().as_default():
      tf.train.Saver()


class _SameName(tf.Variable):
  """A second variable object reporting the first one's op (a duplicate name)."""

  def __init__(self, other):  # pylint: disable=super-init-not-called
    self._other = other

  @property
  def op(self):
    return self._other.op

  @property
  def name(self):
    return self._other.name


def test_optimizer_slots_and_beta_powers_saved_under_tf_names(tmp_path):
  x = tf.constant([[1.0, 2.0, 3.0]])
  w = tf.get_variable("w", initializer=np.ones([3, 1], np.float32))
  loss = tf.reduce_sum(tf.matmul(x, w))
  train = tf.train.AdamOptimizer(0.1).minimize(loss)
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train)
    want = {v.op.name: sess.run(v) for v in tf.global_variables()}
    path = saver.save(sess, str(tmp_path / "adam"))
  assert sorted(want) == ["beta1_power", "beta2_power", "w", "w/Adam", "w/Adam_1"]
  with tf.Graph().as_default():
    x = tf.constant([[1.0, 2.0, 3.0]])
    w = tf.get_variable("w", initializer=np.zeros([3, 1], np.float32))
    tf.train.AdamOptimizer(0.1).minimize(tf.reduce_sum(tf.matmul(x, w)))
    with tf.Session() as sess:
      tf.train.Saver().restore(sess, path)
      for v in tf.global_variables():
        np.testing.assert_array_equal(sess.run(v), want[v.op.name], err_msg=v.op.name)
  out = inspect(path)
  if out is not None:
    for name in want:
      assert name in out


def test_max_to_keep_deletes_old_checkpoints_and_state_file(tmp_path):
  make_vars()
  saver = tf.train.Saver(max_to_keep=2)
  prefix = str(tmp_path / "model.ckpt")
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    paths = [saver.save(sess, prefix, global_step=s) for s in (1, 2, 3)]
  assert saver.last_checkpoints == paths[1:]
  assert not os.path.exists(paths[0] + ".index")
  assert not os.path.exists(paths[0] + ".data-00000-of-00001")
  assert not os.path.exists(paths[0] + ".meta")
  assert all(os.path.exists(p + ".index") for p in paths[1:])
  assert tf.train.latest_checkpoint(str(tmp_path)) == paths[2]
  state = tf.train.get_checkpoint_state(str(tmp_path))
  assert state.model_checkpoint_path == paths[2]
  assert state.all_model_checkpoint_paths == paths[1:]
  with open(str(tmp_path / "checkpoint")) as f:
    text = f.read()
  assert text == ('model_checkpoint_path: "%s"\n'
                  'all_model_checkpoint_paths: "%s"\n'
                  'all_model_checkpoint_paths: "%s"\n' % (paths[2], paths[1], paths[2]))


def test_checkpoint_state_relative_paths_and_escapes(tmp_path):
  d = str(tmp_path)
  with open(os.path.join(d, "checkpoint"), "w") as f:
    f.write('model_checkpoint_path: "model.ckpt-5"\n'
            'all_model_checkpoint_paths: "model.ckpt-4"\n'
            'all_model_checkpoint_paths: "model.ckpt-5"\n'
            'all_model_checkpoint_timestamps: 1600000000.5\n')
  state = tf.train.get_checkpoint_state(d)
  assert state.model_checkpoint_path == os.path.join(d, "model.ckpt-5")
  assert state.all_model_checkpoint_paths == [os.path.join(d, "model.ckpt-4"),
                                              os.path.join(d, "model.ckpt-5")]
  assert tf.train.latest_checkpoint(d) is None  # no such files
  tf.train.update_checkpoint_state(d, os.path.join(d, 'we"ird\\name'))
  assert tf.train.get_checkpoint_state(d).model_checkpoint_path == \
      os.path.join(d, 'we"ird\\name')
  assert tf.train.get_checkpoint_state(os.path.join(d, "nope")) is None
  assert tf.train.latest_checkpoint(os.path.join(d, "nope")) is None


def test_restore_of_a_missing_variable_names_it(tmp_path):
  w = tf.get_variable("w", initializer=np.ones([2], np.float32))
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = tf.train.Saver().save(sess, str(tmp_path / "m"))
  with tf.Graph().as_default():
    tf.get_variable("w", initializer=np.ones([2], np.float32))
    tf.get_variable("extra_var", initializer=np.ones([2], np.float32))
    with tf.Session() as sess:
      with pytest.raises(tf.errors.NotFoundError, match="extra_var"):
        tf.train.Saver().restore(sess, path)
  with tf.Graph().as_default():
    tf.get_variable("w", initializer=np.ones([2], np.float32))
    with tf.Session() as sess:
      with pytest.raises(ValueError, match="not a valid checkpoint"):
        tf.train.Saver().restore(sess, str(tmp_path / "nothing"))
      with pytest.raises(ValueError, match="None"):
        tf.train.Saver().restore(sess, None)
  _ = w


def test_save_into_a_missing_directory_raises(tmp_path):
  make_vars()
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    with pytest.raises(ValueError, match="doesn't exist"):
      saver.save(sess, str(tmp_path / "no" / "such" / "m"))


def test_sharded_save_merges_into_one_prefix(tmp_path):
  w, _, _ = make_vars()
  saver = tf.train.Saver(sharded=True)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = saver.save(sess, str(tmp_path / "sh"), global_step=3)
    assert path == str(tmp_path / "sh-3")
    assert os.path.exists(path + ".index")
    assert sorted(os.listdir(str(tmp_path))) == ["checkpoint", "sh-3.data-00000-of-00001",
                                                 "sh-3.index", "sh-3.meta"]
    sess.run(tf.assign(w, tf.zeros_like(w)))
    g = tf.get_default_graph()
    for name in ["save/StringJoin", "save/ShardedFilename", "save/SaveV2",
                 "save/MergeV2Checkpoints", "save/restore_shard", "save/restore_all"]:
      g.get_operation_by_name(name)
    assert saver.saver_def.save_tensor_name == "save/Identity:0"
    saver.restore(sess, path)
    np.testing.assert_array_equal(sess.run(w), np.arange(6).reshape(2, 3))


def test_meta_file_holds_graph_and_saver_def(tmp_path):
  make_vars()
  saver = tf.train.Saver()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = saver.save(sess, str(tmp_path / "m"))
  with open(path + ".meta", "rb") as f:
    data = f.read()
  fields = read_proto_fields(data)
  graph_def = tf.GraphDef.FromString(fields[2])
  assert sorted(n.name for n in graph_def.node) == \
      sorted(op.name for op in tf.get_default_graph().get_operations())
  saver_def = read_proto_fields(fields[3])
  assert saver_def[1] == b"save/Const:0" and saver_def[3] == b"save/restore_all"
  assert b"save/restore_all" in data and b"save/control_dependency:0" in data


def read_proto_fields(data):
  """{field number: value} of a message's length-delimited fields (the last one)."""
  def varint(pos):
    n = shift = 0
    while True:
      b = data[pos]
      n |= (b & 0x7F) << shift
      pos += 1
      shift += 7
      if not b & 0x80:
        return n, pos
  out = {}
  pos = 0
  while pos < len(data):
    key, pos = varint(pos)
    wire = key & 7
    if wire == 2:
      n, pos = varint(pos)
      out[key >> 3] = data[pos:pos + n]
      pos += n
    elif wire == 0:
      out[key >> 3], pos = varint(pos)
    elif wire == 5:
      pos += 4
    else:
      raise AssertionError("wire type %d" % wire)
  return out


def recflow_cli():
  """The `recflow` binary: $RECFLOW_CLI, the build directory's, the source tree's
  build/, or the main checkout's on the development machine."""
  candidates = [os.environ.get("RECFLOW_CLI", "")]
  if os.environ.get("RECFLOW_BUILD_DIR"):
    candidates.append(os.path.join(os.environ["RECFLOW_BUILD_DIR"], "recflow"))
  if os.environ.get("RECFLOW_SOURCE_DIR"):
    candidates.append(os.path.join(os.environ["RECFLOW_SOURCE_DIR"], "build", "recflow"))
  candidates.append("/work/main/build/recflow")
  for p in candidates:
    if p and os.path.isfile(p) and os.access(p, os.X_OK):
      return p
  return None


def inspect(path):
  cli = recflow_cli()
  if cli is None:
    return None
  out = subprocess.run([cli, "ckpt", "inspect", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=60)
  assert out.returncode == 0, out.stdout.decode()
  return out.stdout.decode()


def test_checkpoint_read_by_recflow_cpp_reader(tmp_path):
  if recflow_cli() is None:
    pytest.skip("no recflow binary (build/recflow) to read the checkpoint with")
  make_vars()
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = tf.train.Saver().save(sess, str(tmp_path / "m"), global_step=1)
  out = inspect(path)
  assert "3 tensors" in out
  lines = {l.split()[0]: l.split() for l in out.splitlines() if l.strip()}
  assert lines["w"][1:3] == ["float", "[2,3]"]
  assert lines["layer/b"][1:3] == ["int64", "[3]"]
  assert lines["global_step"][1:3] == ["int64", "[]"]
  assert " 0 bad" in out


def test_keep_checkpoint_every_n_hours_keeps_popped_checkpoints(tmp_path):
  make_vars()
  saver = tf.train.Saver(max_to_keep=1, keep_checkpoint_every_n_hours=1e-9)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    paths = [saver.save(sess, str(tmp_path / "m"), global_step=s) for s in (1, 2, 3)]
  assert saver.last_checkpoints == paths[2:]
  assert all(os.path.exists(p + ".index") for p in paths)  # older ones kept for good


def test_save_relative_paths_and_no_max_to_keep(tmp_path):
  make_vars()
  saver = tf.train.Saver(max_to_keep=None, save_relative_paths=True)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    paths = [saver.save(sess, str(tmp_path / "m"), global_step=s) for s in (1, 2)]
  with open(str(tmp_path / "checkpoint")) as f:
    assert f.read() == 'model_checkpoint_path: "m-2"\nall_model_checkpoint_paths: "m-2"\n'
  assert tf.train.latest_checkpoint(str(tmp_path)) == paths[1]
  assert all(os.path.exists(p + ".index") for p in paths)
  assert saver.last_checkpoints == []


def test_recover_last_checkpoints_counts_existing_ones(tmp_path):
  make_vars()
  saver = tf.train.Saver(max_to_keep=2)
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    old = [saver.save(sess, str(tmp_path / "m"), global_step=s) for s in (1, 2)]
    saver2 = tf.train.Saver(max_to_keep=2)
    saver2.recover_last_checkpoints(tf.train.get_checkpoint_state(
        str(tmp_path)).all_model_checkpoint_paths)
    assert saver2.last_checkpoints == old
    new = saver2.save(sess, str(tmp_path / "m"), global_step=3)
  assert not os.path.exists(old[0] + ".index")
  assert tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths == \
      [old[1], new]
