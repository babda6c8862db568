// The input of a run config (input_pipeline.h): the config checked against
// the files' columns, the datasets (batches, shards, bad lines) and the
// graph over the batch's components.
#include "recflow/models/input_pipeline.h"

#include <stdlib.h>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/data/synthetic_writer.h"

namespace recflow::models {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/input_pipeline_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

// gen-data's files in DIR: `files` train files of `rows` rows in all
// (with `history` sequence columns H1 when > 0) and 100 test rows.
void GenData(const std::string& dir, int64_t rows, int files = 1, int history = 0,
             data::SyntheticFormat format = data::SyntheticFormat::kCriteoTsv) {
  data::SyntheticWriteOptions o;
  o.format = format;
  o.config.seed = 5;
  o.config.history.max_length = history;
  o.train_rows = rows;
  o.test_rows = 100;
  o.num_files = files;
  o.out_dir = dir;
  o.num_threads = 1;
  auto written = data::WriteSyntheticDataset(o);
  ASSERT_TRUE(written.ok()) << written.status();
}

RunConfig Config(const std::string& dir, const std::string& extra = "") {
  auto c = ParseRunConfig(absl::StrCat("model: {type: lr}\n"
                                       "features: {dense: 13, sparse: 26, sparse_defaults: {vocabulary_size: 1000}}\n"
                                       "data: {train: ",
                                       dir, "/train-*.tsv, eval: ", dir,
                                       "/test-*.tsv, parse_threads: 1}\n"
                                       "train: {batch_size: 64}\n",
                                       extra),
                          "test.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

// Batch sizes of `ds` to its end (or its first error, returned).
std::vector<int64_t> Sizes(const data::Dataset& ds, absl::Status* error) {
  std::vector<int64_t> sizes;
  auto it = ds.MakeIterator();
  *error = it.status();
  if (!it.ok()) return sizes;
  for (;;) {
    data::Element e;
    bool end = false;
    *error = it->GetNext(&e, &end);
    if (!error->ok() || end) return sizes;
    sizes.push_back(e[0].dim_size(0));
  }
}

TEST(InputPipelineTest, BatchesTheDataAndCountsBadLines) {
  const std::string dir = TempDir();
  GenData(dir, 200);
  // Two bad lines at the end of a copy of the data.
  {
    std::ifstream in(dir + "/train-00000-of-00001.tsv");
    std::ofstream out(dir + "/extra.tsv");
    out << in.rdbuf() << "bad line\nanother\n";
  }
  RunConfig config = Config(dir);
  auto p = MakeInputPipeline(config);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->schema.num_components(), 2 + 2 * 26);
  absl::Status error;
  auto ds = MakeRunDataset(config, *p, dir + "/extra.tsv", 1);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(Sizes(*ds, &error), ::testing::ElementsAre(64, 64, 64, 8));
  EXPECT_TRUE(error.ok()) << error;
  EXPECT_EQ(p->stats->records_skipped(), 2);
  // Two epochs; a pattern list.
  auto twice = MakeRunDataset(config, *p, dir + "/extra.tsv," + dir + "/train-*.tsv", 2);
  ASSERT_TRUE(twice.ok());
  int64_t rows = 0;
  for (int64_t n : Sizes(*twice, &error)) rows += n;
  EXPECT_EQ(rows, 2 * 400);
  auto none = MakeRunDataset(config, *p, dir + "/none-*.tsv", 1);
  EXPECT_THAT(none.status().message(), HasSubstr("matches no file"));
}

TEST(InputPipelineTest, ShardsByFileOrByBatch) {
  const std::string dir = TempDir();
  GenData(dir, 640, /*files=*/2);
  RunConfig config = Config(dir);
  auto p = MakeInputPipeline(config);
  ASSERT_TRUE(p.ok()) << p.status();
  absl::Status error;
  for (int shards : {2, 3}) {  // 2: a file each; 3: every third batch
    int64_t rows = 0;
    for (int i = 0; i < shards; ++i) {
      auto ds = MakeRunDataset(config, *p, config.data.train, 1, shards, i);
      ASSERT_TRUE(ds.ok()) << ds.status();
      for (int64_t n : Sizes(*ds, &error)) rows += n;
      EXPECT_TRUE(error.ok()) << error;
    }
    EXPECT_EQ(rows, 640) << shards << " shards";
  }
}

// The same gen-data rows as TSV and as tf.Examples: the same labels, dense
// values (log-transformed alike) and id counts per row; only the ids differ
// (hex values vs hashed strings). A damaged record is skipped and counted.
TEST(InputPipelineTest, TfRecordExamplesReadAsTheirTsvRows) {
  if (!data::SyntheticFormatAvailable(data::SyntheticFormat::kTfRecord)) {
    GTEST_SKIP() << "the TFRecord writer is not built in";
  }
  const std::string dir = TempDir();
  GenData(dir, 150);
  GenData(dir, 150, 1, 0, data::SyntheticFormat::kTfRecord);
  RunConfig tsv = Config(dir);
  RunConfig rec = Config(dir, "");
  rec.data.format = "tfrecord";
  rec.data.train = dir + "/train-*.tfrecord";
  auto pt = MakeInputPipeline(tsv);
  auto pr = MakeInputPipeline(rec);
  ASSERT_TRUE(pt.ok()) << pt.status();
  ASSERT_TRUE(pr.ok()) << pr.status();
  EXPECT_EQ(pr->schema.num_components(), pt->schema.num_components());
  EXPECT_EQ(pr->schema.dense_names, pt->schema.dense_names);
  auto dt = MakeRunDataset(tsv, *pt, tsv.data.train, 1);
  auto dr = MakeRunDataset(rec, *pr, rec.data.train, 1);
  ASSERT_TRUE(dt.ok() && dr.ok()) << dt.status() << dr.status();
  auto it = dt->MakeIterator();
  auto ir = dr->MakeIterator();
  ASSERT_TRUE(it.ok() && ir.ok());
  int64_t rows = 0;
  for (;;) {
    data::Element et, er;
    bool end_t = false, end_r = false;
    ASSERT_TRUE(it->GetNext(&et, &end_t).ok());
    ASSERT_TRUE(ir->GetNext(&er, &end_r).ok());
    ASSERT_EQ(end_t, end_r);
    if (end_t) break;
    ASSERT_EQ(et.size(), er.size());
    rows += et[0].dim_size(0);
    EXPECT_EQ(et[0].flat<float>(), er[0].flat<float>()) << "labels";
    EXPECT_EQ(et[1].flat<float>(), er[1].flat<float>()) << "dense values";
    for (size_t c = 3; c < et.size(); c += 2) {  // every row_splits
      EXPECT_EQ(et[c].flat<int64_t>(), er[c].flat<int64_t>()) << "component " << c;
    }
  }
  EXPECT_EQ(rows, 150);

  // A damaged record (a flipped data byte) in a copy: skipped and counted.
  std::string bytes;
  {
    std::ifstream in(dir + "/train-00000-of-00001.tfrecord", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[20] ^= 0x40;
  std::ofstream(dir + "/damaged.tfrecord", std::ios::binary) << bytes;
  auto damaged = MakeRunDataset(rec, *pr, dir + "/damaged.tfrecord", 1);
  ASSERT_TRUE(damaged.ok()) << damaged.status();
  auto id = damaged->MakeIterator();
  ASSERT_TRUE(id.ok()) << id.status();
  int64_t kept = 0;
  for (;;) {
    data::Element e;
    bool end = false;
    ASSERT_TRUE(id->GetNext(&e, &end).ok());
    if (end) break;
    kept += e[0].dim_size(0);
  }
  EXPECT_EQ(kept, 149);
  EXPECT_EQ(id->stats().records_skipped(), 1);

  // Config mistakes name the config.
  RunConfig hashed = rec;
  hashed.data.hash_ids = true;
  EXPECT_THAT(MakeInputPipeline(hashed).status().message(),
              HasSubstr("test.yaml: data.hash_ids is for criteo data"));
  RunConfig clash = rec;
  clash.data.label_key = "C3";
  EXPECT_THAT(MakeInputPipeline(clash).status().message(),
              HasSubstr("'C3' is the label's name (data.label_key)"));
}

TEST(InputPipelineTest, TheConfigMustReadTheFilesColumns) {
  const std::string dir = TempDir();
  GenData(dir, 50, 1, /*history=*/4);
  // Files with a sequence column, a config without a sequence feature.
  auto p = MakeInputPipeline(Config(dir));
  EXPECT_TRUE(absl::IsInvalidArgument(p.status()));
  EXPECT_THAT(p.status().message(),
              HasSubstr("has 41 columns on line 1, but the config has no sequence feature"));
  // With {name: H1, sequence_of: C1} it reads them.
  RunConfig din = Config(dir);
  din.model.sparse_features.push_back({.name = "H1", .sequence_of = "C1"});
  EXPECT_TRUE(MakeInputPipeline(din).ok());
  // A sequence feature must be named H1..Hk.
  din.model.sparse_features.back().name = "hist";
  auto named = MakeInputPipeline(din);
  EXPECT_THAT(named.status().message(),
              HasSubstr("sequence 'hist' (sequence_of: C1): with criteo data the 1 sequence "
                        "feature(s) must be named H1..H1"));
  din.model.sparse_features.back() = {.name = "H1", .sequence_of = "X9"};
  EXPECT_THAT(MakeInputPipeline(din).status().message(),
              HasSubstr("holds ids of a categorical field C1..C26"));
  // Files without one, a config with one.
  const std::string plain = TempDir();
  GenData(plain, 50);
  RunConfig wants = Config(plain);
  wants.model.sparse_features.push_back({.name = "H1", .sequence_of = "C1"});
  EXPECT_THAT(MakeInputPipeline(wants).status().message(),
              HasSubstr("has 40 columns on line 1, but the config's 1 sequence feature(s) H1..H1 "
                        "need 41"));
}

TEST(BuildRunGraphTest, TheModelOverTheBatchComponents) {
  const std::string dir = TempDir();
  GenData(dir, 50);
  RunConfig config = Config(dir);
  auto p = MakeInputPipeline(config);
  ASSERT_TRUE(p.ok()) << p.status();
  auto g = BuildRunGraph(config, p->schema, /*trainable=*/true);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->num_components, p->schema.num_components());
  std::set<std::string> nodes;
  for (const auto& n : g->graph_def.node()) nodes.insert(n.name());
  for (const char* name :
       {"train_input", "batch", "batch_examples", "loss", "train", "probabilities", "init"}) {
    EXPECT_TRUE(nodes.count(name)) << name;
  }
  EXPECT_FALSE(nodes.count("dense_columns"));  // every dense column, in order
  auto serve = BuildRunGraph(config, p->schema, /*trainable=*/false);
  ASSERT_TRUE(serve.ok()) << serve.status();
  for (const auto& n : serve->graph_def.node()) EXPECT_NE(n.name(), "train");

  // Some dense columns: picked by a gather.
  config.model.dense_features = {"I3", "I1"};
  auto some = BuildRunGraph(config, p->schema, true);
  ASSERT_TRUE(some.ok()) << some.status();
  bool gathered = false;
  for (const auto& n : some->graph_def.node()) gathered |= n.name() == "dense_columns";
  EXPECT_TRUE(gathered);
  config.model.dense_features = {"I1", "I99"};
  EXPECT_THAT(BuildRunGraph(config, p->schema, true).status().message(),
              HasSubstr("test.yaml: features.dense: 'I99' is not a dense column of the criteo "
                        "data (I1..I13)"));
  config.model.dense_features = {"I1"};
  config.model.sparse_features = {{.name = "C77"}};
  EXPECT_THAT(BuildRunGraph(config, p->schema, true).status().message(),
              HasSubstr("features.sparse: 'C77' is not a sparse field"));
}

}  // namespace
}  // namespace recflow::models
