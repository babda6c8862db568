// Save / Restore of every stage, mid-epoch and across epoch boundaries: a
// fresh iterator restored from the saved bytes must yield exactly the rest.

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/dataset.h"
#include "recflow/data/testing/dataset_util.h"

namespace recflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testutil::CheckSaveRestore;
using testutil::Ints;
using testutil::ReadAll;
using testutil::Strings;
using testutil::WriteOrDie;

std::vector<int64_t> AllK(int64_t n) {
  std::vector<int64_t> ks;
  for (int64_t k = 0; k <= n; ++k) ks.push_back(k);
  return ks;
}

absl::StatusOr<Element> Times10(Element e) {
  return Element{Tensor::Scalar<int64_t>(e[0].scalar<int64_t>() * 10)};
}

absl::StatusOr<Element> Ragged(Element e) {
  const int64_t i = e[0].scalar<int64_t>();
  std::vector<int64_t> ids(i % 4, i);
  return Element{Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids)),
                 Tensor::FromVector<float>({static_cast<float>(i), -1.f})};
}

absl::StatusOr<Dataset> Block(const Element& e) {
  const int64_t i = e[0].scalar<int64_t>();
  return Dataset::Range(i % 5 + 1).Map(
      [i](Element x) -> absl::StatusOr<Element> {
        return Element{
            Tensor::Scalar<int64_t>(i * 10 + x[0].scalar<int64_t>())};
      });
}

class SaveRestoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(env_.CreateDir("/s").ok());
    for (int f = 0; f < 4; ++f) {
      std::string contents;
      const int lines = f == 2 ? 0 : 7 + 5 * f;  // File 2 is empty.
      for (int i = 0; i < lines; ++i) {
        absl::StrAppend(&contents, "f", f, "-line", i,
                        i % 3 == 0 ? "\r\n" : "\n");
      }
      files_.push_back(absl::StrCat("/s/part-", f));
      WriteOrDie(&env_, files_.back(), contents);
    }
    ctx_.env = &env_;
  }
  MemEnv env_;
  std::vector<std::string> files_;
  IteratorContext ctx_;
};

TEST_F(SaveRestoreTest, Sources) {
  CheckSaveRestore(Dataset::Range(6), AllK(7));
  Tensor t = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  CheckSaveRestore(Dataset::FromTensorSlices({t}), AllK(3));
  CheckSaveRestore(Dataset::TextLine(files_), AllK(40), 1 << 20, ctx_);
  TextLineOptions opts;
  opts.lines_per_element = 3;
  opts.emit_origin = true;
  opts.read_buffer_bytes = 5;
  CheckSaveRestore(Dataset::TextLine(files_, {}, opts), AllK(14), 1 << 20,
                   ctx_);
  CheckSaveRestore(
      Dataset::TextLine(files_, {.num_shards = 3, .shard_index = 0}), AllK(30),
      1 << 20, ctx_);
}

TEST_F(SaveRestoreTest, SequentialStages) {
  Dataset r = Dataset::Range(23);
  CheckSaveRestore(r.Map(Times10), AllK(24));
  CheckSaveRestore(r.Shuffle(7, 11), AllK(24));
  CheckSaveRestore(r.Shuffle(50, -1), {0, 5, 22});  // Unseeded: per dataset.
  CheckSaveRestore(r.Batch(4), AllK(7));
  CheckSaveRestore(r.Batch(4, true), AllK(6));
  CheckSaveRestore(r.Map(Ragged, 1, {DT_INT64, DT_FLOAT},
                         {PartialShape({kUnknownDim}), PartialShape({2})})
                       .Batch(5),
                   AllK(5));
  CheckSaveRestore(r.Take(9), AllK(10));
  CheckSaveRestore(r.Skip(9), AllK(15));
  CheckSaveRestore(Dataset::Range(5).Repeat(3), AllK(16));
  CheckSaveRestore(Dataset::Range(5).Repeat(), AllK(16), 20);
  CheckSaveRestore(Dataset::Range(5).Cache(), AllK(6));
  CheckSaveRestore(Dataset::Range(5).Shuffle(5, 3).Cache().Repeat(3), AllK(16));
  // Shuffle reshuffled per epoch under Repeat, saved across the boundaries.
  CheckSaveRestore(Dataset::Range(9).Shuffle(4, 8).Repeat(3), AllK(28));
  CheckSaveRestore(Dataset::Range(9).Shuffle(4, 8).Repeat(2).Shuffle(3, 1),
                   AllK(19));
}

TEST_F(SaveRestoreTest, ParallelStages) {
  Dataset r = Dataset::Range(23);
  ThreadPool pool("sr_pool", 3);
  IteratorContext with_pool;
  with_pool.thread_pool = &pool;
  CheckSaveRestore(r.Map(Times10, 4), AllK(24));
  CheckSaveRestore(r.Map(Times10, 3), AllK(24), 1 << 20, with_pool);
  CheckSaveRestore(r.Prefetch(1), AllK(24));
  CheckSaveRestore(r.Prefetch(5), AllK(24));
  CheckSaveRestore(r.Map(Times10, 2).Prefetch(3).Map(Times10, 3).Prefetch(2),
                   AllK(24));
  for (int p : {1, 3}) {
    CheckSaveRestore(Dataset::Range(9).Interleave(Block, 3, 2, p), AllK(28));
    CheckSaveRestore(Dataset::Range(7).Interleave(Block, 2, 1, p).Repeat(2),
                     AllK(44));
  }
  // Interleave over TextLine files, read ahead in parallel.
  auto read_file = [this](const Element& e) -> absl::StatusOr<Dataset> {
    return Dataset::TextLine({files_[e[0].scalar<int64_t>()]});
  };
  CheckSaveRestore(Dataset::Range(4).Interleave(read_file, 2, 3, 2), AllK(40),
                   1 << 20, ctx_);
}

// The pipeline of the brief, saved at many points including across the
// epoch boundaries of the outer Repeat.
TEST_F(SaveRestoreTest, ComposedPipeline) {
  MapFn parse = [](Element e) -> absl::StatusOr<Element> {
    const auto lines = e[0].flat<std::string>();
    std::vector<int64_t> lengths;
    for (const std::string& l : lines)
      lengths.push_back(static_cast<int64_t>(l.size()));
    return Element{e[0],
                   Tensor::FromVector<int64_t>(absl::MakeConstSpan(lengths))};
  };
  Dataset ds = Dataset::TextLine(files_)
                   .Shuffle(10, 99)
                   .Batch(4)
                   .Map(parse, 3)
                   .Prefetch(2)
                   .Repeat(3);
  auto all_it = ds.MakeIterator(ctx_);
  ASSERT_TRUE(all_it.ok());
  const std::vector<Element> all = ReadAll(*all_it);
  const int64_t per = 11;  // 41 lines -> 11 batches per epoch.
  ASSERT_EQ(all.size(), 3u * per);
  // Epochs are shuffled differently.
  EXPECT_NE(Strings(std::vector<Element>{all[0]}),
            Strings(std::vector<Element>{all[per]}));
  CheckSaveRestore(ds,
                   {0, 1, 2, 5, per - 1, per, per + 1, 2 * per - 1, 2 * per,
                    2 * per + 1, 3 * per - 1, 3 * per},
                   1 << 20, ctx_);
}

// Saved errors come back at their position.
TEST_F(SaveRestoreTest, BufferedErrorsAreSaved) {
  MapFn fn = [](Element e) -> absl::StatusOr<Element> {
    if (e[0].scalar<int64_t>() == 5) return absl::DataLossError("bad 5");
    return e;
  };
  for (Dataset ds : {Dataset::Range(10).Map(fn, 4),
                     Dataset::Range(10).Map(fn).Prefetch(4)}) {
    auto it = ds.MakeIterator();
    ASSERT_TRUE(it.ok());
    EXPECT_THAT(Ints(ReadAll(*it, 3)), ElementsAre(0, 1, 2));
    // Let the background work reach the error.
    Element e;
    bool end = false;
    ASSERT_TRUE(it->GetNext(&e, &end).ok());
    auto bytes = it->SaveToString();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto fresh = ds.MakeIterator();
    ASSERT_TRUE(fresh.ok());
    ASSERT_TRUE(fresh->RestoreFromString(*bytes).ok());
    ASSERT_TRUE(fresh->GetNext(&e, &end).ok());
    EXPECT_EQ(e[0].scalar<int64_t>(), 4);
    absl::Status s = fresh->GetNext(&e, &end);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_EQ(s.message(), "bad 5");
    EXPECT_THAT(Ints(ReadAll(*fresh)), ElementsAre(6, 7, 8, 9));
  }
}

// A batch interrupted by an input error keeps its collected elements across
// Save / Restore.
TEST_F(SaveRestoreTest, BatchPendingElements) {
  MapFn fn = [](Element e) -> absl::StatusOr<Element> {
    if (e[0].scalar<int64_t>() == 2) return absl::DataLossError("bad 2");
    return e;
  };
  Dataset ds = Dataset::Range(7).Map(fn).Batch(3);
  auto it = ds.MakeIterator();
  ASSERT_TRUE(it.ok());
  Element e;
  bool end = false;
  EXPECT_FALSE(it->GetNext(&e, &end).ok());
  auto bytes = it->SaveToString();
  ASSERT_TRUE(bytes.ok());
  auto fresh = ds.MakeIterator();
  ASSERT_TRUE(fresh->RestoreFromString(*bytes).ok());
  ASSERT_TRUE(fresh->GetNext(&e, &end).ok());
  EXPECT_TRUE(TensorsEqual(e[0], Tensor::FromVector<int64_t>({0, 1, 3})));
}

// Counts the bytes read through the Env.
class CountingEnv : public EnvWrapper {
 public:
  explicit CountingEnv(Env* target) : EnvWrapper(target) {}
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    auto f = target()->NewRandomAccessFile(path);
    if (!f.ok()) return f;
    return std::unique_ptr<RandomAccessFile>(new File(std::move(*f), &bytes_));
  }
  int64_t bytes() const { return bytes_.load(); }

 private:
  class File : public RandomAccessFile {
   public:
    File(std::unique_ptr<RandomAccessFile> f, std::atomic<int64_t>* bytes)
        : f_(std::move(f)), bytes_(bytes) {}
    absl::StatusOr<absl::string_view> Read(uint64_t offset, size_t n,
                                           char* scratch) const override {
      auto r = f_->Read(offset, n, scratch);
      if (r.ok()) *bytes_ += static_cast<int64_t>(r->size());
      return r;
    }
    absl::StatusOr<uint64_t> Size() const override { return f_->Size(); }

   private:
    std::unique_ptr<RandomAccessFile> f_;
    std::atomic<int64_t>* bytes_;
  };
  std::atomic<int64_t> bytes_{0};
};

TEST_F(SaveRestoreTest, TextLineSeeksInsteadOfRereading) {
  std::string contents;
  for (int i = 0; i < 20000; ++i)
    absl::StrAppend(&contents, "line number ", i, "\n");
  WriteOrDie(&env_, "/s/big.txt", contents);
  TextLineOptions opts;
  opts.read_buffer_bytes = 4096;
  Dataset ds = Dataset::TextLine({"/s/big.txt"}, {}, opts);
  auto it = ds.MakeIterator(ctx_);
  ASSERT_TRUE(it.ok());
  ReadAll(*it, 19990);
  auto bytes = it->SaveToString();
  ASSERT_TRUE(bytes.ok());

  CountingEnv counting(&env_);
  IteratorContext ctx;
  ctx.env = &counting;
  auto fresh = ds.MakeIterator(ctx);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE(fresh->RestoreFromString(*bytes).ok());
  auto rest = ReadAll(*fresh);
  ASSERT_EQ(rest.size(), 10u);
  EXPECT_EQ(rest[0][0].scalar<std::string>(), "line number 19990");
  EXPECT_LT(counting.bytes(), 1000)
      << "read " << counting.bytes() << " of " << contents.size() << " bytes";
}

TEST_F(SaveRestoreTest, RestoreChecksTheState) {
  auto it = Dataset::TextLine(files_).MakeIterator(ctx_);
  ASSERT_TRUE(it.ok());
  ReadAll(*it, 10);  // Into the second file.
  auto bytes = it->SaveToString();
  ASSERT_TRUE(bytes.ok());
  // Fewer files than the state's position.
  auto fewer = Dataset::TextLine({}).MakeIterator(ctx_);
  ASSERT_TRUE(fewer.ok());
  absl::Status s = fewer->RestoreFromString(*bytes);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  // Truncated bytes.
  EXPECT_TRUE(absl::IsDataLoss(
      it->RestoreFromString(bytes->substr(0, bytes->size() / 2))));
}

}  // namespace
}  // namespace recflow::data
