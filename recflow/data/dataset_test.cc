// IteratorState, DataStats, ListFiles, the sources (TextLine,
// FromTensorSlices, Range) and bad input.

#include "recflow/data/dataset.h"

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/data/testing/dataset_util.h"

namespace recflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testutil::Ints;
using testutil::ReadAll;
using testutil::Strings;
using testutil::WriteOrDie;

// ---------------------------------------------------------------------------
// IteratorState

IteratorState SampleState() {
  IteratorState s;
  s.WriteInt("it/a", 42);
  s.WriteInt("it/neg", -7);
  s.WriteString("it/s", std::string("bytes\0with nul", 14));
  s.WriteTensor("it/f",
                Tensor::FromVector<float>({1.5f, -2.f, 3.25f, 4.f, 5.f, 6.f},
                                          TensorShape({2, 3})));
  s.WriteTensor("it/i", Tensor::Scalar<int64_t>(-99));
  s.WriteTensor("it/str", Tensor::FromVector<std::string>(
                              {"x", "", "long string here"}, TensorShape({3})));
  s.WriteTensor("it/empty", Tensor(DT_INT32, TensorShape({0, 4})));
  s.WriteTensor("it/uninit", Tensor());
  return s;
}

TEST(IteratorStateTest, RoundTrip) {
  IteratorState s = SampleState();
  std::string bytes = s.Serialize();
  absl::StatusOr<IteratorState> p = IteratorState::Parse(bytes);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->size(), s.size());
  EXPECT_EQ(*p->ReadInt("it/a"), 42);
  EXPECT_EQ(*p->ReadInt("it/neg"), -7);
  EXPECT_EQ(*p->ReadString("it/s"), std::string("bytes\0with nul", 14));
  for (const char* key : {"it/f", "it/i", "it/str", "it/empty"}) {
    EXPECT_TRUE(TensorsEqual(*s.ReadTensor(key), *p->ReadTensor(key))) << key;
  }
  EXPECT_EQ(p->ReadTensor("it/uninit")->dtype(), DT_INVALID);
  EXPECT_EQ(p->Serialize(), bytes);  // Deterministic.
}

TEST(IteratorStateTest, MissingAndWrongKind) {
  IteratorState s = SampleState();
  EXPECT_TRUE(s.Contains("it/a"));
  EXPECT_FALSE(s.Contains("it/zz"));
  absl::StatusOr<int64_t> missing = s.ReadInt("it/zz");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("it/zz"));
  absl::StatusOr<std::string> wrong = s.ReadString("it/a");
  EXPECT_TRUE(absl::IsInvalidArgument(wrong.status()));
  EXPECT_THAT(wrong.status().message(), HasSubstr("it/a"));
  EXPECT_TRUE(absl::IsInvalidArgument(s.ReadTensor("it/s").status()));
}

TEST(IteratorStateTest, TruncatedIsDataLoss) {
  std::string bytes = SampleState().Serialize();
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<IteratorState> p = IteratorState::Parse(bytes.substr(0, n));
    ASSERT_TRUE(absl::IsDataLoss(p.status())) << n << ": " << p.status();
  }
}

TEST(IteratorStateTest, CorruptedIsDataLoss) {
  std::string bytes = SampleState().Serialize();
  std::mt19937 rng(5);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ (1 + rng() % 255));
    absl::StatusOr<IteratorState> p = IteratorState::Parse(bad);
    ASSERT_TRUE(absl::IsDataLoss(p.status())) << i << ": " << p.status();
  }
  EXPECT_TRUE(absl::IsDataLoss(IteratorState::Parse(bytes + "x").status()));
  EXPECT_TRUE(absl::IsDataLoss(IteratorState::Parse("").status()));
  EXPECT_TRUE(
      absl::IsDataLoss(IteratorState::Parse(std::string(64, '\xff')).status()));
}

TEST(IteratorStateTest, RestoreFromGarbageIsDataLoss) {
  absl::StatusOr<Iterator> it = Dataset::Range(5).MakeIterator();
  ASSERT_TRUE(it.ok());
  EXPECT_TRUE(absl::IsDataLoss(it->RestoreFromString("not a state")));
  // A state of another pipeline names the missing key.
  absl::StatusOr<Iterator> other = Dataset::Range(5).Batch(2).MakeIterator();
  ASSERT_TRUE(other.ok());
  absl::Status s = other->RestoreFromString(*it->SaveToString());
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("Iterator/"));
}

// ---------------------------------------------------------------------------
// DataStats, HandleBadRecord

TEST(DataStatsTest, CountsAndSummary) {
  DataStats stats;
  EXPECT_EQ(stats.Summary(), "no bad records");
  stats.AddRecordsRead(10);
  stats.AddSkipped("bad_crc", "f:1 bad");
  stats.AddSkipped("bad_crc", "f:2 bad");
  stats.AddSkipped("truncated", "f:9 cut");
  EXPECT_EQ(stats.records_read(), 10);
  EXPECT_EQ(stats.records_skipped(), 3);
  EXPECT_EQ(stats.skipped_by_reason().at("bad_crc"), 2);
  EXPECT_EQ(stats.first_skip_detail().at("bad_crc"), "f:1 bad");
  EXPECT_EQ(stats.Summary(),
            "skipped 3 records: bad_crc 2 (first: f:1 bad), truncated 1 "
            "(first: f:9 cut)");
}

TEST(DataStatsTest, HandleBadRecordFollowsPolicy) {
  DataStats stats;
  absl::Status err = absl::DataLossError("a.txt:3: broken");
  EXPECT_TRUE(HandleBadRecord({ErrorMode::kSkip}, &stats, "broken", err).ok());
  EXPECT_EQ(stats.skipped_by_reason().at("broken"), 1);
  EXPECT_EQ(HandleBadRecord({ErrorMode::kFail}, &stats, "broken", err), err);
  EXPECT_EQ(stats.records_skipped(), 1);
}

// ---------------------------------------------------------------------------
// ListFiles

class ListFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.CreateDir("/d").ok());
    ASSERT_TRUE(env_.CreateDir("/d/sub_1").ok());
    for (const char* f : {"/d/day_2.txt", "/d/day_1.txt", "/d/day_10.txt",
                          "/d/night.txt", "/d/.hidden_1.txt"}) {
      WriteOrDie(&env_, f, "x\n");
    }
  }
  MemEnv env_;
};

TEST_F(ListFilesTest, GlobsSortedAndDeduplicated) {
  auto files = ListFiles(&env_, {"/d/day_?.txt", "/d/*.txt", "/d/night.txt"});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_THAT(*files, ElementsAre("/d/day_1.txt", "/d/day_10.txt",
                                  "/d/day_2.txt", "/d/night.txt"));
  files = ListFiles(&env_, {"/d/day_[12].txt"});
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, ElementsAre("/d/day_1.txt", "/d/day_2.txt"));
  files = ListFiles(&env_, {"/d/*_1*"});  // Not the directory sub_1.
  ASSERT_TRUE(files.ok());
  EXPECT_THAT(*files, ElementsAre("/d/day_1.txt", "/d/day_10.txt"));
}

TEST_F(ListFilesTest, NoMatchIsNotFoundNamingThePattern) {
  auto files = ListFiles(&env_, {"/d/*.txt", "/d/*.csv"});
  EXPECT_TRUE(absl::IsNotFound(files.status())) << files.status();
  EXPECT_THAT(files.status().message(), HasSubstr("/d/*.csv"));
  files = ListFiles(&env_, {"/nodir/*.txt"});
  EXPECT_TRUE(absl::IsNotFound(files.status()));
  EXPECT_THAT(files.status().message(), HasSubstr("/nodir/*.txt"));
  files = ListFiles(&env_, {"/d/missing.txt"});
  EXPECT_TRUE(absl::IsNotFound(files.status()));
  EXPECT_THAT(files.status().message(), HasSubstr("/d/missing.txt"));
  files = ListFiles(&env_, {"/d/*/x.txt"});
  EXPECT_TRUE(absl::IsInvalidArgument(files.status()));
}

// ---------------------------------------------------------------------------
// TextLine

// Fails reads (not opens) of paths containing "bad".
class FaultyEnv : public EnvWrapper {
 public:
  explicit FaultyEnv(Env* target) : EnvWrapper(target) {}
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    if (path.find("noperm") != std::string::npos) {
      return absl::PermissionDeniedError(path + ": Permission denied");
    }
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> f =
        target()->NewRandomAccessFile(path);
    if (!f.ok() || path.find("bad") == std::string::npos) return f;
    return std::unique_ptr<RandomAccessFile>(new FailingFile(std::move(*f)));
  }

 private:
  // Reads fine up to 8 bytes, then fails with EIO.
  class FailingFile : public RandomAccessFile {
   public:
    explicit FailingFile(std::unique_ptr<RandomAccessFile> f)
        : f_(std::move(f)) {}
    absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n,
                                           char* scratch) const override {
      if (offset + n > 8) return absl::InternalError("Input/output error");
      return f_->Read(offset, n, scratch);
    }
    absl::StatusOr<uint64_t> Size() const override { return f_->Size(); }

   private:
    std::unique_ptr<RandomAccessFile> f_;
  };
};

class TextLineTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(env_.CreateDir("/t").ok()); }
  IteratorContext Ctx(ErrorMode mode = ErrorMode::kSkip) {
    IteratorContext ctx;
    ctx.env = &env_;
    ctx.error_policy.mode = mode;
    return ctx;
  }
  std::vector<Element> Read(const Dataset& ds,
                            ErrorMode mode = ErrorMode::kSkip) {
    absl::StatusOr<Iterator> it = ds.MakeIterator(Ctx(mode));
    EXPECT_TRUE(it.ok()) << it.status();
    if (!it.ok()) return {};
    return ReadAll(*it);
  }
  MemEnv env_;
};

TEST_F(TextLineTest, LinesWithoutTerminators) {
  WriteOrDie(&env_, "/t/a.txt", "one\r\ntwo\n\nfour\r\nlast");
  WriteOrDie(&env_, "/t/b.txt", "b1\nb2\n");
  auto out = Read(Dataset::TextLine({"/t/a.txt", "/t/b.txt"}));
  EXPECT_THAT(Strings(out),
              ElementsAre("one", "two", "", "four", "last", "b1", "b2"));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].size(), 1u);
  EXPECT_EQ(out[0][0].dims(), 0);
}

TEST_F(TextLineTest, EmptyFileGivesNothing) {
  WriteOrDie(&env_, "/t/empty.txt", "");
  auto out = Read(Dataset::TextLine({"/t/empty.txt"}), ErrorMode::kFail);
  EXPECT_TRUE(out.empty());
  WriteOrDie(&env_, "/t/a.txt", "x\n");
  out = Read(Dataset::TextLine({"/t/empty.txt", "/t/a.txt", "/t/empty.txt"}),
             ErrorMode::kFail);
  EXPECT_THAT(Strings(out), ElementsAre("x"));
  EXPECT_TRUE(Read(Dataset::TextLine({})).empty());
}

TEST_F(TextLineTest, LinesPerElementSpansFilesAndEmitsOrigin) {
  WriteOrDie(&env_, "/t/a.txt", "a1\na2\na3\n");
  WriteOrDie(&env_, "/t/b.txt", "b1\r\nb2\n");
  TextLineOptions opts;
  opts.lines_per_element = 2;
  opts.emit_origin = true;
  Dataset ds = Dataset::TextLine({"/t/a.txt", "/t/b.txt"}, {}, opts);
  ASSERT_EQ(ds.impl()->output_dtypes().size(), 2u);
  EXPECT_EQ(ds.impl()->output_shapes()[0], PartialShape({kUnknownDim}));
  auto out = Read(ds);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[2][0].shape(), TensorShape({1}));
  EXPECT_THAT(Strings(out), ElementsAre("a1", "a2", "a3", "b1", "b2"));
  EXPECT_THAT(Strings(out, 1),
              ElementsAre("/t/a.txt:1", "/t/a.txt:2", "/t/a.txt:3",
                          "/t/b.txt:1", "/t/b.txt:2"));
  opts.lines_per_element = 1;
  auto scalars = Read(Dataset::TextLine({"/t/b.txt"}, {}, opts));
  ASSERT_EQ(scalars.size(), 2u);
  EXPECT_EQ(scalars[1][1].scalar<std::string>(), "/t/b.txt:2");
}

// Issue 22: `train.batch_size: 1000000000` made an element of up to 1e9
// lines a tensor of 1e9 strings before reading (32 GB: the allocation
// failed and the reader wrote through a null buffer, SIGSEGV). The lines
// are gathered as they are read; a huge k costs what the data holds.
TEST_F(TextLineTest, HugeLinesPerElementReadsWhatThereIs) {
  WriteOrDie(&env_, "/t/a.txt", "a1\na2\na3\n");
  WriteOrDie(&env_, "/t/b.txt", "b1\nb2\n");
  for (bool origin : {false, true}) {
    TextLineOptions opts;
    opts.lines_per_element = 1000000000;
    opts.emit_origin = origin;
    auto out = Read(Dataset::TextLine({"/t/a.txt", "/t/b.txt"}, {}, opts), ErrorMode::kFail);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0][0].shape(), TensorShape({5}));
    EXPECT_THAT(Strings(out), ElementsAre("a1", "a2", "a3", "b1", "b2"));
    if (origin) {
      EXPECT_THAT(Strings(out, 1), ElementsAre("/t/a.txt:1", "/t/a.txt:2", "/t/a.txt:3",
                                               "/t/b.txt:1", "/t/b.txt:2"));
    }
  }
}

TEST_F(TextLineTest, ShardsByFileIndex) {
  std::vector<std::string> files;
  for (int i = 0; i < 5; ++i) {
    files.push_back(absl::StrCat("/t/f", i));
    WriteOrDie(&env_, files.back(), absl::StrCat("line", i, "\n"));
  }
  auto out =
      Read(Dataset::TextLine(files, {.num_shards = 2, .shard_index = 1}));
  EXPECT_THAT(Strings(out), ElementsAre("line1", "line3"));
  out = Read(Dataset::TextLine(files, {.num_shards = 2, .shard_index = 0}));
  EXPECT_THAT(Strings(out), ElementsAre("line0", "line2", "line4"));
  for (ShardOptions bad :
       {ShardOptions{0, 0}, ShardOptions{2, 2}, ShardOptions{2, -1}}) {
    auto it = Dataset::TextLine(files, bad).MakeIterator(Ctx());
    EXPECT_TRUE(absl::IsInvalidArgument(it.status())) << it.status();
  }
}

// Random lines (some empty, some \r\n, some long) read with tiny and odd
// buffers must match a plain split.
TEST_F(TextLineTest, MatchesReferenceSplitForAnyBufferSize) {
  std::mt19937 rng(17);
  std::string contents;
  std::vector<std::string> want;
  for (int i = 0; i < 300; ++i) {
    std::string line;
    const int len = rng() % 5 == 0 ? 0 : static_cast<int>(rng() % 40);
    for (int j = 0; j < len; ++j) line.push_back('a' + rng() % 26);
    want.push_back(line);
    contents += line + (rng() % 3 == 0 ? "\r\n" : "\n");
  }
  want.push_back("tail");
  contents += "tail";
  WriteOrDie(&env_, "/t/r.txt", contents);
  for (int64_t buf : {1, 2, 3, 7, 64, 1000, 1 << 20}) {
    for (int64_t k : {1, 5, 4096}) {
      TextLineOptions opts;
      opts.read_buffer_bytes = buf;
      opts.lines_per_element = k;
      auto out =
          Read(Dataset::TextLine({"/t/r.txt"}, {}, opts), ErrorMode::kFail);
      EXPECT_EQ(Strings(out), want) << "buffer " << buf << " k " << k;
    }
  }
}

TEST_F(TextLineTest, MissingAndUnreadableFiles) {
  FaultyEnv faulty(&env_);
  WriteOrDie(&env_, "/t/a.txt", "a1\na2\n");
  WriteOrDie(&env_, "/t/bad.txt", "ok\nthis line crosses byte 8\nmore\n");
  std::vector<std::string> files = {"/t/missing.txt", "/t/a.txt", "/t/bad.txt",
                                    "/t/noperm.txt", "/t/a.txt"};
  IteratorContext ctx = Ctx();
  ctx.env = &faulty;
  auto it = Dataset::TextLine(files).MakeIterator(ctx);
  ASSERT_TRUE(it.ok());
  // bad.txt fails at its first read (the buffer asks for more than 8 bytes).
  EXPECT_THAT(Strings(ReadAll(*it)), ElementsAre("a1", "a2", "a1", "a2"));
  EXPECT_EQ(it->stats().skipped_by_reason().at("unreadable_file"), 3);
  EXPECT_THAT(it->stats().first_skip_detail().at("unreadable_file"),
              HasSubstr("/t/missing.txt"));

  ctx.error_policy.mode = ErrorMode::kFail;
  it = Dataset::TextLine(files).MakeIterator(ctx);
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  absl::Status s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/t/missing.txt"));
  // The iterator moved past the file: the next call goes on.
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_EQ(e[0].scalar<std::string>(), "a1");
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  s = it->GetNext(&e, &end);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/t/bad.txt"));
  s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsPermissionDenied(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/t/noperm.txt"));
}

TEST_F(TextLineTest, LineTooLong) {
  std::string big(100, 'x');
  WriteOrDie(
      &env_, "/t/long.txt",
      absl::StrCat("short\n", "ten chars!\r\n", big, "\n", big, "\nend"));
  TextLineOptions opts;
  opts.max_line_bytes = 10;  // "ten chars!" fits; \r\n is not counted.
  opts.read_buffer_bytes = 16;
  IteratorContext ctx = Ctx();
  auto it = Dataset::TextLine({"/t/long.txt"}, {}, opts).MakeIterator(ctx);
  ASSERT_TRUE(it.ok());
  EXPECT_THAT(Strings(ReadAll(*it)), ElementsAre("short", "ten chars!", "end"));
  EXPECT_EQ(it->stats().skipped_by_reason().at("line_too_long"), 2);
  EXPECT_THAT(it->stats().first_skip_detail().at("line_too_long"),
              HasSubstr("/t/long.txt:3"));
  EXPECT_EQ(it->stats().records_read(), 5);

  // kFail: the error names path:line and comes after the good lines.
  opts.lines_per_element = 4;
  it = Dataset::TextLine({"/t/long.txt"}, {}, opts)
           .MakeIterator(Ctx(ErrorMode::kFail));
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_THAT(Strings({e}), ElementsAre("short", "ten chars!"));
  absl::Status s = it->GetNext(&e, &end);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("/t/long.txt:3"));
  s = it->GetNext(&e, &end);
  EXPECT_THAT(s.message(), HasSubstr("/t/long.txt:4"));
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_THAT(Strings({e}), ElementsAre("end"));
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_TRUE(end);
}

TEST_F(TextLineTest, InvalidOptions) {
  TextLineOptions opts;
  opts.lines_per_element = 0;
  auto it = Dataset::TextLine({"/t/x"}, {}, opts).MakeIterator(Ctx());
  EXPECT_TRUE(absl::IsInvalidArgument(it.status()));
  EXPECT_THAT(it.status().message(), HasSubstr("lines_per_element"));
  opts = {};
  opts.max_line_bytes = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(
      Dataset::TextLine({"/t/x"}, {}, opts).MakeIterator(Ctx()).status()));
}

// ---------------------------------------------------------------------------
// FromTensorSlices, Range

TEST(SourcesTest, FromTensorSlices) {
  Tensor ids = Tensor::FromVector<int64_t>({1, 2, 3});
  Tensor rows =
      Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  Tensor names = Tensor::FromVector<std::string>({"a", "b", "c"});
  Dataset ds = Dataset::FromTensorSlices({ids, rows, names});
  EXPECT_EQ(ds.impl()->output_dtypes(),
            (std::vector<DataType>{DT_INT64, DT_FLOAT, DT_STRING}));
  EXPECT_EQ(ds.impl()->output_shapes()[1], PartialShape({2}));
  auto out = ReadAll(ds);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_THAT(Ints(out), ElementsAre(1, 2, 3));
  EXPECT_TRUE(TensorsEqual(out[1][1], Tensor::FromVector<float>({3, 4})));
  EXPECT_EQ(out[2][2].scalar<std::string>(), "c");

  for (Element bad : {Element{}, Element{Tensor::Scalar<int64_t>(1)},
                      Element{ids, Tensor::FromVector<int64_t>({1, 2})}}) {
    auto it = Dataset::FromTensorSlices(bad).MakeIterator();
    EXPECT_TRUE(absl::IsInvalidArgument(it.status())) << it.status();
  }
}

TEST(SourcesTest, Range) {
  EXPECT_THAT(Ints(ReadAll(Dataset::Range(4))), ElementsAre(0, 1, 2, 3));
  EXPECT_TRUE(ReadAll(Dataset::Range(0)).empty());
  EXPECT_TRUE(ReadAll(Dataset::Range(-3)).empty());
  EXPECT_EQ(Dataset::Range(4).DebugString(), "Range(4)");
}

TEST(SourcesTest, EndIsSticky) {
  auto it = Dataset::Range(1).MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  ASSERT_TRUE(it->GetNext(&e, &end).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(it->GetNext(&e, &end).ok());
    EXPECT_TRUE(end);
    EXPECT_TRUE(e.empty());
  }
}

// ---------------------------------------------------------------------------
// Builder arguments, DebugString

TEST(BuilderTest, InvalidArgumentsFailMakeIterator) {
  Dataset r = Dataset::Range(10);
  MapFn id = [](Element e) -> absl::StatusOr<Element> { return e; };
  auto inner = [](const Element&) -> absl::StatusOr<Dataset> {
    return Dataset::Range(1);
  };
  std::vector<std::pair<Dataset, std::string>> bad = {
      {r.Batch(0), "batch_size"},
      {r.Batch(-4), "batch_size"},
      {r.Shuffle(0, 1), "buffer_size"},
      {r.Prefetch(0), "buffer_size"},
      {r.Repeat(-2), "count"},
      {r.Take(-5), "count"},
      {r.Skip(-2), "count"},
      {r.Map(id, 0), "num_parallel_calls"},
      {r.Map(id, 1, {DT_INT64}, {PartialShape({}), PartialShape({})}),
       "shapes"},
      {r.Interleave(inner, 0), "cycle_length"},
      {r.Interleave(inner, 2, 0), "block_length"},
      {r.Batch(0).Prefetch(2).Repeat(), "batch_size"},  // Below other stages.
  };
  for (const auto& [ds, what] : bad) {
    auto it = ds.MakeIterator();
    EXPECT_TRUE(absl::IsInvalidArgument(it.status())) << ds.DebugString();
    EXPECT_THAT(it.status().message(), HasSubstr(what));
    EXPECT_FALSE(ds.impl()->CheckValid().ok());
  }
}

TEST(BuilderTest, DebugString) {
  MapFn id = [](Element e) -> absl::StatusOr<Element> { return e; };
  Dataset ds = Dataset::TextLine({"a", "b", "c"}, {}, {.lines_per_element = 64})
                   .Shuffle(100, 7)
                   .Batch(32, true)
                   .Map(id, 4)
                   .Prefetch(2)
                   .Repeat()
                   .Take(5)
                   .Skip(1)
                   .Cache();
  EXPECT_EQ(ds.DebugString(),
            "Cache<-Skip(1)<-Take(5)<-Repeat<-Prefetch(2)<-Map(parallel=4)<-"
            "Batch(32, drop_remainder)<-Shuffle(100, seed=7)<-"
            "TextLine(3 files, lines_per_element=64)");
  auto inner = [](const Element&) -> absl::StatusOr<Dataset> {
    return Dataset::Range(1);
  };
  EXPECT_EQ(
      Dataset::Range(3)
          .Interleave(inner, 2, 1, 2)
          .Map(id)
          .Repeat(2)
          .DebugString(),
      "Repeat(2)<-Map<-Interleave(cycle=2, block=1, parallel=2)<-Range(3)");
}

}  // namespace
}  // namespace recflow::data
