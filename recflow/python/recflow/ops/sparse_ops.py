"""tf.sparse: sparse placeholders, to_dense, reduce_sum (TensorFlow 1.15 names)."""

import numpy as np

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.framework import tensor_shape
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops

SparseTensor = sparse_tensor.SparseTensor
SparseTensorValue = sparse_tensor.SparseTensorValue


def _check_sparse(sp_input, arg="sp_input"):
  if isinstance(sp_input, sparse_tensor.SparseTensorValue):
    return sparse_tensor.SparseTensor.from_value(sp_input)
  if not isinstance(sp_input, sparse_tensor.SparseTensor):
    raise TypeError("Input %s must be a SparseTensor, got %s" % (arg, type(sp_input).__name__))
  return sp_input


def sparse_placeholder(dtype, shape=None, name=None):
  """A SparseTensor of placeholders to feed: "<name>/indices", "<name>/values" and
  "<name>/shape" (a constant when `shape` is fully known, as in TF 1.15)."""
  shape_name = (name + "/shape") if name is not None else None
  rank = None
  if shape is not None:
    shape = tensor_shape.as_shape(shape)
    rank = shape.ndims
  if shape is not None and shape.is_fully_defined():
    dense_shape = constant_op.constant(shape.as_list(), dtype=dtypes.int64, name=shape_name)
  else:
    dense_shape = array_ops.placeholder(dtypes.int64, shape=[rank], name=shape_name)
  values = array_ops.placeholder(dtype, shape=[None],
                                 name=(name + "/values") if name is not None else None)
  indices = array_ops.placeholder(dtypes.int64, shape=[None, rank],
                                  name=(name + "/indices") if name is not None else None)
  return sparse_tensor.SparseTensor(indices=indices, values=values, dense_shape=dense_shape)


def sparse_tensor_to_dense(sp_input, default_value=0, validate_indices=True, name=None):
  """The dense tensor of sp_input, default_value where it has no entry.

  Built from ScatterNd (recflow has no SparseToDense op): duplicate indices are
  summed instead of rejected; indices need not be ordered.
  """
  sp_input = _check_sparse(sp_input)
  with ops.name_scope(name, "SparseToDense", [sp_input]) as name:
    return array_ops.sparse_to_dense(sp_input.indices, sp_input.dense_shape, sp_input.values,
                                     default_value=default_value,
                                     validate_indices=validate_indices, name=name)


to_dense = sparse_tensor_to_dense


def _static_rank(sp_input):
  r = sp_input.indices.get_shape()
  if r.ndims == 2 and r[1].value is not None:
    return r[1].value
  r = sp_input.dense_shape.get_shape()
  if r.ndims == 1 and r[0].value is not None:
    return r[0].value
  return None


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None,
                      name=None):
  """The sum of sp_input's values over `axis` as a dense tensor (UnsortedSegmentSum
  over the kept coordinates)."""
  sp_input = _check_sparse(sp_input)
  if axis is not None and reduction_axes is not None:
    raise ValueError("Cannot specify both 'axis' and 'reduction_axes'.")
  axis = axis if axis is not None else reduction_axes
  keepdims = bool(keepdims if keepdims is not None else keep_dims)
  with ops.name_scope(name, "SparseReduceSum", [sp_input]) as name:
    rank = _static_rank(sp_input)
    if axis is None:
      total = math_ops.reduce_sum(sp_input.values)
      if keepdims:
        if rank is None:
          raise ValueError("sparse_reduce_sum(keepdims=True) needs a known rank")
        return gen.reshape(total, [1] * rank, name=name)
      return array_ops.identity(total, name=name)
    if rank is None:
      raise ValueError("sparse_reduce_sum over an axis needs sp_input's rank to be known")
    axes = [axis] if np.isscalar(axis) else list(axis)
    norm = set()
    for a in axes:
      a = int(a)
      if not -rank <= a < rank:
        raise ValueError("axis %d out of range for a rank-%d SparseTensor" % (a, rank))
      norm.add(a % rank)
    kept = [d for d in range(rank) if d not in norm]
    if not kept:
      return sparse_reduce_sum(sp_input, None, keepdims, name=name)
    shape = sp_input.dense_shape
    out_dims = [shape[d] for d in kept]
    linear = None
    stride = None
    for d, dim in reversed(list(zip(kept, out_dims))):
      col = sp_input.indices[:, d]
      term = col if stride is None else col * stride
      linear = term if linear is None else linear + term
      stride = dim if stride is None else stride * dim
    summed = gen.unsorted_segment_sum(sp_input.values, linear, stride)
    if keepdims:
      out_shape = array_ops.stack([shape[d] if d in kept else constant_op.constant(
          1, dtypes.int64) for d in range(rank)])
    else:
      out_shape = array_ops.stack(out_dims)
    return gen.reshape(summed, out_shape, name=name)


reduce_sum = sparse_reduce_sum


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
  """sp_a (a 2-D SparseTensor) @ b, as a GatherV2 of b's rows scaled by the values
  and an UnsortedSegmentSum into the output rows (differentiable in values and b)."""
  sp_a = _check_sparse(sp_a, "sp_a")
  with ops.name_scope(name, "SparseTensorDenseMatMul", [sp_a, b]) as name:
    b = ops.convert_to_tensor(b, name="b")
    if b.dtype.base_dtype != sp_a.dtype.base_dtype:
      raise TypeError("sp_a and b must have the same dtype, got %s and %s" %
                      (sp_a.dtype.name, b.dtype.name))
    if b.get_shape().ndims not in (None, 2):
      raise ValueError("b must be a matrix, got shape %s" % b.get_shape())
    if _static_rank(sp_a) not in (None, 2):
      raise ValueError("sp_a must be a matrix (rank 2), got rank %d" % _static_rank(sp_a))
    rows, cols = sp_a.indices[:, 0], sp_a.indices[:, 1]
    out_rows = sp_a.dense_shape[0]
    if adjoint_a:
      rows, cols = cols, rows
      out_rows = sp_a.dense_shape[1]
    if adjoint_b:
      b = array_ops.transpose(b)
    picked = array_ops.gather(b, cols)
    scaled = gen.mul(picked, gen.expand_dims(sp_a.values, 1))
    out = gen.unsorted_segment_sum(scaled, rows, out_rows, name=name)
    if b.get_shape().ndims == 2:
      out.set_shape([None, b.get_shape()[1].value])
    return out


sparse_dense_matmul = sparse_tensor_dense_matmul


def sparse_reorder(sp_input, name=None):
  raise NotImplementedError("tf.sparse.reorder needs a sort op, which recflow does not have "
                            "yet; build SparseTensors in row-major order")


reorder = sparse_reorder


def sparse_retain(sp_input, to_retain):
  raise NotImplementedError("tf.sparse.retain needs a Where op (indices of true elements), "
                            "which recflow does not have yet")


retain = sparse_retain


def sparse_fill_empty_rows(sp_input, default_value, name=None):
  raise NotImplementedError("tf.sparse.fill_empty_rows is not supported by recflow's Python "
                            "layer yet (safe_embedding_lookup_sparse handles empty rows)")


fill_empty_rows = sparse_fill_empty_rows


placeholder = sparse_placeholder
