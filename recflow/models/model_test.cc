// The model zoo: every type builds and gives logits [B] (B = 1, 64, empty
// bags), lr and fm match a hand computation, bad configs name the field,
// embedding gradients stay sparse, optimizers and schedules per group, a
// GraphDef round trip trains the same, and training on synthetic click logs
// (model_zoo_training_test.cc).
#include "recflow/models/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/cli/testing/zoo_util.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/data/batch.h"
#include "recflow/data/synthetic.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/scope.h"
#include "recflow/models/model_builder.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/metrics.h"
#include "recflow/train/variables.h"

namespace recflow::models {
namespace {

using ::testing::HasSubstr;
using testing::CtrModelTypes;
using testing::Feeds;
using testing::FeedsFor;
using testing::Harness;

// --- Helpers: random batches (the model harness: cli/testing/zoo_util.h)
// ----------

// A small config of every kind of feature: 2 dense, 3 sparse features
// (vocabularies 50, 40, 30; combiners sum, mean, sqrtn), dim 4.
ModelConfig SmallConfig(const std::string& type) {
  ModelConfig c;
  c.type = type;
  c.dense_features = {"I1", "I2"};
  c.sparse_features = {
      {.name = "C1", .vocabulary_size = 50, .combiner = "sum"},
      {.name = "C2", .vocabulary_size = 40, .combiner = "mean"},
      {.name = "C3", .vocabulary_size = 30, .combiner = "sqrtn"}};
  c.embedding_dim = 4;
  c.hidden_units = {8, 4};
  c.bottom_units = {8};
  c.cross_layers = 2;
  c.seed = 7;
  return c;
}

// A random batch of `b` examples for `c`: dense in [-1, 1), labels 0/1,
// bags of 0..3 ids (some empty) drawn from a wide range (negative and
// beyond 2^53 too, to exercise the modulo).
data::Batch RandomBatch(const ModelConfig& c, int64_t b, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  data::Batch batch;
  batch.batch_size = b;
  const int64_t n = static_cast<int64_t>(c.dense_features.size());
  batch.labels = Tensor(DT_FLOAT, TensorShape({b}));
  batch.dense = Tensor(DT_FLOAT, TensorShape({b, n}));
  for (int64_t i = 0; i < b; ++i)
    batch.labels.data<float>()[i] = (rng() % 3 == 0) ? 1.f : 0.f;
  for (int64_t i = 0; i < b * n; ++i) batch.dense.data<float>()[i] = u(rng);
  for (size_t f = 0; f < c.sparse_features.size(); ++f) {
    std::vector<int64_t> ids, splits = {0};
    for (int64_t i = 0; i < b; ++i) {
      const int k = static_cast<int>(rng() % 4);  // 0: an empty bag
      for (int j = 0; j < k; ++j) {
        const uint64_t kind = rng() % 8;
        int64_t id = static_cast<int64_t>(rng() % 1000);
        if (kind == 0) id = -id - 1;
        if (kind == 1)
          id = (int64_t{1} << 60) + static_cast<int64_t>(rng() % 100000);
        if (kind == 2) id = static_cast<int64_t>(rng() >> 1);
        ids.push_back(id);
      }
      splits.push_back(static_cast<int64_t>(ids.size()));
    }
    data::SparseBatch& s = batch.sparse.emplace_back();
    s.ids = Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids));
    s.row_splits = Tensor::FromVector<int64_t>(absl::MakeConstSpan(splits));
  }
  return batch;
}

const std::vector<std::string>& kTypes = CtrModelTypes();

// The CTR models above take any features; din (a behaviour sequence) and
// two_tower (user and item towers) need more of the config and are tested
// in din_test.cc and two_tower_test.cc.
TEST(ModelTypesTest, ListsTheZoo) {
  std::vector<std::string> all = kTypes;
  all.push_back("din");
  all.push_back("two_tower");
  EXPECT_EQ(ModelTypes(), all);
}

class EveryModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModelTest, BuildsAndGivesLogitsOfBatchSize) {
  const ModelConfig c = SmallConfig(GetParam());
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  EXPECT_GT(h.model.num_parameters, 0);
  EXPECT_FALSE(h.model.embedding_variables.empty());
  EXPECT_FALSE(h.model.dense_variables.empty());
  EXPECT_EQ(h.model.loss.node()->name(), "loss");
  EXPECT_EQ(h.model.probabilities.node()->name(), "probabilities");
  EXPECT_EQ(h.model.train_op.node()->name(), "train");
  for (int64_t b : {1, 64}) {
    const data::Batch batch = RandomBatch(c, b, 100 + b);
    auto out =
        h.Run(FeedsFor(c, batch), {"logits:0", "probabilities:0", "loss:0"});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ((*out)[0].shape(), TensorShape({b}));
    ASSERT_EQ((*out)[1].shape(), TensorShape({b}));
    for (int64_t i = 0; i < b; ++i) {
      const float logit = (*out)[0].data<float>()[i];
      ASSERT_TRUE(std::isfinite(logit));
      EXPECT_NEAR((*out)[1].data<float>()[i], 1 / (1 + std::exp(-logit)), 1e-6);
    }
    EXPECT_TRUE(std::isfinite((*out)[2].scalar<float>()));
  }
  // A batch whose every bag is empty reads zeros and still runs, and a
  // training step runs and increments the global step once.
  data::Batch batch = RandomBatch(c, 5, 3);
  for (auto& s : batch.sparse) {
    s.ids = Tensor(DT_INT64, TensorShape({0}));
    s.row_splits =
        Tensor::FromVector<int64_t>({0, 0, 0, 0, 0, 0}, TensorShape({6}));
  }
  auto out = h.Run(FeedsFor(c, batch), {"logits:0"}, {"train"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)[0].shape(), TensorShape({5}));
  auto step = h.Run({}, {h.model.global_step.name()});
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ((*step)[0].scalar<int64_t>(), 1);
}

TEST_P(EveryModelTest, InferenceBuildHasNoTrainOp) {
  ModelConfig c = SmallConfig(GetParam());
  c.dense_optimizer.type = "bogus";  // not checked without training
  Harness h;
  ASSERT_TRUE(h.Build(c, {.trainable = false}).ok()) << h.root.status();
  EXPECT_FALSE(h.model.train_op.valid());
  EXPECT_EQ(h.root.graph()->FindNode("train"), nullptr);
  auto out = h.Run(FeedsFor(c, RandomBatch(c, 3, 1)), {"probabilities:0"});
  ASSERT_TRUE(out.ok()) << out.status();
}

TEST_P(EveryModelTest, SameSeedSameModelOtherSeedOther) {
  ModelConfig c = SmallConfig(GetParam());
  // lr starts at zero by default, whatever the seed: draw its weights.
  c.initializers.linear = {.type = "uniform", .limit = 0.05};
  const data::Batch batch = RandomBatch(c, 16, 5);
  std::vector<float> logits[3];
  for (int i = 0; i < 3; ++i) {
    c.seed = i == 2 ? 8 : 7;
    Harness h;
    ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
    auto out = h.Run(FeedsFor(c, batch), {"logits:0"});
    ASSERT_TRUE(out.ok()) << out.status();
    auto f = (*out)[0].flat<float>();
    logits[i].assign(f.begin(), f.end());
  }
  EXPECT_EQ(logits[0], logits[1]);
  EXPECT_NE(logits[0], logits[2]);
}

// Every apply op that updates an embedding table is a sparse one, and no
// dense [vocabulary_size, dim] gradient is built (vocabularies are 1009,
// 1013, 1019: no other dimension has those sizes).
TEST_P(EveryModelTest, EmbeddingGradientsStaySparse) {
  for (const std::string opt : {"sgd", "adagrad", "adam", "ftrl"}) {
    ModelConfig c = SmallConfig(GetParam());
    c.sparse_features[0].vocabulary_size = 1009;
    c.sparse_features[1].vocabulary_size = 1013;
    c.sparse_features[2].vocabulary_size = 1019;
    c.embedding_optimizer.type = opt;
    c.dense_optimizer.type = opt;
    Scope root = Scope::NewRootScope();
    auto m = BuildModel(root, c, Placeholders(root, c));
    ASSERT_TRUE(m.ok()) << m.status();
    std::set<std::string> tables;
    for (const Output& v : m->embedding_variables)
      tables.insert(v.node()->name());
    int sparse_updates = 0;
    for (const auto& node : root.graph()->nodes()) {
      const std::string& op = node->op();
      if (op.find("Apply") != std::string::npos && node->num_inputs() > 0) {
        const Node* var = node->input_edge(0)->src;
        if (tables.count(var->name())) {
          EXPECT_THAT(op, HasSubstr("Sparse"))
              << node->name() << " updates " << var->name();
          ++sparse_updates;
        }
      }
      if (op == "UnsortedSegmentSum" || op == "ZerosLike" ||
          op == "ScatterNd") {
        const PartialShape s = node->output_shape(0);
        const bool table_sized =
            s.rank() >= 1 &&
            (s.dim(0) == 1009 || s.dim(0) == 1013 || s.dim(0) == 1019);
        EXPECT_FALSE(table_sized)
            << node->name() << " builds " << s.DebugString();
      }
    }
    EXPECT_EQ(sparse_updates, static_cast<int>(tables.size())) << opt;
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, EveryModelTest, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return info.param; });

// --- Hand computations
// --------------------------------------------------------

int64_t FloorMod(int64_t x, int64_t v) {
  const int64_t r = x % v;
  return r < 0 ? r + v : r;
}

// Known weights for every variable of the model: value i of variable v is
// a small non-repeating pattern.
std::map<std::string, std::vector<float>> KnownWeights(const Model& m) {
  std::map<std::string, std::vector<float>> w;
  std::vector<Output> vars = m.embedding_variables;
  vars.insert(vars.end(), m.dense_variables.begin(), m.dense_variables.end());
  int salt = 0;
  for (const Output& v : vars) {
    const int64_t n = train::VariableShape(v).num_elements();
    std::vector<float>& values = w[train::VariableName(v)];
    for (int64_t i = 0; i < n; ++i) {
      values.push_back(0.05f * static_cast<float>((i * 7 + salt * 3) % 13 - 6) +
                       0.01f * salt);
    }
    ++salt;
  }
  return w;
}

// Builds `c`, assigns KnownWeights, returns the logits of `batch` and the
// weights used.
std::vector<float> LogitsWithKnownWeights(
    const ModelConfig& c, const data::Batch& batch,
    std::map<std::string, std::vector<float>>* weights) {
  Harness h;
  EXPECT_TRUE(h.BuildGraph(c).ok()) << h.root.status();
  *weights = KnownWeights(h.model);
  std::vector<Output> vars = h.model.embedding_variables;
  vars.insert(vars.end(), h.model.dense_variables.begin(),
              h.model.dense_variables.end());
  std::vector<Output> assigns;
  const Scope s = h.root.NewSubScope("set");
  for (const Output& v : vars) {
    const std::vector<float>& value = weights->at(train::VariableName(v));
    assigns.push_back(train::AssignValue(
        s, v,
        ops::Const(s, Tensor::FromVector<float>(
                          absl::MakeConstSpan(value),
                          train::VariableShape(v).ToTensorShape()))));
  }
  ops::NoOp(h.root.WithOpName("set_weights").WithControlDependencies(assigns));
  auto def = h.root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  EXPECT_TRUE(h.StartSession(*def).ok());
  EXPECT_TRUE(h.Run({}, {}, {"set_weights"}).ok());
  auto out = h.Run(FeedsFor(c, batch), {"logits:0"});
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  auto f = (*out)[0].flat<float>();
  return {f.begin(), f.end()};
}

// The combined bag of example b of feature f over `table` [V, dim] (or
// [V + 1, dim] with the missing id V, which an empty bag then reads).
std::vector<double> Bag(const ModelConfig& c, const data::Batch& batch, int f,
                        int64_t b, const std::vector<float>& table,
                        int64_t dim) {
  const SparseFeatureConfig& feature = c.sparse_features[f];
  const int64_t* ids = batch.sparse[f].ids.data<int64_t>();
  const int64_t* splits = batch.sparse[f].row_splits.data<int64_t>();
  std::vector<double> sum(dim, 0.0);
  const int64_t k = splits[b + 1] - splits[b];
  for (int64_t j = splits[b]; j < splits[b + 1]; ++j) {
    const int64_t row = FloorMod(ids[j], feature.vocabulary_size);
    for (int64_t d = 0; d < dim; ++d) sum[d] += table[row * dim + d];
  }
  if (k > 0 && feature.combiner != "sum") {
    const double div =
        feature.combiner == "mean" ? k : std::sqrt(static_cast<double>(k));
    for (double& x : sum) x /= div;
  }
  if (k == 0 && feature.missing == "id") {
    EXPECT_EQ(static_cast<int64_t>(table.size()), (feature.vocabulary_size + 1) * dim);
    const int64_t row = feature.vocabulary_size;
    for (int64_t d = 0; d < dim; ++d) sum[d] = table[row * dim + d];
  }
  return sum;
}

// Rows of a table of `dim` columns among the weights.
int64_t Rows(const std::map<std::string, std::vector<float>>& w, const std::string& name,
             int64_t dim) {
  auto it = w.find(name);
  return it == w.end() ? -1 : static_cast<int64_t>(it->second.size()) / dim;
}

// FloorModIds (the stand-in for a FloorMod op) on edge values.
TEST(ModelFloorModTest, MatchesFloorModOnEdgeValues) {
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> ids = {0,
                              1,
                              -1,
                              5,
                              -5,
                              kMax,
                              kMin,
                              kMax - 1,
                              kMin + 1,
                              int64_t{1} << 53,
                              (int64_t{1} << 53) + 1,
                              -(int64_t{1} << 53) - 1,
                              (int64_t{1} << 62) + 12345,
                              -(int64_t{1} << 62) - 999};
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) ids.push_back(static_cast<int64_t>(rng()));
  for (int64_t v : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{1000003},
                    int64_t{2147483647}, (int64_t{1} << 40) + 3}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_INT64);
    Output y = internal::FloorModIds(root.WithOpName("y"), x, v);
    auto def = root.ToGraphDef();
    ASSERT_TRUE(def.ok()) << def.status();
    auto session = Session::Create(SessionOptions(), *def);
    ASSERT_TRUE(session.ok());
    std::vector<Tensor> out;
    ASSERT_TRUE(
        (*session)
            ->Run(
                {{"x", Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids))}},
                {y.name()}, {}, &out)
            .ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_EQ(out[0].flat<int64_t>()[i], FloorMod(ids[i], v))
          << ids[i] << " mod " << v;
    }
  }
}

// lr by hand: sum_f bag_f(linear/<f>) + dense . w + b.
double HandLr(const ModelConfig& c, const data::Batch& batch, int64_t b,
              std::map<std::string, std::vector<float>>& w,
              const std::string& prefix) {
  double logit = w[prefix + "/bias"][0];
  for (int f = 0; f < 3; ++f) {
    const std::string table = "linear/" + c.sparse_features[f].name;
    logit += Bag(c, batch, f, b, w[table], 1)[0];
  }
  for (int j = 0; j < 2; ++j) {
    logit +=
        batch.dense.data<float>()[b * 2 + j] * w[prefix + "/dense_weights"][j];
  }
  return logit;
}

// Both choices for a missing value (an empty bag): zeros, or the feature's
// own "missing" row (C2 keeps zeros in the second case, so the two mix).
class ModelHandComputationTest : public ::testing::TestWithParam<std::string> {
 protected:
  ModelConfig Config(const std::string& type) const {
    ModelConfig c = SmallConfig(type);
    c.sparse_features[0].vocabulary_size = 5;
    c.sparse_features[1].vocabulary_size = 4;
    c.sparse_features[2].vocabulary_size = 3;
    for (SparseFeatureConfig& f : c.sparse_features) f.missing = GetParam();
    c.sparse_features[1].missing = "empty";
    return c;
  }
};
INSTANTIATE_TEST_SUITE_P(Missing, ModelHandComputationTest,
                         ::testing::Values("empty", "id"));

TEST_P(ModelHandComputationTest, LogisticRegression) {
  const ModelConfig c = Config("lr");
  const data::Batch batch = RandomBatch(c, 32, 11);
  std::map<std::string, std::vector<float>> w;
  const std::vector<float> logits = LogitsWithKnownWeights(c, batch, &w);
  ASSERT_EQ(logits.size(), 32u);
  EXPECT_EQ(Rows(w, "linear/C1", 1), GetParam() == "id" ? 6 : 5);
  EXPECT_EQ(Rows(w, "linear/C2", 1), 4);
  for (int64_t b = 0; b < 32; ++b) {
    EXPECT_NEAR(logits[b], HandLr(c, batch, b, w, "lr"), 1e-5)
        << "example " << b;
  }
}

// The dense features in every fm_dense form: each a field x_j v_j, one
// projected vector, or left out of the pairwise term.
TEST_P(ModelHandComputationTest, FactorizationMachine) {
  for (const char* fm_dense : {"fields", "projection", "none"}) {
    SCOPED_TRACE(fm_dense);
    ModelConfig c = Config("fm");
    c.fm_dense = fm_dense;
    const data::Batch batch = RandomBatch(c, 32, 12);
    std::map<std::string, std::vector<float>> w;
    const std::vector<float> logits = LogitsWithKnownWeights(c, batch, &w);
    ASSERT_EQ(logits.size(), 32u);
    EXPECT_EQ(Rows(w, "embedding/C3", c.embedding_dim), GetParam() == "id" ? 4 : 3);
    const int64_t dim = c.embedding_dim;
    for (int64_t b = 0; b < 32; ++b) {
      std::vector<std::vector<double>> vectors;
      for (int f = 0; f < 3; ++f) {
        const std::string table = "embedding/" + c.sparse_features[f].name;
        vectors.push_back(Bag(c, batch, f, b, w[table], dim));
      }
      const float* x = batch.dense.data<float>() + b * 2;
      if (c.fm_dense == "projection") {
        std::vector<double> projected(dim, 0.0);
        for (int j = 0; j < 2; ++j) {
          for (int64_t d = 0; d < dim; ++d) {
            projected[d] += x[j] * w["fm/dense_projection"][j * dim + d];
          }
        }
        vectors.push_back(projected);
      } else if (c.fm_dense == "fields") {
        for (int j = 0; j < 2; ++j) {
          std::vector<double> field(dim);
          for (int64_t d = 0; d < dim; ++d) {
            field[d] = x[j] * w["dense_fields/kernel"][j * dim + d];
          }
          vectors.push_back(field);
        }
      }
      double pair = 0;
      for (int64_t d = 0; d < dim; ++d) {
        double sum = 0, sum_sq = 0;
        for (const auto& v : vectors) {
          sum += v[d];
          sum_sq += v[d] * v[d];
        }
        pair += 0.5 * (sum * sum - sum_sq);
      }
      EXPECT_NEAR(logits[b], HandLr(c, batch, b, w, "lr") + pair, 1e-5)
          << "example " << b;
    }
  }
}

// --- Bad configs
// ---------------------------------------------------------------

absl::Status BuildStatus(const ModelConfig& c) {
  Scope root = Scope::NewRootScope();
  return BuildModel(root, c, Placeholders(root, c)).status();
}

void ExpectInvalid(const ModelConfig& c, const std::string& what) {
  const absl::Status s = BuildStatus(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(what));
}

TEST(ModelBadConfigTest, NamesTheField) {
  ModelConfig c = SmallConfig("nope");
  ExpectInvalid(c, "type: unknown model type 'nope'; one of");
  c = SmallConfig("lr");
  c.dense_features.clear();
  c.sparse_features.clear();
  ExpectInvalid(c, "dense_features and sparse_features are both empty");
  c = SmallConfig("mlp");
  c.sparse_features[1].vocabulary_size = 0;
  ExpectInvalid(
      c,
      "sparse_features[1] (C2).vocabulary_size must be > 0 unless hash_table");
  c = SmallConfig("mlp");
  c.hidden_units = {8, 0};
  ExpectInvalid(c, "hidden_units[1] is 0");
  c = SmallConfig("dlrm");
  c.bottom_units = {-3};
  ExpectInvalid(c, "bottom_units[0] is -3");
  c = SmallConfig("mlp");
  c.embedding_dim = 0;
  ExpectInvalid(c, "embedding_dim must be > 0, got 0");
  c = SmallConfig("mlp");
  c.sparse_features[2].dim = -1;
  ExpectInvalid(c, "sparse_features[2] (C3).dim must be > 0");
  c = SmallConfig("mlp");
  c.activation = "gelu2";
  ExpectInvalid(c, "activation: unknown activation 'gelu2'");
  c = SmallConfig("mlp");
  c.sparse_features[0].combiner = "max";
  ExpectInvalid(c, "sparse_features[0] (C1).combiner: unknown combiner 'max'");
  c = SmallConfig("mlp");
  c.embedding_optimizer.type = "rmsprop";
  ExpectInvalid(c, "embedding_optimizer.type: unknown optimizer 'rmsprop'");
  c = SmallConfig("mlp");
  c.dense_optimizer.learning_rate = -0.5;  // 0 is "unset": the default
  ExpectInvalid(c, "dense_optimizer.learning_rate must be > 0");
  c = SmallConfig("mlp");
  c.dense_optimizer.schedule = "cosine";
  ExpectInvalid(c, "dense_optimizer.schedule: unknown schedule 'cosine'");
  c = SmallConfig("mlp");
  c.dense_optimizer.schedule = "exponential_decay";
  ExpectInvalid(
      c, "dense_optimizer.schedule exponential_decay needs decay_steps > 0");
  c = SmallConfig("mlp");
  c.embedding_optimizer.schedule = "linear_warmup";
  ExpectInvalid(
      c, "embedding_optimizer.schedule linear_warmup needs warmup_steps > 0");
  c = SmallConfig("fm");
  c.sparse_features[1].dim = 3;
  ExpectInvalid(c, "sparse_features[1] (C2).dim is 3 but model type 'fm'");
  c = SmallConfig("deepfm");
  c.sparse_features.clear();
  ExpectInvalid(c, "sparse_features is empty but model type 'deepfm'");
  c = SmallConfig("dcn_v2");
  c.cross_layers = -1;
  ExpectInvalid(c, "cross_layers must be >= 0");
  c = SmallConfig("dlrm");
  c.dense_features.clear();
  c.sparse_features.resize(1);
  ExpectInvalid(c, "model type 'dlrm' interacts pairs of vectors");
  c = SmallConfig("lr");
  c.sparse_features[2].name = "C1";
  ExpectInvalid(c, "feature 'C1' is listed twice");
  c = SmallConfig("lr");
  c.l2_regularization = -1;
  ExpectInvalid(c, "l2_regularization must be >= 0");
}

TEST(ModelBadConfigTest, InputsMustMatchTheConfig) {
  ModelConfig c = SmallConfig("mlp");
  Scope root = Scope::NewRootScope();
  ModelInputs in = Placeholders(root, c);
  in.sparse.pop_back();
  absl::Status s = BuildModel(root, c, in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(s.message()),
      HasSubstr("inputs have 2 sparse features but the config lists 3"));
  ModelConfig c5 = c;
  c5.dense_features = {"a", "b", "c", "d", "e"};
  Scope root2 = Scope::NewRootScope();
  s = BuildModel(root2, c5, Placeholders(root2, c)).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("inputs.dense is [?,2] but the config lists 5"));
}

TEST(ModelHashTableTest, HashTableFeaturesTrainAndServe) {
  for (const std::string type : {"lr", "deepfm", "dlrm"}) {
    ModelConfig c = SmallConfig(type);
    c.sparse_features[1].hash_table = true;
    c.sparse_features[1].vocabulary_size = 0;
    Harness h;
    ASSERT_TRUE(h.Build(c).ok()) << type << " " << h.root.status();
    ASSERT_GE(train::HashTables(*h.root.graph()).size(), 1u) << type;
    const data::Batch batch = RandomBatch(c, 64, 5);
    double first = 0, last = 0;
    for (int step = 0; step < 20; ++step) {
      auto out = h.Run(FeedsFor(c, batch), {"loss:0"}, {"train"});
      ASSERT_TRUE(out.ok()) << type << " " << out.status();
      (step == 0 ? first : last) = (*out)[0].scalar<float>();
    }
    EXPECT_LT(last, first) << type;
    // The inference build reads the table in serve mode (never inserting).
    Harness serve;
    ASSERT_TRUE(serve.Build(c, {.trainable = false}).ok()) << serve.root.status();
    bool serve_mode = false;
    for (const auto& n : serve.root.graph()->nodes()) {
      std::string mode;
      if (n->op() == "HashEmbeddingBag" &&
          GetNodeAttr(AttrSlice(n->def()), "mode", &mode).ok()) {
        serve_mode = mode == "serve";
      }
    }
    EXPECT_TRUE(serve_mode) << type;
    auto out = serve.Run(FeedsFor(c, batch), {"probabilities:0"});
    ASSERT_TRUE(out.ok()) << out.status();
  }
}

// --- Parameters, optimizers, schedules
// -----------------------------------------

TEST(ModelNumParametersTest, CountsTablesAndLayers) {
  ModelConfig c = SmallConfig("lr");
  Scope root = Scope::NewRootScope();
  auto m = BuildModel(root, c, Placeholders(root, c));
  ASSERT_TRUE(m.ok()) << m.status();
  // 1-dim tables with their missing ids' rows, w, b.
  EXPECT_EQ(m->num_parameters, 51 + 41 + 31 + 2 + 1);
  EXPECT_EQ(m->embedding_variables.size(), 3u);
  EXPECT_EQ(m->dense_variables.size(), 2u);

  c = SmallConfig("mlp");
  c.sparse_features[2].dim = 6;
  Scope root2 = Scope::NewRootScope();
  m = BuildModel(root2, c, Placeholders(root2, c));
  ASSERT_TRUE(m.ok()) << m.status();
  const int64_t tables = 51 * 4 + 41 * 4 + 31 * 6;  // with the missing ids' rows
  const int64_t in = 2 + 4 + 4 + 6;
  EXPECT_EQ(m->num_parameters, tables + (in * 8 + 8) + (8 * 4 + 4) + (4 + 1));
}

// Issue 22: `vocabulary_size: 2^63-1` was reported as a model of 142885
// parameters (the count wrapped), and 100,000 hidden units ran for minutes
// to 7.6 GB before failing. Counts are checked, and a model that cannot fit
// the machine is refused before anything is allocated.
TEST(ModelSizeTest, ParameterCountsThatOverflowAreRefused) {
  ModelConfig c = SmallConfig("mlp");
  c.sparse_features[0].vocabulary_size = std::numeric_limits<int64_t>::max();
  ExpectInvalid(c, "sparse_features[0] (C1).vocabulary_size 9223372036854775807 + 1 "
                   "missing-id row overflows int64");
  c = SmallConfig("mlp");
  c.sparse_features[0].vocabulary_size = int64_t{1} << 62;
  ExpectInvalid(c, "the embedding table of sparse feature 'C1' [4611686018427387905, 4] (its "
                   "vocabulary_size + 1 missing-id row x dim) has more parameters than fit in "
                   "int64");
  c = SmallConfig("mlp");
  c.sparse_features[0].vocabulary_size = int64_t{1} << 60;
  c.sparse_features[1].vocabulary_size = int64_t{1} << 60;
  ExpectInvalid(c, "the model's parameter count overflows int64 at the embedding table of "
                   "sparse feature 'C2'");
  c = SmallConfig("mlp");
  c.hidden_units = {int64_t{1} << 40, int64_t{1} << 40};
  ExpectInvalid(c, "[1099511627776, 1099511627776] has more parameters than fit in int64");
  c = SmallConfig("mlp");
  c.hidden_units.assign(kMaxLayers + 1, 1);
  ExpectInvalid(c, "hidden_units has 1025 layers; at most 1024");
  c = SmallConfig("dcn_v2");
  c.cross_layers = 100000;
  ExpectInvalid(c, "cross_layers is 100000; at most 1024");
}

TEST(ModelSizeTest, MemoryEstimateCountsWeightsSlotsAndGradients) {
  ModelConfig c = SmallConfig("lr");  // adagrad tables, adam dense weights
  Scope root = Scope::NewRootScope();
  auto m = BuildModel(root, c, Placeholders(root, c));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->variable_sizes.size(), 5u);
  // Tables 51 + 41 + 31 (weight + accumulator); w 2, b 1 (weight, m, v,
  // gradient).
  MemoryEstimate e = EstimateParameterMemory(c, *m, /*trainable=*/true);
  EXPECT_EQ(e.parameters, m->num_parameters);
  EXPECT_DOUBLE_EQ(e.bytes, 123 * 4 * 2 + 3 * 4 * 4);
  EXPECT_THAT(e.detail, HasSubstr("123 embedding parameters x (4 bytes + 4 for adagrad's slots)"));
  EXPECT_THAT(e.detail, HasSubstr("3 dense parameters x (4 bytes + 8 for adam's slots + 4 for "
                                  "the gradient)"));
  EXPECT_DOUBLE_EQ(EstimateParameterMemory(c, *m, /*trainable=*/false).bytes, 126 * 4);
  EXPECT_TRUE(CheckModelFitsMemory(c, *m, true, 1032).ok());
  absl::Status s = CheckModelFitsMemory(c, *m, true, 1031);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_TRUE(CheckModelFitsMemory(c, *m, true, 0).ok());  // unknown memory
}

TEST(ModelSizeTest, AModelThatCannotFitIsRefusedNamingTheLargest) {
  ModelConfig c = SmallConfig("mlp");
  c.hidden_units = {100000, 100000};
  Scope root = Scope::NewRootScope();
  auto m = BuildModel(root, c, Placeholders(root, c));  // allocates nothing
  ASSERT_TRUE(m.ok()) << m.status();
  const absl::Status s =
      CheckModelFitsMemory(c, *m, /*trainable=*/true, int64_t{16} * 1000 * 1000 * 1000);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  const std::string msg(s.message());
  EXPECT_THAT(msg, HasSubstr("model 'mlp' cannot fit in memory: training it needs at least "
                             "160.0 GB for its 10001700493 fixed-size parameters"));
  EXPECT_THAT(msg, HasSubstr("but this machine has 16.0 GB of physical memory"));
  EXPECT_THAT(msg, HasSubstr("The largest: variable '"));
  EXPECT_THAT(msg, HasSubstr("/kernel' [100000, 100000]: 10000000000 parameters"));
  EXPECT_THAT(msg, HasSubstr("hidden_units"));
}

TEST(ModelOptimizerTest, EveryOptimizerAndScheduleTrains) {
  struct Case {
    std::string type, schedule;
  };
  for (const Case& k : std::vector<Case>{{"sgd", "constant"},
                                         {"adagrad", "exponential_decay"},
                                         {"adam", "linear_warmup"},
                                         {"ftrl", "constant"},
                                         {"ftrl", "exponential_decay"}}) {
    ModelConfig c = SmallConfig("deepfm");
    c.l2_regularization = 1e-4;
    for (OptimizerConfig* o : {&c.embedding_optimizer, &c.dense_optimizer}) {
      o->type = k.type;
      o->schedule = k.schedule;
      o->learning_rate = 0.05;
      o->decay_steps = 10;
      o->decay_rate = 0.5;
      o->warmup_steps = 5;
      o->l1 = 0.001;
    }
    Harness h;
    ASSERT_TRUE(h.Build(c).ok()) << k.type << " " << h.root.status();
    const data::Batch batch = RandomBatch(c, 64, 21);
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
      auto out = h.Run(FeedsFor(c, batch), {"loss:0"}, {"train"});
      ASSERT_TRUE(out.ok()) << k.type << " " << out.status();
      (step == 0 ? first : last) = (*out)[0].scalar<float>();
    }
    EXPECT_LT(last, first) << k.type << " " << k.schedule;
    auto step = h.Run({}, {h.model.global_step.name()});
    ASSERT_TRUE(step.ok());
    EXPECT_EQ((*step)[0].scalar<int64_t>(), 30) << k.type;
    if (k.schedule != "constant") {
      EXPECT_NE(h.root.graph()->FindNode("optimizer/dense_learning_rate"),
                nullptr);
      EXPECT_NE(h.root.graph()->FindNode("optimizer/embedding_learning_rate"),
                nullptr);
    }
  }
}

TEST(ModelOptimizerTest, LearningRateScheduleFollowsTheGlobalStep) {
  ModelConfig c = SmallConfig("lr");
  c.dense_optimizer = {.type = "sgd",
                       .learning_rate = 0.4,
                       .schedule = "linear_warmup",
                       .warmup_steps = 4};
  c.embedding_optimizer = {.type = "sgd",
                           .learning_rate = 0.1,
                           .schedule = "exponential_decay",
                           .decay_steps = 2,
                           .decay_rate = 0.5};
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  const data::Batch batch = RandomBatch(c, 8, 2);
  for (int step = 0; step < 6; ++step) {
    auto out = h.Run(FeedsFor(c, batch),
                     {"optimizer/dense_learning_rate:0",
                      "optimizer/embedding_learning_rate:0"},
                     {"train"});
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_NEAR((*out)[0].scalar<float>(), 0.4 * std::min(1.0, step / 4.0),
                1e-6)
        << step;
    EXPECT_NEAR((*out)[1].scalar<float>(), 0.1 * std::pow(0.5, step / 2.0),
                1e-6)
        << step;
  }
}

// --- Initializers, missing rows, interaction forms
// -----------------------------------------------------------

// The initial values of the variables named `names` of model `c`.
std::map<std::string, std::vector<float>> InitialValues(
    const ModelConfig& c, const std::vector<std::string>& names) {
  Harness h;
  EXPECT_TRUE(h.BuildGraph(c).ok()) << h.root.status();
  std::vector<Output> vars = h.model.embedding_variables;
  vars.insert(vars.end(), h.model.dense_variables.begin(), h.model.dense_variables.end());
  std::vector<std::string> fetches;
  for (const std::string& name : names) {
    for (const Output& v : vars) {
      if (train::VariableName(v) != name) continue;
      fetches.push_back(
          train::ReadValue(h.root.NewSubScope("read"), v).name());
    }
  }
  EXPECT_EQ(fetches.size(), names.size()) << "a variable is missing";
  auto def = h.root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  if (!def.ok() || !h.StartSession(*def).ok()) return {};
  auto out = h.Run({}, fetches);
  EXPECT_TRUE(out.ok()) << out.status();
  std::map<std::string, std::vector<float>> values;
  if (!out.ok()) return values;
  for (size_t i = 0; i < fetches.size(); ++i) {
    auto f = (*out)[i].flat<float>();
    values[names[i]] = {f.begin(), f.end()};
  }
  return values;
}

double MaxAbs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}
double Stddev(const std::vector<float>& v) {
  double sum = 0, sq = 0;
  for (float x : v) sum += x;
  const double mean = sum / v.size();
  for (float x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / v.size());
}

TEST(ModelInitializerTest, EveryInitializerOfEveryPart) {
  ModelConfig c = SmallConfig("wide_deep");
  c.sparse_features[0].vocabulary_size = 4096;
  c.sparse_features[1].vocabulary_size = 2000;
  c.embedding_dim = 16;
  c.hidden_units = {64};
  // The zoo's defaults: embeddings U(+-0.01), first-order weights zero,
  // Glorot kernels, zero biases.
  auto v = InitialValues(c, {"embedding/C1", "linear/C1", "mlp_0/kernel", "mlp_0/bias"});
  ASSERT_EQ(v.size(), 4u);
  ASSERT_EQ(v["embedding/C1"].size(), 4097u * 16);  // the missing id's row too
  EXPECT_LE(MaxAbs(v["embedding/C1"]), 0.01);
  EXPECT_NEAR(Stddev(v["embedding/C1"]), 0.01 / std::sqrt(3.0), 0.0005);
  EXPECT_EQ(MaxAbs(v["linear/C1"]), 0.0);
  EXPECT_EQ(MaxAbs(v["mlp_0/bias"]), 0.0);
  const double fan_in = 2 + 16 * 3;  // dense + three fields
  const double glorot = std::sqrt(6.0 / (fan_in + 64));
  EXPECT_LE(MaxAbs(v["mlp_0/kernel"]), glorot);
  EXPECT_NEAR(Stddev(v["mlp_0/kernel"]), glorot / std::sqrt(3.0), 0.1 * glorot);
  const std::vector<float> missing(v["embedding/C1"].end() - 16, v["embedding/C1"].end());
  EXPECT_LE(MaxAbs(missing), 0.01);
  EXPECT_GT(MaxAbs(missing), 0.0);

  // Each part and one feature set otherwise.
  c.initializers.embedding = {.type = "uniform", .limit = 1, .scale = "inverse_sqrt_rows"};
  c.initializers.linear = {.type = "constant", .value = 0.25};
  c.initializers.kernel = {.type = "he_normal"};
  c.initializers.bias = {.type = "normal", .mean = 1, .stddev = 0.1};
  c.sparse_features[1].initializer =
      InitializerConfig{.type = "truncated_normal", .stddev = 1, .scale = "inverse_sqrt_dim"};
  v = InitialValues(c, {"embedding/C1", "embedding/C2", "linear/C2", "mlp_0/kernel",
                        "mlp_0/bias"});
  ASSERT_EQ(v.size(), 5u);
  const double dlrm = 1.0 / std::sqrt(4096.0);
  EXPECT_LE(MaxAbs(v["embedding/C1"]), dlrm);
  EXPECT_NEAR(Stddev(v["embedding/C1"]), dlrm / std::sqrt(3.0), 0.05 * dlrm);
  // Truncated at two stddevs (0.25 / 4), stddev 0.88 of the normal's.
  EXPECT_LE(MaxAbs(v["embedding/C2"]), 2 * 0.25);
  EXPECT_NEAR(Stddev(v["embedding/C2"]), 0.25 * 0.8796, 0.02);
  for (float x : v["linear/C2"]) ASSERT_EQ(x, 0.25f);
  EXPECT_NEAR(Stddev(v["mlp_0/kernel"]), std::sqrt(2.0 / fan_in), 0.15 * std::sqrt(2.0 / fan_in));
  double mean = 0;
  for (float x : v["mlp_0/bias"]) mean += x / 64;
  EXPECT_NEAR(mean, 1.0, 0.05);
  EXPECT_NEAR(Stddev(v["mlp_0/bias"]), 0.1, 0.04);
}

TEST(ModelInitializerTest, HashTablesTakeRowInitializersOnly) {
  ModelConfig c = SmallConfig("lr");
  c.sparse_features[0].hash_table = true;
  c.sparse_features[0].vocabulary_size = 0;
  c.initializers.linear = {.type = "glorot_uniform"};
  ExpectInvalid(c, "a hash table's rows start from zeros, constant, uniform");
  c.initializers.linear = {.type = "uniform", .limit = 1, .scale = "inverse_sqrt_rows"};
  ExpectInvalid(c, "a hash table has no row count");
  c.initializers.linear = {.type = "uniform", .limit = 0.5, .scale = "inverse_sqrt_dim"};
  EXPECT_TRUE(BuildStatus(c).ok()) << BuildStatus(c);
  c = SmallConfig("mlp");
  c.initializers.kernel = {.type = "xavier"};
  ExpectInvalid(c, "initializers.kernel.type: unknown initializer 'xavier'");
  c = SmallConfig("mlp");
  c.sparse_features[2].missing = "sometimes";
  ExpectInvalid(c, "(C3).missing: unknown choice 'sometimes'; one of empty, id");
  c = SmallConfig("mlp");
  c.initializers.bias = {.type = "normal", .stddev = -1};
  ExpectInvalid(c, "limit and stddev finite and >= 0");
}

// A hash table's new rows start from its feature's initializer.
TEST(ModelInitializerTest, HashTableRowsFollowTheInitializer) {
  ModelConfig c = SmallConfig("mlp");
  for (SparseFeatureConfig& f : c.sparse_features) {
    f.hash_table = true;
    f.vocabulary_size = 0;
  }
  c.embedding_dim = 16;
  c.initializers.embedding = {.type = "constant", .value = 0.125};
  c.sparse_features[1].initializer = InitializerConfig{.type = "zeros"};
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  const data::Batch batch = RandomBatch(c, 16, 4);
  // Look the rows up (creating them) through the bags: C1 (sum) reads 0.125
  // per id, and an empty bag its missing id's row (0.125 too); C2 zeros.
  auto out = h.Run(FeedsFor(c, batch),
                   {"embedding/C1_lookup/HashEmbeddingBag:0", "embedding/C2_lookup/HashEmbeddingBag:0"});
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t* splits = batch.sparse[0].row_splits.data<int64_t>();
  int empty = 0;
  for (int64_t b = 0; b < 16; ++b) {
    const int64_t k = splits[b + 1] - splits[b];
    empty += k == 0;
    const float want = 0.125f * static_cast<float>(std::max<int64_t>(k, 1));
    for (int d = 0; d < 16; ++d) ASSERT_EQ((*out)[0].flat<float>()[b * 16 + d], want) << b;
  }
  EXPECT_GT(empty, 0) << "the batch should have an empty bag";
  EXPECT_EQ(MaxAbs({(*out)[1].flat<float>().begin(), (*out)[1].flat<float>().end()}), 0.0);
}

TEST(ModelInteractionTest, DlrmSelfInteractionAddsTheDiagonal) {
  for (bool self : {false, true}) {
    ModelConfig c = SmallConfig("dlrm");
    c.self_interaction = self;
    auto v = InitialValues(c, {"top_0/kernel"});
    ASSERT_EQ(v.size(), 1u);
    const int64_t f = 1 + 3;  // the bottom MLP's output and three fields
    const int64_t pairs = self ? f * (f + 1) / 2 : f * (f - 1) / 2;
    EXPECT_EQ(static_cast<int64_t>(v["top_0/kernel"].size()), (4 + pairs) * 8) << self;
  }
}

TEST(ModelOptimizerTest, AdagradEpsilonAndDenseAdamPickTheirOps) {
  ModelConfig c = SmallConfig("deepfm");
  c.embedding_optimizer = {.type = "adagrad",
                           .learning_rate = 0.03,
                           .initial_accumulator_value = 0,
                           .epsilon = 1e-10};
  c.dense_optimizer = {.type = "adagrad", .learning_rate = 0.01, .initial_accumulator_value = 0,
                       .epsilon = 1e-7};
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  std::set<std::string> ops;
  for (const auto& n : h.root.graph()->nodes()) ops.insert(n->op());
  EXPECT_TRUE(ops.count("ResourceSparseApplyAdagradV2"));
  EXPECT_TRUE(ops.count("ResourceApplyAdagradV2"));
  EXPECT_FALSE(ops.count("ResourceApplyAdagrad"));
  const data::Batch batch = RandomBatch(c, 64, 3);
  auto out = h.Run(FeedsFor(c, batch), {"loss:0"}, {"train"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(std::isfinite((*out)[0].scalar<float>()));

  // Without epsilon the accumulator must start above 0.
  c.embedding_optimizer.epsilon = -1;
  ExpectInvalid(c, "initial_accumulator_value must be > 0 for adagrad without an epsilon");

  // Adam on the tables: lazy (sparse) by default, TensorFlow 1's dense
  // update with lazy: false.
  for (bool lazy : {true, false}) {
    ModelConfig a = SmallConfig("lr");
    a.embedding_optimizer = {.type = "adam", .learning_rate = 0.01, .lazy = lazy};
    Harness ha;
    ASSERT_TRUE(ha.Build(a).ok()) << ha.root.status();
    int sparse = 0;
    for (const auto& n : ha.root.graph()->nodes()) sparse += n->op() == "ResourceSparseApplyAdam";
    EXPECT_EQ(sparse > 0, lazy);
  }
}

// Variable and slot names are what checkpoints are keyed by: keep them.
TEST(ModelNamesTest, VariablesAndSlotsHaveStableNames) {
  ModelConfig c = SmallConfig("deepfm");
  c.embedding_optimizer.type = "adam";
  c.dense_optimizer.type = "adam";
  Scope root = Scope::NewRootScope();
  auto m = BuildModel(root, c, Placeholders(root, c));
  ASSERT_TRUE(m.ok()) << m.status();
  for (const char* name : {"embedding/C1",
                           "embedding/C1/Adam",
                           "embedding/C1/Adam_1",
                           "linear/C3",
                           "lr/bias",
                           "lr/dense_weights",
                           "dense_fields/kernel",
                           "mlp_0/kernel",
                           "mlp_0/kernel/Adam",
                           "mlp_1/bias",
                           "mlp_logit/kernel",
                           "beta1_power",
                           "beta2_power_1",
                           "global_step",
                           "labels",
                           "dense",
                           "C2/ids",
                           "C2/row_splits",
                           "logits",
                           "probabilities",
                           "loss",
                           "train"}) {
    EXPECT_NE(root.graph()->FindNode(name), nullptr) << name;
  }
}

// --- GraphDef round trip
// ----------------------------------------------------------

TEST_P(EveryModelTest, GraphDefRoundTripTrainsTheSame) {
  const ModelConfig c = SmallConfig(GetParam());
  Harness a;
  ASSERT_TRUE(a.Build(c).ok()) << a.root.status();
  auto def = a.root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  // GraphDef -> Graph -> GraphDef (wire bytes too) -> a second session.
  std::string bytes;
  ASSERT_TRUE(def->SerializeToString(&bytes));
  tensorflow::GraphDef parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  Graph g;
  ASSERT_TRUE(ConvertGraphDefToGraph({}, parsed, &g).ok());
  tensorflow::GraphDef again;
  g.ToGraphDef(&again);
  EXPECT_EQ(again.node_size(), def->node_size());
  Harness b;
  ASSERT_TRUE(b.StartSession(again).ok());
  for (int step = 0; step < 10; ++step) {
    const data::Batch batch = RandomBatch(c, 32, 40 + step);
    auto la = a.Run(FeedsFor(c, batch), {"loss:0"}, {"train"});
    auto lb = b.Run(FeedsFor(c, batch), {"loss:0"}, {"train"});
    ASSERT_TRUE(la.ok() && lb.ok());
    EXPECT_EQ((*la)[0].scalar<float>(), (*lb)[0].scalar<float>())
        << "step " << step;
  }
}

}  // namespace
}  // namespace recflow::models
