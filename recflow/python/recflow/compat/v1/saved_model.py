"""tf.saved_model (TF 1.15's compat.v1 names): builder.SavedModelBuilder,
loader.load, simple_save, signature_def_utils, utils, signature_constants,
tag_constants, main_op, constants."""

# pylint: disable=unused-import,wildcard-import
from recflow.saved_model import builder_impl as builder
from recflow.saved_model import constants
from recflow.saved_model import loader_impl as loader
from recflow.saved_model import main_op_impl as main_op
from recflow.saved_model import signature_constants
from recflow.saved_model import signature_def_utils_impl as signature_def_utils
from recflow.saved_model import tag_constants
from recflow.saved_model import utils_impl as utils
from recflow.saved_model.builder_impl import SavedModelBuilder as Builder
from recflow.saved_model.constants import (ASSETS_DIRECTORY, ASSETS_KEY,
                                           LEGACY_INIT_OP_KEY, MAIN_OP_KEY,
                                           SAVED_MODEL_FILENAME_PB,
                                           SAVED_MODEL_FILENAME_PBTXT,
                                           SAVED_MODEL_SCHEMA_VERSION,
                                           VARIABLES_DIRECTORY, VARIABLES_FILENAME)
from recflow.saved_model.loader_impl import contains_saved_model, load, \
    maybe_saved_model_directory
from recflow.saved_model.signature_constants import *
from recflow.saved_model.signature_def_utils_impl import (build_signature_def,
                                                          classification_signature_def,
                                                          is_valid_signature,
                                                          predict_signature_def,
                                                          regression_signature_def)
from recflow.saved_model.simple_save import simple_save
from recflow.saved_model.tag_constants import EVAL, GPU, SERVING, TPU, TRAINING
from recflow.saved_model.utils_impl import build_tensor_info, get_tensor_from_tensor_info
