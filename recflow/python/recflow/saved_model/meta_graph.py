"""The SavedModel protos as small Python classes: TensorInfo, SignatureDef,
MetaGraphDef, SavedModel (field names as in TensorFlow's protos, read and
written through the protobuf bridge, framework/proto_bridge.py)."""

from recflow.framework import graph_io
from recflow.framework import proto_bridge
from recflow.framework import tensor_shape


class _Message(object):
  """Protobuf-like basics over _to_dict / _from_dict."""
  _TYPE = None

  def SerializeToString(self):  # pylint: disable=invalid-name
    return proto_bridge.encode(self._TYPE, self._to_dict())

  def ParseFromString(self, data):  # pylint: disable=invalid-name
    other = self.FromString(data)
    self.__dict__.update(other.__dict__)
    return len(data)

  @classmethod
  def FromString(cls, data):  # pylint: disable=invalid-name
    return cls._from_dict(proto_bridge.decode(cls._TYPE, data, enums_as_ints=True))

  def __str__(self):
    return proto_bridge.to_text(self._TYPE, self.SerializeToString())

  def __eq__(self, other):
    return type(self) is type(other) and self._to_dict() == other._to_dict()

  def __ne__(self, other):
    return not self.__eq__(other)

  __hash__ = None


class Dim(object):
  def __init__(self, size=0, name=""):
    self.size = size
    self.name = name


class TensorShapeProto(_Message):
  _TYPE = "tensorflow.TensorShapeProto"

  def __init__(self, dim=None, unknown_rank=False):
    self.dim = list(dim or [])
    self.unknown_rank = unknown_rank

  @classmethod
  def from_shape(cls, shape):
    shape = tensor_shape.TensorShape(shape)
    if shape.dims is None:
      return cls(unknown_rank=True)
    return cls([Dim(-1 if d is None else d) for d in shape.as_list()])

  def as_shape(self):
    if self.unknown_rank:
      return tensor_shape.TensorShape(None)
    return tensor_shape.TensorShape([None if d.size < 0 else d.size for d in self.dim])

  def _to_dict(self):
    d = {}
    if self.dim:
      d["dim"] = [dict({"size": int(x.size)}, **({"name": x.name} if x.name else {}))
                  for x in self.dim]
    if self.unknown_rank:
      d["unknown_rank"] = True
    return d

  @classmethod
  def _from_dict(cls, d):
    return cls([Dim(int(x.get("size", 0)), x.get("name", "")) for x in d.get("dim", [])],
               bool(d.get("unknown_rank", False)))


class CooSparse(object):
  def __init__(self, values_tensor_name="", indices_tensor_name="",
               dense_shape_tensor_name=""):
    self.values_tensor_name = values_tensor_name
    self.indices_tensor_name = indices_tensor_name
    self.dense_shape_tensor_name = dense_shape_tensor_name


class TensorInfo(_Message):
  """A signature's tensor: `name` (dense) or `coo_sparse`, `dtype` (the
  DataType number) and `tensor_shape`."""
  _TYPE = "tensorflow.TensorInfo"

  def __init__(self, name="", dtype=0, tensor_shape=None, coo_sparse=None):  # pylint: disable=redefined-outer-name
    self.name = name
    self.dtype = dtype
    self.tensor_shape = tensor_shape if tensor_shape is not None else TensorShapeProto()
    self.coo_sparse = coo_sparse

  def HasField(self, field):  # pylint: disable=invalid-name
    if field == "coo_sparse":
      return self.coo_sparse is not None
    if field == "name":
      return self.coo_sparse is None and bool(self.name)
    if field == "tensor_shape":
      return bool(self.tensor_shape.dim) or self.tensor_shape.unknown_rank
    raise ValueError("TensorInfo has no field %r" % field)

  def WhichOneof(self, group):  # pylint: disable=invalid-name
    if group != "encoding":
      raise ValueError("TensorInfo has no oneof %r" % group)
    if self.coo_sparse is not None:
      return "coo_sparse"
    return "name" if self.name else None

  def _to_dict(self):
    d = {}
    if self.coo_sparse is not None:
      d["coo_sparse"] = {k: v for k, v in vars(self.coo_sparse).items() if v}
    elif self.name:
      d["name"] = self.name
    if self.dtype:
      d["dtype"] = int(self.dtype)
    d["tensor_shape"] = self.tensor_shape._to_dict()  # pylint: disable=protected-access
    return d

  @classmethod
  def _from_dict(cls, d):
    coo = d.get("coo_sparse")
    return cls(name=d.get("name", ""), dtype=int(d.get("dtype", 0)),
               tensor_shape=TensorShapeProto._from_dict(d.get("tensor_shape", {})),  # pylint: disable=protected-access
               coo_sparse=CooSparse(**coo) if coo is not None else None)

  def __repr__(self):
    return "TensorInfo(name=%r, dtype=%d, shape=%s)" % (self.name, self.dtype,
                                                         self.tensor_shape.as_shape())


class SignatureDef(_Message):
  _TYPE = "tensorflow.SignatureDef"

  def __init__(self, inputs=None, outputs=None, method_name=""):
    self.inputs = dict(inputs or {})
    self.outputs = dict(outputs or {})
    self.method_name = method_name

  def _to_dict(self):
    d = {}
    if self.inputs:
      d["inputs"] = {k: v._to_dict() for k, v in self.inputs.items()}  # pylint: disable=protected-access
    if self.outputs:
      d["outputs"] = {k: v._to_dict() for k, v in self.outputs.items()}  # pylint: disable=protected-access
    if self.method_name:
      d["method_name"] = self.method_name
    return d

  @classmethod
  def _from_dict(cls, d):
    return cls({k: TensorInfo._from_dict(v) for k, v in d.get("inputs", {}).items()},  # pylint: disable=protected-access
               {k: TensorInfo._from_dict(v) for k, v in d.get("outputs", {}).items()},  # pylint: disable=protected-access
               d.get("method_name", ""))

  def __repr__(self):
    return "SignatureDef(inputs=%r, outputs=%r, method_name=%r)" % (
        self.inputs, self.outputs, self.method_name)


class MetaInfoDef(object):
  def __init__(self, tags=None, tensorflow_version="", tensorflow_git_version="",
               meta_graph_version="", extra=None):
    self.tags = list(tags or [])
    self.tensorflow_version = tensorflow_version
    self.tensorflow_git_version = tensorflow_git_version
    self.meta_graph_version = meta_graph_version
    self._extra = dict(extra or {})  # fields kept as read (stripped_op_list, ...)


class MetaGraphDef(_Message):
  """A MetaGraphDef: meta_info_def, graph_def (a recflow GraphDef),
  saver_def, collection_def (plain dicts in protobuf JSON form),
  signature_def (name -> SignatureDef), asset_file_def (dicts)."""
  _TYPE = "tensorflow.MetaGraphDef"

  def __init__(self, meta_info_def=None, graph_def=None, saver_def=None, collection_def=None,
               signature_def=None, asset_file_def=None):
    self.meta_info_def = meta_info_def or MetaInfoDef()
    self.graph_def = graph_def if graph_def is not None else graph_io.GraphDef()
    self.saver_def = saver_def
    self.collection_def = dict(collection_def or {})
    self.signature_def = dict(signature_def or {})
    self.asset_file_def = list(asset_file_def or [])

  def HasField(self, field):  # pylint: disable=invalid-name
    if field == "saver_def":
      return self.saver_def is not None
    if field in ("meta_info_def", "graph_def"):
      return True
    raise ValueError("MetaGraphDef has no singular field %r" % field)

  def _to_dict(self):
    from recflow.training import saver as saver_lib  # pylint: disable=g-import-not-at-top
    info = dict(self.meta_info_def._extra)  # pylint: disable=protected-access
    for k in ("tensorflow_version", "tensorflow_git_version", "meta_graph_version"):
      if getattr(self.meta_info_def, k):
        info[k] = getattr(self.meta_info_def, k)
    if self.meta_info_def.tags:
      info["tags"] = list(self.meta_info_def.tags)
    d = {"meta_info_def": info,
         "graph_def": proto_bridge.decode("tensorflow.GraphDef",
                                          self.graph_def.SerializeToString())}
    if self.saver_def is not None:
      assert isinstance(self.saver_def, saver_lib.SaverDef)
      d["saver_def"] = self.saver_def._as_dict()  # pylint: disable=protected-access
    if self.collection_def:
      d["collection_def"] = self.collection_def
    if self.signature_def:
      d["signature_def"] = {k: v._to_dict() for k, v in self.signature_def.items()}  # pylint: disable=protected-access
    if self.asset_file_def:
      d["asset_file_def"] = self.asset_file_def
    return d

  @classmethod
  def _from_dict(cls, d):
    from recflow.training import saver as saver_lib  # pylint: disable=g-import-not-at-top
    info = dict(d.get("meta_info_def", {}))
    meta_info = MetaInfoDef(info.pop("tags", []), info.pop("tensorflow_version", ""),
                            info.pop("tensorflow_git_version", ""),
                            info.pop("meta_graph_version", ""), extra=info)
    graph_def = graph_io.GraphDef(proto_bridge.encode("tensorflow.GraphDef",
                                                      d.get("graph_def", {})))
    saver_def = None
    if "saver_def" in d:
      saver_def = saver_lib.SaverDef._from_dict(d["saver_def"])  # pylint: disable=protected-access
    return cls(meta_info, graph_def, saver_def, d.get("collection_def", {}),
               {k: SignatureDef._from_dict(v) for k, v in d.get("signature_def", {}).items()},  # pylint: disable=protected-access
               d.get("asset_file_def", []))


class SavedModel(_Message):
  _TYPE = "tensorflow.SavedModel"

  def __init__(self, saved_model_schema_version=1, meta_graphs=None):
    self.saved_model_schema_version = saved_model_schema_version
    self.meta_graphs = list(meta_graphs or [])

  def _to_dict(self):
    return {"saved_model_schema_version": int(self.saved_model_schema_version),
            "meta_graphs": [m._to_dict() for m in self.meta_graphs]}  # pylint: disable=protected-access

  @classmethod
  def _from_dict(cls, d):
    return cls(int(d.get("saved_model_schema_version", 0)),
               [MetaGraphDef._from_dict(m) for m in d.get("meta_graphs", [])])  # pylint: disable=protected-access
