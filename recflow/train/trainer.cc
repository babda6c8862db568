#include "recflow/train/trainer.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/checkpoint/checkpoint_state.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/train/global_step.h"
#include "recflow/train/input_hooks.h"
#include "recflow/train/progressive_validation.h"
#include "recflow/train/update_publisher.h"

namespace recflow::train {
namespace {

constexpr char kExamples[] = "batch_examples:0";

void Log(std::FILE* log, const std::string& line) {
  if (log != nullptr) std::fprintf(log, "%s\n", line.c_str());
}

}  // namespace

std::vector<std::unique_ptr<SessionRunHook>> TrainingHooks(const TrainSpec& spec,
                                                           const TrainingHooksOptions& options) {
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  if (spec.last_step > 0) {
    hooks.push_back(
        std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(spec.last_step)));
  }
  hooks.push_back(std::make_unique<NanLossHook>("loss:0"));
  if (options.log != nullptr) {
    std::shared_ptr<data::BatchStats> batches = spec.batch_stats;
    std::function<std::string()> extra = options.progress_note;
    hooks.push_back(std::make_unique<ProgressHook>(ProgressOptions{
        .batch_size = spec.batch_size,
        .examples_tensor = kExamples,
        .total_steps = spec.last_step,
        .loss_tensor = "loss:0",
        .every_secs = spec.log_every_secs,
        .out = options.log,
        .note = [batches, extra] {
          std::string note = data::SkippedBatchesNote(batches.get());
          if (extra) {
            const std::string more = extra();
            if (!more.empty()) note = note.empty() ? more : absl::StrCat(note, "; ", more);
          }
          return note;
        }}));
  }
  SummaryWriter* writer = options.writer;
  if (writer != nullptr && spec.summary_every_steps > 0) {
    hooks.push_back(std::make_unique<SummarySaverHook>(
        writer, SummaryOptions{.every_steps = spec.summary_every_steps,
                               .scalars = {{"loss", "loss:0"}},
                               .batch_size = spec.batch_size}));
  }
  if (options.evaluate) {
    std::FILE* log = options.log;
    auto evaluate = options.evaluate;
    std::optional<BinaryMetricsResult>* last = options.last_eval;
    hooks.push_back(std::make_unique<EvaluationHook>(
        spec.eval_every_steps, [=](Session* s, int64_t step) -> absl::Status {
          double secs = 0;
          ASSIGN_OR_RETURN(BinaryMetricsResult r, evaluate(s, &secs));
          if (last != nullptr) *last = r;
          if (writer != nullptr) {
            RETURN_IF_ERROR(writer->AddScalar("eval/auc", step, r.auc));
            RETURN_IF_ERROR(writer->AddScalar("eval/logloss", step, r.logloss));
            RETURN_IF_ERROR(writer->AddScalar("eval/calibration", step, r.calibration));
          }
          if (log != nullptr) {
            std::fprintf(log,
                         "\neval at step %lld: AUC %.4f  logloss %.4f  calibration %.3f  "
                         "(%lld examples, %.1f s)\n",
                         static_cast<long long>(step), r.auc, r.logloss, r.calibration,
                         static_cast<long long>(r.count), secs);
          }
          return absl::OkStatus();
        }));
  }
  return hooks;
}

LoopResult RunTrainingLoop(MonitoredSession* session, const std::vector<std::string>& targets) {
  LoopResult r;
  const auto start = std::chrono::steady_clock::now();
  const int64_t steps_before = session->steps_run();
  std::vector<Tensor> out;
  while (!session->ShouldStop()) {
    r.status = session->Run({}, {kExamples}, targets, &out);
    if (!r.status.ok()) break;
    r.examples += out[0].scalar<int64_t>();
  }
  if (absl::IsOutOfRange(r.status)) r.status = absl::OkStatus();  // the end of the data
  r.steps = session->steps_run() - steps_before;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

absl::Status StoppedRunError(const absl::Status& error, const absl::Status& close,
                             bool state_unsafe, const std::vector<std::string>* checkpoints,
                             const std::string& newest_before) {
  const std::string newest =
      checkpoints == nullptr || checkpoints->empty() ? "" : checkpoints->back();
  std::string what;
  if (state_unsafe) {
    what = "the model after that step was not saved (its variables may hold NaN or Inf)";
    if (checkpoints != nullptr) {
      absl::StrAppend(&what, "; ",
                      newest.empty() ? "no checkpoint was written before it"
                                     : "the last good checkpoint is " + newest);
    }
  } else if (!close.ok()) {
    what = absl::StrCat("saving the last completed step failed too: ", close.message());
  } else if (newest != newest_before) {
    what = absl::StrCat("saved ", newest,
                        " (the last completed step); run the same command to resume from it");
  } else if (!newest.empty()) {
    what = absl::StrCat("the newest checkpoint ", newest, " holds every completed step");
  }
  if (what.empty()) return error;
  return absl::Status(error.code(), absl::StrCat(error.message(), "\n  ", what));
}

std::optional<FinishedCheckpoint> FindFinishedCheckpoint(const std::string& dir,
                                                         int64_t last_step) {
  if (last_step <= 0) return std::nullopt;
  auto latest = checkpoint::FindLatestCheckpoint(Env::Default(), dir);
  if (!latest.ok()) return std::nullopt;
  auto step = CheckpointGlobalStep(Env::Default(), latest->prefix);
  if (!step.ok() || *step < last_step) return std::nullopt;
  return FinishedCheckpoint{latest->prefix, *step, latest->recovery};
}

absl::StatusOr<TrainResult> Train(const TrainSpec& spec, const TrainOptions& options) {
  const std::string& model_dir = options.model_dir;
  ASSIGN_OR_RETURN(data::Dataset train_ds, spec.train_data(1, 0));
  std::optional<data::Dataset> eval_ds;
  if (spec.eval_data) {
    ASSIGN_OR_RETURN(eval_ds, spec.eval_data());
  }
  if (spec.write_model_dir) RETURN_IF_ERROR(spec.write_model_dir(model_dir));
  ASSIGN_OR_RETURN(auto writer, SummaryWriter::Create(Env::Default(), model_dir));
  RETURN_IF_ERROR(writer->AddGraph(spec.graph_def));

  MonitoredSessionOptions opts;
  opts.session.inter_op_threads = spec.threads;
  opts.session.intra_op_threads = spec.threads;
  opts.checkpoint_dir = model_dir;
  opts.save_checkpoint_steps = spec.save_steps;
  opts.save_checkpoint_secs = spec.save_secs;
  opts.max_to_keep = spec.keep;
  opts.open_tables_in_place = spec.open_in_place;
  opts.restart_input_if_state_does_not_fit = spec.restart_input_if_state_does_not_fit;
  opts.setup = [&](Session* s) {
    return data::RegisterIterator(s->device()->resource_manager(), "", kTrainInput, train_ds);
  };
  TrainResult result;
  TrainingHooksOptions ho;
  ho.log = options.log;
  ho.writer = writer.get();
  ho.last_eval = &result.eval;
  if (eval_ds.has_value()) {
    ho.evaluate = [&](Session* s, double* secs) {
      return Evaluate(s, *eval_ds, spec.eval_batches, secs);
    };
  }
  std::shared_ptr<ValidationWindow> window;
  if (spec.progressive_auc_window > 0) {
    window = std::make_shared<ValidationWindow>(spec.progressive_auc_window);
    ho.progress_note = [window]() -> std::string {
      std::optional<BinaryMetricsResult> r = window->Result();
      if (!r.has_value()) return "";
      return absl::StrFormat("window AUC %.4f (%lld)", r->auc,
                             static_cast<long long>(window->count()));
    };
  }
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<FeedInputHook>(kTrainInput));
  for (auto& hook : TrainingHooks(spec, ho)) hooks.push_back(std::move(hook));
  if (window != nullptr) {
    hooks.push_back(
        std::make_unique<ProgressiveValidationHook>("probabilities:0", "batch:0", window));
  }
  if (options.stop) hooks.push_back(std::make_unique<StopRequestedHook>(options.stop));
  if (spec.publish_interval_secs > 0) {
    auto published = std::make_shared<PublishedUpdates>();
    opts.extra_saveables.push_back(published->CheckpointSaveable());
    hooks.push_back(MakeUpdatePublishHook(model_dir, spec.publish_interval_secs, published,
                                          options.log));
  }
  ASSIGN_OR_RETURN(auto sess, MonitoredSession::Create(opts, spec.graph_def, std::move(hooks)));
  if (!sess->restore_recovery().empty()) {
    Log(options.log, absl::StrCat("warning: ", sess->restore_recovery()));
  }
  result.restored_from = sess->restored_from();
  if (!result.restored_from.empty()) {
    Log(options.log, absl::StrCat("resumed from ", result.restored_from, " (step ",
                                  sess->global_step(), ")"));
  }
  if (sess->stopped_before_first_step()) {
    result.outcome = TrainResult::Outcome::kAtLastStep;
    result.global_step = sess->global_step();
    RETURN_IF_ERROR(sess->Close());
    return result;
  }
  const std::vector<std::string> ckpts_before = sess->saver()->checkpoints();
  const std::string newest_before = ckpts_before.empty() ? "" : ckpts_before.back();
  LoopResult loop = RunTrainingLoop(sess.get(), {"train"});
  if (window != nullptr) {
    result.window = window->Result();
    result.window_examples = window->count();
  }
  result.steps = loop.steps;
  result.examples = loop.examples;
  result.seconds = loop.seconds;
  const std::string report =
      data::SkippedRecordsReport(spec.input_stats.get(), spec.batch_stats.get());
  if (!report.empty()) Log(options.log, absl::StrCat("\n", report));
  if (!loop.status.ok()) {
    // Keep what a checkpoint can keep before reporting the error.
    const absl::Status closed = sess->Close();
    const std::vector<std::string> ckpts = sess->saver()->checkpoints();
    return StoppedRunError(loop.status, closed, sess->state_unsafe_to_save(), &ckpts,
                           newest_before);
  }
  RETURN_IF_ERROR(sess->Close());
  RETURN_IF_ERROR(writer->Close());
  result.global_step = sess->global_step();
  if (sess->steps_run() == 0) {
    // The input ended before the first step.
    if (result.restored_from.empty() && !(options.stop && options.stop())) {
      return errors::InvalidArgument("the training data ", spec.train_data_name,
                                     " has no example (its files are empty)");
    }
    result.outcome = TrainResult::Outcome::kInputRead;
  }
  return result;
}

}  // namespace recflow::train
