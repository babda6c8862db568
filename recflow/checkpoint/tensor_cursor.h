// TensorCursor: streams one fixed-size tensor of a bundle, or the byte range
// [begin, end) of it, in order with positioned reads into the caller's
// buffers, extending a crc32c of what it read; Finish() checks the tensor's
// stored crc32c from the cursors that covered it. Lets a reader walk two
// tensors side by side (a table's values and slots, `recflow ckpt diff`'s
// two checkpoints), which BundleReader::ReadChunks' callback cannot, and
// walk consecutive ranges of one tensor in parallel (the table restore
// lanes, embedding/table_bundle.h), the ranges' crcs joined with
// crc32c::Combine.
//
//   ASSIGN_OR_RETURN(TensorCursor c, TensorCursor::Open(env, *reader, info));
//   while (c.remaining() > 0) {
//     const size_t n = std::min<uint64_t>(c.remaining(), buffer.size());
//     RETURN_IF_ERROR(c.Read(n, buffer.data()));
//     ...
//   }
//   RETURN_IF_ERROR(c.Finish());
//
// Errors name the tensor and the data file: DataLoss for a data file
// shorter than the tensor's entry (at Open, "truncated"), a short read, and
// a checksum mismatch ("checksum mismatch for tensor 'T' in FILE", as
// BundleReader says it).
//
// Thread-compatible: one cursor per thread; cursors over one tensor may be
// read concurrently. Movable, not copyable; owns its open data file.
#ifndef RECFLOW_CHECKPOINT_TENSOR_CURSOR_H_
#define RECFLOW_CHECKPOINT_TENSOR_CURSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/env.h"

namespace recflow::checkpoint {

class TensorCursor {
 public:
  // Opens tensor `info` of `reader`'s bundle (its data file through `env`,
  // with direct I/O when reader.options().direct_io) for reading the bytes
  // [begin, end) of it, clamped to the tensor. DataLoss when the data file
  // is shorter than the tensor's entry says.
  static absl::StatusOr<TensorCursor> Open(Env* env, const BundleReader& reader,
                                           const TensorInfo& info, uint64_t begin = 0,
                                           uint64_t end = ~uint64_t{0});

  // Reads the next n bytes of the range into dst. DataLoss when fewer than
  // n remain in the range or in the file.
  absl::Status Read(size_t n, char* dst);
  // Bytes of the range not read yet.
  uint64_t remaining() const { return end_ - pos_; }

  // Checks that `parts` (cursors over consecutive ranges of one tensor, in
  // order, from byte 0) read all of it, and that its crc32c matches the
  // stored one. REQUIRES: !parts.empty().
  static absl::Status Finish(const std::vector<const TensorCursor*>& parts);
  // The same for one cursor that covers the whole tensor.
  absl::Status Finish() const { return Finish({this}); }

 private:
  TensorCursor() = default;

  TensorInfo info_;
  std::string path_;
  std::unique_ptr<RandomAccessFile> file_;
  uint64_t begin_ = 0, end_ = 0;
  uint64_t pos_ = 0;
  uint32_t crc_ = 0;
};

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_TENSOR_CURSOR_H_
