#include "recflow/core/record_io.h"

#include <algorithm>
#include <cstring>

#include "recflow/core/crc32c.h"
#include "recflow/core/status.h"

namespace recflow {
namespace {

constexpr size_t kHeaderBytes = sizeof(uint64_t) + sizeof(uint32_t);
constexpr size_t kFooterBytes = sizeof(uint32_t);

// Little-endian fixed-width encoding, independent of the host's byte order.
void EncodeFixed32(char* dst, uint32_t v) {
  for (int i = 0; i < 4; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
void EncodeFixed64(char* dst, uint64_t v) {
  for (int i = 0; i < 8; ++i) dst[i] = static_cast<char>(v >> (8 * i));
}
uint32_t DecodeFixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return uint32_t{u[0]} | uint32_t{u[1]} << 8 | uint32_t{u[2]} << 16 |
         uint32_t{u[3]} << 24;
}
uint64_t DecodeFixed64(const char* p) {
  return uint64_t{DecodeFixed32(p)} | uint64_t{DecodeFixed32(p + 4)} << 32;
}

}  // namespace

// ---------------------------------------------------------------------------
// RecordWriter

RecordWriter::RecordWriter(WritableFile* file) : file_(file) {}

absl::Status RecordWriter::WriteRecord(absl::string_view data) {
  char header[kHeaderBytes];
  EncodeFixed64(header, data.size());
  EncodeFixed32(header + 8, crc32c::Mask(crc32c::Value(header, 8)));
  char footer[kFooterBytes];
  EncodeFixed32(footer, crc32c::Mask(crc32c::Value(data)));
  RETURN_IF_ERROR(file_->Append(absl::string_view(header, sizeof(header))));
  RETURN_IF_ERROR(file_->Append(data));
  RETURN_IF_ERROR(file_->Append(absl::string_view(footer, sizeof(footer))));
  bytes_written_ +=
      static_cast<int64_t>(kHeaderBytes + data.size() + kFooterBytes);
  return absl::OkStatus();
}

absl::Status RecordWriter::Flush() { return file_->Flush(); }

absl::Status WriteRecordsToFile(Env* env, const std::string& path,
                                const std::vector<std::string>& records) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                   env->NewWritableFile(path));
  RecordWriter writer(file.get());
  for (const std::string& r : records) RETURN_IF_ERROR(writer.WriteRecord(r));
  return file->Close();
}

// ---------------------------------------------------------------------------
// RecordReader

RecordReader::RecordReader(const RandomAccessFile* file, std::string name,
                           RecordReaderOptions options)
    : file_(file), name_(std::move(name)), options_(options) {
  // The buffer must hold at least a header, so Fill(kHeaderBytes) can work.
  options_.buffer_bytes = std::max<size_t>(options_.buffer_bytes, 64);
}

void RecordReader::Seek(uint64_t offset) {
  offset_ = offset;
  framing_lost_ = false;
  last_error_ = RecordError::kNone;
}

size_t RecordReader::available() const {
  if (offset_ < buffer_start_ || offset_ >= buffer_start_ + buffer_len_)
    return 0;
  return static_cast<size_t>(buffer_start_ + buffer_len_ - offset_);
}

const char* RecordReader::cursor() const {
  return buffer_.data() + (offset_ - buffer_start_);
}

absl::Status RecordReader::Fill(size_t n) {
  const size_t have = available();
  if (have >= n) return absl::OkStatus();
  if (buffer_.size() < options_.buffer_bytes)
    buffer_.resize(options_.buffer_bytes);
  // Keep the unread tail, then read as much as fits after it.
  if (have > 0) std::memmove(buffer_.data(), cursor(), have);
  buffer_start_ = offset_;
  buffer_len_ = have;
  while (buffer_len_ < n) {
    char* dst = buffer_.data() + buffer_len_;
    ASSIGN_OR_RETURN(absl::string_view got,
                     file_->Read(buffer_start_ + buffer_len_,
                                 buffer_.size() - buffer_len_, dst));
    if (got.empty()) return errors::OutOfRange(name_, ": end of file");
    if (got.data() != dst) std::memcpy(dst, got.data(), got.size());
    buffer_len_ += got.size();
  }
  return absl::OkStatus();
}

absl::Status RecordReader::Fail(RecordError kind, absl::Status status) {
  last_error_ = kind;
  return status;
}

absl::Status RecordReader::ReadRecord(std::string* record) {
  last_error_ = RecordError::kNone;
  const uint64_t start = offset_;
  if (framing_lost_) {
    return errors::OutOfRange(name_,
                              ": no more records after the corrupted "
                              "framing before offset ",
                              start);
  }
  absl::Status s = Fill(kHeaderBytes);
  if (!s.ok()) {
    if (!absl::IsOutOfRange(s)) return Fail(RecordError::kIo, s);
    if (available() == 0) {
      return errors::OutOfRange(name_, ": end of file at offset ", start);
    }
    framing_lost_ = true;
    return Fail(RecordError::kTruncated,
                errors::DataLoss(name_, ": truncated record at offset ", start,
                                 ": the file ends ", available(),
                                 " bytes into the 12-byte header"));
  }
  const char* header = cursor();
  const uint64_t length = DecodeFixed64(header);
  if (crc32c::Unmask(DecodeFixed32(header + 8)) != crc32c::Value(header, 8)) {
    framing_lost_ = true;
    return Fail(RecordError::kBadLengthCrc,
                errors::DataLoss(name_, ": corrupted record at offset ", start,
                                 ": the length's crc does not match (length "
                                 "field reads ",
                                 length, ")"));
  }
  if (length > options_.max_record_bytes) {
    // The length is crc-valid, so the framing holds: skip the record if the
    // file contains it, without reading it.
    ASSIGN_OR_RETURN(uint64_t size, file_->Size());
    const uint64_t room = size > start + kHeaderBytes + kFooterBytes
                              ? size - start - kHeaderBytes - kFooterBytes
                              : 0;
    if (length <= room) {
      offset_ = start + kHeaderBytes + length + kFooterBytes;
    } else {
      framing_lost_ = true;
    }
    return Fail(
        RecordError::kTooLong,
        errors::DataLoss(
            name_, ": corrupted record at offset ", start, ": length ", length,
            " exceeds the limit of ", options_.max_record_bytes, " bytes",
            framing_lost_ ? " (and the file ends before it)" : ""));
  }
  offset_ += kHeaderBytes;
  auto truncated = [&](absl::string_view where) {
    offset_ = start;
    framing_lost_ = true;
    return Fail(RecordError::kTruncated,
                errors::DataLoss(name_, ": truncated record at offset ", start,
                                 ": the file ends inside the ", where,
                                 " of a record of ", length, " bytes"));
  };
  const size_t n = static_cast<size_t>(length);
  uint32_t stored_crc;
  if (n + kFooterBytes <= options_.buffer_bytes) {
    s = Fill(n + kFooterBytes);
    if (!s.ok()) {
      if (!absl::IsOutOfRange(s)) return Fail(RecordError::kIo, s);
      return truncated(available() < n ? "data" : "data crc");
    }
    stored_crc = DecodeFixed32(cursor() + n);
    record->assign(cursor(), n);
  } else {
    // Large record: whatever is buffered, then straight from the file.
    record->resize(n);
    const size_t have = std::min(available(), n);
    if (have > 0) std::memcpy(record->data(), cursor(), have);
    size_t done = have;
    while (done < n) {
      char* dst = record->data() + done;
      auto got = file_->Read(offset_ + done, n - done, dst);
      if (!got.ok()) return Fail(RecordError::kIo, got.status());
      if (got->empty()) return truncated("data");
      if (got->data() != dst) std::memcpy(dst, got->data(), got->size());
      done += got->size();
    }
    offset_ += n;
    s = Fill(kFooterBytes);
    if (!s.ok()) {
      if (!absl::IsOutOfRange(s)) return Fail(RecordError::kIo, s);
      return truncated("data crc");
    }
    stored_crc = DecodeFixed32(cursor());
    offset_ -= n;
  }
  offset_ += n + kFooterBytes;
  if (crc32c::Unmask(stored_crc) != crc32c::Value(*record)) {
    return Fail(
        RecordError::kBadDataCrc,
        errors::DataLoss(name_, ": corrupted record at offset ", start,
                         ": the data's crc does not match (", n, " bytes)"));
  }
  return absl::OkStatus();
}

}  // namespace recflow
