// The building blocks of the LevelDB "table" (SSTable) file format, which a
// tensor bundle's `.index` file uses (TensorFlow's tensorflow/core/lib/io
// table, itself LevelDB's format): little-endian fixed-width integers,
// varints, block handles, the 48-byte footer, the per-block trailer, and the
// builder of one prefix-compressed block. docs/formats/checkpoint.md states
// the byte layout.
//
// Everything here is a pure function or a single-threaded builder; decoders
// take untrusted bytes and report malformed input as DataLoss, never crash.
#ifndef RECFLOW_CHECKPOINT_TABLE_FORMAT_H_
#define RECFLOW_CHECKPOINT_TABLE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"

namespace recflow::table {

// --- Integer coding (LevelDB's coding.h, little endian) ---------------------

void PutFixed32(std::string* dst, uint32_t value);
void PutFixed64(std::string* dst, uint64_t value);
void PutVarint32(std::string* dst, uint32_t value);
void PutVarint64(std::string* dst, uint64_t value);
// Bytes PutVarint64 would write for `value` (1..10).
int VarintLength(uint64_t value);
uint32_t DecodeFixed32(const char* p);
uint64_t DecodeFixed64(const char* p);
// Parse a varint from the front of *input and advance past it. False when
// the input ends inside the varint or the value does not fit.
bool GetVarint32(absl::string_view* input, uint32_t* value);
bool GetVarint64(absl::string_view* input, uint64_t* value);

// --- Block handles and the footer -----------------------------------------

// Where a block lies in the file: [offset, offset + size) holds the block
// contents; the 5-byte trailer follows.
struct BlockHandle {
  uint64_t offset = 0;
  uint64_t size = 0;

  // Two varint64s.
  static constexpr size_t kMaxEncodedLength = 10 + 10;
  void EncodeTo(std::string* dst) const;
  bool DecodeFrom(absl::string_view* input);
};

// Footer: metaindex handle, index handle, zero padding to 40 bytes, then the
// magic number as a fixed64.
inline constexpr uint64_t kTableMagicNumber = 0xdb4775248b80fb57ull;
inline constexpr size_t kFooterSize = 2 * BlockHandle::kMaxEncodedLength + 8;

struct Footer {
  BlockHandle metaindex_handle;
  BlockHandle index_handle;

  void EncodeTo(std::string* dst) const;  // appends exactly kFooterSize bytes
  // DataLoss naming `file_name` on a bad magic number or bad handles.
  absl::Status DecodeFrom(absl::string_view input, absl::string_view file_name);
};

// Each block is followed by a 1-byte compression type and the masked crc32c
// of the block contents plus that type byte.
inline constexpr size_t kBlockTrailerSize = 5;
enum CompressionType : char {
  kNoCompression = 0x0,
  kSnappyCompression = 0x1,
};

// Reads the block at `handle` from `file` (named `file_name` in errors),
// checks its crc and decompresses it. DataLoss when the block lies past the
// end of the file ("truncated"), its checksum does not match, its
// compression type is unknown or its snappy data is corrupt. Blocks larger
// than `max_block_bytes` (before or after decompression) are refused as
// corrupt without allocating.
absl::StatusOr<std::string> ReadBlock(const RandomAccessFile& file,
                                      uint64_t file_size,
                                      const BlockHandle& handle,
                                      absl::string_view file_name,
                                      uint64_t max_block_bytes);

// --- Building a block -----------------------------------------------------

// Builds one block: keys prefix-compressed against the previous key, with a
// full key every `restart_interval` entries (a restart point), then the
// restart offsets and their count as fixed32s. Entries:
//   varint32 shared_key_bytes, varint32 unshared_key_bytes,
//   varint32 value_bytes, unshared key bytes, value bytes.
// Not thread-safe.
class BlockBuilder {
 public:
  explicit BlockBuilder(int restart_interval);

  // REQUIRES: key > every key added since the last Reset (bytewise order).
  void Add(absl::string_view key, absl::string_view value);
  // The finished block contents; valid until Reset.
  absl::string_view Finish();
  void Reset();

  // Size of the block Finish would return now.
  size_t CurrentSizeEstimate() const;
  bool empty() const { return buffer_.empty(); }

 private:
  const int restart_interval_;
  std::string buffer_;
  std::vector<uint32_t> restarts_;
  int counter_ = 0;
  bool finished_ = false;
  std::string last_key_;
};

// LevelDB's bytewise comparator helpers, used to pick short index keys:
// FindShortestSeparator turns `start` into a short key k with
// start <= k < limit; FindShortSuccessor turns `key` into a short k >= key.
void FindShortestSeparator(std::string* start, absl::string_view limit);
void FindShortSuccessor(std::string* key);

}  // namespace recflow::table

#endif  // RECFLOW_CHECKPOINT_TABLE_FORMAT_H_
