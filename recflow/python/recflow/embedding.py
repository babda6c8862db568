"""recflow.embedding: hash embedding tables from Python.

A HashEmbeddingTable is an unbounded embedding table keyed by raw int64
feature ids (no vocabulary, no hashing into buckets), with admission (an id
gets a row only after it was seen `admission_min_count` times, or with
`admission_probability`), eviction (rows unused for `max_age_steps` steps or
seen fewer than `min_frequency` times) and the slots of its sparse optimizer
in every row. It is recflow's C++ table (embedding/hash_embedding_table.h)
behind a HashEmbeddingTableOp node, as `recflow train`'s zoo uses it:

  import recflow.compat.v1 as tf
  from recflow import embedding

  table = embedding.HashEmbeddingTable("user_emb", dim=16, optimizer="adagrad",
                                       admission_min_count=2)
  sp_ids = tf.sparse_placeholder(tf.int64)            # raw 64-bit ids
  emb = table.lookup_sparse(sp_ids, combiner="mean")  # [batch, 16]
  ...
  train_op = tf.train.AdagradOptimizer(0.05).minimize(loss)   # tables too
  saver = tf.train.Saver()                                    # tables too

Training: the tf.train optimizers (GradientDescent, Adagrad, Adam, Ftrl)
find trainable tables next to the trainable variables and update them with
the HashTableApply* op of their kind (sparse: only the batch's ids). The
table must be created for the optimizer that trains it (`optimizer=`), as
its rows carry that optimizer's slots. Saving: every table is a
SaveableObject in the SAVEABLE_OBJECTS collection, so tf.train.Saver and
SavedModelBuilder write it in the layout `recflow serve` and `recflow ckpt`
read (K/keys, K/values, K/slots, K/frequencies, K/versions, K = the table's
node name). docs/python.md, "recflow.embedding", says what differs from
TensorFlow.
"""

import threading

import numpy as np

from recflow.framework import dtypes
from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.framework import tensor_shape
from recflow.ops import array_ops
from recflow.ops import control_flow_ops
from recflow.ops import embedding_ops
from recflow.ops import gen_ops as gen
from recflow.ops import init_ops
from recflow.ops import math_ops
from recflow.training import saver as saver_lib
from recflow.training import session_run_hook
from recflow.training import training_util

# Collections: every table, and the trainable ones (what optimizers train when
# minimize() is given no var_list).
HASH_TABLES = "recflow_hash_tables"
TRAINABLE_HASH_TABLES = "recflow_trainable_hash_tables"

_OPTIMIZERS = ("sgd", "adagrad", "adam", "ftrl")
_INITIALIZERS = ("zeros", "constant", "uniform", "normal", "truncated_normal")
_MODES = ("train", "serve")


def _initializer_attrs(initializer):
  """The HashEmbeddingTableOp attrs of an initializer (a name or a tf initializer)."""
  if initializer is None:
    return {}
  if isinstance(initializer, str):
    if initializer not in _INITIALIZERS:
      raise ValueError("HashEmbeddingTable: initializer must be one of %s or a tf "
                       "initializer, got %r" % (", ".join(_INITIALIZERS), initializer))
    return {"initializer": initializer}
  seed = getattr(initializer, "seed", None)
  extra = {} if seed is None else {"seed": int(seed)}
  if isinstance(initializer, init_ops.Zeros):
    return {"initializer": "zeros"}
  if isinstance(initializer, init_ops.Ones):
    return {"initializer": "constant", "init_value": 1.0}
  if isinstance(initializer, init_ops.Constant):
    try:
      value = float(initializer.value)
    except (TypeError, ValueError):
      raise ValueError("HashEmbeddingTable: a constant initializer must be a scalar (every "
                       "element of a new row gets it), got %r" % (initializer.value,))
    return {"initializer": "constant", "init_value": value}
  if isinstance(initializer, init_ops.RandomUniform):
    if initializer.maxval is None:
      raise ValueError("HashEmbeddingTable: random_uniform_initializer needs maxval")
    return dict(extra, initializer="uniform", init_minval=float(initializer.minval),
                init_maxval=float(initializer.maxval))
  if isinstance(initializer, init_ops.TruncatedNormal):
    return dict(extra, initializer="truncated_normal", init_mean=float(initializer.mean),
                init_stddev=float(initializer.stddev))
  if isinstance(initializer, init_ops.RandomNormal):
    return dict(extra, initializer="normal", init_mean=float(initializer.mean),
                init_stddev=float(initializer.stddev))
  raise TypeError("HashEmbeddingTable: initializer %r is not supported (rows are created "
                  "one at a time: zeros, ones, constant, random_uniform, random_normal, "
                  "truncated_normal)" % (initializer,))


class HashEmbeddingTable(object):
  """An unbounded embedding table keyed by raw int64 ids (recflow's own).

  Args:
    name: the table's node name (made unique in the graph), also its key in
      checkpoints and SavedModels.
    dim: the embedding width.
    initializer: how a new row starts: "zeros", "constant", "uniform",
      "normal", "truncated_normal" (with the init_* defaults of the op), or a
      tf initializer object (zeros, ones, constant (scalar), random_uniform,
      random_normal, truncated_normal); None: uniform(-0.05, 0.05).
    optimizer: the optimizer that trains it ("sgd", "adagrad", "adam",
      "ftrl"): its slots live in every row. GradientDescent trains any table.
    initial_accumulator_value: Adagrad's and Ftrl's first accumulator value
      (the table's, not the optimizer's, applies).
    admission_min_count: an id gets a row once it was seen this many times
      in training lookups (counted in a count-min sketch; 1: at once).
    admission_probability: or: a new id gets a row with this probability.
    max_age_steps: eviction: rows not updated for more than this many steps
      go (0: never). min_frequency: rows looked up fewer times go (0: never).
      Eviction runs when evict() runs (EvictionHook runs it every N steps).
    num_shards: lock shards of the table (a power of two, 1..4096).
    default_value: what an id without a row reads (a float for every
      element, or `dim` floats); None: zeros.
    seed: the row initializer's seed (rows depend on the id and the seed).
    nonfinite_gradients: "skip_row" (default), "apply" or "error".
    dram_budget_bytes, cold_dir: tiers (docs/embedding.md, "Tiers"): > 0
      keeps at most that many bytes of the table in memory and its other rows
      in files under cold_dir, a directory on a local disk (0: all in memory).
    trainable: in TRAINABLE_HASH_TABLES (optimizers train it by default).
    container, shared_name: where the table lives in the session.
  """

  _is_hash_table = True

  def __init__(self, name, dim, initializer=None, optimizer="sgd",
               initial_accumulator_value=0.1, admission_min_count=None,
               admission_probability=None, max_age_steps=0, min_frequency=0, num_shards=16,
               default_value=None, seed=None, nonfinite_gradients="skip_row", trainable=True,
               container="", shared_name=None, sketch_width=1 << 20, sketch_depth=4,
               dram_budget_bytes=0, cold_dir=""):
    if not name or not isinstance(name, str):
      raise ValueError("HashEmbeddingTable: name must be a non-empty string, got %r" % (name,))
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
      raise ValueError("HashEmbeddingTable '%s': dim must be an int >= 1, got %r" % (name, dim))
    if optimizer not in _OPTIMIZERS:
      raise ValueError("HashEmbeddingTable '%s': optimizer must be one of %s, got %r" %
                       (name, ", ".join(_OPTIMIZERS), optimizer))
    if admission_min_count is not None and admission_probability is not None:
      raise ValueError("HashEmbeddingTable '%s': give admission_min_count or "
                       "admission_probability, not both" % name)
    attrs = {"dim": dim, "optimizer": optimizer,
             "initial_accumulator_value": float(initial_accumulator_value),
             "max_age_steps": int(max_age_steps), "min_frequency": int(min_frequency),
             "num_shards": int(num_shards), "nonfinite_gradients": nonfinite_gradients,
             "sketch_width": int(sketch_width), "sketch_depth": int(sketch_depth),
             "container": container}
    attrs.update(_initializer_attrs(initializer))
    if seed is not None:
      attrs["seed"] = int(seed)
    if admission_min_count is not None:
      attrs["admission"] = "count"
      attrs["admission_min_count"] = int(admission_min_count)
    elif admission_probability is not None:
      attrs["admission"] = "probability"
      attrs["admission_probability"] = float(admission_probability)
    if dram_budget_bytes:
      if not cold_dir:
        raise ValueError("HashEmbeddingTable '%s': dram_budget_bytes needs a cold_dir" % name)
      attrs["dram_budget_bytes"] = int(dram_budget_bytes)
      attrs["cold_dir"] = str(cold_dir)
    if default_value is not None:
      values = ([float(default_value)] if isinstance(default_value, (int, float))
                else [float(v) for v in default_value])
      attrs["default_value"] = values
    # shared_name empty: the node's name, as for the zoo's tables.
    attrs["shared_name"] = shared_name or ""
    with ops.init_scope():
      handle = gen.hash_embedding_table_op(name=name, **attrs)
    self._init_from_handle(handle, trainable)

  @classmethod
  def _from_op(cls, op, trainable):
    """Wraps an existing HashEmbeddingTableOp node (one the C++ zoo made)."""
    table = cls.__new__(cls)
    table._init_from_handle(op.outputs[0], trainable)  # pylint: disable=protected-access
    return table

  def _init_from_handle(self, handle, trainable):
    self._handle = handle
    self._dim = int(handle.op.get_attr("dim"))
    self._optimizer = handle.op.get_attr("optimizer")
    if isinstance(self._optimizer, bytes):
      self._optimizer = self._optimizer.decode()
    self._trainable = trainable
    graph = handle.graph
    graph.add_to_collection(HASH_TABLES, self)
    if trainable:
      graph.add_to_collection(TRAINABLE_HASH_TABLES, self)
    graph.add_to_collection(ops.GraphKeys.SAVEABLE_OBJECTS, _TableSaveable(self))

  # --- What it is ----------------------------------------------------------

  @property
  def handle(self):
    """The table's resource handle (the HashEmbeddingTableOp output)."""
    return self._handle

  @property
  def op(self):
    return self._handle.op

  @property
  def name(self):
    return self._handle.op.name

  @property
  def graph(self):
    return self._handle.graph

  @property
  def dim(self):
    return self._dim

  @property
  def optimizer(self):
    """The optimizer whose slots the rows carry ("sgd", "adagrad", ...)."""
    return self._optimizer

  @property
  def trainable(self):
    return self._trainable

  @property
  def dtype(self):
    return dtypes.float32

  def _as_graph_element(self):
    return self._handle

  def get_shape(self):
    """[None, dim]: the table has no row count."""
    return tensor_shape.TensorShape([None, self._dim])

  shape = property(get_shape)

  def __repr__(self):
    return "<recflow.embedding.HashEmbeddingTable '%s' dim=%d optimizer=%s>" % (
        self.name, self._dim, self._optimizer)

  # --- Lookups ---------------------------------------------------------------

  def lookup(self, ids, mode="train", name=None):
    """The rows of `ids` (int64 or int32, any shape): ids.shape + [dim].

    mode "train" creates rows for admitted new ids and counts frequencies;
    "serve" never writes (ids without a row read the default value). The
    gradient with respect to the table is sparse (IndexedSlices over raw ids).
    """
    _check_mode(mode)
    with ops.name_scope(name, "hash_embedding_lookup", [ids]) as scope:
      ids = _as_int64(ids, "ids")
      return gen.hash_embedding_lookup(self._handle, ids, dim=self._dim, mode=mode, name=scope)

  def embedding_bag(self, ids, row_splits, weights=None, combiner="mean", mode="train",
                    name=None):
    """Rows combined per example of a ragged batch (the zoo's fused lookup):
    ids int64 [N], row_splits int64 [B + 1], weights float [N] or None;
    combiner "sum", "mean" or "sqrtn"; an example without ids gets zeros."""
    _check_mode(mode)
    embedding_ops._check_combiner(combiner)  # pylint: disable=protected-access
    with ops.name_scope(name, "hash_embedding_bag", [ids, row_splits]) as scope:
      ids = _as_int64(ids, "ids")
      row_splits = _as_int64(row_splits, "row_splits")
      if weights is None:
        weights = ops.convert_to_tensor(np.zeros([0], np.float32), name="no_weights")
      else:
        weights = ops.convert_to_tensor(weights, dtype=dtypes.float32, name="weights")
      return gen.hash_embedding_bag(self._handle, ids, row_splits, weights, dim=self._dim,
                                    combiner=combiner, mode=mode, name=scope)

  def lookup_sparse(self, sp_ids, sp_weights=None, combiner="mean", mode="train", name=None):
    """tf.nn.embedding_lookup_sparse over the table: per row of the SparseTensor
    `sp_ids` (raw int64 ids, rows in order), the combination of its ids' rows
    (TF 1.15's result: max(row with an id) + 1 rows)."""
    _check_mode(mode)
    with _lookup_mode(mode):
      return embedding_ops.embedding_lookup_sparse(self, sp_ids, sp_weights, name=name,
                                                   combiner=combiner)

  # --- Maintenance -------------------------------------------------------------

  def size(self, name=None):
    """The number of rows (an int64 scalar tensor)."""
    return gen.hash_table_size(self._handle, name=name)

  def prefetch(self, ids, name=None):
    """An op moving the rows of `ids` (int64, any shape) that a tiered table
    keeps on disk into memory, so the lookup that follows finds them there:
    run it on the next batch's ids during the current step."""
    with ops.name_scope(name, "prefetch", [self._handle, ids]) as scope:
      ids = ops.convert_to_tensor(ids, dtype=dtypes.int64)
      return gen.hash_table_prefetch(self._handle, ids, name=scope)

  def evict(self, step=None, name=None):
    """An op removing the rows the eviction options select at `step` (a
    tensor or int; None: the table's last update step); returns how many."""
    with ops.name_scope(name, "evict", [self._handle]) as scope:
      step = (ops.convert_to_tensor(0, dtype=dtypes.int64) if step is None
              else math_ops.cast(step, dtypes.int64))
      return gen.hash_table_evict(self._handle, step, name=scope)

  def export(self, name=None):
    """(keys, values, slots, frequencies, versions): every row, sorted by id."""
    return gen.hash_table_export(self._handle, dim=self._dim, name=name)

  def import_rows(self, keys, values, slots=None, frequencies=None, versions=None, name=None):
    """An op replacing the table's rows (export()'s tensors; slots None: the
    rows' slots start fresh; frequencies/versions None: 0 and 1)."""
    with ops.name_scope(name, "import", [keys, values]) as scope:
      keys = _as_int64(keys, "keys")
      values = ops.convert_to_tensor(values, dtype=dtypes.float32, name="values")
      if slots is None:
        n = array_ops.shape(keys)[0]
        slots = array_ops.zeros(array_ops.stack([n, 0, self._dim]), dtype=dtypes.float32)
      else:
        slots = ops.convert_to_tensor(slots, dtype=dtypes.float32, name="slots")
      if frequencies is None:
        frequencies = array_ops.zeros_like(keys)
      if versions is None:
        versions = array_ops.ones_like(keys)
      return gen.hash_table_import(self._handle, keys, values, slots,
                                   _as_int64(frequencies, "frequencies"),
                                   _as_int64(versions, "versions"), name=scope)


def _check_mode(mode):
  if mode not in _MODES:
    raise ValueError("mode must be 'train' or 'serve', got %r" % (mode,))


def _as_int64(t, what):
  t = ops.convert_to_tensor(t, name=what)
  if t.dtype.base_dtype == dtypes.int64:
    return t
  if t.dtype.base_dtype == dtypes.int32:
    return math_ops.cast(t, dtypes.int64)
  raise TypeError("%s must be int64 or int32 ids, got %s" % (what, t.dtype.name))


# The mode lookups through tf.nn.embedding_lookup* use: "train" unless a
# lookup_sparse(mode=...) call on this thread says otherwise.
_lookup_state = threading.local()


class _lookup_mode(object):  # pylint: disable=invalid-name
  def __init__(self, mode):
    self._mode = mode

  def __enter__(self):
    self._saved = getattr(_lookup_state, "mode", "train")
    _lookup_state.mode = self._mode

  def __exit__(self, *unused):
    _lookup_state.mode = self._saved


def _gather(table, ids):
  """embedding_ops' hook: the rows of `ids` from a hash table."""
  return table.lookup(ids, mode=getattr(_lookup_state, "mode", "train"))


def is_hash_table(x):
  return getattr(x, "_is_hash_table", False)


def hash_tables(graph=None):
  """Every HashEmbeddingTable of the graph (default: the default graph)."""
  return (graph or ops.get_default_graph()).get_collection(HASH_TABLES)


def trainable_hash_tables(graph=None):
  return (graph or ops.get_default_graph()).get_collection(TRAINABLE_HASH_TABLES)


def embedding_lookup(table, ids, mode="train", name=None):
  """table.lookup(ids): tf.nn.embedding_lookup for a HashEmbeddingTable."""
  return table.lookup(ids, mode=mode, name=name)


def embedding_lookup_sparse(table, sp_ids, sp_weights=None, combiner="mean", mode="train",
                            name=None):
  """table.lookup_sparse(...): tf.nn.embedding_lookup_sparse for a HashEmbeddingTable."""
  if isinstance(sp_ids, sparse_tensor.SparseTensorValue):
    sp_ids = sparse_tensor.SparseTensor.from_value(sp_ids)
  return table.lookup_sparse(sp_ids, sp_weights, combiner=combiner, mode=mode, name=name)


# --- Checkpoints ---------------------------------------------------------------

_TENSORS = ("keys", "values", "slots", "frequencies", "versions")


class _TableSaveable(saver_lib.SaveableObject):
  """A table as five checkpoint tensors K/keys ... K/versions (K: its node name),
  the layout of embedding/table_bundle.h; restored by HashTableImport."""

  def __init__(self, table):
    self._table = table
    self._exported = None
    super(_TableSaveable, self).__init__(table.handle, [], table.name)

  @property
  def specs(self):
    # The export node is made when a Saver first asks (not at table creation).
    if self._exported is None:
      with self._table.graph.as_default(), ops.name_scope(self._table.name + "/"):
        self._exported = self._table.export(name="export")
    return [saver_lib.SaveSpec(t, "", "%s/%s" % (self.name, k))
            for t, k in zip(self._exported, _TENSORS)]

  @specs.setter
  def specs(self, value):
    pass

  def restore(self, restored_tensors, restored_shapes):
    keys, values, slots, frequencies, versions = restored_tensors
    return gen.hash_table_import(self._table.handle, keys, values, slots, frequencies,
                                 versions)


# --- Eviction while training -----------------------------------------------------

class EvictionHook(session_run_hook.SessionRunHook):
  """Runs evict() of `tables` (default: every table of the graph) every
  `every_n_steps` global steps, at the global step (so max_age_steps counts
  global steps, as the optimizers stamp them)."""

  def __init__(self, tables=None, every_n_steps=1000):
    if every_n_steps < 1:
      raise ValueError("every_n_steps must be >= 1, got %r" % (every_n_steps,))
    self._tables = tables
    self._every = every_n_steps
    self._last = None

  def begin(self):
    tables = self._tables if self._tables is not None else hash_tables()
    self._global_step = training_util.get_global_step()
    if self._global_step is None:
      raise RuntimeError("EvictionHook needs a global step (tf.train.get_or_create_global_step)")
    with ops.name_scope("eviction"):
      step = ops.convert_to_tensor(self._global_step)
      self._evict = control_flow_ops.group(*[t.evict(step) for t in tables])

  def before_run(self, run_context):
    return session_run_hook.SessionRunArgs(self._global_step)

  def after_run(self, run_context, run_values):
    step = int(run_values.results)
    if self._last is None:
      self._last = step
    if step - self._last >= self._every:
      run_context.session.run(self._evict)
      self._last = step
