// The file-source base (file_source.h) on its own, through a toy source of
// fixed-width records: what TextLine and TFRecord get from it (sharding,
// gathering k records, origins, the bad-record policy, an error returned in
// position, Save/Restore) holds for any source written on it.

#include "recflow/data/file_source.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"

namespace recflow::data {
namespace {

using internal::BadRecord;
using internal::FileRead;
using internal::FileSourceDataset;
using internal::FileSourceIterator;
using internal::FileSourceKind;
using testing::ElementsAre;
using testing::HasSubstr;

constexpr FileSourceKind kToy = {.name = "Toy",
                                 .records = "chunks",
                                 .per_element_attr = "chunks_per_element",
                                 .counter_key = "chunk"};

// Records are 3-byte chunks. "xxx" is a bad record (dropped, the file goes
// on); a short chunk at the end loses the rest of the file.
class ToyIterator : public FileSourceIterator<ToyIterator> {
 public:
  ToyIterator(std::shared_ptr<const FileSourceDataset> ds,
              std::shared_ptr<const IteratorContext> ctx, std::string prefix)
      : FileSourceIterator(std::move(ds), std::move(ctx), std::move(prefix)) {}

  FileRead ReadRecord(std::vector<std::string>* records, BadRecord* bad) {
    char buf[3];
    absl::StatusOr<absl::string_view> got = file_->Read(offset_, 3, buf);
    if (!got.ok()) {
      *bad = {.reason = "unreadable_file",
              .error = got.status(),
              .ends_file = true};
      return FileRead::kBadRecord;
    }
    if (got->empty()) return FileRead::kEndOfFile;
    offset_ += got->size();
    ++records_in_file_;
    if (got->size() < 3) {
      *bad = {.reason = "short_chunk",
              .error = errors::DataLoss(CurrentPath(), ": chunk ",
                                        records_in_file_ - 1, " is short"),
              .counts_as_read = true,
              .ends_file = true};
      return FileRead::kBadRecord;
    }
    if (*got == "xxx") {
      *bad = {.reason = "bad_chunk",
              .error = errors::DataLoss(CurrentPath(), ": chunk ",
                                        records_in_file_ - 1, " is bad"),
              .counts_as_read = true};
      return FileRead::kBadRecord;
    }
    records->emplace_back(*got);
    return FileRead::kRecord;
  }
  std::string Origin() const {
    return absl::StrCat(CurrentPath(), "#", records_in_file_ - 1);
  }

 private:
  void StartFile(RandomAccessFile* file, uint64_t offset) override {
    file_ = file;
    offset_ = offset;
  }
  void EndFile() override { file_ = nullptr; }
  uint64_t Offset() const override { return offset_; }

  RandomAccessFile* file_ = nullptr;
  uint64_t offset_ = 0;
};

Dataset Toy(std::vector<std::string> files, ShardOptions shard, int64_t k,
            bool emit_origin = false,
            absl::Status options_status = absl::OkStatus()) {
  return Dataset(std::make_shared<FileSourceDataset>(
      kToy, std::move(files), shard, k, emit_origin, std::move(options_status),
      [](std::shared_ptr<const FileSourceDataset> ds,
         std::shared_ptr<const IteratorContext> ctx,
         const std::string& prefix) {
        return std::make_unique<ToyIterator>(std::move(ds), std::move(ctx),
                                             prefix);
      }));
}

class FileSourceTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteStringToFile(&env_, "a", "a0 a1 a2 ").ok());
    ASSERT_TRUE(WriteStringToFile(&env_, "b", "b0 xxxb2 b").ok());
    ASSERT_TRUE(WriteStringToFile(&env_, "c", "c0 c1 ").ok());
  }
  absl::StatusOr<Iterator> Open(const Dataset& ds,
                                ErrorMode mode = ErrorMode::kSkip) {
    IteratorContext ctx;
    ctx.env = &env_;
    ctx.error_policy.mode = mode;
    return ds.MakeIterator(ctx);
  }
  // Every element's records (and origins), joined by '|'; errors as "!".
  static std::vector<std::string> ReadAll(Iterator& it, int max_steps = 100) {
    std::vector<std::string> out;
    for (int step = 0; step < max_steps; ++step) {
      Element e;
      bool end = false;
      absl::Status s = it.GetNext(&e, &end);
      if (!s.ok()) {
        out.push_back(absl::StrCat("!", s.message()));
        continue;
      }
      if (end) break;
      std::string joined;
      for (const Tensor& t : e) {
        for (const std::string& x : t.flat<std::string>())
          absl::StrAppend(&joined, x, "|");
      }
      out.push_back(joined);
    }
    return out;
  }

  MemEnv env_;
};

TEST_F(FileSourceTest, GathersKRecordsAcrossFilesAndSkipsBadOnes) {
  absl::StatusOr<Iterator> it = Open(Toy({"a", "b", "c"}, {}, 4));
  ASSERT_TRUE(it.ok()) << it.status();
  EXPECT_THAT(ReadAll(*it), ElementsAre("a0 |a1 |a2 |b0 |", "b2 |c0 |c1 |"));
  EXPECT_EQ(it->stats().records_read(), 9);  // 7 kept, "xxx" and the short "b"
  EXPECT_THAT(
      it->stats().skipped_by_reason(),
      ElementsAre(std::pair<const std::string, int64_t>("bad_chunk", 1),
                  std::pair<const std::string, int64_t>("short_chunk", 1)));
}

TEST_F(FileSourceTest, ScalarsShardsAndOrigins) {
  const Dataset ds =
      Toy({"a", "b", "c"}, {.num_shards = 2, .shard_index = 0}, 1, true);
  EXPECT_EQ(ds.impl()->DebugString(),
            "Toy(2 files of 3, shard 0/2, emit_origin)");
  EXPECT_EQ(ds.impl()->output_shapes()[0], PartialShape({}));
  EXPECT_EQ(ds.impl()->output_dtypes().size(), 2u);
  absl::StatusOr<Iterator> it = Open(ds);
  ASSERT_TRUE(it.ok()) << it.status();
  EXPECT_THAT(ReadAll(*it), ElementsAre("a0 |a#0|", "a1 |a#1|", "a2 |a#2|",
                                        "c0 |c#0|", "c1 |c#1|"));
  EXPECT_EQ(Toy({"a"}, {}, 5).impl()->DebugString(),
            "Toy(1 files, chunks_per_element=5)");
  EXPECT_EQ(Toy({"a"}, {}, 5).impl()->output_shapes()[0], PartialShape({-1}));
}

// Under kFail a bad record ends the element early; its error comes next,
// in position, and reading goes on after it.
TEST_F(FileSourceTest, FailReturnsTheErrorInPosition) {
  absl::StatusOr<Iterator> it =
      Open(Toy({"a", "missing", "b", "c"}, {}, 4), ErrorMode::kFail);
  ASSERT_TRUE(it.ok()) << it.status();
  EXPECT_THAT(
      ReadAll(*it),
      ElementsAre("a0 |a1 |a2 |", HasSubstr("!Toy: cannot open 'missing'"),
                  "b0 |", "!b: chunk 1 is bad", "b2 |", "!b: chunk 3 is short",
                  "c0 |c1 |"));
}

TEST_F(FileSourceTest, SaveAndRestoreAtEveryElement) {
  const Dataset ds = Toy({"a", "b", "c"}, {}, 2, true);
  absl::StatusOr<Iterator> full = Open(ds, ErrorMode::kFail);
  ASSERT_TRUE(full.ok());
  const std::vector<std::string> want = ReadAll(*full);
  ASSERT_GE(want.size(), 5u);
  for (size_t cut = 0; cut <= want.size(); ++cut) {
    absl::StatusOr<Iterator> first = Open(ds, ErrorMode::kFail);
    ASSERT_TRUE(first.ok());
    std::vector<std::string> got = ReadAll(*first, static_cast<int>(cut));
    absl::StatusOr<std::string> state = first->SaveToString();
    ASSERT_TRUE(state.ok()) << state.status();
    absl::StatusOr<Iterator> second = Open(ds, ErrorMode::kFail);
    ASSERT_TRUE(second.ok());
    ASSERT_TRUE(second->RestoreFromString(*state).ok()) << cut;
    for (std::string& s : ReadAll(*second)) got.push_back(std::move(s));
    EXPECT_EQ(got, want) << "saved after " << cut << " elements";
  }
}

TEST_F(FileSourceTest, RestoreRefusesABadPosition) {
  const Dataset ds = Toy({"a", "b"}, {}, 1);
  absl::StatusOr<Iterator> it = Open(ds);
  ASSERT_TRUE(it.ok());
  IteratorState state;
  ASSERT_TRUE(it->Save(&state).ok());
  // The source's own key for the records read in the file.
  ASSERT_TRUE(state.Contains("Iterator/chunk"));
  for (const char* key :
       {"Iterator/file_index", "Iterator/offset", "Iterator/chunk"}) {
    IteratorState bad = state;
    bad.WriteInt(key, -1);
    absl::StatusOr<Iterator> fresh = Open(ds);
    ASSERT_TRUE(fresh.ok());
    absl::Status s = fresh->Restore(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << key;
    EXPECT_THAT(s.message(),
                HasSubstr("Toy state at 'Iterator' has a negative position"));
  }
  IteratorState beyond = state;
  beyond.WriteInt("Iterator/file_index", 3);
  absl::StatusOr<Iterator> fresh = Open(ds);
  ASSERT_TRUE(fresh.ok());
  absl::Status s = fresh->Restore(beyond);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(),
              HasSubstr("is at file 3 but the dataset has 2 files"));
}

TEST_F(FileSourceTest, InvalidOptions) {
  struct Case {
    Dataset ds;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {Toy({"a"}, {.num_shards = 2, .shard_index = 2}, 1),
            "Toy: shard_index 2 of num_shards 2; need num_shards >= 1"},
           {Toy({"a"}, {.num_shards = 0}, 1),
            "Toy: shard_index 0 of num_shards 0"},
           {Toy({"a"}, {}, 0), "Toy: chunks_per_element is 0; must be >= 1"},
           {Toy({"a"}, {}, 1, false,
                errors::InvalidArgument("Toy: width is 0")),
            "Toy: width is 0"},
       }) {
    EXPECT_THAT(c.ds.impl()->CheckValid().message(), HasSubstr(c.error));
    absl::StatusOr<Iterator> it = Open(c.ds);
    EXPECT_EQ(it.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace recflow::data
