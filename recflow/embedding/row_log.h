// RowLog: a log-structured file of embedding rows, the on-disk store behind
// a table's cold rows (issue #27's tiers). Rows written back from memory are
// appended as fixed-size records; an in-memory index maps each id to its
// newest record (and that record's version, so a delta can be chosen
// without reading the file); records replaced or removed become dead and
// are dropped by Compact, which rewrites the live ones into a fresh file.
//
//   ASSIGN_OR_RETURN(auto log, RowLog::Create(env, "/ssd/emb.rowlog",
//   {.row_floats = 32})); RETURN_IF_ERROR(log->Put(ids, rows, freqs,
//   versions)); RETURN_IF_ERROR(log->Get(ids, out_rows, out_freqs,
//   out_versions, &found, pool));
//
// Record layout (little endian, `RecordBytes()` bytes each, back to back
// from offset 0): id int64 | version int64 | frequency int64 | row_floats
// float32 (weights, then optimizer slots). The file is scratch: it holds
// what memory could not, and a table's checkpoints never point into it, so
// Create truncates any old file and nothing is synced. A process killed
// while writing leaves a file the next Create discards.
//
// Memory: the index, 17 bytes per slot (id -> record number, version hint),
// about 20-40 bytes per live row.
//
// Thread-compatible: Put, Remove and Compact need exclusive access; Get,
// Contains, VersionOf and ForEach may run concurrently with one another.
#ifndef RECFLOW_EMBEDDING_ROW_LOG_H_
#define RECFLOW_EMBEDDING_ROW_LOG_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/env.h"
#include "recflow/core/threadpool.h"

namespace recflow::embedding {

struct RowLogOptions {
  // Floats per row (dim * (1 + slots)). REQUIRES: > 0.
  int64_t row_floats = 0;
  // Records gathered before one append (Put of many rows writes in pieces
  // of this many bytes).
  int64_t write_buffer_bytes = 4 << 20;
};

struct RowLogStats {
  int64_t live = 0;        // rows the index points to
  int64_t dead = 0;        // records replaced or removed since the last compaction
  int64_t file_bytes = 0;  // (live + dead) records
  int64_t index_bytes = 0;
  int64_t compactions = 0;
};

class RowLog {
 public:
  // Creates (or truncates) the file at `path`. InvalidArgument for a bad
  // option; the Env's error naming the path when it cannot be created.
  static absl::StatusOr<std::unique_ptr<RowLog>> Create(Env* env, const std::string& path,
                                                        const RowLogOptions& options);
  ~RowLog();
  RowLog(const RowLog&) = delete;
  RowLog& operator=(const RowLog&) = delete;

  int64_t row_floats() const { return options_.row_floats; }
  int64_t RecordBytes() const { return 24 + 4 * options_.row_floats; }
  int64_t size() const { return static_cast<int64_t>(index_.size()); }
  const std::string& path() const { return path_; }

  // Appends row i of `rows` ([n, row_floats]) for ids[i], with freqs[i] and
  // versions[i]; an id already in the log gets the new record (the old one
  // is dead). A repeated id: the later row wins. InvalidArgument for sizes
  // that do not match. A failed write returns the Env's error naming the
  // file; the rows of that piece (write_buffer_bytes) keep their old
  // records (earlier pieces of the call are in), and later Puts fail with
  // FailedPrecondition until Compact rewrites the file.
  absl::Status Put(absl::Span<const int64_t> ids, absl::Span<const float> rows,
                   absl::Span<const int64_t> freqs, absl::Span<const int64_t> versions);

  // Reads the rows of `ids`: for each id in the log, found[i] = 1 and row i
  // of rows_out ([n, row_floats]), freqs_out[i] and versions_out[i] are
  // filled; other positions are left alone (found[i] = 0). Records are read
  // with one positioned read each, spread over `pool` (may be null).
  // DataLoss naming the file when a record is short or holds another id.
  absl::Status Get(absl::Span<const int64_t> ids, absl::Span<float> rows_out,
                   absl::Span<int64_t> freqs_out, absl::Span<int64_t> versions_out,
                   std::vector<char>* found, ThreadPool* pool = nullptr) const;

  bool Contains(int64_t id) const { return index_.contains(id); }
  // The version of id's record, or -1 when absent. Versions of 2^32 - 1
  // and more are read from the record (the index keeps 32 bits of one).
  int64_t VersionOf(int64_t id) const;

  // The number of id's record (it changes when the row is written again or
  // the log compacted), or -1 when absent.
  int64_t RecordOf(int64_t id) const {
    auto it = index_.find(id);
    return it == index_.end() ? -1 : static_cast<int64_t>(it->second.record);
  }
  // Memory of the index (RowLogStats::index_bytes).
  int64_t index_bytes() const {
    return static_cast<int64_t>(index_.capacity()) *
           (sizeof(int64_t) + sizeof(Entry) + 1);
  }
  // Records in the file (live and dead); record numbers run [0, records()).
  uint64_t records() const { return records_; }

  // The ids whose version may be > since_step (all for since_step < 0):
  // every id whose version is, and possibly a few more (versions of 2^32 - 1
  // and more are not told apart in memory). Unordered; reads no file.
  std::vector<int64_t> IdsSince(int64_t since_step) const;

  // Reads records [begin, end) with one sequential read and appends the
  // live ones (those the index points to) with version > since_step to the
  // outputs: ids, rows (row_floats each), freqs, versions. A range past
  // records() is cut to it. DataLoss naming the file for a short read.
  absl::Status ReadRange(uint64_t begin, uint64_t end, int64_t since_step,
                         std::vector<int64_t>* ids, std::vector<float>* rows,
                         std::vector<int64_t>* freqs,
                         std::vector<int64_t>* versions) const;

  // Sizes the index for `rows` rows (never shrinks it).
  void Reserve(int64_t rows) {
    if (rows > static_cast<int64_t>(index_.size())) index_.reserve(static_cast<size_t>(rows));
  }

  // Forgets `ids` (their records become dead); returns how many it had.
  int64_t Remove(absl::Span<const int64_t> ids);

  // Hands every live row with version > since_step (all for since_step < 0)
  // to `fn` in file order, in chunks of at most max_rows: ids, rows
  // [m, row_floats], freqs, versions. Reads the file sequentially; stops at
  // fn's first error.
  using ChunkFn = std::function<absl::Status(
      absl::Span<const int64_t> ids, absl::Span<const float> rows,
      absl::Span<const int64_t> freqs, absl::Span<const int64_t> versions)>;
  absl::Status ForEach(int64_t since_step, int64_t max_rows, const ChunkFn& fn) const;

  // Rewrites the live records into a fresh file (renamed over the old one)
  // when dead records outnumber live ones, after a failed Put, or always
  // with force. On an error the log stays as it was.
  absl::Status Compact(bool force = false);

  RowLogStats GetStats() const;

 private:
  // 8 bytes, so an index slot is 16 (+1 control byte): the cold tier's
  // index is memory a tiered table spends per cold row.
  struct Entry {
    uint32_t record;
    uint32_t version_hint;  // min(version, kVersionSaturated)
  };
  static constexpr uint32_t kVersionSaturated = 0xffffffffu;
  static uint32_t Hint(int64_t version) {
    return version < 0 ? 0
                       : static_cast<uint32_t>(
                             std::min<int64_t>(version, kVersionSaturated));
  }
  RowLog(Env* env, std::string path, const RowLogOptions& options)
      : env_(env), path_(std::move(path)), options_(options) {}
  absl::Status Open();
  absl::Status ReadRecord(uint64_t record, char* buf) const;

  Env* const env_;  // Not owned.
  const std::string path_;
  const RowLogOptions options_;
  std::unique_ptr<WritableFile> writer_;
  std::unique_ptr<RandomAccessFile> reader_;
  uint64_t records_ = 0;  // records in the file
  absl::Status broken_;   // a failed append: no Put until Compact
  int64_t dead_ = 0;
  int64_t compactions_ = 0;
  absl::flat_hash_map<int64_t, Entry> index_;
};

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_ROW_LOG_H_
