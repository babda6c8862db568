#include "recflow/train/summary_writer.h"

#include <cstdlib>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/record_io.h"

namespace recflow::train {
namespace {

using testing::HasSubstr;
using testing::StartsWith;

std::string TempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = JoinPath(tmp ? tmp : "/tmp",
                             "recflow_summary_" + name + "_" + std::to_string(getpid()));
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  return dir;
}

std::vector<tensorflow::Event> ReadEvents(const std::string& path) {
  auto file = Env::Default()->NewRandomAccessFile(path);
  EXPECT_TRUE(file.ok()) << file.status();
  RecordReader reader(file->get(), path);
  std::vector<tensorflow::Event> events;
  std::string record;
  absl::Status s;
  while ((s = reader.ReadRecord(&record)).ok()) {
    tensorflow::Event e;
    EXPECT_TRUE(e.ParseFromString(record));
    events.push_back(e);
  }
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;  // a clean end: every crc checked
  return events;
}

TEST(SummaryWriterTest, WritesAnEventFileTensorBoardReads) {
  const std::string dir = TempDir("scalars");
  std::string path;
  {
    auto w = SummaryWriter::Create(Env::Default(), dir, ".test");
    ASSERT_TRUE(w.ok()) << w.status();
    path = (*w)->path();
    EXPECT_THAT(path, HasSubstr("/events.out.tfevents."));
    EXPECT_THAT(path, testing::EndsWith(".test"));
    ASSERT_TRUE((*w)->AddScalar("loss", 10, 0.625).ok());
    ASSERT_TRUE((*w)->AddScalar("auc", 10, 0.75).ok());
    ASSERT_TRUE((*w)->AddHistogram("w", 20, {-1.5f, 0.0f, 0.0f, 2.0f, NAN}).ok());
  }  // destructor flushes and closes
  std::vector<tensorflow::Event> events = ReadEvents(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.6e9);  // seconds since the epoch
  EXPECT_EQ(events[1].step(), 10);
  EXPECT_EQ(events[1].summary().value(0).tag(), "loss");
  EXPECT_FLOAT_EQ(events[1].summary().value(0).simple_value(), 0.625f);
  EXPECT_EQ(events[2].summary().value(0).tag(), "auc");
  const tensorflow::HistogramProto& h = events[3].summary().value(0).histo();
  EXPECT_EQ(h.num(), 4);  // the NaN is left out
  EXPECT_EQ(h.min(), -1.5);
  EXPECT_EQ(h.max(), 2.0);
  EXPECT_EQ(h.sum(), 0.5);
  EXPECT_EQ(h.sum_squares(), 6.25);
  double total = 0;
  for (double c : h.bucket()) total += c;
  EXPECT_EQ(total, 4);
  ASSERT_EQ(h.bucket_limit_size(), h.bucket_size());
  for (int i = 1; i < h.bucket_limit_size(); ++i) {
    EXPECT_LT(h.bucket_limit(i - 1), h.bucket_limit(i));
  }
  DeleteRecursively(Env::Default(), dir).IgnoreError();
}

TEST(SummaryWriterTest, DefaultBucketsAreSymmetricAndSorted) {
  const std::vector<double>& b = DefaultHistogramBucketLimits();
  ASSERT_GT(b.size(), 1000u);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(b.back(), DBL_MAX);
  const size_t zero = std::find(b.begin(), b.end(), 0.0) - b.begin();
  ASSERT_LT(zero, b.size());
  EXPECT_DOUBLE_EQ(b[zero + 1], 1e-12);
  EXPECT_DOUBLE_EQ(b[zero - 1], -1e-12);
}

TEST(SummaryWriterTest, SecondWriterNeverOverwritesTheFirst) {
  const std::string dir = TempDir("two");
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    auto w = SummaryWriter::Create(Env::Default(), dir, ".s");
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->AddScalar("x", i, i).ok());
    paths.push_back((*w)->path());
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(paths[i], testing::EndsWith(".s"));
    std::vector<tensorflow::Event> events = ReadEvents(paths[i]);
    ASSERT_EQ(events.size(), 2u) << paths[i];
    EXPECT_EQ(events[1].step(), i);
    for (int j = 0; j < i; ++j) EXPECT_NE(paths[i], paths[j]);
  }
  DeleteRecursively(Env::Default(), dir).IgnoreError();
}

TEST(SummaryWriterTest, ClosedWriterAndBadDirAreErrors) {
  auto bad = SummaryWriter::Create(Env::Default(), "/proc/definitely/not/here");
  EXPECT_FALSE(bad.ok());
  const std::string dir = TempDir("closed");
  auto w = SummaryWriter::Create(Env::Default(), dir);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Close().ok());
  absl::Status s = (*w)->AddScalar("x", 1, 1.0);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("closed"));
  DeleteRecursively(Env::Default(), dir).IgnoreError();
}

}  // namespace
}  // namespace recflow::train
