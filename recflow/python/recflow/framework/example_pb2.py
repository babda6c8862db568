"""tf.train.Example and its parts as small Python message classes.

Example, Features, Feature, Int64List, FloatList and BytesList behave like
the protobuf classes TensorFlow users build examples with:

  ex = tf.train.Example(features=tf.train.Features(feature={
      "label": tf.train.Feature(float_list=tf.train.FloatList(value=[1.0])),
      "ids": tf.train.Feature(int64_list=tf.train.Int64List(value=[3, 7])),
  }))
  data = ex.SerializeToString()
  ex2 = tf.train.Example.FromString(data)
  ex2.features.feature["ids"].int64_list.value      # [3, 7]
  ex2.features.feature["ids"].WhichOneof("kind")    # "int64_list"

They hold plain Python values; SerializeToString / FromString go through the
protobuf bridge (proto_bridge.py: the C++ classes of recflow/proto/example.proto
do the wire format). Values are checked as protobuf checks them: Int64List
takes integers in int64 range, FloatList numbers (stored as float32, as
protobuf stores them: 0.1 reads back as 0.10000000149011612), BytesList bytes.
Reading an unset sub-message gives an empty one that is attached to its
parent when first modified, as in protobuf (ex.features.feature["x"]
.int64_list.value.append(1) works on an empty Example).
"""

import base64
import numbers

import numpy as np

from recflow.framework import proto_bridge

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


class _Repeated(list):
  """A repeated scalar field: a list that checks what goes in."""

  def __init__(self, check, values=()):
    super(_Repeated, self).__init__()
    self._check = check
    self.extend(values)

  def append(self, value):
    super(_Repeated, self).append(self._check(value))

  def extend(self, values):
    if isinstance(values, (str, bytes)):
      raise TypeError("a repeated field takes a sequence of values, got %r" % (values,))
    super(_Repeated, self).extend(self._check(v) for v in values)

  def insert(self, index, value):
    super(_Repeated, self).insert(index, self._check(value))

  def __setitem__(self, index, value):
    if isinstance(index, slice):
      super(_Repeated, self).__setitem__(index, [self._check(v) for v in value])
    else:
      super(_Repeated, self).__setitem__(index, self._check(value))

  def __iadd__(self, values):
    self.extend(values)
    return self


def _check_int64(v):
  if isinstance(v, (bool, np.bool_)) or not isinstance(v, (numbers.Integral, np.integer)):
    raise TypeError("%r has type %s, but expected one of: int" % (v, type(v).__name__))
  v = int(v)
  if not _INT64_MIN <= v <= _INT64_MAX:
    raise ValueError("Value out of range: %d" % v)
  return v


def _check_float(v):
  if not isinstance(v, (numbers.Real, np.floating, np.integer)) or isinstance(v, bool):
    raise TypeError("%r has type %s, but expected one of: int, float" % (v, type(v).__name__))
  with np.errstate(over="ignore"):  # beyond float32's range: +-inf, as protobuf stores it
    return float(np.float32(v))  # the field is float32


def _check_bytes(v):
  if isinstance(v, (bytes, bytearray, np.bytes_)):
    return bytes(v)
  raise TypeError("%r has type %s, but expected one of: bytes" % (v, type(v).__name__))


class _Message(object):
  """Protobuf-like basics over _to_dict / _from_dict; _TYPE is the proto name."""
  _TYPE = None
  _parent_hook = None  # called once when an unset sub-message is first modified

  def _modified(self):
    hook, self._parent_hook = self._parent_hook, None
    if hook is not None:
      hook(self)

  def SerializeToString(self, deterministic=None):  # pylint: disable=invalid-name,unused-argument
    return proto_bridge.encode(self._TYPE, self._to_dict())

  def ParseFromString(self, data):  # pylint: disable=invalid-name
    other = self.FromString(data)
    self.Clear()
    self.MergeFrom(other)
    return len(data)

  @classmethod
  def FromString(cls, data):  # pylint: disable=invalid-name
    return cls._from_dict(proto_bridge.decode(cls._TYPE, data))

  def CopyFrom(self, other):  # pylint: disable=invalid-name
    if other is self:
      return
    self.Clear()
    self.MergeFrom(other)

  def ByteSize(self):  # pylint: disable=invalid-name
    return len(self.SerializeToString())

  def __str__(self):
    return proto_bridge.to_text(self._TYPE, self.SerializeToString())

  def __repr__(self):
    return "%s(%s)" % (type(self).__name__, str(self).strip().replace("\n", " "))

  def __eq__(self, other):
    return type(self) is type(other) and self._to_dict() == other._to_dict()

  def __ne__(self, other):
    return not self.__eq__(other)

  __hash__ = None


class _ValueList(_Message):
  """Int64List / FloatList / BytesList: one repeated field `value`."""
  _CHECK = None

  def __init__(self, value=None):
    self._value = _Repeated(self._checked, value or ())

  def _checked(self, v):
    v = type(self)._CHECK(v)
    self._modified()
    return v

  @property
  def value(self):
    return self._value

  @value.setter
  def value(self, values):
    raise AttributeError("Assignment not allowed to repeated field \"value\" in protocol "
                         "message object (use value[:] = ... or value.extend(...))")

  def Clear(self):  # pylint: disable=invalid-name
    del self._value[:]

  def MergeFrom(self, other):  # pylint: disable=invalid-name
    self._value.extend(other.value)

  def _to_dict(self):
    return {"value": self._encode(list(self._value))} if self._value else {}

  @classmethod
  def _from_dict(cls, d):
    return cls(cls._decode(d.get("value", [])))


class Int64List(_ValueList):
  _TYPE = "tensorflow.Int64List"
  _CHECK = staticmethod(_check_int64)

  @staticmethod
  def _encode(values):
    return [str(v) for v in values]

  @staticmethod
  def _decode(values):
    return [int(v) for v in values]


def _json_float(v):
  if v != v:
    return "NaN"
  if v in (float("inf"), float("-inf")):
    return "Infinity" if v > 0 else "-Infinity"
  return v


class FloatList(_ValueList):
  _TYPE = "tensorflow.FloatList"
  _CHECK = staticmethod(_check_float)

  @staticmethod
  def _encode(values):
    return [_json_float(v) for v in values]

  @staticmethod
  def _decode(values):
    # The wire holds float32: give back the float32 value, as protobuf does.
    return [float(np.float32(float(v))) for v in values]


class BytesList(_ValueList):
  _TYPE = "tensorflow.BytesList"
  _CHECK = staticmethod(_check_bytes)

  @staticmethod
  def _encode(values):
    return [base64.b64encode(v).decode("ascii") for v in values]

  @staticmethod
  def _decode(values):
    return [base64.b64decode(v) for v in values]


_KINDS = (("bytes_list", BytesList), ("float_list", FloatList), ("int64_list", Int64List))


class Feature(_Message):
  """One of bytes_list, float_list, int64_list (the oneof `kind`)."""
  _TYPE = "tensorflow.Feature"

  def __init__(self, bytes_list=None, float_list=None, int64_list=None):
    self._kind = None
    self._list = None
    given = [(k, v) for k, v in (("bytes_list", bytes_list), ("float_list", float_list),
                                 ("int64_list", int64_list)) if v is not None]
    for kind, value in given:  # the last one set wins, as in protobuf's oneof
      self._set(kind, value)

  def _set(self, kind, value):
    cls = dict(_KINDS)[kind]
    if not isinstance(value, cls):
      raise TypeError("Feature.%s must be a %s, got %s" % (kind, cls.__name__,
                                                           type(value).__name__))
    copy = cls()
    copy.MergeFrom(value)
    self._kind, self._list = kind, copy
    self._modified()

  def _get(self, kind):
    if self._kind == kind:
      return self._list
    empty = dict(_KINDS)[kind]()

    def attach(child):
      self._kind, self._list = kind, child
      self._modified()
    empty._parent_hook = attach  # pylint: disable=protected-access
    return empty

  bytes_list = property(lambda self: self._get("bytes_list"),
                        lambda self, v: self._set("bytes_list", v))
  float_list = property(lambda self: self._get("float_list"),
                        lambda self, v: self._set("float_list", v))
  int64_list = property(lambda self: self._get("int64_list"),
                        lambda self, v: self._set("int64_list", v))

  def WhichOneof(self, group):  # pylint: disable=invalid-name
    if group != "kind":
      raise ValueError("Feature has no oneof %r" % group)
    return self._kind

  def HasField(self, field):  # pylint: disable=invalid-name
    if field == "kind":
      return self._kind is not None
    if field not in dict(_KINDS):
      raise ValueError("Feature has no field %r" % field)
    return self._kind == field

  def ClearField(self, field):  # pylint: disable=invalid-name
    if field in ("kind", self._kind):
      self._kind, self._list = None, None

  def Clear(self):  # pylint: disable=invalid-name
    self._kind, self._list = None, None

  def MergeFrom(self, other):  # pylint: disable=invalid-name
    if other._kind is None:  # pylint: disable=protected-access
      return
    if other._kind == self._kind:  # pylint: disable=protected-access
      self._list.MergeFrom(other._list)  # pylint: disable=protected-access
    else:
      self._set(other._kind, other._list)  # pylint: disable=protected-access

  def _to_dict(self):
    return {self._kind: self._list._to_dict()} if self._kind else {}  # pylint: disable=protected-access

  @classmethod
  def _from_dict(cls, d):
    f = cls()
    for kind, list_cls in _KINDS:
      if kind in d:
        f._kind, f._list = kind, list_cls._from_dict(d[kind])  # pylint: disable=protected-access
    return f


class _FeatureMap(dict):
  """Features.feature: name -> Feature; a missing name reads as a new Feature
  (added to the map), as protobuf's message maps do."""

  def __init__(self, owner, items=None):
    super(_FeatureMap, self).__init__()
    self._owner = owner
    for k, v in (items or {}).items():
      self[k] = v

  def __missing__(self, key):
    self[key] = Feature()
    return dict.__getitem__(self, key)

  def __setitem__(self, key, value):
    if not isinstance(key, str):
      raise TypeError("feature names are str, got %r" % (key,))
    if not isinstance(value, Feature):
      raise TypeError("Features.feature[%r] must be a Feature, got %s" %
                      (key, type(value).__name__))
    copy = Feature()
    copy.MergeFrom(value)
    super(_FeatureMap, self).__setitem__(key, copy)
    self._owner._modified()  # pylint: disable=protected-access

  def get_or_create(self, key):
    return self[key]


class Features(_Message):
  _TYPE = "tensorflow.Features"

  def __init__(self, feature=None):
    self._feature = _FeatureMap(self, feature)

  @property
  def feature(self):
    return self._feature

  def Clear(self):  # pylint: disable=invalid-name
    dict.clear(self._feature)

  def MergeFrom(self, other):  # pylint: disable=invalid-name
    for k, v in other.feature.items():
      self._feature[k] = v

  def _to_dict(self):
    return {"feature": {k: v._to_dict() for k, v in self._feature.items()}} if self._feature else {}  # pylint: disable=protected-access

  @classmethod
  def _from_dict(cls, d):
    return cls({k: Feature._from_dict(v) for k, v in d.get("feature", {}).items()})  # pylint: disable=protected-access


class Example(_Message):
  _TYPE = "tensorflow.Example"

  def __init__(self, features=None):
    self._features = None
    if features is not None:
      self.features = features

  @property
  def features(self):
    if self._features is not None:
      return self._features
    empty = Features()

    def attach(child):
      self._features = child
    empty._parent_hook = attach  # pylint: disable=protected-access
    return empty

  @features.setter
  def features(self, value):
    if not isinstance(value, Features):
      raise TypeError("Example.features must be a Features, got %s" % type(value).__name__)
    copy = Features()
    copy.MergeFrom(value)
    self._features = copy

  def HasField(self, field):  # pylint: disable=invalid-name
    if field != "features":
      raise ValueError("Example has no field %r" % field)
    return self._features is not None

  def Clear(self):  # pylint: disable=invalid-name
    self._features = None

  def MergeFrom(self, other):  # pylint: disable=invalid-name
    if other._features is not None:  # pylint: disable=protected-access
      if self._features is None:
        self._features = Features()
      self._features.MergeFrom(other._features)  # pylint: disable=protected-access

  def _to_dict(self):
    return {"features": self._features._to_dict()} if self._features is not None else {}  # pylint: disable=protected-access

  @classmethod
  def _from_dict(cls, d):
    ex = cls()
    if "features" in d:
      ex._features = Features._from_dict(d["features"])  # pylint: disable=protected-access
    return ex
