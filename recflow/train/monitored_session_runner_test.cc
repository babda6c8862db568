// MonitoredSession over a StepRunner of the test's own (a distributed
// worker's is one): what it asks of the runner per step, state-saving
// hooks (ordering, unsafe steps, failures, unsaved state at Close), the
// end of input coming from a hook, and the hooks fed by a global step that
// jumps (other workers step too). Also the global step read with the step
// of a local session whose global step is a resource variable.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/train/global_step.h"
#include "recflow/train/hooks.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Each step moves the global step by `stride` and returns, per fetch,
// "loss:0": `loss`, "batch_examples:0": 10, anything else 0.
class FakeRunner : public StepRunner {
 public:
  explicit FakeRunner(int64_t start = 0, int64_t stride = 1) : step_(start), stride_(stride) {
    Scope root = Scope::NewRootScope();
    ops::Const(root.WithOpName("c"), 1.0f);
    session_ = *Session::Create({}, *root.ToGraphDef());
  }
  Session* session() const override { return session_.get(); }
  absl::Status Start() override {
    ++starts;
    return start_error;
  }
  absl::Status Run(const RunArgs& args, std::vector<Tensor>* results, RunMetadata*,
                   int64_t* global_step) override {
    ++runs;
    fetches.push_back(args.fetches);
    if (!run_error.ok()) return run_error;
    results->clear();
    for (const std::string& f : args.fetches) {
      if (f == "loss:0") {
        results->push_back(Tensor::Scalar<float>(loss));
      } else if (f == "batch_examples:0") {
        results->push_back(Tensor::Scalar<int64_t>(10));
      } else {
        results->push_back(Tensor::Scalar<float>(0));
      }
    }
    step_ += stride_;
    *global_step = step_;
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> ReadGlobalStep() override {
    ++reads;
    return step_;
  }
  void Advance(int64_t n) { step_ += n; }  // other workers' steps

  int starts = 0, runs = 0, reads = 0;
  float loss = 0.5f;
  absl::Status start_error, run_error;
  std::vector<std::vector<std::string>> fetches;

 private:
  std::unique_ptr<Session> session_;
  int64_t step_, stride_;
};

// Records what happens to it in `log`.
class RecordingHook : public SessionRunHook {
 public:
  RecordingHook(std::string name, std::vector<std::string>* log, bool saves_state = false)
      : name_(std::move(name)), log_(log), saves_state_(saves_state) {}
  absl::Status AfterRun(SessionRunContext* context, const RunValues&) override {
    log_->push_back(absl::StrCat(name_, ".AfterRun@", context->global_step()));
    return absl::OkStatus();
  }
  absl::Status End(Session*, int64_t step) override {
    log_->push_back(absl::StrCat(name_, ".End@", step));
    return absl::OkStatus();
  }
  bool SavesState() const override { return saves_state_; }
  absl::Status EndAfterFailure(Session*, int64_t step) override {
    log_->push_back(absl::StrCat(name_, ".EndAfterFailure@", step));
    return absl::OkStatus();
  }
  bool HasUnsavedState(int64_t step) const override { return unsaved_at == step; }
  int64_t unsaved_at = -2;

 private:
  std::string name_;
  std::vector<std::string>* log_;
  bool saves_state_;
};

MonitoredSessionOptions NoInit() {
  MonitoredSessionOptions o;
  o.is_chief = false;
  return o;
}

TEST(StepRunnerTest, OneRunPerStepAndTheGlobalStepComesWithIt) {
  auto runner = std::make_unique<FakeRunner>(/*start=*/40, /*stride=*/3);
  FakeRunner* r = runner.get();
  std::vector<std::string> log;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<RecordingHook>("h", &log));
  hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(49)));
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner), std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ(r->starts, 1);
  EXPECT_EQ(r->reads, 1);  // at Create
  EXPECT_EQ((*ms)->global_step(), 40);
  std::vector<Tensor> out;
  while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run({}, {"loss:0"}, {}, &out).ok());
  EXPECT_EQ(r->runs, 3);
  EXPECT_EQ(r->reads, 1);  // no read per step
  EXPECT_EQ((*ms)->global_step(), 49);
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_EQ(r->reads, 2);  // Close reads the step the model holds
  EXPECT_THAT(log, ElementsAre("h.AfterRun@43", "h.AfterRun@46", "h.AfterRun@49", "h.End@49"));
}

TEST(StepRunnerTest, AFailedStartFailsCreate) {
  auto runner = std::make_unique<FakeRunner>();
  runner->start_error = errors::OutOfRange("ps task 0 reports the job finished");
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner));
  EXPECT_TRUE(absl::IsOutOfRange(ms.status())) << ms.status();
}

TEST(StateHooksTest, RunAfterTheOthersAndNotAfterAnUnsafeStep) {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<RecordingHook>("state", &log, /*saves_state=*/true));
  hooks.push_back(std::make_unique<NanLossHook>("loss:0", /*fail_on_nan=*/false));
  hooks.push_back(std::make_unique<RecordingHook>("other", &log));
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner), std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  r->loss = NAN;
  ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());  // only stops
  EXPECT_TRUE((*ms)->ShouldStop());
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(log, ElementsAre("other.AfterRun@1", "state.AfterRun@1", "other.AfterRun@2"));
}

TEST(StateHooksTest, AfterAFailureOnlyTheirEndAfterFailureRuns) {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<RecordingHook>("state", &log, true));
  hooks.push_back(std::make_unique<RecordingHook>("other", &log));
  auto runner = std::make_unique<FakeRunner>(10);
  FakeRunner* r = runner.get();
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner), std::move(hooks));
  ASSERT_TRUE(ms.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  r->run_error = errors::Unavailable("ps 1 is gone");
  EXPECT_TRUE(absl::IsUnavailable((*ms)->Run({}, {}, {}, &out)));
  r->Advance(5);  // the model moved on meanwhile (other workers)
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(log, ElementsAre("other.AfterRun@11", "state.AfterRun@11",
                               "state.EndAfterFailure@16"));
}

TEST(StateHooksTest, UnsavedStateEndsASessionThatRanNoStep) {
  for (bool unsaved : {false, true}) {
    std::vector<std::string> log;
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    auto state = std::make_unique<RecordingHook>("state", &log, true);
    if (unsaved) state->unsaved_at = 30;
    hooks.push_back(std::move(state));
    hooks.push_back(std::make_unique<RecordingHook>("other", &log));
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(30)));
    auto ms = MonitoredSession::Create(NoInit(), std::make_unique<FakeRunner>(30),
                                       std::move(hooks));
    ASSERT_TRUE(ms.ok());
    EXPECT_TRUE((*ms)->stopped_before_first_step());
    ASSERT_TRUE((*ms)->Close().ok());
    if (unsaved) {
      EXPECT_THAT(log, ElementsAre("state.End@30", "other.End@30"));
    } else {
      EXPECT_TRUE(log.empty());
    }
  }
}

TEST(StateHooksTest, AbandonRunsNoEnd) {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<RecordingHook>("state", &log, true));
  auto ms = MonitoredSession::Create(NoInit(), std::make_unique<FakeRunner>(), std::move(hooks));
  ASSERT_TRUE(ms.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  (*ms)->Abandon();
  EXPECT_TRUE((*ms)->ShouldStop());
  EXPECT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(log, ElementsAre("state.AfterRun@1"));
}

// The end of the data may come from a hook that feeds the step.
class EndingHook : public SessionRunHook {
 public:
  explicit EndingHook(int steps) : steps_(steps) {}
  absl::Status BeforeRun(SessionRunContext*, RunArgs*) override {
    if (steps_-- == 0) return errors::OutOfRange("End of sequence");
    return absl::OkStatus();
  }

 private:
  int steps_;
};

TEST(StateHooksTest, OutOfRangeFromAHookIsTheEndOfInputNotAFailure) {
  std::vector<std::string> log;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<EndingHook>(2));
  hooks.push_back(std::make_unique<RecordingHook>("state", &log, true));
  auto ms = MonitoredSession::Create(NoInit(), std::make_unique<FakeRunner>(), std::move(hooks));
  ASSERT_TRUE(ms.ok());
  std::vector<Tensor> out;
  absl::Status s;
  while (!(*ms)->ShouldStop()) s = (*ms)->Run({}, {}, {}, &out);
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
  EXPECT_EQ((*ms)->steps_run(), 2);
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(log, ElementsAre("state.AfterRun@1", "state.AfterRun@2", "state.End@2"));
}

// --- Hooks fed by a jumping global step ----------------------------------------

class FakeCheckpointer : public Checkpointer {
 public:
  absl::StatusOr<std::string> Save(int64_t step) override {
    attempts.push_back(step);
    if (fail) return errors::Unavailable("ps 1 restarting");
    saved.push_back(absl::StrCat("m/model.ckpt-", step));
    return saved.back();
  }
  absl::StatusOr<std::string> SaveAfterFailure(int64_t step) override {
    after_failure.push_back(step);
    return Save(step);
  }
  std::vector<std::string> checkpoints() const override { return saved; }
  std::optional<int64_t> saved_step() const override { return start_saved; }

  bool fail = false;
  std::optional<int64_t> start_saved;
  std::vector<int64_t> attempts, after_failure;
  std::vector<std::string> saved;
};

TEST(CheckpointSaverHookTest, OverACheckpointerWithJumpsAndTolerableFailures) {
  FakeCheckpointer ckpt;
  std::vector<int64_t> warned;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<CheckpointSaverHook>(
      &ckpt, CheckpointSaverOptions{
                 .every_steps = 10,
                 .on_failed_periodic_save = [&](int64_t step, const absl::Status&) {
                   warned.push_back(step);
                 }}));
  hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(40)));
  auto runner = std::make_unique<FakeRunner>(0, 4);
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner), std::move(hooks));
  ASSERT_TRUE(ms.ok());
  std::vector<Tensor> out;
  // Steps 4, 8, 12 (10 steps since 0: saved), 16, 20.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  // 24 (due: fails, told, training goes on), 28, 32.
  ckpt.fail = true;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  // 36 (10 steps since the failed attempt: saved), 40 (the last: saved).
  ckpt.fail = false;
  while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(ckpt.attempts, ElementsAre(12, 24, 36, 40));
  EXPECT_THAT(warned, ElementsAre(24));
  EXPECT_THAT(ckpt.saved, ElementsAre("m/model.ckpt-12", "m/model.ckpt-36", "m/model.ckpt-40"));
}

TEST(CheckpointSaverHookTest, AChiefJoiningWorkersThatTrainedOnSavesTheirSteps) {
  for (std::optional<int64_t> newest : {std::optional<int64_t>(480), std::optional<int64_t>(500)}) {
    FakeCheckpointer ckpt;
    ckpt.start_saved = newest;
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<CheckpointSaverHook>(&ckpt, CheckpointSaverOptions{}));
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(500)));
    auto ms = MonitoredSession::Create(NoInit(), std::make_unique<FakeRunner>(500),
                                       std::move(hooks));
    ASSERT_TRUE(ms.ok());
    EXPECT_TRUE((*ms)->stopped_before_first_step());
    ASSERT_TRUE((*ms)->Close().ok());
    if (*newest == 480) {
      EXPECT_THAT(ckpt.saved, ElementsAre("m/model.ckpt-500"));
    } else {
      EXPECT_TRUE(ckpt.attempts.empty());  // nothing new: nothing saved
    }
  }
}

TEST(CheckpointSaverHookTest, AfterAFailureSavesOnceThroughSaveAfterFailure) {
  FakeCheckpointer ckpt;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<CheckpointSaverHook>(&ckpt, CheckpointSaverOptions{}));
  auto runner = std::make_unique<FakeRunner>();
  FakeRunner* r = runner.get();
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner), std::move(hooks));
  ASSERT_TRUE(ms.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  r->run_error = errors::DataLoss("bad data");
  EXPECT_FALSE((*ms)->Run({}, {}, {}, &out).ok());
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT(ckpt.after_failure, ElementsAre(1));
}

TEST(HooksTest, SummariesAndProgressFollowAJumpingGlobalStep) {
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<ProgressHook>(ProgressOptions{
      .batch_size = 1000,  // not used: the examples are counted
      .examples_tensor = "batch_examples:0",
      .loss_tensor = "loss:0",
      .every_secs = 0,
      .out = log,
      .mode = ProgressOptions::Mode::kLog}));
  const std::string dir = ::testing::TempDir();
  auto writer = SummaryWriter::Create(Env::Default(), dir + "/jumping");
  ASSERT_TRUE(writer.ok()) << writer.status();
  hooks.push_back(std::make_unique<SummarySaverHook>(
      writer->get(), SummaryOptions{.every_steps = 10, .scalars = {{"loss", "loss:0"}}}));
  auto runner = std::make_unique<FakeRunner>(0, 3);
  FakeRunner* r = runner.get();
  auto ms = MonitoredSession::Create(NoInit(), std::move(runner), std::move(hooks));
  ASSERT_TRUE(ms.ok());
  std::vector<Tensor> out;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE((*ms)->Run({}, {}, {}, &out).ok());
  ASSERT_TRUE((*ms)->Close().ok());
  // The loss is fetched for the summary only on a step that reaches the
  // next multiple of 10 if the step moves by one (from 9), or right after
  // one was jumped over (18 -> 21): the steps to 12 and 24 write (a step
  // late, never skipped).
  int loss_fetches = 0;
  for (const auto& f : r->fetches) loss_fetches += std::count(f.begin(), f.end(), "loss:0") - 1;
  EXPECT_EQ(loss_fetches, 2);
  std::fseek(log, 0, SEEK_SET);
  std::string text(8192, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), log));
  std::fclose(log);
  EXPECT_THAT(text, HasSubstr("step 30 "));
  EXPECT_THAT(text, HasSubstr(" ex/s  loss 0.5"));
}

// Records the nodes each traced step ran.
class TraceHook : public SessionRunHook {
 public:
  absl::Status BeforeRun(SessionRunContext*, RunArgs* args) override {
    args->trace = true;
    return absl::OkStatus();
  }
  absl::Status AfterRun(SessionRunContext*, const RunValues& values) override {
    std::vector<std::string> nodes;
    for (const auto& n : values.metadata->step_stats.nodes) nodes.push_back(n.node_name);
    steps.push_back(std::move(nodes));
    return absl::OkStatus();
  }
  std::vector<std::vector<std::string>> steps;
};

// A resource-variable global step is read in the step's own run, after the
// step: it counts every step.
TEST(LocalStepRunnerTest, ReadsAResourceGlobalStepAfterTheStep) {
  Scope root = Scope::NewRootScope();
  Output gs = CreateGlobalStep(root, {.use_resource = true});
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output w = Variable(root, "w", PartialShape({}), DT_FLOAT, ops::Const(root, 0.5f),
                      {.use_resource = true});
  Output loss = ops::Sum(root.WithOpName("loss"), ops::Square(root, ops::Mul(root, ReadValue(root, w), x)),
                         ops::Const(root, Tensor::FromVector<int32_t>({0})));
  GradientDescentOptimizer opt(0.01);
  auto update = opt.Minimize(root.NewSubScope("sgd"), loss, {}, gs);
  ASSERT_TRUE(update.ok()) << update.status();
  ops::NoOp(root.WithOpName("train").WithControlDependencies({*update}));
  GlobalVariablesInitializer(root);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<TraceHook>());
  const TraceHook* trace = static_cast<const TraceHook*>(hooks.back().get());
  auto ms = MonitoredSession::Create({}, *def, std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ((*ms)->global_step(), 0);
  std::vector<Tensor> out;
  for (int64_t i = 1; i <= 20; ++i) {
    ASSERT_TRUE((*ms)->Run({{"x", Tensor::FromVector<float>({1, 2})}}, {"loss:0"}, {"train"}, &out)
                    .ok());
    ASSERT_EQ(out.size(), 1u);  // the caller's fetches only
    EXPECT_EQ((*ms)->global_step(), i);
  }
  // In the step's own run: the read after the increment ran in it.
  ASSERT_EQ(trace->steps.size(), 20u);
  EXPECT_THAT(trace->steps.back(), ::testing::Contains("global_step/read_after_step_0"));
  // A run without targets runs no increment (nor that read), and reads the
  // same step.
  ASSERT_TRUE((*ms)->Run({{"x", Tensor::FromVector<float>({1})}}, {"loss:0"}, {}, &out).ok());
  EXPECT_EQ((*ms)->global_step(), 20);
  EXPECT_THAT(trace->steps.back(),
              ::testing::Not(::testing::Contains("global_step/read_after_step_0")));
}

}  // namespace
}  // namespace recflow::train
