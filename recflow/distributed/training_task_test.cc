// A training cluster's tasks in one process (distributed/training_task.h,
// worker_session.h): a ps and a chief on 127.0.0.1 train a run config's
// model under MonitoredSession, checkpoint through the ps, evaluate, end
// the job; started again at its last step the job has nothing to do; a
// worker started after the end does nothing; a ps stops when asked.
#include "recflow/distributed/training_task.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/env.h"
#include "recflow/data/synthetic_writer.h"
#include "recflow/distributed/worker_session.h"
#include "recflow/models/input_pipeline.h"
#include "recflow/models/train_from_config.h"

namespace recflow::distributed {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/training_task_XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// Text written to a temporary FILE*.
class Capture {
 public:
  Capture() : file_(std::tmpfile()) {}
  ~Capture() { std::fclose(file_); }
  std::FILE* file() const { return file_; }
  std::string text() const {
    std::fflush(file_);
    std::fseek(file_, 0, SEEK_SET);
    std::string out(1 << 16, '\0');
    out.resize(std::fread(out.data(), 1, out.size(), file_));
    return out;
  }

 private:
  std::FILE* file_;
};

struct Job {
  models::RunConfig config;
  models::InputPipeline pipeline;
  models::RunGraph graph;
  std::string model_dir;
  std::string cluster;  // TF_CONFIG's "cluster": chief, worker and ps
};

Job MakeJob(int64_t steps) {
  Job job;
  const std::string dir = TempDir();
  data::SyntheticWriteOptions o;
  o.config.seed = 4;
  o.train_rows = 3000;
  o.test_rows = 300;
  o.out_dir = dir + "/data";
  o.num_threads = 1;
  EXPECT_TRUE(data::WriteSyntheticDataset(o).ok());
  const std::string yaml = absl::StrCat(
      "model: {type: fm, embedding_dim: 4, seed: 1}\n"
      "features: {dense: 13, sparse: 26, sparse_defaults: {hash_table: true}}\n"
      "data: {train: ", dir, "/data/train-*.tsv, eval: ", dir, "/data/test-*.tsv, "
      "parse_threads: 1}\n"
      "train: {batch_size: 100, epochs: 10, threads: 1, log_every_secs: 100, steps: ", steps, "}\n"
      "checkpoint: {save_steps: 10, save_secs: 0}\n");
  std::ofstream(dir + "/run.yaml") << yaml;
  job.config = *models::LoadRunConfig(Env::Default(), dir + "/run.yaml");
  job.pipeline = *models::MakeInputPipeline(job.config);
  job.graph = *models::BuildRunGraph(job.config, job.pipeline.schema, true);
  job.model_dir = dir + "/model";
  job.cluster = absl::StrCat("\"cluster\": {\"chief\": [\"127.0.0.1:", FreePort(),
                             "\"], \"worker\": [\"127.0.0.1:", FreePort(),
                             "\"], \"ps\": [\"127.0.0.1:", FreePort(), "\"]}");
  return job;
}

ClusterConfig Task(const Job& job, const std::string& type) {
  auto c = ClusterSpec::FromTfConfig(
      absl::StrCat("{", job.cluster, ", \"task\": {\"type\": \"", type, "\", \"index\": 0}}"));
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::vector<std::string> Checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  for (int step = 0; step <= 200; ++step) {
    if (Env::Default()->FileExists(absl::StrCat(dir, "/model.ckpt-", step, ".index"))) {
      out.push_back(absl::StrCat(step));
    }
  }
  return out;
}

// Runs the ps on a thread of its own; Stop() asks it to stop (as a signal).
class PsThread {
 public:
  PsThread(const Job& job, TaskOptions options) {
    options.stop_requested = [this] { return stop_.load() ? std::string("TEST") : ""; };
    options.log = log_.file();
    thread_ = std::thread([this, &job, options] {
      status_ = RunPsTask(job.graph.graph_def, Task(job, "ps"), 1, options);
    });
  }
  ~PsThread() { Stop().IgnoreError(); }
  absl::Status Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return status_;
  }
  std::string log() const { return log_.text(); }

 private:
  Capture log_;
  std::atomic<bool> stop_{false};
  absl::Status status_;
  std::thread thread_;
};

// RunTrainingTask as task 0 of `type`, saying things into out and log.
absl::Status RunTask(const Job& job, const std::string& type, TaskOptions options,
                    const Capture& out, const Capture& log) {
  options.out = out.file();
  options.log = log.file();
  return RunTrainingTask(models::MakeTrainSpec(job.config, job.pipeline, job.graph),
                         job.model_dir, Task(job, type), options);
}

TEST(TrainingTaskTest, AChiefTrainsCheckpointsEvaluatesAndEndsTheJob) {
  Job job = MakeJob(/*steps=*/25);
  TaskOptions options;
  options.eval_note = " (note)";
  {
    PsThread ps(job, options);
    Capture out, log;
    // The cluster has a worker too; the chief does not wait for it (steps).
    absl::Status s = RunTask(job, "chief", options, out, log);
    ASSERT_TRUE(s.ok()) << s << "\n" << log.text();
    EXPECT_TRUE(ps.Stop().ok());
    EXPECT_THAT(ps.log(), HasSubstr("ps task 0: done at global step 25"));
    EXPECT_THAT(out.text(), HasSubstr("chief 0: 25 steps of this worker (2500 examples)"));
    EXPECT_THAT(out.text(), HasSubstr("trained to global step 25; model in " + job.model_dir));
    EXPECT_THAT(out.text(), HasSubstr(" (2500 examples) in "));
    EXPECT_THAT(out.text(), ::testing::ContainsRegex("test AUC [0-9.]+  logloss .* \\(300 "
                                                     "examples\\) \\(note\\)"));
    EXPECT_THAT(log.text(), HasSubstr("chief 0: training worker 0 of 2, asynchronous, from "
                                      "global step 0 to 25"));
    EXPECT_THAT(log.text(), HasSubstr("eval at step 25: AUC "));
    EXPECT_THAT(Checkpoints(job.model_dir), ::testing::ElementsAre("10", "20", "25"));
    EXPECT_TRUE(Env::Default()->FileExists(job.model_dir + "/run_config.yaml"));
    EXPECT_TRUE(Env::Default()->FileExists(job.model_dir + "/input_positions/chief-0"));
  }
  // The worker, started after the job ended, finds it finished.
  {
    PsThread ps(job, options);
    // The chief starts the cluster again, at its last step: nothing to do.
    Capture out, log;
    absl::Status s = RunTask(job, "chief", options, out, log);
    ASSERT_TRUE(s.ok()) << s << "\n" << log.text();
    EXPECT_THAT(out.text(), HasSubstr("chief 0: nothing to do: the model is at global step 25, "
                                      "train.steps is 25 (" + job.model_dir + "/model.ckpt-25)"));
    EXPECT_THAT(Checkpoints(job.model_dir), ::testing::ElementsAre("10", "20", "25"));
    EXPECT_THAT(log.text(), ::testing::Not(HasSubstr("eval at step")));

    Capture wout, wlog;
    s = RunTask(job, "worker", options, wout, wlog);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_THAT(wlog.text(), HasSubstr("worker 0: the job has already finished"));
    EXPECT_TRUE(ps.Stop().ok());
  }
}

TEST(TrainingTaskTest, APsStopsWhenAsked) {
  Job job = MakeJob(10);
  PsThread ps(job, {});
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(ps.Stop().ok());
  EXPECT_THAT(ps.log(), HasSubstr("ps task 0: TEST: stopping now"));
}

TEST(TrainingTaskTest, ClustersThatCannotTrain) {
  auto only_workers = ClusterSpec::FromTfConfig(
      R"({"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(only_workers.ok());
  EXPECT_THAT(CheckTrainingCluster(*only_workers, {}).message(), HasSubstr("no ps tasks"));
  auto ok = ClusterSpec::FromTfConfig(
      R"({"cluster": {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}, "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(CheckTrainingCluster(*ok, {}).ok());
  EXPECT_THAT(CheckTrainingCluster(*ok, {.backup_workers = 1}).message(),
              HasSubstr("--backup_workers 1 must be in [0, 1)"));
}

TEST(WorkerSessionTest, CheckpointStepOfItsName) {
  EXPECT_EQ(CheckpointStep("/m/model.ckpt-120"), 120);
  EXPECT_EQ(CheckpointStep("/m-1/model.ckpt"), -1);
  EXPECT_EQ(CheckpointStep("nothing"), -1);
}

}  // namespace
}  // namespace recflow::distributed
