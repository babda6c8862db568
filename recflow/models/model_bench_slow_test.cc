// Training-step throughput of every zoo model at a Criteo-like size: 13
// dense + 26 sparse features (vocabulary 10000 each, dim 16), hidden units
// [256, 128], batch 4096, default optimizers (adagrad tables, adam dense),
// on the synthetic click logs' default config. Prints examples/s per model
// (in recflow_slow_tests, which `make test` skips).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recflow/data/synthetic.h"
#include "recflow/models/model.h"
#include "recflow/runtime/session.h"
#include "recflow/runtime/step_stats.h"
#include "recflow/train/variables.h"

namespace recflow::models {
namespace {

TEST(ModelBenchTest, TrainingStepThroughput) {
  constexpr int64_t kBatch = 4096;
  constexpr int kSteps = 10;
  data::SyntheticConfig dc;
  dc.calibration_rows = 20000;
  auto rows = data::GenerateRows(dc, data::SyntheticSplit::kTrain, 0, kBatch);
  ASSERT_TRUE(rows.ok()) << rows.status();
  const data::Batch batch = data::RowsToBatch(rows->data(), kBatch);

  for (const std::string& type : ModelTypes()) {
    ModelConfig c;
    c.type = type;
    for (int j = 0; j < data::kSyntheticNumDense; ++j) {
      c.dense_features.push_back(absl::StrCat("I", j + 1));
    }
    for (int f = 0; f < data::kSyntheticNumCategorical; ++f) {
      c.sparse_features.push_back(
          {.name = absl::StrCat("C", f + 1), .vocabulary_size = 10000});
    }
    c.embedding_dim = 16;
    if (type == "din") {
      // C26 stands in for a behaviour sequence of C1's items (one id each).
      c.sparse_features.back().sequence_of = "C1";
    }
    if (type == "two_tower") {
      c.user_features = c.dense_features;
      for (int f = 0; f < data::kSyntheticNumCategorical; ++f) {
        (f < 13 ? c.user_features : c.item_features)
            .push_back(absl::StrCat("C", f + 1));
      }
    }
    Scope root = Scope::NewRootScope();
    auto m = BuildModel(root, c, Placeholders(root, c));
    ASSERT_TRUE(m.ok()) << m.status();
    train::GlobalVariablesInitializer(root);
    auto def = root.ToGraphDef();
    ASSERT_TRUE(def.ok());
    SessionOptions so;
    so.inter_op_threads = 2;
    so.intra_op_threads = 2;
    auto session = Session::Create(so, *def);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<Tensor> out;
    ASSERT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
    std::vector<std::pair<std::string, Tensor>> feeds = {
        {"labels", batch.labels}, {"dense", batch.dense}};
    for (int f = 0; f < data::kSyntheticNumCategorical; ++f) {
      feeds.emplace_back(absl::StrCat("C", f + 1, "/ids"), batch.sparse[f].ids);
      feeds.emplace_back(absl::StrCat("C", f + 1, "/row_splits"),
                         batch.sparse[f].row_splits);
    }
    ASSERT_TRUE(
        (*session)->Run(feeds, {"loss:0"}, {"train"}, &out).ok());  // warm up
    const auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < kSteps; ++s) {
      ASSERT_TRUE((*session)->Run(feeds, {"loss:0"}, {"train"}, &out).ok());
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
    // One traced step: the ops that take the most kernel time.
    RunOptions ro;
    ro.trace = true;
    RunMetadata meta;
    ASSERT_TRUE(
        (*session)->Run(ro, feeds, {"loss:0"}, {"train"}, &out, &meta).ok());
    std::map<std::string, std::pair<int64_t, int>> by_op;
    for (const NodeExecStats& n : meta.step_stats.nodes) {
      auto& e = by_op[n.op];
      e.first += n.end_micros - n.start_micros;
      ++e.second;
    }
    std::vector<std::pair<int64_t, std::string>> top;
    for (const auto& [op, e] : by_op) {
      top.emplace_back(e.first, absl::StrCat(op, " x", e.second));
    }
    std::sort(top.rbegin(), top.rend());
    std::string line;
    for (size_t i = 0; i < top.size() && i < 6; ++i) {
      absl::StrAppend(&line, "  ", top[i].second, " ", top[i].first / 1000.0,
                      "ms");
    }
    std::printf("%-10s %zu kernels;%s\n", type.c_str(),
                meta.step_stats.nodes.size(), line.c_str());
    std::printf(
        "%-10s %9lld params  %8.1f ms/step  %9.0f examples/s  loss %.4f\n",
        type.c_str(), static_cast<long long>(m->num_parameters),
        1000 * secs / kSteps, kSteps * kBatch / secs, out[0].scalar<float>());
  }
}

}  // namespace
}  // namespace recflow::models
