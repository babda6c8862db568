"""tf.saved_model.loader: loads a SavedModel (TensorFlow's or recflow's) into
a session: imports the MetaGraph's graph into sess.graph, restores the
variables with its SaverDef and runs its main op (or legacy init op) with the
asset paths fed, as TF 1.15's loader does."""

import os

from recflow.framework import graph_io
from recflow.framework import proto_bridge
from recflow.saved_model import constants
from recflow.saved_model import meta_graph


def _as_str(path):
  return path.decode("utf-8") if isinstance(path, bytes) else str(path)


def maybe_saved_model_directory(export_dir):
  """Whether export_dir holds a saved_model.pb or saved_model.pbtxt."""
  export_dir = _as_str(export_dir)
  return (os.path.isfile(os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PB)) or
          os.path.isfile(os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PBTXT)))


contains_saved_model = maybe_saved_model_directory


def parse_saved_model(export_dir):
  """The SavedModel of export_dir. IOError when it is missing or unparsable."""
  export_dir = _as_str(export_dir)
  pb = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PB)
  pbtxt = os.path.join(export_dir, constants.SAVED_MODEL_FILENAME_PBTXT)
  if os.path.isfile(pb):
    path = pb
    with open(pb, "rb") as f:
      data = f.read()
  elif os.path.isfile(pbtxt):
    path = pbtxt
    try:
      with open(pbtxt, "r") as f:
        data = proto_bridge.from_text("tensorflow.SavedModel", f.read())
    except (ValueError, UnicodeDecodeError) as e:
      raise IOError("Cannot parse file %s: %s." % (pbtxt, e))
  else:
    raise IOError("SavedModel file does not exist at: %s/{%s|%s}" %
                  (export_dir, constants.SAVED_MODEL_FILENAME_PBTXT,
                   constants.SAVED_MODEL_FILENAME_PB))
  try:
    return meta_graph.SavedModel.FromString(data)
  except ValueError as e:
    raise IOError("Cannot parse file %s: %s." % (path, e))


def _get_asset_tensors(export_dir, meta_graph_def, import_scope=None):
  feeds = {}
  assets_dir = os.path.join(export_dir, constants.ASSETS_DIRECTORY)
  for asset in meta_graph_def.asset_file_def:
    name = asset.get("tensor_info", {}).get("name", "")
    if import_scope:
      name = import_scope + "/" + name
    feeds[name] = os.path.join(assets_dir, asset.get("filename", ""))
  return feeds


def _init_op_name(meta_graph_def):
  for key in (constants.MAIN_OP_KEY, constants.LEGACY_INIT_OP_KEY):
    coll = meta_graph_def.collection_def.get(key)
    if coll:
      values = coll.get("node_list", {}).get("value", [])
      if len(values) != 1:
        raise RuntimeError("Expected exactly one SavedModel init op. Found: %s" % values)
      return values[0]
  return None


class SavedModelLoader(object):
  """Loads one SavedModel directory (TF 1.15's SavedModelLoader)."""

  def __init__(self, export_dir):
    self._export_dir = _as_str(export_dir)
    self._variables_path = os.path.join(self._export_dir, constants.VARIABLES_DIRECTORY,
                                        constants.VARIABLES_FILENAME)
    self._saved_model = parse_saved_model(self._export_dir)

  @property
  def export_dir(self):
    return self._export_dir

  @property
  def variables_path(self):
    return self._variables_path

  @property
  def saved_model(self):
    return self._saved_model

  def get_meta_graph_def_from_tags(self, tags):
    """The MetaGraphDef whose tags equal `tags` as a set. RuntimeError (listing
    the available tag sets) when there is none."""
    if isinstance(tags, (str, bytes)):
      tags = [tags]
    want = set(_as_str(t) for t in tags)
    available = []
    for mg in self._saved_model.meta_graphs:
      if set(mg.meta_info_def.tags) == want:
        return mg
      available.append(list(mg.meta_info_def.tags))
    raise RuntimeError(
        "MetaGraphDef associated with tags " + str(sorted(want)).strip("[]") +
        " could not be found in SavedModel. To inspect available tag-sets in the "
        "SavedModel, please use the SavedModel CLI: `saved_model_cli` (or `recflow "
        "saved_model show`)\navailable_tags: " + str(available))

  def load_graph(self, graph, tags, import_scope=None, **saver_kwargs):
    """Imports the MetaGraph's graph into `graph`; returns the MetaGraphDef."""
    del saver_kwargs
    mg = self.get_meta_graph_def_from_tags(tags)
    with graph.as_default():
      graph_io.import_graph_def(mg.graph_def, name=import_scope or "")
    return mg

  def restore_variables(self, sess, meta_graph_def, import_scope=None):
    saver_def = meta_graph_def.saver_def
    if saver_def is None or not saver_def.restore_op_name:
      return
    if not os.path.isfile(self._variables_path + ".index"):
      raise IOError("The SavedModel at %s has a SaverDef but no variables (%s.index is "
                    "missing)" % (self._export_dir, self._variables_path))

    def scoped(name):
      return import_scope + "/" + name if import_scope else name

    restore_op = scoped(saver_def.restore_op_name)
    if ":" in restore_op:
      restore_op = restore_op.split(":")[0]
    sess.run(sess.graph.get_operation_by_name(restore_op),
             {scoped(saver_def.filename_tensor_name): self._variables_path})

  def run_init_ops(self, sess, tags, import_scope=None):
    mg = self.get_meta_graph_def_from_tags(tags)
    name = _init_op_name(mg)
    if name is None:
      return
    if import_scope:
      name = import_scope + "/" + name
    feeds = _get_asset_tensors(self._export_dir, mg, import_scope)
    sess.run(sess.graph.get_operation_by_name(name.split(":")[0]), feeds)

  def load(self, sess, tags, import_scope=None, **saver_kwargs):
    mg = self.load_graph(sess.graph, tags, import_scope, **saver_kwargs)
    self.restore_variables(sess, mg, import_scope)
    self.run_init_ops(sess, tags, import_scope)
    return mg


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
  """Loads the MetaGraph tagged `tags` of the SavedModel in export_dir into
  sess (graph, variables, main op) and returns its MetaGraphDef (with
  `signature_def`: name -> SignatureDef with `inputs`/`outputs` TensorInfos)."""
  return SavedModelLoader(export_dir).load(sess, tags, import_scope, **saver_kwargs)
