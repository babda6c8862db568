#include "recflow/core/mem_env.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include "absl/strings/string_view.h"
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/logging.h"

namespace recflow {

namespace {

// Contents of one file. Guarded by MemEnv::State::mu.
struct FileData {
  std::string contents;
};

std::string Quote(absl::string_view path) {
  return absl::StrCat("'", path, "'");
}

// Strips trailing slashes (but keeps "/") and maps "." to "".
std::string Normalize(absl::string_view path) {
  while (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (path == ".") return "";
  return std::string(path);
}

bool IsRoot(const std::string& path) { return path.empty() || path == "/"; }

std::string Parent(const std::string& path) { return Normalize(Dirname(path)); }

}  // namespace

// std::mutex rather than absl::Mutex so that ThreadSanitizer, which does not
// see inside a system-packaged (uninstrumented) absl, checks code using
// MemEnv from several threads.
struct MemEnv::State {
  std::mutex mu;
  // All fields below, and the contents of every FileData, are guarded by mu.
  std::map<std::string, std::shared_ptr<FileData>> files;
  std::set<std::string> dirs;
  int64_t write_budget = -1;
  bool fail_renames = false;
  bool fake_clock = false;
  uint64_t fake_now = 0;

  // The helpers below REQUIRE: mu is held.

  bool DirExists(const std::string& p) const {
    return IsRoot(p) || dirs.count(p) > 0;
  }

  // Errno describing why `p` cannot be created in its parent, or 0.
  int ParentErrno(const std::string& p) const {
    std::string parent = Parent(p);
    if (files.count(parent) > 0) return ENOTDIR;
    if (!DirExists(parent)) return ENOENT;
    return 0;
  }

  bool HasChildren(const std::string& dir) const {
    std::string prefix = dir == "/" ? dir : dir + "/";
    auto f = files.lower_bound(prefix);
    if (f != files.end() && absl::StartsWith(f->first, prefix)) return true;
    auto d = dirs.lower_bound(prefix);
    return d != dirs.end() && absl::StartsWith(*d, prefix);
  }
};

namespace {

class MemWritableFile : public WritableFile {
 public:
  MemWritableFile(std::shared_ptr<MemEnv::State> state,
                  std::shared_ptr<FileData> file, std::string path)
      : state_(std::move(state)),
        file_(std::move(file)),
        path_(std::move(path)) {}

  absl::Status Append(absl::string_view data) override {
    if (closed_) return Closed();
    std::lock_guard<std::mutex> lock(state_->mu);
    int64_t& budget = state_->write_budget;
    if (budget >= 0 && data.size() > static_cast<uint64_t>(budget)) {
      file_->contents.append(data.data(), static_cast<size_t>(budget));
      budget = 0;
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot write ", Quote(path_),
                       ": injected fault: no space left on device"));
    }
    if (budget >= 0) budget -= static_cast<int64_t>(data.size());
    file_->contents.append(data.data(), data.size());
    return absl::OkStatus();
  }

  absl::Status Flush() override {
    return closed_ ? Closed() : absl::OkStatus();
  }
  absl::Status Sync() override { return closed_ ? Closed() : absl::OkStatus(); }
  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }

 private:
  absl::Status Closed() const {
    return absl::FailedPreconditionError(
        absl::StrCat("file ", Quote(path_), " is already closed"));
  }

  const std::shared_ptr<MemEnv::State> state_;
  const std::shared_ptr<FileData> file_;
  const std::string path_;
  bool closed_ = false;
};

class MemRandomAccessFile : public RandomAccessFile {
 public:
  MemRandomAccessFile(std::shared_ptr<MemEnv::State> state,
                      std::shared_ptr<FileData> file)
      : state_(std::move(state)), file_(std::move(file)) {}

  absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n,
                                        char* scratch) const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    const std::string& contents = file_->contents;
    if (offset >= contents.size()) return absl::string_view(scratch, 0);
    size_t count = std::min<uint64_t>(n, contents.size() - offset);
    std::memcpy(scratch, contents.data() + offset, count);
    return absl::string_view(scratch, count);
  }

  absl::StatusOr<uint64_t> Size() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return file_->contents.size();
  }

 private:
  const std::shared_ptr<MemEnv::State> state_;
  const std::shared_ptr<FileData> file_;
};

}  // namespace

MemEnv::MemEnv() : state_(std::make_shared<State>()) {}

MemEnv::~MemEnv() = default;

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewWritableFile(
    const std::string& path) {
  std::string p = Normalize(path);
  std::string context =
      absl::StrCat("cannot open ", Quote(path), " for writing");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p)) return ErrnoToStatus(EISDIR, context);
  auto it = state_->files.find(p);
  std::shared_ptr<FileData> file;
  if (it != state_->files.end()) {
    file = it->second;
    file->contents.clear();
  } else {
    if (int err = state_->ParentErrno(p)) return ErrnoToStatus(err, context);
    file = std::make_shared<FileData>();
    state_->files.emplace(p, file);
  }
  return std::unique_ptr<WritableFile>(
      std::make_unique<MemWritableFile>(state_, std::move(file), path));
}

absl::StatusOr<std::unique_ptr<WritableFile>> MemEnv::NewAppendableFile(
    const std::string& path) {
  std::string p = Normalize(path);
  std::string context =
      absl::StrCat("cannot open ", Quote(path), " for appending");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p)) return ErrnoToStatus(EISDIR, context);
  std::shared_ptr<FileData>& slot = state_->files[p];
  if (slot == nullptr) {
    if (int err = state_->ParentErrno(p)) {
      state_->files.erase(p);
      return ErrnoToStatus(err, context);
    }
    slot = std::make_shared<FileData>();
  }
  return std::unique_ptr<WritableFile>(
      std::make_unique<MemWritableFile>(state_, slot, path));
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> MemEnv::NewRandomAccessFile(
    const std::string& path) {
  std::string p = Normalize(path);
  std::string context =
      absl::StrCat("cannot open ", Quote(path), " for reading");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p)) return ErrnoToStatus(EISDIR, context);
  auto it = state_->files.find(p);
  if (it == state_->files.end()) return ErrnoToStatus(ENOENT, context);
  return std::unique_ptr<RandomAccessFile>(
      std::make_unique<MemRandomAccessFile>(state_, it->second));
}

bool MemEnv::FileExists(const std::string& path) {
  std::string p = Normalize(path);
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->DirExists(p) || state_->files.count(p) > 0;
}

absl::StatusOr<uint64_t> MemEnv::GetFileSize(const std::string& path) {
  std::string p = Normalize(path);
  std::string context = absl::StrCat("cannot get size of ", Quote(path));
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p)) return ErrnoToStatus(EISDIR, context);
  auto it = state_->files.find(p);
  if (it == state_->files.end()) return ErrnoToStatus(ENOENT, context);
  return it->second->contents.size();
}

absl::Status MemEnv::IsDirectory(const std::string& path) {
  std::string p = Normalize(path);
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p)) return absl::OkStatus();
  if (state_->files.count(p) > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(Quote(path), " is not a directory"));
  }
  return ErrnoToStatus(ENOENT, absl::StrCat("cannot stat ", Quote(path)));
}

absl::StatusOr<std::vector<std::string>> MemEnv::GetChildren(
    const std::string& dir) {
  std::string p = Normalize(dir);
  std::string context = absl::StrCat("cannot list directory ", Quote(dir));
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->files.count(p) > 0) return ErrnoToStatus(ENOTDIR, context);
  if (!state_->DirExists(p)) return ErrnoToStatus(ENOENT, context);
  std::vector<std::string> names;
  for (const auto& [name, file] : state_->files) {
    if (name != p && Parent(name) == p) names.push_back(Basename(name));
  }
  for (const std::string& name : state_->dirs) {
    if (name != p && Parent(name) == p) names.push_back(Basename(name));
  }
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status MemEnv::CreateDir(const std::string& dir) {
  std::string p = Normalize(dir);
  std::string context = absl::StrCat("cannot create directory ", Quote(dir));
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p) || state_->files.count(p) > 0) {
    return ErrnoToStatus(EEXIST, context);
  }
  if (int err = state_->ParentErrno(p)) return ErrnoToStatus(err, context);
  state_->dirs.insert(p);
  return absl::OkStatus();
}

absl::Status MemEnv::DeleteFile(const std::string& path) {
  std::string p = Normalize(path);
  std::string context = absl::StrCat("cannot delete ", Quote(path));
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->DirExists(p)) return ErrnoToStatus(EISDIR, context);
  if (state_->files.erase(p) == 0) return ErrnoToStatus(ENOENT, context);
  return absl::OkStatus();
}

absl::Status MemEnv::DeleteDir(const std::string& dir) {
  std::string p = Normalize(dir);
  std::string context = absl::StrCat("cannot delete directory ", Quote(dir));
  std::lock_guard<std::mutex> lock(state_->mu);
  if (IsRoot(p)) return ErrnoToStatus(EBUSY, context);
  if (state_->files.count(p) > 0) return ErrnoToStatus(ENOTDIR, context);
  if (state_->dirs.count(p) == 0) return ErrnoToStatus(ENOENT, context);
  if (state_->HasChildren(p)) return ErrnoToStatus(ENOTEMPTY, context);
  state_->dirs.erase(p);
  return absl::OkStatus();
}

absl::Status MemEnv::RenameFile(const std::string& src,
                                const std::string& dst) {
  std::string s = Normalize(src);
  std::string d = Normalize(dst);
  std::string context =
      absl::StrCat("cannot rename ", Quote(src), " to ", Quote(dst));
  std::lock_guard<std::mutex> lock(state_->mu);
  State& st = *state_;
  if (st.fail_renames) {
    return absl::InternalError(absl::StrCat(context, ": injected fault"));
  }
  if (auto it = st.files.find(s); it != st.files.end()) {
    if (st.DirExists(d)) return ErrnoToStatus(EISDIR, context);
    if (int err = st.ParentErrno(d)) return ErrnoToStatus(err, context);
    if (s == d) return absl::OkStatus();
    std::shared_ptr<FileData> file = std::move(it->second);
    st.files.erase(it);
    st.files[d] = std::move(file);
    return absl::OkStatus();
  }
  if (IsRoot(s)) return ErrnoToStatus(EBUSY, context);
  if (st.dirs.count(s) == 0) return ErrnoToStatus(ENOENT, context);
  if (s == d) return absl::OkStatus();
  if (st.files.count(d) > 0) return ErrnoToStatus(ENOTDIR, context);
  if (IsRoot(d) || absl::StartsWith(d, s + "/")) {
    return ErrnoToStatus(EINVAL, context);
  }
  if (st.dirs.count(d) > 0 && st.HasChildren(d)) {
    return ErrnoToStatus(ENOTEMPTY, context);
  }
  if (int err = st.ParentErrno(d)) return ErrnoToStatus(err, context);
  // Move the directory and everything below it.
  const std::string prefix = s + "/";
  std::vector<std::pair<std::string, std::shared_ptr<FileData>>> moved_files;
  for (auto it = st.files.lower_bound(prefix);
       it != st.files.end() && absl::StartsWith(it->first, prefix);) {
    moved_files.emplace_back(d + it->first.substr(s.size()),
                             std::move(it->second));
    it = st.files.erase(it);
  }
  std::vector<std::string> moved_dirs;
  for (auto it = st.dirs.lower_bound(prefix);
       it != st.dirs.end() && absl::StartsWith(*it, prefix);) {
    moved_dirs.push_back(d + it->substr(s.size()));
    it = st.dirs.erase(it);
  }
  st.dirs.erase(s);
  st.dirs.insert(d);
  for (auto& [name, file] : moved_files) st.files[name] = std::move(file);
  for (auto& name : moved_dirs) st.dirs.insert(std::move(name));
  return absl::OkStatus();
}

absl::Status MemEnv::SyncDir(const std::string& dir) {
  std::string p = Normalize(dir);
  std::string context =
      absl::StrCat("cannot open directory ", Quote(dir), " to sync it");
  std::lock_guard<std::mutex> lock(state_->mu);
  if (state_->files.count(p) > 0) return ErrnoToStatus(ENOTDIR, context);
  if (!state_->DirExists(p)) return ErrnoToStatus(ENOENT, context);
  return absl::OkStatus();
}

uint64_t MemEnv::NowMicros() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->fake_clock) return state_->fake_now;
  }
  return Env::Default()->NowMicros();
}

uint64_t MemEnv::NowUnixMicros() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->fake_clock) return state_->fake_now;
  }
  return Env::Default()->NowUnixMicros();
}

void MemEnv::SleepForMicros(int64_t micros) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->fake_clock) {
      if (micros > 0) state_->fake_now += static_cast<uint64_t>(micros);
      return;
    }
  }
  Env::Default()->SleepForMicros(micros);
}

void MemEnv::FailAfterBytes(int64_t n) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->write_budget = n < 0 ? -1 : n;
}

void MemEnv::FailRenames(bool fail) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->fail_renames = fail;
}

void MemEnv::SetFakeTimeMicros(uint64_t now_micros) {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->fake_clock = true;
  state_->fake_now = now_micros;
}

void MemEnv::AdvanceFakeTimeMicros(uint64_t delta_micros) {
  std::lock_guard<std::mutex> lock(state_->mu);
  CHECK(state_->fake_clock) << "AdvanceFakeTimeMicros before SetFakeTimeMicros";
  state_->fake_now += delta_micros;
}

}  // namespace recflow
