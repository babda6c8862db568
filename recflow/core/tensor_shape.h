// TensorShape: the fully known shape of a tensor (rank and every dimension).
// Shapes with unknown parts, as graph construction sees them, are
// framework's PartialShape. Dimensions are int64_t; the element count is
// checked against overflow when a shape is built from untrusted input
// (TensorShape::Build). A value type; not thread-safe to mutate concurrently.
#ifndef RECFLOW_CORE_TENSOR_SHAPE_H_
#define RECFLOW_CORE_TENSOR_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace recflow {

class TensorShape {
 public:
  using Dims = absl::InlinedVector<int64_t, 4>;

  TensorShape() = default;  // a scalar
  // REQUIRES: every dim >= 0. Use Build() for untrusted dims.
  TensorShape(std::initializer_list<int64_t> dims);
  explicit TensorShape(absl::Span<const int64_t> dims);

  // Validates dims (non-negative, element count fits in int64).
  static absl::StatusOr<TensorShape> Build(absl::Span<const int64_t> dims);

  int dims() const { return static_cast<int>(dims_.size()); }
  int64_t dim_size(int d) const { return dims_[d]; }
  absl::Span<const int64_t> dim_sizes() const { return dims_; }
  int64_t num_elements() const { return num_elements_; }

  void AddDim(int64_t size);
  void InsertDim(int d, int64_t size);
  void RemoveDim(int d);
  void set_dim(int d, int64_t size);

  bool IsScalar() const { return dims_.empty(); }
  bool IsVector() const { return dims_.size() == 1; }
  bool IsMatrix() const { return dims_.size() == 2; }

  // "[2,3]"; "[]" for a scalar.
  std::string DebugString() const;

  friend bool operator==(const TensorShape& a, const TensorShape& b) {
    return a.dims_ == b.dims_;
  }
  friend bool operator!=(const TensorShape& a, const TensorShape& b) {
    return !(a == b);
  }

 private:
  void Recompute();

  Dims dims_;
  int64_t num_elements_ = 1;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_TENSOR_SHAPE_H_
