// How a hash embedding table stores its rows' weights
// (EmbeddingTableOptions::row_format; docs/embedding.md "Quantized rows").
//
//   kFloat32  dim floats, as trained (and the optimizer's slots after them).
//   kFloat16  dim IEEE binary16 values (round to nearest even): half the
//             bytes, a relative error of at most 2^-11 per weight.
//   kInt8     row-wise 8-bit, as FBGEMM's and TorchRec's: a float scale and
//             a float bias, then dim bytes q; a weight reads bias + scale * q
//             with scale = (max - min) / 255 and bias = min of the row, so
//             the error is at most scale / 2 (a constant row is exact).
//
// The 16- and 8-bit formats are for serving: weights only, no optimizer
// slots. EncodeRow / DecodeRow convert one row; DecodeRow is the inner loop
// of a quantized table's lookups (it uses the CPU's F16C conversions when
// it has them). Non-finite weights: float16 keeps infinities and NaN; int8
// cannot represent them, and a row holding one decodes as NaN everywhere.
//
// Stateless functions; thread-safe.
#ifndef RECFLOW_EMBEDDING_ROW_CODEC_H_
#define RECFLOW_EMBEDDING_ROW_CODEC_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace recflow::embedding {

enum class RowFormat { kFloat32, kFloat16, kInt8 };

// "float32", "float16", "int8".
const char* RowFormatName(RowFormat format);
// The names above; InvalidArgument listing them otherwise.
absl::StatusOr<RowFormat> ParseRowFormat(absl::string_view name);

// Bytes of one row of `dim` weights (weights only).
int64_t EncodedRowBytes(RowFormat format, int64_t dim);

// out[0, EncodedRowBytes) = the row `in[0, dim)` in `format`. `out` needs no
// alignment.
void EncodeRow(RowFormat format, const float* in, int64_t dim, char* out);
// out[0, dim) = the weights of the encoded row `in`.
void DecodeRow(RowFormat format, const char* in, int64_t dim, float* out);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_ROW_CODEC_H_
