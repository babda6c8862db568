// Training the zoo on synthetic click logs (data/synthetic.h) whose ground
// truth has strong pairwise interactions between categorical fields: every
// CTR model lowers its loss and reaches a test AUC clearly above 0.5, and the
// models with interactions beat logistic regression.
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "recflow/cli/testing/zoo_util.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/data/batch.h"
#include "recflow/data/synthetic.h"
#include "recflow/models/model.h"
#include "recflow/train/metrics.h"

namespace recflow::models {
namespace {

using testing::Feeds;
using testing::FeedsFor;
using testing::Harness;

const std::vector<std::string>& kTypes = testing::CtrModelTypes();

// --- Training on synthetic data
// -------------------------------------------------

constexpr int kFields = 8;
constexpr int64_t kTrainRows = 32768, kTestRows = 4096, kBatch = 256;
constexpr int kEpochs = 2;

// 8 informative categorical fields of 20 ids (the other 18 constant),
// pairs (0,1), (2,3), (4,5), (6,7) interacting strongly, modest
// first-order and dense effects.
data::SyntheticConfig InteractionData() {
  data::SyntheticConfig d;
  d.seed = 3;
  d.target_ctr = 0.3;
  for (int f = 0; f < data::kSyntheticNumCategorical; ++f) {
    d.categorical[f] = f < kFields
                           ? data::SyntheticCategoricalSpec{20, 0.8, 0.0, 0.2}
                           : data::SyntheticCategoricalSpec{1, 1.0, 0.0, 0.0};
  }
  d.interactions = {
      {0, 1, 4, 1.2}, {2, 3, 4, 1.2}, {4, 5, 4, 1.2}, {6, 7, 4, 1.2}};
  d.dense_effect_scale = 0.5;
  d.calibration_rows = 20000;
  return d;
}

ModelConfig ZooConfig(const std::string& type, bool with_dense) {
  ModelConfig c;
  c.type = type;
  for (int j = 0; with_dense && j < data::kSyntheticNumDense; ++j) {
    c.dense_features.push_back(absl::StrCat("I", j + 1));
  }
  for (int f = 0; f < kFields; ++f) {
    c.sparse_features.push_back(
        {.name = absl::StrCat("C", f + 1), .vocabulary_size = 128});
  }
  c.embedding_dim = 8;
  c.hidden_units = {32, 16};
  c.bottom_units = {16};
  c.cross_layers = 2;
  c.seed = 1;
  // Adam for the tables too: adagrad's accumulator (initial value 0.1)
  // damps the small early gradients of the pairwise terms, so FM-style
  // models leave their saddle at 0 too slowly for a short test.
  c.embedding_optimizer = {.type = "adam", .learning_rate = 0.01};
  c.dense_optimizer = {.type = "adam", .learning_rate = 0.005};
  return c;
}

// The first kFields sparse features of a synthetic batch (the model's).
data::Batch Slice(const data::Batch& b, int64_t begin, int64_t n,
                  bool with_dense) {
  data::Batch out;
  out.batch_size = n;
  out.labels =
      Tensor::FromVector<float>(b.labels.flat<float>().subspan(begin, n));
  const int64_t d = b.dense.shape().dim_size(1);
  out.dense = !with_dense ? Tensor(DT_FLOAT, TensorShape({n, 0}))
                          : Tensor::FromVector<float>(
                                b.dense.flat<float>().subspan(begin * d, n * d),
                                TensorShape({n, d}));
  for (int f = 0; f < kFields; ++f) {
    const int64_t* splits = b.sparse[f].row_splits.data<int64_t>();
    const int64_t lo = splits[begin], hi = splits[begin + n];
    std::vector<int64_t> rs;
    for (int64_t i = 0; i <= n; ++i) rs.push_back(splits[begin + i] - lo);
    data::SparseBatch& s = out.sparse.emplace_back();
    s.ids = Tensor::FromVector<int64_t>(
        b.sparse[f].ids.flat<int64_t>().subspan(lo, hi - lo));
    s.row_splits = Tensor::FromVector<int64_t>(absl::MakeConstSpan(rs));
  }
  return out;
}

struct SyntheticData {
  data::Batch train, test;
  double oracle_auc = 0, oracle_logloss = 0;
};

const SyntheticData& Data() {
  static const SyntheticData* d = [] {
    auto gen = data::SyntheticGenerator::Create(InteractionData());
    CHECK(gen.ok()) << gen.status();
    auto* out = new SyntheticData;
    const auto train =
        (*gen)->GenerateRows(data::SyntheticSplit::kTrain, 0, kTrainRows);
    const auto test =
        (*gen)->GenerateRows(data::SyntheticSplit::kTest, 0, kTestRows);
    out->train = data::RowsToBatch(train.data(), kTrainRows);
    out->test = data::RowsToBatch(test.data(), kTestRows);
    // Standardize the dense columns (log1p counts) with the train set's
    // mean and stddev, as an input pipeline would.
    const int64_t nd = data::kSyntheticNumDense;
    for (int64_t j = 0; j < nd; ++j) {
      double sum = 0, sq = 0;
      const float* x = out->train.dense.data<float>();
      for (int64_t r = 0; r < kTrainRows; ++r) {
        sum += x[r * nd + j];
        sq += x[r * nd + j] * x[r * nd + j];
      }
      const double mean = sum / kTrainRows;
      const double sd =
          std::sqrt(std::max(sq / kTrainRows - mean * mean, 1e-6));
      for (data::Batch* b : {&out->train, &out->test}) {
        float* y = b->dense.data<float>();
        for (int64_t r = 0; r < b->batch_size; ++r) {
          y[r * nd + j] = static_cast<float>((y[r * nd + j] - mean) / sd);
        }
      }
    }
    std::vector<float> labels;
    std::vector<double> p;
    for (const auto& r : test) {
      labels.push_back(r.label);
      p.push_back(r.probability);
    }
    out->oracle_auc = data::ExactAuc(labels, p);
    out->oracle_logloss = data::MeanLogLoss(labels, p);
    return out;
  }();
  return *d;
}

using testing::TrainResult;

// Trains `epochs` epochs in order (batch kBatch), then evaluates on the test
// set.
absl::StatusOr<TrainResult> TrainAndEvaluate(Harness& h, const ModelConfig& c,
                                             int epochs) {
  const bool with_dense = !c.dense_features.empty();
  const SyntheticData& d = Data();
  std::vector<Feeds> batches;
  for (int64_t s = 0; s < kTrainRows / kBatch; ++s) {
    batches.push_back(FeedsFor(c, Slice(d.train, s * kBatch, kBatch, with_dense)));
  }
  return testing::TrainOnBatches(h, c, batches, kBatch, epochs,
                                 Slice(d.test, 0, kTestRows, with_dense));
}

// Trains every model; returns the results by type.
std::map<std::string, TrainResult> TrainAll(bool with_dense) {
  std::map<std::string, TrainResult> results;
  for (const std::string& type : kTypes) {
    const ModelConfig c = ZooConfig(type, with_dense);
    Harness h;
    EXPECT_TRUE(h.Build(c).ok()) << type << ": " << h.root.status();
    auto r = TrainAndEvaluate(h, c, kEpochs);
    EXPECT_TRUE(r.ok()) << type << ": " << r.status();
    if (!r.ok()) continue;
    std::printf(
        "%-10s params %6lld  train loss %.4f -> %.4f  test auc %.4f logloss "
        "%.4f  "
        "%.0f examples/s\n",
        type.c_str(), static_cast<long long>(h.model.num_parameters),
        r->first_loss, r->last_loss, r->test.auc, r->test.logloss,
        r->examples_per_second);
    results[type] = *r;
  }
  std::printf("oracle     test auc %.4f logloss %.4f\n", Data().oracle_auc,
              Data().oracle_logloss);
  return results;
}

TEST(ZooTrainingTest, InteractionModelsBeatLrOnInteractionData) {
  // Sparse features only: the labels come mostly from pairwise
  // interactions of categorical fields, which lr cannot express. Observed
  // (2 epochs of 32768 rows): lr 0.675 AUC, the others 0.79 - 0.86; the
  // test asks for a 0.05 margin.
  std::map<std::string, TrainResult> results = TrainAll(/*with_dense=*/false);
  ASSERT_EQ(results.size(), kTypes.size());
  for (const auto& [type, r] : results) {
    EXPECT_LT(r.last_loss, r.first_loss) << type;
    EXPECT_GT(r.test.auc, 0.62) << type;
  }
  const double lr_auc = results["lr"].test.auc;
  for (const std::string type :
       {"fm", "deepfm", "dcn_v2", "dlrm", "wide_deep", "mlp"}) {
    EXPECT_GT(results[type].test.auc, lr_auc + 0.05) << type << " vs lr";
  }
}

TEST(ZooTrainingTest, EveryModelLearnsWithDenseFeatures) {
  // With the 13 (standardized) dense features as well: every model lowers
  // its loss and beats chance clearly.
  std::map<std::string, TrainResult> results = TrainAll(/*with_dense=*/true);
  ASSERT_EQ(results.size(), kTypes.size());
  for (const auto& [type, r] : results) {
    EXPECT_LT(r.last_loss, r.first_loss) << type;
    EXPECT_GT(r.test.auc, 0.62) << type;
  }
}

}  // namespace
}  // namespace recflow::models
