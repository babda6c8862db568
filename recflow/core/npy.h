// NumPy .npy files <-> Tensors: the arrays `recflow saved_model run` reads
// with --inputs and writes with --outdir, and what numpy.save / numpy.load
// exchange (docs/formats/npy.md has the byte layout).
//
// Reading accepts format versions 1.0, 2.0 and 3.0, little-endian (or
// native '=') float16/32/64, int8..int64, uint8..uint64 and bool ('<f2',
// '<f4', '<f8', '|i1', '<i2', '<i4', '<i8', '|u1', '<u2', '<u4', '<u8',
// '|b1'), C order. Everything in a file is untrusted: the header is
// checked field by field, the shape with TensorShape::Build (so a shape
// whose element count overflows int64 is refused), and the data part must
// hold exactly the shape's bytes, compared by division so that no byte
// count can wrap around. Errors name the file (InvalidArgument for a bad
// header or shape, DataLoss for truncated or over-long data, Unimplemented
// for a dtype, version or Fortran order this reader does not take).
//
// Writing produces format 1.0 with a header padded to 64 bytes, as NumPy
// does; numpy.load reads it back.
//
// Thread-safety: free functions without shared state.
#ifndef RECFLOW_CORE_NPY_H_
#define RECFLOW_CORE_NPY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"
#include "recflow/core/tensor.h"

namespace recflow {

// ReadNpyFile refuses files larger than this by default.
inline constexpr uint64_t kMaxNpyFileBytes = uint64_t{1} << 30;

// Decodes the bytes of a .npy file; `name` (its path) names it in errors.
absl::StatusOr<Tensor> ParseNpy(absl::string_view data, absl::string_view name);

// Reads and decodes the .npy file at `path`: NotFound when it does not
// exist, ResourceExhausted when it is larger than `max_bytes`.
absl::StatusOr<Tensor> ReadNpyFile(Env* env, const std::string& path,
                                   uint64_t max_bytes = kMaxNpyFileBytes);

// The bytes of a .npy file (format 1.0) holding `t`. Unimplemented for a
// dtype the reader does not take (string, bfloat16, ...).
absl::StatusOr<std::string> EncodeNpy(const Tensor& t);

// Writes `t` to `path` as EncodeNpy encodes it (not atomically).
absl::Status WriteNpyFile(Env* env, const std::string& path, const Tensor& t);

}  // namespace recflow

#endif  // RECFLOW_CORE_NPY_H_
