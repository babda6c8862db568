// Shape-function helpers shared by the array op files (array_ops.cc,
// array_index_ops.cc). Private to ops/; not a public header.
#ifndef RECFLOW_OPS_ARRAY_OPS_UTIL_H_
#define RECFLOW_OPS_ARRAY_OPS_UTIL_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "recflow/framework/shape_inference.h"

namespace recflow::array_ops_util {

// The values of a constant integer tensor, or nullopt for another dtype.
inline std::optional<std::vector<int64_t>> IntValues(const Tensor& t) {
  std::vector<int64_t> v;
  v.reserve(t.NumElements());
  switch (t.dtype()) {
    case DT_INT32:
      for (int32_t x : t.flat<int32_t>()) v.push_back(x);
      break;
    case DT_INT64:
      for (int64_t x : t.flat<int64_t>()) v.push_back(x);
      break;
    case DT_INT16:
      for (int16_t x : t.flat<int16_t>()) v.push_back(x);
      break;
    case DT_INT8:
      for (int8_t x : t.flat<int8_t>()) v.push_back(x);
      break;
    case DT_UINT8:
      for (uint8_t x : t.flat<uint8_t>()) v.push_back(x);
      break;
    default:
      return std::nullopt;
  }
  return v;
}

// Constant integer input i, or nullopt when it is not a known constant.
inline std::optional<std::vector<int64_t>> ConstInts(const InferenceContext* c,
                                                     int i) {
  const Tensor* t = c->input_tensor(i);
  if (t == nullptr) return std::nullopt;
  return IntValues(*t);
}

// Constant scalar (or one-element) integer input i.
inline absl::StatusOr<std::optional<int64_t>> ConstScalar(
    const InferenceContext* c, int i, absl::string_view what) {
  auto v = ConstInts(c, i);
  if (!v) return std::optional<int64_t>();
  if (v->size() != 1) {
    return errors::InvalidArgument(what, " must be a scalar, but has ",
                                   v->size(), " values");
  }
  return std::optional<int64_t>((*v)[0]);
}

// `axis` in [-rank, rank) made non-negative.
inline absl::StatusOr<int64_t> CanonicalAxis(int64_t axis, int64_t rank,
                                             absl::string_view what) {
  if (axis < -rank || axis >= rank) {
    return errors::InvalidArgument(
        what, " ", axis, " is out of range for a tensor of rank ", rank,
        "; expected [", -rank, ", ", rank, ")");
  }
  return axis < 0 ? axis + rank : axis;
}

inline std::string VecString(absl::Span<const int64_t> v) {
  return absl::StrCat("[", absl::StrJoin(v, ","), "]");
}

}  // namespace recflow::array_ops_util

#endif  // RECFLOW_OPS_ARRAY_OPS_UTIL_H_
