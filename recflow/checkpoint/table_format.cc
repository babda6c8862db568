#include "recflow/checkpoint/table_format.h"

#include <algorithm>
#include <cstring>

#include "recflow/checkpoint/snappy.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow::table {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "table coding assumes a little-endian host");

void PutFixed32(std::string* dst, uint32_t value) {
  char buf[4];
  std::memcpy(buf, &value, 4);
  dst->append(buf, 4);
}

void PutFixed64(std::string* dst, uint64_t value) {
  char buf[8];
  std::memcpy(buf, &value, 8);
  dst->append(buf, 8);
}

void PutVarint64(std::string* dst, uint64_t value) {
  char buf[10];
  int n = 0;
  while (value >= 0x80) {
    buf[n++] = static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  buf[n++] = static_cast<char>(value);
  dst->append(buf, n);
}

void PutVarint32(std::string* dst, uint32_t value) { PutVarint64(dst, value); }

int VarintLength(uint64_t value) {
  int len = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++len;
  }
  return len;
}

uint32_t DecodeFixed32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

uint64_t DecodeFixed64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

bool GetVarint64(absl::string_view* input, uint64_t* value) {
  uint64_t result = 0;
  for (size_t i = 0; i < input->size() && i < 10; ++i) {
    const uint8_t byte = static_cast<uint8_t>((*input)[i]);
    if (i == 9 && byte > 1) return false;  // more than 64 bits
    result |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      *value = result;
      input->remove_prefix(i + 1);
      return true;
    }
  }
  return false;
}

bool GetVarint32(absl::string_view* input, uint32_t* value) {
  absl::string_view copy = *input;
  uint64_t v;
  if (!GetVarint64(&copy, &v) || v > 0xffffffffull) return false;
  *value = static_cast<uint32_t>(v);
  *input = copy;
  return true;
}

void BlockHandle::EncodeTo(std::string* dst) const {
  PutVarint64(dst, offset);
  PutVarint64(dst, size);
}

bool BlockHandle::DecodeFrom(absl::string_view* input) {
  return GetVarint64(input, &offset) && GetVarint64(input, &size);
}

void Footer::EncodeTo(std::string* dst) const {
  const size_t start = dst->size();
  metaindex_handle.EncodeTo(dst);
  index_handle.EncodeTo(dst);
  dst->resize(start + 2 * BlockHandle::kMaxEncodedLength, '\0');
  PutFixed32(dst, static_cast<uint32_t>(kTableMagicNumber & 0xffffffffu));
  PutFixed32(dst, static_cast<uint32_t>(kTableMagicNumber >> 32));
  DCHECK_EQ(dst->size(), start + kFooterSize);
}

absl::Status Footer::DecodeFrom(absl::string_view input,
                                absl::string_view file_name) {
  if (input.size() < kFooterSize) {
    return errors::DataLoss("table ", file_name, ": footer is ", input.size(),
                            " bytes, expected ", kFooterSize, " (truncated)");
  }
  const uint64_t magic = DecodeFixed64(input.data() + kFooterSize - 8);
  if (magic != kTableMagicNumber) {
    return errors::DataLoss("table ", file_name,
                            ": not an sstable (bad magic number in footer)");
  }
  absl::string_view handles = input.substr(0, 2 * BlockHandle::kMaxEncodedLength);
  if (!metaindex_handle.DecodeFrom(&handles) || !index_handle.DecodeFrom(&handles)) {
    return errors::DataLoss("table ", file_name, ": corrupted block handles in footer");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadBlock(const RandomAccessFile& file,
                                      uint64_t file_size,
                                      const BlockHandle& handle,
                                      absl::string_view file_name,
                                      uint64_t max_block_bytes) {
  if (handle.size > max_block_bytes) {
    return errors::DataLoss("table ", file_name, ": block at offset ", handle.offset,
                            " declares ", handle.size, " bytes, more than the limit of ",
                            max_block_bytes, " (corrupted)");
  }
  if (handle.offset > file_size ||
      file_size - handle.offset < handle.size + kBlockTrailerSize) {
    return errors::DataLoss("table ", file_name, ": block [", handle.offset, ", +",
                            handle.size, "] lies past the end of the ", file_size,
                            "-byte file (truncated)");
  }
  const size_t n = static_cast<size_t>(handle.size) + kBlockTrailerSize;
  std::string scratch(n, '\0');
  ASSIGN_OR_RETURN(absl::string_view got, file.Read(handle.offset, n, scratch.data()));
  if (got.size() != n) {
    return errors::DataLoss("table ", file_name, ": short read of block at offset ",
                            handle.offset, " (truncated)");
  }
  const char* data = got.data();
  const uint32_t stored = crc32c::Unmask(DecodeFixed32(data + handle.size + 1));
  const uint32_t actual = crc32c::Value(data, handle.size + 1);
  if (stored != actual) {
    return errors::DataLoss("table ", file_name, ": block checksum mismatch at offset ",
                            handle.offset, " (corrupted)");
  }
  switch (data[handle.size]) {
    case kNoCompression:
      if (data != scratch.data()) return std::string(data, handle.size);
      scratch.resize(handle.size);
      return scratch;
    case kSnappyCompression: {
      std::string out;
      absl::Status s = snappy::Uncompress(absl::string_view(data, handle.size), &out,
                                          max_block_bytes);
      if (!s.ok()) {
        return errors::DataLoss("table ", file_name, ": block at offset ", handle.offset,
                                ": ", s.message());
      }
      return out;
    }
    default:
      return errors::DataLoss("table ", file_name, ": block at offset ", handle.offset,
                              " has unknown compression type ",
                              static_cast<int>(static_cast<uint8_t>(data[handle.size])),
                              " (corrupted)");
  }
}

BlockBuilder::BlockBuilder(int restart_interval)
    : restart_interval_(std::max(1, restart_interval)) {
  restarts_.push_back(0);
}

void BlockBuilder::Reset() {
  buffer_.clear();
  restarts_.clear();
  restarts_.push_back(0);
  counter_ = 0;
  finished_ = false;
  last_key_.clear();
}

size_t BlockBuilder::CurrentSizeEstimate() const {
  return buffer_.size() + restarts_.size() * sizeof(uint32_t) + sizeof(uint32_t);
}

absl::string_view BlockBuilder::Finish() {
  for (uint32_t r : restarts_) PutFixed32(&buffer_, r);
  PutFixed32(&buffer_, static_cast<uint32_t>(restarts_.size()));
  finished_ = true;
  return buffer_;
}

void BlockBuilder::Add(absl::string_view key, absl::string_view value) {
  DCHECK(!finished_);
  size_t shared = 0;
  if (counter_ < restart_interval_) {
    const size_t min_len = std::min(last_key_.size(), key.size());
    while (shared < min_len && last_key_[shared] == key[shared]) ++shared;
  } else {
    restarts_.push_back(static_cast<uint32_t>(buffer_.size()));
    counter_ = 0;
  }
  const size_t non_shared = key.size() - shared;
  PutVarint32(&buffer_, static_cast<uint32_t>(shared));
  PutVarint32(&buffer_, static_cast<uint32_t>(non_shared));
  PutVarint32(&buffer_, static_cast<uint32_t>(value.size()));
  buffer_.append(key.data() + shared, non_shared);
  buffer_.append(value.data(), value.size());
  last_key_.resize(shared);
  last_key_.append(key.data() + shared, non_shared);
  ++counter_;
}

void FindShortestSeparator(std::string* start, absl::string_view limit) {
  const size_t min_len = std::min(start->size(), limit.size());
  size_t diff = 0;
  while (diff < min_len && (*start)[diff] == limit[diff]) ++diff;
  if (diff >= min_len) return;  // one is a prefix of the other
  const uint8_t byte = static_cast<uint8_t>((*start)[diff]);
  if (byte < 0xff && byte + 1 < static_cast<uint8_t>(limit[diff])) {
    (*start)[diff] = static_cast<char>(byte + 1);
    start->resize(diff + 1);
  }
}

void FindShortSuccessor(std::string* key) {
  for (size_t i = 0; i < key->size(); ++i) {
    const uint8_t byte = static_cast<uint8_t>((*key)[i]);
    if (byte != 0xff) {
      (*key)[i] = static_cast<char>(byte + 1);
      key->resize(i + 1);
      return;
    }
  }
  // All 0xff: leave it as it is.
}

}  // namespace recflow::table
