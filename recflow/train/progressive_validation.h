// Hooks of an online training loop (docs/online_learning.md):
//
//   ProgressiveValidationHook  the AUC of the last N training examples, each
//                              scored by the model before it trained on them
//                              (the step's forward pass, fetched with the
//                              step: no extra computation)
//   StopRequestedHook          stops the loop when asked (a signal handler's
//                              flag): the session then closes as at the end
//                              of the data (final checkpoint, final update)
#ifndef RECFLOW_TRAIN_PROGRESSIVE_VALIDATION_H_
#define RECFLOW_TRAIN_PROGRESSIVE_VALIDATION_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "recflow/core/mutex.h"
#include "recflow/train/metrics.h"
#include "recflow/train/monitored_session.h"

namespace recflow::train {

// The window's examples and AUC. Thread-safe (the progress line reads it).
class ValidationWindow {
 public:
  explicit ValidationWindow(int64_t size) : size_(size) {}
  // Adds a batch's predictions and labels, dropping the oldest beyond the
  // window. InvalidArgument when the sizes differ.
  absl::Status Add(absl::Span<const float> predictions, absl::Span<const float> labels);
  int64_t count() const;
  // The window's metrics; nullopt while it is empty.
  std::optional<BinaryMetricsResult> Result() const;
  int64_t size() const { return size_; }

 private:
  const int64_t size_;
  mutable Mutex mu_;
  std::deque<std::pair<float, float>> examples_ ABSL_GUARDED_BY(mu_);
};

// Fetches `predictions` and `labels` (tensor names, float [B]) with every
// step into `window`.
class ProgressiveValidationHook : public SessionRunHook {
 public:
  ProgressiveValidationHook(std::string predictions, std::string labels,
                            std::shared_ptr<ValidationWindow> window)
      : predictions_(std::move(predictions)), labels_(std::move(labels)),
        window_(std::move(window)) {}
  absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;

 private:
  std::string predictions_, labels_;
  std::shared_ptr<ValidationWindow> window_;
};

class StopRequestedHook : public SessionRunHook {
 public:
  explicit StopRequestedHook(std::function<bool()> stop) : stop_(std::move(stop)) {}
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override {
    if (stop_()) context->RequestStop();
    return absl::OkStatus();
  }

 private:
  std::function<bool()> stop_;
};

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_PROGRESSIVE_VALIDATION_H_
