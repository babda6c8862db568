// Partitioned ("sliced") tensors in TensorFlow bundles.
//
// TensorFlow's Saver writes a partitioned variable (tf.compat.v1
// partitioned variables with save_slice_info) as one entry under the full
// name whose `slices` list the parts' extents and carries no data, plus one
// entry per part under a binary key: EncodeTensorNameSlice(name, extents),
// built with TensorFlow's OrderedCode so the parts sort after their tensor
// and never collide with a tensor name (every such key starts with a NUL
// byte). BundleReader assembles the parts into the full tensor on Lookup.
#ifndef RECFLOW_CHECKPOINT_TENSOR_SLICE_H_
#define RECFLOW_CHECKPOINT_TENSOR_SLICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/tensor_slice_spec.h"
#include "recflow/proto/tensor_bundle.pb.h"

namespace recflow::checkpoint {

// One dimension of a slice (framework/tensor_slice_spec.h, which also
// parses SaveV2 / RestoreV2 shape_and_slices).
using SliceExtent = ::recflow::SliceExtent;
using ::recflow::ParseShapeAndSlice;
using ::recflow::ShapeAndSlice;
using TensorSlice = std::vector<SliceExtent>;  // one extent per dimension

// TensorFlow's OrderedCode encodings (tensorflow/core/lib/strings/
// ordered_code.h), appended to *dest: the pieces of a slice key.
namespace ordered_code {
// One length byte, then the value big-endian without leading zero bytes.
void WriteNumIncreasing(std::string* dest, uint64_t value);
// NUL as "\0\xff", 0xff as "\xff\0", then the separator "\0\1".
void WriteString(std::string* dest, absl::string_view s);
// A sign bit, size bits and a delimiter, then the value: 1 to 10 bytes,
// ordered as the numbers are.
void WriteSignedNumIncreasing(std::string* dest, int64_t value);
}  // namespace ordered_code

// The bundle key of the part of tensor `name` covering `slice`.
std::string EncodeTensorNameSlice(absl::string_view name, const TensorSlice& slice);

// Whether `key` is a slice key rather than a tensor name.
inline bool IsSliceKey(absl::string_view key) { return !key.empty() && key[0] == '\0'; }

// The slice a proto describes, checked against the full tensor's shape:
// one extent per dimension (none: the whole tensor), inside the shape.
// DataLoss naming `tensor` and `where` (the index file) otherwise.
absl::StatusOr<TensorSlice> SliceFromProto(const tensorflow::TensorSliceProto& proto,
                                           const TensorShape& full, absl::string_view tensor,
                                           absl::string_view where);

// "[start:length, ...]" with "-" for a whole dimension, as TensorFlow
// prints slices.
std::string SliceDebugString(const TensorSlice& slice);

// The shape of `slice` of a tensor of shape `full`.
TensorShape SliceShape(const TensorSlice& slice, const TensorShape& full);

// Copies `part` (of SliceShape(slice, full->shape())) into its place in
// *full; both of the same dtype (fixed-size or string).
void CopySliceInto(const Tensor& part, const TensorSlice& slice, Tensor* full);

// Whether `slice` covers all of a tensor of shape `full` (TensorFlow's
// BundleWriter IsFullSlice: "-" everywhere, or explicit extents that span
// every dimension).
bool IsFullSlice(const TensorSlice& slice, const TensorShape& full);

// The intersection of slices `a` and `b` of a tensor of shape `full`, as
// explicit extents; false when they do not overlap.
bool IntersectSlices(const TensorSlice& a, const TensorSlice& b, const TensorShape& full,
                     TensorSlice* out);

// Copies the elements of `region` (explicit extents, inside both slices)
// from `src`, which holds slice `src_slice` of a tensor of shape `full`,
// into `dst`, which holds `dst_slice` of it. Same dtype (fixed-size or
// string).
void CopySliceRegion(const Tensor& src, const TensorSlice& src_slice, const TensorSlice& region,
                     const TensorSlice& dst_slice, const TensorShape& full, Tensor* dst);

// The TensorSliceProto of `slice` as TensorFlow's TensorSlice::AsProto
// writes it: an extent per dimension, empty for a whole dimension.
void SliceToProto(const TensorSlice& slice, tensorflow::TensorSliceProto* proto);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_TENSOR_SLICE_H_
