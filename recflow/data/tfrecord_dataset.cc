// Source: TFRecord files (Dataset::TFRecord, declared in dataset.h), a file
// source like TextLine (file_source.h has what they share).
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

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/record_io.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset.h"
#include "recflow/data/file_source.h"

namespace recflow::data {
namespace {

using internal::BadRecord;
using internal::FileRead;
using internal::FileSourceDataset;
using internal::FileSourceIterator;
using internal::FileSourceKind;

constexpr FileSourceKind kTFRecord = {.name = "TFRecord",
                                      .records = "records",
                                      .per_element_attr = "records_per_element",
                                      .counter_key = "record"};

absl::Status CheckTFRecordOptions(const TFRecordOptions& opts) {
  if (opts.max_record_bytes < 0 || opts.read_buffer_bytes < 1) {
    return errors::InvalidArgument("TFRecord: max_record_bytes (",
                                   opts.max_record_bytes,
                                   ") must be >= 0 and read_buffer_bytes (",
                                   opts.read_buffer_bytes, ") >= 1");
  }
  return absl::OkStatus();
}

// records_in_file_ is the 0-based index of the next record.
class TFRecordIterator : public FileSourceIterator<TFRecordIterator> {
 public:
  TFRecordIterator(const TFRecordOptions& opts,
                   std::shared_ptr<const FileSourceDataset> ds,
                   std::shared_ptr<const IteratorContext> ctx,
                   std::string prefix)
      : FileSourceIterator(std::move(ds), std::move(ctx), std::move(prefix)),
        opts_(opts) {}

  // The next record of the open file (FileSourceIterator).
  FileRead ReadRecord(std::vector<std::string>* records, BadRecord* bad) {
    absl::Status s = reader_->ReadRecord(&record_);
    const RecordError kind = reader_->last_error();
    if (s.ok()) {
      records->push_back(std::move(record_));
      ++records_in_file_;
      return FileRead::kRecord;
    }
    if (absl::IsOutOfRange(s) && kind == RecordError::kNone)
      return FileRead::kEndOfFile;
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
    bad->reason = reason;
    bad->error =
        kind == RecordError::kIo
            ? s
            : errors::DataLoss(s.message(), " (record ", records_in_file_, ")");
    bad->counts_as_read = true;
    ++records_in_file_;
    // After a lost framing or a read error the rest of the file is gone.
    bad->ends_file =
        kind != RecordError::kBadDataCrc && kind != RecordError::kTooLong;
    return FileRead::kBadRecord;
  }
  std::string Origin() const {
    return absl::StrCat(CurrentPath(), ":record ", records_in_file_ - 1);
  }

 private:
  void StartFile(RandomAccessFile* file, uint64_t offset) override {
    RecordReaderOptions ro;
    ro.max_record_bytes = static_cast<uint64_t>(opts_.max_record_bytes);
    ro.buffer_bytes = static_cast<size_t>(opts_.read_buffer_bytes);
    reader_ = std::make_unique<RecordReader>(file, CurrentPath(), ro);
    reader_->Seek(offset);
  }
  void EndFile() override { reader_.reset(); }
  uint64_t Offset() const override { return reader_->offset(); }

  const TFRecordOptions opts_;
  std::unique_ptr<RecordReader> reader_;  // Borrows the open file.
  std::string record_;                    // The record being read.
};

}  // namespace

Dataset Dataset::TFRecord(std::vector<std::string> files, ShardOptions shard,
                          TFRecordOptions opts) {
  return Dataset(std::make_shared<FileSourceDataset>(
      kTFRecord, std::move(files), shard, opts.records_per_element,
      opts.emit_origin, CheckTFRecordOptions(opts),
      [opts](std::shared_ptr<const FileSourceDataset> ds,
             std::shared_ptr<const IteratorContext> ctx,
             const std::string& prefix) {
        return std::make_unique<TFRecordIterator>(opts, std::move(ds),
                                                  std::move(ctx), prefix);
      }));
}

}  // namespace recflow::data
