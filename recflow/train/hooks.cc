#include "recflow/train/hooks.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/runtime/step_stats.h"

namespace recflow::train {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The step a hook counts: the global step when the graph has one, else the
// number of runs so far.
int64_t StepOf(int64_t global_step, int64_t runs) { return global_step >= 0 ? global_step : runs; }

absl::StatusOr<double> ScalarValue(const Tensor& t, const std::string& name) {
  if (t.NumElements() != 1) {
    return errors::InvalidArgument(name, " must be a scalar, got shape ", t.shape().DebugString());
  }
  switch (t.dtype()) {
    case DT_FLOAT: return double{t.data<float>()[0]};
    case DT_DOUBLE: return t.data<double>()[0];
    case DT_INT32: return double(t.data<int32_t>()[0]);
    case DT_INT64: return double(t.data<int64_t>()[0]);
    default:
      return errors::InvalidArgument(name, " has dtype ", DataTypeString(t.dtype()),
                                     "; expected a float or integer scalar");
  }
}

std::string FormatDuration(double secs) {
  if (!(secs >= 0) || secs > 1e8) return "?";
  const int64_t s = static_cast<int64_t>(secs + 0.5);
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s / 60) % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

}  // namespace

// --- StopAtStepHook -----------------------------------------------------------

absl::Status StopAtStepHook::AfterCreateSession(Session*, int64_t global_step) {
  start_step_ = StepOf(global_step, 0);
  if (num_steps_ >= 0) last_step_ = start_step_ + num_steps_;
  return absl::OkStatus();
}

absl::Status StopAtStepHook::AfterRun(SessionRunContext* context, const RunValues&) {
  ++runs_;
  if (StepOf(context->global_step(), runs_) >= last_step_) context->RequestStop();
  return absl::OkStatus();
}

// --- CheckpointSaverHook ------------------------------------------------------

namespace {

class SaverCheckpointer : public Checkpointer {
 public:
  explicit SaverCheckpointer(checkpoint::Saver* saver) : saver_(saver) {}
  absl::StatusOr<std::string> Save(int64_t step) override { return saver_->Save(step); }
  std::vector<std::string> checkpoints() const override { return saver_->checkpoints(); }

 private:
  checkpoint::Saver* saver_;
};

}  // namespace

CheckpointSaverHook::CheckpointSaverHook(checkpoint::Saver* saver, int64_t every_steps,
                                         double every_secs)
    : owned_(std::make_unique<SaverCheckpointer>(saver)),
      checkpointer_(owned_.get()),
      options_{.every_steps = every_steps, .every_secs = every_secs} {}

CheckpointSaverHook::CheckpointSaverHook(Checkpointer* checkpointer,
                                         CheckpointSaverOptions options)
    : checkpointer_(checkpointer), options_(std::move(options)) {}

CheckpointSaverHook::~CheckpointSaverHook() = default;

absl::Status CheckpointSaverHook::AfterCreateSession(Session*, int64_t global_step) {
  period_start_step_ = StepOf(global_step, 0);
  last_saved_step_ = checkpointer_->saved_step().value_or(period_start_step_);
  period_start_step_ = std::max(period_start_step_, last_saved_step_);
  last_save_time_ = Clock::now();
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::Save(int64_t step, bool after_failure) {
  RETURN_IF_ERROR(after_failure ? checkpointer_->SaveAfterFailure(step).status()
                                : checkpointer_->Save(step).status());
  last_saved_step_ = period_start_step_ = step;
  last_save_time_ = Clock::now();
  ++saves_;
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::AfterRun(SessionRunContext* context, const RunValues&) {
  ++runs_;
  const int64_t step = StepOf(context->global_step(), runs_);
  if (step == last_saved_step_) return absl::OkStatus();
  const bool by_steps =
      options_.every_steps > 0 && step - period_start_step_ >= options_.every_steps;
  const bool by_time =
      options_.every_secs > 0 && SecondsSince(last_save_time_) >= options_.every_secs;
  if (!by_steps && !by_time) return absl::OkStatus();
  absl::Status s = Save(step);
  if (s.ok() || !options_.on_failed_periodic_save) return s;
  options_.on_failed_periodic_save(step, s);
  // The next period tries again; the final save still happens.
  period_start_step_ = step;
  last_save_time_ = Clock::now();
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::End(Session*, int64_t global_step) {
  const int64_t step = StepOf(global_step, runs_);
  if (step != last_saved_step_) return Save(step);
  return absl::OkStatus();
}

absl::Status CheckpointSaverHook::EndAfterFailure(Session*, int64_t global_step) {
  const int64_t step = StepOf(global_step, runs_);
  if (step != last_saved_step_) return Save(step, /*after_failure=*/true);
  return absl::OkStatus();
}

bool CheckpointSaverHook::HasUnsavedState(int64_t global_step) const {
  return StepOf(global_step, runs_) != last_saved_step_;
}

// --- NanLossHook ---------------------------------------------------------------

absl::Status NanLossHook::BeforeRun(SessionRunContext*, RunArgs* args) {
  args->fetches.push_back(loss_tensor_);
  return absl::OkStatus();
}

absl::Status NanLossHook::AfterRun(SessionRunContext* context, const RunValues& values) {
  ASSIGN_OR_RETURN(double loss, ScalarValue(values.results[0], loss_tensor_));
  if (std::isfinite(loss)) return absl::OkStatus();
  const std::string msg = absl::StrCat(std::isnan(loss) ? "NaN" : "infinite", " loss at step ",
                                       context->global_step(), ": ", loss_tensor_, " = ", loss);
  context->RequestStopKeepingLastCheckpoint();
  if (fail_on_nan_) return errors::InvalidArgument(msg);
  std::fprintf(stderr, "%s; stopping\n", msg.c_str());
  return absl::OkStatus();
}

// --- ProgressHook --------------------------------------------------------------

ProgressHook::ProgressHook(ProgressOptions options) : options_(std::move(options)) {
  switch (options_.mode) {
    case ProgressOptions::Mode::kTerminal: terminal_ = true; break;
    case ProgressOptions::Mode::kLog: terminal_ = false; break;
    case ProgressOptions::Mode::kAuto: terminal_ = isatty(fileno(options_.out)) != 0; break;
  }
}

std::string ProgressHook::FormatLine(int64_t step, int64_t total_steps, double examples_per_sec,
                                     bool have_loss, double loss, double eta_secs, bool bar) {
  std::string line = total_steps > 0 ? absl::StrFormat("step %d/%d", step, total_steps)
                                     : absl::StrFormat("step %d", step);
  if (total_steps > 0) {
    const double frac = std::clamp(static_cast<double>(step) / total_steps, 0.0, 1.0);
    absl::StrAppendFormat(&line, " %3d%%", static_cast<int>(frac * 100));
    if (bar) {
      constexpr int kWidth = 24;
      const int filled = static_cast<int>(frac * kWidth);
      absl::StrAppend(&line, " [", std::string(filled, '='), std::string(kWidth - filled, ' '),
                      "]");
    }
  }
  if (examples_per_sec > 0) absl::StrAppendFormat(&line, "  %.0f ex/s", examples_per_sec);
  if (have_loss) absl::StrAppendFormat(&line, "  loss %.5g", loss);
  if (total_steps > 0 && eta_secs >= 0) absl::StrAppend(&line, "  ETA ", FormatDuration(eta_secs));
  return line;
}

absl::Status ProgressHook::AfterCreateSession(Session*, int64_t global_step) {
  start_ = last_print_ = Clock::now();
  start_step_ = last_step_ = last_print_step_ = StepOf(global_step, 0);
  return absl::OkStatus();
}

absl::Status ProgressHook::BeforeRun(SessionRunContext*, RunArgs* args) {
  if (!options_.loss_tensor.empty()) args->fetches.push_back(options_.loss_tensor);
  if (!options_.examples_tensor.empty()) args->fetches.push_back(options_.examples_tensor);
  return absl::OkStatus();
}

absl::Status ProgressHook::AfterRun(SessionRunContext* context, const RunValues& values) {
  ++runs_;
  last_step_ = StepOf(context->global_step(), start_step_ + runs_);
  size_t at = 0;
  if (!options_.loss_tensor.empty()) {
    ASSIGN_OR_RETURN(loss_, ScalarValue(values.results[at++], options_.loss_tensor));
    have_loss_ = true;
  }
  if (!options_.examples_tensor.empty()) {
    ASSIGN_OR_RETURN(double n, ScalarValue(values.results[at++], options_.examples_tensor));
    examples_ += static_cast<int64_t>(n);
  }
  if (SecondsSince(last_print_) >= options_.every_secs) Print(last_step_, false);
  return absl::OkStatus();
}

void ProgressHook::Print(int64_t step, bool final) {
  const double period = SecondsSince(last_print_);
  if (period > 0 && !options_.examples_tensor.empty()) {
    if (examples_ > last_print_examples_) rate_ = (examples_ - last_print_examples_) / period;
  } else if (period > 0 && step > last_print_step_) {
    rate_ = (step - last_print_step_) * static_cast<double>(options_.batch_size) / period;
  }
  const double elapsed = SecondsSince(start_);
  double eta = -1;
  if (options_.total_steps > 0 && step > start_step_) {
    eta = elapsed / (step - start_step_) * std::max<int64_t>(0, options_.total_steps - step);
  }
  const bool show_rate = options_.batch_size > 0 || !options_.examples_tensor.empty();
  std::string line =
      FormatLine(step, options_.total_steps, show_rate ? rate_ : 0, have_loss_, loss_, eta, terminal_);
  if (options_.note) {
    if (std::string note = options_.note(); !note.empty()) absl::StrAppend(&line, "  (", note, ")");
  }
  if (terminal_) {
    std::fprintf(options_.out, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
  }
  std::fflush(options_.out);
  last_print_ = Clock::now();
  last_print_step_ = step;
  last_print_examples_ = examples_;
}

absl::Status ProgressHook::End(Session*, int64_t global_step) {
  if (runs_ > 0) Print(StepOf(global_step, last_step_), true);
  return absl::OkStatus();
}

// --- SummarySaverHook ----------------------------------------------------------

SummarySaverHook::SummarySaverHook(SummaryWriter* writer, SummaryOptions options)
    : writer_(writer), options_(std::move(options)) {
  for (const auto& [tag, tensor] : options_.scalars) scalars_.emplace_back(tag, tensor);
}

absl::Status SummarySaverHook::AfterCreateSession(Session*, int64_t global_step) {
  last_step_ = StepOf(global_step, 0);
  last_time_ = Clock::now();
  return absl::OkStatus();
}

absl::Status SummarySaverHook::BeforeRun(SessionRunContext* context, RunArgs* args) {
  // Fetch the scalars only on steps that write: those reaching the next
  // multiple of every_steps. The step about to run is the current one + 1
  // (or more, when other workers step too: then the write comes a step
  // late, never skipped).
  const int64_t next = StepOf(context->global_step(), runs_) + 1;
  fetching_ =
      options_.every_steps > 0 && next / options_.every_steps > last_step_ / options_.every_steps;
  if (fetching_) {
    for (const auto& [tag, tensor] : scalars_) args->fetches.push_back(tensor);
  }
  return absl::OkStatus();
}

absl::Status SummarySaverHook::AfterRun(SessionRunContext* context, const RunValues& values) {
  ++runs_;
  if (!fetching_) return absl::OkStatus();
  const int64_t step = StepOf(context->global_step(), runs_);
  for (size_t i = 0; i < scalars_.size(); ++i) {
    ASSIGN_OR_RETURN(double v, ScalarValue(values.results[i], scalars_[i].second));
    RETURN_IF_ERROR(writer_->AddScalar(scalars_[i].first, step, v));
  }
  const double secs = SecondsSince(last_time_);
  if (secs > 0 && step > last_step_) {
    const double steps_per_sec = (step - last_step_) / secs;
    RETURN_IF_ERROR(writer_->AddScalar("global_step/sec", step, steps_per_sec));
    if (options_.batch_size > 0) {
      RETURN_IF_ERROR(
          writer_->AddScalar("examples_per_sec", step, steps_per_sec * options_.batch_size));
    }
  }
  last_step_ = step;
  last_time_ = Clock::now();
  return absl::OkStatus();
}

absl::Status SummarySaverHook::End(Session*, int64_t) { return writer_->Flush(); }

// --- ProfilerHook --------------------------------------------------------------

absl::Status ProfilerHook::AfterCreateSession(Session*, int64_t global_step) {
  runs_ = StepOf(global_step, 0);
  return absl::OkStatus();
}

absl::Status ProfilerHook::BeforeRun(SessionRunContext* context, RunArgs* args) {
  const int64_t next = StepOf(context->global_step(), runs_) + 1;
  tracing_ = !written_ && next >= at_step_;
  args->trace = tracing_;
  return absl::OkStatus();
}

absl::Status ProfilerHook::AfterRun(SessionRunContext* context, const RunValues& values) {
  ++runs_;
  if (!tracing_ || values.metadata == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(WriteStringToFileAtomically(Env::Default(), path_,
                                              StepStatsToChromeTrace(values.metadata->step_stats)));
  written_ = true;
  tracing_ = false;
  return absl::OkStatus();
}

// --- EvaluationHook -----------------------------------------------------------

absl::Status EvaluationHook::AfterCreateSession(Session*, int64_t global_step) {
  runs_ = StepOf(global_step, 0);
  next_eval_step_ = every_steps_ > 0 ? (runs_ / every_steps_ + 1) * every_steps_ : -1;
  return absl::OkStatus();
}

absl::Status EvaluationHook::AfterRun(SessionRunContext* context, const RunValues&) {
  ++runs_;
  const int64_t step = StepOf(context->global_step(), runs_);
  if (next_eval_step_ < 0 || step < next_eval_step_) return absl::OkStatus();
  RETURN_IF_ERROR(eval_(context->session(), step));
  last_eval_step_ = step;
  next_eval_step_ = (step / every_steps_ + 1) * every_steps_;
  return absl::OkStatus();
}

absl::Status EvaluationHook::End(Session* session, int64_t global_step) {
  const int64_t step = StepOf(global_step, runs_);
  if (!at_end_ || step == last_eval_step_) return absl::OkStatus();
  last_eval_step_ = step;
  return eval_(session, step);
}

}  // namespace recflow::train
