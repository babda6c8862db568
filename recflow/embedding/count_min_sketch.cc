#include "recflow/embedding/count_min_sketch.h"

#include <algorithm>
#include <limits>

#include "absl/numeric/bits.h"
#include "recflow/embedding/row_initializer.h"

namespace recflow::embedding {

namespace {
constexpr uint32_t kMaxCounter = std::numeric_limits<uint32_t>::max();
}  // namespace

CountMinSketch::CountMinSketch(int64_t width, int depth, uint64_t seed)
    : width_(static_cast<int64_t>(
          absl::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(width, 64))))),
      depth_(std::max(depth, 1)),
      seed_(seed),
      counters_(static_cast<size_t>(width_) * depth_, 0) {}

void CountMinSketch::Hashes(int64_t id, uint64_t* h1, uint64_t* h2) const {
  // Two independent hashes; row i uses h1 + i * h2 (Kirsch & Mitzenmacher),
  // with h2 odd so the rows never collapse onto one counter.
  const uint64_t x = static_cast<uint64_t>(id) ^ seed_;
  *h1 = Mix64(x);
  *h2 = Mix64(x ^ 0x9e3779b97f4a7c15ULL) | 1;
}

int64_t CountMinSketch::Add(int64_t id, int64_t count) {
  if (counters_.empty() || count <= 0) return Estimate(id);
  uint64_t h1, h2;
  Hashes(id, &h1, &h2);
  uint32_t current = kMaxCounter;
  for (int r = 0; r < depth_; ++r) {
    current = std::min(current, counters_[Slot(h1, h2, r)]);
  }
  const uint64_t wanted =
      static_cast<uint64_t>(current) + static_cast<uint64_t>(count);
  const uint32_t target =
      static_cast<uint32_t>(std::min<uint64_t>(wanted, kMaxCounter));
  for (int r = 0; r < depth_; ++r) {
    uint32_t& c = counters_[Slot(h1, h2, r)];
    c = std::max(c, target);
  }
  return target;
}

int64_t CountMinSketch::Estimate(int64_t id) const {
  if (counters_.empty()) return 0;
  uint64_t h1, h2;
  Hashes(id, &h1, &h2);
  uint32_t current = kMaxCounter;
  for (int r = 0; r < depth_; ++r) {
    current = std::min(current, counters_[Slot(h1, h2, r)]);
  }
  return current;
}

void CountMinSketch::Clear() {
  std::fill(counters_.begin(), counters_.end(), 0u);
}

void CountMinSketch::Decay() {
  for (uint32_t& c : counters_) c >>= 1;
}

}  // namespace recflow::embedding
