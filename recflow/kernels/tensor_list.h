// TensorList: the value a DT_VARIANT scalar holds for TensorFlow's list ops
// (ops/list_ops.cc; TF2's while_v2 and Keras RNNs accumulate per-step
// tensors in them). A list has an element dtype, an element shape that may
// be partial (unknown rank or dims), an optional bound on its length, and
// its elements, each a Tensor or not yet set (TensorListReserve makes such
// slots; reading one gives zeros of the element shape, as in TensorFlow).
//
// Lists are values, like every Variant (core/variant.h): a kernel that
// changes one (PushBack, SetItem, PopBack) makes a new list sharing the
// element tensors' buffers, so a change costs one pointer copy per element
// and never a copy of element data.
//
// Thread-safety: immutable once wrapped in a Variant.
#ifndef RECFLOW_KERNELS_TENSOR_LIST_H_
#define RECFLOW_KERNELS_TENSOR_LIST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/core/variant.h"
#include "recflow/framework/partial_shape.h"

namespace recflow {

class TensorList : public VariantValue {
 public:
  DataType element_dtype = DT_INVALID;
  PartialShape element_shape;  // unknown rank by default
  int64_t max_num_elements = -1;  // -1: unbounded
  std::vector<Tensor> tensors;    // an uninitialized Tensor is an unset slot

  std::string TypeName() const override { return "tensorflow::TensorList"; }
  std::string DebugString() const override;

  // A scalar DT_VARIANT tensor holding `list`.
  static Tensor Wrap(TensorList list);
  // The list `t` holds. InvalidArgument naming `what` when `t` is not a
  // scalar variant holding a TensorList.
  static absl::StatusOr<const TensorList*> FromTensor(const Tensor& t, absl::string_view what);
};

}  // namespace recflow

#endif  // RECFLOW_KERNELS_TENSOR_LIST_H_
