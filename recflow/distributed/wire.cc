#include "recflow/distributed/wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::distributed {

void ToWire(const Tensor& t, TensorBytes* out) {
  out->set_dtype(static_cast<int32_t>(t.dtype()));
  out->clear_shape();
  for (int64_t d : t.shape().dim_sizes()) out->add_shape(d);
  const size_t bytes = static_cast<size_t>(t.NumElements()) * DataTypeSize(t.dtype());
  out->set_content(t.raw_data(), bytes);
}

absl::StatusOr<Tensor> FromWire(const TensorBytes& in) {
  const DataType dtype = static_cast<DataType>(in.dtype());
  const int size = DataTypeSize(dtype);
  if (size <= 0 || dtype == DT_STRING || dtype == DT_RESOURCE) {
    return errors::InvalidArgument("tensor '", in.name(), "' has dtype ", in.dtype(),
                                   ", which the ps service does not carry");
  }
  auto shape = TensorShape::Build(absl::MakeConstSpan(in.shape().data(), in.shape_size()));
  if (!shape.ok()) {
    return errors::InvalidArgument("tensor '", in.name(), "': bad shape: ",
                                   shape.status().message());
  }
  // Elements from the content's size, not bytes from the shape's: the
  // product of a huge shape and the dtype's size could wrap around to the
  // content's size (a 2^62-float tensor in 0 bytes).
  const uint64_t elements = static_cast<uint64_t>(shape->num_elements());
  if (in.content().size() % size != 0 || in.content().size() / size != elements) {
    return errors::InvalidArgument("tensor '", in.name(), "' of shape ", shape->DebugString(),
                                   " needs ", elements, " elements of ", size,
                                   " bytes, the message has ", in.content().size(), " bytes");
  }
  const uint64_t want = in.content().size();
  Tensor t(dtype, *shape);
  if (want > 0) std::memcpy(t.raw_data(), in.content().data(), want);
  return t;
}

std::string IdsToBytes(absl::Span<const int64_t> ids) {
  return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * sizeof(int64_t));
}

absl::StatusOr<Tensor> IdsFromBytes(const std::string& bytes, const std::string& what) {
  if (bytes.size() % sizeof(int64_t) != 0) {
    return errors::InvalidArgument(what, ": ", bytes.size(),
                                   " bytes of ids is not a whole number of int64s");
  }
  const int64_t n = static_cast<int64_t>(bytes.size() / sizeof(int64_t));
  Tensor t(DT_INT64, TensorShape({n}));
  if (n > 0) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

absl::StatusOr<Tensor> RowsFromBytes(const std::string& bytes, int64_t n, int64_t dim,
                                     const std::string& what) {
  // Divided, not multiplied: n * dim * 4 can wrap around to bytes.size().
  const uint64_t floats = bytes.size() / sizeof(float);
  if (dim <= 0 || n < 0 || bytes.size() % sizeof(float) != 0 ||
      floats % static_cast<uint64_t>(dim) != 0 ||
      floats / static_cast<uint64_t>(dim) != static_cast<uint64_t>(n)) {
    return errors::InvalidArgument(what, ": ", bytes.size(), " bytes of rows do not hold ", n,
                                   " rows of ", dim, " floats");
  }
  Tensor t(DT_FLOAT, TensorShape({n, dim}));
  if (n > 0) std::memcpy(t.raw_data(), bytes.data(), bytes.size());
  return t;
}

}  // namespace recflow::distributed
