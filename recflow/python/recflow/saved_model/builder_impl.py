"""tf.saved_model.builder.SavedModelBuilder: TensorFlow 1.15's SavedModel layout

  EXPORT_DIR/saved_model.pb      a tensorflow.SavedModel (or saved_model.pbtxt)
  EXPORT_DIR/variables/          variables.index + variables.data-00000-of-00001
  EXPORT_DIR/assets/             the asset files

written with tf.train.Saver (sharded, V2, as TF's builder makes it) and the
protobuf bridge, so TensorFlow, `recflow saved_model` and `recflow serve`
load it."""

import os
import shutil

from recflow.framework import dtypes
from recflow.framework import graph_io
from recflow.framework import ops
from recflow.framework import proto_bridge
from recflow.saved_model import constants
from recflow.saved_model import meta_graph
from recflow.training import saver as tf_saver


def _variables_path(export_dir):
  return os.path.join(export_dir, constants.VARIABLES_DIRECTORY, constants.VARIABLES_FILENAME)


def _as_str(path):
  return path.decode("utf-8") if isinstance(path, bytes) else str(path)


class SavedModelBuilder(object):
  """Builds a SavedModel: one add_meta_graph_and_variables, any number of
  add_meta_graph, then save()."""

  def __init__(self, export_dir):
    export_dir = _as_str(export_dir)
    self._saved_model = meta_graph.SavedModel(constants.SAVED_MODEL_SCHEMA_VERSION)
    self._export_dir = export_dir
    if os.path.exists(export_dir):
      if os.listdir(export_dir):
        raise AssertionError(
            "Export directory already exists, and isn't empty. Please choose a different "
            "export directory, or delete all the contents of the specified directory: %s"
            % export_dir)
    else:
      os.makedirs(export_dir)
    self._has_saved_variables = False

  # --- assets ----------------------------------------------------------------

  def _save_and_write_assets(self, assets_collection):
    """Copies the asset files into assets/ and returns asset_file_def dicts."""
    asset_defs = []
    if not assets_collection:
      return asset_defs
    assets_dir = os.path.join(self._export_dir, constants.ASSETS_DIRECTORY)
    for tensor in assets_collection:
      if not isinstance(tensor, ops.Tensor) or tensor.dtype.base_dtype != dtypes.string:
        raise ValueError("Asset %r is not a string Tensor" % (tensor,))
      if tensor.op.type != "Const":
        raise TypeError("Asset path tensor must be a Tensor of type Const, got %s" %
                        tensor.op.type)
      value = tensor.op.get_attr("value")
      value = value.item() if hasattr(value, "item") else value
      source = _as_str(value)
      filename = os.path.basename(source)
      if not os.path.isdir(assets_dir):
        os.makedirs(assets_dir)
      dest = os.path.join(assets_dir, filename)
      if not os.path.exists(dest):
        shutil.copyfile(source, dest)
      asset_defs.append({"tensor_info": {"name": tensor.name}, "filename": filename})
    return asset_defs

  # --- checks ----------------------------------------------------------------

  @staticmethod
  def _validate_tensor_info(tensor_info):
    if tensor_info is None:
      raise AssertionError("All TensorInfo protos used in the SignatureDefs must have the "
                           "name and dtype fields set.")
    if tensor_info.WhichOneof("encoding") is None:
      raise AssertionError("All TensorInfo protos used in the SignatureDefs must have one of "
                           "the 'encoding' fields (e.g., name or coo_sparse) set: %s"
                           % (tensor_info,))
    if not tensor_info.dtype:
      raise AssertionError("All TensorInfo protos used in the SignatureDefs must have the "
                           "dtype field set: %s" % (tensor_info,))

  def _validate_signature_def_map(self, signature_def_map):
    for key, sig in (signature_def_map or {}).items():
      if not isinstance(sig, meta_graph.SignatureDef):
        raise TypeError("signature_def_map[%r] must be a SignatureDef (build it with "
                        "tf.saved_model.signature_def_utils), got %s" %
                        (key, type(sig).__name__))
      for info in list(sig.inputs.values()) + list(sig.outputs.values()):
        self._validate_tensor_info(info)

  @staticmethod
  def _init_op_collection(init_op, key):
    if init_op is None:
      return {}
    if isinstance(init_op, ops.Tensor):
      init_op = init_op.op
    if not isinstance(init_op, ops.Operation):
      raise TypeError("main_op needs to be an Operation: %r" % (init_op,))
    return {key: {"node_list": {"value": [init_op.name]}}}

  # --- meta graphs -----------------------------------------------------------

  def _meta_graph_def(self, graph, tags, signature_def_map, saver, init_collection,
                      asset_defs, clear_devices):
    graph_dict = proto_bridge.decode("tensorflow.GraphDef",
                                     graph.as_graph_def().SerializeToString())
    if clear_devices:
      for node in graph_dict.get("node", []):
        node.pop("device", None)
    return meta_graph.MetaGraphDef(
        meta_info_def=meta_graph.MetaInfoDef(tags=list(tags), tensorflow_version="1.15.0"),
        graph_def=graph_io.GraphDef(proto_bridge.encode("tensorflow.GraphDef", graph_dict)),
        saver_def=saver.saver_def if saver is not None else None,
        collection_def=init_collection,
        signature_def=dict(signature_def_map or {}),
        asset_file_def=asset_defs)

  @staticmethod
  def _check_tags(tags):
    if isinstance(tags, str) or tags is None:
      raise TypeError("tags must be a list of strings, e.g. [tf.saved_model.tag_constants."
                      "SERVING], got %r" % (tags,))
    return [_as_str(t) for t in tags]

  @staticmethod
  def _saver(saver):
    if saver is not None:
      return saver
    return tf_saver.Saver(tf_saver._default_var_list(ops.get_default_graph()),  # pylint: disable=protected-access
                          sharded=True, write_version=tf_saver.SaverDef.V2, allow_empty=True)

  def add_meta_graph(self, tags, signature_def_map=None, assets_collection=None,
                     legacy_init_op=None, clear_devices=False, main_op=None,
                     strip_default_attrs=False, saver=None):
    """Adds a MetaGraphDef of the default graph sharing the saved variables."""
    if not self._has_saved_variables:
      raise AssertionError("Graph state including variables and assets has not been saved "
                           "yet. Please invoke `add_meta_graph_and_variables()` first.")
    tags = self._check_tags(tags)
    self._validate_signature_def_map(signature_def_map)
    init_collection = self._init_collection(main_op, legacy_init_op)
    asset_defs = self._save_and_write_assets(assets_collection)
    saver = self._saver(saver)
    graph = ops.get_default_graph()
    self._saved_model.meta_graphs.append(self._meta_graph_def(
        graph, tags, signature_def_map, saver if saver.saver_def else None, init_collection,
        asset_defs, clear_devices))

  def _init_collection(self, main_op, legacy_init_op):
    if main_op is not None and legacy_init_op is not None:
      raise ValueError("Both main_op and legacy_init_op are set; use one.")
    if main_op is not None:
      return self._init_op_collection(main_op, constants.MAIN_OP_KEY)
    return self._init_op_collection(legacy_init_op, constants.LEGACY_INIT_OP_KEY)

  def add_meta_graph_and_variables(self, sess, tags, signature_def_map=None,
                                   assets_collection=None, legacy_init_op=None,
                                   clear_devices=False, main_op=None,
                                   strip_default_attrs=False, saver=None):
    """Saves the session's variables into variables/ and adds the MetaGraphDef
    of the session's graph. `strip_default_attrs` is accepted (recflow's
    GraphDefs are written as they are)."""
    if self._has_saved_variables:
      raise AssertionError("Graph state including variables and assets has already been "
                           "saved. Please invoke `add_meta_graph()` instead.")
    tags = self._check_tags(tags)
    self._validate_signature_def_map(signature_def_map)
    init_collection = self._init_collection(main_op, legacy_init_op)
    graph = sess.graph
    with graph.as_default():
      asset_defs = self._save_and_write_assets(assets_collection)
      variables_dir = os.path.join(self._export_dir, constants.VARIABLES_DIRECTORY)
      if not os.path.isdir(variables_dir):
        os.makedirs(variables_dir)
      saver = self._saver(saver)
      saver.save(sess, _variables_path(self._export_dir), write_meta_graph=False,
                 write_state=False)
      self._saved_model.meta_graphs.append(self._meta_graph_def(
          graph, tags, signature_def_map, saver if saver.saver_def else None,
          init_collection, asset_defs, clear_devices))
    self._has_saved_variables = True

  def save(self, as_text=False):
    """Writes saved_model.pb (or saved_model.pbtxt); returns its path (bytes,
    as TensorFlow does)."""
    data = self._saved_model.SerializeToString()
    if as_text:
      path = os.path.join(self._export_dir, constants.SAVED_MODEL_FILENAME_PBTXT)
      with open(path, "w") as f:
        f.write(proto_bridge.to_text("tensorflow.SavedModel", data))
    else:
      path = os.path.join(self._export_dir, constants.SAVED_MODEL_FILENAME_PB)
      with open(path, "wb") as f:
        f.write(data)
    return path.encode("utf-8")


_SavedModelBuilder = SavedModelBuilder
