"""tf.fixed_size_partitioner, variable_axis_size_partitioner and
min_max_variable_partitioner, as TensorFlow 1.15 defines them.

A partitioner is called as partitioner(shape=TensorShape, dtype=DType) and
returns a list with one int per dimension: how many parts along that axis
(at most one entry > 1). get_variable(..., partitioner=...) uses it to make a
PartitionedVariable (see variable_scope.py).
"""

import math

from recflow.framework import dtypes
from recflow.framework import tensor_shape


def variable_axis_size_partitioner(max_shard_bytes, axis=0, bytes_per_string_element=16,
                                   max_shards=None):
  """Parts of at most max_shard_bytes each along `axis` (at most max_shards)."""
  if max_shard_bytes < 1 or bytes_per_string_element < 1:
    raise ValueError("Both max_shard_bytes and bytes_per_string_element must be positive.")
  if max_shards and max_shards < 1:
    raise ValueError("max_shards must be positive.")

  def _partitioner(shape, dtype):
    if not isinstance(shape, tensor_shape.TensorShape):
      raise ValueError("shape is not a TensorShape: %s" % (shape,))
    if not shape.is_fully_defined():
      raise ValueError("shape is not fully defined: %s" % (shape,))
    if not isinstance(dtype, dtypes.DType):
      raise ValueError("dtype is not a DType: %s" % (dtype,))
    if dtype.base_dtype == dtypes.string:
      element_size = bytes_per_string_element
    else:
      element_size = dtype.size
    partitions = [1] * shape.ndims
    bytes_per_slice = 1.0 * (shape.num_elements() / shape.dims[axis].value) * element_size
    slices_per_shard = max(1, math.floor(max_shard_bytes / bytes_per_slice))
    axis_shards = int(math.ceil(1.0 * shape.dims[axis].value / slices_per_shard))
    if max_shards:
      axis_shards = min(max_shards, axis_shards)
    partitions[axis] = axis_shards
    return partitions

  return _partitioner


def min_max_variable_partitioner(max_partitions=1, axis=0, min_slice_size=256 << 10,
                                 bytes_per_string_element=16):
  """Parts of at least min_slice_size bytes along `axis`, at most max_partitions."""

  def _partitioner(shape, dtype):
    shape = tensor_shape.as_shape(shape)
    if axis >= shape.ndims:
      raise ValueError("Can not partition variable along axis %d when shape is only %s" %
                       (axis, shape))
    dtype = dtypes.as_dtype(dtype)
    if dtype.base_dtype == dtypes.string:
      bytes_per_element = bytes_per_string_element
    else:
      bytes_per_element = dtype.size
    total_size_bytes = shape.num_elements() * bytes_per_element
    partitions = total_size_bytes / min_slice_size
    partitions_list = [1] * shape.ndims
    partitions_list[axis] = max(1, min(shape.dims[axis].value, max_partitions,
                                       int(math.ceil(partitions))))
    return partitions_list

  return _partitioner


def fixed_size_partitioner(num_shards, axis=0):
  """num_shards parts along `axis` (fewer when the axis is shorter)."""

  def _partitioner(shape, **unused_args):
    shape = tensor_shape.as_shape(shape)
    partitions_list = [1] * shape.ndims
    partitions_list[axis] = min(num_shards, shape.dims[axis].value)
    return partitions_list

  return _partitioner
