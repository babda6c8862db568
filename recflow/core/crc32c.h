// CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), as used
// by TFRecord framing, tensor-bundle checkpoints and LevelDB tables.
//
// Uses the SSE4.2 crc32 instruction when the CPU has it (decided once per
// process; three interleaved streams, ~3 bytes/cycle on large buffers) and a
// table-driven (slicing-by-8) implementation otherwise; both give identical
// results.
//
// Thread-safety: all functions are thread-safe and allocation-free.

#ifndef RECFLOW_CORE_CRC32C_H_
#define RECFLOW_CORE_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace recflow {
namespace crc32c {

// Returns the crc32c of concat(A, data[0, n)), where init_crc is the crc32c
// of some string A. Extend(0, data, n) == Value(data, n).
uint32_t Extend(uint32_t init_crc, const char* data, size_t n);

// Returns the crc32c of data[0, n).
inline uint32_t Value(const char* data, size_t n) { return Extend(0, data, n); }
inline uint32_t Value(absl::string_view data) {
  return Extend(0, data.data(), data.size());
}

// Returns the crc32c of concat(A, B) from crc_a = Value(A), crc_b = Value(B)
// and B's length: pieces of one stream checksummed apart (in parallel, out
// of order) give the whole's checksum. O(log len_b).
uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

inline constexpr uint32_t kMaskDelta = 0xa282ead8ul;

// Returns a masked representation of crc.
//
// Motivation: it is problematic to compute the CRC of a string that contains
// embedded CRCs. Therefore TFRecord, tensor-bundle and LevelDB store masked
// CRCs. Unmask(Mask(x)) == x.
inline constexpr uint32_t Mask(uint32_t crc) {
  // Rotate right by 15 bits and add a constant.
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

// Returns the crc whose masked representation is masked_crc.
inline constexpr uint32_t Unmask(uint32_t masked_crc) {
  uint32_t rot = masked_crc - kMaskDelta;
  return ((rot >> 17) | (rot << 15));
}

// Implementation details follow; exposed for tests and benchmarks.
namespace internal {

// Table-driven implementation; always available.
uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n);

// True if this CPU supports the SSE4.2 crc32 instruction.
bool CanUseSse42();

// SSE4.2 implementation.
// REQUIRES: CanUseSse42().
uint32_t ExtendSse42(uint32_t init_crc, const char* data, size_t n);

}  // namespace internal
}  // namespace crc32c
}  // namespace recflow

#endif  // RECFLOW_CORE_CRC32C_H_
