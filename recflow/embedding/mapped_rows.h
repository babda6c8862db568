// Open in place: a full table checkpoint used where it lies, without
// inserting its rows anywhere.
//
// A full save with TableBundleOptions::save_index writes, besides the
// table's row tensors (table_bundle.h), a hash index over them:
//
//   K/index   int64 [capacity, 2]   entry e = (id, row): K/keys[row] == id;
//                                   row -1 marks an empty entry
//   K/clock   int64 []              the table's clock (largest step) at the
//                                   save: what an opened table continues
//                                   from without reading K/versions
//
// Note [Table index]: open addressing with linear probing. The home entry
// of `id` is (Mix64(id) * capacity) >> 64 (a 128-bit product; Mix64 is
// MurmurHash3's fmix64, row_initializer.h), the probe goes on to the next
// entry (wrapping at the end) until it finds `id` or an empty entry.
// capacity = TableIndexCapacity(rows), at most 75% full. The exact hash and
// probe order are part of the format (docs/formats/checkpoint.md): a reader
// must probe the way the writer inserted.
//
// MappedRows maps the bundle's data file(s) (core/mapped_file.h) and finds
// rows through that index: a lookup touches one index entry (usually one
// cache line) and the row, so the first lookup runs as soon as the index
// entry is read (no row is copied, no index is built). The pages come in
// as they are touched; a background thread reads every mapped tensor once
// in order, which fills the page cache at the disk's sequential rate and
// checks each tensor's crc32c against the bundle's index entry. One thread
// per process runs these passes, one table after another in the order the
// tables were opened (a model's dozens of tables do not read the disk all
// at once).
// verify_status() turns DataLoss (naming the tensor and the file) if one
// does not match; HashEmbeddingTable refuses lookups from then on.
//
// HashEmbeddingTable::AttachBase makes a MappedRows the read-only bottom
// layer of a table (hash_embedding_table.h, Note [Base rows]); RestoreTable
// with TableBundleOptions::open_in_place does that instead of importing.
//
// Untrusted files: Open checks every tensor's dtype, shape, alignment and
// extent in its file; Find never reads outside the mapped tensors (a row
// number out of range counts as absent) and probes at most `capacity`
// entries. A file changed in place after Open (never done by recflow,
// which writes checkpoints once under a temporary name) is undefined
// behaviour: its pages may change or vanish under the mapping.
//
// Thread-safe: every method may be called concurrently.
#ifndef RECFLOW_EMBEDDING_MAPPED_ROWS_H_
#define RECFLOW_EMBEDDING_MAPPED_ROWS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/mapped_file.h"
#include "recflow/core/mutex.h"
#include "recflow/core/tensor.h"
#include "recflow/embedding/row_initializer.h"

namespace recflow::embedding {

// Entries of the index of a table of `rows` rows: ceil(rows / 0.75) (0 for
// no rows).
int64_t TableIndexCapacity(int64_t rows);

// The home entry of `id` in an index of `capacity` (> 0) entries.
inline int64_t TableIndexHome(int64_t id, int64_t capacity) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(Mix64(static_cast<uint64_t>(id))) *
                               static_cast<uint64_t>(capacity)) >>
                              64);
}

// Builds K/index while the keys are streamed in row order. Memory: 16 bytes
// per entry.
class TableIndexBuilder {
 public:
  // `rows`: the number of keys that Add will be given in all.
  static absl::StatusOr<TableIndexBuilder> Create(int64_t rows);
  // Adds the next keys (rows next_row, next_row + 1, ...). FailedPrecondition
  // past `rows` keys or for an id added before (a table's keys are
  // distinct).
  absl::Status Add(absl::Span<const int64_t> keys);
  // The index tensor; FailedPrecondition unless exactly `rows` keys came.
  absl::StatusOr<Tensor> Finish();

 private:
  TableIndexBuilder(int64_t rows, Tensor entries)
      : rows_(rows), capacity_(entries.dim_size(0)), entries_(std::move(entries)) {}
  int64_t rows_;
  int64_t capacity_;
  int64_t next_row_ = 0;
  Tensor entries_;
};

struct MappedRowsOptions {
  // Row tensors of the table: dim floats per row and, with `slots`,
  // num_slots slot vectors per row (K/slots mapped too; else not touched).
  int64_t dim = 0;
  int num_slots = 0;
  bool slots = false;
  // Start the background read-and-verify pass (tests turn it off to probe
  // a damaged file's lookups).
  bool verify = true;
};

class MappedRows {
 public:
  // Maps table `key` of `reader`'s bundle, read from local files (the
  // bundle's Env must be the POSIX Env::Default()). Errors:
  //   NotFound        no K/index (a checkpoint saved without it) or another
  //                   row tensor is missing
  //   Unimplemented   the tensors cannot be mapped as they lie (a table in
  //                   parts, a tensor saved in slices, not aligned for its
  //                   type)
  //   InvalidArgument a tensor's dtype or shape does not fit `options`
  //   DataLoss        a tensor reaches past the end of its file
  // The caller falls back to an ordinary restore on any of them.
  static absl::StatusOr<std::shared_ptr<MappedRows>> Open(const checkpoint::BundleReader& reader,
                                                          const std::string& key,
                                                          const MappedRowsOptions& options);
  ~MappedRows();  // stops the background pass
  MappedRows(const MappedRows&) = delete;
  MappedRows& operator=(const MappedRows&) = delete;

  int64_t size() const { return rows_; }
  int64_t dim() const { return dim_; }
  bool has_slots() const { return slots_ != nullptr; }

  // While the background pass has not read the table yet (a cold page
  // cache), asks the kernel to read, all at once, the pages the lookup of
  // `ids` will touch: their index entries, then (after those arrived) their
  // rows' weights and, with `training_state`, slots, frequencies and
  // versions. A cold batch then waits for two rounds of parallel reads
  // instead of a fault per page in turn. Does nothing once warm().
  void PrefetchForLookup(absl::Span<const int64_t> ids, bool training_state) const;
  // The background pass has read every mapped tensor (or was not run).
  bool warm() const { return warm_.load(std::memory_order_acquire); }

  // The row of `id`, or -1.
  int64_t Find(int64_t id) const {
    if (capacity_ == 0) return -1;
    int64_t e = TableIndexHome(id, capacity_);
    for (int64_t probes = 0; probes < capacity_; ++probes) {
      const int64_t* entry = index_ + 2 * e;
      const int64_t row = entry[1];
      if (row < 0) return -1;
      if (entry[0] == id) return row < rows_ ? row : -1;
      if (++e == capacity_) e = 0;
    }
    return -1;
  }
  // Prefetches the home entry of `id` (a batch's probes overlap their misses).
  void PrefetchIndex(int64_t id) const {
    if (capacity_ > 0) __builtin_prefetch(index_ + 2 * TableIndexHome(id, capacity_));
  }
  void PrefetchRow(int64_t row) const {
    __builtin_prefetch(values_ + row * dim_);
    __builtin_prefetch(values_ + (row + 1) * dim_ - 1);
  }

  // REQUIRES: 0 <= row < size().
  int64_t id(int64_t row) const { return keys_[row]; }
  const float* weights(int64_t row) const { return values_ + row * dim_; }
  // num_slots * dim floats; REQUIRES: has_slots().
  const float* slots(int64_t row) const { return slots_ + row * num_slots_ * dim_; }
  int64_t frequency(int64_t row) const { return frequencies_[row]; }
  int64_t version(int64_t row) const { return versions_[row]; }
  // K/clock: the saved table's clock.
  int64_t clock() const { return clock_; }

  // OK while the background pass runs and after it passed; DataLoss naming
  // the tensor and file once a checksum did not match.
  absl::Status verify_status() const;
  bool verify_failed() const { return failed_.load(std::memory_order_acquire); }
  // Blocks until the background pass ended (at once if it was not started)
  // and returns verify_status().
  absl::Status WaitVerified() const;
  // Bytes of the mapped tensors.
  int64_t mapped_bytes() const { return mapped_bytes_; }
  const std::string& source() const { return source_; }

 private:
  struct Region {
    std::string tensor;
    const MappedFile* file;
    uint64_t offset, size;
    uint32_t masked_crc32c;
  };
  MappedRows() = default;
  void VerifyAll();

  std::string source_;  // "prefix" for messages
  std::map<int, std::unique_ptr<MappedFile>> files_;  // by data shard
  std::vector<Region> regions_;                       // in verification order
  int64_t rows_ = 0, dim_ = 0, capacity_ = 0, mapped_bytes_ = 0, clock_ = 0;
  int num_slots_ = 0;
  const int64_t* keys_ = nullptr;
  const float* values_ = nullptr;
  const float* slots_ = nullptr;
  const int64_t* frequencies_ = nullptr;
  const int64_t* versions_ = nullptr;
  const int64_t* index_ = nullptr;

  std::atomic<bool> stop_{false};
  std::atomic<bool> warm_{false};
  std::atomic<int> regions_read_{0};  // regions_ the background pass has read
  std::atomic<bool> failed_{false};
  mutable Notification verified_;  // the background pass ended (or never started)
  mutable Mutex mu_;
  absl::Status verify_status_ ABSL_GUARDED_BY(mu_);
  // Queued on the process's one background reader (mapped_rows.cc): the
  // passes of many tables run one after another, reading the disk in
  // order, not all at once.
  bool queued_ = false;
};

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_MAPPED_ROWS_H_
