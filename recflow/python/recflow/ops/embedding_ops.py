"""tf.nn.embedding_lookup, embedding_lookup_sparse, safe_embedding_lookup_sparse.

TensorFlow 1.15's semantics over recflow's ops. recflow has no DynamicPartition
or DynamicStitch, so a lookup over n partitioned tables gathers from every
table with the ids that belong to it (others read row 0) and keeps each row
from its own table with a Select: the same values and gradients (IndexedSlices
for each table, whose rows for foreign ids are zeros), n gathers of the batch.
The sparse lookups use Unique, GatherV2 and the SparseSegment* ops.
"""

import numpy as np

from recflow.framework import constant_op
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.framework import tensor_shape
from recflow.ops import array_ops
from recflow.ops import gen_ops as gen
from recflow.ops import math_ops


def _as_param_list(params, arg):
  if params is None:
    raise ValueError("Need at least one param (%s is None)" % arg)
  if isinstance(params, (list, tuple)):
    params = list(params)
  elif hasattr(params, "_get_variable_list"):  # a PartitionedVariable: its parts, in order
    partitions = params._get_partitions()  # pylint: disable=protected-access
    if any(p > 1 for p in partitions[1:]):
      raise ValueError("%s: the PartitionedVariable %s is split along an axis other than 0 "
                       "(partitions %s); embedding lookups need it split by rows" %
                       (arg, params.name, partitions))
    params = list(params)
  else:
    params = [params]
  if not params:
    raise ValueError("Need at least one param (%s is empty)" % arg)
  return params


def _clip_by_norm_rows(t, max_norm, axes):
  """t scaled so that the L2 norm over `axes` is at most max_norm (clip_by_norm)."""
  with ops.name_scope(None, "clip_by_norm", [t, max_norm]):
    l2sum = math_ops.reduce_sum(gen.mul(t, t), axes, keepdims=True)
    pred = gen.greater(l2sum, constant_op.constant(0, dtype=t.dtype))
    l2sum_safe = gen.select(pred, l2sum, array_ops.ones_like(l2sum))
    l2norm = gen.select(pred, gen.sqrt(l2sum_safe), l2sum)
    clip = ops.convert_to_tensor(max_norm, dtype=t.dtype, name="clip_norm")
    return math_ops.truediv(gen.mul(t, clip), gen.maximum(l2norm, clip))


def _is_hash_table(param):
  return getattr(param, "_is_hash_table", False)


def _gather_rows(param, ids, max_norm):
  if _is_hash_table(param):  # a recflow.embedding.HashEmbeddingTable: raw ids
    from recflow import embedding  # pylint: disable=g-import-not-at-top
    result = embedding._gather(param, ids)  # pylint: disable=protected-access
  else:
    result = array_ops.gather(param, ids)
  param_shape = param.get_shape() if hasattr(param, "get_shape") else None
  if param_shape is not None and param_shape.ndims is not None:
    static = ids.get_shape().concatenate(param_shape[1:])
    if result.get_shape().is_compatible_with(static):
      result.set_shape(result.get_shape().merge_with(static))
  if max_norm is not None:
    rank = result.get_shape().ndims
    ids_rank = ids.get_shape().ndims
    if rank is None or ids_rank is None:
      raise ValueError("embedding_lookup(max_norm=...) needs the ranks of ids and of the "
                       "tables to be known")
    if rank > ids_rank:
      result = _clip_by_norm_rows(result, max_norm, list(range(ids_rank, rank)))
  return result


def _param_tail(params):
  """params[0].shape[1:] (the embedding's shape), possibly unknown."""
  p = params[0]
  shape = p.get_shape() if hasattr(p, "get_shape") else ops.convert_to_tensor(p).get_shape()
  if shape.ndims is None:
    return tensor_shape.unknown_shape()
  return shape[1:]


def _with_shape(t, shape):
  if t.get_shape().is_compatible_with(shape):
    t.set_shape(shape)
  return t


def _table_rows(p):
  """Number of rows of table p: a Python int when static, else an int64 tensor."""
  shape = p.get_shape() if hasattr(p, "get_shape") else ops.convert_to_tensor(p).get_shape()
  if shape.ndims is not None and shape[0].value is not None:
    return shape[0].value
  return math_ops.cast(array_ops.shape(p)[0], dtypes.int64)


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
  """Rows of the (possibly partitioned) table `params` at `ids`.

  params: a tensor or variable, or a list of them (the table split by rows)
  with the same trailing shape. With n tables, id i lives in table i % n at
  row i // n ("mod"), or in contiguous blocks ("div": the first
  total % n tables get one row more). max_norm: rows with a larger L2 norm are
  scaled to it. Result: ids.shape + params[0].shape[1:].
  """
  _ = validate_indices
  if partition_strategy not in ("mod", "div"):
    raise ValueError("Unrecognized partition strategy: %r (partition_strategy must be 'mod' or "
                     "'div')" % (partition_strategy,))
  params = _as_param_list(params, "params")
  with ops.name_scope(name, "embedding_lookup", params + [ids]) as name:
    ids = ops.convert_to_tensor(ids, name="ids")
    if not ids.dtype.is_integer:
      raise TypeError("ids must be int32 or int64, got %s" % ids.dtype.name)
    n = len(params)
    out_shape = ids.get_shape().concatenate(_param_tail(params))
    if n > 1 and any(_is_hash_table(p) for p in params):
      raise ValueError("embedding_lookup: a hash embedding table takes raw ids and is never "
                       "split into a list of tables (params has %d)" % n)
    if n == 1:
      result = _gather_rows(params[0], ids, max_norm)
      return _with_shape(array_ops.identity(result, name=name), out_shape)
    ids_shape = ids.get_shape()
    flat_ids = ids if ids_shape.ndims == 1 else gen.reshape(ids, [-1])
    id_dtype = flat_ids.dtype.base_dtype
    if partition_strategy == "mod":
      p_assign = gen.floor_mod(flat_ids, constant_op.constant(n, dtype=id_dtype))
      new_ids = math_ops.floordiv(flat_ids, constant_op.constant(n, dtype=id_dtype))
    else:
      rows = [_table_rows(p) for p in params]
      if all(isinstance(r, int) for r in rows):
        total = constant_op.constant(sum(rows), dtype=id_dtype)
      else:
        total = math_ops.cast(math_ops.add_n([ops.convert_to_tensor(r, dtype=dtypes.int64)
                                              for r in rows]), id_dtype)
      per = math_ops.floordiv(total, constant_op.constant(n, dtype=id_dtype))
      extras = gen.floor_mod(total, constant_op.constant(n, dtype=id_dtype))
      per_plus = gen.add_v2(per, constant_op.constant(1, dtype=id_dtype))
      shifted = gen.sub(flat_ids, extras)
      p_assign = gen.maximum(math_ops.floordiv(flat_ids, per_plus),
                             math_ops.floordiv(shifted, per))
      new_ids = gen.select(gen.less(p_assign, extras), gen.floor_mod(flat_ids, per_plus),
                           gen.floor_mod(shifted, per))
    zero_ids = array_ops.zeros_like(new_ids)
    parts = []
    for i, p in enumerate(params):
      with ops.name_scope("partition_%d" % i):
        mine = gen.equal(p_assign, constant_op.constant(i, dtype=id_dtype))
        rows_i = _gather_rows(p, gen.select(mine, new_ids, zero_ids), max_norm)
        parts.append(gen.select(mine, rows_i, array_ops.zeros_like(rows_i)))
    result = math_ops.add_n(parts)
    if ids_shape.ndims == 1:
      return _with_shape(array_ops.identity(result, name=name), out_shape)
    trailing = array_ops.shape(result)[1:]
    out = gen.reshape(result, array_ops.concat([array_ops.shape(ids), trailing], 0), name=name)
    return _with_shape(out, out_shape)


def _check_combiner(combiner):
  if combiner not in ("mean", "sqrtn", "sum"):
    raise ValueError("combiner must be one of 'mean', 'sqrtn' or 'sum', got %r" % (combiner,))


def _bcast_weights(weights, embeddings):
  """weights [N] reshaped to [N, 1, ...] against embeddings [N, ...]."""
  rank = embeddings.get_shape().ndims
  if rank is None:
    ones = gen.fill(gen.expand_dims(gen.sub(array_ops.rank(embeddings), 1), 0), 1)
    return gen.reshape(weights, array_ops.concat([array_ops.shape(weights), ones], 0))
  if rank == 1:
    return weights
  return gen.reshape(weights, [-1] + [1] * (rank - 1))


def embedding_lookup_sparse(params, sp_ids, sp_weights, partition_strategy="mod", name=None,
                            combiner=None, max_norm=None):
  """Per row of sp_ids, the combination of the embeddings of its ids (TF 1.15).

  sp_ids: a SparseTensor [batch, k] of int ids (rows in order, as TensorFlow
  requires). sp_weights: None (all 1) or a SparseTensor of float weights with
  sp_ids' indices. combiner: "sum", "mean" (default) or "sqrtn" (the weighted
  sum over sqrt of the sum of squared weights). The result has
  max(row with an id) + 1 rows, as TF 1.15's (trailing empty rows are not
  returned; use safe_embedding_lookup_sparse for one row per example).
  """
  if combiner is None:
    combiner = "mean"
  _check_combiner(combiner)
  params = _as_param_list(params, "params")
  if isinstance(sp_ids, sparse_tensor.SparseTensorValue):
    sp_ids = sparse_tensor.SparseTensor.from_value(sp_ids)
  if not isinstance(sp_ids, sparse_tensor.SparseTensor):
    raise TypeError("sp_ids must be SparseTensor, got %s" % type(sp_ids).__name__)
  if isinstance(sp_weights, sparse_tensor.SparseTensorValue):
    sp_weights = sparse_tensor.SparseTensor.from_value(sp_weights)
  ignore_weights = sp_weights is None
  if not ignore_weights:
    if not isinstance(sp_weights, sparse_tensor.SparseTensor):
      raise TypeError("sp_weights must be either None or SparseTensor, got %s" %
                      type(sp_weights).__name__)
    sp_ids.values.get_shape().assert_is_compatible_with(sp_weights.values.get_shape())
    sp_ids.indices.get_shape().assert_is_compatible_with(sp_weights.indices.get_shape())
  with ops.name_scope(name, "embedding_lookup_sparse", params + [sp_ids]) as name:
    out_shape = tensor_shape.TensorShape([None]).concatenate(_param_tail(params))
    segment_ids = math_ops.cast(sp_ids.indices[:, 0], dtypes.int32)
    ids, idx = gen.unique(sp_ids.values)
    embeddings = embedding_lookup(params, ids, partition_strategy=partition_strategy,
                                  max_norm=max_norm)
    if ignore_weights:
      fn = {"sum": gen.sparse_segment_sum, "mean": gen.sparse_segment_mean,
            "sqrtn": gen.sparse_segment_sqrt_n}[combiner]
      return _with_shape(fn(embeddings, idx, segment_ids, name=name), out_shape)
    weights = math_ops.cast(sp_weights.values, embeddings.dtype)
    embeddings = array_ops.gather(embeddings, idx)
    weights = _bcast_weights(weights, embeddings)
    positions = math_ops.range(0, array_ops.shape(segment_ids)[0])
    summed = gen.sparse_segment_sum(gen.mul(embeddings, weights), positions, segment_ids)
    if combiner == "sum":
      return _with_shape(array_ops.identity(summed, name=name), out_shape)
    if combiner == "mean":
      denom = gen.sparse_segment_sum(weights, positions, segment_ids)
    else:
      denom = gen.sqrt(gen.sparse_segment_sum(gen.square(weights), positions, segment_ids))
    return _with_shape(gen.div_no_nan(summed, denom, name=name), out_shape)


def safe_embedding_lookup_sparse(embedding_weights, sparse_ids, sparse_weights=None,
                                 combiner="mean", default_id=None, name=None,
                                 partition_strategy="div", max_norm=None):
  """embedding_lookup_sparse with one output row per example (TF 1.15).

  Negative ids are ignored (and, unless combiner is "sum", ids with weight
  <= 0); an example left without ids gets the embedding of default_id, or
  zeros when default_id is None. sparse_ids may have rank > 2: the result is
  sparse_ids.dense_shape[:-1] + the embedding's shape. Instead of pruning
  entries (recflow has no Where op), invalid entries get weight 0 and read
  row 0; values and gradients are TensorFlow's, and rows need not be ordered.
  """
  _check_combiner(combiner)
  if partition_strategy not in ("mod", "div"):
    raise ValueError("Unrecognized partition strategy: %r" % (partition_strategy,))
  if embedding_weights is None:
    raise ValueError("Missing embedding_weights %s." % embedding_weights)
  params = _as_param_list(embedding_weights, "embedding_weights")
  if isinstance(sparse_ids, sparse_tensor.SparseTensorValue):
    sparse_ids = sparse_tensor.SparseTensor.from_value(sparse_ids)
  if not isinstance(sparse_ids, sparse_tensor.SparseTensor):
    raise TypeError("sparse_ids must be SparseTensor, got %s" % type(sparse_ids).__name__)
  if isinstance(sparse_weights, sparse_tensor.SparseTensorValue):
    sparse_weights = sparse_tensor.SparseTensor.from_value(sparse_weights)
  if sparse_weights is not None and not isinstance(sparse_weights, sparse_tensor.SparseTensor):
    raise TypeError("sparse_weights must be either None or SparseTensor, got %s" %
                    type(sparse_weights).__name__)
  if default_id is not None and (not isinstance(default_id, (int, np.integer)) or
                                 isinstance(default_id, bool)):
    raise TypeError("default_id must be an int or None, got %r" % (default_id,))
  with ops.name_scope(name, "embedding_lookup", params + [sparse_ids]) as scope:
    rank = sparse_ids.indices.get_shape()[1].value if (
        sparse_ids.indices.get_shape().ndims == 2) else None
    if rank is None:
      rank = sparse_ids.dense_shape.get_shape()[0].value if (
          sparse_ids.dense_shape.get_shape().ndims == 1) else None
    if rank is None:
      raise ValueError("safe_embedding_lookup_sparse needs the rank of sparse_ids to be known")
    if rank < 2:
      raise ValueError("sparse_ids must have rank >= 2, got %d" % rank)
    shape = sparse_ids.dense_shape
    # Row of each entry: its index over dense_shape[:-1], row-major.
    row = sparse_ids.indices[:, rank - 2]
    nrows = shape[rank - 2]
    for d in range(rank - 3, -1, -1):
      row = gen.add_v2(row, gen.mul(sparse_ids.indices[:, d], nrows))
      nrows = gen.mul(nrows, shape[d])
    ids = sparse_ids.values
    valid = gen.greater_equal(ids, constant_op.constant(0, dtype=ids.dtype.base_dtype))
    safe_ids = gen.select(valid, ids, array_ops.zeros_like(ids))
    uniq, idx = gen.unique(safe_ids)
    embeddings = embedding_lookup(params, uniq, partition_strategy=partition_strategy,
                                  max_norm=max_norm)
    dtype = embeddings.dtype.base_dtype
    if sparse_weights is not None:
      weights = math_ops.cast(sparse_weights.values, dtype)
      if combiner != "sum":
        valid = gen.logical_and(valid, gen.greater(weights, constant_op.constant(0, dtype)))
    else:
      weights = array_ops.ones_like(math_ops.cast(ids, dtype))
    weights = gen.select(valid, weights, array_ops.zeros_like(weights))
    per_entry = array_ops.gather(embeddings, idx)
    bweights = _bcast_weights(weights, per_entry)
    summed = gen.unsorted_segment_sum(gen.mul(per_entry, bweights), row, nrows)
    if combiner == "mean":
      result = gen.div_no_nan(summed, _bcast_weights(
          gen.unsorted_segment_sum(weights, row, nrows), summed))
    elif combiner == "sqrtn":
      result = gen.div_no_nan(summed, _bcast_weights(
          gen.sqrt(gen.unsorted_segment_sum(gen.square(weights), row, nrows)), summed))
    else:
      result = summed
    if default_id is not None:
      count = gen.unsorted_segment_sum(math_ops.cast(valid, dtypes.int32), row, nrows)
      empty = gen.equal(count, 0)
      default = embedding_lookup(params, constant_op.constant([default_id],
                                                              dtype=ids.dtype.base_dtype),
                                 partition_strategy=partition_strategy, max_norm=max_norm)
      default_rows = array_ops.gather(default, array_ops.zeros_like(count))
      result = gen.select(empty, default_rows, result)
    tail = _param_tail(params)
    if rank == 2:
      return _with_shape(array_ops.identity(result, name=scope),
                         tensor_shape.TensorShape([None]).concatenate(tail))
    out_shape = array_ops.concat([math_ops.cast(shape[:rank - 1], dtypes.int32),
                                  array_ops.shape(result)[1:]], 0)
    final = gen.reshape(result, out_shape, name=scope)
    return _with_shape(final, tensor_shape.unknown_shape(rank - 1).concatenate(tail))
