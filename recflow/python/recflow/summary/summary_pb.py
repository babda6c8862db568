"""TensorBoard's protos as small Python classes, without Python protobuf:
Event, Summary (Summary.Value), HistogramProto, SummaryMetadata, SessionLog,
TaggedRunMetadata and TensorProto, with TensorFlow's field names. They are
built with keyword arguments, as protobuf's classes are
(`Summary(value=[Summary.Value(tag="loss", simple_value=0.5)])`), and cross
the wire through recflow's proto bridge (framework/proto_bridge.py):
`SerializeToString()`, `FromString(data)`, `ParseFromString(data)`.

A field's kind says how it maps to protobuf's JSON form: plain scalars,
int64 (a string in JSON), bytes (base64 in JSON), enums (ints), messages,
repeated scalars and repeated messages. Unset message fields are None;
HasField works for those and for oneof members."""

import base64

import numpy as np

from recflow import _pywrap
from recflow.framework import proto_bridge

_SCALAR, _INT64, _BYTES, _MSG, _REP, _REP_MSG = range(6)


def _as_bytes(data):
  """bytes of `data`: bytes, or a string scalar fetched by Session.run."""
  if isinstance(data, np.ndarray):
    if data.shape != () or data.dtype.kind not in "OS":
      raise TypeError("a serialized message is bytes or a string scalar, got an array of "
                      "shape %s and dtype %s" % (data.shape, data.dtype))
    data = data.item()
  if not isinstance(data, (bytes, bytearray, memoryview)):
    raise TypeError("a serialized message is bytes, got %s" % type(data).__name__)
  return bytes(data)


class _Message(object):
  """Protobuf-like message over a table of fields: name -> (kind, default or
  message class)."""
  _TYPE = None
  _FIELDS = {}

  def __init__(self, **kwargs):
    for name, (kind, arg) in self._FIELDS.items():
      if kind in (_REP, _REP_MSG):
        value = list(kwargs.pop(name, None) or [])
      elif kind == _MSG:
        value = kwargs.pop(name, None)
      else:
        value = kwargs.pop(name, arg)
      object.__setattr__(self, name, value)
    if kwargs:
      raise ValueError("Protocol message %s has no field %s." %
                       (self._TYPE.split(".")[-1], sorted(kwargs)[0]))

  def __setattr__(self, name, value):
    if name not in self._FIELDS:
      raise AttributeError("Assignment not allowed (no field \"%s\" in protocol message "
                           "object)." % name)
    object.__setattr__(self, name, value)

  def HasField(self, name):  # pylint: disable=invalid-name
    kind, default = self._FIELDS[name]
    value = getattr(self, name)
    if kind == _MSG:
      return value is not None
    return value != default

  def ClearField(self, name):  # pylint: disable=invalid-name
    kind, arg = self._FIELDS[name]
    object.__setattr__(self, name, [] if kind in (_REP, _REP_MSG) else
                       (None if kind == _MSG else arg))

  def to_dict(self):
    out = {}
    for name, (kind, arg) in self._FIELDS.items():
      value = getattr(self, name)
      if kind == _MSG:
        if value is not None:
          out[name] = value.to_dict()
      elif kind == _REP_MSG:
        if value:
          out[name] = [v.to_dict() for v in value]
      elif kind == _REP:
        if len(value):
          out[name] = [float(v) for v in value]
      elif value != arg:
        if kind == _INT64:
          out[name] = str(int(value))
        elif kind == _BYTES:
          if isinstance(value, str):
            value = value.encode()
          out[name] = base64.b64encode(bytes(value)).decode("ascii")
        else:
          out[name] = value
    return out

  @classmethod
  def from_dict(cls, d):
    kwargs = {}
    for name, value in d.items():
      if name not in cls._FIELDS:
        continue  # a field recflow's Python classes do not model
      kind, arg = cls._FIELDS[name]
      if kind == _MSG:
        value = arg.from_dict(value)
      elif kind == _REP_MSG:
        value = [arg.from_dict(v) for v in value]
      elif kind == _REP:
        value = [float(v) for v in value]
      elif kind == _INT64:
        value = int(value)
      elif kind == _BYTES:
        value = base64.b64decode(value)
      elif isinstance(arg, float):
        value = float(value)  # JSON writes "NaN", "Infinity" as strings
      kwargs[name] = value
    return cls(**kwargs)

  def SerializeToString(self):  # pylint: disable=invalid-name
    return proto_bridge.encode(self._TYPE, self.to_dict())

  @classmethod
  def FromString(cls, data):  # pylint: disable=invalid-name
    return cls.from_dict(proto_bridge.decode(cls._TYPE, _as_bytes(data), enums_as_ints=True))

  def ParseFromString(self, data):  # pylint: disable=invalid-name
    other = self.FromString(data)
    for name in self._FIELDS:
      object.__setattr__(self, name, getattr(other, name))
    return len(data)

  def __eq__(self, other):
    return type(self) is type(other) and self.to_dict() == other.to_dict()

  def __ne__(self, other):
    return not self.__eq__(other)

  __hash__ = None

  def __str__(self):
    return proto_bridge.to_text(self._TYPE, self.SerializeToString())

  def __repr__(self):
    return "%s(%s)" % (type(self).__name__, self.to_dict())


class TensorProto(_Message):
  """A tensorflow.TensorProto; `make_ndarray` / `make_tensor_proto` convert it
  (recflow's C++ conversion, framework/tensor_util.h)."""
  _TYPE = "tensorflow.TensorProto"

  def __init__(self, **kwargs):  # pylint: disable=super-init-not-called
    object.__setattr__(self, "_fields", dict(kwargs))

  def __getattr__(self, name):
    try:
      return self.__dict__["_fields"][name]
    except KeyError:
      raise AttributeError(name)

  def __setattr__(self, name, value):
    self._fields[name] = value

  def HasField(self, name):  # pylint: disable=invalid-name
    return name in self._fields

  def to_dict(self):
    return dict(self._fields)

  @classmethod
  def from_dict(cls, d):
    return cls(**d)


def make_tensor_proto(values, dtype=None, shape=None):
  """tf.make_tensor_proto: a TensorProto holding `values` (cast to `dtype` and
  reshaped to `shape` when given)."""
  from recflow.framework import dtypes  # pylint: disable=g-import-not-at-top
  if dtype is not None:
    dtype = dtypes.as_dtype(dtype)
    values = np.asarray(values, dtype=None if dtype == dtypes.string else dtype.as_numpy_dtype)
  else:
    values = np.asarray(values)
  if shape is not None:
    values = np.broadcast_to(values, shape) if values.size == 1 else values.reshape(shape)
  return TensorProto.FromString(_pywrap.tensor_proto_from_numpy(values, 0))


def make_ndarray(tensor):
  """tf.make_ndarray: the ndarray a TensorProto (or its serialized bytes) holds."""
  data = tensor if isinstance(tensor, bytes) else tensor.SerializeToString()
  return _pywrap.tensor_proto_to_numpy(data)


class HistogramProto(_Message):
  _TYPE = "tensorflow.HistogramProto"
  _FIELDS = {"min": (_SCALAR, 0.0), "max": (_SCALAR, 0.0), "num": (_SCALAR, 0.0),
             "sum": (_SCALAR, 0.0), "sum_squares": (_SCALAR, 0.0),
             "bucket_limit": (_REP, None), "bucket": (_REP, None)}


class SummaryMetadata(_Message):
  """Which TensorBoard plugin reads a value (tensor summaries)."""
  _TYPE = "tensorflow.SummaryMetadata"

  class PluginData(_Message):
    _TYPE = "tensorflow.SummaryMetadata.PluginData"
    _FIELDS = {"plugin_name": (_SCALAR, ""), "content": (_BYTES, b"")}

  _FIELDS = {"plugin_data": (_MSG, PluginData), "display_name": (_SCALAR, ""),
             "summary_description": (_SCALAR, ""), "data_class": (_SCALAR, 0)}


class Summary(_Message):
  """A set of summary values (what the summary ops output, serialized)."""
  _TYPE = "tensorflow.Summary"

  class Value(_Message):
    _TYPE = "tensorflow.Summary.Value"
    _FIELDS = {"node_name": (_SCALAR, ""), "tag": (_SCALAR, ""),
               "metadata": (_MSG, SummaryMetadata), "simple_value": (_SCALAR, 0.0),
               "histo": (_MSG, HistogramProto), "tensor": (_MSG, TensorProto)}

  _FIELDS = {"value": (_REP_MSG, Value)}


class SessionLog(_Message):
  """The session's state in an event file (START, STOP, CHECKPOINT)."""
  _TYPE = "tensorflow.SessionLog"
  STATUS_UNSPECIFIED = 0
  START = 1
  STOP = 2
  CHECKPOINT = 3
  _FIELDS = {"status": (_SCALAR, 0), "checkpoint_path": (_SCALAR, ""), "msg": (_SCALAR, "")}


class TaggedRunMetadata(_Message):
  _TYPE = "tensorflow.TaggedRunMetadata"
  _FIELDS = {"tag": (_SCALAR, ""), "run_metadata": (_BYTES, b"")}


class Event(_Message):
  """One record of an event file."""
  _TYPE = "tensorflow.Event"
  _FIELDS = {"wall_time": (_SCALAR, 0.0), "step": (_INT64, 0), "file_version": (_SCALAR, ""),
             "graph_def": (_BYTES, b""), "summary": (_MSG, Summary),
             "session_log": (_MSG, SessionLog),
             "tagged_run_metadata": (_MSG, TaggedRunMetadata),
             "meta_graph_def": (_BYTES, b"")}
