"""tf.saved_model.signature_def_utils (TF 1.15's rules)."""

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.saved_model import meta_graph
from recflow.saved_model import signature_constants
from recflow.saved_model import utils_impl as utils


def build_signature_def(inputs=None, outputs=None, method_name=None):
  """A SignatureDef from {key: TensorInfo} maps and a method name."""
  return meta_graph.SignatureDef(inputs or {}, outputs or {}, method_name or "")


def regression_signature_def(examples, predictions):
  if examples is None:
    raise ValueError("Regression examples cannot be None.")
  if not isinstance(examples, ops.Tensor):
    raise ValueError("Regression examples must be a string Tensor.")
  if predictions is None:
    raise ValueError("Regression predictions cannot be None.")
  input_info = utils.build_tensor_info(examples)
  if input_info.dtype != dtypes.string.as_datatype_enum:
    raise ValueError("Regression examples must be a string Tensor.")
  output_info = utils.build_tensor_info(predictions)
  if output_info.dtype != dtypes.float32.as_datatype_enum:
    raise ValueError("Regression output must be a float Tensor.")
  return build_signature_def({signature_constants.REGRESS_INPUTS: input_info},
                             {signature_constants.REGRESS_OUTPUTS: output_info},
                             signature_constants.REGRESS_METHOD_NAME)


def classification_signature_def(examples, classes, scores):
  if examples is None:
    raise ValueError("Classification examples cannot be None.")
  if not isinstance(examples, ops.Tensor):
    raise ValueError("Classification examples must be a string Tensor.")
  if classes is None and scores is None:
    raise ValueError("Classification classes and scores cannot both be None.")
  input_info = utils.build_tensor_info(examples)
  if input_info.dtype != dtypes.string.as_datatype_enum:
    raise ValueError("Classification examples must be a string Tensor.")
  outputs = {}
  if classes is not None:
    info = utils.build_tensor_info(classes)
    if info.dtype != dtypes.string.as_datatype_enum:
      raise ValueError("Classification classes must be a string Tensor.")
    outputs[signature_constants.CLASSIFY_OUTPUT_CLASSES] = info
  if scores is not None:
    info = utils.build_tensor_info(scores)
    if info.dtype != dtypes.float32.as_datatype_enum:
      raise ValueError("Classification scores must be a float Tensor.")
    outputs[signature_constants.CLASSIFY_OUTPUT_SCORES] = info
  return build_signature_def({signature_constants.CLASSIFY_INPUTS: input_info}, outputs,
                             signature_constants.CLASSIFY_METHOD_NAME)


def predict_signature_def(inputs, outputs):
  if inputs is None or not inputs:
    raise ValueError("Prediction inputs cannot be None or empty.")
  if outputs is None or not outputs:
    raise ValueError("Prediction outputs cannot be None or empty.")
  return build_signature_def({k: utils.build_tensor_info(t) for k, t in inputs.items()},
                             {k: utils.build_tensor_info(t) for k, t in outputs.items()},
                             signature_constants.PREDICT_METHOD_NAME)


def _is_valid_predict_signature(sig):
  return bool(sig.inputs) and bool(sig.outputs)


def _is_valid_regression_signature(sig):
  if set(sig.inputs) != {signature_constants.REGRESS_INPUTS}:
    return False
  if sig.inputs[signature_constants.REGRESS_INPUTS].dtype != dtypes.string.as_datatype_enum:
    return False
  if set(sig.outputs) != {signature_constants.REGRESS_OUTPUTS}:
    return False
  return sig.outputs[signature_constants.REGRESS_OUTPUTS].dtype == \
      dtypes.float32.as_datatype_enum


def _is_valid_classification_signature(sig):
  if set(sig.inputs) != {signature_constants.CLASSIFY_INPUTS}:
    return False
  if sig.inputs[signature_constants.CLASSIFY_INPUTS].dtype != dtypes.string.as_datatype_enum:
    return False
  if not sig.outputs:
    return False
  for key, info in sig.outputs.items():
    if key == signature_constants.CLASSIFY_OUTPUT_CLASSES:
      if info.dtype != dtypes.string.as_datatype_enum:
        return False
    elif key == signature_constants.CLASSIFY_OUTPUT_SCORES:
      if info.dtype != dtypes.float32.as_datatype_enum:
        return False
    else:
      return False
  return True


def is_valid_signature(signature_def):
  """Whether a SignatureDef is a valid predict, classify or regress signature."""
  if signature_def is None:
    return False
  method = signature_def.method_name
  if method == signature_constants.PREDICT_METHOD_NAME:
    return _is_valid_predict_signature(signature_def)
  if method == signature_constants.CLASSIFY_METHOD_NAME:
    return _is_valid_classification_signature(signature_def)
  if method == signature_constants.REGRESS_METHOD_NAME:
    return _is_valid_regression_signature(signature_def)
  return False
