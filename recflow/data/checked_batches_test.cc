// CountingParseFn and CheckedBatches: per-file line counts through the
// parse step, batches of only bad lines skipped and counted, a file without
// a good line (or a pass without one) an error naming it, the batch read
// with that news kept, and positions saved and restored through the stage.
#include "recflow/data/checked_batches.h"

#include <stdlib.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow::data {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/checked_batches_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

// Writes `lines` to DIR/NAME; returns the path.
std::string WriteFile(const std::string& dir, const std::string& name,
                      const std::vector<std::string>& lines) {
  const std::string path = dir + "/" + name;
  std::ofstream f(path);
  for (const std::string& l : lines) f << l << "\n";
  return path;
}

// A good line of a Criteo file with one dense and one categorical column.
std::string Good(int i) { return absl::StrCat(i % 2, "\t", i, "\t", absl::Hex(100 + i)); }

struct Pipeline {
  std::shared_ptr<DataStats> stats = std::make_shared<DataStats>();
  std::shared_ptr<BatchStats> batches = std::make_shared<BatchStats>();
  std::optional<Dataset> dataset;
};

// Batches of `k` lines of `files`, parsed and checked; sharded by batch
// when num_shards > 1.
Pipeline Make(const std::vector<std::string>& files, int64_t k, int num_shards = 1) {
  Pipeline p;
  CriteoOptions o;
  o.num_dense = 1;
  o.num_categorical = 1;
  std::shared_ptr<const TextParser> quiet = *CriteoParser::Create(o);
  o.bad_records.stats = p.stats;
  std::shared_ptr<const TextParser> parser = *CriteoParser::Create(o);
  std::vector<DataType> dtypes = parser->schema().dtypes();
  std::vector<PartialShape> shapes(dtypes.size(), PartialShape({-1}));
  shapes[1] = PartialShape({-1, 1});
  dtypes.insert(dtypes.end(), {DT_STRING, DT_INT64});
  shapes.insert(shapes.end(), {PartialShape({-1}), PartialShape({-1, 2})});
  Dataset ds = Dataset::TextLine(files, {}, {.lines_per_element = k, .emit_origin = true});
  if (num_shards > 1) ds = ds.Shard(num_shards, 0);
  ds = ds.Map(CountingParseFn(parser, quiet), 1, dtypes, shapes);
  p.dataset = CheckedBatches(ds, {.whole_files = num_shards == 1,
                                  .data_name = "the data test",
                                  .records = p.stats,
                                  .batches = p.batches});
  return p;
}

// The batch sizes GetNext returns until the end, or the first error.
std::vector<int64_t> Sizes(Iterator* it, absl::Status* error) {
  std::vector<int64_t> sizes;
  for (;;) {
    Element e;
    bool end = false;
    *error = it->GetNext(&e, &end);
    if (!error->ok() || end) return sizes;
    EXPECT_EQ(e.size(), 4u);  // labels, dense, ids, splits: the counts are dropped
    sizes.push_back(e[0].dim_size(0));
  }
}

TEST(CountingParseFnTest, CountsLinesAndGoodLinesPerFile) {
  CriteoOptions o;
  o.num_dense = 1;
  o.num_categorical = 1;
  std::shared_ptr<const TextParser> parser = *CriteoParser::Create(o);
  MapFn fn = CountingParseFn(parser, parser);
  // Three lines of a.tsv (one bad), two of b.tsv (both good).
  Element in = {
      Tensor::FromVector<std::string>({Good(1), "bad", Good(2), Good(3), Good(4)}),
      Tensor::FromVector<std::string>({"a.tsv:1", "a.tsv:2", "a.tsv:3", "b.tsv:1", "b.tsv:2"})};
  auto out = fn(in);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(out->size(), 6u);
  EXPECT_EQ((*out)[0].dim_size(0), 4);  // the good rows
  const Tensor& paths = (*out)[4];
  const Tensor& counts = (*out)[5];
  ASSERT_EQ(paths.NumElements(), 2);
  EXPECT_EQ(paths.flat<std::string>()[0], "a.tsv");
  EXPECT_EQ(paths.flat<std::string>()[1], "b.tsv");
  EXPECT_THAT(std::vector<int64_t>(counts.data<int64_t>(), counts.data<int64_t>() + 4),
              ::testing::ElementsAre(3, 2, 2, 2));
  EXPECT_FALSE(fn({in[0]}).ok());  // needs the origins
}

TEST(CheckedBatchesTest, SkipsAndCountsBatchesOfOnlyBadLines) {
  const std::string dir = TempDir();
  std::vector<std::string> lines;
  for (int i = 0; i < 5; ++i) lines.push_back(Good(i));
  for (int i = 0; i < 4; ++i) lines.push_back("garbage");  // batch 2 and half of 3: bad
  const std::string f = WriteFile(dir, "tail_bad.tsv", lines);
  Pipeline p = Make({f}, 3);
  auto it = p.dataset->MakeIterator();
  ASSERT_TRUE(it.ok()) << it.status();
  absl::Status error;
  EXPECT_THAT(Sizes(&*it, &error), ::testing::ElementsAre(3, 2));
  EXPECT_TRUE(error.ok()) << error;
  EXPECT_EQ(p.batches->empty_batches.load(), 1);
  EXPECT_EQ(p.stats->records_skipped(), 4);
  EXPECT_EQ(SkippedBatchesNote(p.batches.get()), "1 batch of only bad lines skipped");
  const std::string report = SkippedRecordsReport(p.stats.get(), p.batches.get());
  EXPECT_THAT(report, HasSubstr("input: skipped 4 records"));
  EXPECT_THAT(report, HasSubstr("; 1 batch of only bad lines skipped (bad lines are skipped"));
}

TEST(CheckedBatchesTest, AFileWithoutAGoodLineIsAnErrorNamingIt) {
  const std::string dir = TempDir();
  const std::string good = WriteFile(dir, "a.tsv", {Good(1), Good(2)});
  const std::string bad = WriteFile(dir, "b.tsv", {"x", "y", "z"});
  const std::string after = WriteFile(dir, "c.tsv", {Good(3), Good(4), Good(5)});
  Pipeline p = Make({good, bad, after}, 4);
  auto it = p.dataset->MakeIterator();
  ASSERT_TRUE(it.ok());
  // Batch 1: a.tsv's 2 lines and 2 of b.tsv's; batch 2: b.tsv's last line
  // (b.tsv complete: the error) and 3 of c.tsv, held for the next call.
  absl::Status error;
  EXPECT_THAT(Sizes(&*it, &error), ::testing::ElementsAre(2));
  EXPECT_TRUE(absl::IsInvalidArgument(error)) << error;
  EXPECT_THAT(error.message(), HasSubstr("data file " + bad + " has no good line: its 3 line(s)"));
  // The position saved now holds the batch read with that news.
  auto saved = it->SaveToString();
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_THAT(Sizes(&*it, &error), ::testing::ElementsAre(3));
  EXPECT_TRUE(error.ok()) << error;

  auto again = p.dataset->MakeIterator();
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->RestoreFromString(*saved).ok());
  EXPECT_THAT(Sizes(&*again, &error), ::testing::ElementsAre(3));
  EXPECT_TRUE(error.ok()) << error;
}

TEST(CheckedBatchesTest, ShardedByBatchOnlyAPassWithoutAGoodLineIsAnError) {
  const std::string dir = TempDir();
  const std::string bad = WriteFile(dir, "bad.tsv", {"x", "y", "z", "w"});
  Pipeline p = Make({bad}, 1, /*num_shards=*/2);
  auto it = p.dataset->MakeIterator();
  ASSERT_TRUE(it.ok());
  absl::Status error;
  EXPECT_TRUE(Sizes(&*it, &error).empty());
  EXPECT_THAT(error.message(), HasSubstr("the data test has no good line: all lines read are bad"));
  // Said once: the next call is the end.
  Element e;
  bool end = false;
  EXPECT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_TRUE(end);
}

TEST(CheckedBatchesTest, NothingSkippedSaysNothing) {
  EXPECT_EQ(SkippedBatchesNote(nullptr), "");
  BatchStats none;
  DataStats clean;
  EXPECT_EQ(SkippedRecordsReport(&clean, &none), "");
  none.empty_batches = 3;
  EXPECT_EQ(SkippedBatchesNote(&none), "3 batches of only bad lines skipped");
}

}  // namespace
}  // namespace recflow::data
