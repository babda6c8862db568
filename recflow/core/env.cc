#include "recflow/core/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/direct_file.h"
#include "recflow/core/posix_file.h"
#include "recflow/core/status.h"

namespace recflow {

static_assert(sizeof(off_t) == 8, "recflow needs 64-bit file offsets");

namespace {

// strerror_r has a GNU flavor (returns char*) and an XSI flavor (returns
// int); these overloads accept either.
[[maybe_unused]] const char* StrErrorResult(const char* result, const char*) {
  return result;
}
[[maybe_unused]] const char* StrErrorResult(int rc, const char* buf) {
  return rc == 0 ? buf : "unknown error";
}

std::string StrError(int err) {
  char buf[256];
  buf[0] = '\0';
  return StrErrorResult(strerror_r(err, buf, sizeof(buf)), buf);
}

absl::StatusCode ErrnoToCode(int err) {
  switch (err) {
    case 0:
      return absl::StatusCode::kOk;
    case ENOENT:
    case ENOTDIR:
      return absl::StatusCode::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::StatusCode::kPermissionDenied;
    case EEXIST:
      return absl::StatusCode::kAlreadyExists;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EFBIG:
      return absl::StatusCode::kResourceExhausted;
    case EISDIR:
    case ENOTEMPTY:
    case EBUSY:
    case ETXTBSY:
      return absl::StatusCode::kFailedPrecondition;
    case EINVAL:
    case ENAMETOOLONG:
    case ELOOP:
      return absl::StatusCode::kInvalidArgument;
    case EAGAIN:
    case EINTR:
      return absl::StatusCode::kUnavailable;
    case ETIMEDOUT:
      return absl::StatusCode::kDeadlineExceeded;
    case EIO:
      return absl::StatusCode::kInternal;
    default:
      return absl::StatusCode::kUnknown;
  }
}

using posix_internal::OpenRetryingEintr;
using posix_internal::Quote;

uint64_t ClockMicros(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000u +
         static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

// Writes all of [data, data + n) to fd, retrying short writes and EINTR.
absl::Status WriteFully(int fd, const char* data, size_t n,
                        const std::string& path) {
  while (n > 0) {
    ssize_t done = ::write(fd, data, n);
    if (done < 0) {
      if (errno == EINTR) continue;
      return ErrnoToStatus(errno, absl::StrCat("cannot write ", Quote(path)));
    }
    data += done;
    n -= static_cast<size_t>(done);
  }
  return absl::OkStatus();
}

class PosixWritableFile : public posix_internal::FdWritableFile {
 public:
  PosixWritableFile(std::string path, int fd)
      : FdWritableFile(std::move(path), fd), buf_(new char[kBufferSize]) {}

  ~PosixWritableFile() override {
    if (!closed()) (void)Close();
  }

  absl::Status Append(absl::string_view data) override {
    if (closed()) return ClosedError();
    // Small appends (record headers, footers) are gathered in the buffer.
    size_t copy = std::min(data.size(), kBufferSize - pos_);
    std::memcpy(buf_.get() + pos_, data.data(), copy);
    pos_ += copy;
    data.remove_prefix(copy);
    if (data.empty()) return absl::OkStatus();
    absl::Status s = WritePending();
    if (!s.ok()) return s;
    if (data.size() < kBufferSize) {
      std::memcpy(buf_.get(), data.data(), data.size());
      pos_ = data.size();
      return absl::OkStatus();
    }
    return WriteFully(fd_, data.data(), data.size(), path_);
  }

  absl::Status Flush() override {
    if (closed()) return ClosedError();
    return WritePending();
  }

 private:
  static constexpr size_t kBufferSize = 64 * 1024;

  absl::Status WritePending() override {
    size_t n = pos_;
    pos_ = 0;
    return WriteFully(fd_, buf_.get(), n, path_);
  }

  std::unique_ptr<char[]> buf_;
  size_t pos_ = 0;
};

class PosixRandomAccessFile : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd)
      : path_(std::move(path)), fd_(fd) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n,
                                        char* scratch) const override {
    constexpr uint64_t kMaxOffset =
        static_cast<uint64_t>(std::numeric_limits<off_t>::max());
    if (offset > kMaxOffset) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot read ", Quote(path_), " at offset ", offset,
                       ": offset too large"));
    }
    size_t done = 0;
    while (done < n) {
      uint64_t pos = offset + done;
      if (pos > kMaxOffset) break;  // Nothing can exist there.
      ssize_t r =
          ::pread(fd_, scratch + done, n - done, static_cast<off_t>(pos));
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoToStatus(errno, absl::StrCat("cannot read ", Quote(path_),
                                                 " at offset ", pos));
      }
      if (r == 0) break;  // End of file.
      done += static_cast<size_t>(r);
    }
    return absl::string_view(scratch, done);
  }

  absl::StatusOr<absl::string_view> ReadIfCached(uint64_t offset, size_t n,
                                                 char* scratch) const override {
    // preadv2(RWF_NOWAIT) reads only what the page cache holds (EAGAIN
    // when that is nothing); a short count may also mean the end of the
    // file, which Read tells apart.
    struct iovec iov = {scratch, n};
    for (;;) {
      const ssize_t r = ::preadv2(fd_, &iov, 1, static_cast<off_t>(offset), RWF_NOWAIT);
      if (r >= 0 && static_cast<size_t>(r) == n) return absl::string_view(scratch, n);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && errno != EAGAIN && errno != EOPNOTSUPP && errno != ENOSYS) {
        return ErrnoToStatus(errno, absl::StrCat("cannot read ", Quote(path_),
                                                 " at offset ", offset));
      }
      return absl::UnavailableError("not in the page cache");
    }
  }

  absl::StatusOr<uint64_t> Size() const override {
    return posix_internal::DescriptorFileSize(fd_, path_);
  }

 private:
  const std::string path_;
  const int fd_;
};

class PosixEnv : public Env {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    return OpenForWrite(path, O_TRUNC, "writing");
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    return OpenForWrite(path, O_APPEND, "appending");
  }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    int fd = OpenRetryingEintr(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
      return ErrnoToStatus(
          errno, absl::StrCat("cannot open ", Quote(path), " for reading"));
    }
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
      ::close(fd);
      return ErrnoToStatus(
          EISDIR, absl::StrCat("cannot open ", Quote(path), " for reading"));
    }
    return std::unique_ptr<RandomAccessFile>(
        std::make_unique<PosixRandomAccessFile>(path, fd));
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewDirectWritableFile(
      const std::string& path) override {
    ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                     OpenDirectWritableFile(path));
    if (file == nullptr) return NewWritableFile(path);  // no O_DIRECT here
    return file;
  }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewDirectRandomAccessFile(
      const std::string& path) override {
    ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file,
                     OpenDirectRandomAccessFile(path));
    if (file == nullptr) return NewRandomAccessFile(path);
    return file;
  }

  bool FileExists(const std::string& path) override {
    return ::access(path.c_str(), F_OK) == 0;
  }

  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return ErrnoToStatus(errno,
                           absl::StrCat("cannot get size of ", Quote(path)));
    }
    if (S_ISDIR(st.st_mode)) {
      return ErrnoToStatus(EISDIR,
                           absl::StrCat("cannot get size of ", Quote(path)));
    }
    return static_cast<uint64_t>(st.st_size);
  }

  absl::Status IsDirectory(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("cannot stat ", Quote(path)));
    }
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(Quote(path), " is not a directory"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      return ErrnoToStatus(errno,
                           absl::StrCat("cannot list directory ", Quote(dir)));
    }
    std::vector<std::string> names;
    while (true) {
      errno = 0;
      struct dirent* entry = ::readdir(d);
      if (entry == nullptr) {
        int err = errno;
        ::closedir(d);
        if (err != 0) {
          return ErrnoToStatus(
              err, absl::StrCat("cannot list directory ", Quote(dir)));
        }
        break;
      }
      absl::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  absl::Status CreateDir(const std::string& dir) override {
    if (::mkdir(dir.c_str(), 0755) != 0) {
      return ErrnoToStatus(
          errno, absl::StrCat("cannot create directory ", Quote(dir)));
    }
    return absl::OkStatus();
  }

  absl::Status DeleteFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("cannot delete ", Quote(path)));
    }
    return absl::OkStatus();
  }

  absl::Status DeleteDir(const std::string& dir) override {
    if (::rmdir(dir.c_str()) != 0) {
      return ErrnoToStatus(
          errno, absl::StrCat("cannot delete directory ", Quote(dir)));
    }
    return absl::OkStatus();
  }

  absl::Status RenameFile(const std::string& src,
                          const std::string& dst) override {
    if (::rename(src.c_str(), dst.c_str()) != 0) {
      return ErrnoToStatus(errno, absl::StrCat("cannot rename ", Quote(src),
                                               " to ", Quote(dst)));
    }
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    const std::string name = dir.empty() ? "." : dir;
    int fd = OpenRetryingEintr(name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0) {
      return ErrnoToStatus(errno, absl::StrCat("cannot open directory ",
                                               Quote(name), " to sync it"));
    }
    absl::Status s;
    // EINVAL: this file system cannot sync directories; nothing to do.
    if (::fsync(fd) != 0 && errno != EINVAL) {
      s = ErrnoToStatus(errno,
                        absl::StrCat("cannot sync directory ", Quote(name)));
    }
    ::close(fd);
    return s;
  }

  uint64_t NowMicros() override { return ClockMicros(CLOCK_MONOTONIC); }

  uint64_t NowUnixMicros() override { return ClockMicros(CLOCK_REALTIME); }

  void SleepForMicros(int64_t micros) override {
    if (micros <= 0) return;
    struct timespec req;
    req.tv_sec = static_cast<time_t>(micros / 1000000);
    req.tv_nsec = static_cast<long>(micros % 1000000) * 1000;
    struct timespec rem;
    while (::nanosleep(&req, &rem) != 0 && errno == EINTR) req = rem;
  }

 private:
  absl::StatusOr<std::unique_ptr<WritableFile>> OpenForWrite(
      const std::string& path, int mode_flag, const char* what) {
    int fd = OpenRetryingEintr(path, O_WRONLY | O_CREAT | O_CLOEXEC | mode_flag,
                               0644);
    if (fd < 0) {
      return ErrnoToStatus(
          errno, absl::StrCat("cannot open ", Quote(path), " for ", what));
    }
    return std::unique_ptr<WritableFile>(
        std::make_unique<PosixWritableFile>(path, fd));
  }
};

std::string StripTrailingSlashes(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  return std::string(path);
}

std::string RandomHex64() {
  static thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(rng()));
  return buf;
}

absl::Status TooLargeError(const std::string& path, absl::string_view size,
                           uint64_t max_bytes) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot read ", Quote(path), " into memory: it is ", size,
      " bytes, over the limit of ", max_bytes,
      " bytes (stream large files instead of reading them whole)"));
}

}  // namespace

absl::Status ErrnoToStatus(int err, absl::string_view context) {
  if (err == 0) return absl::OkStatus();
  return absl::Status(ErrnoToCode(err),
                      absl::StrCat(context, ": ", StrError(err)));
}

Env* Env::Default() {
  static Env* const env = new PosixEnv;
  return env;
}

absl::Status Env::RecursivelyCreateDir(const std::string& dir) {
  std::string path = StripTrailingSlashes(dir);
  if (path.empty()) return absl::OkStatus();
  absl::Status s = IsDirectory(path);
  if (s.ok() || !absl::IsNotFound(s)) return s;
  std::string parent = Dirname(path);
  if (!parent.empty() && parent != path) {
    s = RecursivelyCreateDir(parent);
    if (!s.ok()) return s;
  }
  s = CreateDir(path);
  // Lost a race with another creator: fine if it made a directory.
  if (absl::IsAlreadyExists(s) && IsDirectory(path).ok()) {
    return absl::OkStatus();
  }
  return s;
}

absl::Status ReadFileToString(Env* env, const std::string& path,
                              std::string* out, uint64_t max_bytes) {
  out->clear();
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> file =
      env->NewRandomAccessFile(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<uint64_t> size = (*file)->Size();
  if (!size.ok()) return size.status();
  if (*size > max_bytes) {
    return TooLargeError(path, absl::StrCat(*size), max_bytes);
  }
  // Read until a short read: the file may have changed since Size(), and
  // some files (/proc) report size 0. The first read asks for one byte more
  // than the size, so an unchanged file takes a single read.
  constexpr uint64_t kChunk = 1 << 20;
  uint64_t want = std::min(*size, std::numeric_limits<uint64_t>::max() - 1) + 1;
  uint64_t offset = 0;
  while (true) {
    uint64_t room = max_bytes - offset;  // offset <= max_bytes here.
    if (room < std::numeric_limits<uint64_t>::max()) {
      want = std::min(want, room + 1);  // One past the limit detects excess.
    }
    if (offset + want > out->max_size()) {
      return TooLargeError(path, absl::StrCat("over ", offset), max_bytes);
    }
    out->resize(offset + want);
    char* dst = out->data() + offset;
    absl::StatusOr<absl::string_view> got =
        (*file)->Read(offset, static_cast<size_t>(want), dst);
    if (!got.ok()) return got.status();
    if (got->data() != dst) std::memmove(dst, got->data(), got->size());
    offset += got->size();
    if (offset > max_bytes) {
      return TooLargeError(path, absl::StrCat("over ", max_bytes), max_bytes);
    }
    if (got->size() < want) break;
    want = kChunk;
  }
  out->resize(offset);
  return absl::OkStatus();
}

absl::Status WriteStringToFile(Env* env, const std::string& path,
                               absl::string_view data) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file =
      env->NewWritableFile(path);
  if (!file.ok()) return file.status();
  absl::Status s = (*file)->Append(data);
  absl::Status close_status = (*file)->Close();
  return s.ok() ? close_status : s;
}

absl::Status WriteStringToFileAtomically(Env* env, const std::string& path,
                                         absl::string_view data) {
  const std::string tmp =
      absl::StrCat(path, ".tmp.", ::getpid(), ".", RandomHex64());
  absl::Status s;
  {
    absl::StatusOr<std::unique_ptr<WritableFile>> file =
        env->NewWritableFile(tmp);
    if (!file.ok()) return file.status();
    s = (*file)->Append(data);
    if (s.ok()) s = (*file)->Sync();
    absl::Status close_status = (*file)->Close();
    if (s.ok()) s = close_status;
  }
  if (s.ok()) s = env->RenameFile(tmp, path);
  if (!s.ok()) {
    (void)env->DeleteFile(tmp);  // Best effort; report the first error.
    return s;
  }
  std::string dir = Dirname(path);
  return env->SyncDir(dir.empty() ? "." : dir);
}

absl::Status DeleteRecursively(Env* env, const std::string& dir) {
  absl::Status s = env->IsDirectory(dir);
  if (!s.ok()) {
    if (absl::IsFailedPrecondition(s)) return env->DeleteFile(dir);
    return s;
  }
  absl::StatusOr<std::vector<std::string>> children = env->GetChildren(dir);
  if (!children.ok()) return children.status();
  for (const std::string& name : *children) {
    std::string child = JoinPath(dir, name);
    // Unlink first: a symlink to a directory is removed, never followed.
    s = env->DeleteFile(child);
    if (s.ok()) continue;
    if (!env->IsDirectory(child).ok()) return s;
    s = DeleteRecursively(env, child);
    if (!s.ok()) return s;
  }
  return env->DeleteDir(dir);
}

std::string JoinPath(absl::string_view a, absl::string_view b) {
  if (a.empty()) return std::string(b);
  if (b.empty()) return std::string(a);
  bool a_slash = a.back() == '/';
  bool b_slash = b.front() == '/';
  if (a_slash && b_slash) return absl::StrCat(a, b.substr(1));
  if (a_slash || b_slash) return absl::StrCat(a, b);
  return absl::StrCat(a, "/", b);
}

std::string Dirname(absl::string_view path) {
  size_t pos = path.rfind('/');
  if (pos == absl::string_view::npos) return "";
  if (pos == 0) return "/";
  return std::string(path.substr(0, pos));
}

std::string Basename(absl::string_view path) {
  size_t pos = path.rfind('/');
  if (pos == absl::string_view::npos) return std::string(path);
  return std::string(path.substr(pos + 1));
}

namespace posix_internal {

std::string Quote(absl::string_view path) { return absl::StrCat("'", path, "'"); }

int OpenRetryingEintr(const std::string& path, int flags, int mode) {
  while (true) {
    const int fd = ::open(path.c_str(), flags, static_cast<mode_t>(mode));
    if (fd >= 0 || errno != EINTR) return fd;
  }
}

absl::StatusOr<uint64_t> DescriptorFileSize(int fd, const std::string& path) {
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return ErrnoToStatus(errno, absl::StrCat("cannot stat ", Quote(path)));
  }
  return static_cast<uint64_t>(st.st_size);
}

absl::Status FdWritableFile::ClosedError() const {
  return absl::FailedPreconditionError(
      absl::StrCat("file ", Quote(path_), " is already closed"));
}

absl::Status FdWritableFile::Sync() {
  if (closed()) return ClosedError();
  absl::Status s = WritePending();
  if (!s.ok()) return s;
#if defined(__linux__)
  const int rc = ::fdatasync(fd_);
#else
  const int rc = ::fsync(fd_);
#endif
  if (rc != 0) {
    return ErrnoToStatus(errno, absl::StrCat("cannot sync ", Quote(path_)));
  }
  return absl::OkStatus();
}

absl::Status FdWritableFile::Close() {
  if (closed()) return absl::OkStatus();
  absl::Status s = WritePending();
  // On Linux the descriptor is released even if close fails; never retry.
  if (::close(fd_) != 0 && s.ok()) {
    s = ErrnoToStatus(errno, absl::StrCat("cannot close ", Quote(path_)));
  }
  fd_ = -1;
  return s;
}

}  // namespace posix_internal

}  // namespace recflow
