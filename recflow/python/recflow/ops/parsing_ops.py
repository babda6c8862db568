"""tf.io parsing with TensorFlow 1.15's names and semantics: FixedLenFeature,
VarLenFeature, FixedLenSequenceFeature, parse_example, parse_single_example
and decode_csv, over recflow's ParseExample, ParseSingleExample and DecodeCSV
kernels (C++, ops/parsing_ops.cc)."""

import collections
import re

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.framework import tensor_shape
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
  """A variable-length feature: parsed into a SparseTensor (values of dtype)."""


class FixedLenFeature(collections.namedtuple("FixedLenFeature",
                                             ["shape", "dtype", "default_value"])):
  """A fixed-length feature: parsed into a dense Tensor [batch] + shape.
  default_value (compatible with shape) is used when an example lacks the
  feature; without it the feature is required."""

  def __new__(cls, shape, dtype, default_value=None):
    return super(FixedLenFeature, cls).__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
    "FixedLenSequenceFeature", ["shape", "dtype", "allow_missing", "default_value"])):
  """A feature of any number of elements of `shape`, parsed into a dense Tensor
  [batch, longest, ...shape] padded with default_value (a scalar; 0 or "" when
  None). parse_example requires allow_missing=True, as TensorFlow does."""

  def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
    return super(FixedLenSequenceFeature, cls).__new__(cls, shape, dtype, allow_missing,
                                                       default_value)


_PARSE_DTYPES = (dtypes.float32, dtypes.int64, dtypes.string)


def _features_to_raw_params(features):
  """(sparse_keys, sparse_types, dense_keys, dense_types, dense_defaults,
  dense_shapes) of a features dict, keys in sorted order as TF does."""
  if not features:
    raise ValueError("Missing: features was %s." % (features,))
  sparse_keys, sparse_types = [], []
  dense_keys, dense_types, dense_shapes = [], [], []
  dense_defaults = {}
  for key in sorted(features):
    feature = features[key]
    if isinstance(feature, VarLenFeature):
      if not feature.dtype:
        raise ValueError("Missing type for feature %s." % key)
      sparse_keys.append(key)
      sparse_types.append(dtypes.as_dtype(feature.dtype))
    elif isinstance(feature, FixedLenFeature):
      if not feature.dtype:
        raise ValueError("Missing type for feature %s." % key)
      if feature.shape is None:
        raise ValueError("Missing shape for feature %s." % key)
      shape = tensor_shape.as_shape(feature.shape)
      if not shape.is_fully_defined():
        raise ValueError("All dimensions of shape for feature %s need to be known but "
                         "received %s." % (key, feature.shape))
      dense_keys.append(key)
      dense_types.append(dtypes.as_dtype(feature.dtype))
      dense_shapes.append(shape)
      if feature.default_value is not None:
        dense_defaults[key] = feature.default_value
    elif isinstance(feature, FixedLenSequenceFeature):
      if not feature.dtype:
        raise ValueError("Missing type for feature %s." % key)
      if feature.shape is None:
        raise ValueError("Missing shape for feature %s." % key)
      dense_keys.append(key)
      dense_types.append(dtypes.as_dtype(feature.dtype))
      dense_shapes.append(tensor_shape.as_shape(feature.shape))
      if feature.allow_missing:
        dense_defaults[key] = feature.default_value  # the padding value; None: 0 or ""
    else:
      raise ValueError("Invalid feature %s:%s (recflow parses VarLenFeature, FixedLenFeature "
                       "and FixedLenSequenceFeature; SparseFeature is not supported)." %
                       (key, feature))
  for key, dtype in zip(sparse_keys + dense_keys, sparse_types + dense_types):
    if dtype not in _PARSE_DTYPES:
      raise ValueError("Unsupported dtype %s for feature %s: tf.Example features are "
                       "float32, int64 or string." % (dtype.name, key))
  return sparse_keys, sparse_types, dense_keys, dense_types, dense_defaults, dense_shapes


def _prepend_none_dimension(features):
  """FixedLenSequenceFeature shapes get a leading None (the sequence length)."""
  out = dict(features)
  for key, feature in features.items():
    if isinstance(feature, FixedLenSequenceFeature):
      if not feature.allow_missing:
        raise ValueError("Unsupported: FixedLenSequenceFeature requires allow_missing to be "
                         "True.")
      out[key] = FixedLenSequenceFeature([None] + list(feature.shape), feature.dtype,
                                         feature.allow_missing, feature.default_value)
  return out


def _dense_defaults(dense_keys, dense_types, dense_shapes, dense_defaults):
  """The dense_defaults input: per key an empty tensor (required), the
  default reshaped to the feature's shape, or a scalar padding value for a
  variable-length (FixedLenSequenceFeature) feature."""
  out = []
  for key, dtype, shape in zip(dense_keys, dense_types, dense_shapes):
    default = dense_defaults.get(key)
    var_len = shape.ndims is not None and shape.ndims > 0 and shape.dims[0].value is None
    safe_key = re.sub(r"[^A-Za-z0-9_.\-/]", "_", key)
    if var_len:
      if default is None:
        default = constant_op.constant("" if dtype == dtypes.string else 0, dtype=dtype)
      else:
        default = ops.convert_to_tensor(default, dtype=dtype, name="padding_" + safe_key)
        default = array_ops.reshape(default, [])
    elif default is None:
      default = constant_op.constant([], dtype=dtype)
    elif not isinstance(default, ops.Tensor):
      default = ops.convert_to_tensor(default, dtype=dtype, name="key_" + safe_key)
      default = array_ops.reshape(default, shape.as_list())
    out.append(default)
  return out


def _check_keys(sparse_keys, dense_keys):
  both = set(sparse_keys) & set(dense_keys)
  if both:
    raise ValueError("Dense and sparse keys must not intersect; intersection: %s" %
                     sorted(both))


def parse_example(serialized, features, name=None, example_names=None):
  """Parses a batch of serialized tf.Example protos (a string vector [B]).

  features: dict of key -> VarLenFeature (-> SparseTensor [B, longest]),
  FixedLenFeature (-> Tensor [B] + shape) or FixedLenSequenceFeature
  (allow_missing=True; -> Tensor [B, longest] + shape, padded). Returns a dict
  with the same keys. A required feature that is missing, a value list of the
  wrong type or length, or bytes that are not an Example raise
  InvalidArgumentError at run time naming the example and the feature.
  """
  features = _prepend_none_dimension(features)
  (sparse_keys, sparse_types, dense_keys, dense_types, dense_defaults,
   dense_shapes) = _features_to_raw_params(features)
  _check_keys(sparse_keys, dense_keys)
  with ops.name_scope(name, "ParseExample", [serialized, example_names]):
    names = [] if example_names is None else example_names
    names = ops.convert_to_tensor(names, dtype=dtypes.string, name="names")
    serialized = ops.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
    defaults = _dense_defaults(dense_keys, dense_types, dense_shapes, dense_defaults)
    out = gen.parse_example(serialized=serialized, names=names, sparse_keys=sparse_keys,
                            dense_keys=dense_keys, dense_defaults=defaults,
                            sparse_types=sparse_types, dense_shapes=dense_shapes,
                            name=name)
  sparse = [sparse_tensor.SparseTensor(ix, val, shape) for ix, val, shape in
            zip(out.sparse_indices, out.sparse_values, out.sparse_shapes)]
  return dict(zip(sparse_keys + dense_keys, sparse + list(out.dense_values)))


def parse_single_example(serialized, features, name=None, example_names=None):
  """Parses one serialized tf.Example (a string scalar): as parse_example
  without the batch dimension (VarLenFeature -> SparseTensor [longest]).
  example_names is accepted for TensorFlow's signature; it only names
  examples in errors there and is not used."""
  del example_names  # only for error messages in TensorFlow
  features = _prepend_none_dimension(features)
  (sparse_keys, sparse_types, dense_keys, dense_types, dense_defaults,
   dense_shapes) = _features_to_raw_params(features)
  _check_keys(sparse_keys, dense_keys)
  with ops.name_scope(name, "ParseSingleExample", [serialized]):
    serialized = ops.convert_to_tensor(serialized, dtype=dtypes.string, name="serialized")
    if serialized.shape.ndims not in (None, 0):
      raise ValueError("Input serialized must be a scalar, got shape %s" % serialized.shape)
    defaults = _dense_defaults(dense_keys, dense_types, dense_shapes, dense_defaults)
    out = gen.parse_single_example(serialized=serialized, dense_defaults=defaults,
                                   num_sparse=len(sparse_keys), sparse_keys=sparse_keys,
                                   dense_keys=dense_keys, sparse_types=sparse_types,
                                   dense_shapes=dense_shapes, name=name)
  sparse = [sparse_tensor.SparseTensor(ix, val, shape) for ix, val, shape in
            zip(out.sparse_indices, out.sparse_values, out.sparse_shapes)]
  return dict(zip(sparse_keys + dense_keys, sparse + list(out.dense_values)))


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True, name=None,
               na_value="", select_cols=None):
  """Converts CSV records to tensors, one per column (TF 1.15's decode_csv).

  record_defaults: one tensor per (selected) column, giving its dtype
  (float32, float64, int32, int64, string) and its default: one value, or
  empty ([] of the dtype, e.g. tf.constant([], tf.int64)) for a required
  column. field_delim: one character. use_quote_delim: '"' quotes fields
  (RFC 4180). na_value: a field equal to it is missing. select_cols: strictly
  increasing column indices to decode. Returns a list of tensors shaped like
  `records`; a record with the wrong number of fields, a required field that
  is missing or a value that does not parse raises InvalidArgumentError at
  run time naming the record and the field.
  """
  if select_cols is not None:
    select_cols = list(select_cols)
    if any(select_cols[i] >= select_cols[i + 1] for i in range(len(select_cols) - 1)):
      raise ValueError("select_cols is not strictly increasing.")
    if select_cols and select_cols[0] < 0:
      raise ValueError("select_cols contains negative values.")
    if len(select_cols) != len(record_defaults):
      raise ValueError("Length of select_cols and record_defaults do not match.")
  return gen.decode_csv(records=records, record_defaults=list(record_defaults),
                        field_delim=field_delim, use_quote_delim=use_quote_delim,
                        na_value=na_value, select_cols=select_cols or [], name=name)
