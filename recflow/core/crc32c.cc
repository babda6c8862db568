#include "recflow/core/crc32c.h"

#include <array>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define RECFLOW_CRC32C_HAVE_X86_64 1
#endif

namespace recflow {
namespace crc32c {
namespace {

// Reflected CRC-32C polynomial.
constexpr uint32_t kPoly = 0x82f63b78u;

using Table = std::array<uint32_t, 256>;

// ---------------------------------------------------------------------------
// Portable: slicing-by-8. kSlice[k][b] is the crc register after feeding byte
// b followed by k zero bytes into a zero register.

constexpr std::array<Table, 8> MakeSliceTables() {
  std::array<Table, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc >> 1) ^ (kPoly & (0u - (crc & 1u)));
    t[0][i] = crc;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t i = 0; i < 256; ++i) {
      t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xffu];
    }
  }
  return t;
}

constexpr std::array<Table, 8> kSlice = MakeSliceTables();

inline uint32_t LoadLE32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

}  // namespace

namespace internal {

uint32_t ExtendPortable(uint32_t init_crc, const char* data, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint32_t crc = init_crc ^ 0xffffffffu;
  // Byte at a time until p is 4-byte aligned, so the word loads are cheap on
  // strict-alignment targets too.
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 3) != 0) {
    crc = (crc >> 8) ^ kSlice[0][(crc ^ *p++) & 0xffu];
    --n;
  }
  while (n >= 8) {
    uint32_t lo = LoadLE32(p) ^ crc;
    uint32_t hi = LoadLE32(p + 4);
    crc = kSlice[7][lo & 0xffu] ^ kSlice[6][(lo >> 8) & 0xffu] ^
          kSlice[5][(lo >> 16) & 0xffu] ^ kSlice[4][lo >> 24] ^
          kSlice[3][hi & 0xffu] ^ kSlice[2][(hi >> 8) & 0xffu] ^
          kSlice[1][(hi >> 16) & 0xffu] ^ kSlice[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    crc = (crc >> 8) ^ kSlice[0][(crc ^ *p++) & 0xffu];
    --n;
  }
  return crc ^ 0xffffffffu;
}

}  // namespace internal

#if defined(RECFLOW_CRC32C_HAVE_X86_64)
namespace {

// ---------------------------------------------------------------------------
// SSE4.2: Note [three-stream crc32c]
//
// The crc32 instruction has a latency of 3 cycles and a throughput of 1 per
// cycle, so one dependent chain uses a third of the unit. Large buffers are
// split into three adjacent blocks of kLong (or kShort) bytes whose crcs are
// computed in parallel (the second and third starting from a zero register)
// and then combined: crc(A||B) = shift_|B|(crc(A)) ^ crc_from_zero(B), where
// shift_len multiplies the register by x^(8*len) mod P. The shift is a linear
// map, applied with four byte-indexed tables per block length built at
// compile time (Mark Adler's construction, as in zlib's crc32_combine).

constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

using Matrix = std::array<uint32_t, 32>;  // GF(2) 32x32, column per bit.

constexpr uint32_t MatrixTimes(const Matrix& mat, uint32_t vec) {
  uint32_t sum = 0;
  for (int i = 0; vec != 0; ++i, vec >>= 1) {
    if (vec & 1u) sum ^= mat[i];
  }
  return sum;
}

constexpr Matrix MatrixSquare(const Matrix& mat) {
  Matrix square{};
  for (int n = 0; n < 32; ++n) square[n] = MatrixTimes(mat, mat[n]);
  return square;
}

// Operator that appends `len` zero bytes to a crc register.
// REQUIRES: len is a power of two.
constexpr Matrix ZerosOperator(size_t len) {
  Matrix op{};  // One zero bit.
  op[0] = kPoly;
  uint32_t row = 1;
  for (int n = 1; n < 32; ++n) {
    op[n] = row;
    row <<= 1;
  }
  // Square three times for one zero byte, then once per doubling.
  for (int i = 0; i < 3; ++i) op = MatrixSquare(op);
  for (size_t l = len; l > 1; l >>= 1) op = MatrixSquare(op);
  return op;
}

constexpr std::array<Table, 4> MakeShiftTables(size_t len) {
  Matrix op = ZerosOperator(len);
  std::array<Table, 4> t{};
  for (uint32_t n = 0; n < 256; ++n) {
    t[0][n] = MatrixTimes(op, n);
    t[1][n] = MatrixTimes(op, n << 8);
    t[2][n] = MatrixTimes(op, n << 16);
    t[3][n] = MatrixTimes(op, n << 24);
  }
  return t;
}

constexpr std::array<Table, 4> kShiftLong = MakeShiftTables(kLong);
constexpr std::array<Table, 4> kShiftShort = MakeShiftTables(kShort);

inline uint32_t Shift(const std::array<Table, 4>& t, uint32_t crc) {
  return t[0][crc & 0xffu] ^ t[1][(crc >> 8) & 0xffu] ^
         t[2][(crc >> 16) & 0xffu] ^ t[3][crc >> 24];
}

inline uint64_t Load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Consumes whole triples of `block`-byte blocks from *p / *n.
__attribute__((target("sse4.2"))) inline uint64_t ThreeStreams(
    uint64_t crc0, const unsigned char** p, size_t* n, size_t block,
    const std::array<Table, 4>& shift) {
  const unsigned char* next = *p;
  size_t len = *n;
  while (len >= 3 * block) {
    uint64_t crc1 = 0;
    uint64_t crc2 = 0;
    const unsigned char* end = next + block;
    do {
      crc0 = _mm_crc32_u64(crc0, Load64(next));
      crc1 = _mm_crc32_u64(crc1, Load64(next + block));
      crc2 = _mm_crc32_u64(crc2, Load64(next + 2 * block));
      next += 8;
    } while (next < end);
    crc0 = Shift(shift, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = Shift(shift, static_cast<uint32_t>(crc0)) ^ crc2;
    next += 2 * block;
    len -= 3 * block;
  }
  *p = next;
  *n = len;
  return crc0;
}

}  // namespace

namespace internal {

bool CanUseSse42() {
  static const bool supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2") != 0;
  }();
  return supported;
}

__attribute__((target("sse4.2"))) uint32_t ExtendSse42(uint32_t init_crc,
                                                       const char* data,
                                                       size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(data);
  uint64_t crc = init_crc ^ 0xffffffffu;
  while (n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0) {
    crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
    --n;
  }
  crc = ThreeStreams(crc, &p, &n, kLong, kShiftLong);
  crc = ThreeStreams(crc, &p, &n, kShort, kShiftShort);
  while (n >= 8) {
    crc = _mm_crc32_u64(crc, Load64(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    crc = _mm_crc32_u8(static_cast<uint32_t>(crc), *p++);
    --n;
  }
  return static_cast<uint32_t>(crc) ^ 0xffffffffu;
}

}  // namespace internal

#else  // !RECFLOW_CRC32C_HAVE_X86_64

namespace internal {

bool CanUseSse42() { return false; }

uint32_t ExtendSse42(uint32_t init_crc, const char* data, size_t n) {
  return ExtendPortable(init_crc, data, n);
}

}  // namespace internal

#endif  // RECFLOW_CRC32C_HAVE_X86_64

namespace {

// Polynomial arithmetic modulo the CRC polynomial over GF(2), in the
// reflected bit order of the CRC itself (x^0 is the top bit). Appending
// len zero bytes to a message multiplies its crc register by x^(8 len), and
// the pre- and post-conditioning of the two pieces cancel in the xor below.
constexpr uint32_t kReflectedPoly = 0x82f63b78u;
constexpr uint32_t kOne = 0x80000000u;  // x^0

uint32_t MultModP(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  for (uint32_t m = kOne; m != 0; m >>= 1) {
    if (a & m) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kReflectedPoly : b >> 1;
  }
  return product;
}

// x^(2^k) mod P for k = 0..63.
struct PowersOfX {
  uint32_t x2k[64];
  PowersOfX() {
    x2k[0] = kOne >> 1;  // x^1
    for (int k = 1; k < 64; ++k) x2k[k] = MultModP(x2k[k - 1], x2k[k - 1]);
  }
};

}  // namespace

uint32_t Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
  static const PowersOfX powers;
  // x^(8 len_b): bit i of len_b contributes x^(2^(i + 3)).
  uint32_t shift = kOne;
  for (int k = 3; len_b != 0 && k < 64; ++k, len_b >>= 1) {
    if (len_b & 1) shift = MultModP(powers.x2k[k], shift);
  }
  return MultModP(shift, crc_a) ^ crc_b;
}

uint32_t Extend(uint32_t init_crc, const char* data, size_t n) {
  static const bool use_sse42 = internal::CanUseSse42();
  if (use_sse42) return internal::ExtendSse42(init_crc, data, n);
  return internal::ExtendPortable(init_crc, data, n);
}

}  // namespace crc32c
}  // namespace recflow
