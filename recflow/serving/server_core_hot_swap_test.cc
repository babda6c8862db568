// Hot swap under continuous load: new versions appear while clients
// predict; one of them is corrupt. No request may fail, every answer must
// come from a real version, and a client never sees versions go backwards.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "recflow/core/env.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
using testutil::FreshDir;
using testutil::WriteAffineModel;

class HotSwapTest : public ::testing::TestWithParam<bool> {};

TEST_P(HotSwapTest, NoFailedRequestAcrossVersions) {
  const bool batching = GetParam();
  const std::string base = FreshDir(batching ? "hot_swap_b" : "hot_swap");
  const std::string staging = FreshDir(batching ? "hot_swap_b_stage"
                                                : "hot_swap_stage");
  // Version v computes y = x + v, so an answer names its version.
  ASSERT_TRUE(WriteAffineModel(base + "/1", 1.f, 1.f).ok());
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("m", base);
  options.file_system_poll_wait_seconds = 0.1;
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  options.enable_batching = batching;
  options.batching_parameters.mutable_batch_timeout_micros()->set_value(500);
  options.batching_parameters.mutable_num_batch_threads()->set_value(2);
  auto core_or = ServerCore::Create(options);
  ASSERT_TRUE(core_or.ok()) << core_or.status();
  ServerCore* core = core_or->get();

  constexpr int kLast = 7;
  constexpr int kCorrupt = 4;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0}, wrong{0}, backwards{0}, requests{0};
  std::atomic<int> max_seen{0};
  std::string first_error;
  Mutex error_mu;
  auto client = [&](int id) {
    int64_t last_version = 0;
    for (int i = 0; !stop.load(); ++i) {
      PredictRequest request;
      request.model_spec.name = "m";
      const float x = id * 1000 + (i % 100);
      request.inputs["x"] = Tensor::FromVector<float>({x, x + 1}, {2});
      PredictResponse response;
      absl::Status s = core->Predict(request, &response);
      ++requests;
      if (!s.ok()) {
        ++failures;
        MutexLock lock(&error_mu);
        if (first_error.empty()) first_error = s.ToString();
        continue;
      }
      const int64_t v = *response.model_spec.version;
      const auto y = response.outputs.at("y").flat<float>();
      if (v < 1 || v > kLast || v == kCorrupt || y[0] != x + v ||
          y[1] != x + 1 + v) {
        ++wrong;
      }
      if (v < last_version) ++backwards;
      last_version = v;
      int seen = max_seen.load();
      while (v > seen && !max_seen.compare_exchange_weak(seen, v)) {
      }
    }
  };
  std::thread c1(client, 1), c2(client, 2);

  Env* env = Env::Default();
  for (int v = 2; v <= kLast; ++v) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    const std::string stage = staging + "/" + std::to_string(v);
    ASSERT_TRUE(WriteAffineModel(stage, 1.f, v).ok());
    if (v == kCorrupt) {
      std::string pb;
      ASSERT_TRUE(ReadFileToString(env, stage + "/saved_model.pb", &pb).ok());
      ASSERT_TRUE(WriteStringToFile(env, stage + "/saved_model.pb",
                                    pb.substr(0, pb.size() / 2))
                      .ok());
    }
    ASSERT_TRUE(env->RenameFile(stage, base + "/" + std::to_string(v)).ok());
  }
  for (int i = 0; i < 300 && max_seen.load() < kLast; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  c1.join();
  c2.join();

  EXPECT_EQ(failures.load(), 0) << first_error;
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(backwards.load(), 0);
  EXPECT_GT(requests.load(), 100);
  EXPECT_EQ(max_seen.load(), kLast);

  StatusRequest status_request;
  status_request.model_spec.name = "m";
  StatusResponse status;
  ASSERT_TRUE(core->GetModelStatus(status_request, &status).ok());
  std::map<int64_t, ModelVersionStatus> by_version;
  for (const auto& v : status.versions) by_version[v.version] = v;
  EXPECT_EQ(by_version[kLast].state, ModelVersionState::kAvailable);
  EXPECT_EQ(by_version[kCorrupt].state, ModelVersionState::kEnd);
  EXPECT_FALSE(by_version[kCorrupt].status.ok());
  EXPECT_THAT(by_version[kCorrupt].status.message(),
              HasSubstr("loading version 4 of model 'm'"));
  EXPECT_EQ(core->AvailableVersions("m"), std::vector<int64_t>{kLast});
}

INSTANTIATE_TEST_SUITE_P(Batching, HotSwapTest, ::testing::Bool());

}  // namespace
}  // namespace recflow::serving
