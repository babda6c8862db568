// Slices of tensors as SaveV2 / RestoreV2 name them in `shape_and_slices`
// (TensorFlow's checkpoint::ParseShapeAndSlice and TensorSlice::Parse):
//
//   "10 4 0,5:-"   rows [0, 5) of a [10,4] tensor
//
// the full shape's dims separated by spaces, then the slice: per dimension
// "start,length" or "-" (the whole dimension), separated by ':'. Shared by
// RestoreV2's shape function (ops/) and the checkpoint kernels and bundle
// code (checkpoint/tensor_slice.h works on the parsed form).
//
// Thread-safe: free functions.
#ifndef RECFLOW_FRAMEWORK_TENSOR_SLICE_SPEC_H_
#define RECFLOW_FRAMEWORK_TENSOR_SLICE_SPEC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/tensor_shape.h"

namespace recflow {

// One dimension of a slice: [start, start + length); length -1 is the whole
// dimension (start 0), TensorFlow's kFullExtent.
struct SliceExtent {
  int64_t start = 0;
  int64_t length = -1;
  bool operator==(const SliceExtent& o) const { return start == o.start && length == o.length; }
};

struct ShapeAndSlice {
  TensorShape full_shape;
  std::vector<SliceExtent> slice;  // one extent per dimension of full_shape
  TensorShape slice_shape;         // the shape of that slice
};

// Parses one shape_and_slices element. Lengths are positive ("0,-1" reads
// as "-"), starts non-negative, dims non-negative, the slice has the
// shape's rank and lies inside it. InvalidArgument stating the problem and
// quoting `spec` otherwise (callers name the tensor). An empty spec (the
// whole tensor) is not parsed: it is InvalidArgument too.
absl::StatusOr<ShapeAndSlice> ParseShapeAndSlice(absl::string_view spec);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_TENSOR_SLICE_SPEC_H_
