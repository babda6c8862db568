// Internal to core: what env.cc's ordinary files and direct_file.cc's
// direct ones share. Not for use outside recflow/core.
#ifndef RECFLOW_CORE_POSIX_FILE_H_
#define RECFLOW_CORE_POSIX_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"

namespace recflow::posix_internal {

// `path` in single quotes, as error messages name files.
std::string Quote(absl::string_view path);

// open(2), retried on EINTR; -1 with errno set on failure.
int OpenRetryingEintr(const std::string& path, int flags, int mode);

// The size of the open file `fd` (fstat), errors naming `path`.
absl::StatusOr<uint64_t> DescriptorFileSize(int fd, const std::string& path);

// A file written through a descriptor with a user-space buffer of its own:
// subclasses write their pending bytes in WritePending; Sync and Close are
// shared (fdatasync; close, never retried: Linux releases the descriptor
// even when close fails).
class FdWritableFile : public WritableFile {
 public:
  FdWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  // Subclasses call Close() in their own destructors (WritePending is
  // theirs).
  ~FdWritableFile() override = default;

  absl::Status Sync() override;
  absl::Status Close() override;

 protected:
  // Writes every byte buffered so far.
  virtual absl::Status WritePending() = 0;
  // FailedPrecondition naming the file.
  absl::Status ClosedError() const;
  bool closed() const { return fd_ < 0; }

  const std::string path_;
  int fd_;
};

}  // namespace recflow::posix_internal

#endif  // RECFLOW_CORE_POSIX_FILE_H_
