// Sorted string tables in LevelDB's "table" format, as TensorFlow's
// tensor-bundle `.index` files use them (tensorflow/core/lib/io/table*,
// byte-compatible with leveldb::Table): a sequence of data blocks, a
// metaindex block (empty here: no filters), an index block with one entry
// per data block, and a 48-byte footer. See table_format.h for the pieces
// and docs/formats/checkpoint.md for the byte layout.
//
// TableBuilder writes keys in increasing bytewise order, streaming blocks to
// a WritableFile (it holds one block in memory). Blocks are written
// uncompressed, as TensorFlow has done since 1.2.
//
// Table reads a table through a RandomAccessFile, one block at a time,
// keeping the index block and a bounded cache of data blocks. Files are untrusted: a short
// file, a bad footer magic, a block past the end of the file, a checksum
// mismatch, a malformed entry or an oversized block is a DataLoss naming
// the file; nothing is allocated from an unchecked size.
//
// Thread-safety: TableBuilder is not thread-safe. A Table is thread-safe
// (its iterators are not: use one per thread).
#ifndef RECFLOW_CHECKPOINT_TABLE_H_
#define RECFLOW_CHECKPOINT_TABLE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/checkpoint/table_format.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"

namespace recflow::table {

struct TableBuilderOptions {
  // Uncompressed size at which a data block is closed (TensorFlow's default
  // for tables: 256 KiB).
  size_t block_size = 256 * 1024;
  // Entries between restart points in data blocks (index blocks use 1).
  int block_restart_interval = 16;
};

class TableBuilder {
 public:
  // `file` is not owned and must outlive the builder; the builder appends
  // to it and never closes it.
  TableBuilder(const TableBuilderOptions& options, WritableFile* file);
  TableBuilder(const TableBuilder&) = delete;
  TableBuilder& operator=(const TableBuilder&) = delete;

  // InvalidArgument when `key` is not greater than the previous key; after
  // any error the builder refuses further calls with that error.
  absl::Status Add(absl::string_view key, absl::string_view value);
  // Writes the last data block, the metaindex and index blocks and the
  // footer. Does not sync or close the file.
  absl::Status Finish();

  uint64_t num_entries() const { return num_entries_; }
  // Bytes written so far (the file size after Finish).
  uint64_t FileSize() const { return offset_; }

 private:
  absl::Status FlushDataBlock();
  absl::Status WriteBlock(BlockBuilder* block, BlockHandle* handle);

  const TableBuilderOptions options_;
  WritableFile* file_;  // Not owned.
  absl::Status status_;
  uint64_t offset_ = 0;
  uint64_t num_entries_ = 0;
  BlockBuilder data_block_;
  BlockBuilder index_block_;
  std::string last_key_;
  // After a data block is written, its index entry waits for the next key
  // so that the separator can be short.
  bool pending_index_entry_ = false;
  BlockHandle pending_handle_;
  bool finished_ = false;
};

struct TableReadOptions {
  // A block (compressed or not) declaring more bytes than this is corrupt.
  uint64_t max_block_bytes = uint64_t{256} << 20;
  // Decoded data blocks kept for later lookups (a bundle reader looks up
  // many neighbouring keys); 0 disables the cache.
  size_t block_cache_bytes = 16 << 20;
};

class Table {
 public:
  // Opens the table in `file` (not owned; must outlive the Table) of
  // `file_size` bytes; `file_name` is for messages. Reads the footer and the
  // index block.
  static absl::StatusOr<std::unique_ptr<Table>> Open(
      const RandomAccessFile* file, uint64_t file_size, std::string file_name,
      const TableReadOptions& options = {});

  // Walks the table's entries in key order. Not thread-safe.
  class Iterator {
   public:
    virtual ~Iterator() = default;
    virtual bool Valid() const = 0;
    virtual void SeekToFirst() = 0;
    // Positions at the first key >= target.
    virtual void Seek(absl::string_view target) = 0;
    // REQUIRES: Valid().
    virtual void Next() = 0;
    virtual absl::string_view key() const = 0;
    virtual absl::string_view value() const = 0;
    // The first error met (an iterator that hit an error is not Valid()).
    virtual absl::Status status() const = 0;
  };
  std::unique_ptr<Iterator> NewIterator() const;

  // The value stored under exactly `key`; NotFound when absent.
  absl::StatusOr<std::string> Get(absl::string_view key) const;

  const std::string& file_name() const { return file_name_; }

  // Implementation details follow.
  Table(const RandomAccessFile* file, uint64_t file_size, std::string file_name,
        const TableReadOptions& options, std::string index_contents);
  // The contents of a data block, from the cache when there.
  absl::StatusOr<std::shared_ptr<const std::string>> ReadDataBlock(
      const BlockHandle& handle) const;
  const std::shared_ptr<const std::string>& index_contents() const {
    return index_contents_;
  }

 private:
  const RandomAccessFile* file_;  // Not owned.
  const uint64_t file_size_;
  const std::string file_name_;
  const TableReadOptions options_;
  const std::shared_ptr<const std::string> index_contents_;

  // Block cache: FIFO eviction once over options_.block_cache_bytes.
  mutable Mutex cache_mu_;
  using CacheKey = std::pair<uint64_t, uint64_t>;  // block offset, size
  mutable std::map<CacheKey, std::shared_ptr<const std::string>> cache_
      ABSL_GUARDED_BY(cache_mu_);
  mutable std::deque<CacheKey> cache_order_ ABSL_GUARDED_BY(cache_mu_);
  mutable size_t cache_bytes_ ABSL_GUARDED_BY(cache_mu_) = 0;
};

}  // namespace recflow::table

#endif  // RECFLOW_CHECKPOINT_TABLE_H_
