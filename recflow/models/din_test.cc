// DIN (din.cc): builds and gives logits [B] for batches with empty, short
// and long histories; the history reads its target's table (no table of its
// own); bad configs name the field; hash-table items train and serve; and on
// data whose label depends on how many history items share the candidate
// item's category, DIN beats the same MLP over a sum-pooled history.
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/cli/testing/zoo_util.h"
#include "recflow/data/synthetic.h"
#include "recflow/data/text_parsers.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/graph.h"



namespace recflow::models {
namespace {

using ::testing::HasSubstr;
using testing::Examples;
using testing::FeedsFor;
using testing::Harness;

constexpr int64_t kItems = 40;  // item ids 1000 .. 1039
constexpr int kCategories = 4;  // item i is in category (i * 5) % 4
constexpr int kMaxHistory = 15;       // histories of 0 .. 15 items
constexpr int64_t kUsers = 50;        // C2: a weak per-user effect

int Category(int64_t item) { return static_cast<int>(((item - 1000) * 5) % kCategories); }

// C1 the candidate item, C2 a user id, H1 the user's history (items of C1),
// 1 dense feature. logit = -1.6 + #(history items in the candidate's
// category) + user effect + 0.3 * dense.
Examples SequenceData(int64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> item(1000, 1000 + kItems - 1);
  std::uniform_int_distribution<int64_t> user(0, kUsers - 1);
  std::uniform_int_distribution<int> len(0, kMaxHistory);
  std::normal_distribution<double> normal(0, 1);
  std::mt19937_64 effects_rng(99);
  std::vector<double> user_effect(kUsers);
  for (double& e : user_effect) e = 0.3 * normal(effects_rng);
  Examples ex;
  ex.sparse.resize(3);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t target = item(rng);
    const int64_t u = user(rng);
    std::vector<int64_t> history(len(rng));
    int matches = 0;
    for (int64_t& h : history) {
      h = item(rng);
      matches += Category(h) == Category(target);
    }
    const float x = static_cast<float>(normal(rng));
    const double logit = -1.6 + 1.0 * matches + user_effect[u] + 0.3 * x;
    const double p = 1 / (1 + std::exp(-logit));
    ex.labels.push_back(std::uniform_real_distribution<double>(0, 1)(rng) < p ? 1.f : 0.f);
    ex.truth.push_back(p);
    ex.dense.push_back({x});
    ex.sparse[0].push_back({target});
    ex.sparse[1].push_back({u});
    ex.sparse[2].push_back(history);
  }
  return ex;
}

ModelConfig DinConfig(const std::string& type = "din") {
  ModelConfig c;
  c.type = type;
  c.dense_features = {"I1"};
  c.sparse_features = {{.name = "C1", .vocabulary_size = 256},
                       {.name = "C2", .vocabulary_size = 64},
                       {.name = "H1", .combiner = "sum", .sequence_of = "C1"}};
  c.embedding_dim = 8;
  c.hidden_units = {32, 16};
  c.attention_units = {16};
  c.seed = 3;
  c.embedding_optimizer = {.type = "adam", .learning_rate = 0.01};
  c.dense_optimizer = {.type = "adam", .learning_rate = 0.005};
  // Pinned, as the optimizers are: the training test's margin was measured
  // with these embeddings. The zoo's default, uniform(+-0.01) for large
  // sparse tables, starts the attention scores near zero, and 5 epochs of
  // this small log leave din at 0.790 against mlp's 0.765 (here: 0.816
  // against 0.743).
  c.initializers.embedding = {.type = "truncated_normal", .stddev = 0.05};
  return c;
}

TEST(DinTest, BuildsAndGivesLogitsOfBatchSize) {
  const ModelConfig c = DinConfig();
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  // The history reads C1's table: tables embedding/C1 and embedding/C2 only.
  ASSERT_EQ(h.model.embedding_variables.size(), 2u);
  for (int64_t b : {1, 7, 64}) {
    Examples ex = SequenceData(b, static_cast<uint32_t>(b));
    ex.sparse[2][0].clear();  // an empty history
    const data::Batch batch = ex.ToBatch(0, b, 1);
    auto out = h.Run(FeedsFor(c, batch), {"logits:0", "loss:0"});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape(), TensorShape({b}));
    for (float v : (*out)[0].flat<float>()) EXPECT_TRUE(std::isfinite(v));
  }
  // Every history empty (nnz 0) works too.
  Examples ex = SequenceData(5, 1);
  for (auto& hist : ex.sparse[2]) hist.clear();
  auto out = h.Run(FeedsFor(c, ex.ToBatch(0, 5, 1)), {"logits:0"}, {"train"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({5}));
}

TEST(DinTest, AttentionWeightsChangeTheOutput) {
  // The same history in a different example with another candidate gives
  // another pooled vector: the logits differ from a model where the history
  // is the same bag for both candidates (the attention depends on q).
  const ModelConfig c = DinConfig();
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  Examples ex = SequenceData(2, 5);
  ex.sparse[1][1] = ex.sparse[1][0];
  ex.dense[1] = ex.dense[0];
  ex.sparse[2][1] = ex.sparse[2][0] = {1000, 1001, 1002, 1003};
  ex.sparse[0][0] = {1000};
  ex.sparse[0][1] = {1003};
  auto out = h.Run(FeedsFor(c, ex.ToBatch(0, 2, 1)), {"logits:0"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE((*out)[0].flat<float>()[0], (*out)[0].flat<float>()[1]);
}

absl::Status BuildStatus(const ModelConfig& c) {
  Scope root = Scope::NewRootScope();
  return BuildModel(root, c, Placeholders(root, c)).status();
}

TEST(DinTest, BadConfigsNameTheField) {
  ModelConfig c = DinConfig();
  c.sparse_features[2].sequence_of.clear();
  c.sparse_features[2].vocabulary_size = 256;
  EXPECT_THAT(std::string(BuildStatus(c).message()),
              HasSubstr("no sparse feature has sequence_of"));
  c = DinConfig();
  c.sparse_features[2].sequence_of = "C9";
  EXPECT_THAT(std::string(BuildStatus(c).message()),
              HasSubstr("sparse_features[2] (H1).sequence_of: 'C9' is not another sparse "
                        "feature"));
  c = DinConfig();
  c.sparse_features[2].sequence_of = "H1";
  EXPECT_THAT(std::string(BuildStatus(c).message()), HasSubstr("'H1' is not another"));
  c = DinConfig();
  c.sparse_features.push_back({.name = "H2", .sequence_of = "H1"});
  EXPECT_THAT(std::string(BuildStatus(c).message()),
              HasSubstr("(H2).sequence_of: 'H1' is itself a sequence"));
  c = DinConfig();
  c.sparse_features[2].dim = 5;
  EXPECT_THAT(std::string(BuildStatus(c).message()),
              HasSubstr("(H1).dim is 5 but a sequence reads the table of 'C1'"));
  c = DinConfig();
  c.attention_units = {16, 0};
  EXPECT_THAT(std::string(BuildStatus(c).message()), HasSubstr("attention_units[1] is 0"));
}

TEST(DinTest, HashTableItemsTrainAndServe) {
  ModelConfig c = DinConfig();
  c.sparse_features[0].hash_table = true;
  c.sparse_features[0].vocabulary_size = 0;
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  const Examples ex = SequenceData(64, 8);
  const data::Batch batch = ex.ToBatch(0, 64, 1);
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    auto out = h.Run(FeedsFor(c, batch), {"loss:0"}, {"train"});
    ASSERT_TRUE(out.ok()) << out.status();
    (step == 0 ? first : last) = (*out)[0].scalar<float>();
  }
  EXPECT_LT(last, first);
  Harness serve;
  ASSERT_TRUE(serve.Build(c, {.trainable = false}).ok()) << serve.root.status();
  int serve_ops = 0;
  for (const auto& n : serve.root.graph()->nodes()) {
    std::string mode;
    if ((n->op() == "HashEmbeddingBag" || n->op() == "HashEmbeddingLookup") &&
        GetNodeAttr(AttrSlice(n->def()), "mode", &mode).ok()) {
      EXPECT_EQ(mode, "serve") << n->name();
      ++serve_ops;
    }
  }
  EXPECT_EQ(serve_ops, 3);  // C1's bag, H1's rows, H1's weighted bag
  auto out = serve.Run(FeedsFor(c, batch), {"probabilities:0"});
  ASSERT_TRUE(out.ok()) << out.status();
}

TEST(DinTrainingTest, BeatsSumPoolingOnSequenceDependentData) {
  // The label counts the history items in the candidate's category: the
  // attention unit can weigh each item by its match with the candidate,
  // while a sum-pooled history leaves the MLP to untangle a histogram.
  constexpr int64_t kTrain = 24576, kTest = 4096, kBatch = 256;
  const Examples train = SequenceData(kTrain, 1);
  const Examples test = SequenceData(kTest, 2);
  std::printf("oracle test auc %.4f\n", test.OracleAuc());
  std::map<std::string, testing::TrainResult> results;
  for (const std::string type : {"din", "mlp"}) {
    const ModelConfig c = DinConfig(type);
    Harness h;
    ASSERT_TRUE(h.Build(c).ok()) << type << ": " << h.root.status();
    auto r = testing::TrainAndEvaluate(h, c, train, test, kBatch, 5);
    ASSERT_TRUE(r.ok()) << type << ": " << r.status();
    std::printf("%-4s train loss %.4f -> %.4f  test auc %.4f logloss %.4f  %.0f examples/s\n",
                type.c_str(), r->first_loss, r->last_loss, r->test.auc, r->test.logloss,
                r->examples_per_second);
    EXPECT_LT(r->last_loss, r->first_loss) << type;
    results[type] = *r;
  }
  // Observed (5 epochs): din 0.816, mlp 0.743, the oracle 0.829.
  EXPECT_GT(results["din"].test.auc, results["mlp"].test.auc + 0.03);
}

// --- The synthetic click log with behaviour sequences (data/synthetic.h)

// 8 informative fields (C1: 40 items; C2..C8: 20 ids), histories of 0..12
// items of C1 in 4 hidden categories, each match with the candidate's
// category adding 1.2 to the logit; modest first-order and dense effects.
data::SyntheticConfig HistoryData() {
  data::SyntheticConfig d;
  d.seed = 11;
  d.target_ctr = 0.3;
  for (int f = 0; f < data::kSyntheticNumCategorical; ++f) {
    d.categorical[f] = f == 0   ? data::SyntheticCategoricalSpec{40, 0.5, 0.0, 0.2}
                       : f < 8 ? data::SyntheticCategoricalSpec{20, 0.8, 0.0, 0.2}
                               : data::SyntheticCategoricalSpec{1, 1.0, 0.0, 0.0};
  }
  d.interactions = {{2, 3, 4, 0.6}};
  d.dense_effect_scale = 0.3;
  d.calibration_rows = 20000;
  d.history = {.max_length = 12, .item_field = 0, .num_categories = 4, .scale = 1.2};
  return d;
}

// C1..C8 and H1 of generated rows as Examples (no dense features).
Examples FromRows(const data::SyntheticGenerator& gen, data::SyntheticSplit split,
                  int64_t n) {
  const std::vector<data::SyntheticRow> rows = gen.GenerateRows(split, 0, n);
  const data::Batch b = data::RowsToBatchWithHistory(rows.data(), n, 0);
  Examples ex;
  ex.sparse.resize(9);
  for (int64_t r = 0; r < n; ++r) {
    ex.labels.push_back(rows[r].label);
    ex.truth.push_back(rows[r].probability);
    ex.dense.push_back({});
    for (int f = 0; f < 9; ++f) {
      const data::SparseBatch& s = b.sparse[f < 8 ? f : data::kSyntheticNumCategorical];
      const int64_t* splits = s.row_splits.data<int64_t>();
      const int64_t* ids = s.ids.data<int64_t>();
      ex.sparse[f].emplace_back(ids + splits[r], ids + splits[r + 1]);
    }
  }
  return ex;
}

TEST(DinSyntheticTest, HistoriesLeaveTheOtherFeaturesAsTheyWere) {
  data::SyntheticConfig off = HistoryData();
  off.history.max_length = 0;
  auto a = data::GenerateRows(off, data::SyntheticSplit::kTrain, 0, 500);
  auto b = data::GenerateRows(HistoryData(), data::SyntheticSplit::kTrain, 0, 500);
  ASSERT_TRUE(a.ok() && b.ok());
  auto gen = data::SyntheticGenerator::Create(HistoryData());
  ASSERT_TRUE(gen.ok());
  int64_t total = 0, matching_rows = 0;
  for (int r = 0; r < 500; ++r) {
    const data::SyntheticRow& x = (*a)[r];
    const data::SyntheticRow& y = (*b)[r];
    EXPECT_EQ(x.history_length, 0u);
    EXPECT_EQ(x.sequence_part, 0.f);
    for (int f = 0; f < data::kSyntheticNumCategorical; ++f) {
      ASSERT_EQ(x.hashed[f], y.hashed[f]) << r;
    }
    for (int j = 0; j < data::kSyntheticNumDense; ++j) ASSERT_EQ(x.dense[j], y.dense[j]);
    EXPECT_LE(y.history_length, 12u);
    total += y.history_length;
    int matches = 0;
    for (uint32_t i = 0; i < y.history_length; ++i) {
      matches += (*gen)->HistoryCategory(y.history_rank[i]) ==
                 (*gen)->HistoryCategory(y.rank[0]);
    }
    EXPECT_FLOAT_EQ(y.sequence_part, 1.2f * matches) << r;
    matching_rows += matches > 0;
  }
  EXPECT_GT(total, 500 * 4);  // mean length 6
  EXPECT_GT(matching_rows, 100);
  // The batch's H1 holds the history in C1's id space.
  const data::Batch batch = data::RowsToBatchWithHistory(b->data(), 3, 0);
  ASSERT_EQ(batch.sparse.size(), data::kSyntheticNumCategorical + 1u);
  const data::SparseBatch& h1 = batch.sparse.back();
  EXPECT_EQ(h1.row_splits.data<int64_t>()[1], (*b)[0].history_length);
  if ((*b)[0].history_length > 0) {
    EXPECT_EQ(h1.ids.data<int64_t>()[0], data::CriteoHexId(0, (*b)[0].history_hashed[0]));
  }
  EXPECT_EQ(data::SyntheticBatchSchemaWithHistory().sparse.back().name, "H1");
  data::SyntheticConfig bad = HistoryData();
  bad.history.max_length = 33;
  EXPECT_THAT(std::string(bad.Validate().message()), HasSubstr("history.max_length"));
}

TEST(DinTrainingTest, BeatsSumPoolingOnTheSyntheticClickLogWithHistories) {
  auto gen = data::SyntheticGenerator::Create(HistoryData());
  ASSERT_TRUE(gen.ok()) << gen.status();
  const Examples train = FromRows(**gen, data::SyntheticSplit::kTrain, 24576);
  const Examples test = FromRows(**gen, data::SyntheticSplit::kTest, 4096);
  std::printf("oracle test auc %.4f\n", test.OracleAuc());
  std::map<std::string, testing::TrainResult> results;
  for (const std::string type : {"din", "mlp"}) {
    ModelConfig c = DinConfig(type);
    c.dense_features.clear();
    c.sparse_features.clear();
    for (int f = 0; f < 8; ++f) {
      c.sparse_features.push_back({.name = absl::StrCat("C", f + 1), .vocabulary_size = 128});
    }
    c.sparse_features.push_back({.name = "H1", .combiner = "sum", .sequence_of = "C1"});
    Harness h;
    ASSERT_TRUE(h.Build(c).ok()) << type << ": " << h.root.status();
    auto r = testing::TrainAndEvaluate(h, c, train, test, 256, 8);
    ASSERT_TRUE(r.ok()) << type << ": " << r.status();
    std::printf("%-4s train loss %.4f -> %.4f  test auc %.4f logloss %.4f  %.0f examples/s\n",
                type.c_str(), r->first_loss, r->last_loss, r->test.auc, r->test.logloss,
                r->examples_per_second);
    results[type] = *r;
  }
  // Observed (8 epochs): din 0.839, mlp 0.821, the oracle 0.894 (the
  // generator's other fields carry first-order effects both models learn).
  EXPECT_GT(results["din"].test.auc, results["mlp"].test.auc + 0.01);
}

}  // namespace
}  // namespace recflow::models
