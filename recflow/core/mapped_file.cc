#include "recflow/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <utility>

#include "recflow/core/status.h"

namespace recflow {

namespace {

absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return errors::NotFound(message);
    case EACCES:
    case EPERM:
      return errors::PermissionDenied(message);
    case ENOMEM:
      return errors::ResourceExhausted(message);
    default:
      return errors::Internal(message);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "cannot open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "cannot stat", path);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const char* data = nullptr;
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "cannot map", path);
    }
    data = static_cast<const char*>(p);
  }
  return std::unique_ptr<MappedFile>(new MappedFile(path, fd, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
  ::close(fd_);
}

absl::Status MappedFile::ReadAt(uint64_t offset, uint64_t n, char* buf) const {
  while (n > 0) {
    const ssize_t got = ::pread(fd_, buf, n, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "cannot read", path_);
    }
    if (got == 0) {
      return errors::DataLoss(path_, " ends at byte ", offset, ", before the bytes asked for");
    }
    buf += got;
    offset += static_cast<uint64_t>(got);
    n -= static_cast<uint64_t>(got);
  }
  return absl::OkStatus();
}

void MappedFile::Advise(uint64_t offset, uint64_t bytes, int advice) const {
  if (data_ == nullptr || offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t begin = offset / page * page;  // madvise wants page-aligned starts
  ::madvise(const_cast<char*>(data_) + begin, offset + bytes - begin, advice);
}

void MappedFile::AdviseWillNeedAt(const void* p, uint64_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

void MappedFile::AdviseRandom(uint64_t offset, uint64_t bytes) const {
  Advise(offset, bytes, MADV_RANDOM);
}

void MappedFile::AdviseWillNeed(uint64_t offset, uint64_t bytes) const {
  Advise(offset, bytes, MADV_WILLNEED);
}

}  // namespace recflow
