"""TensorFlow 1.x's graph-mode API on recflow: `import recflow.compat.v1 as tf`.

Names and semantics follow TensorFlow 1.15's documented API (tf.compat.v1).
Every op registered in recflow is also reachable as a generated function:
`tf.raw_ops.<Op>(...)` (keyword arguments) and `tf.<snake_case_name>(...)`
for ops TensorFlow gives no other Python name. What is not (yet) here raises
an error saying so; docs/python.md lists it.
"""

# pylint: disable=unused-import,redefined-builtin,g-bad-import-order
import logging as _py_logging
import sys as _sys
import types as _types

from recflow.framework import dtypes as _dtypes_module
from recflow.framework.dtypes import (DType, as_dtype, bfloat16, bool, complex64, complex128,
                                      double, float16, float32, float64, half, int8, int16,
                                      int32, int64, qint8, qint16, qint32, quint8, quint16,
                                      resource, string, uint8, uint16, uint32, uint64, variant)
from recflow.framework.errors import OpError
from recflow.framework.ops import (DeviceSpec, Graph, GraphKeys, IndexedSlices,
                                   IndexedSlicesValue, NoGradient, NotDifferentiable,
                                   Operation, RegisterGradient, Tensor, add_to_collection,
                                   add_to_collections, colocate_with, control_dependencies,
                                   convert_to_tensor, convert_to_tensor_or_indexed_slices,
                                   device, get_collection, get_collection_ref,
                                   get_default_graph, get_default_session, init_scope,
                                   name_scope, register_tensor_conversion_function,
                                   reset_default_graph)
from recflow.framework.tensor_shape import Dimension, TensorShape
from recflow.framework.constant_op import constant
from recflow.framework.graph_io import GraphDef, import_graph_def
from recflow.framework.op_wrappers import load_op_library, raw_ops
from recflow.framework.random_seed import get_seed, set_random_seed
from recflow.client.session import (ConfigProto, GPUOptions, GraphOptions, InteractiveSession,
                                    OptimizerOptions, RunMetadata, RunOptions, Session)
from recflow.ops.array_ops import (concat, expand_dims, fill, gather, gather_nd, identity,
                                   invert_permutation, newaxis, one_hot, ones, ones_like, pad,
                                   placeholder, placeholder_with_default, rank, reshape,
                                   scatter_nd, shape, size, slice, sparse_to_dense, split,
                                   squeeze, stack, stop_gradient, strided_slice, tile,
                                   transpose, unique, unstack, where, where_v2, zeros,
                                   zeros_like)
from recflow.ops.control_flow_ops import case, cond, group, no_op, tuple, while_loop
from recflow.ops.parsing_ops import (FixedLenFeature, FixedLenSequenceFeature, VarLenFeature,
                                     decode_csv, parse_example, parse_single_example)
from recflow.ops.clip_ops import (clip_by_average_norm, clip_by_global_norm, clip_by_norm,
                                  clip_by_value, global_norm)
from recflow.ops.gradients_impl import gradients
from recflow.framework.sparse_tensor import SparseTensor, SparseTensorValue
from recflow.ops.sparse_ops import (sparse_placeholder, sparse_reduce_sum, sparse_reorder,
                                    sparse_retain, sparse_tensor_dense_matmul,
                                    sparse_tensor_to_dense)
from recflow.ops.init_ops import (constant_initializer, glorot_normal_initializer,
                                  glorot_uniform_initializer, ones_initializer,
                                  random_normal_initializer, random_uniform_initializer,
                                  truncated_normal_initializer, variance_scaling_initializer,
                                  zeros_initializer)
from recflow.ops.math_ops import (abs, add, add_n, argmax, argmin, cast, ceil, div, div_no_nan,
                                  divide, equal, exp, floor, floordiv, floormod, greater,
                                  greater_equal, less, less_equal, log, log1p, logical_and,
                                  logical_not, logical_or, logical_xor, matmul, maximum,
                                  minimum, mod, multiply, negative, not_equal, pow, range,
                                  realdiv, reciprocal, reduce_all, reduce_any, reduce_max,
                                  reduce_mean, reduce_min, reduce_prod, reduce_sum, rsqrt,
                                  saturate_cast, scalar_mul, sigmoid, sign, sqrt, square,
                                  squared_difference, subtract, tanh, to_double, to_float,
                                  to_int32, to_int64, truediv)
from recflow.ops.random_ops import (multinomial, random_normal, random_shuffle, random_uniform,
                                    truncated_normal)
from recflow.ops.partitioned_variables import (fixed_size_partitioner,
                                               min_max_variable_partitioner,
                                               variable_axis_size_partitioner)
from recflow.ops.state_ops import assign, assign_add, assign_sub
from recflow.ops.variable_scope import (AUTO_REUSE, VariableScope, get_local_variable,
                                        get_variable, get_variable_scope, variable_op_scope,
                                        variable_scope)
from recflow.ops.variables import (Variable, global_variables, global_variables_initializer,
                                   initialize_all_variables, local_variables,
                                   local_variables_initializer, model_variables,
                                   trainable_variables, variables_initializer)
from recflow.compat.v1 import data
from recflow.compat.v1 import distribute
from recflow.compat.v1 import dtypes
from recflow.compat.v1 import errors
from recflow.compat.v1 import image
from recflow.compat.v1 import initializers
from recflow.compat.v1 import io
from recflow.compat.v1 import layers
from recflow.compat.v1 import losses
from recflow.compat.v1 import math
from recflow.compat.v1 import metrics
from recflow.compat.v1 import nn
from recflow.compat.v1 import python_io
from recflow.compat.v1 import random
from recflow.compat.v1 import saved_model
from recflow.compat.v1 import sparse
from recflow.compat.v1 import summary
from recflow.summary.summary_pb import (Event, HistogramProto, SessionLog, Summary,
                                        SummaryMetadata, TensorProto, make_ndarray,
                                        make_tensor_proto)
from recflow.compat.v1 import train
from recflow.util import nest  # tf.nest
from recflow.ops import gen_ops as _gen_ops

__version__ = "1.15.0"  # the TensorFlow API version this module follows
VERSION = __version__
from recflow._pywrap import (GRAPH_DEF_VERSION, GRAPH_DEF_VERSION_MIN_CONSUMER,
                             GRAPH_DEF_VERSION_MIN_PRODUCER)

# tf.compat.v1.X works too, for programs written against that spelling.
compat = _types.SimpleNamespace(v1=_sys.modules[__name__])



def executing_eagerly():
  return False


def disable_eager_execution():
  pass


def disable_v2_behavior():
  pass


def enable_eager_execution(*args, **kwargs):
  raise NotImplementedError("recflow runs graphs; eager execution is not supported")


def enable_v2_behavior():
  raise NotImplementedError("recflow follows TensorFlow 1.x's graph mode (tf.compat.v1)")


class _Logging(_types.ModuleType):
  """tf.logging over Python's logging."""

  DEBUG = _py_logging.DEBUG
  INFO = _py_logging.INFO
  WARN = _py_logging.WARNING
  ERROR = _py_logging.ERROR
  FATAL = _py_logging.CRITICAL

  def __init__(self):
    super(_Logging, self).__init__("recflow.compat.v1.logging")
    self._logger = _py_logging.getLogger("recflow")

  def set_verbosity(self, level):
    self._logger.setLevel(level)

  def get_verbosity(self):
    return self._logger.getEffectiveLevel()

  def debug(self, msg, *args):
    self._logger.debug(msg, *args)

  def info(self, msg, *args):
    self._logger.info(msg, *args)

  def warning(self, msg, *args):
    self._logger.warning(msg, *args)

  warn = warning

  def error(self, msg, *args):
    self._logger.error(msg, *args)


logging = _Logging()


def __getattr__(name):
  """tf.contrib (loaded on first use: TF-slim and what it needs), and the generated
  wrappers of ops TensorFlow gives no other Python name: tf.embedding_bag(...),
  tf.factorization_machine(...), custom ops."""
  if name == "contrib":
    import recflow.contrib  # pylint: disable=import-outside-toplevel
    return recflow.contrib
  fn = getattr(_gen_ops, name, None)
  if fn is None or name.startswith("_"):
    raise AttributeError("module 'recflow.compat.v1' has no attribute %r (TensorFlow 1.15 has "
                         "it? see docs/python.md, What is missing)" % name)
  return fn
