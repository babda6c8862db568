// Private to recflow/data: what the file sources (TextLine in
// source_datasets.cc, TFRecord in tfrecord_dataset.cc) share. A source
// only says how to read one record from an open file; this file does the
// rest:
//
//   - the dataset: shard options and the records per element (k) checked,
//     this shard's files picked (file i belongs to shard i % num_shards),
//     the signature (a scalar string for k == 1, else a vector [<= k]; a
//     second, same-shaped component of origins with emit_origin) and the
//     DebugString "TextLine(3 files of 6, shard 1/2, lines_per_element=4,
//     emit_origin)";
//   - the iterator: the files opened in order through the context's Env; a
//     file that cannot be opened is a bad record "unreadable_file" (the
//     context's ErrorPolicy says whether it is skipped and counted, or
//     returned); up to k records gathered per element as they are read,
//     never in a tensor of k made up front (k is a user's batch size, and
//     the data may hold far fewer records), so std::bad_alloc while
//     gathering becomes ResourceExhausted; an error after some records ends
//     the element early and is returned by the next GetNext, in position;
//     the position saved and restored (file index, byte offset, records
//     consumed in the file under the source's key, and a pending error).
//
// Not thread-safe, as iterators are not.

#ifndef RECFLOW_DATA_FILE_SOURCE_H_
#define RECFLOW_DATA_FILE_SOURCE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset.h"

namespace recflow::data::internal {

// This many records are reserved for an element at first.
inline constexpr int64_t kInitialRecordReserve = 1 << 16;

// A DT_STRING tensor of `records` (moved out; the vector keeps its
// capacity): a scalar when `scalar` (REQUIRES: one record), else a vector.
// ResourceExhausted naming the source and `what` ("TextLine lines") when
// the tensor cannot be allocated.
absl::StatusOr<Tensor> MoveToStringTensor(std::vector<std::string>* records,
                                          bool scalar, absl::string_view source,
                                          absl::string_view what);

// Names that differ between the sources.
struct FileSourceKind {
  const char* name;              // "TextLine": in DebugString and errors
  const char* records;           // "lines": what an element gathers
  const char* per_element_attr;  // "lines_per_element": the option of k
  const char*
      counter_key;  // "line": the saved count of records read in the file
};

class FileSourceIteratorBase;

// The dataset of every file source; a source gives its names, its options'
// check and how to make its iterator.
class FileSourceDataset final : public DatasetBase {
 public:
  // Makes the source's iterator over `ds` (called only when ds is valid).
  using MakeIteratorFn = std::function<std::unique_ptr<FileSourceIteratorBase>(
      std::shared_ptr<const FileSourceDataset> ds,
      std::shared_ptr<const IteratorContext> ctx, const std::string& prefix)>;

  // `options_status` is the source's check of its other options; it is the
  // dataset's status when the shard and k (`per_element`) are valid.
  FileSourceDataset(const FileSourceKind& kind, std::vector<std::string> files,
                    ShardOptions shard, int64_t per_element, bool emit_origin,
                    absl::Status options_status, MakeIteratorFn make_iterator);

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;
  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }
  std::string DebugString() const override;
  absl::Status CheckValid() const override { return status_; }

  const FileSourceKind& kind() const { return kind_; }
  const std::vector<std::string>& files() const {
    return files_;
  }  // This shard's, in order.
  int64_t per_element() const { return per_element_; }
  bool emit_origin() const { return emit_origin_; }

 private:
  FileSourceKind kind_;
  std::vector<std::string> files_;
  int64_t total_files_;
  ShardOptions shard_;
  int64_t per_element_;
  bool emit_origin_;
  absl::Status status_;
  MakeIteratorFn make_iterator_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

// What a source's ReadRecord found.
enum class FileRead { kRecord, kEndOfFile, kBadRecord };

// A bad record or a read error, for the ErrorPolicy.
struct BadRecord {
  const char* reason = "";  // DataStats reason ("bad_crc")
  absl::Status error;       // names the file and the position
  // A record was consumed (it counts in DataStats' records read).
  bool counts_as_read = false;
  bool ends_file = false;  // the rest of the file is lost
};

// The iterator of a file source, but for reading an element
// (FileSourceIterator below).
class FileSourceIteratorBase : public IteratorBase {
 public:
  absl::Status Save(IteratorState* state) final;
  absl::Status Restore(const IteratorState& state) final;

 protected:
  FileSourceIteratorBase(std::shared_ptr<const FileSourceDataset> ds,
                         std::shared_ptr<const IteratorContext> ctx,
                         std::string prefix);

  // The source's hooks around one file. StartFile begins reading `file`
  // (owned here, open until EndFile) at `offset`: 0, or a value Offset()
  // returned. Offset() is the byte offset of the next unread record.
  virtual void StartFile(RandomAccessFile* file, uint64_t offset) = 0;
  virtual void EndFile() = 0;
  virtual uint64_t Offset() const = 0;

  // Opens the current file and starts it at the saved offset.
  absl::Status OpenFile();
  // Ends the open file, if any, and moves to the start of the next one.
  void NextFile();
  bool file_open() const { return file_ != nullptr; }
  bool past_last_file() const {
    return file_index_ >= static_cast<int64_t>(ds_->files().size());
  }
  // REQUIRES: !past_last_file().
  const std::string& CurrentPath() const { return ds_->files()[file_index_]; }
  const FileSourceDataset& dataset() const { return *ds_; }

  // For GetNext: the ResourceExhausted of a std::bad_alloc after n of k
  // records.
  absl::Status OutOfMemoryError(int64_t n, int64_t k) const;

  // Records consumed in the current file (1-based number of the last line
  // read; 0-based index of the next record). The source advances it.
  int64_t records_in_file_ = 0;
  // The element being gathered (kept for their capacity between calls).
  std::vector<std::string> records_;
  std::vector<std::string> origins_;
  // An error that ended the last element early; the next GetNext returns it.
  absl::Status pending_error_;

 private:
  std::shared_ptr<const FileSourceDataset> ds_;
  int64_t file_index_ = 0;
  uint64_t next_offset_ = 0;  // Where the next OpenFile starts.
  std::unique_ptr<RandomAccessFile> file_;
};

// GetNext, with the source's per-record calls inlined into the loop that
// gathers an element. `Source` derives from FileSourceIterator<Source> and
// has
//   FileRead ReadRecord(std::vector<std::string>* records, BadRecord* bad);
//     reads the next record of the open file: appends it to *records
//     (kRecord), or says the file ended (kEndOfFile) or fills *bad;
//   std::string Origin() const;
//     where the record just read came from ("path:LINE").
template <typename Source>
class FileSourceIterator : public FileSourceIteratorBase {
 public:
  absl::Status GetNext(Element* out, bool* end_of_sequence) final {
    out->clear();
    *end_of_sequence = false;
    if (!pending_error_.ok()) {
      absl::Status s = std::move(pending_error_);
      pending_error_ = absl::OkStatus();
      return s;
    }
    const int64_t k = dataset().per_element();
    const bool origin = dataset().emit_origin();
    // Up to k records, gathered as they are read (MoveToStringTensor).
    records_.clear();
    origins_.clear();
    records_.reserve(static_cast<size_t>(std::min(k, kInitialRecordReserve)));
    if (origin) origins_.reserve(records_.capacity());
    int64_t n = 0, read = 0;
    absl::Status error;
    try {
      error = Gather(k, origin, &n, &read);
    } catch (const std::bad_alloc&) {
      error = OutOfMemoryError(n, k);
    }
    if (read > 0 && stats() != nullptr) stats()->AddRecordsRead(read);
    if (!error.ok()) {
      if (n == 0) return error;
      pending_error_ = std::move(error);  // Returned next, in position.
    }
    if (n == 0) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    const FileSourceKind& kind = dataset().kind();
    absl::StatusOr<Tensor> records =
        MoveToStringTensor(&records_, k == 1, kind.name, kind.records);
    if (!records.ok()) return records.status();
    out->push_back(*std::move(records));
    if (origin) {
      absl::StatusOr<Tensor> origins =
          MoveToStringTensor(&origins_, k == 1, kind.name, "origins");
      if (!origins.ok()) return origins.status();
      out->push_back(*std::move(origins));
    }
    return absl::OkStatus();
  }

 protected:
  using FileSourceIteratorBase::FileSourceIteratorBase;

 private:
  // Reads up to k records into records_ (and their origins into origins_),
  // counting the records kept in *n and every record read in *read.
  // Returns the error that ended the element early, if any.
  absl::Status Gather(int64_t k, bool origin, int64_t* n, int64_t* read) {
    Source& source = static_cast<Source&>(*this);
    const ErrorPolicy& policy = context().error_policy;
    BadRecord bad;
    while (*n < k) {
      if (!file_open()) {
        if (past_last_file()) break;
        absl::Status s = OpenFile();
        if (!s.ok()) {
          NextFile();
          RETURN_IF_ERROR(HandleBadRecord(policy, stats(), "unreadable_file",
                                          std::move(s)));
        }
        continue;
      }
      switch (source.ReadRecord(&records_, &bad)) {
        case FileRead::kRecord:
          ++*read;
          if (origin) origins_.push_back(source.Origin());
          ++*n;
          break;
        case FileRead::kEndOfFile:
          NextFile();
          break;
        case FileRead::kBadRecord: {
          BadRecord b = std::exchange(bad, {});
          if (b.counts_as_read) ++*read;
          if (b.ends_file) NextFile();
          RETURN_IF_ERROR(
              HandleBadRecord(policy, stats(), b.reason, std::move(b.error)));
          break;
        }
      }
    }
    return absl::OkStatus();
  }
};

}  // namespace recflow::data::internal

#endif  // RECFLOW_DATA_FILE_SOURCE_H_
