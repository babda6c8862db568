// Conversion between Tensor and TensorProto (TensorFlow's wire form), with
// validation: a proto from a file or a request is untrusted input, so every
// size is checked and errors say what was wrong.
#ifndef RECFLOW_FRAMEWORK_TENSOR_UTIL_H_
#define RECFLOW_FRAMEWORK_TENSOR_UTIL_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/tensor.pb.h"

namespace recflow {

// Decodes either encoding TensorFlow writes: `tensor_content` (little-endian
// bytes) or the typed repeated `*_val` fields, where a list shorter than the
// shape repeats its last value (an empty list means zeros).
absl::StatusOr<Tensor> TensorFromProto(const tensorflow::TensorProto& proto);

// Writes tensor_content for fixed-size types (compact) and string_val for
// strings.
void TensorToProto(const Tensor& tensor, tensorflow::TensorProto* proto);

// Rows [begin, end) of `t` along dim 0, copied (Tensor::Slice shares the
// buffer; a copy lets the rest go). REQUIRES: t.dims() >= 1,
// 0 <= begin <= end <= t.dim_size(0).
Tensor SliceRows(const Tensor& t, int64_t begin, int64_t end);
// `parts` stacked along dim 0 (a variable saved or served in row ranges).
// InvalidArgument naming `what` when the parts' dtypes, ranks or other
// dims differ, or there are none.
absl::StatusOr<Tensor> ConcatRows(const std::vector<Tensor>& parts, const std::string& what);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_TENSOR_UTIL_H_
