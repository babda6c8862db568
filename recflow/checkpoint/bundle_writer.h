// BundleWriter: writes a tensor-bundle checkpoint (bundle_format.h),
// streaming, sharded by size, and published atomically.
//
//   ASSIGN_OR_RETURN(auto writer, BundleWriter::Create(env, "/ckpt/model.ckpt-100"));
//   RETURN_IF_ERROR(writer->Add("dense/w", w));
//   RETURN_IF_ERROR(writer->AddChunks("emb/values", DT_FLOAT, {n, 64}, ExportRows));
//   RETURN_IF_ERROR(writer->Finish());
//
// Memory: tensor bytes are copied and checksummed into a bounded, aligned
// buffer (options.buffer_bytes) that goes to the current data shard when
// full. The write system calls run on a background thread, so filling and
// checksumming the next buffer overlaps writing the previous one; at most
// two full buffers wait for it (3 * buffer_bytes in all), and the buffers
// are reused. Data shards are written with direct I/O where the file
// system allows (options.direct_io), from the buffers themselves. Only the index entries
// (a few dozen bytes per tensor) are kept until Finish, so a model never has
// to fit in memory twice, and AddChunks lets a producer (a hash table
// exporting its rows) hand over a huge tensor in pieces without ever
// building it.
//
// Atomicity: everything is written under temporary names
// ("P.data-00000.tempstate<random>", "P.index.tempstate<random>"). Finish
// syncs and closes the shards, renames them to their final names
// "P.data-0000k-of-0000N" (N is known only then), writes and syncs the
// index under its temporary name and renames it to "P.index" last; the
// index is the commit point. A crash or error before that leaves no
// "P.index", so readers never see a partial bundle, and never touches files
// of bundles at other prefixes. (Overwriting an existing bundle at the same
// prefix is not atomic: its data files are replaced before its index.)
// On error, or when the writer is destroyed without Finish, the temporary
// files are deleted (best effort).
//
// Not thread-safe.
#ifndef RECFLOW_CHECKPOINT_BUNDLE_WRITER_H_
#define RECFLOW_CHECKPOINT_BUNDLE_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/core/direct_file.h"
#include "recflow/core/env.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/tensor_bundle.pb.h"

namespace recflow::checkpoint {

struct BundleWriterOptions {
  // A new data shard is started when the next tensor would take the current
  // one past this many bytes (a tensor is never split across shards, so a
  // tensor larger than this gets a shard of its own). 0: one shard, as
  // TensorFlow writes.
  uint64_t max_shard_bytes = 0;
  // The write buffer (TensorFlow uses 8 MiB); rounded up to a multiple of
  // kDirectIoAlignment.
  size_t buffer_bytes = 8 << 20;
  // Write the data shards with direct I/O (Env::NewDirectWritableFile):
  // a save streams gigabytes the process will not read back, so they skip
  // the page cache. Where the file system or Env has no direct I/O, the
  // shards are ordinary files. The index is always an ordinary file.
  bool direct_io = true;
  // Fixed-size tensors of at least this many bytes start at a multiple of
  // kDirectIoAlignment (4 KiB) in their shard, after zero padding that no
  // entry covers (readers, TensorFlow's included, go by each entry's offset
  // and size), so a direct read fills them in place. Smaller tensors are
  // packed one after another, as TensorFlow writes them. 0: pack all.
  uint64_t align_tensors_from_bytes = 1 << 20;
  // fsync the data shards and the index before publishing them, and the
  // directory after. Off only for tests and throwaway bundles.
  bool sync = true;
};

class BackgroundAppender;

class BundleWriter {
 public:
  // Creates the prefix's directory if needed and opens the first shard.
  static absl::StatusOr<std::unique_ptr<BundleWriter>> Create(
      Env* env, absl::string_view prefix, const BundleWriterOptions& options = {});
  // Deletes the temporary files unless Finish succeeded.
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;

  // Appends `tensor` under `name`. InvalidArgument for an empty or
  // duplicate name, an uninitialized tensor or a dtype bundles cannot hold
  // (resource, variant). After any error the writer is dead: every later
  // call returns that error.
  absl::Status Add(absl::string_view name, const Tensor& tensor);

  // Appends `part`, the slice `slice` of a tensor `name` of shape
  // `full_shape` (TensorFlow's BundleWriter::AddSlice, behind SaveV2 with a
  // shape_and_slice): a slice covering the whole tensor is an ordinary Add;
  // otherwise the entry under `name` gets `slice` added to its `slices`
  // (it holds dtype and shape, no data) and `part` goes under the slice key
  // EncodeTensorNameSlice(name, slice) (tensor_slice.h). InvalidArgument
  // when `part`'s shape is not the slice's, when `name` was added whole, or
  // when earlier slices of `name` had another dtype or full shape.
  absl::Status AddSlice(absl::string_view name, const TensorShape& full_shape,
                        const std::vector<SliceExtentInfo>& slice, const Tensor& part);

  // Appends a tensor of `dtype` (fixed-size types only) and `shape` whose
  // bytes (little endian, row major) `produce` hands to `sink` in pieces of
  // any size, in order; each piece must stay valid until sink returns. The
  // pieces must add up to exactly shape.num_elements() * DataTypeSize(dtype)
  // bytes (InvalidArgument otherwise). An error returned by `produce` (or
  // by sink, which `produce` should pass on) kills the writer.
  using ChunkSink = std::function<absl::Status(absl::string_view piece)>;
  absl::Status AddChunks(absl::string_view name, DataType dtype, const TensorShape& shape,
                         const std::function<absl::Status(const ChunkSink& sink)>& produce);

  // Publishes the bundle (see the top of this file). The writer cannot be
  // used afterwards.
  absl::Status Finish();

  const std::string& prefix() const { return prefix_; }
  int num_tensors() const { return static_cast<int>(entries_.size()); }
  // Data bytes written so far, over all shards.
  uint64_t data_bytes() const { return total_bytes_; }

 private:
  BundleWriter(Env* env, std::string prefix, const BundleWriterOptions& options);
  absl::Status OpenShard();
  absl::Status CloseShard();
  // Starts a new shard when `bytes` more would overflow the current one.
  absl::Status MaybeStartShard(uint64_t bytes);
  // Pads the shard to a 4 KiB boundary before a fixed-size tensor of
  // `bytes` (options_.align_tensors_from_bytes).
  absl::Status MaybeAlign(uint64_t bytes);
  // Appends to the current shard; extends *crc over the bytes.
  absl::Status Append(absl::string_view data, uint32_t* crc);
  absl::Status FlushBuffer();
  // Waits for the background writes; the first write error kills the writer.
  absl::Status DrainWrites();
  absl::Status CheckNewEntry(absl::string_view name, DataType dtype);
  absl::Status Fail(absl::Status s);
  void DeleteTemporaryFiles();
  std::string TempDataFilename(int shard) const;

  Env* const env_;  // Not owned.
  const std::string prefix_;
  const BundleWriterOptions options_;
  const std::string temp_suffix_;
  absl::Status status_;
  bool finished_ = false;

  std::unique_ptr<WritableFile> shard_;
  // Writes buffers to shard_ on its own thread (bundle_writer.cc); drained
  // before shard_ is synced, closed or replaced.
  std::unique_ptr<BackgroundAppender> appender_;
  int num_shards_ = 0;        // shards opened so far
  uint64_t shard_bytes_ = 0;  // bytes in the current shard
  uint64_t total_bytes_ = 0;
  AlignedBuffer buffer_;      // options_.buffer_bytes, rounded up
  std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries_;
};

// Writes the index of a bundle at `prefix` from a header and entries sorted
// by name, through a temporary file renamed over "prefix.index". Used by
// BundleWriter::Finish and MergeBundles.
absl::Status WriteBundleIndex(
    Env* env, absl::string_view prefix, const tensorflow::BundleHeaderProto& header,
    const std::map<std::string, tensorflow::BundleEntryProto, std::less<>>& entries,
    bool sync);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_BUNDLE_WRITER_H_
