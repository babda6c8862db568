#include "recflow/checkpoint/tensor_cursor.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {

absl::StatusOr<TensorCursor> TensorCursor::Open(Env* env, const BundleReader& reader,
                                                const TensorInfo& info, uint64_t begin,
                                                uint64_t end) {
  TensorCursor c;
  c.info_ = info;
  c.pos_ = std::min(begin, info.size);
  c.begin_ = c.pos_;
  c.end_ = std::max(c.begin_, std::min(end, info.size));
  c.path_ = DataFilename(reader.prefix(), info.shard_id, reader.num_shards());
  ASSIGN_OR_RETURN(uint64_t size, env->GetFileSize(c.path_));
  if (info.offset > size || size - info.offset < info.size) {
    return errors::DataLoss("tensor '", info.name, "' needs bytes [", info.offset, ", ",
                            info.offset + info.size, ") of ", c.path_, ", which has only ",
                            size, " bytes (truncated)");
  }
  ASSIGN_OR_RETURN(c.file_, reader.options().direct_io ? env->NewDirectRandomAccessFile(c.path_)
                                                       : env->NewRandomAccessFile(c.path_));
  return c;
}

absl::Status TensorCursor::Read(size_t n, char* dst) {
  if (n == 0) return absl::OkStatus();
  if (end_ - pos_ < n) {
    return errors::DataLoss("tensor '", info_.name, "' in ", path_, " is shorter than its shape");
  }
  auto got = file_->Read(info_.offset + pos_, n, dst);
  if (!got.ok()) {
    return errors::Annotate(got.status(),
                            absl::StrCat("reading tensor '", info_.name, "' from ", path_));
  }
  if (got->size() != n) {
    return errors::DataLoss("tensor '", info_.name, "': short read from ", path_, " (truncated)");
  }
  if (got->data() != dst) std::memcpy(dst, got->data(), n);
  crc_ = crc32c::Extend(crc_, dst, n);
  pos_ += n;
  return absl::OkStatus();
}

absl::Status TensorCursor::Finish(const std::vector<const TensorCursor*>& parts) {
  const TensorCursor& first = *parts.front();
  uint32_t crc = 0;
  uint64_t covered = 0;
  bool whole = true;
  for (const TensorCursor* c : parts) {
    whole = whole && c->begin_ == covered && c->pos_ == c->end_;
    crc = crc32c::Combine(crc, c->crc_, c->end_ - c->begin_);
    covered = c->end_;
  }
  const uint32_t stored = crc32c::Unmask(first.info_.masked_crc32c);
  if (!whole || covered != first.info_.size || crc != stored) {
    return errors::DataLoss("checksum mismatch for tensor '", first.info_.name, "' in ",
                            first.path_, " (bytes [", first.info_.offset, ", ",
                            first.info_.offset + first.info_.size, ")): stored crc32c ", stored,
                            ", computed ", crc, " (corrupted)");
  }
  return absl::OkStatus();
}

}  // namespace recflow::checkpoint
