// CountMinSketch: approximate occurrence counts of int64 ids in bounded
// memory (Cormode & Muthukrishnan 2005), with conservative update (only the
// counters at the current minimum grow), which keeps over-estimates small.
// An estimate is never below the true count. Counters are 32-bit and
// saturate.
//
// Not thread-safe: the embedding table keeps one per shard, under the
// shard's writer lock.
#ifndef RECFLOW_EMBEDDING_COUNT_MIN_SKETCH_H_
#define RECFLOW_EMBEDDING_COUNT_MIN_SKETCH_H_

#include <cstdint>
#include <vector>

namespace recflow::embedding {

class CountMinSketch {
 public:
  // An empty sketch (no memory; Add/Estimate return 0) until Reset().
  CountMinSketch() = default;
  // `width` counters per row (rounded up to a power of two, at least 64),
  // `depth` rows. `seed` picks the hash functions.
  CountMinSketch(int64_t width, int depth, uint64_t seed);

  // Counts `count` more occurrences of `id` and returns the new estimate.
  int64_t Add(int64_t id, int64_t count);
  // The current estimate for `id` (>= its true count).
  int64_t Estimate(int64_t id) const;
  // Sets every counter to zero.
  void Clear();
  // Halves every counter (lets old popularity fade when called periodically).
  void Decay();

  int64_t width() const { return width_; }
  int depth() const { return depth_; }
  int64_t MemoryBytes() const {
    return static_cast<int64_t>(counters_.size() * sizeof(uint32_t));
  }

 private:
  // Index of `id`'s counter in row `row`.
  int64_t Slot(uint64_t h1, uint64_t h2, int row) const {
    return row * width_ + static_cast<int64_t>((h1 + row * h2) & (width_ - 1));
  }
  void Hashes(int64_t id, uint64_t* h1, uint64_t* h2) const;

  int64_t width_ = 0;
  int depth_ = 0;
  uint64_t seed_ = 0;
  std::vector<uint32_t> counters_;  // depth_ rows of width_
};

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_COUNT_MIN_SKETCH_H_
