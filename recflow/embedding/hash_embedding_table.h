// HashEmbeddingTable: an unbounded embedding table keyed by raw int64 feature
// ids (any value, negative ones included), the storage behind recflow's
// embedding ops. Each row holds `dim` float weights, the slots of the table's
// sparse optimizer (0..2 vectors of `dim` floats), a frequency (kTrain
// lookups since insertion) and a version (the step of its last update).
//
// What the kernels use:
//   Lookup()      batched gather; in kTrain mode it creates rows for ids that
//                 pass admission, in kReadOnly (serving) it never writes.
//   Apply*()      batched sparse optimizer step over distinct ids (dedup the
//                 per-occurrence gradient with unique_ids.h first).
//   Evict()       removes stale or rare rows.
//   Export()/Import()/Remove()/Clear()  checkpoints, full or delta.
//   GetStats()    counts and memory.
//
// Steps. Apply*'s `step` is the 1-based number of the update, i.e. the value
// the global step has after it (TF's apply_gradients(global_step=...)
// increments the global step with the update). Pass the same numbering to
// Evict(current_step) and to Export's since_step. The table remembers the
// largest step given to Apply* or found in Import (its "clock"). Changes made
// between updates are stamped clock + 1, since they belong to the next
// update: the version of a row created by Lookup (or by Import without
// versions), and the step logged for an evicted or removed id.
//
// Note [Delta checkpoints]: Export with since_step = S returns every row
// whose version > S, plus the ids evicted or removed since S. Every change
// made after the Apply(step = S) call returned is in it (a few made just
// before may be too; re-applying them is harmless). Restore a delta by
// Remove(deleted ids) first, then Import(chunks). The list of deletions is
// kept until TrimDeletionLog(S) drops what a retained full checkpoint at S
// already reflects.
//
// Note [Base rows]: AttachBase puts a mapped full checkpoint (MappedRows,
// mapped_rows.h) under an empty table as a read-only bottom layer, so a
// restored table answers at once instead of after inserting every row.
// The table's rows are then its own (in memory) plus the base's rows it
// does not hide. A base row is hidden once the table has its own row of the
// id or the id was deleted (Remove, Evict); each shard keeps the hidden
// ids of its own ids. So:
//   - lookups read the table's row, else the visible base row, else the
//     default row; kReadOnly lookups copy base rows straight from the
//     mapping, while a kTrain lookup (and Apply* of a base row) first
//     copies it into the table ("promotes" it, with its slots, frequency
//     and version), since training will write it;
//   - Import writes the table's own rows; Remove and Evict hide base rows
//     and log them like any deletion; Clear drops the base;
//   - Export, size, Contains, GetRow and GetStats see the union.
// The base's background checksum pass (MappedRows) may still run: lookups
// return its DataLoss once it fails; Export waits for it to end.
//
// Note [Tiers]: with options().tier.dram_budget_bytes set, the table keeps
// at most that many bytes in memory (its rows in memory, their index and
// the cold tier's index) and moves the rest to a cold tier on disk: one
// RowLog (row_log.h) per shard, in tier.cold_dir. Each id lives in exactly
// one place: memory, the cold tier, or the mapped base (Note [Base rows]).
//   - A shard over its share of the budget moves rows out ("demotes" them)
//     in batches, least frequently used first with aging: a row's score is
//     its lookup count halved for every tier.frequency_half_life_steps
//     steps since its last update, among 5 sampled rows per victim. Ids of
//     the batch at hand are never chosen.
//   - kTrain lookups, Apply* and Prefetch bring cold rows back into memory
//     ("promote" them): read under the shard's reader lock, moved in under
//     the writer lock. kReadOnly lookups read cold rows without moving
//     them, so serving never writes.
//   - Write-back: a row is written to the cold tier when it leaves memory,
//     never on update; a promoted one leaves a dead record there that
//     compaction drops. A row brought in from the base and unchanged since
//     (weights, slots, frequency and version; e.g. prefetched, never used)
//     goes back to the base without a write.
//   - Export, size, Contains, GetRow, Remove, Evict and GetStats see all
//     three places. An export holds row movement between tiers still
//     (lookups that must move rows wait for it), so it sees every row once.
//   - The cold tier is scratch: a crash loses nothing a checkpoint holds.
//     A failed write to it (a full disk) keeps the rows in memory, over the
//     budget, and the call that needed the room returns the error.
//
// Quantized rows (options().row_format float16 / int8, serving): see
// row_codec.h; the row layout below holds the encoded weights instead of
// the floats, and lookups decode them straight into their output.
//
// Thread-safety: thread-safe. Storage is split into shards (shard = top bits
// of a 64-bit mix of the id); each shard has a reader/writer lock:
//   - Lookup of existing rows holds the reader lock (many lookups run
//     concurrently; the frequency bump is a relaxed load and store, not a
//     locked add, so two lookups of the same row at the same instant may
//     count once: frequencies are exact when a shard's kTrain lookups do
//     not overlap, as within one training step, and approximate beyond);
//   - creating rows (kTrain lookup of new ids, Import), Apply*, Evict,
//     Remove and Clear hold the writer lock of the shards they touch;
//   - Export copies each chunk under the reader locks of the shards involved.
// Each row is read and written atomically, not the table as a whole: an
// Export concurrent with training is consistent per row, not across rows
// (pause training, as the checkpoint hook does between steps, for a
// consistent snapshot). A lookup concurrent with an update of the same row
// sees it either before or after the update, never half-written.
//
// The ThreadPool* arguments may be null (run on the caller); otherwise work is
// split over shards with ParallelFor, and the caller takes part.
#ifndef RECFLOW_EMBEDDING_HASH_EMBEDDING_TABLE_H_
#define RECFLOW_EMBEDDING_HASH_EMBEDDING_TABLE_H_

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/allocator.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/count_min_sketch.h"
#include "recflow/embedding/embedding_options.h"
#include "recflow/embedding/mapped_rows.h"
#include "recflow/embedding/row_initializer.h"
#include "recflow/embedding/row_log.h"
#include "recflow/embedding/shared_mutex.h"
#include "recflow/embedding/sparse_optimizers.h"

namespace recflow::embedding {

enum class LookupMode {
  // Training forward pass: an absent id is counted toward admission and gets
  // a row once admitted (in this very call if this lookup admits it); every
  // lookup of a present row adds 1 to its frequency.
  kTrain,
  // Serving / evaluation: never creates rows, never changes frequencies or
  // the admission sketch; absent ids read the default row.
  kReadOnly,
};

// What one Lookup call did (optional output).
struct LookupResult {
  int64_t found = 0;      // occurrences that read an existing row
  int64_t inserted = 0;   // rows created by this call
  int64_t defaulted = 0;  // occurrences that read the default row
};

// What one Apply* call did (optional output).
struct ApplyResult {
  int64_t updated = 0;    // rows updated
  int64_t dropped = 0;    // ids with no row (not admitted or evicted)
  int64_t nonfinite = 0;  // rows skipped for NaN/Inf gradients (kSkipRow)
};

struct EvictionResult {
  int64_t by_age = 0;        // rows removed for max_age_steps
  int64_t by_frequency = 0;  // rows removed for min_frequency (and not age)
  int64_t rows_left = 0;
};

// Counters since creation (they survive Clear and Import) and memory now.
struct TableStats {
  int64_t rows = 0;               // live rows
  int64_t admitted = 0;           // ids that passed admission in Lookup
  int64_t inserts = 0;            // rows created (admitted + new in Import)
  int64_t rejected_lookups = 0;   // kTrain occurrences of not-yet-admitted ids
  int64_t missing_lookups = 0;    // kReadOnly occurrences of absent ids
  int64_t evicted = 0;            // rows removed by Evict
  int64_t removed = 0;            // rows removed by Remove
  int64_t dropped_updates = 0;    // gradient rows for ids with no row
  int64_t nonfinite_updates = 0;  // gradient rows skipped (kSkipRow)
  // Memory.
  int64_t bytes_per_row = 0;  // floats of a row + its metadata
  int64_t slab_bytes = 0;     // allocated row storage (incl. free slots)
  int64_t free_slots = 0;     // evicted slots waiting for reuse
  int64_t index_bytes = 0;    // hash index (capacity * slot size)
  int64_t sketch_bytes = 0;   // admission sketches
  int64_t deletion_log_bytes = 0;
  int64_t total_bytes = 0;  // all of the above
  // Note [Base rows]: rows of the mapped base that are visible (counted in
  // `rows` too), and the bytes of the base's mapped tensors (file pages,
  // not in total_bytes).
  int64_t base_rows = 0;
  int64_t base_mapped_bytes = 0;
  // Note [Tiers] (tiered tables; 0 otherwise): the budget; rows in the cold
  // tier (counted in `rows`); its files' bytes (live and dead records) and
  // its index's memory (in index_bytes and total_bytes).
  int64_t dram_budget_bytes = 0;
  int64_t cold_rows = 0;
  int64_t cold_file_bytes = 0;
  int64_t cold_index_bytes = 0;
  int64_t dram_rows = 0;  // rows in memory (also for untiered tables)
  // Lookup occurrences that found their row in memory, and those whose row
  // was in the cold tier (read from disk by the lookup itself; prefetched
  // rows count as found in memory). Hit rate: dram_hits / (dram_hits +
  // cold_hits).
  int64_t dram_hits = 0;
  int64_t cold_hits = 0;
  int64_t promoted = 0;  // rows moved into memory from the cold tier
  // Rows moved out of memory (written, or back to the base).
  int64_t demoted = 0;
  int64_t cold_writes = 0;  // rows written to the cold tier
  int64_t cold_compactions = 0;
};

// One chunk of exported (or to-be-imported) rows, sorted by key on export.
struct TableChunk {
  Tensor keys;    // int64 [n]
  Tensor values;  // float [n, dim]
  // float [n, num_slots, dim] in slot order (SlotNames()). On import it may
  // be left uninitialized (Tensor()) or have 0 slots: slots then start at
  // their initial values (e.g. a serving export without optimizer state).
  Tensor slots;
  Tensor frequencies;  // int64 [n]; optional on import (then 0)
  Tensor versions;     // int64 [n]; optional on import (then clock + 1)
};

struct ExportOptions {
  // < 0: every row (a full checkpoint). >= 0: a delta: rows with
  // version > since_step, and ExportResult::deleted_ids.
  int64_t since_step = -1;
  // Rows per chunk handed to the sink. REQUIRES: > 0.
  int64_t max_rows_per_chunk = 65536;
  // Leave TableChunk::slots uninitialized (serving exports).
  bool include_slots = true;
  // Leave TableChunk::values uninitialized (a checkpoint pass that writes
  // only the ids, frequencies or versions skips copying the weights).
  bool include_values = true;
  // Row order. kByKey: ascending ids (the keys are collected and sorted,
  // then each row is found through the index). kStorage: the order the rows
  // sit in memory, shard by shard and slab by slab: sequential reads, no
  // sort, no index lookups, no memory per key; several times faster on big
  // tables (checkpoints use it). Both give the same set of rows, and two
  // kStorage exports of an unchanged table give the same order.
  enum class Order { kByKey, kStorage };
  Order order = Order::kByKey;
  // When set, Evict(*evict_at_step) with the table's eviction options runs
  // first (so evicted rows are not written).
  std::optional<int64_t> evict_at_step;
};

struct ExportResult {
  int64_t rows = 0;
  int64_t chunks = 0;
  // Delta exports: the distinct ids evicted or removed since since_step,
  // sorted (int64 [m]). Full exports: int64 [0].
  Tensor deleted_ids;
  std::optional<EvictionResult> eviction;  // when evict_at_step was set
};

// A copy of one row (tests, debugging, serving diagnostics).
struct RowSnapshot {
  std::vector<float> weights;             // dim
  std::vector<std::vector<float>> slots;  // num_slots x dim
  int64_t frequency = 0;
  int64_t version = 0;
};

class HashEmbeddingTable {
 public:
  // InvalidArgument naming the bad option (see Validate(options)).
  static absl::StatusOr<std::unique_ptr<HashEmbeddingTable>> Create(
      const EmbeddingTableOptions& options);
  ~HashEmbeddingTable();
  HashEmbeddingTable(const HashEmbeddingTable&) = delete;
  HashEmbeddingTable& operator=(const HashEmbeddingTable&) = delete;

  const EmbeddingTableOptions& options() const { return options_; }
  const std::string& name() const { return options_.name; }
  int64_t dim() const { return options_.dim; }
  // 0 for quantized rows, which keep no slots.
  int num_slots() const { return num_slots_; }
  RowFormat row_format() const { return options_.row_format; }
  int num_shards() const { return options_.num_shards; }
  // The default row (dim floats) that absent ids read.
  absl::Span<const float> default_row() const { return default_row_; }

  // out[i, :] = row of ids[i] (or the default row), for i in [0, n).
  // InvalidArgument when out.size() != ids.size() * dim. ResourceExhausted
  // when a shard cannot hold more rows (2^32 - 1 per shard) or memory runs
  // out; rows created before the error stay.
  absl::Status Lookup(absl::Span<const int64_t> ids, absl::Span<float> out,
                      LookupMode mode, ThreadPool* pool = nullptr,
                      LookupResult* result = nullptr);

  // One optimizer step over distinct `ids` with gradients `grads`
  // [ids.size(), dim] (row i for ids[i]). Ids without a row (not admitted, or
  // evicted since the lookup) are dropped and counted; Apply never creates
  // rows. Each updated row's version becomes `step`. Duplicated ids are
  // updated once per occurrence, in order (dedup with Unique() instead).
  // Non-finite gradient rows follow options().nonfinite_gradients.
  // InvalidArgument for a size mismatch or bad hyperparameters (nothing is
  // applied); FailedPrecondition when the table's optimizer lacks the slots
  // (ApplySgd works on any table and leaves slots alone).
  absl::Status ApplySgd(absl::Span<const int64_t> ids,
                        absl::Span<const float> grads, const SgdParams& params,
                        int64_t step, ThreadPool* pool = nullptr,
                        ApplyResult* result = nullptr);
  absl::Status ApplyAdagrad(absl::Span<const int64_t> ids,
                            absl::Span<const float> grads,
                            const AdagradParams& params, int64_t step,
                            ThreadPool* pool = nullptr,
                            ApplyResult* result = nullptr);
  absl::Status ApplyAdam(absl::Span<const int64_t> ids,
                         absl::Span<const float> grads,
                         const AdamParams& params, int64_t step,
                         ThreadPool* pool = nullptr,
                         ApplyResult* result = nullptr);
  absl::Status ApplyFtrl(absl::Span<const int64_t> ids,
                         absl::Span<const float> grads,
                         const FtrlParams& params, int64_t step,
                         ThreadPool* pool = nullptr,
                         ApplyResult* result = nullptr);

  // Removes the rows that options().eviction (or `criteria`) selects at
  // `current_step`, frees their slots for reuse and logs their ids for delta
  // exports. With both rules disabled it removes nothing.
  EvictionResult Evict(int64_t current_step, ThreadPool* pool = nullptr);
  EvictionResult Evict(int64_t current_step, const EvictionOptions& criteria,
                       ThreadPool* pool = nullptr);

  // Streams the rows (all, or a delta: ExportOptions) in options.order, in
  // chunks of at most max_rows_per_chunk rows, to `sink`; stops at and
  // returns the first error the sink returns. Memory beyond one chunk: 8 bytes
  // per exported key for kByKey, none for kStorage. No shard lock is held while the sink runs. An export
  // with no rows calls the sink once with an empty chunk (n = 0), so a
  // checkpoint writer always sees the tensors' dtypes and inner shapes.
  absl::StatusOr<ExportResult> Export(
      const ExportOptions& options,
      const std::function<absl::Status(const TableChunk&)>& sink,
      ThreadPool* pool = nullptr);

  // Inserts or overwrites the chunk's rows (merge). Bypasses admission. A key
  // repeated within the chunk: the later row wins. InvalidArgument naming the
  // tensor when a dtype or shape does not fit (e.g. values [n, 8] for a table
  // of dim 16, or slots for another optimizer); nothing is imported then.
  // To replace the table, Clear() first.
  absl::Status Import(const TableChunk& chunk, ThreadPool* pool = nullptr);

  // Note [Tiers]: moves the rows of `ids` that sit in the cold tier or the
  // mapped base into memory, so the lookup that follows finds them there;
  // counts nothing toward frequencies. For the input pipeline: announce the
  // next batch's ids while the current step runs. The shards work on the
  // process's cold-read threads, all reads in flight together. OK at once
  // for an untiered table; the cold tier's error otherwise.
  absl::Status Prefetch(absl::Span<const int64_t> ids);
  bool tiered() const { return tiered_; }

  // Makes room in the shards' indexes for `rows` rows in all (assuming ids
  // spread evenly), so importing a big checkpoint does not rehash again and
  // again. Never shrinks anything.
  void Reserve(int64_t rows);

  // Deletes the rows of `ids` (absent ids are ignored) and logs them for
  // delta exports. Returns the number removed.
  int64_t Remove(absl::Span<const int64_t> ids);

  // Removes every row, empties the admission sketches and the deletion log,
  // drops the base (if any) and resets the clock to 0 (before restoring a
  // full checkpoint). Keeps the slab memory for reuse and the counters of
  // GetStats().
  void Clear();

  // Note [Base rows]: makes `base` the read-only bottom layer of this empty
  // table (after Clear()) and sets the clock to base->clock().
  // FailedPrecondition when the table has rows or already a base, or holds
  // quantized rows (a base's rows are float32); InvalidArgument when the
  // base's dim or slots do not fit the table.
  absl::Status AttachBase(std::shared_ptr<const MappedRows> base);
  bool has_base() const;
  // Blocks until the base's background pass (MappedRows) ended and returns
  // its status: OK without a base.
  absl::Status WaitForBase() const;

  // Drops deletion-log entries that a full checkpoint at `step` reflects,
  // but never those after the step KeepDeletionsAfter holds.
  void TrimDeletionLog(int64_t step);
  // A reader of deltas that has seen the changes up to `step` (an update
  // publisher, train/update_publisher.h) and will next ask for a delta
  // since it: TrimDeletionLog keeps every entry after `step` from now on.
  // Each call replaces the previous hold; nullopt lifts it.
  void KeepDeletionsAfter(std::optional<int64_t> step);

  // Halves the admission sketches' counters (call periodically so that ids
  // popular long ago need to be seen again to be admitted).
  void DecayAdmissionCounts();

  // The largest step seen by Apply* or Import (versions).
  int64_t clock() const { return clock_.load(std::memory_order_relaxed); }

  int64_t size() const;  // live rows
  bool Contains(int64_t id) const;
  std::optional<RowSnapshot> GetRow(int64_t id) const;
  // The admission sketch's current count for `id` (0 with kAlways).
  int64_t AdmissionCount(int64_t id) const;

  TableStats GetStats() const;
  // "HashEmbeddingTable(name, dim=16, optimizer=adagrad, rows=123, 4.5 MiB)".
  std::string DebugString() const;

  // Implementation details follow.
 private:
  // RowMeta::version of a slot on the free list (never a real version: those
  // are steps, >= 0).
  static constexpr int64_t kFreeSlotVersion = std::numeric_limits<int64_t>::min();
  struct RowMeta {
    int64_t id = 0;
    std::atomic<int64_t> frequency{0};
    int64_t version = 0;
  };
  // +1 on a row's frequency. Not a locked add: that would stall the lookup
  // loop until every store before it drained (a quarter of a kTrain
  // lookup's time); see the thread-safety note above.
  static void BumpFrequency(RowMeta& meta) {
    meta.frequency.store(meta.frequency.load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
  }
  // Note [Row layout]: a slab is one 64-byte-aligned allocation of
  // rows_per_slab_ rows of stride_bytes_ each; a row is its RowMeta followed
  // by row_floats_ floats (weights | slot0 | slot1 ...). Keeping the
  // metadata next to the weights means a lookup, which reads the weights and
  // bumps the frequency, touches adjacent cache lines only.
  struct Slab {
    char* data = nullptr;
  };
  struct DeletionEntry {
    int64_t id;
    int64_t step;
  };
  // id -> slot. A big table's index is resized to millions of slots at
  // once, all written by the rehash: its blocks are prefaulted.
  using Index = absl::flat_hash_map<int64_t, uint32_t, absl::Hash<int64_t>,
                                    std::equal_to<int64_t>,
                                    PrefaultingAllocator<std::pair<const int64_t, uint32_t>>>;
  // alignas: shards are written by different threads.
  struct alignas(64) Shard {
    mutable SharedMutex mu;
    Index index ABSL_GUARDED_BY(mu);
    std::vector<Slab> slabs ABSL_GUARDED_BY(mu);
    uint32_t next_slot ABSL_GUARDED_BY(mu) = 0;  // slots ever handed out
    std::vector<uint32_t> free_slots ABSL_GUARDED_BY(mu);
    CountMinSketch sketch ABSL_GUARDED_BY(mu);
    std::vector<DeletionEntry> deletion_log ABSL_GUARDED_BY(mu);
    // Note [Base rows]: this shard's ids whose base row is hidden.
    absl::flat_hash_set<int64_t> base_hidden ABSL_GUARDED_BY(mu);
    // Note [Tiers]: the cold tier's rows of this shard (tiered tables).
    std::unique_ptr<RowLog> cold ABSL_GUARDED_BY(mu);
    uint64_t sample_state ABSL_GUARDED_BY(mu) = 0;  // demotion's sampling
    std::atomic<int64_t> dram_hits{0}, cold_hits{0}, promoted{0}, demoted{0},
        cold_writes{0};
    std::atomic<int64_t> admitted{0}, inserts{0}, rejected_lookups{0},
        missing_lookups{0}, evicted{0}, removed{0}, dropped_updates{0},
        nonfinite_updates{0};
  };
  // Positions of a batch's ids grouped by shard (a counting sort).
  struct ShardGroups {
    std::vector<int64_t> begin;      // num_shards + 1 offsets into positions
    std::vector<int64_t> positions;  // indices into the batch
  };

  explicit HashEmbeddingTable(const EmbeddingTableOptions& options);

  int ShardOf(int64_t id) const {
    return static_cast<int>(Mix64(static_cast<uint64_t>(id)) >> shard_shift_);
  }
  ShardGroups GroupByShard(absl::Span<const int64_t> ids) const;
  // Runs fn(shard) for every shard, over `pool` when the whole job is
  // estimated to cost enough (`total_cost_ns`).
  void ForEachShard(int64_t total_cost_ns, ThreadPool* pool,
                    const std::function<void(int)>& fn) const;

  char* RowStart(const Shard& s, uint32_t slot) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
    return s.slabs[slot >> slab_shift_].data +
           static_cast<int64_t>(slot & slab_mask_) * stride_bytes_;
  }
  // The row's floats (weights | slots): float32 rows only.
  float* RowData(const Shard& s, uint32_t slot) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
    return reinterpret_cast<float*>(RowStart(s, slot) + sizeof(RowMeta));
  }
  // The row's weights, in any format: read into out[0, dim) / written from
  // in[0, dim).
  void ReadWeights(const Shard& s, uint32_t slot, float* out) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
    const char* payload = RowStart(s, slot) + sizeof(RowMeta);
    if (!quantized_) {
      std::memcpy(out, payload, static_cast<size_t>(options_.dim) * sizeof(float));
    } else {
      DecodeRow(options_.row_format, payload, options_.dim, out);
    }
  }
  void WriteWeights(const Shard& s, uint32_t slot, const float* in) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    char* payload = RowStart(s, slot) + sizeof(RowMeta);
    if (!quantized_) {
      std::memcpy(payload, in, static_cast<size_t>(options_.dim) * sizeof(float));
    } else {
      EncodeRow(options_.row_format, in, options_.dim, payload);
    }
  }
  RowMeta& Meta(const Shard& s, uint32_t slot) const
      ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
    return *reinterpret_cast<RowMeta*>(RowStart(s, slot));
  }
  // A free slot (reused or new); ResourceExhausted when out of slots/memory.
  // Inline for the common case, the next slot of a slab already there (every
  // row of a restore into a cleared table: a call and a StatusOr per row
  // were a tenth of Import); AllocateSlotSlow does the rest.
  absl::StatusOr<uint32_t> AllocateSlot(Shard& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    if (s.free_slots.empty() && (s.next_slot >> slab_shift_) < s.slabs.size() &&
        s.next_slot != std::numeric_limits<uint32_t>::max()) {
      return s.next_slot++;
    }
    return AllocateSlotSlow(s);
  }
  absl::StatusOr<uint32_t> AllocateSlotSlow(Shard& s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Creates row `id` (not present) with initial weights and slots, or,
  // with initialize = false, leaves the row's floats for the caller to
  // write (Import: drawing initial values only to overwrite them would
  // dominate a restore).
  absl::StatusOr<uint32_t> InsertRow(Shard& s, int64_t id, int64_t version,
                                     bool initialize = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void EraseRow(Shard& s, int64_t id, uint32_t slot, int64_t log_step)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void InitSlots(float* row) const;
  // Admission decision for `count` new occurrences of absent `id`.
  bool Admit(Shard& s, int64_t id, int64_t count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  absl::Status LookupShard(Shard& s, absl::Span<const int64_t> ids,
                           absl::Span<const int64_t> positions, float* out,
                           LookupMode mode, LookupResult* result);
  void AdvanceClock(int64_t step);
  // Note [Base rows]: the base row of `id` (in shard s) if visible, else -1.
  int64_t VisibleBaseRow(const Shard& s, int64_t id) const ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
    if (base_ == nullptr) return -1;
    if (!s.base_hidden.empty() && s.base_hidden.contains(id)) return -1;
    return base_->Find(id);
  }
  // Copies visible base row `row` of `id` into the shard and hides it.
  absl::StatusOr<uint32_t> PromoteRow(Shard& s, int64_t id, int64_t row)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Hides base rows that `criteria` selects (Evict's second half).
  void EvictBaseRows(int64_t current_step, const EvictionOptions& criteria,
                     std::vector<EvictionResult>* results);
  // Note [Tiers].
  // Rows read from a shard's cold tier under its reader lock, to be moved in
  // under the writer lock (records: each id's record number when read).
  struct ColdRows {
    std::vector<int64_t> ids;
    std::vector<float> rows;  // row_floats_ each
    std::vector<int64_t> freqs, versions, records;
    std::vector<char> found;
  };
  absl::Status OpenColdTier();
  // Closes and deletes the cold files (destructor).
  void CloseColdTier();
  // The row's optimizer slots hold their initial values.
  bool SlotsAtInit(const float* row) const;
  std::string ColdPath(int shard) const;
  // Reads the rows of `ids` (distinct) that s.cold holds into `out`.
  absl::Status ReadCold(const Shard& s, std::vector<int64_t> ids,
                        ColdRows* out) const ABSL_SHARED_LOCKS_REQUIRED(s.mu);
  // Moves the rows of `wanted` (distinct) that s.cold holds into memory,
  // taking them from `have` (read earlier; may be null) where their record
  // is unchanged and reading the others now.
  absl::Status PromoteCold(Shard& s, absl::Span<const int64_t> wanted,
                           const ColdRows* have)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // The most rows shard s may keep in memory now.
  int64_t HotCap(const Shard& s) const ABSL_SHARED_LOCKS_REQUIRED(s.mu);
  // Demotes rows of s (never one of `keep`, the ids of the batch at hand)
  // until `need` more fit under HotCap. On a failed write nothing moves and
  // the error is returned.
  absl::Status MakeRoom(Shard& s, int64_t need, absl::Span<const int64_t> keep)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Gives back the slabs beyond what `cap` rows need, moving their rows to
  // free slots below (the cap shrinks as the cold tier's index grows).
  void ReleaseSlabs(Shard& s, int64_t cap) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  // Removes `id`'s row from memory without logging a deletion (it moved).
  void FreeSlot(Shard& s, uint32_t slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
    Meta(s, slot).version = kFreeSlotVersion;
    s.free_slots.push_back(slot);
  }

  // Every shard's lock, in shard order (AttachBase, Clear: base_ changes
  // only under all of them).
  void LockAllShards() const ABSL_NO_THREAD_SAFETY_ANALYSIS;
  void UnlockAllShards() const ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // The shared body of Apply*: `update(grad, row)` updates one row. Defined
  // and instantiated in the .cc only.
  template <typename Update>
  absl::Status ApplyImpl(absl::Span<const int64_t> ids,
                         absl::Span<const float> grads, int64_t step,
                         int64_t cost_per_id_ns, ThreadPool* pool,
                         ApplyResult* result, const Update& update);
  absl::Status CheckApplyArgs(const char* op, absl::Span<const int64_t> ids,
                              absl::Span<const float> grads,
                              int needed_slots) const;
  // FailedPrecondition unless the table was created for optimizer `kind`,
  // whose rows carry `slots` (named in the message).
  absl::Status RequireOptimizer(const char* op, OptimizerKind kind,
                                const char* slots) const;

  // Export helpers (hash_embedding_table_io.cc).
  absl::Status ValidateChunk(const TableChunk& chunk) const;
  std::vector<int64_t> CollectKeys(int64_t since_step, ThreadPool* pool) const;
  absl::StatusOr<TableChunk> CopyChunk(absl::Span<const int64_t> keys,
                                       bool include_values, bool include_slots,
                                       ThreadPool* pool) const;
  Tensor DeletedIdsSince(int64_t since_step) const;
  absl::Status ExportInStorageOrder(
      const ExportOptions& options,
      const std::function<absl::Status(const TableChunk&)>& sink,
      ExportResult* result, ThreadPool* pool) const;

  const EmbeddingTableOptions options_;
  const bool quantized_;  // row_format is not float32
  const int num_slots_;
  const int64_t row_floats_;    // dim * (1 + num_slots)
  // sizeof(RowMeta) + 4 * row_floats_ (or the encoded row's bytes), 8-aligned
  const int64_t stride_bytes_;
  int shard_shift_;             // 64 - log2(num_shards)
  int slab_shift_;              // log2(rows_per_slab)
  uint32_t slab_mask_;
  int64_t rows_per_slab_;
  std::vector<float> default_row_;
  std::vector<float> slot_init_;  // initial value per slot
  RowInitializer initializer_;
  std::unique_ptr<Shard[]> shards_;
  // Note [Base rows]. Read under any shard's lock; written under all of
  // them (LockAllShards).
  std::shared_ptr<const MappedRows> base_;
  // base_ != nullptr, readable without a lock (a hint: check base_ under a
  // lock before using it).
  std::atomic<bool> has_base_hint_{false};
  // Note [Tiers].
  const bool tiered_;
  int64_t shard_budget_bytes_ = 0;
  std::string cold_prefix_;  // path prefix of the shards' cold files
  // Held shared by whatever moves rows between memory and the cold tier
  // (taken before a shard's lock), exclusively by Export.
  mutable SharedMutex migration_mu_;
  std::atomic<int64_t> clock_{0};
  // KeepDeletionsAfter's step; int64 max: none.
  std::atomic<int64_t> keep_deletions_after_{std::numeric_limits<int64_t>::max()};
};

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_HASH_EMBEDDING_TABLE_H_
