#include "recflow/serving/server_core.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "google/protobuf/text_format.h"
#include "recflow/core/env.h"
#include "recflow/core/testing/thread_creation_failure.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/proto/serving_prediction_log.pb.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testutil::CopyHalfPlusTwo;
using testutil::FreshDir;
using testutil::WriteAffineModel;

std::unique_ptr<ServerCore> MustCreate(ServerCoreOptions options) {
  auto core = ServerCore::Create(options);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? std::move(*core) : nullptr;
}

ServerCoreOptions Options(const std::string& name, const std::string& base) {
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig(name, base);
  options.file_system_poll_wait_seconds = 0;
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  return options;
}

tensorflow::Example ExampleX(std::vector<float> xs) {
  tensorflow::Example ex;
  auto& f = (*ex.mutable_features()->mutable_feature())["x"];
  for (float x : xs) f.mutable_float_list()->add_value(x);
  return ex;
}

// Predicts x on model `name` (optionally a version); returns y or empty.
std::vector<float> PredictY(ServerCore* core, const std::string& name,
                            std::vector<float> xs,
                            std::optional<int64_t> version = std::nullopt,
                            int64_t* answered = nullptr) {
  PredictRequest request;
  request.model_spec.name = name;
  request.model_spec.version = version;
  request.inputs["x"] = Tensor::FromVector<float>(
      absl::Span<const float>(xs.data(), xs.size()));
  PredictResponse response;
  absl::Status s = core->Predict(request, &response);
  EXPECT_TRUE(s.ok()) << s;
  if (!s.ok()) return {};
  if (answered != nullptr) *answered = *response.model_spec.version;
  const Tensor& y = response.outputs.at("y");
  return std::vector<float>(y.flat<float>().begin(), y.flat<float>().end());
}

std::map<int64_t, ModelVersionStatus> Statuses(ServerCore* core,
                                               const std::string& name) {
  StatusRequest request;
  request.model_spec.name = name;
  StatusResponse response;
  EXPECT_TRUE(core->GetModelStatus(request, &response).ok());
  std::map<int64_t, ModelVersionStatus> out;
  for (const auto& v : response.versions) out[v.version] = v;
  return out;
}

TEST(ServerCoreTest, PredictsWithHalfPlusTwo) {
  const std::string base = FreshDir("h2_predict");
  CopyHalfPlusTwo(base + "/00000123");
  auto core = MustCreate(Options("half_plus_two", base));
  ASSERT_NE(core, nullptr);
  EXPECT_THAT(core->AvailableVersions("half_plus_two"), ElementsAre(123));

  // TF Serving's canonical request: x as [3] for an input declared (-1, 1).
  PredictRequest request;
  request.model_spec.name = "half_plus_two";
  request.inputs["x"] = Tensor::FromVector<float>({1.f, 2.f, 5.f}, {3});
  PredictResponse response;
  absl::Status s = core->Predict(request, &response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(response.model_spec.name, "half_plus_two");
  EXPECT_EQ(response.model_spec.version, 123);
  EXPECT_EQ(response.model_spec.signature_name, "serving_default");
  const Tensor& y = response.outputs.at("y");
  EXPECT_EQ(y.shape(), TensorShape({3}));
  EXPECT_THAT(y.flat<float>(), ElementsAre(2.5f, 3.f, 4.5f));

  request.inputs["x"] = Tensor::FromVector<float>({1.f, 2.f}, {2, 1});
  ASSERT_TRUE(core->Predict(request, &response).ok());
  EXPECT_EQ(response.outputs.at("y").shape(), TensorShape({2, 1}));

  auto statuses = Statuses(core.get(), "half_plus_two");
  ASSERT_EQ(statuses.size(), 1u);
  EXPECT_EQ(statuses[123].state, ModelVersionState::kAvailable);
  EXPECT_TRUE(statuses[123].status.ok());
}

TEST(ServerCoreTest, ClassifyAndRegressWithContext) {
  const std::string base = FreshDir("h2_classify");
  CopyHalfPlusTwo(base + "/123");
  auto core = MustCreate(Options("m", base));
  ASSERT_NE(core, nullptr);

  RegressRequest reg;
  reg.model_spec.name = "m";
  reg.model_spec.signature_name = "regress_x_to_y";
  reg.input.examples = {ExampleX({1}), ExampleX({2}), ExampleX({5})};
  RegressResponse reg_out;
  ASSERT_TRUE(core->Regress(reg, &reg_out).ok());
  EXPECT_THAT(reg_out.results, ElementsAre(2.5f, 3.f, 4.5f));
  EXPECT_EQ(reg_out.model_spec.version, 123);

  // The context's x is shared; an example's own x wins.
  reg.input.context = ExampleX({10});
  reg.input.examples = {tensorflow::Example(), ExampleX({1}),
                        tensorflow::Example()};
  ASSERT_TRUE(core->Regress(reg, &reg_out).ok());
  EXPECT_THAT(reg_out.results, ElementsAre(7.f, 2.5f, 7.f));

  ClassifyRequest cls;
  cls.model_spec.name = "m";
  cls.model_spec.signature_name = "classify_x_to_y";
  cls.input.examples = {ExampleX({4}), ExampleX({-2})};
  ClassifyResponse cls_out;
  ASSERT_TRUE(core->Classify(cls, &cls_out).ok());
  ASSERT_EQ(cls_out.classifications.size(), 2u);
  ASSERT_EQ(cls_out.classifications[0].size(), 1u);
  EXPECT_EQ(cls_out.classifications[0][0].score, 4.f);
  EXPECT_EQ(cls_out.classifications[0][0].label, "");
  EXPECT_EQ(cls_out.classifications[1][0].score, 1.f);

  // Wrong method, wrong input kind, no examples.
  cls.model_spec.signature_name = "serving_default";
  absl::Status s = core->Classify(cls, &cls_out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("tensorflow/serving/classify"));
  reg.model_spec.signature_name = "regress_x2_to_y3";
  s = core->Regress(reg, &reg_out);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("one string input"));
  reg.model_spec.signature_name = "regress_x_to_y";
  reg.input = {};
  s = core->Regress(reg, &reg_out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no examples"));
}

TEST(ServerCoreTest, MetadataAndErrorsNameTheCulprit) {
  const std::string base = FreshDir("h2_errors");
  CopyHalfPlusTwo(base + "/123");
  auto core = MustCreate(Options("half_plus_two", base));
  ASSERT_NE(core, nullptr);

  MetadataRequest meta;
  meta.model_spec.name = "half_plus_two";
  MetadataResponse meta_out;
  ASSERT_TRUE(core->GetModelMetadata(meta, &meta_out).ok());
  EXPECT_EQ(meta_out.model_spec.version, 123);
  EXPECT_EQ(meta_out.signature_def.size(), 5u);
  EXPECT_EQ(meta_out.signature_def.at("serving_default").inputs().at("x").name(),
            "x:0");

  PredictRequest request;
  request.model_spec.name = "half_plus_two";
  request.inputs["x"] = Tensor::FromVector<float>({1.f}, {1});
  PredictResponse response;
  auto expect = [&](absl::StatusCode code, const std::string& text) {
    absl::Status s = core->Predict(request, &response);
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_THAT(s.message(), HasSubstr(text));
  };
  request.model_spec.name = "nope";
  expect(absl::StatusCode::kNotFound,
         "Servable not found for request: Latest(nope): model 'nope' is not "
         "served; models: half_plus_two");
  request.model_spec.name = "";
  expect(absl::StatusCode::kInvalidArgument, "model_spec.name is empty");
  request.model_spec.name = "half_plus_two";
  request.model_spec.version = 7;
  expect(absl::StatusCode::kNotFound,
         "Servable not found for request: Specific(half_plus_two, 7): "
         "version 7 of model 'half_plus_two' is not available; available "
         "versions: 123");
  request.model_spec.version.reset();
  request.model_spec.version_label = "stable";
  // TF Serving: an unknown label is InvalidArgument (REST 400).
  expect(absl::StatusCode::kInvalidArgument,
         "Unrecognized servable version label: stable");
  request.model_spec.version_label = "";
  request.model_spec.signature_name = "nope";
  expect(absl::StatusCode::kNotFound, "serving_default");
  request.model_spec.signature_name = "";
  request.output_filter = {"w"};
  expect(absl::StatusCode::kInvalidArgument,
         "output tensor alias not found in signature: w");
  request.output_filter = {};
  request.inputs["x"] = Tensor::FromVector<int32_t>({1}, {1});
  expect(absl::StatusCode::kInvalidArgument, "input 'x' must be float");
  // Shapes are the graph's to judge, as in TF Serving: x is declared
  // [-1, 1], and [1, 2] runs elementwise.
  request.inputs["x"] = Tensor::FromVector<float>({1.f, 2.f}, {1, 2});
  ASSERT_TRUE(core->Predict(request, &response).ok());
  EXPECT_TRUE(TensorsEqual(response.outputs.at("y"),
                           Tensor::FromVector<float>({2.5f, 3.f}, {1, 2})));
  request.inputs.clear();
  request.inputs["z"] = Tensor::FromVector<float>({1.f}, {1});
  expect(absl::StatusCode::kInvalidArgument, "no input 'z'");

  StatusRequest status;
  status.model_spec.name = "half_plus_two";
  status.model_spec.version = 9;
  StatusResponse status_out;
  absl::Status s = core->GetModelStatus(status, &status_out);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("versions: 123"));

  const std::string metrics = core->MetricsText();
  EXPECT_THAT(metrics,
              HasSubstr("recflow_serving_request_count{model=\"half_plus_two\","
                        "version=\"\",api=\"predict\",status=\"NOT_FOUND\"}"));
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_request_count{model=\"\","
                                 "version=\"\",api=\"predict\","
                                 "status=\"NOT_FOUND\"} 1"));
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_request_latency_seconds_count"
                                 "{model=\"half_plus_two\",version=\"123\","
                                 "api=\"metadata\"} 1"));
}

TEST(ServerCoreTest, VersionPoliciesAndLabels) {
  const std::string base = FreshDir("policies");
  for (int v = 1; v <= 3; ++v) {
    ASSERT_TRUE(WriteAffineModel(base + "/" + std::to_string(v), 2.f, v).ok());
  }
  ASSERT_TRUE(Env::Default()->RecursivelyCreateDir(base + "/not_a_version").ok());
  ASSERT_TRUE(WriteStringToFile(Env::Default(), base + "/4", "a file").ok());
  auto with_policy = [&](const std::string& text) {
    ServerCoreOptions options = Options("m", base);
    auto* config = options.model_server_config.mutable_model_config_list()
                       ->mutable_config(0);
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        text, config->mutable_model_version_policy()));
    (*config->mutable_version_labels())["stable"] = 1;
    (*config->mutable_version_labels())["canary"] = 3;
    return MustCreate(options);
  };
  EXPECT_THAT(with_policy("")->AvailableVersions("m"), ElementsAre(3));
  EXPECT_THAT(with_policy("latest { num_versions: 2 }")->AvailableVersions("m"),
              ElementsAre(2, 3));
  EXPECT_THAT(with_policy("all {}")->AvailableVersions("m"),
              ElementsAre(1, 2, 3));
  auto core = with_policy("specific { versions: 1 versions: 3 versions: 9 }");
  EXPECT_THAT(core->AvailableVersions("m"), ElementsAre(1, 3));

  int64_t answered = 0;
  EXPECT_THAT(PredictY(core.get(), "m", {1, 2}, std::nullopt, &answered),
              ElementsAre(5.f, 7.f));
  EXPECT_EQ(answered, 3);
  EXPECT_THAT(PredictY(core.get(), "m", {1}, 1), ElementsAre(3.f));

  PredictRequest request;
  request.model_spec.name = "m";
  request.model_spec.version_label = "stable";
  request.inputs["x"] = Tensor::FromVector<float>({1.f}, {1});
  PredictResponse response;
  ASSERT_TRUE(core->Predict(request, &response).ok());
  EXPECT_EQ(response.model_spec.version, 1);
  EXPECT_EQ(response.outputs.at("y").flat<float>()[0], 3.f);

  // A label pointing at a version that is not loaded.
  core = with_policy("latest { num_versions: 1 }");
  absl::Status s = core->Predict(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(),
              HasSubstr("label 'stable' of model 'm' points to version 1"));
  request.model_spec.version_label = "canary";
  EXPECT_TRUE(core->Predict(request, &response).ok());
  request.model_spec.version_label = "beta";
  s = core->Predict(request, &response);
  // TF Serving's code and message for a label the config lacks.
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Unrecognized servable version label: beta"));
  EXPECT_THAT(s.message(), HasSubstr("labels: canary, stable"));

  StatusRequest status;
  status.model_spec.name = "m";
  status.model_spec.version_label = "canary";
  StatusResponse status_out;
  ASSERT_TRUE(core->GetModelStatus(status, &status_out).ok());
  ASSERT_EQ(status_out.versions.size(), 1u);
  EXPECT_EQ(status_out.versions[0].version, 3);
  EXPECT_EQ(status_out.versions[0].state, ModelVersionState::kAvailable);
}

TEST(ServerCoreTest, NewVersionSwapsInAndCorruptOneIsReported) {
  const std::string base = FreshDir("swap");
  ASSERT_TRUE(WriteAffineModel(base + "/1", 1.f, 1.f).ok());
  auto core = MustCreate(Options("m", base));
  ASSERT_NE(core, nullptr);
  EXPECT_THAT(PredictY(core.get(), "m", {1}), ElementsAre(2.f));

  // Version 2 is corrupt: version 1 keeps serving, 2 is END with its error.
  ASSERT_TRUE(WriteAffineModel(base + "/2", 1.f, 2.f).ok());
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), base + "/2/saved_model.pb", "\x0a\xff")
          .ok());
  core->PollNow();
  EXPECT_THAT(core->AvailableVersions("m"), ElementsAre(1));
  EXPECT_THAT(PredictY(core.get(), "m", {1}), ElementsAre(2.f));
  auto statuses = Statuses(core.get(), "m");
  EXPECT_EQ(statuses[1].state, ModelVersionState::kAvailable);
  EXPECT_EQ(statuses[2].state, ModelVersionState::kEnd);
  EXPECT_THAT(statuses[2].status.message(),
              HasSubstr("loading version 2 of model 'm'"));
  EXPECT_THAT(statuses[2].status.message(), HasSubstr("saved_model.pb"));
  EXPECT_THAT(core->MetricsText(),
              HasSubstr("recflow_serving_load_failures{model=\"m\","
                        "stage=\"load\"} 1"));
  // Not retried on the next poll.
  core->PollNow();
  EXPECT_THAT(core->MetricsText(),
              HasSubstr("recflow_serving_load_failures{model=\"m\","
                        "stage=\"load\"} 1"));

  // Version 3 is good: it takes over and version 1 is unloaded.
  ASSERT_TRUE(WriteAffineModel(base + "/3", 1.f, 3.f).ok());
  core->PollNow();
  EXPECT_THAT(core->AvailableVersions("m"), ElementsAre(3));
  EXPECT_THAT(PredictY(core.get(), "m", {1}), ElementsAre(4.f));
  statuses = Statuses(core.get(), "m");
  EXPECT_EQ(statuses[1].state, ModelVersionState::kEnd);
  EXPECT_TRUE(statuses[1].status.ok());
  EXPECT_EQ(statuses[2].state, ModelVersionState::kEnd);
  EXPECT_EQ(statuses[3].state, ModelVersionState::kAvailable);

  // Deleting the served version from disk unloads it; the model then has
  // nothing to serve.
  ASSERT_TRUE(DeleteRecursively(Env::Default(), base + "/3").ok());
  ASSERT_TRUE(DeleteRecursively(Env::Default(), base + "/2").ok());
  ASSERT_TRUE(DeleteRecursively(Env::Default(), base + "/1").ok());
  core->PollNow();
  PredictRequest request;
  request.model_spec.name = "m";
  request.inputs["x"] = Tensor::FromVector<float>({1.f}, {1});
  PredictResponse response;
  absl::Status s = core->Predict(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("no available version"));
}

TEST(ServerCoreTest, StartsWithoutVersionsAndPicksThemUpByPolling) {
  const std::string base = FreshDir("empty_start");
  ServerCoreOptions options = Options("m", base);
  options.file_system_poll_wait_seconds = 0.05;
  auto core = MustCreate(options);
  ASSERT_NE(core, nullptr);
  PredictRequest request;
  request.model_spec.name = "m";
  request.inputs["x"] = Tensor::FromVector<float>({1.f}, {1});
  PredictResponse response;
  EXPECT_EQ(core->Predict(request, &response).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Statuses(core.get(), "m").empty());

  ASSERT_TRUE(WriteAffineModel(base + "/5", 3.f, 1.f).ok());
  for (int i = 0; i < 200 && core->AvailableVersions("m").empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(PredictY(core.get(), "m", {2}), ElementsAre(7.f));

  // The destructor does not wait out the poll interval.
  options.file_system_poll_wait_seconds = 100;
  auto slow = MustCreate(options);
  const auto start = std::chrono::steady_clock::now();
  slow.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));

  options.fail_if_zero_versions_at_startup = true;
  options.model_server_config = SingleModelConfig("m", FreshDir("empty2"));
  auto fail = ServerCore::Create(options);
  EXPECT_EQ(fail.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(fail.status().message(), HasSubstr("no version under"));
}

TEST(ServerCoreTest, ConfigErrors) {
  const std::string base = FreshDir("config_errors");
  auto create = [](const tensorflow::serving::ModelServerConfig& config) {
    ServerCoreOptions options;
    options.model_server_config = config;
    options.file_system_poll_wait_seconds = 0;
    return ServerCore::Create(options).status();
  };
  absl::Status s = create({});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("lists no model"));
  s = create(SingleModelConfig("m", base + "/missing"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model 'm': base_path"));
  auto config = SingleModelConfig("m", base);
  *config.mutable_model_config_list()->add_config() =
      config.model_config_list().config(0);
  s = create(config);
  EXPECT_THAT(s.message(), HasSubstr("model 'm' is listed twice"));
  config = SingleModelConfig("m", base);
  config.mutable_model_config_list()->mutable_config(0)->set_model_platform(
      "pytorch");
  s = create(config);
  EXPECT_THAT(s.message(), HasSubstr("model_platform 'pytorch'"));
  config = SingleModelConfig("", base);
  EXPECT_THAT(create(config).message(), HasSubstr("empty name"));
  config.mutable_custom_model_config();
  EXPECT_EQ(create(config).code(), absl::StatusCode::kUnimplemented);

  // Issue 22: versions that no directory can have, and a poll interval that
  // is not a number, are refused instead of silently serving nothing.
  config = SingleModelConfig("m", base);
  auto* mc = config.mutable_model_config_list()->mutable_config(0);
  mc->mutable_model_version_policy()->mutable_specific()->add_versions(3);
  mc->mutable_model_version_policy()->mutable_specific()->add_versions(-5);
  s = create(config);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("model 'm' has model_version_policy { "
                                     "specific { versions: -5 } }"));
  config = SingleModelConfig("m", base);
  (*config.mutable_model_config_list()
        ->mutable_config(0)
        ->mutable_version_labels())["stable"] = -1;
  EXPECT_THAT(create(config).message(),
              HasSubstr("label 'stable' points to version -1"));
  for (double poll : {std::nan(""), HUGE_VAL, -HUGE_VAL, 1e300}) {
    ServerCoreOptions options;
    options.model_server_config = SingleModelConfig("m", base);
    options.file_system_poll_wait_seconds = poll;
    s = ServerCore::Create(options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << poll;
    EXPECT_THAT(s.message(), HasSubstr("file_system_poll_wait_seconds is "))
        << poll;
  }
}

TEST(ServerCoreTest, ModelConfigFileRefusesAnExplicitZeroNumVersions) {
  const std::string path = FreshDir("num_versions") + "/models.config";
  tensorflow::serving::ModelServerConfig config;
  auto read = [&](const std::string& text) {
    EXPECT_TRUE(WriteStringToFile(Env::Default(), path, text).ok());
    config.Clear();
    return ReadModelServerConfigFile(Env::Default(), path, &config);
  };
  absl::Status s = read(
      "model_config_list {\n"
      "  config { name: 'a' base_path: '/a' }\n"
      "  config {\n"
      "    name: 'b' base_path: '/b'\n"
      "    model_version_policy { latest { num_versions: 0 } }\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path + "' line 5: model 'b' has "
                                            "model_version_policy { latest { "
                                            "num_versions: 0 } }"));
  // An absent num_versions is the default, 1, as in TF Serving.
  EXPECT_TRUE(read("model_config_list { config { name: 'a' base_path: '/a' "
                   "model_version_policy { latest {} } } }")
                  .ok());
  EXPECT_TRUE(read("model_config_list { config { name: 'a' base_path: '/a' "
                   "model_version_policy { latest { num_versions: 3 } } } }")
                  .ok());
  EXPECT_EQ(config.model_config_list()
                .config(0)
                .model_version_policy()
                .latest()
                .num_versions(),
            3u);
  EXPECT_THAT(read("model_config_list { config { nme: 'a' } }").message(),
              HasSubstr("nme"));
}

// An output_filter naming no output, or one twice, is refused as TF Serving
// refuses it (INVALID_ARGUMENT, its messages).
TEST(ServerCoreTest, OutputFilterIsChecked) {
  const std::string base = FreshDir("output_filter");
  ASSERT_TRUE(WriteAffineModel(base + "/1", 2.f, 1.f).ok());
  auto core = MustCreate(Options("m", base));
  ASSERT_NE(core, nullptr);
  PredictRequest request;
  request.model_spec.name = "m";
  request.inputs["x"] = Tensor::FromVector<float>({1.f, 2.f}, {2});
  PredictResponse response;
  request.output_filter = {"nope"};
  absl::Status s = core->Predict(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "output tensor alias not found in signature: nope Outputs expected "
            "to be in the set {y}.");
  request.output_filter = {"y", "y"};
  s = core->Predict(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "duplicate output tensor alias: y");
  request.output_filter = {"y"};
  ASSERT_TRUE(core->Predict(request, &response).ok());
  EXPECT_EQ(response.outputs.size(), 1u);
}

TEST(ServerCoreTest, PollThreadFailureIsAStatus) {
  ServerCoreOptions options = Options("m", FreshDir("poll_thread"));
  options.file_system_poll_wait_seconds = 1;
  absl::StatusOr<std::unique_ptr<ServerCore>> core;
  {
    ScopedThreadCreationFailure no_threads;
    core = ServerCore::Create(options);
  }
  EXPECT_EQ(core.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(core.status().message(),
              HasSubstr("cannot start thread 'model_poll'"));
}

TEST(ServerCoreTest, ReadsTfServingConfigFiles) {
  const std::string dir = FreshDir("config_files");
  const std::string path = dir + "/models.config";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), path, R"(
model_config_list {
  config {
    name: 'half_plus_two'
    base_path: '/models/half_plus_two'
    model_platform: 'tensorflow'
    model_version_policy { specific { versions: 1 versions: 2 } }
    version_labels { key: 'stable' value: 1 }
    version_labels { key: 'canary' value: 2 }
  }
  config {
    name: 'other'
    base_path: '/models/other'
    model_platform: "tensorflow"
    model_version_policy: { latest: { num_versions: 2 } }
  }
}
)")
                  .ok());
  tensorflow::serving::ModelServerConfig config;
  ASSERT_TRUE(ReadTextProtoFile(Env::Default(), path, &config).ok());
  ASSERT_EQ(config.model_config_list().config_size(), 2);
  const auto& c0 = config.model_config_list().config(0);
  EXPECT_EQ(c0.version_labels().at("canary"), 2);
  EXPECT_EQ(c0.model_version_policy().specific().versions_size(), 2);
  EXPECT_EQ(config.model_config_list()
                .config(1)
                .model_version_policy()
                .latest()
                .num_versions(),
            2u);

  ASSERT_TRUE(WriteStringToFile(Env::Default(), path,
                                "model_config_list {\n  config {\n    nme: 'x'\n"
                                "  }\n}\n")
                  .ok());
  absl::Status s = ReadTextProtoFile(Env::Default(), path, &config);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(std::string(s.message()),
              ::testing::StartsWith("Error parsing text-format "
                                    "tensorflow.serving.ModelServerConfig: 3:"));
  EXPECT_THAT(s.message(), HasSubstr("nme"));
  EXPECT_EQ(ReadTextProtoFile(Env::Default(), dir + "/none", &config).code(),
            absl::StatusCode::kNotFound);

  const std::string batching = dir + "/batching.config";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), batching,
                                "max_batch_size { value: 64 }\n"
                                "batch_timeout_micros { value: 500 }\n"
                                "num_batch_threads { value: 2 }\n"
                                "allowed_batch_sizes: 8 allowed_batch_sizes: 64\n")
                  .ok());
  tensorflow::serving::BatchingParameters params;
  ASSERT_TRUE(ReadTextProtoFile(Env::Default(), batching, &params).ok());
  EXPECT_EQ(params.max_batch_size().value(), 64);
  EXPECT_EQ(params.allowed_batch_sizes_size(), 2);

  const std::string monitoring = dir + "/monitoring.config";
  ASSERT_TRUE(WriteStringToFile(Env::Default(), monitoring,
                                "prometheus_config { enable: true, path: "
                                "'/monitoring/prometheus/metrics' }\n")
                  .ok());
  tensorflow::serving::MonitoringConfig mon;
  ASSERT_TRUE(ReadTextProtoFile(Env::Default(), monitoring, &mon).ok());
  EXPECT_TRUE(mon.prometheus_config().enable());
}

std::string PredictLogRecord(const std::string& key) {
  tensorflow::serving::PredictionLog log;
  auto* request = log.mutable_predict_log()->mutable_request();
  request->mutable_model_spec()->set_name("m");
  TensorToProto(Tensor::FromVector<float>({1.f, 2.f}, {2}),
                &(*request->mutable_inputs())[key]);
  return log.SerializeAsString();
}

TEST(ServerCoreTest, WarmupFileIsReplayedAndFailuresFailTheVersion) {
  const std::string base = FreshDir("warmup");
  const char kFile[] = "tf_serving_warmup_requests";
  ASSERT_TRUE(WriteAffineModel(base + "/1", 1.f, 0.f,
                               {{kFile, testutil::TfRecords(
                                            {PredictLogRecord("x"),
                                             PredictLogRecord("x")})}})
                  .ok());
  auto core = MustCreate(Options("m", base));
  ASSERT_NE(core, nullptr);
  EXPECT_THAT(core->AvailableVersions("m"), ElementsAre(1));

  // A warm-up request the model rejects.
  ASSERT_TRUE(WriteAffineModel(base + "/2", 1.f, 0.f,
                               {{kFile, testutil::TfRecords(
                                            {PredictLogRecord("x"),
                                             PredictLogRecord("z")})}})
                  .ok());
  // A warm-up file that is not a TFRecord file.
  ASSERT_TRUE(
      WriteAffineModel(base + "/3", 1.f, 0.f, {{kFile, "garbage bytes"}}).ok());
  // A record that is not a PredictionLog.
  ASSERT_TRUE(WriteAffineModel(base + "/4", 1.f, 0.f,
                               {{kFile, testutil::TfRecords({"\xff\xff"})}})
                  .ok());
  // An empty PredictionLog (no log kind).
  ASSERT_TRUE(WriteAffineModel(base + "/5", 1.f, 0.f,
                               {{kFile, testutil::TfRecords({""})}})
                  .ok());
  core->PollNow();
  EXPECT_THAT(core->AvailableVersions("m"), ElementsAre(1));
  auto statuses = Statuses(core.get(), "m");
  EXPECT_THAT(statuses[2].status.message(),
              HasSubstr("warming up version 2 of model 'm'"));
  EXPECT_THAT(statuses[2].status.message(), HasSubstr("record 1"));
  EXPECT_THAT(statuses[2].status.message(), HasSubstr("no input 'z'"));
  EXPECT_EQ(statuses[3].status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(statuses[3].status.message(), HasSubstr(kFile));
  EXPECT_THAT(statuses[4].status.message(), HasSubstr("not a PredictionLog"));
  EXPECT_THAT(statuses[5].status.message(), HasSubstr("unsupported"));
  EXPECT_THAT(core->MetricsText(),
              HasSubstr("recflow_serving_load_failures{model=\"m\","
                        "stage=\"warmup\"} 4"));
}

// Issue 22 item 7: a ~40-byte warm-up record declaring x as [2147483648, 1]
// with no values (TensorProto fills the shape with zeros) must not make the
// server allocate 8 GiB: warm-up records get the limits of gRPC requests.
TEST(ServerCoreTest, WarmupRecordsAndGeneratedRequestsAreBounded) {
  const std::string base = FreshDir("warmup_limits");
  tensorflow::serving::PredictionLog log;
  auto* request = log.mutable_predict_log()->mutable_request();
  request->mutable_model_spec()->set_name("m");
  tensorflow::TensorProto& x = (*request->mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 31);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  ASSERT_LT(log.ByteSizeLong(), 48u);
  ASSERT_TRUE(
      WriteAffineModel(base + "/1", 1.f, 0.f,
                       {{"tf_serving_warmup_requests",
                         testutil::TfRecords({log.SerializeAsString()})}})
          .ok());
  // Without a warm-up file, the requests made up from a signature that
  // declares a fixed huge shape are skipped (logged), the version serves.
  ASSERT_TRUE(WriteAffineModel(base + "/2", 1.f, 0.f).ok());
  const std::string pb = base + "/2/saved_model.pb";
  tensorflow::SavedModel sm;
  std::string bytes;
  ASSERT_TRUE(ReadFileToString(Env::Default(), pb, &bytes).ok());
  ASSERT_TRUE(sm.ParseFromString(bytes));
  auto* shape = (*sm.mutable_meta_graphs(0)->mutable_signature_def())["scalar"]
                    .mutable_inputs()
                    ->at("x")
                    .mutable_tensor_shape();
  shape->mutable_dim(0)->set_size(int64_t{1} << 31);
  ASSERT_TRUE(
      WriteStringToFile(Env::Default(), pb, sm.SerializeAsString()).ok());

  ServerCoreOptions options = Options("m", base);
  options.model_server_config.mutable_model_config_list()
      ->mutable_config(0)
      ->mutable_model_version_policy()
      ->mutable_all();
  auto core = MustCreate(options);
  ASSERT_NE(core, nullptr);
  EXPECT_THAT(core->AvailableVersions("m"), ElementsAre(2));
  const absl::Status s = Statuses(core.get(), "m")[1].status;
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("warming up version 1 of model 'm'"));
  EXPECT_THAT(s.message(),
              HasSubstr("input 'x' has shape [2147483648,1]: over the limit"));
}

TEST(ServerCoreTest, ReloadConfigAddsKeepsAndDropsModels) {
  const std::string base_a = FreshDir("reload_a");
  const std::string base_b = FreshDir("reload_b");
  ASSERT_TRUE(WriteAffineModel(base_a + "/1", 1.f, 1.f).ok());
  ASSERT_TRUE(WriteAffineModel(base_a + "/2", 1.f, 2.f).ok());
  ASSERT_TRUE(WriteAffineModel(base_b + "/7", 2.f, 0.f).ok());
  auto core = MustCreate(Options("a", base_a));
  ASSERT_NE(core, nullptr);
  EXPECT_THAT(core->AvailableVersions("a"), ElementsAre(2));

  // Keep "a" (now all versions, with a label) and add "b".
  tensorflow::serving::ModelServerConfig config;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "model_config_list { config { name: 'a' base_path: '" + base_a +
          "' model_version_policy { all {} } version_labels { key: 'old' "
          "value: 1 } } config { name: 'b' base_path: '" + base_b + "' } }",
      &config));
  ASSERT_TRUE(core->ReloadConfig(config).ok());
  EXPECT_THAT(core->ModelNames(), ElementsAre("a", "b"));
  EXPECT_THAT(core->AvailableVersions("a"), ElementsAre(1, 2));
  EXPECT_THAT(PredictY(core.get(), "b", {3}), ElementsAre(6.f));
  PredictRequest request;
  request.model_spec.name = "a";
  request.model_spec.version_label = "old";
  request.inputs["x"] = Tensor::FromVector<float>({1.f}, {1});
  PredictResponse response;
  ASSERT_TRUE(core->Predict(request, &response).ok());
  EXPECT_EQ(response.model_spec.version, 1);

  // A bad config changes nothing.
  tensorflow::serving::ModelServerConfig bad = config;
  bad.mutable_model_config_list()->mutable_config(1)->set_base_path(
      base_b + "/missing");
  EXPECT_EQ(core->ReloadConfig(bad).code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(core->ModelNames(), ElementsAre("a", "b"));

  // Drop "a".
  config.mutable_model_config_list()->mutable_config()->DeleteSubrange(0, 1);
  ASSERT_TRUE(core->ReloadConfig(config).ok());
  EXPECT_THAT(core->ModelNames(), ElementsAre("b"));
  request.model_spec.version_label = "";
  EXPECT_EQ(core->Predict(request, &response).code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(PredictY(core.get(), "b", {1}), ElementsAre(2.f));
}

TEST(ServerCoreTest, BatchedPredictionsAnswerEachCaller) {
  const std::string base = FreshDir("batched");
  ASSERT_TRUE(WriteAffineModel(base + "/1", 2.f, 1.f).ok());
  ServerCoreOptions options = Options("m", base);
  options.enable_batching = true;
  options.batching_parameters.mutable_max_batch_size()->set_value(16);
  options.batching_parameters.mutable_batch_timeout_micros()->set_value(2000);
  options.batching_parameters.mutable_num_batch_threads()->set_value(2);
  auto core = MustCreate(options);
  ASSERT_NE(core, nullptr);
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 30; ++i) {
        const float x = t * 1000 + i;
        std::vector<float> xs(1 + (i % 3), x);
        auto y = PredictY(core.get(), "m", xs);
        if (y.size() != xs.size() || y[0] != 2 * x + 1) ++bad;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_THAT(core->MetricsText(),
              HasSubstr("recflow_serving_batch_size_count{model=\"m\"}"));
}

}  // namespace
}  // namespace recflow::serving
