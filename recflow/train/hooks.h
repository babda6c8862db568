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
#include <memory>
#include <optional>
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

// Where a CheckpointSaverHook saves: a checkpoint::Saver (the hook's
// constructor taking one adapts it), or a cluster's checkpointer
// (distributed/worker_session.h).
class Checkpointer {
 public:
  virtual ~Checkpointer() = default;
  // Saves the state at `step`; returns the checkpoint's prefix.
  virtual absl::StatusOr<std::string> Save(int64_t step) = 0;
  // The save after a failed step or hook (Note [Saving after a failure]).
  // Default: Save.
  virtual absl::StatusOr<std::string> SaveAfterFailure(int64_t step) { return Save(step); }
  // The retained checkpoints' prefixes, oldest first.
  virtual std::vector<std::string> checkpoints() const = 0;
  // The step of the newest checkpoint when it may lag the session's first
  // global step (a cluster's chief restarted while workers trained on; -1:
  // no checkpoint); nullopt: it is that step, or there is none.
  virtual std::optional<int64_t> saved_step() const { return std::nullopt; }
};

struct CheckpointSaverOptions {
  // Save every N steps and/or S seconds (<= 0: not by that rule).
  int64_t every_steps = 0;
  double every_secs = 0;
  // A periodic save that fails stops training with its error, unless this
  // is set: then it is told here and training goes on (the next period
  // tries again). The final save's failure is always an error.
  std::function<void(int64_t step, const absl::Status& error)> on_failed_periodic_save;
};

class CheckpointSaverHook : public SessionRunHook {
 public:
  // `saver` is not owned and must outlive the hook. every_steps / every_secs
  // <= 0 disable that rule; the final step is always saved at End.
  CheckpointSaverHook(checkpoint::Saver* saver, int64_t every_steps, double every_secs);
  // `checkpointer` is not owned and must outlive the hook.
  CheckpointSaverHook(Checkpointer* checkpointer, CheckpointSaverOptions options);
  ~CheckpointSaverHook() override;
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  // Saves the final step unless a checkpoint of it exists.
  absl::Status End(Session* session, int64_t global_step) override;
  bool SavesState() const override { return true; }
  absl::Status EndAfterFailure(Session* session, int64_t global_step) override;
  bool HasUnsavedState(int64_t global_step) const override;
  int64_t saves() const { return saves_; }

 private:
  absl::Status Save(int64_t step, bool after_failure = false);
  std::unique_ptr<Checkpointer> owned_;  // adapts a Saver
  Checkpointer* checkpointer_;
  CheckpointSaverOptions options_;
  int64_t last_saved_step_ = -1;  // the newest checkpoint's step
  int64_t period_start_step_ = 0;  // the periodic rule counts from here
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
  // An int64 scalar tensor counting the step's examples ("batch_examples:0"),
  // fetched with every step: examples/s counts those (a short last batch, a
  // worker's own steps while the global step counts the whole cluster's)
  // instead of steps x batch_size. Shown when set, whatever batch_size.
  std::string examples_tensor;
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
  int64_t examples_ = 0, last_print_examples_ = 0;  // counted by examples_tensor
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
  int64_t runs_ = 0, last_step_ = -1;  // the step last written (or the first)
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
