#include "recflow/core/direct_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <atomic>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  explicit TempDir(const std::string& base = ::testing::TempDir()) {
    std::string pattern = JoinPath(base, "recflow_direct.XXXXXX");
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    char* made = ::mkdtemp(buf.data());
    path_ = made == nullptr ? "" : made;
  }
  ~TempDir() {
    if (!path_.empty()) DeleteRecursively(Env::Default(), path_).IgnoreError();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::string RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

std::string ReadBack(const std::string& path) {
  std::string got;
  absl::Status s = ReadFileToString(Env::Default(), path, &got);
  EXPECT_TRUE(s.ok()) << s;
  return got;
}

// Writes `want` through a direct file in pieces: some from aligned memory
// at aligned offsets (the zero-copy path), some unaligned, with Flush and
// Sync in between; checks the file holds exactly `want`.
void WriteInPieces(const std::string& path, const std::string& want, uint64_t seed) {
  auto file = Env::Default()->NewDirectWritableFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::mt19937_64 rng(seed);
  AlignedBuffer aligned(1 << 20);
  size_t at = 0;
  int step = 0;
  while (at < want.size()) {
    size_t n;
    switch (rng() % 4) {
      case 0:  n = 1 + rng() % 100; break;                // tiny
      case 1:  n = 1 + rng() % (3 << 20); break;          // large, unaligned
      case 2:  n = kDirectIoAlignment * (1 + rng() % 64); break;
      default: n = (1 << 20) - rng() % 2 * 7; break;      // a buffer's worth
    }
    n = std::min(n, want.size() - at);
    if (rng() % 2 == 0 && n <= aligned.capacity()) {
      aligned.clear();
      aligned.append(want.data() + at, n);
      ASSERT_TRUE((*file)->Append(absl::string_view(aligned.data(), n)).ok());
    } else {
      ASSERT_TRUE((*file)->Append(absl::string_view(want.data() + at, n)).ok());
    }
    at += n;
    if (++step % 7 == 0) {
      ASSERT_TRUE((*file)->Flush().ok());
    }
  }
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Append("tail after sync").ok());  // the file is buffered now
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_TRUE((*file)->Close().ok());  // a second Close is fine
  EXPECT_EQ(ReadBack(path), want + "tail after sync");
}

TEST(DirectFileTest, DirectIoIsAvailableWhereTestsWrite) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  auto file = OpenDirectWritableFile(JoinPath(dir.path(), "probe"));
  ASSERT_TRUE(file.ok()) << file.status();
  if (*file == nullptr) {
    GTEST_SKIP() << ::testing::TempDir() << " has no O_DIRECT (tmpfs?): the fallback is tested";
  }
}

TEST(DirectFileTest, WritesAnyPiecesExactly) {
  TempDir dir;
  for (size_t size : {size_t{0}, size_t{1}, kDirectIoAlignment - 1, kDirectIoAlignment,
                      kDirectIoAlignment + 1, size_t{9 << 20} + 123}) {
    const std::string path = JoinPath(dir.path(), absl::StrCat("f", size));
    WriteInPieces(path, RandomBytes(size, size), size + 1);
  }
}

TEST(DirectFileTest, AlignedBuffersAreAligned) {
  AlignedBuffer b(100);
  EXPECT_EQ(b.capacity(), kDirectIoAlignment);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kDirectIoAlignment, 0u);
  b.append("abc", 3);
  EXPECT_EQ(b.size(), 3u);
  EXPECT_EQ(b.room(), kDirectIoAlignment - 3);
  AlignedBuffer moved = std::move(b);
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_EQ(b.capacity(), 0u);  // NOLINT(bugprone-use-after-move): moved-from is empty
}

// Transfer buffers of 2 MiB and more start on a huge-page boundary (so
// that transparent huge pages can back them: a direct transfer from 4 KiB
// pages was several times slower on a virtio disk); smaller ones and
// RECFLOW_HUGE_PAGES=0 keep the plain block alignment.
TEST(DirectFileTest, LargeTransferBuffersStartOnHugePages) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const char* const before = std::getenv("RECFLOW_HUGE_PAGES");
  const std::string saved = before == nullptr ? "" : before;
  ASSERT_EQ(::unsetenv("RECFLOW_HUGE_PAGES"), 0);
  for (size_t capacity : {size_t{2} << 20, (size_t{5} << 20) + 123, size_t{8} << 20}) {
    AlignedBuffer b(capacity);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kHuge, 0u) << capacity;
    EXPECT_EQ(b.capacity(), (capacity + kDirectIoAlignment - 1) / kDirectIoAlignment *
                                kDirectIoAlignment);
    std::memset(b.data(), 0x5a, b.capacity());  // the whole capacity is usable
  }
  Allocator* a = direct_io_allocator();
  for (size_t bytes : {size_t{2} << 20, (size_t{3} << 20) + 7}) {
    void* p = a->AllocateRaw(64, bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHuge, 0u) << bytes;
    std::memset(p, 1, bytes);
    a->DeallocateRaw(p, bytes);
  }
  void* small = a->AllocateRaw(64, 100 << 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % kDirectIoAlignment, 0u);
  a->DeallocateRaw(small, 100 << 10);
  ASSERT_EQ(::setenv("RECFLOW_HUGE_PAGES", "0", 1), 0);
  AlignedBuffer plain(size_t{4} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(plain.data()) % kDirectIoAlignment, 0u);
  std::memset(plain.data(), 0, plain.capacity());
  if (before == nullptr) {
    ASSERT_EQ(::unsetenv("RECFLOW_HUGE_PAGES"), 0);
  } else {
    ASSERT_EQ(::setenv("RECFLOW_HUGE_PAGES", saved.c_str(), 1), 0);
  }
}

TEST(DirectFileTest, ReadsAnyRangeExactly) {
  TempDir dir;
  const std::string path = JoinPath(dir.path(), "data");
  const std::string want = RandomBytes((10 << 20) + 777, 7);
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, want).ok());
  auto file = Env::Default()->NewDirectRandomAccessFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->Size(), want.size());
  AlignedBuffer scratch((12 << 20));
  std::mt19937_64 rng(3);
  struct Range {
    uint64_t offset;
    size_t n;
  };
  std::vector<Range> ranges = {
      {0, want.size()},                  // all, aligned start
      {0, 4 << 20},                      // aligned everything: straight in
      {4096, 8 << 20},                   // aligned, more than the bounce buffer
      {1, 100},                          // small: page cache
      {123, (9 << 20) + 5},              // unaligned, several bounce pieces
      {want.size() - 70000, 70000},      // up to the end
      {want.size() - 70000, 1 << 20},    // past the end: short
      {want.size(), 1 << 20},            // at the end: empty
      {want.size() + 5000, 100000},      // beyond the end: empty
  };
  for (int i = 0; i < 40; ++i) {
    ranges.push_back({rng() % want.size(), static_cast<size_t>(rng() % (3 << 20))});
  }
  for (const Range& r : ranges) {
    char* dst = scratch.data() + (r.offset % 3);  // aligned and not
    auto got = (*file)->Read(r.offset, r.n, dst);
    ASSERT_TRUE(got.ok()) << got.status();
    const size_t expect =
        r.offset >= want.size() ? 0 : std::min<size_t>(r.n, want.size() - r.offset);
    ASSERT_EQ(got->size(), expect) << "offset " << r.offset << " n " << r.n;
    if (expect > 0) {
      ASSERT_TRUE(*got == absl::string_view(want).substr(r.offset, expect))
          << "offset " << r.offset << " n " << r.n;
    }
  }
}

TEST(DirectFileTest, ConcurrentReadsAreIndependent) {
  TempDir dir;
  const std::string path = JoinPath(dir.path(), "data");
  const std::string want = RandomBytes(3 << 20, 11);
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, want).ok());
  auto file = Env::Default()->NewDirectRandomAccessFile(path);
  ASSERT_TRUE(file.ok());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string buf(1 << 20, '\0');
      for (int i = 0; i < 20; ++i) {
        const uint64_t off = static_cast<uint64_t>((t * 7919 + i * 104729) % (2 << 20));
        auto got = (*file)->Read(off, buf.size(), buf.data());
        if (!got.ok() || *got != absl::string_view(want).substr(off, buf.size())) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(DirectFileTest, ErrorsNameTheFile) {
  TempDir dir;
  const std::string missing = JoinPath(dir.path(), "no_such_file");
  auto r = Env::Default()->NewDirectRandomAccessFile(missing);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("no_such_file"));
  auto d = Env::Default()->NewDirectRandomAccessFile(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr(dir.path()));
  auto w = Env::Default()->NewDirectWritableFile(JoinPath(dir.path(), "no_dir", "f"));
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(absl::IsNotFound(w.status())) << w.status();
  auto f = Env::Default()->NewDirectWritableFile(JoinPath(dir.path(), "closed"));
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE((*f)->Close().ok());
  absl::Status s = (*f)->Append("x");
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("closed"));
}

// Where the file system refuses O_DIRECT (tmpfs), the Env hands out
// ordinary files that behave the same.
TEST(DirectFileTest, FallsBackWhereDirectIoIsRefused) {
  if (::access("/dev/shm", W_OK) != 0) GTEST_SKIP() << "no writable /dev/shm";
  TempDir dir("/dev/shm");
  ASSERT_FALSE(dir.path().empty());
  const std::string path = JoinPath(dir.path(), "f");
  const std::string want = RandomBytes((2 << 20) + 3, 5);
  WriteInPieces(path, want, 9);
  auto file = Env::Default()->NewDirectRandomAccessFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::string buf(want.size(), '\0');
  auto got = (*file)->Read(5, want.size(), buf.data());
  ASSERT_TRUE(got.ok());
  const std::string on_disk = want + "tail after sync";  // as WriteInPieces left it
  EXPECT_TRUE(*got == absl::string_view(on_disk).substr(5, want.size()));
}

// The default NewDirect* of an Env goes through its NewWritableFile /
// NewRandomAccessFile, so an EnvWrapper that injects faults sees them.
TEST(DirectFileTest, WrappersSeeDirectOpens) {
  class Counting : public EnvWrapper {
   public:
    Counting() : EnvWrapper(Env::Default()) {}
    absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
        const std::string& path) override {
      ++writes;
      return EnvWrapper::NewWritableFile(path);
    }
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
        const std::string& path) override {
      ++reads;
      return EnvWrapper::NewRandomAccessFile(path);
    }
    int writes = 0, reads = 0;
  } env;
  TempDir dir;
  const std::string path = JoinPath(dir.path(), "f");
  auto w = env.NewDirectWritableFile(path);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Close().ok());
  ASSERT_TRUE(env.NewDirectRandomAccessFile(path).ok());
  EXPECT_EQ(env.writes, 1);
  EXPECT_EQ(env.reads, 1);
}

}  // namespace
}  // namespace recflow
