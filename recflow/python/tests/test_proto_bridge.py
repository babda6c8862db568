"""The protobuf bridge (_pywrap.proto_from_json / proto_to_json / proto_from_text /
proto_to_text, framework/proto_bridge.py) and the files written through it."""

import pytest

import recflow.compat.v1 as tf
from recflow import _pywrap
from recflow.framework import proto_bridge


def test_proto_bridge_roundtrip():
  data = proto_bridge.encode("tensorflow.SaverDef",
                             {"filename_tensor_name": "save/Const:0", "max_to_keep": 5,
                              "version": "V2", "keep_checkpoint_every_n_hours": 1.5})
  d = proto_bridge.decode("tensorflow.SaverDef", data)
  assert d == {"filename_tensor_name": "save/Const:0", "max_to_keep": 5, "version": "V2",
               "keep_checkpoint_every_n_hours": 1.5}
  assert proto_bridge.decode("tensorflow.SaverDef", data, enums_as_ints=True)["version"] == 2
  text = proto_bridge.to_text("tensorflow.SaverDef", data)
  assert 'filename_tensor_name: "save/Const:0"' in text
  assert proto_bridge.from_text("tensorflow.SaverDef", text) == data
  entry = proto_bridge.encode("tensorflow.BundleEntryProto",
                              {"dtype": 1, "shape": {"dim": [{"size": 2}]}, "offset": 1 << 40})
  assert proto_bridge.decode("tensorflow.BundleEntryProto", entry,
                             enums_as_ints=True)["offset"] == str(1 << 40)


@pytest.mark.parametrize("call,what", [
    (lambda: _pywrap.proto_from_json("tensorflow.NoSuchThing", "{}"), "tensorflow.NoSuchThing"),
    (lambda: _pywrap.proto_to_json("nope", b""), "nope"),
    (lambda: _pywrap.proto_from_json("tensorflow.SaverDef", "{not json"), "tensorflow.SaverDef"),
    (lambda: _pywrap.proto_from_json("tensorflow.SaverDef", '{"bogus_field": 1}'),
     "bogus_field"),
    (lambda: _pywrap.proto_from_json("tensorflow.SaverDef", '{"max_to_keep": "many"}'),
     "tensorflow.SaverDef"),
    (lambda: _pywrap.proto_to_json("tensorflow.SaverDef", b"\x0a\xff\xff"),
     "tensorflow.SaverDef"),
    (lambda: _pywrap.proto_to_json("tensorflow.MetaGraphDef", b"\x12\x05abc"), "corrupt"),
    (lambda: _pywrap.proto_from_text("tensorflow.SaverDef", "max_to_keep: {"), "1:"),
    (lambda: _pywrap.proto_to_text("tensorflow.GraphDef", b"\xff"), "tensorflow.GraphDef"),
])
def test_proto_bridge_bad_inputs(call, what):
  with pytest.raises(ValueError) as e:
    call()
  assert what in str(e.value)


def test_proto_bridge_ignore_unknown_fields():
  data = _pywrap.proto_from_json("tensorflow.SaverDef", '{"bogus": 1, "sharded": true}', True)
  assert proto_bridge.decode("tensorflow.SaverDef", data) == {"sharded": True}


def test_meta_file_parses_as_meta_graph_def(tmp_path):
  tf.get_variable("v", [2], initializer=tf.ones_initializer())
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    path = tf.train.Saver().save(sess, str(tmp_path / "m"))
  with open(path + ".meta", "rb") as f:
    mg = proto_bridge.decode("tensorflow.MetaGraphDef", f.read())
  assert mg["meta_info_def"]["tensorflow_version"] == "1.15.0"
  assert mg["saver_def"]["restore_op_name"] == "save/restore_all"
  assert mg["saver_def"]["version"] == "V2"
  assert any(n["name"] == "v" for n in mg["graph_def"]["node"])




def test_checkpoint_state_text_roundtrip():
  from recflow.training import checkpoint_management as cm
  state = cm.CheckpointState('dir/\u00fc"x\nq', ["a", 'dir/\u00fc"x\nq'], [1700000000.25, 2.5], 3.25)
  text = str(state)
  assert text.startswith('model_checkpoint_path: "dir/\\303\\274\\"x\\nq"\n')
  again = cm.parse_checkpoint_state(text)
  assert again == state and again.all_model_checkpoint_timestamps == [1700000000.25, 2.5]
  assert cm.parse_checkpoint_state("model_checkpoint_path: 'm-1'\n").model_checkpoint_path == "m-1"
  with pytest.raises(ValueError, match="no field named \"bogus\""):
    cm.parse_checkpoint_state("bogus: 1")
