// Conversion between Tensor and TensorProto (TensorFlow's wire form), with
// validation: a proto from a file or a request is untrusted input, so every
// size is checked and errors say what was wrong.
#ifndef RECFLOW_FRAMEWORK_TENSOR_UTIL_H_
#define RECFLOW_FRAMEWORK_TENSOR_UTIL_H_

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

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_TENSOR_UTIL_H_
