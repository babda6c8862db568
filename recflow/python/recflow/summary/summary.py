"""tf.summary's graph ops (TF 1.x, tensorflow/python/summary/summary.py):
scalar, histogram, tensor_summary, text, merge and merge_all over recflow's
ScalarSummary, HistogramSummary, TensorSummaryV2 and MergeSummary ops.

Names as TF makes them: the op is named by a name scope of the (cleaned)
summary name, the tag is that scope (`train/loss` inside
`tf.name_scope("train")`), a `family` prefixes both; the op goes into the
`collections` given (default [GraphKeys.SUMMARIES])."""

import contextlib
import logging
import re

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import gen_ops
from recflow.summary import summary_pb

_logger = logging.getLogger("recflow")
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w\.]")


def _clean_tag(name):
  """Characters TensorBoard does not allow in a tag become "_"; leading
  slashes go, as TF's summary_op_util.clean_tag does."""
  if name is not None:
    new_name = _INVALID_TAG_CHARACTERS.sub("_", name).lstrip("/")
    if new_name != name:
      _logger.info("Summary name %s is illegal; using %s instead.", name, new_name)
      name = new_name
  return name


@contextlib.contextmanager
def _summary_scope(name, family=None, default_name=None, values=None):
  name = _clean_tag(name)
  family = _clean_tag(family)
  scope_base_name = name if family is None else "{}/{}".format(family, name)
  with ops.name_scope(scope_base_name, default_name, values=values) as scope:
    if family is None:
      tag = scope.rstrip("/")
    else:
      tag = "{}/{}".format(family, scope.rstrip("/"))
    yield tag, scope


def _collect(val, collections, default_collections):
  if collections is None:
    collections = default_collections
  for key in collections:
    ops.add_to_collection(key, val)


def scalar(name, tensor, collections=None, family=None):
  """A string scalar Tensor: a serialized Summary with one simple_value."""
  with _summary_scope(name, family, values=[tensor]) as (tag, scope):
    val = gen_ops.scalar_summary(tags=tag, values=tensor, name=scope)
    _collect(val, collections, [ops.GraphKeys.SUMMARIES])
  return val


def histogram(name, values, collections=None, family=None):
  """A string scalar Tensor: a serialized Summary with a histogram of `values`
  (TensorFlow's default buckets; NaN or Inf values fail the run)."""
  with _summary_scope(name, family, values=[values]) as (tag, scope):
    val = gen_ops.histogram_summary(tag=tag, values=values, name=scope)
    _collect(val, collections, [ops.GraphKeys.SUMMARIES])
  return val


def tensor_summary(name, tensor, summary_description=None, collections=None,
                   summary_metadata=None, family=None, display_name=None):
  """A serialized Summary holding `tensor` as a TensorProto (TensorSummaryV2)."""
  if summary_metadata is None:
    summary_metadata = summary_pb.SummaryMetadata()
  if summary_description is not None:
    summary_metadata.summary_description = summary_description
  if display_name is not None:
    summary_metadata.display_name = display_name
  serialized = summary_metadata.SerializeToString()
  with _summary_scope(name, family, values=[tensor]) as (tag, scope):
    val = gen_ops.tensor_summary_v2(tensor=tensor, tag=tag, name=scope,
                                    serialized_summary_metadata=serialized)
    _collect(val, collections, [ops.GraphKeys.SUMMARIES])
  return val


def text(name, tensor, collections=None):
  """A string tensor for TensorBoard's text plugin."""
  tensor = ops.convert_to_tensor(tensor)
  if tensor.dtype != dtypes.string:
    raise ValueError("Expected tensor %s to have dtype string, got %s" %
                     (tensor.name, tensor.dtype))
  metadata = summary_pb.SummaryMetadata(
      plugin_data=summary_pb.SummaryMetadata.PluginData(plugin_name="text"))
  return tensor_summary(name=name, tensor=tensor, summary_metadata=metadata,
                        collections=collections)


def merge(inputs, collections=None, name=None):
  """One serialized Summary with every value of `inputs` (string tensors of
  serialized Summaries); a repeated tag fails the run."""
  with ops.name_scope(name, "Merge", inputs):
    val = gen_ops.merge_summary(inputs=inputs, name=name)
    _collect(val, collections, [])
  return val


def merge_all(key=ops.GraphKeys.SUMMARIES, scope=None, name=None):
  """merge() of the collection `key` (filtered by `scope`), or None when it is
  empty."""
  summary_ops = ops.get_collection(key, scope=scope)
  if not summary_ops:
    return None
  return merge(summary_ops, name=name)

