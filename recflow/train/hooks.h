// The standard SessionRunHooks of a training loop (monitored_session.h).
//
//   StopAtStepHook       stop after N more steps, or at a global step
//   CheckpointSaverHook  save every N steps and/or S seconds, and at the end
//   NanLossHook          stop with an error naming the step when the loss
//                        is NaN or infinite
//   ProgressHook         a progress line: step, examples/s, loss, ETA (a bar
//                        on a terminal; plain log lines otherwise)
//   SummarySaverHook     TensorBoard scalars (loss, any scalar tensor,
//                        examples/s) every N steps
//   ProfilerHook         one step's per-kernel trace as Chrome trace JSON
//   EvaluationHook       calls an evaluation function every N steps
//
// Hooks that count steps use the global step when the graph has one, and
// the number of Run calls otherwise.
#ifndef RECFLOW_TRAIN_HOOKS_H_
#define RECFLOW_TRAIN_HOOKS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "recflow/checkpoint/saver.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/summary_writer.h"

namespace recflow::train {

class StopAtStepHook : public SessionRunHook {
 public:
  // Stop when the global step reaches `last_step`.
  static StopAtStepHook LastStep(int64_t last_step) { return StopAtStepHook(-1, last_step); }
  // Stop after `num_steps` more steps from where the session starts (a
  // restored run continues for num_steps).
  static StopAtStepHook NumSteps(int64_t num_steps) { return StopAtStepHook(num_steps, -1); }

  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  // A session that starts at or past the last step runs no step (a run
  // resumed from its final checkpoint does nothing, as tf.estimator's
  // train(max_steps) skips training then).
  bool StopBeforeFirstStep() const override { return start_step_ >= last_step_; }
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  int64_t last_step() const { return last_step_; }

 private:
  StopAtStepHook(int64_t num_steps, int64_t last_step)
      : num_steps_(num_steps), last_step_(last_step) {}
  int64_t num_steps_;
  int64_t last_step_;
  int64_t start_step_ = 0;
  int64_t runs_ = 0;
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  // `saver` is not owned and must outlive the hook. every_steps / every_secs
  // <= 0 disable that rule; the final step is always saved at End.
  CheckpointSaverHook(checkpoint::Saver* saver, int64_t every_steps, double every_secs);
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  absl::Status End(Session* session, int64_t global_step) override;
  int64_t saves() const { return saves_; }

 private:
  absl::Status Save(int64_t step);
  checkpoint::Saver* saver_;
  int64_t every_steps_;
  double every_secs_;
  int64_t last_saved_step_ = -1;
  int64_t runs_ = 0;
  std::chrono::steady_clock::time_point last_save_time_;
  int64_t saves_ = 0;
};

class NanLossHook : public SessionRunHook {
 public:
  // `loss_tensor`: "loss:0". With fail_on_nan, the step returns
  // InvalidArgument("NaN loss at step N: loss = nan"); otherwise it only
  // requests a stop (and logs the same line to stderr). Either way the
  // state after that step is never saved: the last good checkpoint stays
  // the newest (SessionRunContext::RequestStopKeepingLastCheckpoint).
  explicit NanLossHook(std::string loss_tensor, bool fail_on_nan = true)
      : loss_tensor_(std::move(loss_tensor)), fail_on_nan_(fail_on_nan) {}
  absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;

 private:
  std::string loss_tensor_;
  bool fail_on_nan_;
};

struct ProgressOptions {
  int64_t batch_size = 0;        // examples per step (0: examples/s not shown)
  int64_t total_steps = 0;       // the last global step, when known (bar, ETA)
  std::string loss_tensor;       // shown when set
  double every_secs = 1.0;       // refresh period
  std::FILE* out = stderr;       // where the line goes
  // Appended to every line when it returns a non-empty string (say, "3
  // empty batches skipped"). Called from the training thread.
  std::function<std::string()> note;
  // Terminal mode (one line rewritten in place, with a bar) or log mode
  // (one line per period). Default: terminal when `out` is a TTY.
  enum class Mode { kAuto, kTerminal, kLog } mode = Mode::kAuto;
};

class ProgressHook : public SessionRunHook {
 public:
  explicit ProgressHook(ProgressOptions options);
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  absl::Status End(Session* session, int64_t global_step) override;

  // The text of the line for these numbers (exposed for tests).
  static std::string FormatLine(int64_t step, int64_t total_steps, double examples_per_sec,
                                bool have_loss, double loss, double eta_secs, bool bar);

 private:
  void Print(int64_t step, bool final);
  ProgressOptions options_;
  bool terminal_ = false;
  std::chrono::steady_clock::time_point start_, last_print_;
  int64_t start_step_ = 0, last_step_ = 0, last_print_step_ = 0, runs_ = 0;
  double loss_ = 0;
  bool have_loss_ = false;
  double rate_ = 0;  // examples/s over the last period
};

struct SummaryOptions {
  int64_t every_steps = 100;
  // tag -> scalar tensor name ("loss" -> "loss:0", "learning_rate" ->
  // "lr:0"); values are written as float scalars.
  std::map<std::string, std::string> scalars;
  // Adds "examples_per_sec" (and "global_step/sec") when batch_size > 0.
  int64_t batch_size = 0;
};

class SummarySaverHook : public SessionRunHook {
 public:
  // `writer` is not owned and must outlive the hook.
  SummarySaverHook(SummaryWriter* writer, SummaryOptions options);
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  absl::Status End(Session* session, int64_t global_step) override;

 private:
  SummaryWriter* writer_;
  SummaryOptions options_;
  std::vector<std::pair<std::string, std::string>> scalars_;
  bool fetching_ = false;
  int64_t runs_ = 0, last_step_ = -1;
  std::chrono::steady_clock::time_point last_time_;
};

class ProfilerHook : public SessionRunHook {
 public:
  // Traces the step that takes the global step (or run count) to
  // `at_step` and writes it to `path` as Chrome trace-event JSON.
  ProfilerHook(int64_t at_step, std::string path) : at_step_(at_step), path_(std::move(path)) {}
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  bool written() const { return written_; }

 private:
  int64_t at_step_;
  std::string path_;
  int64_t runs_ = 0;
  bool tracing_ = false, written_ = false;
};

class EvaluationHook : public SessionRunHook {
 public:
  // Calls eval(session, step) after every `every_steps` steps and at End
  // (unless the last step was just evaluated). An error stops training.
  using EvalFn = std::function<absl::Status(Session*, int64_t step)>;
  EvaluationHook(int64_t every_steps, EvalFn eval, bool at_end = true)
      : every_steps_(every_steps), eval_(std::move(eval)), at_end_(at_end) {}
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  absl::Status End(Session* session, int64_t global_step) override;

 private:
  int64_t every_steps_;
  EvalFn eval_;
  bool at_end_;
  int64_t runs_ = 0, last_eval_step_ = -1, next_eval_step_ = 0;
};

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_HOOKS_H_
