// Test helpers for the zoo's model tests (din_test.cc, two_tower_test.cc,
// and any test that trains a zoo model on hand-made examples): a model on
// placeholders with a single-threaded session, feeds for a batch, batches
// built from per-example id lists, and a train-then-evaluate loop.
// Not thread-safe. Test-only. It lives in cli/ (the layer that may include
// every other) because it spans models/ and runtime/.
#ifndef RECFLOW_CLI_TESTING_ZOO_UTIL_H_
#define RECFLOW_CLI_TESTING_ZOO_UTIL_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/data/batch.h"
#include "recflow/framework/scope.h"
#include "recflow/models/model.h"
#include "recflow/runtime/session.h"
#include "recflow/train/metrics.h"
#include "recflow/train/variables.h"

namespace recflow::models::testing {

using Feeds = std::vector<std::pair<std::string, Tensor>>;

// The placeholders' feeds for `batch` (features of `c`, in order).
inline Feeds FeedsFor(const ModelConfig& c, const data::Batch& batch) {
  Feeds feeds = {{"labels", batch.labels}, {"dense", batch.dense}};
  for (size_t f = 0; f < c.sparse_features.size(); ++f) {
    feeds.emplace_back(absl::StrCat(c.sparse_features[f].name, "/ids"),
                       batch.sparse[f].ids);
    feeds.emplace_back(absl::StrCat(c.sparse_features[f].name, "/row_splits"),
                       batch.sparse[f].row_splits);
  }
  return feeds;
}

// Examples as lists: labels, dense rows (may be empty: [B, 0]) and per
// sparse feature the ids of each example.
struct Examples {
  std::vector<float> labels;
  std::vector<std::vector<float>> dense;
  std::vector<std::vector<std::vector<int64_t>>> sparse;  // [feature][example]
  std::vector<double> truth;  // the true click probabilities, if known

  // The AUC of `truth` (the oracle's).
  double OracleAuc() const {
    train::BinaryMetrics m;
    std::vector<float> p(truth.begin(), truth.end());
    if (!m.Add(p, labels).ok()) return 0;
    return m.Result().auc;
  }

  // Rows [begin, begin + n) as a batch.
  data::Batch ToBatch(int64_t begin, int64_t n, int64_t num_dense) const {
    data::Batch b;
    b.batch_size = n;
    b.labels = Tensor::FromVector<float>(
        absl::MakeConstSpan(labels.data() + begin, static_cast<size_t>(n)));
    std::vector<float> d;
    for (int64_t i = begin; i < begin + n && num_dense > 0; ++i) {
      d.insert(d.end(), dense[i].begin(), dense[i].end());
    }
    b.dense = Tensor::FromVector<float>(absl::MakeConstSpan(d),
                                        TensorShape({n, num_dense}));
    for (const auto& feature : sparse) {
      std::vector<int64_t> ids, splits = {0};
      for (int64_t i = begin; i < begin + n; ++i) {
        ids.insert(ids.end(), feature[i].begin(), feature[i].end());
        splits.push_back(static_cast<int64_t>(ids.size()));
      }
      data::SparseBatch& s = b.sparse.emplace_back();
      s.ids = Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids));
      s.row_splits = Tensor::FromVector<int64_t>(absl::MakeConstSpan(splits));
    }
    return b;
  }
};

// A model on placeholders under the root scope, with an initialized
// single-threaded session (deterministic).
struct Harness {
  Scope root = Scope::NewRootScope();
  ModelInputs inputs;
  Model model;
  std::unique_ptr<Session> session;

  absl::Status Build(const ModelConfig& c, const BuildOptions& options = {}) {
    RETURN_IF_ERROR(BuildGraph(c, options));
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
    return StartSession(def);
  }
  // The model and "init", without a session.
  absl::Status BuildGraph(const ModelConfig& c, const BuildOptions& options = {}) {
    inputs = Placeholders(root, c);
    ASSIGN_OR_RETURN(model, BuildModel(root, c, inputs, options));
    train::GlobalVariablesInitializer(root);
    return root.status();
  }
  // A single-threaded session over `def`, with "init" run.
  absl::Status StartSession(const tensorflow::GraphDef& def) {
    SessionOptions so;
    so.inter_op_threads = 1;
    so.intra_op_threads = 1;
    ASSIGN_OR_RETURN(session, Session::Create(so, def));
    std::vector<Tensor> out;
    return session->Run({}, {}, {"init"}, &out);
  }
  absl::StatusOr<std::vector<Tensor>> Run(
      const Feeds& feeds, const std::vector<std::string>& fetches,
      const std::vector<std::string>& targets = {}) {
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run(feeds, fetches, targets, &out));
    return out;
  }
};

// The CTR models of the zoo: any features, logits [B]. din (a behaviour
// sequence) and two_tower (user and item towers) need more of the config.
inline const std::vector<std::string>& CtrModelTypes() {
  static const auto* types = new std::vector<std::string>{
      "lr", "fm", "mlp", "wide_deep", "deepfm", "dcn_v2", "dlrm"};
  return *types;
}

struct TrainResult {
  double first_loss = 0;  // mean over the first epoch's batches
  double last_loss = 0;   // mean over the last epoch's batches
  train::BinaryMetricsResult test;
  double examples_per_second = 0;
  std::vector<float> test_probabilities;  // of the test examples, in order
};

// Runs "train" over `batches` in order for `epochs` passes (each batch
// holds `batch_size` examples), then evaluates probabilities:0 on `test`.
inline absl::StatusOr<TrainResult> TrainOnBatches(Harness& h, const ModelConfig& c,
                                                  const std::vector<Feeds>& batches,
                                                  int64_t batch_size, int epochs,
                                                  const data::Batch& test) {
  const int64_t steps = static_cast<int64_t>(batches.size());
  TrainResult r;
  const auto t0 = std::chrono::steady_clock::now();
  for (int e = 0; e < epochs; ++e) {
    double sum = 0;
    for (const Feeds& feeds : batches) {
      ASSIGN_OR_RETURN(std::vector<Tensor> out, h.Run(feeds, {"loss:0"}, {"train"}));
      sum += out[0].scalar<float>();
    }
    if (e == 0) r.first_loss = sum / steps;
    r.last_loss = sum / steps;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.examples_per_second = epochs * steps * batch_size / secs;
  ASSIGN_OR_RETURN(std::vector<Tensor> out, h.Run(FeedsFor(c, test), {"probabilities:0"}));
  auto p = out[0].flat<float>();
  r.test_probabilities.assign(p.begin(), p.end());
  train::BinaryMetrics metrics;
  RETURN_IF_ERROR(metrics.Add(p, test.labels.flat<float>()));
  r.test = metrics.Result();
  return r;
}

// Trains `epochs` passes over `train` in order (batches of `batch`), then
// evaluates probabilities:0 on `test`.
inline absl::StatusOr<TrainResult> TrainAndEvaluate(
    Harness& h, const ModelConfig& c, const Examples& train,
    const Examples& test, int64_t batch, int epochs) {
  const int64_t nd = static_cast<int64_t>(c.dense_features.size());
  const int64_t steps = static_cast<int64_t>(train.labels.size()) / batch;
  std::vector<Feeds> batches;
  for (int64_t s = 0; s < steps; ++s) {
    batches.push_back(FeedsFor(c, train.ToBatch(s * batch, batch, nd)));
  }
  const int64_t n = static_cast<int64_t>(test.labels.size());
  return TrainOnBatches(h, c, batches, batch, epochs, test.ToBatch(0, n, nd));
}

}  // namespace recflow::models::testing

#endif  // RECFLOW_CLI_TESTING_ZOO_UTIL_H_
