// ModelConfigFilePoller (--model_config_file_poll_wait_seconds) over a real
// ServerCore: models added, removed and re-policied by rewriting the file;
// a broken file keeps the models in force. And ServerCore's tags
// (--saved_model_tags): a MetaGraph tagged {train, serve}.
#include "recflow/serving/config_file_poller.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string ModelEntry(const std::string& name, const std::string& base,
                       const std::string& policy = "") {
  return absl::StrCat("  config { name: '", name, "' base_path: '", base,
                      "' model_platform: 'tensorflow' ", policy, "}\n");
}

std::string ConfigText(const std::vector<std::string>& entries) {
  std::string text = "model_config_list {\n";
  for (const std::string& e : entries) text += e;
  return text + "}\n";
}

absl::StatusOr<float> PredictOne(ServerCore* core, const std::string& model,
                                 float x) {
  PredictRequest request;
  request.model_spec.name = model;
  request.inputs["x"] = Tensor::FromVector<float>({x}, {1});
  PredictResponse response;
  RETURN_IF_ERROR(core->Predict(request, &response));
  return response.outputs.at("y").flat<float>()[0];
}

class ConfigFilePollerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testutil::FreshDir("config_poller");
    // Model a: y = 2x + 1 (versions 1 and 2: 3x + 1); model b: y = -x.
    ASSERT_TRUE(testutil::WriteAffineModel(dir_ + "/a/1", 2, 1).ok());
    ASSERT_TRUE(testutil::WriteAffineModel(dir_ + "/a/2", 3, 1).ok());
    ASSERT_TRUE(testutil::WriteAffineModel(dir_ + "/b/5", -1, 0).ok());
    path_ = dir_ + "/models.config";
    Write(ConfigText({ModelEntry("a", dir_ + "/a")}));
    ServerCoreOptions options;
    ASSERT_TRUE(ReadModelServerConfigFile(Env::Default(), path_,
                                          &options.model_server_config)
                    .ok());
    options.file_system_poll_wait_seconds = 0;
    auto core = ServerCore::Create(options);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    initial_ = options.model_server_config;
  }

  void Write(const std::string& text) {
    ASSERT_TRUE(WriteStringToFile(Env::Default(), path_, text).ok());
  }

  std::unique_ptr<ModelConfigFilePoller> MakePoller(double seconds) {
    ServerCore* core = core_.get();
    auto poller = ModelConfigFilePoller::Create(
        {.path = path_, .poll_wait_seconds = seconds, .initial = initial_},
        [core](const tensorflow::serving::ModelServerConfig& c) {
          return core->ReloadConfig(c);
        });
    EXPECT_TRUE(poller.ok()) << poller.status();
    return poller.ok() ? std::move(*poller) : nullptr;
  }

  std::string dir_, path_;
  tensorflow::serving::ModelServerConfig initial_;
  std::unique_ptr<ServerCore> core_;
};

TEST_F(ConfigFilePollerTest, AddsRemovesAndRepoliciesModels) {
  // An hour between polls: only PollOnce polls here.
  std::unique_ptr<ModelConfigFilePoller> poller = MakePoller(3600);
  ASSERT_NE(poller, nullptr);
  EXPECT_THAT(core_->ModelNames(), ElementsAre("a"));
  EXPECT_EQ(*PredictOne(core_.get(), "a", 2), 7.f);  // latest: version 2

  // The file unchanged: nothing applied.
  ASSERT_TRUE(poller->PollOnce().ok());
  EXPECT_EQ(poller->applied(), 0);

  // Model b added; a pinned to version 1.
  Write(ConfigText({ModelEntry("a", dir_ + "/a",
                               "model_version_policy { specific { versions: 1 } } "),
                    ModelEntry("b", dir_ + "/b")}));
  ASSERT_TRUE(poller->PollOnce().ok());
  EXPECT_EQ(poller->applied(), 1);
  EXPECT_THAT(core_->ModelNames(), ElementsAre("a", "b"));
  EXPECT_THAT(core_->AvailableVersions("b"), ElementsAre(5));
  EXPECT_EQ(*PredictOne(core_.get(), "b", 4), -4.f);
  EXPECT_TRUE(testutil::Eventually(
      [&] { return core_->AvailableVersions("a") == std::vector<int64_t>{1}; }));
  EXPECT_EQ(*PredictOne(core_.get(), "a", 2), 5.f);

  // A file that does not parse: the error (TF Serving's wording), and the
  // models in force keep serving.
  Write("model_config_list { config { name: 'a' bse_path: 'x' } }\n");
  absl::Status s = poller->PollOnce();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), StartsWith("Error parsing text-format "
                                      "tensorflow.serving.ModelServerConfig: 1:"));
  EXPECT_THAT(s.message(), HasSubstr("bse_path"));
  EXPECT_EQ(poller->applied(), 1);
  EXPECT_THAT(core_->ModelNames(), ElementsAre("a", "b"));
  EXPECT_EQ(*PredictOne(core_.get(), "b", 1), -1.f);

  // A config ServerCore refuses (a base path that does not exist): same.
  Write(ConfigText({ModelEntry("c", dir_ + "/none")}));
  s = poller->PollOnce();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model 'c'"));
  EXPECT_THAT(core_->ModelNames(), ElementsAre("a", "b"));

  // A missing file: same.
  ASSERT_TRUE(Env::Default()->DeleteFile(path_).ok());
  EXPECT_EQ(poller->PollOnce().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(core_->ModelNames(), ElementsAre("a", "b"));

  // Model a removed.
  Write(ConfigText({ModelEntry("b", dir_ + "/b")}));
  ASSERT_TRUE(poller->PollOnce().ok());
  EXPECT_EQ(poller->applied(), 2);
  EXPECT_THAT(core_->ModelNames(), ElementsAre("b"));
  EXPECT_EQ(PredictOne(core_.get(), "a", 1).status().code(),
            absl::StatusCode::kNotFound);
}

// The poll thread applies a rewritten file by itself.
TEST_F(ConfigFilePollerTest, ThePollThreadPicksUpTheFile) {
  std::unique_ptr<ModelConfigFilePoller> poller = MakePoller(0.05);
  ASSERT_NE(poller, nullptr);
  Write(ConfigText({ModelEntry("a", dir_ + "/a"), ModelEntry("b", dir_ + "/b")}));
  EXPECT_TRUE(testutil::Eventually(
      [&] { return core_->AvailableVersions("b") == std::vector<int64_t>{5}; }));
  EXPECT_GE(poller->applied(), 1);
  poller.reset();  // stops the thread promptly
  EXPECT_EQ(*PredictOne(core_.get(), "b", 3), -3.f);
}

TEST_F(ConfigFilePollerTest, CreateChecksItsOptions) {
  auto apply = [](const tensorflow::serving::ModelServerConfig&) {
    return absl::OkStatus();
  };
  for (double bad : {0.0, -1.0, 1e12, std::nan("")}) {
    auto p = ModelConfigFilePoller::Create({.path = path_, .poll_wait_seconds = bad}, apply);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_THAT(p.status().message(), HasSubstr("--model_config_file_poll_wait_seconds"));
  }
  auto p = ModelConfigFilePoller::Create({.path = "", .poll_wait_seconds = 1}, apply);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("needs a --model_config_file"));
}

// --saved_model_tags: a SavedModel whose only MetaGraph is tagged
// {train, serve} loads with exactly that tag set (any order), and with
// "serve" alone fails naming the tag sets it has.
TEST(ServerCoreTagsTest, ServesTheMetaGraphWithExactlyTheTags) {
  const std::string dir = testutil::FreshDir("tags");
  const std::string tmp = dir + "/tmp_model";
  ASSERT_TRUE(testutil::WriteAffineModel(tmp, 4, -1).ok());
  auto sm = checkpoint::ReadSavedModel(Env::Default(), tmp);
  ASSERT_TRUE(sm.ok()) << sm.status();
  auto* tags = sm->mutable_meta_graphs(0)->mutable_meta_info_def()->mutable_tags();
  tags->Clear();
  *tags->Add() = "train";
  *tags->Add() = "serve";
  ASSERT_TRUE(checkpoint::WriteSavedModel(Env::Default(), dir + "/m/3", *sm, {}).ok());

  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("m", dir + "/m");
  options.file_system_poll_wait_seconds = 0;
  options.tags = {"serve", "train"};
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  EXPECT_EQ(*PredictOne(core->get(), "m", 2), 7.f);

  options.tags = {"serve"};
  core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  StatusResponse status;
  ASSERT_TRUE((*core)->GetModelStatus({.model_spec = {.name = "m"}}, &status).ok());
  ASSERT_EQ(status.versions.size(), 1u);
  EXPECT_EQ(status.versions[0].state, ModelVersionState::kEnd);
  EXPECT_THAT(status.versions[0].status.message(), HasSubstr("{serve}"));
  EXPECT_THAT(status.versions[0].status.message(), HasSubstr("{serve,train}"));
}

}  // namespace
}  // namespace recflow::serving
