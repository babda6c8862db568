// TFRecord files: TensorFlow's record framing, byte for byte.
//
// Each record is
//   uint64 length (little endian)
//   uint32 masked_crc32c(length bytes)
//   byte   data[length]
//   uint32 masked_crc32c(data)
// with masked crcs as in recflow/core/crc32c.h. Files written here are read
// by tf.data.TFRecordDataset and TensorBoard, and the other way round.
// (Compression is not supported: a GZIP/ZLIB file fails the length crc.)

#ifndef RECFLOW_CORE_RECORD_IO_H_
#define RECFLOW_CORE_RECORD_IO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"

namespace recflow {

// Appends records to a WritableFile. Not thread-safe.
class RecordWriter {
 public:
  // Does not take ownership; `file` must outlive the writer.
  explicit RecordWriter(WritableFile* file);
  absl::Status WriteRecord(absl::string_view data);
  absl::Status Flush();
  int64_t bytes_written() const { return bytes_written_; }

 private:
  WritableFile* file_;
  int64_t bytes_written_ = 0;
};

struct RecordReaderOptions {
  // A record whose header declares more than this many bytes is corrupt
  // (DataLoss naming the offset and the length); nothing is allocated for it.
  uint64_t max_record_bytes = uint64_t{1} << 28;
  // Bytes read from the file at a time.
  size_t buffer_bytes = 1 << 20;
};

// What the last failed ReadRecord found (RecordReader::last_error()).
enum class RecordError {
  kNone,          // the last read succeeded (or hit the clean end)
  kTruncated,     // the file ends inside a record; framing lost
  kBadLengthCrc,  // the length's crc does not match; framing lost
  kBadDataCrc,    // the data's crc does not match; skipped past it
  kTooLong,       // length (crc-valid) > max_record_bytes; skipped past it
  kIo,            // the file could not be read (error from the Env)
};

// Reads records sequentially from a RandomAccessFile, through a buffer.
// Not thread-safe. Errors name `name` (the path) and the record's offset:
//   OutOfRange           clean end of file (no bytes left)
//   DataLoss "truncated" the file ends inside a record
//   DataLoss "corrupted" a length or data crc mismatch, or an oversized
//                        length
// After DataLoss on a data crc the reader has moved past the record, so a
// caller that skips bad records can go on; after a bad length crc or
// truncation it cannot (the framing is lost) and further reads return
// OutOfRange. An oversized length whose crc is valid is skipped without
// reading its data (the framing is intact), unless the file ends before the
// record's declared end (then it is reported as truncated).
//
// Cost: records smaller than buffer_bytes are copied once, from the buffer
// into *record (whose capacity is reused across calls); larger ones are read
// straight into *record. No other allocation per record.
class RecordReader {
 public:
  RecordReader(const RandomAccessFile* file, std::string name,
               RecordReaderOptions options = {});
  // Reads the record at offset(); on success advances past it.
  absl::Status ReadRecord(std::string* record);
  // Byte offset of the next record (for checkpointing a position).
  uint64_t offset() const { return offset_; }
  // Continues from a previously saved offset(). Clears a lost framing.
  void Seek(uint64_t offset);
  // Why the last ReadRecord failed (kNone after a success or clean end).
  RecordError last_error() const { return last_error_; }
  const std::string& name() const { return name_; }

 private:
  // Ensures n bytes are buffered at offset_: OK, OutOfRange when the file
  // ends first (then available() bytes are buffered), or the Env's error.
  absl::Status Fill(size_t n);
  size_t available() const;    // Buffered bytes at offset_.
  const char* cursor() const;  // Buffered data at offset_.
  absl::Status Fail(RecordError kind, absl::Status status);
  RecordError last_error_ = RecordError::kNone;
  const RandomAccessFile* file_;
  std::string name_;
  RecordReaderOptions options_;
  uint64_t offset_ = 0;
  bool framing_lost_ = false;
  std::string buffer_;
  uint64_t buffer_start_ = 0;
  size_t buffer_len_ = 0;
};

// Convenience: writes all records to a new file at `path`.
absl::Status WriteRecordsToFile(Env* env, const std::string& path,
                                const std::vector<std::string>& records);

}  // namespace recflow

#endif  // RECFLOW_CORE_RECORD_IO_H_
