#include "recflow/kernels/array_copy.h"

#include "absl/strings/str_join.h"

namespace recflow::array_kernels {

std::vector<DataType> CopyTypes() {
  return {DT_FLOAT,    DT_DOUBLE,    DT_INT32,      DT_INT64,
          DT_UINT8,    DT_INT8,      DT_INT16,      DT_UINT16,
          DT_UINT32,   DT_UINT64,    DT_BOOL,       DT_HALF,
          DT_BFLOAT16, DT_COMPLEX64, DT_COMPLEX128, DT_STRING};
}

std::vector<DataType> IndexTypes() { return {DT_INT32, DT_INT64}; }

absl::Status CheckCopyType(absl::string_view op, DataType dt) {
  if (DispatchCopyType(dt, []<typename U>() {})) return absl::OkStatus();
  return errors::InvalidArgument(op, " does not support dtype ",
                                 DataTypeString(dt));
}

absl::StatusOr<std::vector<int64_t>> IndexVector(const Tensor& t,
                                                 absl::string_view what) {
  if (t.dims() > 1) {
    return errors::InvalidArgument(what, " must be a vector, but has shape ",
                                   t.shape().DebugString());
  }
  std::vector<int64_t> v(t.NumElements());
  if (t.dtype() == DT_INT32) {
    std::copy_n(t.data<int32_t>(), v.size(), v.begin());
  } else if (t.dtype() == DT_INT64) {
    std::copy_n(t.data<int64_t>(), v.size(), v.begin());
  } else {
    return errors::InvalidArgument(what, " must be int32 or int64, not ",
                                   DataTypeString(t.dtype()));
  }
  return v;
}

absl::StatusOr<int64_t> IndexScalar(const Tensor& t, absl::string_view what) {
  if (t.NumElements() != 1 || t.dims() > 1) {
    return errors::InvalidArgument(what, " must be a scalar, but has shape ",
                                   t.shape().DebugString());
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> v, IndexVector(t, what));
  return v[0];
}

absl::StatusOr<int> CanonicalAxis(int64_t axis, int rank,
                                  absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return errors::InvalidArgument(
        what, " ", axis, " is out of range for a tensor of rank ", rank,
        "; expected [", -rank, ", ", rank, ")");
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::string VecString(absl::Span<const int64_t> v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

absl::InlinedVector<int64_t, 8> RowMajorStrides(
    absl::Span<const int64_t> dims) {
  absl::InlinedVector<int64_t, 8> strides(dims.size());
  int64_t s = 1;
  for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
    strides[i] = s;
    s *= dims[i];
  }
  return strides;
}

CopyPlan MakeCopyPlan(absl::Span<const int64_t> dims,
                      absl::Span<const int64_t> src_strides,
                      absl::Span<const int64_t> dst_strides) {
  CopyPlan plan;
  plan.num_elements = 1;
  for (int64_t d : dims) plan.num_elements *= d;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!plan.dims.empty()) {
      const size_t k = plan.dims.size() - 1;
      if (plan.src[k] == src_strides[i] * dims[i] &&
          plan.dst[k] == dst_strides[i] * dims[i]) {
        plan.dims[k] *= dims[i];
        plan.src[k] = src_strides[i];
        plan.dst[k] = dst_strides[i];
        continue;
      }
    }
    plan.dims.push_back(dims[i]);
    plan.src.push_back(src_strides[i]);
    plan.dst.push_back(dst_strides[i]);
  }
  if (plan.dims.empty()) {  // a single element
    plan.dims.push_back(1);
    plan.src.push_back(1);
    plan.dst.push_back(1);
  }
  return plan;
}

}  // namespace recflow::array_kernels
