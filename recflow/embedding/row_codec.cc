#include "recflow/embedding/row_codec.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "recflow/core/numeric_types.h"
#include "recflow/core/status.h"

namespace recflow::embedding {
namespace {

// F16C is CPUID leaf 1, ECX bit 29 (asked directly: clang's
// __builtin_cpu_supports does not know "f16c").
bool HasF16c() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
    return (ecx & bit_F16C) != 0 && __builtin_cpu_supports("avx");
  }();
  return has;
}

bool HasAvx2Fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

// out[k] = bias + scale * q[k], 8 at a time: the int8 lookup's inner loop
// (a scalar loop of byte-to-float conversions was a third slower than the
// float32 lookup's copy).
__attribute__((target("avx2,fma"))) void DequantizeAvx2(const uint8_t* q, int64_t n, float scale,
                                                       float bias, float* out) {
  const __m256 s = _mm256_set1_ps(scale), b = _mm256_set1_ps(bias);
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + k));
    const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
    _mm256_storeu_ps(out + k, _mm256_fmadd_ps(v, s, b));
  }
  for (; k < n; ++k) out[k] = bias + scale * static_cast<float>(q[k]);
}

__attribute__((target("avx,f16c"))) void HalvesToFloats(const char* in, int64_t n,
                                                        float* out) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * k));
    _mm256_storeu_ps(out + k, _mm256_cvtph_ps(h));
  }
  for (; k < n; ++k) {
    uint16_t h;
    std::memcpy(&h, in + 2 * k, 2);
    out[k] = half::ToFloat(h);
  }
}

__attribute__((target("avx,f16c"))) void FloatsToHalves(const float* in, int64_t n, char* out) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + k), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * k), h);
  }
  for (; k < n; ++k) {
    const uint16_t h = half::FromFloat(in[k]);
    std::memcpy(out + 2 * k, &h, 2);
  }
}

}  // namespace

const char* RowFormatName(RowFormat format) {
  switch (format) {
    case RowFormat::kFloat32: return "float32";
    case RowFormat::kFloat16: return "float16";
    case RowFormat::kInt8: return "int8";
  }
  return "?";
}

absl::StatusOr<RowFormat> ParseRowFormat(absl::string_view name) {
  for (RowFormat f : {RowFormat::kFloat32, RowFormat::kFloat16, RowFormat::kInt8}) {
    if (name == RowFormatName(f)) return f;
  }
  return errors::InvalidArgument("unknown embedding row format '", name,
                                 "' (float32, float16 or int8)");
}

int64_t EncodedRowBytes(RowFormat format, int64_t dim) {
  switch (format) {
    case RowFormat::kFloat32: return 4 * dim;
    case RowFormat::kFloat16: return 2 * dim;
    case RowFormat::kInt8: return 8 + dim;
  }
  return 4 * dim;
}

void EncodeRow(RowFormat format, const float* in, int64_t dim, char* out) {
  switch (format) {
    case RowFormat::kFloat32:
      std::memcpy(out, in, static_cast<size_t>(dim) * 4);
      return;
    case RowFormat::kFloat16:
      if (HasF16c()) {
        FloatsToHalves(in, dim, out);
      } else {
        for (int64_t k = 0; k < dim; ++k) {
          const uint16_t h = half::FromFloat(in[k]);
          std::memcpy(out + 2 * k, &h, 2);
        }
      }
      return;
    case RowFormat::kInt8: {
      float lo = std::numeric_limits<float>::infinity(), hi = -lo;
      bool finite = true;
      for (int64_t k = 0; k < dim; ++k) {
        finite = finite && std::isfinite(in[k]);
        lo = std::min(lo, in[k]);
        hi = std::max(hi, in[k]);
      }
      float scale = 0, bias = 0;
      uint8_t* q = reinterpret_cast<uint8_t*>(out + 8);
      if (!finite) {
        scale = std::numeric_limits<float>::quiet_NaN();
        bias = scale;
        std::memset(q, 0, static_cast<size_t>(dim));
      } else if (dim > 0) {
        bias = lo;
        scale = (hi - lo) / 255.0f;
        const float inverse = scale > 0 ? 1.0f / scale : 0.0f;
        for (int64_t k = 0; k < dim; ++k) {
          // Round half up of a value in [0, 255] (+ rounding slack): a
          // truncating conversion, not a libm call per weight.
          const float v = std::clamp((in[k] - lo) * inverse + 0.5f, 0.0f, 255.0f);
          q[k] = static_cast<uint8_t>(v);
        }
      }
      std::memcpy(out, &scale, 4);
      std::memcpy(out + 4, &bias, 4);
      return;
    }
  }
}

void DecodeRow(RowFormat format, const char* in, int64_t dim, float* out) {
  switch (format) {
    case RowFormat::kFloat32:
      std::memcpy(out, in, static_cast<size_t>(dim) * 4);
      return;
    case RowFormat::kFloat16:
      if (HasF16c()) {
        HalvesToFloats(in, dim, out);
      } else {
        for (int64_t k = 0; k < dim; ++k) {
          uint16_t h;
          std::memcpy(&h, in + 2 * k, 2);
          out[k] = half::ToFloat(h);
        }
      }
      return;
    case RowFormat::kInt8: {
      float scale, bias;
      std::memcpy(&scale, in, 4);
      std::memcpy(&bias, in + 4, 4);
      const uint8_t* q = reinterpret_cast<const uint8_t*>(in + 8);
      if (HasAvx2Fma()) {
        DequantizeAvx2(q, dim, scale, bias, out);
      } else {
        for (int64_t k = 0; k < dim; ++k) out[k] = bias + scale * static_cast<float>(q[k]);
      }
      return;
    }
  }
}

}  // namespace recflow::embedding
