"""tf.saved_model.simple_save: one predict signature, tag "serve"."""

from recflow.framework import ops
from recflow.saved_model import builder_impl
from recflow.saved_model import signature_constants
from recflow.saved_model import signature_def_utils_impl
from recflow.saved_model import tag_constants


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None):
  """Saves `session` as a SavedModel with the signature "serving_default"
  (predict: `inputs` and `outputs` are {key: Tensor}), tagged "serve"."""
  signature_def_map = {
      signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
          signature_def_utils_impl.predict_signature_def(inputs, outputs)
  }
  b = builder_impl.SavedModelBuilder(export_dir)
  b.add_meta_graph_and_variables(
      session, tags=[tag_constants.SERVING], signature_def_map=signature_def_map,
      assets_collection=session.graph.get_collection(ops.GraphKeys.ASSET_FILEPATHS),
      main_op=legacy_init_op, clear_devices=True)
  b.save()
