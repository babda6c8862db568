#include "recflow/framework/tensor_slice_spec.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "recflow/core/status.h"

namespace recflow {

absl::StatusOr<ShapeAndSlice> ParseShapeAndSlice(absl::string_view spec) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ' ');
  if (parts.size() < 2) {
    return errors::InvalidArgument("shape_and_slice \"", spec, "\" needs the full shape and "
                                   "a slice (at least two space-separated elements)");
  }
  ShapeAndSlice out;
  const absl::string_view slice_spec = parts.back();
  parts.pop_back();
  std::vector<int64_t> dims;
  for (absl::string_view d : parts) {
    int64_t dim;
    if (!absl::SimpleAtoi(d, &dim) || dim < 0) {
      return errors::InvalidArgument("shape_and_slice \"", spec, "\": dimension '", d,
                                     "' is not a non-negative number");
    }
    dims.push_back(dim);
  }
  auto shape = TensorShape::Build(dims);
  if (!shape.ok()) {
    return errors::InvalidArgument("shape_and_slice \"", spec, "\": ", shape.status().message());
  }
  out.full_shape = *std::move(shape);
  for (absl::string_view x : absl::StrSplit(slice_spec, ':', absl::SkipEmpty())) {
    if (x == "-") {
      out.slice.push_back(SliceExtent{0, -1});
      continue;
    }
    std::vector<absl::string_view> sl = absl::StrSplit(x, ',', absl::SkipEmpty());
    int64_t start, length;
    if (sl.size() != 2 || !absl::SimpleAtoi(sl[0], &start) || !absl::SimpleAtoi(sl[1], &length)) {
      return errors::InvalidArgument("shape_and_slice \"", spec,
                                     "\": expected a pair of numbers or '-' but got '", x, "'");
    }
    if (length == -1 && start == 0) {  // TensorFlow's kFullExtent
      out.slice.push_back(SliceExtent{0, -1});
      continue;
    }
    if (start < 0 || length <= 0) {
      return errors::InvalidArgument("shape_and_slice \"", spec,
                                     "\": expected a non-negative start and a positive length "
                                     "but got start = ", start, ", length = ", length);
    }
    out.slice.push_back(SliceExtent{start, length});
  }
  if (static_cast<int>(out.slice.size()) != out.full_shape.dims()) {
    return errors::InvalidArgument("shape_and_slice \"", spec, "\": the slice has ",
                                   out.slice.size(), " dimensions but the shape ",
                                   out.full_shape.DebugString(), " has ",
                                   out.full_shape.dims());
  }
  for (int d = 0; d < out.full_shape.dims(); ++d) {
    const SliceExtent& e = out.slice[d];
    if (e.length >= 0 && (e.start > out.full_shape.dim_size(d) ||
                          e.length > out.full_shape.dim_size(d) - e.start)) {
      return errors::InvalidArgument("shape_and_slice \"", spec, "\": extent in dimension ", d,
                                     " out of bounds of shape ", out.full_shape.DebugString());
    }
  }
  std::vector<int64_t> slice_dims;
  for (int d = 0; d < out.full_shape.dims(); ++d) {
    slice_dims.push_back(out.slice[d].length < 0 ? out.full_shape.dim_size(d)
                                                 : out.slice[d].length);
  }
  out.slice_shape = TensorShape(absl::MakeConstSpan(slice_dims));
  return out;
}

}  // namespace recflow
