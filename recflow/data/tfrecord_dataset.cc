// Source: TFRecord files (Dataset::TFRecord, declared in dataset.h), built
// like the TextLine source in source_datasets.cc.
//
// Bad records (recflow/core/record_io.h tells them apart):
//   "bad_crc"          a data crc mismatch: the record is dropped, the file
//                      goes on with the next record
//   "record_too_long"  a (crc-valid) length over max_record_bytes: dropped
//                      without reading it, the file goes on
//   "truncated"        the file ends inside a record, or a length crc
//                      mismatch (the framing is lost): the file ends there
//   "unreadable_file"  the file cannot be opened or read: it is left out
// With ErrorMode::kFail GetNext returns the error (DataLoss naming the path,
// the byte offset and the 0-based record index) at that record's position;
// the next GetNext goes on as kSkip would.
//
// Position (Save/Restore): the index of the file in this shard's list, the
// byte offset of the next record in it, and the index of that record.

#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/record_io.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_internal.h"

namespace recflow::data {
namespace {

using internal::kInitialRecordReserve;
using internal::MoveToStringTensor;

class TFRecordDataset : public DatasetBase {
 public:
  TFRecordDataset(std::vector<std::string> files, ShardOptions shard,
                  TFRecordOptions opts)
      : total_files_(static_cast<int64_t>(files.size())),
        shard_(shard),
        opts_(opts) {
    if (shard.num_shards < 1 || shard.shard_index < 0 ||
        shard.shard_index >= shard.num_shards) {
      status_ = errors::InvalidArgument(
          "TFRecord: shard_index ", shard.shard_index, " of num_shards ",
          shard.num_shards,
          "; need num_shards >= 1 and 0 <= shard_index < num_shards");
    } else if (opts.records_per_element < 1) {
      status_ =
          errors::InvalidArgument("TFRecord: records_per_element is ",
                                  opts.records_per_element, "; must be >= 1");
    } else if (opts.max_record_bytes < 0 || opts.read_buffer_bytes < 1) {
      status_ = errors::InvalidArgument(
          "TFRecord: max_record_bytes (", opts.max_record_bytes,
          ") must be >= 0 and read_buffer_bytes (", opts.read_buffer_bytes,
          ") >= 1");
    }
    if (status_.ok()) {
      for (size_t i = 0; i < files.size(); ++i) {
        if (static_cast<int64_t>(i % shard.num_shards) == shard.shard_index) {
          files_.push_back(std::move(files[i]));
        }
      }
    }
    dtypes_.push_back(DT_STRING);
    shapes_.push_back(opts.records_per_element == 1
                          ? PartialShape({})
                          : PartialShape({kUnknownDim}));
    if (opts.emit_origin) {
      dtypes_.push_back(DT_STRING);
      shapes_.push_back(shapes_[0]);
    }
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }
  std::string DebugString() const override {
    std::string s = absl::StrCat("TFRecord(", files_.size(), " files");
    if (shard_.num_shards > 1) {
      absl::StrAppend(&s, " of ", total_files_, ", shard ", shard_.shard_index,
                      "/", shard_.num_shards);
    }
    if (opts_.records_per_element > 1) {
      absl::StrAppend(&s, ", records_per_element=", opts_.records_per_element);
    }
    if (opts_.emit_origin) absl::StrAppend(&s, ", emit_origin");
    return s + ")";
  }
  absl::Status CheckValid() const override { return status_; }

  const std::vector<std::string>& files() const { return files_; }
  const TFRecordOptions& opts() const { return opts_; }

 private:
  std::vector<std::string> files_;  // This shard's, in order.
  int64_t total_files_;
  ShardOptions shard_;
  TFRecordOptions opts_;
  absl::Status status_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

class TFRecordIterator : public IteratorBase {
 public:
  TFRecordIterator(std::shared_ptr<const TFRecordDataset> ds,
                   std::shared_ptr<const IteratorContext> ctx,
                   std::string prefix)
      : IteratorBase(std::move(ctx), std::move(prefix)), ds_(std::move(ds)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    if (!pending_error_.ok()) {
      absl::Status s = std::move(pending_error_);
      pending_error_ = absl::OkStatus();
      return s;
    }
    const int64_t k = ds_->opts().records_per_element;
    const bool origin = ds_->opts().emit_origin;
    // Up to k records, gathered as they are read (MoveToStringTensor).
    records_.clear();
    origins_.clear();
    records_.reserve(static_cast<size_t>(std::min(k, kInitialRecordReserve)));
    if (origin) origins_.reserve(records_.capacity());
    int64_t n = 0, read = 0;
    absl::Status error;
    try {
      error = ReadRecords(k, origin, &n, &read);
    } catch (const std::bad_alloc&) {
      error = errors::ResourceExhausted(
          "TFRecord: out of memory after ", n, " records of an element of up to ", k,
          " records (records_per_element; a batch size?)");
    }
    if (read > 0 && stats() != nullptr) stats()->AddRecordsRead(read);
    if (!error.ok()) {
      if (n == 0) return error;
      pending_error_ = error;  // Returned by the next call, in position.
    }
    if (n == 0) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Tensor records,
                     MoveToStringTensor(&records_, k == 1, "TFRecord records"));
    out->push_back(std::move(records));
    if (origin) {
      ASSIGN_OR_RETURN(Tensor origins,
                       MoveToStringTensor(&origins_, k == 1, "TFRecord origins"));
      out->push_back(std::move(origins));
    }
    return absl::OkStatus();
  }

  // Reads up to k records into records_ (and their origins into
  // origins_), counting the records kept in *n and every record read in
  // *read. Returns the error that ended the element early, if any.
  absl::Status ReadRecords(int64_t k, bool origin, int64_t* n, int64_t* read) {
    absl::Status error;
    std::string record;
    while (*n < k && error.ok()) {
      if (reader_ == nullptr) {
        if (file_index_ >= static_cast<int64_t>(ds_->files().size())) break;
        absl::Status s = OpenFile();
        if (!s.ok()) {
          NextFile();
          error = HandleBadRecord(context().error_policy, stats(),
                                  "unreadable_file", s);
        }
        continue;
      }
      absl::Status s = reader_->ReadRecord(&record);
      const RecordError kind = reader_->last_error();
      if (s.ok()) {
        ++*read;
        records_.push_back(std::move(record));
        if (origin) origins_.push_back(absl::StrCat(CurrentPath(), ":record ", record_index_));
        ++record_index_;
        ++*n;
        continue;
      }
      if (absl::IsOutOfRange(s) && kind == RecordError::kNone) {  // end of file
        NextFile();
        continue;
      }
      const char* reason = "unreadable_file";
      switch (kind) {
        case RecordError::kBadDataCrc:
          reason = "bad_crc";
          break;
        case RecordError::kTooLong:
          reason = "record_too_long";
          break;
        case RecordError::kTruncated:
        case RecordError::kBadLengthCrc:
          reason = "truncated";
          break;
        default:
          break;
      }
      absl::Status bad =
          kind == RecordError::kIo
              ? s
              : errors::DataLoss(s.message(), " (record ", record_index_, ")");
      ++*read;
      ++record_index_;
      // After a lost framing or a read error the rest of the file is gone.
      if (kind != RecordError::kBadDataCrc && kind != RecordError::kTooLong)
        NextFile();
      error = HandleBadRecord(context().error_policy, stats(), reason, bad);
    }
    return error;
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("file_index"), file_index_);
    state->WriteInt(Key("offset"),
                    static_cast<int64_t>(reader_ != nullptr ? reader_->offset()
                                                            : next_offset_));
    state->WriteInt(Key("record"), record_index_);
    state->WriteInt(Key("pending_code"),
                    static_cast<int64_t>(pending_error_.code()));
    state->WriteString(Key("pending_message"),
                       std::string(pending_error_.message()));
    return absl::OkStatus();
  }

  absl::Status Restore(const IteratorState& state) override {
    reader_.reset();
    file_.reset();
    ASSIGN_OR_RETURN(file_index_, state.ReadInt(Key("file_index")));
    ASSIGN_OR_RETURN(int64_t offset, state.ReadInt(Key("offset")));
    ASSIGN_OR_RETURN(record_index_, state.ReadInt(Key("record")));
    ASSIGN_OR_RETURN(int64_t code, state.ReadInt(Key("pending_code")));
    ASSIGN_OR_RETURN(std::string message,
                     state.ReadString(Key("pending_message")));
    if (file_index_ < 0 || offset < 0 || record_index_ < 0) {
      return errors::DataLoss("TFRecord state at '", prefix(),
                              "' has a negative position");
    }
    if (file_index_ > static_cast<int64_t>(ds_->files().size())) {
      return errors::FailedPrecondition(
          "TFRecord state at '", prefix(), "' is at file ", file_index_,
          " but the dataset has ", ds_->files().size(), " files");
    }
    next_offset_ = static_cast<uint64_t>(offset);
    pending_error_ = absl::Status(static_cast<absl::StatusCode>(code), message);
    return absl::OkStatus();
  }

 private:
  const std::string& CurrentPath() const { return ds_->files()[file_index_]; }

  // Opens files()[file_index_] at next_offset_.
  absl::Status OpenFile() {
    Env* env = context().env != nullptr ? context().env : Env::Default();
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> f =
        env->NewRandomAccessFile(CurrentPath());
    if (!f.ok()) {
      return errors::Annotate(
          f.status(),
          absl::StrCat("TFRecord: cannot open '", CurrentPath(), "'"));
    }
    file_ = std::move(*f);
    RecordReaderOptions ro;
    ro.max_record_bytes = static_cast<uint64_t>(ds_->opts().max_record_bytes);
    ro.buffer_bytes = static_cast<size_t>(ds_->opts().read_buffer_bytes);
    reader_ = std::make_unique<RecordReader>(file_.get(), CurrentPath(), ro);
    reader_->Seek(next_offset_);
    return absl::OkStatus();
  }

  // Moves to the start of the next file.
  void NextFile() {
    reader_.reset();
    file_.reset();
    ++file_index_;
    next_offset_ = 0;
    record_index_ = 0;
  }

  std::shared_ptr<const TFRecordDataset> ds_;
  int64_t file_index_ = 0;
  uint64_t next_offset_ = 0;  // Where the next OpenFile starts.
  int64_t record_index_ = 0;  // 0-based index of the next record in the file.
  absl::Status pending_error_;
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<RecordReader> reader_;  // Borrows file_.
  // The element being gathered (kept for their capacity between calls).
  std::vector<std::string> records_;
  std::vector<std::string> origins_;
};

std::unique_ptr<IteratorBase> TFRecordDataset::MakeIteratorInternal(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  if (!status_.ok())
    return internal::MakeErrorIterator(std::move(ctx), prefix, status_);
  return std::make_unique<TFRecordIterator>(
      std::static_pointer_cast<const TFRecordDataset>(shared_from_this()),
      std::move(ctx), prefix);
}

}  // namespace

Dataset Dataset::TFRecord(std::vector<std::string> files, ShardOptions shard,
                          TFRecordOptions opts) {
  return Dataset(
      std::make_shared<TFRecordDataset>(std::move(files), shard, opts));
}

}  // namespace recflow::data
