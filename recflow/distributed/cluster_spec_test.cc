#include "recflow/distributed/cluster_spec.h"

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow::distributed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kWithChief[] = R"({
  "cluster": {
    "chief": ["host0:2222"],
    "worker": ["host1:2222", "host2:2222"],
    "ps": ["host3:2222", "host4:2222"]
  },
  "task": {"type": "worker", "index": 1},
  "environment": "cloud",
  "rpc_layer": "grpc"
})";

constexpr char kNoChief[] = R"({
  "cluster": {"worker": ["127.0.0.1:5000", "127.0.0.1:5001"],
              "ps": ["127.0.0.1:5002"]},
  "task": {"type": "worker", "index": 0}
})";

std::string WithTask(absl::string_view cluster, absl::string_view task) {
  return absl::StrCat("{\"cluster\": ", cluster, ", \"task\": ", task, "}");
}

void ExpectError(absl::string_view json, absl::string_view substr) {
  auto config = ClusterSpec::FromTfConfig(json);
  ASSERT_FALSE(config.ok()) << json;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << json;
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(substr)) << json;
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("TF_CONFIG")) << json;
}

TEST(ClusterSpecTest, TfConfigWithChief) {
  auto config = ClusterSpec::FromTfConfig(kWithChief);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->task, (TaskId{"worker", 1}));
  EXPECT_THAT(config->cluster.jobs().at("worker"), ElementsAre("host1:2222", "host2:2222"));
  EXPECT_EQ(config->num_ps(), 2);
  EXPECT_EQ(config->num_training_workers(), 3);
  EXPECT_FALSE(config->is_chief());
  EXPECT_EQ(config->training_worker_index(), 2);
  EXPECT_THAT(config->ps_addresses(), ElementsAre("host3:2222", "host4:2222"));
  EXPECT_EQ(config->chief_address(), "host0:2222");
  EXPECT_EQ(config->address(), "host2:2222");
  EXPECT_EQ(*config->cluster.ListenAddress(config->task), "host2:2222");
  EXPECT_THAT(config->cluster.Devices(),
              ElementsAre("/job:chief/task:0", "/job:ps/task:0", "/job:ps/task:1",
                          "/job:worker/task:0", "/job:worker/task:1"));
}

TEST(ClusterSpecTest, TfConfigWithoutChief) {
  auto config = ClusterSpec::FromTfConfig(kNoChief);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->is_chief());  // worker 0 without a chief job
  EXPECT_EQ(config->training_worker_index(), 0);
  EXPECT_EQ(config->num_training_workers(), 2);
  EXPECT_EQ(config->chief_address(), "127.0.0.1:5000");
  EXPECT_FALSE(config->has_chief_job());
}

TEST(ClusterSpecTest, ChiefAndTrainingIndexRules) {
  ClusterConfig config = *ClusterSpec::FromTfConfig(kWithChief);
  auto with = [&](const char* job, int index) {
    ClusterConfig c = config;
    c.task = TaskId{job, index};
    return c;
  };
  EXPECT_TRUE(with("chief", 0).is_chief());
  EXPECT_EQ(with("chief", 0).training_worker_index(), 0);
  EXPECT_FALSE(with("worker", 0).is_chief());  // there is a chief job
  EXPECT_EQ(with("worker", 0).training_worker_index(), 1);
  EXPECT_FALSE(with("ps", 0).is_chief());
  EXPECT_EQ(with("ps", 1).training_worker_index(), -1);
  EXPECT_EQ(with("evaluator", 0).training_worker_index(), -1);
  EXPECT_EQ(with("evaluator", 0).address(), "");

  ClusterConfig no_chief = *ClusterSpec::FromTfConfig(kNoChief);
  no_chief.task = TaskId{"worker", 1};
  EXPECT_FALSE(no_chief.is_chief());
  EXPECT_EQ(no_chief.training_worker_index(), 1);
  no_chief.task = TaskId{"ps", 0};
  EXPECT_FALSE(no_chief.is_chief());
  EXPECT_EQ(no_chief.address(), "127.0.0.1:5002");
}

TEST(ClusterSpecTest, DictFormJobsAndStringIndex) {
  auto config = ClusterSpec::FromTfConfig(WithTask(
      R"({"worker": {"1": "w1:1", "0": "w0:1"}, "ps": {"0": "p0:1"}})",
      R"({"type": "ps", "index": "0"})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->cluster.jobs().at("worker"), ElementsAre("w0:1", "w1:1"));
  EXPECT_EQ(config->task, (TaskId{"ps", 0}));
  EXPECT_EQ(config->address(), "p0:1");
}

TEST(ClusterSpecTest, EvaluatorOutsideTheCluster) {
  auto config = ClusterSpec::FromTfConfig(
      WithTask(R"({"worker": ["w:1"]})", R"({"type": "evaluator", "index": 0})"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->address(), "");
  EXPECT_EQ(config->training_worker_index(), -1);
  EXPECT_FALSE(config->cluster.ListenAddress(config->task).ok());
}

TEST(ClusterSpecTest, IPv6AndRoundTrip) {
  auto config = ClusterSpec::FromTfConfig(
      WithTask(R"({"worker": ["[::1]:2222", "localhost:2223"], "ps": ["10.0.0.1:1"]})",
               R"({"type": "worker", "index": 1})"));
  ASSERT_TRUE(config.ok()) << config.status();
  const std::string json = config->ToTfConfig();
  EXPECT_EQ(json,
            R"({"cluster":{"ps":["10.0.0.1:1"],"worker":["[::1]:2222","localhost:2223"]},)"
            R"("task":{"type":"worker","index":1}})");
  auto again = ClusterSpec::FromTfConfig(json);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cluster.jobs(), config->cluster.jobs());
  EXPECT_EQ(again->task, config->task);
  EXPECT_EQ(config->cluster.ToJson(),
            R"({"ps":["10.0.0.1:1"],"worker":["[::1]:2222","localhost:2223"]})");
}

TEST(ClusterSpecTest, TfConfigErrors) {
  const char* task = R"({"type": "worker", "index": 0})";
  ExpectError("", "not valid JSON");
  ExpectError("{\"cluster\": ", "not valid JSON");
  ExpectError("[1, 2]", "is a list");
  ExpectError(R"({"task": {"type": "worker", "index": 0}})", "no \"cluster\"");
  ExpectError(WithTask(R"(["a:1"])", task), "\"cluster\" is a list");
  ExpectError(WithTask("{}", task), "has no tasks");
  ExpectError(WithTask(R"({"worker": "a:1"})", task),
              "job \"worker\" is a string; a job must be a list");
  ExpectError(WithTask(R"({"worker": ["a:1", 7]})", task),
              "job \"worker\" task 1 is a number");
  ExpectError(WithTask(R"({"worker": {"0": "a:1", "2": "b:1"}})", task),
              "is a dict without task 1");
  ExpectError(WithTask(R"({"worker": {"x": "a:1"}})", task), "key \"x\"");
  ExpectError(WithTask(R"({"worker": {"0": 5}})", task), "task 0 is a number");
  ExpectError(WithTask(R"({"worker": ["a"]})", task),
              "job \"worker\" task 0: address 'a' has no port");
  ExpectError(WithTask(R"({"worker": ["a:"]})", task), "bad port ''");
  ExpectError(WithTask(R"({"worker": ["a:70000"]})", task), "bad port '70000'");
  ExpectError(WithTask(R"({"worker": ["a:0"]})", task), "bad port '0'");
  ExpectError(WithTask(R"({"worker": ["a:x1"]})", task), "bad port 'x1'");
  ExpectError(WithTask(R"({"worker": [":22"]})", task), "empty host");
  ExpectError(WithTask(R"({"worker": ["a b:22"]})", task), "bad host 'a b'");
  ExpectError(WithTask(R"({"worker": ["::1:22"]})", task), "bad host");
  ExpectError(WithTask(R"({"worker": ["[::1:22"]})", task), "unterminated '['");
  ExpectError(WithTask(R"({"worker": ["a:1"], "ps": ["a:1"]})", task),
              "duplicate address 'a:1'");
  ExpectError(R"({"cluster": {"worker": ["a:1"]}})", "no \"task\"");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", "3"), "\"task\" is a number");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", R"({"index": 0})"), "no \"type\"");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", R"({"type": "worker"})"), "no \"index\"");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", R"({"type": "worker", "index": -1})"),
              "task \"index\" is -1");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", R"({"type": "worker", "index": "one"})"),
              "task \"index\" is \"one\"");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", R"({"type": "worker", "index": 1.5})"),
              "task \"index\" is a number that is not an int");
  ExpectError(WithTask(R"({"worker": ["a:1"]})", R"({"type": "", "index": 0})"),
              "task \"type\" is empty; expected a job name");
  ExpectError(WithTask(R"({"worker": ["a:1"], "ps": ["b:1"]})", R"({"type": "ps", "index": 1})"),
              "task index 1 is out of range: job \"ps\" has 1 task");
  ExpectError(WithTask(R"({"worker": ["a:1", "b:1"]})", R"({"type": "worker", "index": 2})"),
              "has 2 tasks (indices 0..1)");
  ExpectError(WithTask(R"({"worker": ["a:1"], "ps": ["b:1"]})", R"({"type": "chief", "index": 0})"),
              "task type \"chief\" is not a job of the cluster; its jobs are: ps, worker");
}

TEST(ClusterSpecTest, FromEnv) {
  const char* original = std::getenv("TF_CONFIG");
  const std::string saved = original != nullptr ? original : "";
  unsetenv("TF_CONFIG");
  EXPECT_EQ(ClusterSpec::FromEnv().status().code(), absl::StatusCode::kNotFound);
  setenv("TF_CONFIG", "", 1);
  EXPECT_EQ(ClusterSpec::FromEnv().status().code(), absl::StatusCode::kNotFound);
  setenv("TF_CONFIG", kNoChief, 1);
  auto config = ClusterSpec::FromEnv();
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_ps(), 1);
  setenv("TF_CONFIG", "not json", 1);
  EXPECT_EQ(ClusterSpec::FromEnv().status().code(), absl::StatusCode::kInvalidArgument);
  if (original != nullptr) {
    setenv("TF_CONFIG", saved.c_str(), 1);
  } else {
    unsetenv("TF_CONFIG");
  }
}

TEST(ClusterSpecTest, FromFlags) {
  auto config = ClusterSpec::FromFlags("ps0:2222, ps1:2222", "w0:2222,w1:2222,", "", "worker", 1);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->ps_addresses(), ElementsAre("ps0:2222", "ps1:2222"));
  EXPECT_EQ(config->cluster.NumTasks("worker"), 2);
  EXPECT_FALSE(config->has_chief_job());
  EXPECT_FALSE(config->is_chief());
  EXPECT_EQ(config->training_worker_index(), 1);

  config = ClusterSpec::FromFlags("ps0:1", "w0:1", "c:1", "chief", 0);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->is_chief());
  EXPECT_EQ(config->num_training_workers(), 2);

  auto error = [](absl::Status s) { return std::string(s.message()); };
  EXPECT_THAT(error(ClusterSpec::FromFlags("ps0", "w0:1", "", "ps", 0).status()),
              HasSubstr("--ps_hosts: job \"ps\" task 0: address 'ps0' has no port"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "w0:99999", "", "ps", 0).status()),
              HasSubstr("--worker_hosts"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "w0:1", "a:1,b:1", "ps", 0).status()),
              HasSubstr("--chief_host: one chief address expected, got 2"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "p:1", "", "ps", 0).status()),
              HasSubstr("duplicate address 'p:1'"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("", "", "", "ps", 0).status()),
              HasSubstr("all empty"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "w:1", "", "", 0).status()),
              HasSubstr("--job_name is empty"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "w:1", "", "worker", 3).status()),
              HasSubstr("--job_name/--task_index: task index 3 is out of range: job "
                        "\"worker\" has 1 task"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "w:1", "", "worker", -1).status()),
              HasSubstr("--task_index is -1"));
  EXPECT_THAT(error(ClusterSpec::FromFlags("p:1", "w:1", "", "chief", 0).status()),
              HasSubstr("\"chief\" is not a job"));
}

TEST(ClusterSpecTest, CreateValidatesJobNames) {
  EXPECT_FALSE(ClusterSpec::Create({{"", {"a:1"}}}).ok());
  EXPECT_THAT(std::string(ClusterSpec::Create({{"w/x", {"a:1"}}}).status().message()),
              HasSubstr("job name \"w/x\""));
  auto spec = ClusterSpec::Create({{"worker", {"a:1"}}, {"ps", {}}});
  ASSERT_TRUE(spec.ok());
  EXPECT_FALSE(spec->HasJob("ps"));  // empty jobs are dropped
  EXPECT_EQ(spec->NumTasks("worker"), 1);
  EXPECT_EQ(spec->Address(TaskId{"worker", 1}).status().code(), absl::StatusCode::kNotFound);
}

TEST(DeviceNameTest, Format) {
  EXPECT_EQ(DeviceName(TaskId{"ps", 0}), "/job:ps/task:0");
  EXPECT_EQ(DeviceName(TaskId{"worker", 12}), "/job:worker/task:12");
}

TEST(DeviceNameTest, Parse) {
  auto d = ParseDeviceName("/job:ps/task:0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d->job, "ps");
  EXPECT_EQ(*d->task, 0);
  EXPECT_FALSE(d->replica.has_value());
  EXPECT_FALSE(d->type.has_value());

  d = ParseDeviceName("/job:ps/replica:0/task:1");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d->replica, 0);
  EXPECT_EQ(*d->task, 1);

  d = ParseDeviceName("/job:ps/task:1/device:CPU:0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d->type, "CPU");
  EXPECT_EQ(*d->id, 0);
  EXPECT_EQ(d->ToString(), "/job:ps/task:1/device:CPU:0");

  d = ParseDeviceName("/job:worker");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d->job, "worker");
  EXPECT_FALSE(d->task.has_value());  // any task

  d = ParseDeviceName("/cpu:0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(*d->type, "CPU");
  EXPECT_EQ(d->ToString(), "/device:CPU:0");

  d = ParseDeviceName("");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ToString(), "");

  for (const char* bad : {"job:ps", "/job:", "/job:ps/task:", "/job:ps/task:x", "/job:ps/task:-1",
                          "/task:0/job:ps", "/job:ps/job:w", "/job:ps/foo:1", "/job:ps//task:0",
                          "/job:ps/device:CPU:x", "/tpu:0", "/job:p s"}) {
    auto r = ParseDeviceName(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(absl::StrCat("'", bad, "'")));
  }
}

TEST(DeviceNameTest, Validate) {
  ClusterSpec spec = ClusterSpec::FromTfConfig(kWithChief)->cluster;
  EXPECT_TRUE(spec.ValidateDevice("/job:ps/task:1").ok());
  EXPECT_TRUE(spec.ValidateDevice("/job:ps/replica:0/task:0/device:CPU:0").ok());
  EXPECT_TRUE(spec.ValidateDevice("/job:worker").ok());
  EXPECT_TRUE(spec.ValidateDevice("").ok());
  EXPECT_TRUE(spec.ValidateDevice("/device:CPU:0").ok());

  absl::Status s = spec.ValidateDevice("/job:ps/task:5");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "no such device '/job:ps/task:5' in the cluster; its devices are: "
            "/job:chief/task:0, /job:ps/task:0, /job:ps/task:1, /job:worker/task:0, "
            "/job:worker/task:1");
  EXPECT_THAT(std::string(spec.ValidateDevice("/job:evaluator").message()),
              HasSubstr("no such device '/job:evaluator'"));
  EXPECT_THAT(std::string(spec.ValidateDevice("/job:ps/replica:1/task:0").message()),
              HasSubstr("no such device"));
  EXPECT_THAT(std::string(spec.ValidateDevice("/job:ps/task:0/device:GPU:0").message()),
              HasSubstr("only CPU devices"));
  EXPECT_THAT(std::string(spec.ValidateDevice("ps:0").message()), HasSubstr("bad device name"));
}

}  // namespace
}  // namespace recflow::distributed
