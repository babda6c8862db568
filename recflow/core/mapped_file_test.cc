// MappedFile: maps a file read-only, reads through the file with ReadAt,
// and names the path in its errors.
#include "recflow/core/mapped_file.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

std::string Write(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/mapped_file_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(MappedFileTest, MapsTheBytesAndReadsThemThroughTheFile) {
  const std::string path = Write("bytes", "hello, mapped world");
  auto f = MappedFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ((*f)->size(), 19u);
  EXPECT_EQ(std::string((*f)->data(), (*f)->size()), "hello, mapped world");
  char buf[6] = {};
  ASSERT_TRUE((*f)->ReadAt(7, 6, buf).ok());
  EXPECT_EQ(std::string(buf, 6), "mapped");
  // Hints never fail, inside or past the file.
  (*f)->AdviseRandom(0, 1 << 20);
  (*f)->AdviseWillNeed(3, 100);
  (*f)->AdviseWillNeed(1000, 10);
  MappedFile::AdviseWillNeedAt((*f)->data() + 5, 3);
}

TEST(MappedFileTest, ReadingPastTheEndIsDataLoss) {
  auto f = MappedFile::Open(Write("short", "abc"));
  ASSERT_TRUE(f.ok());
  char buf[8];
  const absl::Status s = (*f)->ReadAt(1, 8, buf);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("mapped_file_short"));
}

TEST(MappedFileTest, EmptyAndMissingFiles) {
  auto empty = MappedFile::Open(Write("empty", ""));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size(), 0u);
  EXPECT_EQ((*empty)->data(), nullptr);
  auto missing = MappedFile::Open(::testing::TempDir() + "/mapped_file_missing");
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr("mapped_file_missing"));
  auto dir = MappedFile::Open(::testing::TempDir());
  EXPECT_FALSE(dir.ok());  // a directory maps no bytes
}

}  // namespace
}  // namespace recflow
