// TrainFromConfig and EvaluateFromConfig (train_from_config.h): a run
// config trained in this process, resumed, found finished, evaluated; the
// effective config kept beside the checkpoints; the spec a cluster task
// gets.
#include "recflow/models/train_from_config.h"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/data/synthetic_writer.h"

namespace recflow::models {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/train_from_config_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A config file in DIR over gen-data's files in DIR/data (2000 train rows,
// 500 test rows), an FM in batches of 100.
RunConfig Config(const std::string& dir, const std::string& train = "") {
  data::SyntheticWriteOptions o;
  o.config.seed = 9;
  o.train_rows = 2000;
  o.test_rows = 500;
  o.out_dir = dir + "/data";
  o.num_threads = 1;
  if (!Env::Default()->FileExists(o.out_dir + "/dataset.json")) {
    auto written = data::WriteSyntheticDataset(o);
    EXPECT_TRUE(written.ok()) << written.status();
  }
  const std::string yaml = absl::StrCat(
      "model: {type: fm, embedding_dim: 4, seed: 1}\n"
      "features: {dense: 13, sparse: 26, sparse_defaults: {vocabulary_size: 1000}}\n"
      "optimizer: {embedding: {type: adagrad, learning_rate: 0.05}}\n"
      "data: {train: ", dir, "/data/train-*.tsv, eval: ", dir, "/data/test-*.tsv, "
      "parse_threads: 1}\n"
      "train: {batch_size: 100, threads: 1, log_every_secs: 100", train, "}\n"
      "checkpoint: {save_steps: 8, save_secs: 0}\n");
  std::ofstream(dir + "/run.yaml") << yaml;
  auto c = LoadRunConfig(Env::Default(), dir + "/run.yaml");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

TEST(TrainFromConfigTest, TrainsResumesFindsItFinishedAndEvaluates) {
  const std::string dir = TempDir();
  RunConfig config = Config(dir, ", steps: 12");
  const std::string model_dir = dir + "/model";
  auto r = TrainFromConfig(config, {.model_dir = model_dir, .log = nullptr});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, train::TrainResult::Outcome::kTrained);
  EXPECT_EQ(r->steps, 12);
  EXPECT_EQ(r->examples, 1200);
  ASSERT_TRUE(r->eval.has_value());
  EXPECT_EQ(r->eval->count, 500);
  EXPECT_GT(r->eval->auc, 0.5);
  // The effective config is kept for eval and export.
  EXPECT_THAT(Read(model_dir + "/run_config.yaml"), HasSubstr("steps: 12"));

  // Started again at its last step: found finished before building anything.
  auto again = TrainFromConfig(config, {.model_dir = model_dir, .log = nullptr});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, train::TrainResult::Outcome::kCheckpointAtLastStep);
  EXPECT_THAT(again->restored_from, HasSubstr("model.ckpt-12"));
  EXPECT_EQ(again->global_step, 12);

  // Further: resumes at 12.
  config.train.steps = 16;
  auto more = TrainFromConfig(config, {.model_dir = model_dir, .log = nullptr});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_EQ(more->steps, 4);
  EXPECT_THAT(more->restored_from, HasSubstr("model.ckpt-12"));

  // Evaluating the directory gives the last in-training evaluation.
  auto e = EvaluateFromConfig(config, model_dir, 0, nullptr);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_THAT(e->checkpoint.prefix, HasSubstr("model.ckpt-16"));
  EXPECT_DOUBLE_EQ(e->checkpoint.metrics.auc, more->eval->auc);
  EXPECT_EQ(e->input_report, "");
  auto two = EvaluateFromConfig(config, model_dir, 2, nullptr);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->checkpoint.metrics.count, 200);
}

// checkpoint: {open_in_place: true}: full checkpoints carry the tables'
// hash index, and a resume maps the tables instead of importing them; the
// run continues exactly as one that imported them.
TEST(TrainFromConfigTest, ResumesWithTablesOpenedInPlaceAsWithImported) {
  const std::string dir = TempDir();
  RunConfig config = Config(dir, ", steps: 12");
  for (auto& f : config.model.sparse_features) f.hash_table = true;
  config.train.open_in_place = true;
  const std::string opened = dir + "/opened", imported = dir + "/imported";
  auto r = TrainFromConfig(config, {.model_dir = opened, .log = nullptr});
  ASSERT_TRUE(r.ok()) << r.status();
  {
    auto reader = checkpoint::BundleReader::Open(Env::Default(), opened + "/model.ckpt-12");
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto names = (*reader)->ListTensors();
    ASSERT_TRUE(names.ok());
    int indexes = 0;
    for (const auto& t : *names) indexes += absl::EndsWith(t.name, "/index") ? 1 : 0;
    EXPECT_EQ(indexes, 52);  // one per hash table: FM has two per feature
  }
  std::filesystem::copy(opened, imported, std::filesystem::copy_options::recursive);
  config.train.steps = 24;
  auto a = TrainFromConfig(config, {.model_dir = opened, .log = nullptr});
  config.train.open_in_place = false;
  auto b = TrainFromConfig(config, {.model_dir = imported, .log = nullptr});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_GT(a->steps, 0);  // to the end of the epoch
  EXPECT_EQ(a->steps, b->steps);
  EXPECT_EQ(a->global_step, b->global_step);
  ASSERT_TRUE(a->eval.has_value() && b->eval.has_value());
  EXPECT_EQ(a->eval->auc, b->eval->auc);
  EXPECT_EQ(a->eval->logloss, b->eval->logloss);
}

TEST(TrainFromConfigTest, ClearErrorsBeforeAnyWork) {
  const std::string dir = TempDir();
  RunConfig config = Config(dir);
  config.data.train = "";
  auto r = TrainFromConfig(config, {.model_dir = dir + "/m", .log = nullptr});
  EXPECT_THAT(r.status().message(), HasSubstr("run.yaml: data.train is empty"));
  config = Config(dir);
  config.data.eval = "";
  auto e = EvaluateFromConfig(config, dir + "/m", 0, nullptr);
  EXPECT_THAT(e.status().message(), HasSubstr("run.yaml: data.eval is empty"));
  // No checkpoint to evaluate.
  auto none = EvaluateFromConfig(Config(dir), dir + "/nothing", 0, nullptr);
  EXPECT_FALSE(none.ok());
  // A model too large for any machine is refused before it is allocated.
  config = Config(dir);
  config.model.sparse_features[0].vocabulary_size = int64_t{1} << 40;
  auto huge = TrainFromConfig(config, {.model_dir = dir + "/huge", .log = nullptr});
  EXPECT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("run.yaml"));
  EXPECT_FALSE(Env::Default()->FileExists(dir + "/huge/run_config.yaml"));
}

// Online learning: a run with publish_interval_secs writes numbered updates
// beside its checkpoints (the first full, then deltas), records in each
// checkpoint the last one it reflects, and a resumed run numbers on from the
// log with a full update first.
TEST(TrainFromConfigTest, PublishesModelUpdates) {
  const std::string dir = TempDir();
  RunConfig config = Config(dir, ", steps: 6, publish_interval_secs: 0.000001");
  const std::string model_dir = dir + "/model";
  auto r = TrainFromConfig(config, {.model_dir = model_dir, .log = nullptr});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::string log = model_dir + "/updates";
  auto listed = checkpoint::ListUpdates(Env::Default(), log);
  ASSERT_TRUE(listed.ok()) << listed.status();
  // One at the start (full, step 0), one after every step.
  ASSERT_EQ(listed->size(), 7u);
  std::vector<checkpoint::UpdateMeta> metas;
  for (const auto& [sequence, prefix] : *listed) {
    auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto meta = checkpoint::ReadUpdateMeta(**reader);
    ASSERT_TRUE(meta.ok()) << meta.status();
    EXPECT_EQ(meta->sequence, sequence);
    metas.push_back(*meta);
  }
  EXPECT_TRUE(metas[0].full);
  EXPECT_EQ(metas[0].step, 0);
  for (size_t i = 1; i < metas.size(); ++i) {
    EXPECT_FALSE(metas[i].full);
    EXPECT_EQ(metas[i].step, static_cast<int64_t>(i));
    EXPECT_EQ(metas[i].since_step, static_cast<int64_t>(i) - 1);
    EXPECT_FALSE(metas[i].variables.empty());  // the weights change every step
  }
  // The final checkpoint records the last update published before it.
  auto ckpt = checkpoint::BundleReader::Open(Env::Default(), model_dir + "/model.ckpt-6");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto base = (*ckpt)->Lookup(checkpoint::kCheckpointUpdateKey);
  ASSERT_TRUE(base.ok()) << base.status();
  const int64_t sequence = base->flat<int64_t>()[0], step = base->flat<int64_t>()[1];
  EXPECT_GE(sequence, 6);
  EXPECT_EQ(step, metas[sequence - 1].step);

  // Resumed: numbered on, full first.
  config.train.steps = 8;
  auto more = TrainFromConfig(config, {.model_dir = model_dir, .log = nullptr});
  ASSERT_TRUE(more.ok()) << more.status();
  listed = checkpoint::ListUpdates(Env::Default(), log);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 10u);
  auto reader = checkpoint::BundleReader::Open(Env::Default(), (*listed)[7].second);
  ASSERT_TRUE(reader.ok());
  auto resumed = checkpoint::ReadUpdateMeta(**reader);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->sequence, 8);
  EXPECT_TRUE(resumed->full);
  EXPECT_EQ(resumed->step, 6);
}

TEST(MakeTrainSpecTest, TheJobOfAConfigForAnyTask) {
  const std::string dir = TempDir();
  RunConfig config = Config(dir, ", epochs: 2");
  auto p = MakeInputPipeline(config);
  ASSERT_TRUE(p.ok()) << p.status();
  auto g = BuildRunGraph(config, p->schema, true);
  ASSERT_TRUE(g.ok()) << g.status();
  train::TrainSpec spec = MakeTrainSpec(config, *p, *g);
  EXPECT_EQ(spec.train_data_name, config.data.train);
  EXPECT_EQ(spec.epochs, 2);
  EXPECT_EQ(spec.batch_size, 100);
  EXPECT_EQ(spec.save_steps, 8);
  ASSERT_TRUE(spec.eval_data != nullptr);
  // Shard 1 of 2 of two epochs: every other batch.
  auto shard = spec.train_data(2, 1);
  ASSERT_TRUE(shard.ok()) << shard.status();
  auto it = shard->MakeIterator();
  ASSERT_TRUE(it.ok());
  int batches = 0;
  for (;;) {
    data::Element e;
    bool end = false;
    ASSERT_TRUE(it->GetNext(&e, &end).ok());
    if (end) break;
    ++batches;
  }
  EXPECT_EQ(batches, 20);
  ASSERT_TRUE(spec.write_model_dir(dir + "/chief").ok());
  EXPECT_TRUE(Env::Default()->FileExists(dir + "/chief/run_config.yaml"));
}

}  // namespace
}  // namespace recflow::models
