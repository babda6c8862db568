// Options of a hash embedding table (HashEmbeddingTable): row size, shards,
// the deterministic initializer, the optimizer whose slots each row carries,
// admission of new ids, eviction of stale rows, and what to do with
// non-finite gradients. Plain structs with documented defaults; Validate()
// checks one before a table is built from it.
#ifndef RECFLOW_EMBEDDING_EMBEDDING_OPTIONS_H_
#define RECFLOW_EMBEDDING_EMBEDDING_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "recflow/embedding/row_codec.h"

namespace recflow {
class Env;
}  // namespace recflow

namespace recflow::embedding {

// How a new row's weights are drawn. The value is a pure function of
// (table seed, id): Note [Deterministic row initialization] in
// row_initializer.h.
struct InitializerOptions {
  enum class Kind {
    kZeros,
    kConstant,         // every weight = value
    kUniform,          // uniform in [minval, maxval)
    kNormal,           // mean + stddev * N(0, 1)
    kTruncatedNormal,  // as kNormal, redrawn while |N(0,1)| > 2 (TF's rule)
  };
  Kind kind = Kind::kUniform;
  float value = 0.0f;
  float minval = -0.05f;
  float maxval = 0.05f;
  float mean = 0.0f;
  float stddev = 0.05f;
};

// Which sparse optimizer updates the table; it fixes the slots each row
// carries (slot vectors of `dim` floats, stored after the weights):
//   kSgd      no slots
//   kAdagrad  slot 0 = accumulator (starts at initial_accumulator_value)
//   kAdam     slot 0 = m, slot 1 = v (both start at 0)
//   kFtrl     slot 0 = accumulator "n" (starts at initial_accumulator_value),
//             slot 1 = linear "z" (starts at 0)
// Any table accepts ApplySgd (it leaves the slots alone).
enum class OptimizerKind { kSgd, kAdagrad, kAdam, kFtrl };

// Slot vectors per row for `kind` (0, 1, 2 or 2 as listed above).
int NumSlots(OptimizerKind kind);
// "sgd", "adagrad", "adam", "ftrl".
const char* OptimizerName(OptimizerKind kind);
// Slot names in slot order, e.g. {"accumulator", "linear"} for FTRL (the
// checkpoint writer may name per-slot tensors with them).
std::vector<std::string> SlotNames(OptimizerKind kind);

// When an unseen id gets a trainable row. Until then a kTrain lookup reads
// the default row and gradient updates for the id are dropped (counted).
//
// Occurrences are counted in a count-min sketch (conservative update; one
// sketch per shard, `sketch_width / num_shards` counters wide and
// `sketch_depth` rows deep, 32-bit saturating counters), so the memory is
// bounded whatever the number of distinct ids; an estimate is never below the
// true count, so a hash collision can only admit an id early.
struct AdmissionOptions {
  enum class Kind {
    kAlways,       // every id seen by a kTrain lookup is admitted (no sketch)
    kCount,        // admitted on the lookup that brings its count to min_count
    kProbability,  // each occurrence admits with `probability`
  };
  Kind kind = Kind::kAlways;
  int64_t min_count = 1;
  // kProbability: occurrence k (1-based, the sketch's count) of id admits when
  // a uniform draw keyed by (table seed, id, k) is below `probability`, so the
  // outcome is reproducible from the seed and the id stream.
  double probability = 1.0;
  // Total counters per sketch row over all shards (rounded up so every shard
  // gets a power of two, at least 64). Memory: sketch_width * sketch_depth *
  // 4 bytes.
  int64_t sketch_width = int64_t{1} << 20;
  int sketch_depth = 4;
};

// Which rows Evict() removes. A row goes when either enabled rule holds.
struct EvictionOptions {
  // Not updated (or, if never updated, not inserted) for more than this many
  // steps: current_step - row.version > max_age_steps. 0 disables.
  int64_t max_age_steps = 0;
  // Looked up (kTrain) fewer than this many times since insertion (or since
  // the frequency was last restored). 0 disables.
  int64_t min_frequency = 0;
};

// What Apply*() does with a gradient row that holds a NaN or an infinity.
enum class NonFinitePolicy {
  kSkipRow,  // drop that id's update, count it in stats.nonfinite_updates
  kApply,    // apply it anyway (the row becomes non-finite)
  kError,    // reject the whole call with InvalidArgument naming the id;
             // nothing is applied
};

// Note [Tiers]: a table bigger than memory keeps its most used rows in
// memory under a byte budget and the rest in a cold tier on disk (one
// RowLog file per shard, scratch: checkpoints never point into it). See
// hash_embedding_table.h.
struct TierOptions {
  // 0: every row stays in memory. > 0: the bytes the table may keep in
  // memory: its rows in memory, their index and the cold tier's index (the
  // admission sketches and the deletion log are not counted). Split evenly
  // over the shards. REQUIRES: >= 0.
  int64_t dram_budget_bytes = 0;
  // Directory of the cold tier's files, on a disk of this machine (created
  // if missing; the files are deleted with the table, and those a killed
  // process left behind when a table next opens there: the files of
  // processes no longer running here). REQUIRES: set when
  // dram_budget_bytes > 0.
  std::string cold_dir;
  // Choosing rows to move out (LFU with aging): a row's lookup count is
  // halved for every this many steps since its last update. REQUIRES: > 0.
  int64_t frequency_half_life_steps = 1000;
  // File system of the cold tier; null: Env::Default().
  Env* env = nullptr;
};

struct EmbeddingTableOptions {
  // For messages and DebugString (e.g. the table's shared name).
  std::string name = "embedding";
  // Floats per row. REQUIRES: > 0.
  int64_t dim = 0;
  // A power of two, 1..4096. More shards = less lock contention and finer
  // parallelism; each costs a lock, an index and a sketch slice.
  int num_shards = 16;
  // Keys the initializer and the probabilistic admission.
  uint64_t seed = 0;
  InitializerOptions initializer;
  // What lookups of absent (not admitted, evicted, unknown in serving) ids
  // read: empty = zeros, one value = that value everywhere, or `dim` values.
  std::vector<float> default_value;
  OptimizerKind optimizer = OptimizerKind::kSgd;
  // Start value of Adagrad's accumulator and FTRL's n (TF's default 0.1).
  // REQUIRES: >= 0 (> 0 for Adagrad unless every ApplyAdagrad has epsilon>0).
  float initial_accumulator_value = 0.1f;
  AdmissionOptions admission;
  // Used by Evict(current_step) and by Export when asked to evict first.
  EvictionOptions eviction;
  NonFinitePolicy nonfinite_gradients = NonFinitePolicy::kSkipRow;
  // Rows per storage slab (rounded up to a power of two). 0 = pick: about
  // 256 KiB of floats per slab, at least 16 rows.
  int64_t rows_per_slab = 0;
  // How rows are stored (row_codec.h). kFloat16 / kInt8 are for serving:
  // the rows hold the weights only (no optimizer slots, whatever
  // `optimizer` says), are quantized when written (Import, a new row's
  // initial values) and dequantized when read (Lookup, Export, GetRow);
  // Apply* is FailedPrecondition.
  RowFormat row_format = RowFormat::kFloat32;
  // Memory budget and cold tier (float32 rows only). Default: no tiers.
  TierOptions tier;
};

// InvalidArgument naming the field and its value when `options` is unusable.
absl::Status Validate(const EmbeddingTableOptions& options);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_EMBEDDING_OPTIONS_H_
