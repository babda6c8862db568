#include "recflow/train/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "recflow/core/status.h"

namespace recflow::train {
namespace {

struct Scored {
  float prediction;
  float label;
  float weight;
};

// Tie-aware AUC of `items`, which it sorts. Returns false when a class is
// missing.
bool AucOfScored(std::vector<Scored>& items, double* auc) {
  std::sort(items.begin(), items.end(), [](const Scored& a, const Scored& b) {
    return a.prediction < b.prediction;
  });
  double neg_below = 0, area = 0, pos_total = 0, neg_total = 0;
  size_t i = 0;
  while (i < items.size()) {
    size_t j = i;
    double pos = 0, neg = 0;
    while (j < items.size() && items[j].prediction == items[i].prediction) {
      (items[j].label > 0.5f ? pos : neg) += items[j].weight;
      ++j;
    }
    area += pos * (neg_below + 0.5 * neg);
    neg_below += neg;
    pos_total += pos;
    neg_total += neg;
    i = j;
  }
  if (pos_total <= 0 || neg_total <= 0) return false;
  *auc = area / (pos_total * neg_total);
  return true;
}

}  // namespace

std::string BinaryMetricsResult::DebugString() const {
  return absl::StrFormat(
      "auc=%.6f gauc=%.6f (%d users) logloss=%.6f calibration=%.4f "
      "mean_prediction=%.6f ctr=%.6f accuracy=%.6f n=%d",
      auc, gauc, gauc_users, logloss, calibration, mean_prediction,
      observed_ctr, accuracy, count);
}

absl::Status BinaryMetrics::Add(absl::Span<const float> predictions,
                                absl::Span<const float> labels,
                                absl::Span<const float> weights,
                                absl::Span<const int64_t> user_ids) {
  if (labels.size() != predictions.size() ||
      (!weights.empty() && weights.size() != predictions.size()) ||
      (!user_ids.empty() && user_ids.size() != predictions.size())) {
    return errors::InvalidArgument(
        "metrics: ", predictions.size(), " predictions but ", labels.size(),
        " labels, ", weights.size(), " weights and ", user_ids.size(),
        " user ids (weights and user ids may be empty)");
  }
  if (!user_ids.empty()) has_users_ = true;
  for (size_t i = 0; i < predictions.size(); ++i) {
    const float p = predictions[i];
    if (!(p >= 0.0f && p <= 1.0f)) {
      return errors::InvalidArgument("metrics: prediction ", i, " of the batch is ",
                                     p, "; predictions must be probabilities in [0, 1]");
    }
  }
  examples_.reserve(examples_.size() + predictions.size());
  for (size_t i = 0; i < predictions.size(); ++i) {
    examples_.push_back({predictions[i], labels[i],
                         weights.empty() ? 1.0f : weights[i],
                         user_ids.empty() ? 0 : user_ids[i]});
  }
  return absl::OkStatus();
}

void BinaryMetrics::Merge(const BinaryMetrics& other) {
  has_users_ = has_users_ || other.has_users_;
  examples_.insert(examples_.end(), other.examples_.begin(),
                   other.examples_.end());
}

void BinaryMetrics::Reset() {
  examples_.clear();
  has_users_ = false;
}

BinaryMetricsResult BinaryMetrics::Result() const {
  BinaryMetricsResult r;
  r.count = count();
  if (examples_.empty()) return r;
  double w_sum = 0, loss = 0, pred = 0, pos = 0, correct = 0;
  std::vector<Scored> scored;
  scored.reserve(examples_.size());
  for (const Example& e : examples_) {
    const double p = std::clamp<double>(e.prediction, eps_, 1.0 - eps_);
    const bool click = e.label > 0.5f;
    w_sum += e.weight;
    loss -= e.weight * (click ? std::log(p) : std::log1p(-p));
    pred += e.weight * e.prediction;
    pos += e.weight * (click ? 1.0 : 0.0);
    correct += e.weight * ((e.prediction > threshold_) == click ? 1.0 : 0.0);
    scored.push_back({e.prediction, e.label, e.weight});
  }
  r.weight = w_sum;
  if (w_sum > 0) {
    r.logloss = loss / w_sum;
    r.mean_prediction = pred / w_sum;
    r.observed_ctr = pos / w_sum;
    r.accuracy = correct / w_sum;
  }
  r.calibration = r.observed_ctr > 0 ? r.mean_prediction / r.observed_ctr : 0;
  double auc = 0.5;
  r.auc = AucOfScored(scored, &auc) ? auc : 0.5;

  if (has_users_) {
    std::vector<Example> by_user = examples_;
    std::sort(by_user.begin(), by_user.end(),
              [](const Example& a, const Example& b) { return a.user < b.user; });
    double weighted = 0, impressions = 0;
    size_t i = 0;
    while (i < by_user.size()) {
      size_t j = i;
      std::vector<Scored> group;
      double w = 0;
      while (j < by_user.size() && by_user[j].user == by_user[i].user) {
        group.push_back({by_user[j].prediction, by_user[j].label, by_user[j].weight});
        w += by_user[j].weight;
        ++j;
      }
      double user_auc;
      if (AucOfScored(group, &user_auc)) {
        weighted += w * user_auc;
        impressions += w;
        ++r.gauc_users;
      }
      i = j;
    }
    r.gauc = impressions > 0 ? weighted / impressions : 0;
  }
  return r;
}

double ExactAuc(absl::Span<const float> predictions,
                absl::Span<const float> labels,
                absl::Span<const float> weights) {
  std::vector<Scored> scored;
  scored.reserve(predictions.size());
  for (size_t i = 0; i < predictions.size() && i < labels.size(); ++i) {
    scored.push_back({predictions[i], labels[i], weights.empty() ? 1.0f : weights[i]});
  }
  double auc = 0.5;
  return AucOfScored(scored, &auc) ? auc : 0.5;
}

}  // namespace recflow::train
