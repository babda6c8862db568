"""Session and InteractiveSession: run a graph from Python, TF 1.x style.

A Session owns a recflow C++ Session (`_pywrap.Session`). Before each run,
nodes added to the graph since the last run are sent to it (Extend, as
TensorFlow does). `run` takes fetches as any nesting of lists, tuples, dicts,
namedtuples, Tensors, Operations, Variables, IndexedSlices and tensor or op
names, and returns the same structure of NumPy values (None for
Operations). Feeds are keyed by Tensors or names; values are converted to the
fed tensor's dtype as TensorFlow converts them (np.asarray with that dtype),
checked against its static shape, and copied once into recflow's buffer.
Results come back without a copy when recflow's buffer is theirs alone (see
recflow/python/py_tensor.h).

The GIL is released while the graph runs; a Session may be used from several
threads, and closing it while a run is in flight lets that run finish.
"""

import collections
import threading

import numpy as np

from recflow import _pywrap
from recflow.framework import dtypes
from recflow.framework import errors
from recflow.framework import ops
from recflow.framework import sparse_tensor


# --- Configuration (ConfigProto-like) ---------------------------------------

class _Message(object):
  """A tiny stand-in for a protobuf message: fields with defaults, kwargs init."""

  _FIELDS = {}

  def __init__(self, **kwargs):
    for field, default in self._FIELDS.items():
      setattr(self, field, default() if callable(default) else default)
    for key, value in kwargs.items():
      if key not in self._FIELDS:
        raise ValueError("Protocol message %s has no \"%s\" field." % (type(self).__name__,
                                                                       key))
      setattr(self, key, value)

  def __repr__(self):
    return "%s(%s)" % (type(self).__name__,
                       ", ".join("%s=%r" % (k, getattr(self, k)) for k in self._FIELDS))


class OptimizerOptions(_Message):
  L1 = 0
  L0 = -1
  DEFAULT = 0
  _FIELDS = {"opt_level": 0, "do_common_subexpression_elimination": True,
             "do_constant_folding": True, "do_function_inlining": True,
             "global_jit_level": 0}


class GraphOptions(_Message):
  _FIELDS = {"optimizer_options": OptimizerOptions, "build_cost_model": 0,
             "infer_shapes": False, "place_pruned_graph": False,
             "enable_bfloat16_sendrecv": False, "timeline_step": 0, "rewrite_options": None}


class GPUOptions(_Message):
  _FIELDS = {"per_process_gpu_memory_fraction": 0.0, "allow_growth": False,
             "allocator_type": "", "visible_device_list": ""}


class ConfigProto(_Message):
  """Session configuration. recflow uses the thread counts and the optimizer
  level (OptimizerOptions.L0 turns graph optimization off); device and GPU
  fields are accepted and ignored (recflow runs on CPU)."""
  _FIELDS = {"intra_op_parallelism_threads": 0, "inter_op_parallelism_threads": 0,
             "use_per_session_threads": False, "allow_soft_placement": False,
             "log_device_placement": False, "device_count": dict,
             "gpu_options": GPUOptions, "graph_options": GraphOptions,
             "operation_timeout_in_ms": 0, "isolate_session_state": False,
             "device_filters": list, "experimental": None}


class RunOptions(_Message):
  NO_TRACE = 0
  SOFTWARE_TRACE = 1
  HARDWARE_TRACE = 2
  FULL_TRACE = 3
  _FIELDS = {"trace_level": 0, "timeout_in_ms": 0, "inter_op_thread_pool": 0,
             "output_partition_graphs": False, "report_tensor_allocations_upon_oom": False}


NodeExecStats = collections.namedtuple(
    "NodeExecStats", ["node_name", "op", "all_start_micros", "op_end_rel_micros",
                      "thread_id", "thread_name"])


class RunMetadata(object):
  """What a traced run records: `step_stats` (one NodeExecStats per kernel) and
  `chrome_trace` (Chrome trace-event JSON, for Perfetto / chrome://tracing)."""

  def __init__(self):
    self.step_stats = []
    self.chrome_trace = ""
    self.partition_graphs = []

  def _fill(self, nodes, chrome_trace):
    self.step_stats = [NodeExecStats(n["node_name"], n["op"], n["start_micros"],
                                     n["end_micros"] - n["start_micros"], n["thread_id"],
                                     n["thread_name"]) for n in nodes]
    self.chrome_trace = chrome_trace


# --- Fetch structures ---------------------------------------------------------

class _FetchPlan(object):
  """Flattens a nested fetch structure into unique tensor names and targets."""

  def __init__(self, graph, fetches):
    self.graph = graph
    self.fetch_names = []
    self.fetch_tensors = []
    self._index = {}
    self.targets = []
    self.structure = self._build(fetches)

  def _tensor_index(self, tensor):
    name = tensor.name
    i = self._index.get(name)
    if i is None:
      i = len(self.fetch_names)
      self._index[name] = i
      self.fetch_names.append(name)
      self.fetch_tensors.append(tensor)
    return i

  def _build(self, fetch):
    if fetch is None:
      raise TypeError("Fetch argument None has invalid type %s" % type(fetch))
    if isinstance(fetch, ops.IndexedSlices):
      parts = (self._element(fetch.values), self._element(fetch.indices),
               None if fetch.dense_shape is None else self._element(fetch.dense_shape))
      return ("slices", parts)
    if isinstance(fetch, sparse_tensor.SparseTensor):
      parts = (self._element(fetch.indices), self._element(fetch.values),
               self._element(fetch.dense_shape))
      return ("sparse", parts)
    if isinstance(fetch, (list, tuple)):
      items = [self._build(f) for f in fetch]
      if isinstance(fetch, tuple) and hasattr(fetch, "_fields"):
        return ("namedtuple", type(fetch), items)
      return ("seq", type(fetch), items)
    if isinstance(fetch, collections.abc.Mapping):
      return ("dict", type(fetch), [(k, self._build(v)) for k, v in fetch.items()])
    return self._element(fetch)

  def _element(self, fetch):
    try:
      el = self.graph.as_graph_element(fetch, allow_tensor=True, allow_operation=True)
    except TypeError as e:
      raise TypeError("Fetch argument %r has invalid type %r, must be a string or Tensor. (%s)"
                      % (fetch, type(fetch), e))
    except (ValueError, KeyError) as e:
      raise ValueError("Fetch argument %r cannot be interpreted as a Tensor. (%s)" %
                       (fetch, e.args[0] if e.args else e))
    if isinstance(el, ops.Operation):
      if not self.graph.is_fetchable(el):
        raise ValueError("Operation %r has been marked as not fetchable." % el.name)
      self.targets.append(el.name)
      return ("op",)
    if not self.graph.is_fetchable(el):
      raise ValueError("Tensor %s may not be fetched." % el.name)
    if el.dtype.base_dtype == dtypes.resource:
      raise TypeError("Fetch argument %s is a resource handle (dtype resource), which cannot "
                      "leave the session; fetch the value it refers to instead (e.g. the "
                      "variable itself or its read_value())" % el.name)
    return ("t", self._tensor_index(el))

  def build(self, values, node=None):
    node = self.structure if node is None else node
    kind = node[0]
    if kind == "t":
      return values[node[1]]
    if kind == "op":
      return None
    if kind == "slices":
      v, i, s = node[1]
      return ops.IndexedSlicesValue(values[v[1]], values[i[1]],
                                    None if s is None else values[s[1]])
    if kind == "sparse":
      i, v, s = node[1]
      return sparse_tensor.SparseTensorValue(values[i[1]], values[v[1]], values[s[1]])
    if kind == "namedtuple":
      return node[1](*[self.build(values, n) for n in node[2]])
    if kind == "seq":
      items = [self.build(values, n) for n in node[2]]
      return items if node[1] is list else node[1](items)
    if kind == "dict":
      out = [(k, self.build(values, n)) for k, n in node[2]]
      try:
        return node[1](out)
      except TypeError:
        return dict(out)
    raise AssertionError(kind)


# --- Feeds ---------------------------------------------------------------------

_INT_RANGES = {d: (np.iinfo(d.as_numpy_dtype).min, np.iinfo(d.as_numpy_dtype).max)
               for d in (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8,
                         dtypes.uint16, dtypes.uint32, dtypes.uint64)}


def _feed_value(tensor, value, key):
  """The NumPy array fed for `tensor`, converted as TF 1.x converts feeds."""
  if isinstance(value, (ops.Tensor, ops.Operation)) or hasattr(value, "_as_graph_element"):
    raise TypeError("The value of a feed cannot be a tf.Tensor object. Acceptable feed values "
                    "include Python scalars, strings, lists, numpy ndarrays, or TensorHandles. "
                    "For reference, the tensor object was %s which was passed to the feed with "
                    "key %s." % (value, key))
  dtype = tensor.dtype.base_dtype
  if dtype == dtypes.resource:
    raise TypeError("Tensor %s is a resource handle; recflow cannot feed resource handles" %
                    tensor.name)
  if value is None:
    raise TypeError("The value fed for %s is None; feed a value of dtype %s" %
                    (tensor.name, dtype.name))
  if dtype == dtypes.string:
    arr = value if isinstance(value, np.ndarray) else np.asarray(
        value, dtype=object if not isinstance(value, (bytes, str)) else None)
    if arr.dtype.kind not in "SUO":
      raise TypeError("Tensor %s is a string tensor; cannot feed a value of dtype %s" %
                      (tensor.name, arr.dtype))
  else:
    if isinstance(value, np.ndarray) and value.dtype == object:
      raise TypeError("Cannot feed an array of Python objects (dtype object) for %s, a %s "
                      "tensor; give a numeric array" % (tensor.name, dtype.name))
    if isinstance(value, int) and not isinstance(value, bool) and dtype in _INT_RANGES:
      lo, hi = _INT_RANGES[dtype]
      if not lo <= value <= hi:
        raise TypeError("Type of feed value %d with type %s is not compatible with Tensor type "
                        "%s. Try explicitly setting the type of the feed tensor to a larger "
                        "type (e.g. int64)." % (value, type(value), dtype))
    if not dtype.is_numpy_compatible:
      raise TypeError("Cannot feed %s: dtype %s has no NumPy equivalent" % (tensor.name,
                                                                           dtype.name))
    arr = np.asarray(value, dtype=dtype.as_numpy_dtype)
  return arr


def _sparse_feeds(key, value):
  """(tensor, value) feeds for a SparseTensor key: its indices, values and (unless
  it is a constant, as sparse_placeholder makes for a known shape) dense_shape."""
  indices, vals, shape = sparse_tensor.sparse_value_parts(value, key)
  feeds = [(key.indices, indices), (key.values, vals)]
  if key.dense_shape.op.type != "Const":
    feeds.append((key.dense_shape, shape))
  else:
    fixed = key.dense_shape.op.get_attr("value")
    if list(np.asarray(fixed).reshape(-1)) != list(shape.reshape(-1)):
      raise ValueError("Cannot feed a SparseTensorValue of dense_shape %s for %s, whose "
                       "shape is fixed to %s" % (list(shape.reshape(-1)), key.values.name,
                                                 list(np.asarray(fixed).reshape(-1))))
  return feeds


class _FeedInfo(object):
  """What feeding one tensor needs, worked out once per session and tensor."""

  __slots__ = ("tensor", "name", "enum", "np_dtype", "dims", "shape_obj")

  def __init__(self, graph, key):
    try:
      tensor = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
    except Exception as e:  # pylint: disable=broad-except
      raise TypeError("Cannot interpret feed_dict key as Tensor: %s" %
                      (e.args[0] if e.args else e))
    if not isinstance(tensor, ops.Tensor):
      raise TypeError("Cannot interpret feed_dict key as Tensor: %r" % (key,))
    if not graph.is_feedable(tensor):
      raise ValueError("Tensor %s may not be fed." % tensor)
    dtype = tensor.dtype.base_dtype
    self.tensor = tensor
    self.name = tensor.name
    self.enum = dtype.as_datatype_enum
    self.np_dtype = (np.dtype(dtype.as_numpy_dtype)
                     if dtype.is_numpy_compatible and dtype != dtypes.string else None)
    self.shape_obj = None
    self.dims = None

  def convert(self, value, key):
    tensor = self.tensor
    if type(value) is np.ndarray and value.dtype is self.np_dtype:  # pylint: disable=unidiomatic-typecheck
      arr = value  # the common case: already an array of the right dtype
    elif (type(value) is np.ndarray and self.np_dtype is not None and  # pylint: disable=unidiomatic-typecheck
          value.dtype == self.np_dtype):
      arr = value
    else:
      arr = _feed_value(tensor, value, key)
    shape = tensor.get_shape()
    if shape is not self.shape_obj:  # first use, or refined by set_shape since
      self.shape_obj = shape
      self.dims = None if shape.ndims is None else tuple(d.value for d in shape.dims)
    dims = self.dims
    if dims is not None:
      got = arr.shape
      if len(got) != len(dims) or any(d is not None and d != g for d, g in zip(dims, got)):
        raise ValueError("Cannot feed value of shape %r for Tensor %r, which has shape %r" %
                         (got, tensor.name, str(shape)))
    return arr


# --- Session -------------------------------------------------------------------

class BaseSession(object):

  def __init__(self, target="", graph=None, config=None):
    if graph is None:
      graph = ops.get_default_graph()
    elif not isinstance(graph, ops.Graph):
      raise TypeError("graph must be a tf.Graph, but got %s" % type(graph))
    if config is not None and not isinstance(config, ConfigProto):
      raise TypeError("config must be a tf.ConfigProto, but got %s" % type(config))
    self._graph = graph
    self._config = config or ConfigProto()
    opt = self._config.graph_options.optimizer_options
    optimize = not (opt.opt_level == OptimizerOptions.L0 or
                    (not opt.do_constant_folding and not opt.do_common_subexpression_elimination))
    inter = int(self._config.inter_op_parallelism_threads)
    intra = int(self._config.intra_op_parallelism_threads)
    if inter < 0 or intra < 0:
      raise ValueError("thread counts must be >= 0 (0 means one per CPU)")
    # A training task's Server as target: runs through recflow's distributed
    # runtime (client/distributed.py); no in-process session then.
    self._distributed = None
    if target:
      from recflow.client import distributed  # pylint: disable=g-import-not-at-top
      self._distributed = distributed.runner_for(target, graph, self._config)
      self._c = None
    else:
      self._c = _pywrap.Session(inter, intra, optimize)
    self._target = target or ""
    self._closed = False
    self._nodes_sent = 0
    self._extend_lock = threading.Lock()
    self._default_session_ctx = None
    self._feed_cache = {}   # feed key -> _FeedInfo
    self._fetch_cache = {}  # Tensor -> its name, once checked fetchable

  @property
  def graph(self):
    return self._graph

  @property
  def graph_def(self):
    return self._graph.as_graph_def()

  @property
  def sess_str(self):
    return self._target

  def list_devices(self):
    return [_DeviceAttributes("/job:localhost/replica:0/task:0/device:CPU:0", "CPU", 0)]

  def close(self):
    if not self._closed:
      self._closed = True
      if self._distributed is not None:
        self._distributed.close()
      else:
        self._c.close()

  def __del__(self):
    try:
      self.close()
    except Exception:  # pylint: disable=broad-except
      pass

  def as_default(self):
    return ops.default_session(self)

  def _check_open(self):
    if self._closed:
      raise RuntimeError("Attempted to use a closed Session.")

  def _extend_graph(self):
    n = self._graph._c_graph.num_nodes()  # pylint: disable=protected-access
    if n > self._nodes_sent:
      with self._extend_lock:
        n = self._graph._c_graph.num_nodes()  # pylint: disable=protected-access
        if n > self._nodes_sent:
          self._c.extend(self._graph._c_graph, self._nodes_sent, n)  # pylint: disable=protected-access
          self._nodes_sent = n

  def _feed_info(self, key):
    try:
      info = self._feed_cache.get(key)
    except TypeError:  # an unhashable key
      return _FeedInfo(self._graph, key)
    if info is None:
      info = _FeedInfo(self._graph, key)
      self._feed_cache[key] = info
    return info

  def _feeds(self, feed_dict):
    names, values, types = [], [], []
    if not feed_dict:
      return names, values, types
    if not isinstance(feed_dict, collections.abc.Mapping):
      raise TypeError("feed_dict must be a dict, not %s" % type(feed_dict).__name__)
    for key, value in feed_dict.items():
      if isinstance(key, sparse_tensor.SparseTensor):
        for part_key, part_value in _sparse_feeds(key, value):
          info = self._feed_info(part_key)
          names.append(info.name)
          values.append(info.convert(part_value, part_key))
          types.append(info.enum)
        continue
      info = self._feed_info(key)
      names.append(info.name)
      values.append(info.convert(value, key))
      types.append(info.enum)
    return names, values, types

  def _run_c(self, feed_names, feed_values, feed_types, fetch_names, targets, trace=False):
    self._check_open()
    if self._distributed is not None:
      try:
        result = self._distributed.run(feed_names, feed_values, feed_types, fetch_names,
                                       targets)
      except errors.OpError as e:
        raise errors.attach_op(e, self._graph)
      return (result, [], "") if trace else result
    self._extend_graph()
    try:
      return self._c.run(feed_names, feed_values, feed_types, fetch_names, targets, trace)
    except errors.OpError as e:
      raise errors.attach_op(e, self._graph)
    except RuntimeError:
      if self._closed or (self._c is not None and self._c.closed):
        raise RuntimeError("Attempted to use a closed Session.")
      raise

  def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
    """Runs what `fetches` needs; returns their values in the same structure."""
    self._check_open()
    names, values, types = self._feeds(feed_dict)
    # Fast path: one Tensor (the common case in loops), checked once.
    if type(fetches) is ops.Tensor and options is None:  # pylint: disable=unidiomatic-typecheck
      fetch_name = self._fetch_cache.get(fetches)
      if fetch_name is None:
        plan = _FetchPlan(self._graph, fetches)  # raises for what cannot be fetched
        fetch_name = plan.fetch_names[0]
        self._fetch_cache[fetches] = fetch_name
      return self._run_c(names, values, types, [fetch_name], [])[0]
    plan = _FetchPlan(self._graph, fetches)
    trace = options is not None and getattr(options, "trace_level", 0) > 0
    if not plan.fetch_names and not plan.targets:
      return plan.build([])
    result = self._run_c(names, values, types, plan.fetch_names, plan.targets, trace)
    if trace:
      result, nodes, chrome = result
      if run_metadata is not None:
        run_metadata._fill(nodes, chrome)  # pylint: disable=protected-access
    return plan.build(result)

  def make_callable(self, fetches, feed_list=None, accept_options=False):
    """A function running `fetches` with positional feeds for `feed_list` (TF 1.x)."""
    plan = _FetchPlan(self._graph, fetches)
    if any(isinstance(f, sparse_tensor.SparseTensor) for f in (feed_list or [])):
      raise NotImplementedError("make_callable with a SparseTensor in feed_list is not "
                                "supported by recflow yet; feed its indices, values and "
                                "dense_shape tensors")
    infos = [_FeedInfo(self._graph, f) for f in (feed_list or [])]
    feed_names = [i.name for i in infos]
    feed_types = [i.enum for i in infos]
    fetch_names, targets = plan.fetch_names, plan.targets
    single = plan.structure[0] == "t"

    def call(*args, **kwargs):
      if len(args) != len(infos):
        raise TypeError("Expected %d feed values, got %d" % (len(infos), len(args)))
      values = [info.convert(v, info.tensor) for info, v in zip(infos, args)]
      options = kwargs.pop("options", None) if accept_options else None
      run_metadata = kwargs.pop("run_metadata", None) if accept_options else None
      if kwargs:
        raise TypeError("Unexpected keyword arguments: %s" % ", ".join(kwargs))
      trace = options is not None and getattr(options, "trace_level", 0) > 0
      result = self._run_c(feed_names, values, feed_types, fetch_names, targets, trace)
      if trace:
        result, nodes, chrome = result
        if run_metadata is not None:
          run_metadata._fill(nodes, chrome)  # pylint: disable=protected-access
      return result[0] if single else plan.build(result)

    return call

  def partial_run_setup(self, fetches, feeds=None):
    raise NotImplementedError("partial_run is not supported by recflow")

  def partial_run(self, handle, fetches, feed_dict=None):
    raise NotImplementedError("partial_run is not supported by recflow")


_DeviceAttributes = collections.namedtuple("_DeviceAttributes",
                                           ["name", "device_type", "memory_limit_bytes"])


class Session(BaseSession):
  """tf.Session: `with tf.Session() as sess:` makes it (and its graph) the default
  and closes it at the end."""

  def __init__(self, target="", graph=None, config=None):
    super(Session, self).__init__(target, graph, config)
    self._context_stack = []

  def __enter__(self):
    graph_ctx = self._graph.as_default()
    session_ctx = self.as_default()
    graph_ctx.__enter__()
    session_ctx.__enter__()
    self._context_stack.append((graph_ctx, session_ctx))
    return self

  def __exit__(self, exec_type, exec_value, exec_tb):
    graph_ctx, session_ctx = self._context_stack.pop()
    session_ctx.__exit__(exec_type, exec_value, exec_tb)
    graph_ctx.__exit__(exec_type, exec_value, exec_tb)
    self.close()
    return False

  @staticmethod
  def reset(target, containers=None, config=None):
    raise NotImplementedError("Session.reset: recflow has no distributed master to reset")


class InteractiveSession(BaseSession):
  """A Session that makes itself the default on creation (for shells and notebooks)."""

  _count_lock = threading.Lock()
  _active_session_count = 0

  def __init__(self, target="", graph=None, config=None):
    super(InteractiveSession, self).__init__(target, graph, config)
    with InteractiveSession._count_lock:
      InteractiveSession._active_session_count += 1
    self._explicitly_closed = False
    self._default_session = self.as_default()
    self._default_session.__enter__()
    self._default_graph = self._graph.as_default()
    self._default_graph.__enter__()

  def close(self):
    if self._closed:
      return
    self._explicitly_closed = True
    with InteractiveSession._count_lock:
      InteractiveSession._active_session_count -= 1
    try:
      self._default_graph.__exit__(None, None, None)
      self._default_session.__exit__(None, None, None)
    finally:
      super(InteractiveSession, self).close()
