#include "recflow/train/progressive_validation.h"

#include <vector>

#include "recflow/core/status.h"

namespace recflow::train {

absl::Status ValidationWindow::Add(absl::Span<const float> predictions,
                                   absl::Span<const float> labels) {
  if (predictions.size() != labels.size()) {
    return errors::InvalidArgument("progressive validation: ", predictions.size(),
                                   " predictions for ", labels.size(), " labels");
  }
  MutexLock lock(&mu_);
  for (size_t i = 0; i < predictions.size(); ++i) {
    examples_.emplace_back(predictions[i], labels[i]);
  }
  while (static_cast<int64_t>(examples_.size()) > size_) examples_.pop_front();
  return absl::OkStatus();
}

int64_t ValidationWindow::count() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(examples_.size());
}

std::optional<BinaryMetricsResult> ValidationWindow::Result() const {
  std::vector<float> p, l;
  {
    MutexLock lock(&mu_);
    if (examples_.empty()) return std::nullopt;
    p.reserve(examples_.size());
    l.reserve(examples_.size());
    for (const auto& [prediction, label] : examples_) {
      p.push_back(prediction);
      l.push_back(label);
    }
  }
  BinaryMetrics m;
  if (!m.Add(p, l).ok()) return std::nullopt;
  return m.Result();
}

absl::Status ProgressiveValidationHook::BeforeRun(SessionRunContext*, RunArgs* args) {
  args->fetches.push_back(predictions_);
  args->fetches.push_back(labels_);
  return absl::OkStatus();
}

absl::Status ProgressiveValidationHook::AfterRun(SessionRunContext*, const RunValues& values) {
  const Tensor& p = values.results[0];
  const Tensor& l = values.results[1];
  if (p.dtype() != DT_FLOAT || l.dtype() != DT_FLOAT) {
    return errors::InvalidArgument("progressive validation: ", predictions_, " and ", labels_,
                                   " must be float, got ", DataTypeString(p.dtype()), " and ",
                                   DataTypeString(l.dtype()));
  }
  auto pf = p.flat<float>();
  auto lf = l.flat<float>();
  return window_->Add(absl::MakeConstSpan(pf.data(), pf.size()),
                      absl::MakeConstSpan(lf.data(), lf.size()));
}

}  // namespace recflow::train
