// A recflow-trained DeepFM, exported and served by ServerCore (with and
// without batching): predictions equal the training session's on the same
// batch. Unbatched, bit for bit. Batched, a request's rows are multiplied
// inside a bigger matrix: BLAS kernels may sum a row's products in another
// order for another row count (OpenBLAS's Haswell kernels on an AVX-512 CPU
// do), so the match is to a few float roundings.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "recflow/cli/testing/zoo_util.h"
#include "recflow/core/env.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"
#include "recflow/train/saved_model_export.h"

namespace recflow::serving {
namespace {

using models::testing::Examples;
using models::testing::FeedsFor;
using models::testing::Harness;

models::ModelConfig DeepFmConfig() {
  models::ModelConfig c;
  c.type = "deepfm";
  c.dense_features = {"I1", "I2"};
  c.sparse_features = {{.name = "C1", .vocabulary_size = 50},
                       {.name = "C2", .vocabulary_size = 40}};
  c.embedding_dim = 4;
  c.hidden_units = {8, 4};
  c.seed = 3;
  return c;
}

Examples RandomExamples(int64_t n, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Examples ex;
  ex.sparse.resize(2);
  for (int64_t i = 0; i < n; ++i) {
    const float x1 = u(rng), x2 = u(rng);
    const int64_t a = rng() % 50, b = rng() % 40;
    ex.labels.push_back((x1 + (a % 3) * 0.5f) > 0.3f ? 1.f : 0.f);
    ex.dense.push_back({x1, x2});
    ex.sparse[0].push_back({a});
    std::vector<int64_t> bag;
    for (uint64_t k = 0; k < rng() % 3; ++k) bag.push_back(b + k);
    ex.sparse[1].push_back(bag);
  }
  return ex;
}

class ZooServingTest : public ::testing::TestWithParam<bool> {};

TEST_P(ZooServingTest, ServedDeepFmMatchesTheTrainingSession) {
  const models::ModelConfig c = DeepFmConfig();
  Harness h;
  ASSERT_TRUE(h.Build(c).ok()) << h.root.status();
  const Examples train = RandomExamples(512, 1);
  for (int step = 0; step < 8; ++step) {
    auto out = h.Run(FeedsFor(c, train.ToBatch(step * 64, 64, 2)), {"loss:0"},
                     {"train"});
    ASSERT_TRUE(out.ok()) << out.status();
  }
  const std::string base =
      testutil::FreshDir(GetParam() ? "zoo_batched" : "zoo");
  ASSERT_TRUE(train::ExportSavedModel(
                  h.session.get(),
                  models::ServingSignatures(c, h.inputs, h.model), base + "/1")
                  .ok());

  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("deepfm", base);
  options.file_system_poll_wait_seconds = 0;
  options.enable_batching = GetParam();
  options.batching_parameters.mutable_batch_timeout_micros()->set_value(1000);
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();

  // Several callers at once, one user with 1..40 candidates each.
  const Examples test = RandomExamples(200, 2);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 5; ++r) {
        const int64_t begin = (t * 5 + r) * 7 % 150;
        const int64_t n = 1 + (t * 13 + r * 7) % 40;
        const data::Batch batch = test.ToBatch(begin, n, 2);
        PredictRequest request;
        request.model_spec.name = "deepfm";
        request.inputs["dense"] = batch.dense;
        for (size_t f = 0; f < c.sparse_features.size(); ++f) {
          request.inputs[c.sparse_features[f].name + "/ids"] = batch.sparse[f].ids;
          request.inputs[c.sparse_features[f].name + "/row_splits"] =
              batch.sparse[f].row_splits;
        }
        request.output_filter = {"probabilities"};
        PredictResponse response;
        absl::Status s = (*core)->Predict(request, &response);
        auto want = h.Run(FeedsFor(c, batch), {"probabilities:0"});
        bool same = s.ok() && want.ok();
        float worst = 0;
        if (same && !GetParam()) {
          same = TensorsEqual(response.outputs.at("probabilities"), (*want)[0]);
        } else if (same) {
          const Tensor& got = response.outputs.at("probabilities");
          same = got.shape() == (*want)[0].shape() && got.dtype() == DT_FLOAT;
          for (int64_t i = 0; same && i < got.NumElements(); ++i) {
            worst = std::max(worst, std::abs(got.data<float>()[i] - (*want)[0].data<float>()[i]));
          }
          same = same && worst <= 1e-6f;  // probabilities: a few ulps of values < 1
        }
        if (!same) {
          ADD_FAILURE() << s << " caller " << t << " request " << r << " largest difference "
                        << worst;
          ++bad;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Batching, ZooServingTest, ::testing::Bool());

}  // namespace
}  // namespace recflow::serving
