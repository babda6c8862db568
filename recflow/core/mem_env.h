// MemEnv: an in-memory Env for tests, with fault injection and an optional
// fake clock (LevelDB's memenv idea).
//
// Semantics follow POSIX closely enough for code under test to behave as it
// would on disk:
//   - Directories are tracked explicitly: a file or directory can only be
//     created inside an existing directory (NotFound otherwise). "/", "" and
//     "." always exist. Paths are taken literally apart from trailing '/'
//     ("a/./b" and "a/b" are different paths).
//   - Opening a file with NewWritableFile truncates it in place, as O_TRUNC
//     does; handles opened earlier see the change. A file deleted or
//     replaced by a rename stays readable and writable through handles that
//     are already open.
//   - Writes are visible to readers at once (no buffering); Sync and SyncDir
//     only check that their target exists.
//
// Fault injection:
//   - FailAfterBytes(n): after n more bytes in total have been appended (to
//     any files), Append writes only the bytes that fit in the budget and
//     returns ResourceExhausted, as a full disk would; later Appends fail
//     without writing.
//   - FailRenames(true): RenameFile fails with Internal and changes nothing.
//
// Clock: by default NowMicros, NowUnixMicros and SleepForMicros use the
// real clock (Env::Default()). After SetFakeTimeMicros the clock is fake:
// both Now functions return the fake time, which moves only through
// AdvanceFakeTimeMicros and SleepForMicros (which returns at once).
//
// Thread-safe. Files handed out hold shared state and may outlive the
// MemEnv.

#ifndef RECFLOW_CORE_MEM_ENV_H_
#define RECFLOW_CORE_MEM_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/env.h"

namespace recflow {

class MemEnv : public Env {
 public:
  MemEnv();
  ~MemEnv() override;

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<WritableFile>> NewAppendableFile(
      const std::string& path) override;
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override;
  bool FileExists(const std::string& path) override;
  absl::StatusOr<uint64_t> GetFileSize(const std::string& path) override;
  absl::Status IsDirectory(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> GetChildren(
      const std::string& dir) override;
  absl::Status CreateDir(const std::string& dir) override;
  absl::Status DeleteFile(const std::string& path) override;
  absl::Status DeleteDir(const std::string& dir) override;
  absl::Status RenameFile(const std::string& src,
                          const std::string& dst) override;
  absl::Status SyncDir(const std::string& dir) override;
  uint64_t NowMicros() override;
  uint64_t NowUnixMicros() override;
  void SleepForMicros(int64_t micros) override;

  // Appends fail once `n` more bytes have been written in total; n < 0
  // removes the limit.
  void FailAfterBytes(int64_t n);

  // While `fail` is true, RenameFile fails without changing anything.
  void FailRenames(bool fail);

  // Switches to the fake clock and sets it to `now_micros`.
  void SetFakeTimeMicros(uint64_t now_micros);

  // Moves the fake clock forward. REQUIRES: SetFakeTimeMicros was called.
  void AdvanceFakeTimeMicros(uint64_t delta_micros);

  // Implementation details follow.
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_MEM_ENV_H_
