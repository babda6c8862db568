// BundleReader: reads a tensor-bundle checkpoint (bundle_format.h), ours or
// TensorFlow's (any release that writes V2 checkpoints, including old
// snappy-compressed indexes).
//
//   ASSIGN_OR_RETURN(auto reader, BundleReader::Open(env, "/ckpt/model.ckpt-100"));
//   ASSIGN_OR_RETURN(Tensor w, reader->Lookup("dense/w"));
//   ASSIGN_OR_RETURN(auto all, reader->LookupMany(names, pool));  // in parallel
//
// Reads are partial: only the entries asked for are read, each with one
// positioned read per chunk into the result's own buffer (no whole-file
// reads), and each tensor's crc32c is checked against its index entry.
// ReadChunks streams one tensor to a consumer in pieces instead (for a hash
// table importing rows).
//
// Files are untrusted. Errors name the tensor and the file:
//   NotFound          the index or a data file does not exist, or the
//                     tensor is not in the bundle
//   DataLoss          truncated or corrupted index (footer, blocks,
//                     entries), an entry whose size disagrees with its
//                     dtype and shape, a data file shorter than its
//                     entries, or a checksum mismatch
//   ResourceExhausted a tensor too large to allocate
//   Unimplemented     big-endian bundles and dtypes recflow tensors cannot
//                     hold (variant)
//
// Tensors TensorFlow saved in parts (partitioned variables, "slices") are
// assembled from their parts by Lookup and ReadChunks; ListTensors lists
// the whole tensor, not its parts (tensor_slice.h).
//
// Thread-safe: all methods may be called concurrently.
#ifndef RECFLOW_CHECKPOINT_BUNDLE_READER_H_
#define RECFLOW_CHECKPOINT_BUNDLE_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/checkpoint/table.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/proto/tensor_bundle.pb.h"

namespace recflow::checkpoint {

struct BundleReaderOptions {
  // Bytes per positioned read (and per ReadChunks piece).
  size_t read_chunk_bytes = 8 << 20;
  // Read the data files with direct I/O (Env::NewDirectRandomAccessFile):
  // a restore streams gigabytes once, so they skip the page cache (reads
  // under 64 KiB still use it). Ordinary files where the file system or Env
  // has no direct I/O. The index is always an ordinary file.
  bool direct_io = true;
};

class BundleReader {
 public:
  // Opens "prefix.index" and reads its header. Data files are opened on
  // first use.
  static absl::StatusOr<std::unique_ptr<BundleReader>> Open(
      Env* env, absl::string_view prefix, const BundleReaderOptions& options = {});

  const std::string& prefix() const { return prefix_; }
  const BundleReaderOptions& options() const { return options_; }
  int num_shards() const { return header_.num_shards(); }
  const tensorflow::BundleHeaderProto& header() const { return header_; }

  // Every tensor in the bundle, sorted by name.
  absl::StatusOr<std::vector<TensorInfo>> ListTensors() const;
  bool Contains(absl::string_view name) const;
  // The index entry of one tensor, validated (dtype, shape, shard, size).
  absl::StatusOr<TensorInfo> GetInfo(absl::string_view name) const;

  // Reads one tensor and checks its crc.
  absl::StatusOr<Tensor> Lookup(absl::string_view name) const;
  // Reads the part `slice` of tensor `name` (TensorFlow's
  // BundleReader::LookupSlice, behind RestoreV2 with a shape_and_slice):
  // from a tensor saved whole, or from the saved parts of a sliced one
  // that overlap `slice` (only those are read). NotFound when the saved
  // parts do not cover `slice`; InvalidArgument when `slice` does not fit
  // the tensor's shape.
  absl::StatusOr<Tensor> LookupSlice(absl::string_view name,
                                     const std::vector<SliceExtentInfo>& slice) const;
  // Reads several tensors, in parallel on `pool` when it is not null (one
  // task per tensor); results in the order of `names`. The first error
  // (in `names` order) is returned.
  absl::StatusOr<std::vector<Tensor>> LookupMany(const std::vector<std::string>& names,
                                                 ThreadPool* pool) const;
  // Every tensor in the bundle, sorted by name, read in parallel on `pool`
  // when it is not null.
  absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> ReadAll(ThreadPool* pool) const;
  // Streams a fixed-size-type tensor to `consume` in pieces of at most
  // options.read_chunk_bytes, in order. The crc is checked after the last
  // piece: on DataLoss the consumer must discard what it received.
  absl::Status ReadChunks(absl::string_view name,
                          const std::function<absl::Status(absl::string_view)>& consume) const;

  // Calls fn for each entry (header excluded) in name order, unvalidated.
  // For tools such as MergeBundles that copy entries.
  absl::Status ForEachEntry(
      const std::function<absl::Status(absl::string_view name,
                                       const tensorflow::BundleEntryProto& entry)>& fn) const;

 private:
  BundleReader(Env* env, std::string prefix, const BundleReaderOptions& options)
      : env_(env), prefix_(std::move(prefix)), options_(options) {}
  absl::StatusOr<TensorInfo> ParseEntry(absl::string_view name,
                                        absl::string_view value) const;
  // The data file of `shard` and its size, opened once.
  absl::Status GetDataFile(int shard, const RandomAccessFile** file, uint64_t* size,
                           std::string* path) const;
  absl::Status ReadPod(const TensorInfo& info, Tensor* out) const;
  absl::Status ReadStrings(const TensorInfo& info, Tensor* out) const;
  // A tensor saved in parts: each part read and copied into place.
  absl::Status ReadSliced(const TensorInfo& info, Tensor* out) const;
  // Reads the saved part `slice` of sliced tensor `info`, checked against
  // the whole tensor's dtype and shape.
  absl::Status ReadPart(const TensorInfo& info, const std::vector<SliceExtentInfo>& slice,
                        Tensor* out) const;

  Env* const env_;  // Not owned.
  const std::string prefix_;
  const BundleReaderOptions options_;
  std::unique_ptr<RandomAccessFile> index_file_;
  std::unique_ptr<table::Table> table_;
  tensorflow::BundleHeaderProto header_;

  struct DataFile {
    std::unique_ptr<RandomAccessFile> file;
    uint64_t size = 0;
    std::string path;
  };
  mutable Mutex mu_;
  mutable std::vector<std::unique_ptr<DataFile>> data_files_ ABSL_GUARDED_BY(mu_);
};

// Merges the bundles at `prefixes` into one at `merged_prefix` (TensorFlow's
// MergeBundles, behind MergeV2Checkpoints): renames their data files to
// "merged_prefix.data-K-of-N", writes one index (atomically), and deletes
// the old index files. Tensor names must be unique across the inputs
// (InvalidArgument naming the duplicate). A prefix without an index is
// NotFound, or skipped when allow_missing_files (NotFound if none is left).
// `merged_prefix` may be one of `prefixes`.
absl::Status MergeBundles(Env* env, const std::vector<std::string>& prefixes,
                          absl::string_view merged_prefix, bool allow_missing_files,
                          bool sync = true);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_BUNDLE_READER_H_
