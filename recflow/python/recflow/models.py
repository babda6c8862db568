"""recflow.models: recflow's model zoo as Python builders.

  import recflow.compat.v1 as tf
  from recflow import models

  config = {"model": {"type": "deepfm", "embedding_dim": 8, "hidden_units": [64, 32]},
            "features": {"dense": 13, "sparse": 26,
                         "sparse_defaults": {"hash_table": True}}}
  m = models.build(config)                 # into the default graph
  # m.features: the placeholders ("labels", "dense", "C1/ids", "C1/row_splits", ...)
  # m.logits, m.probabilities, m.loss, m.train_op (the zoo's optimizers), ...

The config is the run config of `recflow train --config` (docs/model_config.md)
as a dict (or YAML text, or a path to a .yaml file); its "model", "features"
and "optimizer" sections say what to build. The graph is built by the same
C++ builders (models::BuildModel) as `recflow train` builds it, into the
Python graph's C++ graph, and comes back as Python tensors: add your own loss,
optimizer (build with trainable=False to leave the zoo's out), hooks and
signatures. The zoo's variables are tf.Variables of the graph's
GLOBAL_VARIABLES (and TRAINABLE_VARIABLES), its hash tables
recflow.embedding.HashEmbeddingTables, its global step the GLOBAL_STEP, so
tf.train.Saver, MonitoredTrainingSession and SavedModelBuilder handle them.

Input: build(config) makes placeholders; build(config, batch=tensors) reads
the batch components of the config's data instead (schema(config) lists
them: "labels", "dense", "C1/ids", "C1/row_splits", ...), as `recflow train`
does. Batches(config, files) reads the data as `recflow train` reads it
(recflow's C++ Criteo pipeline: parse threads, bad-line policy, prefetch),
one list of NumPy arrays per batch in that order, for feed_dict.
"""

import json
import os

from recflow import _pywrap
from recflow import embedding
from recflow.framework import dtypes
from recflow.framework import ops
from recflow.ops import array_ops
from recflow.ops import variables

MODEL_TYPES = ("lr", "fm", "mlp", "wide_deep", "deepfm", "dcn_v2", "dlrm", "din", "two_tower")


def _config_text(config):
  """(YAML text, name for messages) of a dict, YAML text or .yaml path."""
  if isinstance(config, dict):
    return json.dumps(config), "<config dict>"
  if isinstance(config, str):
    if "\n" not in config and config.endswith((".yaml", ".yml")):
      if not os.path.exists(config):
        raise ValueError("config file %r does not exist" % config)
      with open(config) as f:
        return f.read(), config
    return config, "<config text>"
  raise TypeError("config must be a dict, YAML text or a .yaml path, got %s" %
                  type(config).__name__)


class Model(object):
  """What build() returns: the model's tensors in the Python graph.

  features: name -> input tensor ("labels", "dense", "<F>/ids", "<F>/row_splits");
  labels; logits [B]; probabilities [B]; loss (scalar); train_op (an
  Operation, None with trainable=False); global_step (a tf.Variable or None);
  outputs: extra serving outputs (two_tower's "score"); signatures:
  name -> (inputs dict, outputs dict) as `recflow export` writes them;
  embedding_variables, dense_variables: the zoo's parameters (variables and
  HashEmbeddingTables); tables: every hash table; num_parameters.
  """

  def __init__(self, **kw):
    self.__dict__.update(kw)

  def __repr__(self):
    return "<recflow.models.Model %s: logits %s>" % (self.model_type, self.logits.name)


def _tensor(graph, pair):
  return graph._op_by_id(pair[0]).outputs[pair[1]]  # pylint: disable=protected-access


def _wrap_variable(graph, var_op, init_op, trainable):
  """A tf.Variable over a variable node the C++ builder made."""
  if var_op.type == "VarHandleOp":
    v = variables.ResourceVariable.__new__(variables.ResourceVariable)
    v._handle = var_op.outputs[0]  # pylint: disable=protected-access
    v._dtype = var_op.get_attr("dtype")  # pylint: disable=protected-access
    v._shape = var_op.get_attr("shape")  # pylint: disable=protected-access
    v._initializer_op = init_op  # pylint: disable=protected-access
    v._initial_value = init_op.inputs[1]  # pylint: disable=protected-access
    v._trainable = trainable  # pylint: disable=protected-access
    v._graph = graph  # pylint: disable=protected-access
    with ops.name_scope(None), ops.name_scope(var_op.name + "/Read/"):
      v._graph_element = v._read_variable_op()  # pylint: disable=protected-access
  else:
    v = variables.RefVariable.__new__(variables.RefVariable)
    v._variable = var_op.outputs[0]  # pylint: disable=protected-access
    v._initializer_op = init_op  # pylint: disable=protected-access
    v._initial_value = init_op.inputs[1]  # pylint: disable=protected-access
    v._trainable = trainable  # pylint: disable=protected-access
    v._graph = graph  # pylint: disable=protected-access
    v._shape = var_op.outputs[0].get_shape()  # pylint: disable=protected-access
    with ops.name_scope(None):
      v._snapshot = array_ops.identity(v._variable, name=var_op.name + "/read")  # pylint: disable=protected-access
    v._graph_element = v._snapshot  # pylint: disable=protected-access
  collections = [ops.GraphKeys.GLOBAL_VARIABLES]
  if trainable:
    collections.append(ops.GraphKeys.TRAINABLE_VARIABLES)
  ops.add_to_collections(collections, v)
  return v


def schema(config):
  """[(name, dtype, shape)]: the batch components of the config's data."""
  text, filename = _config_text(config)
  return [(name, dtypes.as_dtype(dt), shape)
          for name, dt, shape in _pywrap.zoo_schema(text, filename)]


def batch_placeholders(config, name="batch"):
  """One placeholder per batch component of the config's data (feed them
  Batches' arrays, in order), under the name scope `name`."""
  with ops.name_scope(name):
    return [array_ops.placeholder(dt, shape, name=n.replace("/", "_"))
            for n, dt, shape in schema(config)]


def build(config, batch=None, trainable=True):
  """Builds the config's zoo model into the default graph (see the module doc).

  batch: None (placeholders named "labels", "dense", "<F>/ids",
  "<F>/row_splits" under the current name scope) or the batch components of
  the config's data (batch_placeholders(config), or a dataset's tensors in
  schema(config)'s order). trainable: False leaves out the zoo's loss
  gradients, optimizers, "train" op and global step (bring your own).
  """
  graph = ops.get_default_graph()
  text, filename = _config_text(config)
  components = None
  if batch is not None:
    components = [ops.convert_to_tensor(t)._as_tf_output() for t in batch]  # pylint: disable=protected-access
  with graph._lock:  # pylint: disable=protected-access
    graph._check_not_finalized()  # pylint: disable=protected-access
    before = graph._c_graph.num_nodes()  # pylint: disable=protected-access
    try:
      r = _pywrap.zoo_build(graph._c_graph, text, filename, graph.get_name_scope(),  # pylint: disable=protected-access
                            components, bool(trainable))
    finally:
      graph._sync()  # pylint: disable=protected-access
      for i in range(before, graph._c_graph.num_nodes()):  # pylint: disable=protected-access
        graph._op_by_id(i)  # pylint: disable=protected-access  (registers the names)
  by_node = {}
  global_step = None
  has_step = bool(graph.get_collection(ops.GraphKeys.GLOBAL_STEP))
  for var_id, init_id, is_trainable, is_step in r["variables"]:
    v = _wrap_variable(graph, graph._op_by_id(var_id), graph._op_by_id(init_id),  # pylint: disable=protected-access
                       is_trainable)
    by_node[var_id] = v
    if is_step:
      global_step = v
      if not has_step:
        graph.add_to_collection(ops.GraphKeys.GLOBAL_STEP, v)
  tables = []
  for table_id, is_trainable in r["tables"]:
    t = embedding.HashEmbeddingTable._from_op(graph._op_by_id(table_id), is_trainable)  # pylint: disable=protected-access
    by_node[table_id] = t
    tables.append(t)

  def state(pairs):
    return [by_node.get(p[0], _tensor(graph, p)) for p in pairs]

  features = {k: _tensor(graph, p) for k, p in r["inputs"].items()}
  signatures = {k: ({n: _tensor(graph, p) for n, p in s["inputs"].items()},
                    {n: _tensor(graph, p) for n, p in s["outputs"].items()})
                for k, s in r["signatures"].items()}
  train_op = graph._op_by_id(r["train_op"]) if r["train_op"] is not None else None  # pylint: disable=protected-access
  if train_op is not None:
    train_ops = graph.get_collection_ref(ops.GraphKeys.TRAIN_OP)
    if train_op not in train_ops:
      train_ops.append(train_op)
  loss = _tensor(graph, r["loss"])
  return Model(model_type=r["model_type"], features=features, labels=features["labels"],
               logits=_tensor(graph, r["logits"]),
               probabilities=_tensor(graph, r["probabilities"]), loss=loss, train_op=train_op,
               global_step=global_step,
               outputs={k: _tensor(graph, p) for k, p in r["outputs"].items()},
               signatures=signatures, embedding_variables=state(r["embedding_variables"]),
               dense_variables=state(r["dense_variables"]), tables=tables,
               num_parameters=r["num_parameters"], batch_size=r["batch_size"])


class Batches(object):
  """The config's data read as `recflow train` reads it: an iterator of
  batches, each a list of NumPy arrays in schema(config)'s order.

  files: comma-separated globs (default: the config's data.train); epochs:
  passes over them (<= 0: forever). Batches of train.batch_size lines,
  parsed on data.parse_threads threads, bad lines skipped and counted
  (bad_records()), shuffled per train.shuffle_buffer, prefetched.
  """

  def __init__(self, config, files=None, epochs=1):
    text, filename = _config_text(config)
    epochs = int(epochs)
    self._it = _pywrap.ZooBatches(text, filename, files or "", epochs if epochs > 0 else -1)

  def __iter__(self):
    return self

  def __next__(self):
    batch = self._it.next()
    if batch is None:
      raise StopIteration
    return batch

  def bad_records(self):
    return self._it.bad_records()

  def close(self):
    self._it.close()


def feed_dict(placeholders, batch):
  """{placeholder: array} for one batch of Batches."""
  if len(placeholders) != len(batch):
    raise ValueError("%d placeholders for a batch of %d components" %
                     (len(placeholders), len(batch)))
  return dict(zip(placeholders, batch))
