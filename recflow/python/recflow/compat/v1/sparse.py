"""tf.sparse (TF 1.x names)."""

# pylint: disable=unused-import,redefined-builtin
from recflow.framework.sparse_tensor import SparseTensor, SparseTensorValue
from recflow.ops.sparse_ops import (fill_empty_rows, placeholder, reduce_sum, reorder, retain,
                                    sparse_dense_matmul, to_dense)
