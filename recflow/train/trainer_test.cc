// Train (train/trainer.h) on a small logistic regression fed from outside
// the graph, and its pieces: FeedInputHook and InputPositionHook
// (input_hooks.h), evaluation (evaluation.h), the loop, the hooks and the
// messages of a stopped run.
#include "recflow/train/trainer.h"

#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/data_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/train/evaluation.h"
#include "recflow/train/global_step.h"
#include "recflow/train/input_hooks.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/trainer_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

// p(click) = sigmoid(w * x + b) over a batch {labels [B], x [B]} read
// through IteratorGetNext "batch" of the IteratorV2 "train_input", with
// "loss", "train", "probabilities", "batch_examples" and "init": the graph
// a TrainSpec wants. `learning_rate` 1e38 makes the loss NaN.
tensorflow::GraphDef LogisticGraph(float learning_rate = 0.5f) {
  Scope root = Scope::NewRootScope();
  const std::vector<DataType> dtypes = {DT_FLOAT, DT_FLOAT};
  const std::vector<PartialShape> shapes = {PartialShape({-1}), PartialShape({-1})};
  Output it = ops::IteratorV2(root.WithOpName("train_input"), "train_input", dtypes, shapes);
  std::vector<Output> batch = ops::IteratorGetNext(root.WithOpName("batch"), it, dtypes, shapes);
  ops::Size(root.WithOpName("batch_examples"), batch[0], DT_INT64);
  Output gs = CreateGlobalStep(root);
  Output w = Variable(root, "w", PartialShape({}), DT_FLOAT, ops::Const(root, 0.0f));
  Output b = Variable(root, "b", PartialShape({}), DT_FLOAT, ops::Const(root, 0.0f));
  Output logits = ops::Add(root, ops::Mul(root, ReadValue(root, w), batch[1]), ReadValue(root, b));
  ops::Sigmoid(root.WithOpName("probabilities"), logits);
  Output loss = ops::Mean(root.WithOpName("loss"),
                          ops::SigmoidCrossEntropyWithLogits(root, logits, batch[0]),
                          ops::Const(root, Tensor::FromVector<int32_t>({0})));
  GradientDescentOptimizer opt(learning_rate);
  auto update = opt.Minimize(root.NewSubScope("sgd"), loss, {}, gs);
  EXPECT_TRUE(update.ok()) << update.status();
  ops::NoOp(root.WithOpName("train").WithControlDependencies({*update}));
  GlobalVariablesInitializer(root);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

// `n` examples in batches of `batch`: x ~ N(0, 1), label = x + noise > 0.
data::Dataset Data(int64_t n, int64_t batch, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g;
  std::vector<float> labels, xs;
  for (int64_t i = 0; i < n; ++i) {
    const float x = g(rng);
    xs.push_back(x);
    labels.push_back(x + 0.5f * g(rng) > 0 ? 1.0f : 0.0f);
  }
  return data::Dataset::FromTensorSlices({Tensor::FromVector<float>(absl::MakeConstSpan(labels)),
                                          Tensor::FromVector<float>(absl::MakeConstSpan(xs))})
      .Batch(batch);
}

TrainSpec Spec(int64_t examples, int64_t batch, int64_t last_step = 0) {
  TrainSpec spec;
  spec.graph_def = LogisticGraph();
  spec.train_data = [=](int, int) -> absl::StatusOr<data::Dataset> {
    return Data(examples, batch);
  };
  spec.eval_data = [=]() -> absl::StatusOr<data::Dataset> { return Data(400, 100, 7); };
  spec.train_data_name = "logistic";
  spec.last_step = last_step;
  spec.batch_size = batch;
  spec.threads = 1;
  spec.save_steps = 5;
  spec.save_secs = 0;
  spec.log_every_secs = 100;
  return spec;
}

std::vector<std::string> Checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  for (int step = 0; step <= 100; ++step) {
    if (Env::Default()->FileExists(absl::StrCat(dir, "/model.ckpt-", step, ".index"))) {
      out.push_back(absl::StrCat(step));
    }
  }
  return out;
}

TEST(TrainTest, TrainsCountsExamplesCheckpointsAndEvaluates) {
  const std::string dir = TempDir();
  int writes = 0;
  TrainSpec spec = Spec(/*examples=*/1050, /*batch=*/100);
  spec.write_model_dir = [&](const std::string& d) {
    EXPECT_EQ(d, dir);
    ++writes;
    return absl::OkStatus();
  };
  auto r = Train(spec, {.model_dir = dir, .log = nullptr});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, TrainResult::Outcome::kTrained);
  EXPECT_EQ(r->steps, 11);
  EXPECT_EQ(r->examples, 1050);  // the short last batch counts its 50
  EXPECT_EQ(r->global_step, 11);
  EXPECT_EQ(r->restored_from, "");
  ASSERT_TRUE(r->eval.has_value());
  EXPECT_GT(r->eval->auc, 0.8);
  EXPECT_EQ(r->eval->count, 400);
  EXPECT_EQ(writes, 1);
  EXPECT_THAT(Checkpoints(dir), ::testing::ElementsAre("5", "10", "11"));

  // Evaluating the final checkpoint gives the final evaluation.
  auto e = EvaluateCheckpoint(spec.graph_def, dir, "", Data(400, 100, 7), {.threads = 1});
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->prefix, HasSubstr("model.ckpt-11"));
  EXPECT_DOUBLE_EQ(e->metrics.auc, r->eval->auc);
  EXPECT_EQ(e->metrics.count, 400);

  // Started again, its epoch is read: nothing to do.
  auto again = Train(spec, {.model_dir = dir, .log = nullptr});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, TrainResult::Outcome::kInputRead);
  EXPECT_THAT(again->restored_from, HasSubstr("model.ckpt-11"));
  EXPECT_THAT(Checkpoints(dir), ::testing::ElementsAre("5", "10", "11"));
}

TEST(TrainTest, ResumesWhereItStoppedAndStopsAtTheLastStep) {
  const std::string dir = TempDir();
  auto first = Train(Spec(2000, 100, /*last_step=*/7), {.model_dir = dir, .log = nullptr});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->steps, 7);
  auto more = Train(Spec(2000, 100, /*last_step=*/12), {.model_dir = dir, .log = nullptr});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->steps, 5);
  EXPECT_EQ(more->examples, 500);
  EXPECT_THAT(more->restored_from, HasSubstr("model.ckpt-7"));
  auto done = Train(Spec(2000, 100, /*last_step=*/12), {.model_dir = dir, .log = nullptr});
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->outcome, TrainResult::Outcome::kAtLastStep);
  EXPECT_EQ(done->global_step, 12);
  // Every 5 steps from where each run started.
  EXPECT_THAT(Checkpoints(dir), ::testing::ElementsAre("5", "7", "12"));
  auto finished = FindFinishedCheckpoint(dir, 12);
  ASSERT_TRUE(finished.has_value());
  EXPECT_EQ(finished->global_step, 12);
  EXPECT_FALSE(FindFinishedCheckpoint(dir, 13).has_value());
  EXPECT_FALSE(FindFinishedCheckpoint(dir, 0).has_value());
}

TEST(TrainTest, EmptyDataIsAnError) {
  auto r = Train(Spec(0, 100), {.model_dir = TempDir(), .log = nullptr});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("the training data logistic has no example"));
}

TEST(TrainTest, ADataErrorSavesTheCompletedStepsAndSaysSo) {
  const std::string dir = TempDir();
  TrainSpec spec = Spec(1000, 100);
  spec.save_steps = 0;
  spec.train_data = [](int, int) -> absl::StatusOr<data::Dataset> {
    return Data(1000, 100).Map(
        [n = 0](data::Element e) mutable -> absl::StatusOr<data::Element> {
          if (++n == 4) return errors::DataLoss("bad batch 4");
          return e;
        },
        1, {DT_FLOAT, DT_FLOAT}, {PartialShape({-1}), PartialShape({-1})});
  };
  auto r = Train(spec, {.model_dir = dir, .log = nullptr});
  EXPECT_TRUE(absl::IsDataLoss(r.status())) << r.status();
  EXPECT_THAT(r.status().message(),
              HasSubstr("bad batch 4\n  saved " + dir +
                        "/model.ckpt-3 (the last completed step); run the same command"));
}

TEST(TrainTest, ANanLossKeepsTheLastGoodCheckpoint) {
  const std::string dir = TempDir();
  TrainSpec spec = Spec(1000, 100);
  spec.graph_def = LogisticGraph(/*learning_rate=*/1e38f);
  spec.save_steps = 1;
  auto r = Train(spec, {.model_dir = dir, .log = nullptr});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("loss at step"));
  EXPECT_THAT(r.status().message(),
              HasSubstr("not saved (its variables may hold NaN or Inf); the last good "
                        "checkpoint is " + dir + "/model.ckpt-"));
}

TEST(TrainTest, ProgressGoesToTheLog) {
  const std::string dir = TempDir();
  const std::string log_path = dir + "/log.txt";
  std::FILE* log = std::fopen(log_path.c_str(), "w");
  ASSERT_NE(log, nullptr);
  TrainSpec spec = Spec(500, 100);
  spec.log_every_secs = 0;
  auto r = Train(spec, {.model_dir = dir + "/m", .log = log});
  std::fclose(log);
  ASSERT_TRUE(r.ok()) << r.status();
  std::ifstream in(log_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("step 5  "));
  EXPECT_THAT(text, HasSubstr(" ex/s  loss "));
  EXPECT_THAT(text, HasSubstr("eval at step 5: AUC "));
}

TEST(StoppedRunErrorTest, SaysWhatBecameOfTheProgress) {
  const absl::Status error = errors::DataLoss("bad");
  const std::vector<std::string> after = {"m/model.ckpt-10", "m/model.ckpt-13"};
  EXPECT_EQ(StoppedRunError(error, absl::OkStatus(), false, &after, "m/model.ckpt-10").message(),
            "bad\n  saved m/model.ckpt-13 (the last completed step); run the same command to "
            "resume from it");
  EXPECT_EQ(StoppedRunError(error, absl::OkStatus(), false, &after, "m/model.ckpt-13").message(),
            "bad\n  the newest checkpoint m/model.ckpt-13 holds every completed step");
  EXPECT_EQ(StoppedRunError(error, errors::Unavailable("disk"), false, &after, "").message(),
            "bad\n  saving the last completed step failed too: disk");
  EXPECT_EQ(StoppedRunError(error, absl::OkStatus(), true, &after, "").message(),
            "bad\n  the model after that step was not saved (its variables may hold NaN or "
            "Inf); the last good checkpoint is m/model.ckpt-13");
  const std::vector<std::string> none;
  EXPECT_THAT(StoppedRunError(error, absl::OkStatus(), true, &none, "").message(),
              HasSubstr("no checkpoint was written before it"));
  // A task that saves no checkpoint says nothing of checkpoints.
  EXPECT_EQ(StoppedRunError(error, absl::OkStatus(), false, nullptr, "").message(), "bad");
  EXPECT_TRUE(absl::IsDataLoss(StoppedRunError(error, absl::OkStatus(), false, nullptr, "")));
}

// --- Input hooks and evaluation --------------------------------------------------

absl::Status Register(Session* s, const data::Dataset& ds) {
  return data::RegisterIterator(s->device()->resource_manager(), "", kTrainInput, ds);
}

TEST(FeedInputHookTest, FeedsEachBatchAndEndsTheSessionAtTheEndOfTheData) {
  MonitoredSessionOptions opts;
  opts.setup = [](Session* s) { return Register(s, Data(250, 100)); };
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<FeedInputHook>(kTrainInput));
  auto ms = MonitoredSession::Create(opts, LogisticGraph(), std::move(hooks));
  ASSERT_TRUE(ms.ok()) << ms.status();
  LoopResult loop = RunTrainingLoop(ms->get(), {"train"});
  EXPECT_TRUE(loop.status.ok()) << loop.status;
  EXPECT_EQ(loop.steps, 3);
  EXPECT_EQ(loop.examples, 250);
  EXPECT_EQ((*ms)->global_step(), 3);
  EXPECT_FALSE((*ms)->state_unsafe_to_save());
  EXPECT_TRUE((*ms)->Close().ok());
}

TEST(FeedInputHookTest, AMissingIteratorIsNamed) {
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<FeedInputHook>("nowhere"));
  auto ms = MonitoredSession::Create({}, LogisticGraph(), std::move(hooks));
  EXPECT_TRUE(absl::IsNotFound(ms.status())) << ms.status();
  EXPECT_THAT(ms.status().message(), HasSubstr("nowhere"));
}

TEST(BatchFeedsTest, NamesEveryComponent) {
  FeedList feeds = BatchFeeds({Tensor::Scalar<float>(1), Tensor::Scalar<int64_t>(2)}, "in");
  ASSERT_EQ(feeds.size(), 2u);
  EXPECT_EQ(feeds[0].first, "in:0");
  EXPECT_EQ(feeds[1].first, "in:1");
}

// Runs `steps` steps with an InputPositionHook over the position file.
int64_t FirstLabelAfter(const std::string& path, const std::string& key, int steps,
                        bool fail_after = false) {
  MonitoredSessionOptions opts;
  opts.setup = [](Session* s) { return Register(s, Data(2000, 10)); };
  std::vector<std::unique_ptr<SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<FeedInputHook>(kTrainInput));
  hooks.push_back(std::make_unique<InputPositionHook>(InputPositionOptions{
      .iterator = kTrainInput, .path = path, .key = key, .every_secs = 1000, .log = nullptr}));
  if (fail_after) {
    hooks.push_back(std::make_unique<EvaluationHook>(
        steps, [](Session*, int64_t) { return errors::Unavailable("eval data went away"); }));
  }
  auto ms = MonitoredSession::Create(opts, LogisticGraph(), std::move(hooks));
  EXPECT_TRUE(ms.ok()) << ms.status();
  std::vector<Tensor> out;
  // The batch read first: where the position was.
  EXPECT_TRUE((*ms)->Run({}, {"batch:1"}, {"train"}, &out).ok());
  const float first = out[0].flat<float>()[0];
  for (int i = 1; i < steps; ++i) (*ms)->Run({}, {}, {"train"}, &out).IgnoreError();
  EXPECT_TRUE((*ms)->Close().ok());
  return static_cast<int64_t>(std::round(first * 1e6));
}

TEST(InputPositionHookTest, KeepsThePositionInAFileAcrossRestarts) {
  const std::string dir = TempDir();
  const std::string path = dir + "/positions/worker-1";
  const int64_t batch0 = FirstLabelAfter(dir + "/other", "k\n", 1);
  const int64_t batch3 = [&] {
    // A fresh iterator, 3 batches in.
    auto it = Data(2000, 10).MakeIterator();
    data::Element e;
    bool end = false;
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(it->GetNext(&e, &end).ok());
    return static_cast<int64_t>(std::round(e[1].flat<float>()[0] * 1e6));
  }();
  EXPECT_EQ(FirstLabelAfter(path, "k\n", 3), batch0);
  ASSERT_TRUE(Env::Default()->FileExists(path));  // saved at End
  EXPECT_EQ(FirstLabelAfter(path, "k\n", 2), batch3);
  // A file written for other data is ignored.
  EXPECT_EQ(FirstLabelAfter(path, "other data\n", 1), batch0);
}

TEST(InputPositionHookTest, SavesAfterAFailedStep) {
  const std::string dir = TempDir();
  const std::string path = dir + "/pos";
  FirstLabelAfter(path, "k\n", 2, /*fail_after=*/true);
  ASSERT_TRUE(Env::Default()->FileExists(path));
  auto it = Data(2000, 10).MakeIterator();
  data::Element e;
  bool end = false;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(it->GetNext(&e, &end).ok());
  EXPECT_EQ(FirstLabelAfter(path, "k\n", 1), static_cast<int64_t>(std::round(e[1].flat<float>()[0] * 1e6)));
}

TEST(EvaluateBatchesTest, MetricsOverTheBatchesUpToTheLimit) {
  int calls = 0;
  auto r = EvaluateBatches(
      Data(450, 100), 0,
      [&](const data::Element& e, Tensor* p) {
        ++calls;
        *p = e[0];  // the labels themselves: a perfect model
        return absl::OkStatus();
      },
      nullptr);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(r->count, 450);
  EXPECT_DOUBLE_EQ(r->auc, 1.0);
  double secs = -1;
  auto two = EvaluateBatches(
      Data(450, 100), 2,
      [](const data::Element& e, Tensor* p) {
        *p = e[0];
        return absl::OkStatus();
      },
      &secs);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->count, 200);
  EXPECT_GE(secs, 0);
  auto none = EvaluateBatches(Data(0, 100), 0, nullptr, nullptr);
  EXPECT_THAT(none.status().message(), HasSubstr("the eval data has no examples"));
}

}  // namespace
}  // namespace recflow::train
