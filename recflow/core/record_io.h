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

// Reads records sequentially from a RandomAccessFile, through a buffer.
// Not thread-safe. Errors name `name` (the path) and the record's offset:
//   OutOfRange           clean end of file (no bytes left)
//   DataLoss "truncated" the file ends inside a record
//   DataLoss "corrupted" a length or data crc mismatch, or an oversized
//                        length
// After DataLoss on a data crc the reader has moved past the record, so a
// caller that skips bad records can go on; after a bad length crc or
// truncation it cannot (the framing is lost) and further reads return
// OutOfRange.
class RecordReader {
 public:
  RecordReader(const RandomAccessFile* file, std::string name,
               RecordReaderOptions options = {});
  // Reads the record at offset(); on success advances past it.
  absl::Status ReadRecord(std::string* record);
  // Byte offset of the next record (for checkpointing a position).
  uint64_t offset() const { return offset_; }
  // Continues from a previously saved offset().
  void Seek(uint64_t offset);

 private:
  absl::Status Fill(size_t n);  // Ensures n bytes buffered at offset_.
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
