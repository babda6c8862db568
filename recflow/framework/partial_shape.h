// PartialShape: a shape as graph construction knows it. The rank may be
// unknown, and so may any dimension (kUnknownDim). Shape functions compute
// PartialShapes; a running kernel sees only full TensorShapes. Matches
// TensorShapeProto's meaning: unknown_rank, or dims whose size -1 is unknown.
// A value type.
#ifndef RECFLOW_FRAMEWORK_PARTIAL_SHAPE_H_
#define RECFLOW_FRAMEWORK_PARTIAL_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>


#include "absl/strings/string_view.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/tensor_shape.h"
#include "recflow/proto/tensor_shape.pb.h"

namespace recflow {

inline constexpr int64_t kUnknownDim = -1;

class PartialShape {
 public:
  // Unknown rank.
  PartialShape() = default;
  // Known rank; kUnknownDim marks unknown dimensions.
  PartialShape(std::initializer_list<int64_t> dims);
  explicit PartialShape(absl::Span<const int64_t> dims);
  PartialShape(const TensorShape& shape);  // NOLINT: a full shape is partial

  static PartialShape Unknown() { return PartialShape(); }
  // Known rank, every dimension unknown.
  static PartialShape UnknownDims(int rank);
  static absl::StatusOr<PartialShape> FromProto(const tensorflow::TensorShapeProto& proto);
  // Parses "[2,?,3]", "[]" (scalar) and "?" (unknown rank); -1 also means ?.
  static absl::StatusOr<PartialShape> Parse(absl::string_view text);

  void ToProto(tensorflow::TensorShapeProto* proto) const;

  bool unknown_rank() const { return unknown_rank_; }
  // -1 when the rank is unknown.
  int rank() const { return unknown_rank_ ? -1 : static_cast<int>(dims_.size()); }
  // REQUIRES: rank known, 0 <= d < rank(). kUnknownDim when unknown.
  int64_t dim(int d) const { return dims_[d]; }
  absl::Span<const int64_t> dims() const { return dims_; }
  bool IsFullyDefined() const;
  // -1 unless fully defined.
  int64_t num_elements() const;
  // REQUIRES: IsFullyDefined().
  TensorShape ToTensorShape() const { return TensorShape(absl::MakeConstSpan(dims_)); }

  // True if some full shape satisfies both.
  bool IsCompatibleWith(const PartialShape& other) const;
  // The most specific shape compatible with both, or InvalidArgument.
  absl::StatusOr<PartialShape> Merge(const PartialShape& other) const;

  // "[2,?]"; "?" for unknown rank.
  std::string DebugString() const;

  friend bool operator==(const PartialShape& a, const PartialShape& b) {
    return a.unknown_rank_ == b.unknown_rank_ && a.dims_ == b.dims_;
  }
  friend bool operator!=(const PartialShape& a, const PartialShape& b) {
    return !(a == b);
  }

 private:
  bool unknown_rank_ = true;
  absl::InlinedVector<int64_t, 4> dims_;
};

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_PARTIAL_SHAPE_H_
