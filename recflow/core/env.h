// Env: the file system and clock, behind an interface that tests can replace
// (LevelDB's Env idea). Everything in recflow that touches files or time goes
// through an Env so that tests can use MemEnv (mem_env.h), fault injection or
// a fake clock.
//
// Env::Default() is the POSIX implementation. Paths are plain strings passed
// to the OS unchanged (no URI schemes).
//
// Errors: every method returns absl::Status; messages name the path and the
// OS error (strerror). Codes map from errno as follows:
//   ENOENT, ENOTDIR                       -> NotFound
//   EACCES, EPERM, EROFS                  -> PermissionDenied
//   EEXIST                                -> AlreadyExists
//   ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM, EFBIG -> ResourceExhausted
//   EISDIR, ENOTEMPTY, EBUSY, ETXTBSY     -> FailedPrecondition
//   EINVAL, ENAMETOOLONG, ELOOP           -> InvalidArgument
//   EAGAIN, EINTR                         -> Unavailable
//   ETIMEDOUT                             -> DeadlineExceeded
//   EIO                                   -> Internal
//   anything else                         -> Unknown
//
// Thread-safety: Env implementations are thread-safe. A RandomAccessFile is
// thread-safe. A WritableFile is not; use one per writer.

#ifndef RECFLOW_CORE_ENV_H_
#define RECFLOW_CORE_ENV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace recflow {

// A file being written sequentially. Not thread-safe.
//
// Data passed to Append may be buffered in user space: Flush hands it to the
// OS, Sync makes it durable (fsync), Close flushes and releases the file.
// Destroying an unclosed file closes it and drops any error; call Close to
// see errors. After an error the file's contents on disk are unspecified.
class WritableFile {
 public:
  WritableFile() = default;
  WritableFile(const WritableFile&) = delete;
  WritableFile& operator=(const WritableFile&) = delete;
  virtual ~WritableFile() = default;

  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Flush() = 0;
  virtual absl::Status Sync() = 0;
  // After Close, all other calls return FailedPrecondition; a second Close
  // returns OK.
  virtual absl::Status Close() = 0;
};

// A file read at arbitrary offsets. Thread-safe: concurrent Reads are allowed.
class RandomAccessFile {
 public:
  RandomAccessFile() = default;
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;
  virtual ~RandomAccessFile() = default;

  // Reads up to n bytes starting at `offset`. The result points into
  // `scratch` (which must hold n bytes and outlive the use of the result) or
  // into memory owned by the file. Returns fewer than n bytes only at end of
  // file (an offset at or past the end gives an empty result, not an error).
  virtual absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n,
                                                char* scratch) const = 0;

  // Current size of the file in bytes.
  virtual absl::StatusOr<uint64_t> Size() const = 0;

  // As Read, but only if the bytes can be had without waiting for the
  // device (they are in the page cache): otherwise Unavailable, at once,
  // having read nothing usable. Callers then Read on a thread that may
  // wait, so reads that hit the cache skip the hand-off. The default
  // reads (files kept in memory never wait).
  virtual absl::StatusOr<absl::string_view> ReadIfCached(uint64_t offset, size_t n,
                                                         char* scratch) const {
    return Read(offset, n, scratch);
  }
};

class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env() = default;

  // The POSIX environment. Never null; lives for the whole process.
  static Env* Default();

  // Creates `path` for writing, truncating an existing file.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;

  // Opens `path` for appending, creating it if it does not exist.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) = 0;

  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;

  // Direct I/O, for streaming data far larger than the page cache should
  // hold (checkpoint data files): like NewWritableFile and
  // NewRandomAccessFile, but the bytes move between the caller's memory and
  // the device without passing through the OS page cache (O_DIRECT on
  // Linux), so a multi-GB save or restore neither evicts the process's
  // working set nor pays for page-cache pages it never reuses. The files
  // behave exactly like the ordinary ones (any offset, size and buffer
  // alignment; see direct_file.h for how unaligned pieces are handled).
  // Where the file system refuses direct I/O (tmpfs, some network file
  // systems), or for an Env that does not implement it, these return the
  // ordinary files: the defaults call NewWritableFile / NewRandomAccessFile,
  // so an EnvWrapper that overrides those (fault injection) sees every
  // open.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewDirectWritableFile(
      const std::string& path) {
    return NewWritableFile(path);
  }
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewDirectRandomAccessFile(
      const std::string& path) {
    return NewRandomAccessFile(path);
  }

  // True if `path` exists (file or directory).
  virtual bool FileExists(const std::string& path) = 0;

  virtual absl::StatusOr<uint64_t> GetFileSize(const std::string& path) = 0;

  // OK if `path` is a directory; FailedPrecondition if it exists but is not
  // one; NotFound if it does not exist.
  virtual absl::Status IsDirectory(const std::string& path) = 0;

  // Names (not paths) of the entries of `dir`, sorted, without "." and "..".
  virtual absl::StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) = 0;

  // Creates one directory. AlreadyExists if `dir` exists; NotFound if its
  // parent does not.
  virtual absl::Status CreateDir(const std::string& dir) = 0;

  // Creates `dir` and any missing parents. OK if `dir` already is a
  // directory. The default implementation uses IsDirectory and CreateDir.
  virtual absl::Status RecursivelyCreateDir(const std::string& dir);

  // Deletes a file (not a directory).
  virtual absl::Status DeleteFile(const std::string& path) = 0;

  // Deletes an empty directory.
  virtual absl::Status DeleteDir(const std::string& dir) = 0;

  // Atomically renames `src` to `dst`, replacing an existing file `dst`.
  // Works for directories too (when `dst` does not exist or is an empty
  // directory).
  virtual absl::Status RenameFile(const std::string& src,
                                  const std::string& dst) = 0;

  // Makes the directory's entries durable (fsync on the directory), so that
  // a file created or renamed in it survives a crash.
  virtual absl::Status SyncDir(const std::string& dir) = 0;

  // Microseconds from a monotonic clock with an unspecified origin
  // (CLOCK_MONOTONIC for the POSIX env). Use for durations and deadlines,
  // never as a timestamp.
  virtual uint64_t NowMicros() = 0;

  // Microseconds since the Unix epoch from the wall clock (CLOCK_REALTIME
  // for the POSIX env); may jump. Use for timestamps written to files (event
  // files, checkpoint state), never for durations.
  virtual uint64_t NowUnixMicros() = 0;

  // Sleeps for at least `micros` (returns at once if micros <= 0).
  virtual void SleepForMicros(int64_t micros) = 0;
};

// Forwards every call to another Env. Subclass it to override a few methods,
// e.g. to inject faults in tests. Thread-safe if the target is.
class EnvWrapper : public Env {
 public:
  // `target` is not owned and must outlive this.
  explicit EnvWrapper(Env* target) : target_(target) {}

  Env* target() const { return target_; }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    return target_->NewWritableFile(path);
  }
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override {
    return target_->NewAppendableFile(path);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return target_->NewRandomAccessFile(path);
  }
  bool FileExists(const std::string& path) override {
    return target_->FileExists(path);
  }
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override {
    return target_->GetFileSize(path);
  }
  absl::Status IsDirectory(const std::string& path) override {
    return target_->IsDirectory(path);
  }
  absl::StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) override {
    return target_->GetChildren(dir);
  }
  absl::Status CreateDir(const std::string& dir) override {
    return target_->CreateDir(dir);
  }
  absl::Status RecursivelyCreateDir(const std::string& dir) override {
    return target_->RecursivelyCreateDir(dir);
  }
  absl::Status DeleteFile(const std::string& path) override {
    return target_->DeleteFile(path);
  }
  absl::Status DeleteDir(const std::string& dir) override {
    return target_->DeleteDir(dir);
  }
  absl::Status RenameFile(const std::string& src,
                          const std::string& dst) override {
    return target_->RenameFile(src, dst);
  }
  absl::Status SyncDir(const std::string& dir) override {
    return target_->SyncDir(dir);
  }
  uint64_t NowMicros() override { return target_->NowMicros(); }
  uint64_t NowUnixMicros() override { return target_->NowUnixMicros(); }
  void SleepForMicros(int64_t micros) override {
    target_->SleepForMicros(micros);
  }

 private:
  Env* target_;  // Not owned.
};

// ---------------------------------------------------------------------------
// Helpers over any Env.

// Reads a whole small file (a graph, a JSON config, a state file) into *out.
// Fails with ResourceExhausted, naming the file and the limit, if the file
// is larger than `max_bytes`; large data and checkpoints must be streamed
// instead. On error *out is unspecified.
absl::Status ReadFileToString(Env* env, const std::string& path,
                              std::string* out,
                              uint64_t max_bytes = uint64_t{1} << 31);

// Creates or truncates `path` and writes `data` to it. Not atomic: a reader
// or a crash may observe a partial file. Use WriteStringToFileAtomically for
// anything another process reads.
absl::Status WriteStringToFile(Env* env, const std::string& path,
                               absl::string_view data);

// Replaces `path` with `data` so that readers and crashes see either the old
// contents or the new, never a mix: writes "<path>.tmp.<pid>.<random>" in
// the same directory, syncs and closes it, renames it over `path`, then
// syncs the directory. On any failure before the rename, deletes the
// temporary file and leaves `path` as it was. A failure of the final
// directory sync is returned too, although `path` already has the new
// contents (they may not survive a crash).
absl::Status WriteStringToFileAtomically(Env* env, const std::string& path,
                                         absl::string_view data);

// Deletes `dir` and everything below it (or `dir` itself if it is a file).
// Symbolic links are deleted, not followed. NotFound if `dir` does not exist.
absl::Status DeleteRecursively(Env* env, const std::string& dir);

// Maps an errno value to a Status with the code listed at the top of this
// file and the message "<context>: <strerror(err)>". For Env implementations
// and other code that makes system calls.
absl::Status ErrnoToStatus(int err, absl::string_view context);

// ---------------------------------------------------------------------------
// Path manipulation (pure string functions; '/' is the only separator).

// Joins two path components with exactly one '/' between them:
// JoinPath("a/", "/b") == "a/b". An empty component is skipped:
// JoinPath("", "b") == "b". Unlike Python, an absolute second component is
// still appended: JoinPath("/x", "/y") == "/x/y".
std::string JoinPath(absl::string_view a, absl::string_view b);

template <typename... Rest>
std::string JoinPath(absl::string_view a, absl::string_view b, absl::string_view c,
                     const Rest&... rest) {
  return JoinPath(JoinPath(a, b), c, rest...);
}

// The part of `path` before the last '/': Dirname("a/b/c") == "a/b",
// Dirname("/a") == "/", Dirname("a") == "" (the current directory),
// Dirname("a/b/") == "a/b".
std::string Dirname(absl::string_view path);

// The part of `path` after the last '/': Basename("a/b/c") == "c",
// Basename("a") == "a", Basename("a/b/") == "".
std::string Basename(absl::string_view path);

}  // namespace recflow

#endif  // RECFLOW_CORE_ENV_H_
