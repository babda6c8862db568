#include "recflow/core/tensor_shape.h"

#include "absl/strings/str_join.h"
#include "recflow/core/status.h"

namespace recflow {

TensorShape::TensorShape(std::initializer_list<int64_t> dims)
    : dims_(dims.begin(), dims.end()) {
  Recompute();
}

TensorShape::TensorShape(absl::Span<const int64_t> dims)
    : dims_(dims.begin(), dims.end()) {
  Recompute();
}

absl::StatusOr<TensorShape> TensorShape::Build(absl::Span<const int64_t> dims) {
  int64_t n = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return errors::InvalidArgument("dimension ", i, " of shape [",
                                     absl::StrJoin(dims, ","),
                                     "] is negative");
    }
    if (dims[i] != 0 && n > INT64_MAX / dims[i]) {
      return errors::InvalidArgument("shape [", absl::StrJoin(dims, ","),
                                     "] has more elements than fit in int64");
    }
    n *= dims[i];
  }
  return TensorShape(dims);
}

void TensorShape::AddDim(int64_t size) {
  dims_.push_back(size);
  Recompute();
}

void TensorShape::InsertDim(int d, int64_t size) {
  dims_.insert(dims_.begin() + d, size);
  Recompute();
}

void TensorShape::RemoveDim(int d) {
  dims_.erase(dims_.begin() + d);
  Recompute();
}

void TensorShape::set_dim(int d, int64_t size) {
  dims_[d] = size;
  Recompute();
}

std::string TensorShape::DebugString() const {
  return absl::StrCat("[", absl::StrJoin(dims_, ","), "]");
}

void TensorShape::Recompute() {
  num_elements_ = 1;
  for (int64_t d : dims_) num_elements_ *= d;
}

}  // namespace recflow
