"""tf.saved_model.utils: TensorInfo from tensors and back."""

from recflow.framework import ops
from recflow.framework import sparse_tensor
from recflow.saved_model import meta_graph


def build_tensor_info(tensor):
  """The TensorInfo of a Tensor (name) or SparseTensor (coo_sparse)."""
  if isinstance(tensor, sparse_tensor.SparseTensor):
    return meta_graph.TensorInfo(
        dtype=tensor.dtype.as_datatype_enum,
        tensor_shape=meta_graph.TensorShapeProto.from_shape(tensor.get_shape()),
        coo_sparse=meta_graph.CooSparse(tensor.values.name, tensor.indices.name,
                                        tensor.dense_shape.name))
  if not isinstance(tensor, ops.Tensor):
    raise TypeError("build_tensor_info needs a Tensor or SparseTensor, got %s" %
                    type(tensor).__name__)
  return meta_graph.TensorInfo(
      name=tensor.name, dtype=tensor.dtype.as_datatype_enum,
      tensor_shape=meta_graph.TensorShapeProto.from_shape(tensor.get_shape()))


def _scoped(name, import_scope):
  return import_scope + "/" + name if import_scope else name


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
  """The Tensor or SparseTensor a TensorInfo names, in `graph` (default: the
  default graph). Raises KeyError if a name is not in the graph."""
  graph = graph or ops.get_default_graph()
  encoding = tensor_info.WhichOneof("encoding")
  if encoding == "name":
    return graph.get_tensor_by_name(_scoped(tensor_info.name, import_scope))
  if encoding == "coo_sparse":
    coo = tensor_info.coo_sparse
    return sparse_tensor.SparseTensor(
        graph.get_tensor_by_name(_scoped(coo.indices_tensor_name, import_scope)),
        graph.get_tensor_by_name(_scoped(coo.values_tensor_name, import_scope)),
        graph.get_tensor_by_name(_scoped(coo.dense_shape_tensor_name, import_scope)))
  raise ValueError("Invalid TensorInfo.encoding: %s" % encoding)
