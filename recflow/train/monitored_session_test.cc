// MonitoredSession and the standard hooks: restore-or-init, checkpoints
// every N steps and at the end, resuming variables and the input position,
// stopping at a step, at a NaN loss and at the end of input, progress lines,
// summaries, a profiled step and periodic evaluation.
#include "recflow/train/monitored_session.h"

#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/data/dataset.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/data_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/train/global_step.h"
#include "recflow/train/hooks.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using testing::HasSubstr;

std::string MakeTempDir() {
  std::string tmpl = ::testing::TempDir() + "/monitored_session_XXXXXX";
  char* d = mkdtemp(tmpl.data());
  EXPECT_NE(d, nullptr);
  return tmpl;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// loss = sum((w * x - 1)^2) over a batch x read from the "input" iterator
// (batches of 4 of 0.0, 0.1, 0.2, ...), trained by gradient descent with a
// global step. Fetch "loss:0"; run "train".
tensorflow::GraphDef TrainGraph(bool with_iterator = true) {
  Scope root = Scope::NewRootScope();
  Output gs = CreateGlobalStep(root);
  Output x;
  if (with_iterator) {
    Output it = ops::IteratorV2(root.WithOpName("it"), "input", {DT_INT64}, {PartialShape({-1})});
    x = ops::Cast(root, ops::IteratorGetNext(root.WithOpName("next"), it, {DT_INT64},
                                             {PartialShape({-1})})[0],
                  DT_FLOAT);
    x = ops::Mul(root, x, ops::Const(root, 0.1f));
  } else {
    x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  }
  Output w = Variable(root, "w", PartialShape({}), DT_FLOAT, ops::Const(root, 0.5f));
  Output r = ops::Sub(root, ops::Mul(root, ReadValue(root, w), x), ops::Const(root, 1.0f));
  Output loss = ops::Sum(root.WithOpName("loss"), ops::Mul(root, r, r),
                         ops::Const(root, Tensor::FromVector<int32_t>({0})));
  GradientDescentOptimizer opt(0.05);
  auto train = opt.Minimize(root.WithOpName("train"), loss, {}, gs);
  EXPECT_TRUE(train.ok()) << train.status();
  GlobalVariablesInitializer(root);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

std::string TrainTarget(const tensorflow::GraphDef& def) {
  // Minimize names its NoOp after the optimizer under the scope's name.
  for (const auto& n : def.node()) {
    if (n.op() == "NoOp" && n.name() != "init") return n.name();
  }
  return "";
}

absl::Status RegisterInput(Session* session) {
  data::Dataset ds = data::Dataset::Range(400).Batch(4);
  return data::RegisterIterator(session->device()->resource_manager(), "", "input", ds);
}

float ReadW(MonitoredSession* ms) {
  std::vector<Tensor> out;
  EXPECT_TRUE(ms->session()->Run({}, {"w/Read/ReadVariableOp:0"}, {}, &out).ok() ||
              ms->session()->Run({}, {"w:0"}, {}, &out).ok());
  return out.empty() ? NAN : out[0].scalar<float>();
}

TEST(MonitoredSessionTest, InitsTrainsStopsSavesAndResumes) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph();
  const std::string train = TrainTarget(def);
  ASSERT_FALSE(train.empty());
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_steps = 5;
  opts.save_checkpoint_secs = 0;
  opts.setup = RegisterInput;

  float w_after_12 = 0;
  {
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(12)));
    auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
    ASSERT_TRUE(ms.ok()) << ms.status();
    EXPECT_EQ((*ms)->restored_from(), "");
    EXPECT_EQ((*ms)->global_step(), 0);
    int runs = 0;
    std::vector<Tensor> out;
    while (!(*ms)->ShouldStop()) {
      ASSERT_TRUE((*ms)->Run({}, {"loss:0"}, {train}, &out).ok());
      ASSERT_EQ(out.size(), 1u);
      ++runs;
    }
    EXPECT_EQ(runs, 12);
    EXPECT_EQ((*ms)->global_step(), 12);
    w_after_12 = ReadW(ms->get());
    ASSERT_TRUE((*ms)->Close().ok());
    // Saved at 5, 10 and (at Close) 12.
    std::vector<std::string> ckpts = (*ms)->saver()->checkpoints();
    ASSERT_EQ(ckpts.size(), 3u);
    EXPECT_THAT(ckpts.back(), HasSubstr("model.ckpt-12"));
  }
  // The uninterrupted reference: 12 more steps from step 12 in the same
  // session would read batches 12..23; a resumed session must read the same.
  {
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::NumSteps(3)));
    auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
    ASSERT_TRUE(ms.ok()) << ms.status();
    EXPECT_THAT((*ms)->restored_from(), HasSubstr("model.ckpt-12"));
    EXPECT_EQ((*ms)->global_step(), 12);
    EXPECT_EQ(ReadW(ms->get()), w_after_12);
    // The input continues at batch 12 (ids 48..51).
    std::vector<Tensor> out;
    ASSERT_TRUE((*ms)->Run({}, {"next:0"}, {train}, &out).ok());
    EXPECT_EQ(out[0].flat<int64_t>()[0], 48);
    while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run({}, {}, {train}, &out).ok());
    EXPECT_EQ((*ms)->global_step(), 15);
  }
}

TEST(MonitoredSessionTest, EndOfInputStops) {
  const tensorflow::GraphDef def = TrainGraph();
  MonitoredSessionOptions opts;
  opts.setup = [](Session* s) {
    return data::RegisterIterator(s->device()->resource_manager(), "", "input",
                                  data::Dataset::Range(10).Batch(4));
  };
  auto ms = MonitoredSession::Create(opts, def);
  ASSERT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  int ok_runs = 0;
  absl::Status s;
  while (!(*ms)->ShouldStop()) {
    s = (*ms)->Run({}, {}, {TrainTarget(def)}, &out);
    if (s.ok()) ++ok_runs;
  }
  EXPECT_EQ(ok_runs, 3);  // 4 + 4 + 2 ids
  EXPECT_TRUE(absl::IsOutOfRange(s)) << s;
}

// A checkpoint whose input position another pipeline saved (Range.Batch
// here, Range.Map.Batch next) fails the restore, unless the session may
// restart the input: then the model is restored and the input starts over.
TEST(MonitoredSessionTest, AnotherPipelinesPositionFailsOrRestartsTheInput) {
  const tensorflow::GraphDef def = TrainGraph();
  const std::string dir = MakeTempDir();
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_secs = 0;
  opts.setup = [](Session* s) { return RegisterInput(s); };
  {
    auto ms = MonitoredSession::Create(opts, def);
    ASSERT_TRUE(ms.ok()) << ms.status();
    std::vector<Tensor> out;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*ms)->Run({}, {}, {TrainTarget(def)}, &out).ok());
    ASSERT_TRUE((*ms)->Close().ok());
  }
  opts.setup = [](Session* s) {
    data::Dataset other = data::Dataset::Range(400)
                              .Map([](data::Element e) -> absl::StatusOr<data::Element> {
                                return e;
                              },
                                   1, {DT_INT64}, {PartialShape({})})
                              .Batch(4);
    return data::RegisterIterator(s->device()->resource_manager(), "", "input", other);
  };
  auto strict = MonitoredSession::Create(opts, def);
  ASSERT_FALSE(strict.ok());
  EXPECT_TRUE(absl::IsNotFound(strict.status())) << strict.status();
  EXPECT_THAT(strict.status().message(), HasSubstr("it/iterator_state"));

  opts.restart_input_if_state_does_not_fit = true;
  auto lenient = MonitoredSession::Create(opts, def);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_FALSE((*lenient)->restored_from().empty());  // the model came back
  std::vector<Tensor> out;
  ASSERT_TRUE((*lenient)->session()->Run({}, {"global_step:0"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<int64_t>(), 3);
  absl::Status run = (*lenient)->session()->Run({}, {"next:0"}, {}, &out);
  ASSERT_TRUE(run.ok()) << run;
  EXPECT_EQ(out[0].flat<int64_t>()[0], 0);  // the input starts over
}

TEST(MonitoredSessionTest, NanLossStopsWithStepAndValue) {
  const tensorflow::GraphDef def = TrainGraph(/*with_iterator=*/false);
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<NanLossHook>("loss:0"));
  auto ms = MonitoredSession::Create({}, def, std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  const std::string train = TrainTarget(def);
  ASSERT_TRUE((*ms)->Run({{"x", Tensor::FromVector<float>({1, 2})}}, {}, {train}, &out).ok());
  absl::Status s =
      (*ms)->Run({{"x", Tensor::FromVector<float>({NAN, 2})}}, {}, {train}, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("NaN loss at step 2"));
  EXPECT_THAT(s.message(), HasSubstr("loss:0"));
  EXPECT_TRUE((*ms)->ShouldStop());
  EXPECT_TRUE((*ms)->Close().ok());
}

TEST(MonitoredSessionTest, FailedStepIsNotSavedAtClose) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph(/*with_iterator=*/false);
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_secs = 0;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<NanLossHook>("loss:0"));
  auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  const std::string train = TrainTarget(def);
  EXPECT_FALSE(
      (*ms)->Run({{"x", Tensor::FromVector<float>({NAN})}}, {}, {train}, &out).ok());
  EXPECT_TRUE((*ms)->Close().ok());
  EXPECT_TRUE((*ms)->saver()->checkpoints().empty());
}

TEST(MonitoredSessionTest, BadCheckpointDirIsAClearError) {
  const std::string dir = MakeTempDir();
  // A state file naming a checkpoint whose index is corrupt.
  {
    std::ofstream(dir + "/checkpoint") << "model_checkpoint_path: \"model.ckpt-3\"\n";
    std::ofstream(dir + "/model.ckpt-3.index") << "not a table";
  }
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.setup = RegisterInput;
  auto ms = MonitoredSession::Create(opts, TrainGraph());
  ASSERT_FALSE(ms.ok());
  EXPECT_THAT(ms.status().message(), HasSubstr("model.ckpt-3"));
  // A failed Create saves nothing.
  std::ifstream none(dir + "/model.ckpt-0.index");
  EXPECT_FALSE(none.good());
}

// A run restarted at its last step does nothing: no step, no End, no new
// checkpoint (before: it trained one more step and saved model.ckpt-13).
TEST(MonitoredSessionTest, RestartAtTheLastStepRunsNoStep) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph();
  const std::string train = TrainTarget(def);
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_secs = 0;
  opts.setup = RegisterInput;
  for (int run = 0; run < 3; ++run) {
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(12)));
    int64_t evaluations = 0;
    hooks.push_back(std::make_unique<EvaluationHook>(0, [&](Session*, int64_t) {
      ++evaluations;
      return absl::OkStatus();
    }));
    auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
    ASSERT_TRUE(ms.ok()) << ms.status();
    int runs = 0;
    std::vector<Tensor> out;
    while (!(*ms)->ShouldStop()) {
      ASSERT_TRUE((*ms)->Run({}, {}, {train}, &out).ok());
      ++runs;
    }
    EXPECT_EQ(runs, run == 0 ? 12 : 0) << "run " << run;
    EXPECT_EQ((*ms)->stopped_before_first_step(), run > 0);
    EXPECT_EQ((*ms)->global_step(), 12);
    ASSERT_TRUE((*ms)->Close().ok());
    EXPECT_EQ(evaluations, run == 0 ? 1 : 0) << "run " << run;
    EXPECT_THAT((*ms)->saver()->checkpoints().back(), HasSubstr("model.ckpt-12"));
  }
  std::ifstream overshoot(dir + "/model.ckpt-13.index");
  EXPECT_FALSE(overshoot.good());
}

// A step that fails (here: its input) keeps the completed steps: Close saves
// them, and the resumed run continues after the failing batch.
TEST(MonitoredSessionTest, FailedInputStepSavesTheCompletedSteps) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph();
  const std::string train = TrainTarget(def);
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_secs = 0;  // no periodic checkpoint: only Close saves
  opts.setup = [](Session* s) {
    data::Dataset ds = data::Dataset::Range(400).Batch(4).Map(
        [](data::Element e) -> absl::StatusOr<data::Element> {
          if (e[0].flat<int64_t>()[0] == 12) return errors::DataLoss("bad batch at 12");
          return e;
        },
        1, {DT_INT64}, {PartialShape({-1})});
    return data::RegisterIterator(s->device()->resource_manager(), "", "input", ds);
  };
  float w_after_3 = 0;
  {
    auto ms = MonitoredSession::Create(opts, def);
    ASSERT_TRUE(ms.ok()) << ms.status();
    std::vector<Tensor> out;
    for (int i = 0; i < 3; ++i) {
      absl::Status s = (*ms)->Run({}, {}, {train}, &out);
      ASSERT_TRUE(s.ok()) << s;
    }
    w_after_3 = ReadW(ms->get());
    absl::Status s = (*ms)->Run({}, {}, {train}, &out);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_TRUE((*ms)->ShouldStop());
    EXPECT_FALSE((*ms)->state_unsafe_to_save());
    ASSERT_TRUE((*ms)->Close().ok());
    ASSERT_EQ((*ms)->saver()->checkpoints().size(), 1u);
    EXPECT_THAT((*ms)->saver()->checkpoints().back(), HasSubstr("model.ckpt-3"));
  }
  auto ms = MonitoredSession::Create(opts, def);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ((*ms)->global_step(), 3);
  EXPECT_EQ(ReadW(ms->get()), w_after_3);
  std::vector<Tensor> out;
  ASSERT_TRUE((*ms)->Run({}, {"next:0"}, {train}, &out).ok());
  EXPECT_EQ(out[0].flat<int64_t>()[0], 16);  // the batch after the bad one
}

// An error of a hook after a completed step keeps that step too.
TEST(MonitoredSessionTest, FailedHookSavesTheCompletedStep) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph(/*with_iterator=*/false);
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_secs = 0;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<EvaluationHook>(2, [](Session*, int64_t) {
    return errors::Unavailable("eval data went away");
  }));
  auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  const std::string train = TrainTarget(def);
  const FeedList x = {{"x", Tensor::FromVector<float>({1, 2})}};
  ASSERT_TRUE((*ms)->Run(x, {}, {train}, &out).ok());
  EXPECT_TRUE(absl::IsUnavailable((*ms)->Run(x, {}, {train}, &out)));
  ASSERT_TRUE((*ms)->Close().ok());
  EXPECT_THAT((*ms)->saver()->checkpoints(), testing::ElementsAre(HasSubstr("model.ckpt-2")));
}

// A NaN loss keeps the last good checkpoint, whether it fails the step or
// only stops the loop.
TEST(MonitoredSessionTest, NanLossNeverSavesEvenWhenOnlyStopping) {
  for (bool fail : {true, false}) {
    const std::string dir = MakeTempDir();
    const tensorflow::GraphDef def = TrainGraph(/*with_iterator=*/false);
    MonitoredSessionOptions opts;
    opts.checkpoint_dir = dir;
    opts.save_checkpoint_steps = 1;
    opts.save_checkpoint_secs = 0;
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<NanLossHook>("loss:0", fail));
    auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
    ASSERT_TRUE(ms.ok()) << ms.status();
    std::vector<Tensor> out;
    const std::string train = TrainTarget(def);
    ASSERT_TRUE((*ms)->Run({{"x", Tensor::FromVector<float>({1})}}, {}, {train}, &out).ok());
    absl::Status s = (*ms)->Run({{"x", Tensor::FromVector<float>({NAN})}}, {}, {train}, &out);
    EXPECT_EQ(s.ok(), !fail) << s;
    EXPECT_TRUE((*ms)->ShouldStop());
    EXPECT_TRUE((*ms)->state_unsafe_to_save());
    ASSERT_TRUE((*ms)->Close().ok());
    // Saved at step 1 by the every-step rule (state-saving hooks run after
    // the others, so after the NaN guard); never at step 2.
    EXPECT_THAT((*ms)->saver()->checkpoints(), testing::ElementsAre(HasSubstr("model.ckpt-1")))
        << "fail_on_nan " << fail;
  }
}

// Chief options that checkpoint `dir` every 5 steps, over RegisterInput.
MonitoredSessionOptions SavingEvery5Steps(const std::string& dir) {
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_steps = 5;
  opts.save_checkpoint_secs = 0;
  opts.setup = RegisterInput;
  return opts;
}

// A damaged `checkpoint` state file beside intact checkpoints: the newest
// intact one is restored and the recovery reported; training never starts
// over from step 0 (before: a fresh start that then listed the old
// checkpoints under its own).
TEST(MonitoredSessionTest, DamagedStateFileResumesFromTheNewestIntactCheckpoint) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph();
  const std::string train = TrainTarget(def);
  const MonitoredSessionOptions opts = SavingEvery5Steps(dir);
  auto train_to = [&](int64_t last, std::string* recovery) -> int64_t {
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(last)));
    auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
    EXPECT_TRUE(ms.ok()) << ms.status();
    if (!ms.ok()) return -1;
    if (recovery != nullptr) *recovery = (*ms)->restore_recovery();
    const int64_t start = (*ms)->global_step();
    std::vector<Tensor> out;
    while (!(*ms)->ShouldStop()) EXPECT_TRUE((*ms)->Run({}, {}, {train}, &out).ok());
    EXPECT_TRUE((*ms)->Close().ok());
    return start;
  };
  train_to(10, nullptr);
  for (const std::string text : {"", "model_checkpoint_path: \"/etc/passwd\"\n", "{{",
                                 "model_checkpoint_path: \"model.ckpt-99\"\n"}) {
    std::ofstream(dir + "/checkpoint") << text;
    std::string recovery;
    const int64_t start = train_to(10 + 5, &recovery);
    EXPECT_GE(start, 10) << "started over with state file '" << text << "'";
    EXPECT_THAT(recovery, HasSubstr("the newest intact checkpoint")) << text;
  }
  // Garbage and nothing to recover: an error, not a fresh start.
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind("model.ckpt-", 0) == 0) {
      std::filesystem::remove(entry.path());
    }
  }
  std::ofstream(dir + "/checkpoint") << "model_checkpoint_path: \"model.ckpt-10\"\n";
  auto ms = MonitoredSession::Create(opts, def);
  ASSERT_FALSE(ms.ok());
  EXPECT_TRUE(absl::IsDataLoss(ms.status())) << ms.status();
}

// Note [A damaged newest checkpoint]: data that fails its crc32c on restore
// resumes from the newest older checkpoint that restores, and says so;
// when none does, the error names them all.
TEST(MonitoredSessionTest, DamagedNewestCheckpointResumesFromTheNewestGoodOne) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph();
  const std::string train = TrainTarget(def);
  const MonitoredSessionOptions opts = SavingEvery5Steps(dir);
  {
    std::vector<std::unique_ptr<SessionRunHook>> hooks;
    hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(15)));
    auto ms = MonitoredSession::Create(opts, def, std::move(hooks));
    ASSERT_TRUE(ms.ok()) << ms.status();
    std::vector<Tensor> out;
    while (!(*ms)->ShouldStop()) ASSERT_TRUE((*ms)->Run({}, {}, {train}, &out).ok());
    ASSERT_TRUE((*ms)->Close().ok());
  }
  // Flips one bit in every data byte of a checkpoint.
  auto damage = [&](int step) {
    const std::string path = absl::StrCat(dir, "/model.ckpt-", step, ".data-00000-of-00001");
    std::string bytes;
    ASSERT_TRUE(ReadFileToString(Env::Default(), path, &bytes).ok()) << path;
    for (char& c : bytes) c ^= 0x10;
    ASSERT_TRUE(WriteStringToFile(Env::Default(), path, bytes).ok());
  };
  damage(15);
  {
    auto ms = MonitoredSession::Create(opts, def);
    ASSERT_TRUE(ms.ok()) << ms.status();
    EXPECT_EQ((*ms)->global_step(), 10);
    EXPECT_EQ((*ms)->restored_from(), dir + "/model.ckpt-10");
    EXPECT_THAT((*ms)->restore_recovery(),
                AllOf(HasSubstr("model.ckpt-15 could not be restored"), HasSubstr("crc"),
                      HasSubstr("resumed from model.ckpt-10")));
    (*ms)->Close().IgnoreError();
  }
  damage(10);
  damage(5);
  auto ms = MonitoredSession::Create(opts, def);
  ASSERT_FALSE(ms.ok());
  EXPECT_TRUE(absl::IsDataLoss(ms.status())) << ms.status();
  EXPECT_THAT(ms.status().message(),
              AllOf(HasSubstr("model.ckpt-15, model.ckpt-10, model.ckpt-5"),
                    HasSubstr("Move the damaged checkpoints away")));
}

// A hash embedding table trained through MonitoredSession is checkpointed
// with the variables and restored into a new session (rows, slots).
TEST(MonitoredSessionTest, HashTablesAreSavedAndRestored) {
  const std::string dir = MakeTempDir();
  Scope root = Scope::NewRootScope();
  Output gs = CreateGlobalStep(root);
  ops::HashEmbeddingTableAttrs attrs;
  attrs.dim = 4;
  attrs.optimizer = "adagrad";
  Output table = HashEmbeddingTable(root, "emb", attrs);
  Output ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64);
  Output splits = ops::Placeholder(root.WithOpName("splits"), DT_INT64);
  Output bag = ops::HashEmbeddingBag(root, table, ids, splits, Output(), {.combiner = "sum"});
  ops::HashEmbeddingLookup(root.WithOpName("rows"), table, ids, {.mode = "serve"});
  Output loss = ops::Sum(root.WithOpName("loss"), ops::Mul(root, bag, bag),
                         ops::Const(root, Tensor::FromVector<int32_t>({0, 1})));
  AdagradOptimizer opt({.learning_rate = 0.1});
  ASSERT_TRUE(opt.Minimize(root.WithOpName("train"), loss, {}, gs).ok());
  GlobalVariablesInitializer(root);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  const std::string train = TrainTarget(*def);
  const FeedList feeds = {{"ids", Tensor::FromVector<int64_t>({7, 1000000007, 7})},
                          {"splits", Tensor::FromVector<int64_t>({0, 2, 3})}};
  MonitoredSessionOptions opts;
  opts.checkpoint_dir = dir;
  opts.save_checkpoint_secs = 0;
  std::vector<Tensor> trained;
  {
    auto ms = MonitoredSession::Create(opts, *def);
    ASSERT_TRUE(ms.ok()) << ms.status();
    std::vector<Tensor> out;
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*ms)->Run(feeds, {}, {train}, &out).ok());
    ASSERT_TRUE((*ms)->session()->Run(feeds, {"rows:0"}, {}, &trained).ok());
    ASSERT_TRUE((*ms)->Close().ok());
  }
  auto ms = MonitoredSession::Create(opts, *def);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_THAT((*ms)->restored_from(), HasSubstr("model.ckpt-3"));
  std::vector<Tensor> restored;
  ASSERT_TRUE((*ms)->session()->Run(feeds, {"rows:0"}, {}, &restored).ok());
  ASSERT_EQ(restored[0].NumElements(), trained[0].NumElements());
  for (int64_t i = 0; i < trained[0].NumElements(); ++i) {
    EXPECT_EQ(restored[0].data<float>()[i], trained[0].data<float>()[i]) << i;
  }
  // The accumulators came back too: one more step equals one more step of
  // the uninterrupted run (checked against a fresh replay of 4 steps).
  std::vector<Tensor> out;
  ASSERT_TRUE((*ms)->Run(feeds, {}, {train}, &out).ok());
  ASSERT_TRUE((*ms)->session()->Run(feeds, {"rows:0"}, {}, &restored).ok());
  const std::string dir2 = MakeTempDir();
  opts.checkpoint_dir = dir2;
  auto replay = MonitoredSession::Create(opts, *def);
  ASSERT_TRUE(replay.ok()) << replay.status();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*replay)->Run(feeds, {}, {train}, &out).ok());
  std::vector<Tensor> expected;
  ASSERT_TRUE((*replay)->session()->Run(feeds, {"rows:0"}, {}, &expected).ok());
  for (int64_t i = 0; i < expected[0].NumElements(); ++i) {
    EXPECT_EQ(restored[0].data<float>()[i], expected[0].data<float>()[i]) << i;
  }
}

TEST(HooksTest, ProgressLineFormat) {
  EXPECT_EQ(ProgressHook::FormatLine(250, 1000, 123456.0, true, 0.5, 75, true),
            "step 250/1000  25% [======                  ]  123456 ex/s  loss 0.5  ETA 1m15s");
  EXPECT_EQ(ProgressHook::FormatLine(7, 0, 0, false, 0, -1, false), "step 7");
  EXPECT_EQ(ProgressHook::FormatLine(10, 10, 5, false, 0, 0, false), "step 10/10 100%  5 ex/s  ETA 0s");
}

TEST(HooksTest, ProgressLogSummariesProfileAndEvaluation) {
  const std::string dir = MakeTempDir();
  const tensorflow::GraphDef def = TrainGraph(/*with_iterator=*/false);
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  auto writer = SummaryWriter::Create(Env::Default(), dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<int64_t> evaluated;
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<ProgressHook>(ProgressOptions{
      .batch_size = 2, .total_steps = 10, .loss_tensor = "loss:0", .every_secs = 0,
      .out = log, .mode = ProgressOptions::Mode::kLog}));
  hooks.push_back(std::make_unique<SummarySaverHook>(
      writer->get(), SummaryOptions{.every_steps = 5, .scalars = {{"loss", "loss:0"}},
                                    .batch_size = 2}));
  hooks.push_back(std::make_unique<ProfilerHook>(3, dir + "/step3.json"));
  hooks.push_back(std::make_unique<EvaluationHook>(4, [&](Session*, int64_t step) {
    evaluated.push_back(step);
    return absl::OkStatus();
  }));
  hooks.push_back(std::make_unique<StopAtStepHook>(StopAtStepHook::LastStep(10)));
  auto ms = MonitoredSession::Create({}, def, std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  while (!(*ms)->ShouldStop()) {
    ASSERT_TRUE(
        (*ms)->Run({{"x", Tensor::FromVector<float>({1, 2})}}, {}, {TrainTarget(def)}, &out).ok());
  }
  ASSERT_TRUE((*ms)->Close().ok());
  ASSERT_TRUE((*writer)->Close().ok());

  std::fseek(log, 0, SEEK_SET);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), log));
  std::fclose(log);
  EXPECT_THAT(text, HasSubstr("step 1/10"));
  EXPECT_THAT(text, HasSubstr("step 10/10 100%"));
  EXPECT_THAT(text, HasSubstr("loss "));
  EXPECT_EQ(text.find('\r'), std::string::npos);  // log mode: plain lines

  const std::string events = ReadFile((*writer)->path());
  EXPECT_THAT(events, HasSubstr("examples_per_sec"));
  EXPECT_THAT(events, HasSubstr("loss"));
  const std::string trace = ReadFile(dir + "/step3.json");
  EXPECT_THAT(trace, HasSubstr("traceEvents"));
  EXPECT_THAT(trace, HasSubstr("ApplyGradientDescent"));
  EXPECT_EQ(evaluated, (std::vector<int64_t>{4, 8, 10}));
}


// GraphSaveables saves every HashEmbeddingTableOp node (the set
// CreateHashTables creates), including one added as a raw op, as an imported
// GraphDef has it, not only tables made by train::HashEmbeddingTable; a
// table with a container / shared_name attr is found there.
TEST(GraphSaveablesTest, SavesEveryTableNodeAtItsResourceLocation) {
  Scope root = Scope::NewRootScope();
  ops::HashEmbeddingTableAttrs raw;
  raw.dim = 2;
  raw.container = "tables";
  raw.shared_name = "raw_shared";
  ops::HashEmbeddingTableOp(root.WithOpName("raw_table"), raw);
  ops::HashEmbeddingTableAttrs made;
  made.dim = 3;
  HashEmbeddingTable(root, "made_table", made);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  auto session = Session::Create({}, *def);
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(CreateHashTables(session->get()).ok());
  auto saveables = GraphSaveables(session->get());
  ASSERT_TRUE(saveables.ok()) << saveables.status();
  std::vector<std::string> names;
  for (const auto& s : *saveables) names.push_back(s.name);
  EXPECT_THAT(names, testing::UnorderedElementsAre("raw_table", "made_table"));
  ResourceMgr* rm = (*session)->device()->resource_manager();
  EXPECT_TRUE(embedding::EmbeddingTableResource::Lookup(*rm, "tables", "raw_shared").ok());
}

}  // namespace
}  // namespace recflow::train
