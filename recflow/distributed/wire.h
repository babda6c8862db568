// Tensors on the ps service's wire (ps_service.proto): raw little-endian
// bytes with dtype and shape, checked on the way in.
#ifndef RECFLOW_DISTRIBUTED_WIRE_H_
#define RECFLOW_DISTRIBUTED_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/tensor.h"
#include "recflow/distributed/ps_service.pb.h"

namespace recflow::distributed {

// Fills `out` (name left alone) from a tensor of a fixed-size dtype.
void ToWire(const Tensor& t, TensorBytes* out);
// The tensor `in` describes. InvalidArgument naming `in.name()` for an
// unknown or variable-size dtype, a bad shape, or content whose size does
// not match the shape (a truncated or oversized message).
absl::StatusOr<Tensor> FromWire(const TensorBytes& in);

// int64 ids / float rows as bytes, and back (InvalidArgument naming `what`
// when the byte count is not a whole number of elements, or of rows).
std::string IdsToBytes(absl::Span<const int64_t> ids);
absl::StatusOr<Tensor> IdsFromBytes(const std::string& bytes, const std::string& what);
absl::StatusOr<Tensor> RowsFromBytes(const std::string& bytes, int64_t n, int64_t dim,
                                     const std::string& what);

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_WIRE_H_
