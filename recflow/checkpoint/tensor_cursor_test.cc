// Tests of TensorCursor: a tensor read whole or in consecutive ranges (in
// any split) checks out against its stored crc32c; damage, a range left
// unread and a truncated data file are DataLoss naming the tensor and file.
#include "recflow/checkpoint/tensor_cursor.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/mem_env.h"

namespace recflow::checkpoint {
namespace {

using ::testing::HasSubstr;

class TensorCursorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<float> v(1000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i) - 7.0f;
    auto writer = BundleWriter::Create(&env_, "/c/b", {.sync = false});
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Add("small", Tensor::FromVector<int64_t>({1, 2, 3}, {3})).ok());
    ASSERT_TRUE((*writer)->Add("v", Tensor::FromVector<float>(v, {1000})).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
    Reopen();
  }
  void Reopen() {
    auto reader = BundleReader::Open(&env_, "/c/b");
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = *std::move(reader);
    info_ = *reader_->GetInfo("v");
  }
  // Reads `v` in the ranges that `cuts` (ascending byte offsets) make.
  absl::Status ReadInRanges(const std::vector<uint64_t>& cuts, std::string* out) {
    std::vector<TensorCursor> cursors;
    uint64_t begin = 0;
    for (size_t i = 0; i <= cuts.size(); ++i) {
      const uint64_t end = i < cuts.size() ? cuts[i] : info_.size;
      auto c = TensorCursor::Open(&env_, *reader_, info_, begin, end);
      if (!c.ok()) return c.status();
      cursors.push_back(*std::move(c));
      begin = end;
    }
    out->assign(info_.size, '\0');
    std::vector<const TensorCursor*> parts;
    uint64_t at = 0;
    for (TensorCursor& c : cursors) {
      while (c.remaining() > 0) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(c.remaining(), 333));
        if (absl::Status s = c.Read(n, out->data() + at); !s.ok()) return s;
        at += n;
      }
      parts.push_back(&c);
    }
    return TensorCursor::Finish(parts);
  }

  MemEnv env_;
  std::unique_ptr<BundleReader> reader_;
  TensorInfo info_;
};

TEST_F(TensorCursorTest, WholeOrInRangesTheBytesAndTheCrcCheckOut) {
  auto want = reader_->Lookup("v");
  ASSERT_TRUE(want.ok());
  const std::string bytes(want->raw_data(), want->TotalBytes());
  for (const std::vector<uint64_t>& cuts : std::vector<std::vector<uint64_t>>{
           {}, {1}, {2000}, {4, 1500, 3999}, {0, 0, 4000}, {7, 8, 9, 3000}}) {
    std::string got;
    absl::Status s = ReadInRanges(cuts, &got);
    ASSERT_TRUE(s.ok()) << cuts.size() << " cuts: " << s;
    EXPECT_EQ(got, bytes);
  }
  // A single cursor's own Finish.
  auto c = TensorCursor::Open(&env_, *reader_, info_);
  ASSERT_TRUE(c.ok());
  std::string buf(info_.size, '\0');
  EXPECT_EQ(c->remaining(), info_.size);
  ASSERT_TRUE(c->Read(buf.size(), buf.data()).ok());
  EXPECT_EQ(c->remaining(), 0u);
  EXPECT_TRUE(c->Finish().ok());
  // Reading past the range.
  absl::Status s = c->Read(1, buf.data());
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
}

TEST_F(TensorCursorTest, DamageUnreadBytesAndTruncationAreDataLoss) {
  const std::string file = DataFilename("/c/b", 0, 1);
  std::string clean;
  ASSERT_TRUE(ReadFileToString(&env_, file, &clean).ok());
  std::string data = clean;
  data[info_.offset + 2500] ^= 0x01;
  ASSERT_TRUE(WriteStringToFile(&env_, file, data).ok());
  std::string got;
  absl::Status s = ReadInRanges({1000, 2000, 3000}, &got);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("checksum mismatch for tensor 'v' in " + file));
  ASSERT_TRUE(WriteStringToFile(&env_, file, clean).ok());
  // A range left unread fails the check too.
  auto c = TensorCursor::Open(&env_, *reader_, info_, 0, 100);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Read(100, got.data()).ok());
  EXPECT_TRUE(absl::IsDataLoss(c->Finish()));
  // A data file cut short: found when the cursor opens.
  ASSERT_TRUE(WriteStringToFile(&env_, file, clean.substr(0, info_.offset + 10)).ok());
  auto cut = TensorCursor::Open(&env_, *reader_, info_, 2000);
  EXPECT_TRUE(absl::IsDataLoss(cut.status())) << cut.status();
  EXPECT_THAT(cut.status().message(), HasSubstr("'v'"));
  EXPECT_THAT(cut.status().message(), HasSubstr("truncated"));
}

}  // namespace
}  // namespace recflow::checkpoint
