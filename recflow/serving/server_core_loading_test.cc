// ServerCore's loading through its parts (version source, policy, manager):
// a slow load holds up nothing else, failed loads are retried when asked,
// and the loading options are checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "recflow/core/env.h"
#include "recflow/core/testing/thread_creation_failure.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testutil::Eventually;
using testutil::FreshDir;
using testutil::WriteAffineModel;

ServerCoreOptions TwoModels(const std::string& a, const std::string& a_base,
                            const std::string& b, const std::string& b_base) {
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig(a, a_base);
  auto* second = options.model_server_config.mutable_model_config_list()
                     ->add_config();
  second->set_name(b);
  second->set_base_path(b_base);
  options.file_system_poll_wait_seconds = 0.02;
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  return options;
}

// The version that answers a predict on `model` (x = 1: y = 1 + version,
// WriteAffineModel(dir, 1, version)), or -1 on error.
int64_t AnsweringVersion(ServerCore* core, const std::string& model) {
  PredictRequest request;
  request.model_spec.name = model;
  request.inputs["x"] = Tensor::FromVector<float>({1.f}, {1});
  PredictResponse response;
  if (!core->Predict(request, &response).ok()) return -1;
  const int64_t v = *response.model_spec.version;
  EXPECT_EQ(response.outputs.at("y").flat<float>()[0], 1.f + v);
  return v;
}

ModelVersionState StateOf(ServerCore* core, const std::string& model,
                          int64_t version) {
  StatusRequest request;
  request.model_spec.name = model;
  request.model_spec.version = version;
  StatusResponse response;
  if (!core->GetModelStatus(request, &response).ok()) {
    return ModelVersionState::kUnknown;
  }
  return response.versions.at(0).state;
}

// A load of model "slow" blocks on a latch (pre_load_hook) while model
// "fast" gets two new versions loaded and served by the poll thread; "slow"
// keeps serving its old version meanwhile, and takes the new one once
// released.
TEST(ServerCoreLoadingTest, ASlowLoadHoldsUpNeitherPollingNorOtherModels) {
  const std::string slow = FreshDir("loading_slow");
  const std::string fast = FreshDir("loading_fast");
  ASSERT_TRUE(WriteAffineModel(slow + "/1", 1.f, 1.f).ok());
  ASSERT_TRUE(WriteAffineModel(fast + "/1", 1.f, 1.f).ok());
  Notification entered, release;
  ServerCoreOptions options = TwoModels("slow", slow, "fast", fast);
  options.pre_load_hook = [&](const std::string& model, int64_t version) {
    if (model == "slow" && version == 2) {
      entered.Notify();
      release.WaitForNotification();
    }
  };
  auto core_or = ServerCore::Create(options);
  ASSERT_TRUE(core_or.ok()) << core_or.status();
  ServerCore* core = core_or->get();
  EXPECT_EQ(AnsweringVersion(core, "slow"), 1);
  EXPECT_EQ(AnsweringVersion(core, "fast"), 1);

  ASSERT_TRUE(WriteAffineModel(slow + "/2", 1.f, 2.f).ok());
  entered.WaitForNotification();
  EXPECT_EQ(StateOf(core, "slow", 2), ModelVersionState::kLoading);
  for (int64_t v = 2; v <= 3; ++v) {
    ASSERT_TRUE(WriteAffineModel(fast + "/" + std::to_string(v), 1.f, v).ok());
    EXPECT_TRUE(Eventually([&] { return AnsweringVersion(core, "fast") == v; }))
        << "fast version " << v << " was not served while slow/2 loads";
    EXPECT_TRUE(Eventually([&] {
      return core->AvailableVersions("fast") == std::vector<int64_t>{v};
    }));
  }
  EXPECT_EQ(AnsweringVersion(core, "slow"), 1);
  EXPECT_EQ(StateOf(core, "slow", 2), ModelVersionState::kLoading);

  release.Notify();
  EXPECT_TRUE(Eventually([&] { return AnsweringVersion(core, "slow") == 2; }));
  EXPECT_TRUE(Eventually(
      [&] { return core->AvailableVersions("slow") == std::vector<int64_t>{2}; }));
}

// With retries, a version whose first load fails is loaded once it can be:
// here its saved_model.pb is fixed between two attempts. The previous
// version serves meanwhile.
TEST(ServerCoreLoadingTest, AFailedLoadIsRetriedWhenAsked) {
  const std::string base = FreshDir("loading_retry");
  ASSERT_TRUE(WriteAffineModel(base + "/1", 1.f, 1.f).ok());
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("m", base);
  options.file_system_poll_wait_seconds = 0.02;
  options.max_num_load_retries = 10;
  options.load_retry_interval_micros = 50'000;
  Notification failed_once, fixed;
  options.pre_load_hook = [&](const std::string&, int64_t version) {
    if (version != 2) return;
    if (!failed_once.HasBeenNotified()) {
      failed_once.Notify();
    } else {
      fixed.WaitForNotification();
    }
  };
  auto core_or = ServerCore::Create(options);
  ASSERT_TRUE(core_or.ok()) << core_or.status();
  ServerCore* core = core_or->get();

  // Version 2 is published with a corrupt graph, fixed after its first try.
  const std::string stage = FreshDir("loading_retry_stage") + "/2";
  ASSERT_TRUE(WriteAffineModel(stage, 1.f, 2.f).ok());
  std::string good;
  Env* env = Env::Default();
  ASSERT_TRUE(ReadFileToString(env, stage + "/saved_model.pb", &good).ok());
  ASSERT_TRUE(WriteStringToFile(env, stage + "/saved_model.pb", "\x0a\xff").ok());
  ASSERT_TRUE(env->RenameFile(stage, base + "/2").ok());
  ASSERT_TRUE(Eventually([&] {
    return absl::StrContains(core->MetricsText(),
                             "recflow_serving_load_failures{model=\"m\","
                             "stage=\"load\"} 1");
  }));
  EXPECT_EQ(StateOf(core, "m", 2), ModelVersionState::kLoading);
  EXPECT_EQ(AnsweringVersion(core, "m"), 1);
  ASSERT_TRUE(WriteStringToFile(env, base + "/2/saved_model.pb", good).ok());
  fixed.Notify();
  EXPECT_TRUE(Eventually([&] { return AnsweringVersion(core, "m") == 2; }));
  EXPECT_EQ(StateOf(core, "m", 2), ModelVersionState::kAvailable);
}

TEST(ServerCoreLoadingTest, LoadingOptionsAreChecked) {
  const std::string base = FreshDir("loading_options");
  auto create = [&](auto set) {
    ServerCoreOptions options;
    options.model_server_config = SingleModelConfig("m", base);
    options.file_system_poll_wait_seconds = 0;
    set(options);
    return ServerCore::Create(options).status();
  };
  absl::Status s = create([](ServerCoreOptions& o) { o.num_load_threads = 0; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("num_load_threads is 0"));
  s = create([](ServerCoreOptions& o) { o.num_unload_threads = -1; });
  EXPECT_THAT(s.message(), HasSubstr("num_unload_threads is -1"));
  s = create([](ServerCoreOptions& o) { o.max_num_load_retries = -2; });
  EXPECT_THAT(s.message(), HasSubstr("max_num_load_retries is -2"));
  s = create([](ServerCoreOptions& o) {
    o.load_retry_interval_micros = int64_t{1} << 40;
  });
  EXPECT_THAT(s.message(), HasSubstr("load_retry_interval_micros is"));
  EXPECT_TRUE(create([](ServerCoreOptions& o) {
                o.num_unload_threads = 0;
                o.load_retry_interval_micros = -1;  // TF Serving: no wait
              }).ok());

  // Without a poll thread, the first thread Create starts is a load thread.
  absl::StatusOr<std::unique_ptr<ServerCore>> core;
  {
    ScopedThreadCreationFailure no_threads;
    ServerCoreOptions options;
    options.model_server_config = SingleModelConfig("m", base);
    options.file_system_poll_wait_seconds = 0;
    core = ServerCore::Create(options);
  }
  EXPECT_EQ(core.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(core.status().message(), HasSubstr("cannot start thread 'model_load'"));
}

}  // namespace
}  // namespace recflow::serving
