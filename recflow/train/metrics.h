// Evaluation metrics for click-through-rate models, accumulated over an
// evaluation set batch by batch (host-side, no graph ops):
//
//   train::BinaryMetrics m;
//   for each eval batch: m.Add(predictions, labels);      // probabilities
//   train::BinaryMetricsResult r = m.Result();             // auc, logloss ...
//
// AUC is exact: Result() sorts the (prediction, label, weight) triples it
// kept (16 bytes per example) and integrates the ROC curve with tied
// predictions counted half, as the Mann-Whitney statistic does; it is the
// value sklearn.metrics.roc_auc_score gives. GAUC is the impression-weighted
// mean of per-user AUCs over the users who have both a click and a non-click
// (users with one class have no AUC and are left out, as is usual; the count
// of users used is reported).
//
// Not thread-safe; use one accumulator per thread and Merge().

#ifndef RECFLOW_TRAIN_METRICS_H_
#define RECFLOW_TRAIN_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace recflow::train {

struct BinaryMetricsResult {
  int64_t count = 0;          // examples
  double weight = 0;          // sum of weights
  double auc = 0.5;           // 0.5 when only one class was seen
  double logloss = 0;         // mean, predictions clipped to [eps, 1 - eps]
  double mean_prediction = 0;
  double observed_ctr = 0;    // weighted mean label
  // mean_prediction / observed_ctr; 0 when no positive label was seen.
  double calibration = 0;
  double accuracy = 0;        // prediction > threshold vs label
  double gauc = 0;            // 0 when no user had both classes
  int64_t gauc_users = 0;     // users that entered GAUC
  std::string DebugString() const;  // "auc=0.7812 logloss=0.4521 ..."
};

class BinaryMetrics {
 public:
  // `threshold` for accuracy; `eps` clips predictions for logloss.
  explicit BinaryMetrics(double threshold = 0.5, double eps = 1e-7)
      : threshold_(threshold), eps_(eps) {}

  // predictions are probabilities in [0, 1]; labels 0 or 1 (any value > 0.5
  // counts as a click). `weights` may be empty (all 1); `user_ids` may be
  // empty (then no GAUC). InvalidArgument naming the sizes when they
  // differ, or naming the index of a NaN or out-of-range prediction.
  absl::Status Add(absl::Span<const float> predictions,
                   absl::Span<const float> labels,
                   absl::Span<const float> weights = {},
                   absl::Span<const int64_t> user_ids = {});

  void Merge(const BinaryMetrics& other);
  void Reset();
  int64_t count() const { return static_cast<int64_t>(examples_.size()); }

  BinaryMetricsResult Result() const;

 private:
  struct Example {
    float prediction;
    float label;
    float weight;
    int64_t user;
  };
  double threshold_;
  double eps_;
  bool has_users_ = false;
  std::vector<Example> examples_;
};

// Exact (tie-aware) AUC of a scored set; 0.5 if it lacks either class.
// Weighted when `weights` is not empty.
double ExactAuc(absl::Span<const float> predictions,
                absl::Span<const float> labels,
                absl::Span<const float> weights = {});

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_METRICS_H_
