#include "recflow/core/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"

namespace recflow {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string ReadAll(Env* env, const std::string& path) {
  std::string out;
  absl::Status s = ReadFileToString(env, path, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

bool HasTempFiles(Env* env, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> children = env->GetChildren(dir);
  EXPECT_TRUE(children.ok()) << children.status();
  for (const std::string& name : *children) {
    if (absl::StrContains(name, ".tmp.")) return true;
  }
  return false;
}

// Creates a fresh directory under the test temp dir; deletes it at the end.
class ScopedTempDir {
 public:
  ScopedTempDir() {
    std::string pattern = JoinPath(::testing::TempDir(), "recflow_env.XXXXXX");
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    char* made = ::mkdtemp(buf.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << pattern << ": " << errno;
    path_ = made == nullptr ? "" : made;
  }
  ~ScopedTempDir() {
    if (!path_.empty()) {
      absl::Status s = DeleteRecursively(Env::Default(), path_);
      EXPECT_TRUE(s.ok()) << s;
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// Behavior both the POSIX env and MemEnv must share.

struct EnvFactory {
  const char* name;
  bool is_posix;
};

class EnvTest : public ::testing::TestWithParam<EnvFactory> {
 protected:
  void SetUp() override {
    if (GetParam().is_posix) {
      temp_dir_ = std::make_unique<ScopedTempDir>();
      env_ = Env::Default();
      root_ = temp_dir_->path();
    } else {
      mem_env_ = std::make_unique<MemEnv>();
      env_ = mem_env_.get();
      root_ = "/test";
      ASSERT_TRUE(env_->CreateDir(root_).ok());
    }
  }

  std::string Path(absl::string_view name) const {
    return JoinPath(root_, name);
  }

  Env* env_ = nullptr;
  std::string root_;
  std::unique_ptr<ScopedTempDir> temp_dir_;
  std::unique_ptr<MemEnv> mem_env_;
};

TEST_P(EnvTest, WriteReadAppendSize) {
  const std::string path = Path("f");
  EXPECT_FALSE(env_->FileExists(path));
  ASSERT_TRUE(WriteStringToFile(env_, path, "hello").ok());
  EXPECT_TRUE(env_->FileExists(path));
  EXPECT_EQ(ReadAll(env_, path), "hello");
  EXPECT_EQ(*env_->GetFileSize(path), 5u);

  {
    auto file = env_->NewAppendableFile(path);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_TRUE((*file)->Append(", ").ok());
    ASSERT_TRUE((*file)->Append("world").ok());
    ASSERT_TRUE((*file)->Flush().ok());
    ASSERT_TRUE((*file)->Sync().ok());
    ASSERT_TRUE((*file)->Close().ok());
    EXPECT_TRUE((*file)->Close().ok());  // Second Close is fine.
    EXPECT_EQ((*file)->Append("x").code(),
              absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(ReadAll(env_, path), "hello, world");
  EXPECT_EQ(*env_->GetFileSize(path), 12u);

  // NewWritableFile truncates.
  ASSERT_TRUE(WriteStringToFile(env_, path, "x").ok());
  EXPECT_EQ(ReadAll(env_, path), "x");

  // Empty file.
  ASSERT_TRUE(WriteStringToFile(env_, path, "").ok());
  EXPECT_EQ(ReadAll(env_, path), "");
  EXPECT_EQ(*env_->GetFileSize(path), 0u);
}

TEST_P(EnvTest, ManyAppendsOfMixedSizes) {
  const std::string path = Path("mixed");
  std::string expected;
  auto file = env_->NewWritableFile(path);
  ASSERT_TRUE(file.ok());
  std::mt19937_64 rng(42);
  for (int i = 0; i < 300; ++i) {
    size_t len = (i % 7 == 0) ? rng() % 200000 : rng() % 100;
    std::string chunk = RandomBytes(len, i);
    ASSERT_TRUE((*file)->Append(chunk).ok());
    expected += chunk;
  }
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(*env_->GetFileSize(path), expected.size());
  EXPECT_TRUE(ReadAll(env_, path) == expected);
}

TEST_P(EnvTest, RandomAccessReads) {
  const std::string path = Path("r");
  const std::string data = RandomBytes(100000, 1);
  ASSERT_TRUE(WriteStringToFile(env_, path, data).ok());
  auto file = env_->NewRandomAccessFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->Size(), data.size());

  std::vector<char> scratch(data.size() + 10);
  auto r = (*file)->Read(10, 20, scratch.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, data.substr(10, 20));

  // Short read only at end of file.
  r = (*file)->Read(data.size() - 5, 10, scratch.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, data.substr(data.size() - 5));

  r = (*file)->Read(data.size(), 10, scratch.data());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  r = (*file)->Read(data.size() + 1000, 10, scratch.data());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());

  r = (*file)->Read(0, data.size() + 10, scratch.data());
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(*r == data);

  // Concurrent readers.
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<char> buf(4096);
      for (int i = 0; i < 200; ++i) {
        uint64_t offset = rng() % data.size();
        size_t n = rng() % buf.size();
        auto got = (*file)->Read(offset, n, buf.data());
        if (!got.ok() || *got != absl::string_view(data).substr(offset, n)) {
          ++mismatches;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_P(EnvTest, Directories) {
  EXPECT_TRUE(env_->IsDirectory(root_).ok());
  ASSERT_TRUE(env_->CreateDir(Path("d")).ok());
  EXPECT_TRUE(env_->IsDirectory(Path("d")).ok());
  absl::Status s = env_->CreateDir(Path("d"));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;
  EXPECT_THAT(Msg(s), HasSubstr(Path("d")));

  s = env_->CreateDir(Path("missing/child"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;

  ASSERT_TRUE(env_->RecursivelyCreateDir(Path("a/b/c")).ok());
  EXPECT_TRUE(env_->IsDirectory(Path("a/b/c")).ok());
  EXPECT_TRUE(env_->RecursivelyCreateDir(Path("a/b/c")).ok());
  EXPECT_TRUE(env_->RecursivelyCreateDir(Path("a/b/c/")).ok());

  ASSERT_TRUE(WriteStringToFile(env_, Path("file"), "x").ok());
  s = env_->IsDirectory(Path("file"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  s = env_->IsDirectory(Path("nope"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_FALSE(env_->RecursivelyCreateDir(Path("file/sub")).ok());

  ASSERT_TRUE(WriteStringToFile(env_, Path("a/z"), "1").ok());
  ASSERT_TRUE(WriteStringToFile(env_, Path("a/b/y"), "2").ok());
  auto children = env_->GetChildren(root_);
  ASSERT_TRUE(children.ok());
  EXPECT_THAT(*children, ElementsAre("a", "d", "file"));
  children = env_->GetChildren(Path("a"));
  ASSERT_TRUE(children.ok());
  EXPECT_THAT(*children, ElementsAre("b", "z"));
  children = env_->GetChildren(Path("d"));
  ASSERT_TRUE(children.ok());
  EXPECT_THAT(*children, IsEmpty());
  EXPECT_EQ(env_->GetChildren(Path("nope")).status().code(),
            absl::StatusCode::kNotFound);

  s = env_->DeleteDir(Path("a"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(env_->DeleteDir(Path("d")).ok());
  EXPECT_FALSE(env_->FileExists(Path("d")));
  s = env_->DeleteFile(Path("a"));
  EXPECT_FALSE(s.ok());

  ASSERT_TRUE(DeleteRecursively(env_, Path("a")).ok());
  EXPECT_FALSE(env_->FileExists(Path("a")));
  EXPECT_EQ(DeleteRecursively(env_, Path("a")).code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(*env_->GetChildren(root_), ElementsAre("file"));
}

TEST_P(EnvTest, RenameAndDelete) {
  ASSERT_TRUE(WriteStringToFile(env_, Path("src"), "new").ok());
  ASSERT_TRUE(WriteStringToFile(env_, Path("dst"), "old").ok());
  ASSERT_TRUE(env_->RenameFile(Path("src"), Path("dst")).ok());
  EXPECT_FALSE(env_->FileExists(Path("src")));
  EXPECT_EQ(ReadAll(env_, Path("dst")), "new");

  absl::Status s = env_->RenameFile(Path("src"), Path("other"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(Msg(s), HasSubstr(Path("src")));

  // Directories rename with their contents.
  ASSERT_TRUE(env_->RecursivelyCreateDir(Path("d1/sub")).ok());
  ASSERT_TRUE(WriteStringToFile(env_, Path("d1/sub/f"), "deep").ok());
  ASSERT_TRUE(env_->RenameFile(Path("d1"), Path("d2")).ok());
  EXPECT_FALSE(env_->FileExists(Path("d1")));
  EXPECT_EQ(ReadAll(env_, Path("d2/sub/f")), "deep");

  ASSERT_TRUE(env_->DeleteFile(Path("dst")).ok());
  EXPECT_FALSE(env_->FileExists(Path("dst")));
  s = env_->DeleteFile(Path("dst"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(Msg(s), HasSubstr(Path("dst")));
}

TEST_P(EnvTest, NotFoundErrorsNameThePath) {
  const std::string missing = Path("no/such/file");
  auto r = env_->NewRandomAccessFile(missing);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(r.status()), HasSubstr(missing));
  EXPECT_THAT(Msg(r.status()), HasSubstr("No such file or directory"));

  auto w = env_->NewWritableFile(missing);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(w.status()), HasSubstr(missing));

  auto size = env_->GetFileSize(missing);
  EXPECT_EQ(size.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(size.status()), HasSubstr(missing));

  std::string out;
  absl::Status s = ReadFileToString(env_, missing, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(s), HasSubstr(missing));

  // Opening a directory as a file is a FailedPrecondition.
  r = env_->NewRandomAccessFile(root_);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
      << r.status();
  w = env_->NewWritableFile(root_);
  EXPECT_FALSE(w.ok());
}

TEST_P(EnvTest, AtomicWriteReplacesContentAndLeavesNoTempFiles) {
  const std::string path = Path("state");
  ASSERT_TRUE(WriteStringToFileAtomically(env_, path, "v1").ok());
  EXPECT_EQ(ReadAll(env_, path), "v1");
  ASSERT_TRUE(WriteStringToFileAtomically(env_, path, "version 2").ok());
  EXPECT_EQ(ReadAll(env_, path), "version 2");
  const std::string big = RandomBytes(3 << 20, 9);
  ASSERT_TRUE(WriteStringToFileAtomically(env_, path, big).ok());
  EXPECT_TRUE(ReadAll(env_, path) == big);
  EXPECT_FALSE(HasTempFiles(env_, root_));
  EXPECT_THAT(*env_->GetChildren(root_), ElementsAre("state"));

  // Into a missing directory: fails, names the path, leaves nothing behind.
  absl::Status s = WriteStringToFileAtomically(env_, Path("nodir/x"), "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_THAT(Msg(s), HasSubstr(Path("nodir/x")));
}

TEST_P(EnvTest, ReadFileToStringLimit) {
  const std::string path = Path("big");
  const std::string data = RandomBytes(1000, 3);
  ASSERT_TRUE(WriteStringToFile(env_, path, data).ok());
  std::string out;
  ASSERT_TRUE(ReadFileToString(env_, path, &out, 1000).ok());
  EXPECT_TRUE(out == data);

  absl::Status s = ReadFileToString(env_, path, &out, 999);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(Msg(s), HasSubstr(path));
  EXPECT_THAT(Msg(s), HasSubstr("1000 bytes"));
  EXPECT_THAT(Msg(s), HasSubstr("limit of 999 bytes"));

  ASSERT_TRUE(ReadFileToString(env_, path, &out, ~uint64_t{0}).ok());
  EXPECT_TRUE(out == data);
}

TEST_P(EnvTest, Clock) {
  uint64_t t0 = env_->NowMicros();
  env_->SleepForMicros(2000);
  uint64_t t1 = env_->NowMicros();
  EXPECT_GE(t1 - t0, 2000u);
  env_->SleepForMicros(0);
  env_->SleepForMicros(-5);
  // Wall clock: after 2020-01-01.
  EXPECT_GT(env_->NowUnixMicros(), 1577836800ull * 1000000);
}

INSTANTIATE_TEST_SUITE_P(Envs, EnvTest,
                         ::testing::Values(EnvFactory{"Posix", true},
                                           EnvFactory{"Mem", false}),
                         [](const auto& info) {
                           return std::string(info.param.name);
                         });

// ---------------------------------------------------------------------------
// POSIX only.

TEST(PosixEnvTest, LargeOffsets) {
  ScopedTempDir dir;
  const std::string path = JoinPath(dir.path(), "sparse");
  const uint64_t kOffset = (uint64_t{5} << 30) + 123;  // Past 4 GiB.
  {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "marker", 6, static_cast<off_t>(kOffset)), 6)
        << "cannot make a sparse file here: " << errno;
    ::close(fd);
  }
  Env* env = Env::Default();
  EXPECT_EQ(*env->GetFileSize(path), kOffset + 6);
  auto file = env->NewRandomAccessFile(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*(*file)->Size(), kOffset + 6);
  char scratch[16];
  auto r = (*file)->Read(kOffset - 2, sizeof(scratch), scratch);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, absl::string_view("\0\0marker", 8));

  std::string out;
  absl::Status s = ReadFileToString(env, path, &out, 1 << 20);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Msg(s), HasSubstr(path));
  EXPECT_THAT(Msg(s), HasSubstr(std::to_string(kOffset + 6)));
}

TEST(PosixEnvTest, PermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores permissions";
  ScopedTempDir dir;
  const std::string locked = JoinPath(dir.path(), "locked");
  Env* env = Env::Default();
  ASSERT_TRUE(env->CreateDir(locked).ok());
  ASSERT_EQ(::chmod(locked.c_str(), 0500), 0);
  auto w = env->NewWritableFile(JoinPath(locked, "f"));
  EXPECT_EQ(w.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(Msg(w.status()), HasSubstr(JoinPath(locked, "f")));
  ASSERT_EQ(::chmod(locked.c_str(), 0700), 0);
}

TEST(PosixEnvTest, SymlinkedDirectoryIsNotFollowedByDeleteRecursively) {
  ScopedTempDir dir;
  Env* env = Env::Default();
  const std::string keep = JoinPath(dir.path(), "keep");
  const std::string doomed = JoinPath(dir.path(), "doomed");
  ASSERT_TRUE(env->CreateDir(keep).ok());
  ASSERT_TRUE(WriteStringToFile(env, JoinPath(keep, "precious"), "x").ok());
  ASSERT_TRUE(env->CreateDir(doomed).ok());
  ASSERT_EQ(::symlink(keep.c_str(), JoinPath(doomed, "link").c_str()), 0);
  ASSERT_TRUE(DeleteRecursively(env, doomed).ok());
  EXPECT_FALSE(env->FileExists(doomed));
  EXPECT_TRUE(env->FileExists(JoinPath(keep, "precious")));
}

TEST(PosixEnvTest, ReadFileToStringOnProcFile) {
  // /proc files report size 0 but have contents.
  std::string out;
  absl::Status s = ReadFileToString(Env::Default(), "/proc/self/status", &out);
  if (!s.ok()) GTEST_SKIP() << s;
  EXPECT_THAT(out, HasSubstr("Pid:"));
}

TEST(ErrnoToStatusTest, Codes) {
  EXPECT_TRUE(ErrnoToStatus(0, "x").ok());
  EXPECT_EQ(ErrnoToStatus(ENOENT, "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ErrnoToStatus(EACCES, "x").code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoToStatus(EEXIST, "x").code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoToStatus(ENOSPC, "x").code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ErrnoToStatus(EIO, "x").code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ErrnoToStatus(ECHILD, "x").code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(Msg(ErrnoToStatus(ENOSPC, "cannot write 'f'")),
            "cannot write 'f': No space left on device");
}

// ---------------------------------------------------------------------------
// MemEnv fault injection, handles and clock.

TEST(MemEnvTest, FailAfterBytes) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDir("/d").ok());
  env.FailAfterBytes(10);
  auto file = env.NewWritableFile("/d/f");
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE((*file)->Append("12345").ok());
  EXPECT_TRUE((*file)->Append("6789").ok());
  absl::Status s = (*file)->Append("abc");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(Msg(s), HasSubstr("/d/f"));
  EXPECT_FALSE((*file)->Append("x").ok());
  EXPECT_EQ(ReadAll(&env, "/d/f"), "123456789a");  // A partial write.

  env.FailAfterBytes(-1);
  EXPECT_TRUE((*file)->Append("ok").ok());
  EXPECT_EQ(ReadAll(&env, "/d/f"), "123456789aok");
}

TEST(MemEnvTest, AtomicWriteFailingMidwayKeepsOldContent) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDir("/d").ok());
  ASSERT_TRUE(WriteStringToFileAtomically(&env, "/d/state", "old state").ok());

  // The disk fills up while writing the temporary file.
  env.FailAfterBytes(4);
  absl::Status s =
      WriteStringToFileAtomically(&env, "/d/state", "a much newer state");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  env.FailAfterBytes(-1);
  EXPECT_EQ(ReadAll(&env, "/d/state"), "old state");
  EXPECT_FALSE(HasTempFiles(&env, "/d"));
  EXPECT_THAT(*env.GetChildren("/d"), ElementsAre("state"));

  // The rename fails.
  env.FailRenames(true);
  s = WriteStringToFileAtomically(&env, "/d/state", "a much newer state");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(Msg(s), HasSubstr("/d/state"));
  env.FailRenames(false);
  EXPECT_EQ(ReadAll(&env, "/d/state"), "old state");
  EXPECT_THAT(*env.GetChildren("/d"), ElementsAre("state"));

  ASSERT_TRUE(WriteStringToFileAtomically(&env, "/d/state", "new").ok());
  EXPECT_EQ(ReadAll(&env, "/d/state"), "new");
}

// Fails Sync on every file it creates, through EnvWrapper.
class FailingSyncEnv : public EnvWrapper {
 public:
  using EnvWrapper::EnvWrapper;

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) override {
    auto file = target()->NewWritableFile(path);
    if (!file.ok()) return file.status();
    return std::unique_ptr<WritableFile>(new FailingSyncFile(std::move(*file)));
  }

 private:
  class FailingSyncFile : public WritableFile {
   public:
    explicit FailingSyncFile(std::unique_ptr<WritableFile> base)
        : base_(std::move(base)) {}
    absl::Status Append(absl::string_view data) override {
      return base_->Append(data);
    }
    absl::Status Flush() override { return base_->Flush(); }
    absl::Status Sync() override {
      return absl::InternalError("injected sync failure");
    }
    absl::Status Close() override { return base_->Close(); }

   private:
    std::unique_ptr<WritableFile> base_;
  };
};

TEST(MemEnvTest, AtomicWriteWithFailingSyncKeepsOldContent) {
  MemEnv mem;
  FailingSyncEnv env(&mem);
  ASSERT_TRUE(env.CreateDir("/d").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/d/state", "old").ok());
  absl::Status s = WriteStringToFileAtomically(&env, "/d/state", "new");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(ReadAll(&env, "/d/state"), "old");
  EXPECT_THAT(*env.GetChildren("/d"), ElementsAre("state"));
}

TEST(MemEnvTest, OpenHandlesSurviveDeleteAndTruncateInPlace) {
  MemEnv env;
  ASSERT_TRUE(WriteStringToFile(&env, "f", "contents").ok());
  auto reader = env.NewRandomAccessFile("f");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(env.DeleteFile("f").ok());
  char scratch[16];
  EXPECT_EQ(*(*reader)->Read(0, 16, scratch), "contents");

  ASSERT_TRUE(WriteStringToFile(&env, "g", "abcdef").ok());
  auto g_reader = env.NewRandomAccessFile("g");
  ASSERT_TRUE(g_reader.ok());
  ASSERT_TRUE(WriteStringToFile(&env, "g", "xy").ok());
  EXPECT_EQ(*(*g_reader)->Size(), 2u);
  EXPECT_THAT(*env.GetChildren(""), ElementsAre("g"));
  EXPECT_THAT(*env.GetChildren("."), ElementsAre("g"));
}

TEST(MemEnvTest, FileCannotBeCreatedUnderAFile) {
  MemEnv env;
  ASSERT_TRUE(WriteStringToFile(&env, "/f", "x").ok());
  EXPECT_EQ(env.NewWritableFile("/f/g").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(env.CreateDir("/f/g").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(env.GetChildren("/f").status().code(), absl::StatusCode::kNotFound);
}

TEST(MemEnvTest, FakeClock) {
  MemEnv env;
  env.SetFakeTimeMicros(1000);
  EXPECT_EQ(env.NowMicros(), 1000u);
  EXPECT_EQ(env.NowUnixMicros(), 1000u);
  env.SleepForMicros(3600ll * 1000000);  // Returns at once.
  EXPECT_EQ(env.NowMicros(), 1000u + 3600ull * 1000000);
  env.AdvanceFakeTimeMicros(5);
  EXPECT_EQ(env.NowMicros(), 1005u + 3600ull * 1000000);
}

TEST(MemEnvTest, FilesOutliveTheEnv) {
  std::unique_ptr<WritableFile> file;
  {
    MemEnv env;
    file = std::move(*env.NewWritableFile("f"));
  }
  EXPECT_TRUE(file->Append("still fine").ok());
  EXPECT_TRUE(file->Close().ok());
}

// ---------------------------------------------------------------------------
// Paths.

TEST(PathTest, JoinPath) {
  EXPECT_EQ(JoinPath("a", "b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "b"), "a/b");
  EXPECT_EQ(JoinPath("a", "/b"), "a/b");
  EXPECT_EQ(JoinPath("a/", "/b"), "a/b");
  EXPECT_EQ(JoinPath("/x", "/y"), "/x/y");
  EXPECT_EQ(JoinPath("", "b"), "b");
  EXPECT_EQ(JoinPath("a", ""), "a");
  EXPECT_EQ(JoinPath("", ""), "");
  EXPECT_EQ(JoinPath("/", "b"), "/b");
  EXPECT_EQ(JoinPath("model", "variables", "variables.index"),
            "model/variables/variables.index");
  EXPECT_EQ(JoinPath("/a", "b/", "c", "d"), "/a/b/c/d");
}

TEST(PathTest, DirnameBasename) {
  EXPECT_EQ(Dirname("a/b/c"), "a/b");
  EXPECT_EQ(Dirname("/a"), "/");
  EXPECT_EQ(Dirname("/"), "/");
  EXPECT_EQ(Dirname("a"), "");
  EXPECT_EQ(Dirname(""), "");
  EXPECT_EQ(Dirname("a/b/"), "a/b");
  EXPECT_EQ(Basename("a/b/c"), "c");
  EXPECT_EQ(Basename("a"), "a");
  EXPECT_EQ(Basename("/a"), "a");
  EXPECT_EQ(Basename("a/b/"), "");
  EXPECT_EQ(Basename(""), "");
}

}  // namespace
}  // namespace recflow
