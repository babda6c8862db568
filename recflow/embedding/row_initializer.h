// RowInitializer: the weights of a new embedding row, and the hashing that
// the table, its sketch and its admission share.
//
// Note [Deterministic row initialization]: a new row's weights are a pure
// function of (table seed, id). The generator is Philox-4x32-10 keyed by the
// seed, with the id in the upper half of the 128-bit counter and the position
// in the row in the lower half (PhiloxRandom(seed, id)), so distinct ids read
// disjoint, independent streams. Nothing depends on arrival order, thread
// timing, shard count, or on which storage slot the row lands in: a row that
// is evicted and admitted again starts from the same weights, and two
// trainers with the same seed agree on every id's initial value.
//
// Thread-safe (immutable after construction).
#ifndef RECFLOW_EMBEDDING_ROW_INITIALIZER_H_
#define RECFLOW_EMBEDDING_ROW_INITIALIZER_H_

#include <cstdint>

#include "recflow/embedding/embedding_options.h"

namespace recflow::embedding {

class RowInitializer {
 public:
  RowInitializer(const InitializerOptions& options, uint64_t seed, int64_t dim)
      : options_(options), seed_(seed), dim_(dim) {}

  // Writes the `dim` initial weights of row `id` to dst[0, dim).
  void Init(int64_t id, float* dst) const;

 private:
  InitializerOptions options_;
  uint64_t seed_;
  int64_t dim_;
};

// A 64-bit finalizer (MurmurHash3's fmix64): a bijection that spreads every
// input bit over every output bit. The table picks a shard from its top bits.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Uniform in [0, 1) keyed by (seed, id, k): the draw behind probabilistic
// admission of occurrence k of `id`.
double AdmissionDraw(uint64_t seed, int64_t id, int64_t k);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_ROW_INITIALIZER_H_
