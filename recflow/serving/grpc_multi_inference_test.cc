// MultiInference (TF Serving's multi_inference.cc) over gRPC, end to end
// through ServerCore on TF Serving's half_plus_two (TensorFlow's copy, or
// recflow's stand-in with the same signatures when the fixture is absent):
// its results, its checks and their messages; and GetModelMetadata of the
// TensorFlow 2 half_plus_two as TF Serving returns it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/serving/grpc_server.h"
#include "recflow/serving/prediction_service.grpc.pb.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace tfs = ::tensorflow::serving;

constexpr char kClassify[] = "tensorflow/serving/classify";
constexpr char kRegress[] = "tensorflow/serving/regress";

void AddExample(tfs::Input* input, std::vector<std::pair<std::string, float>> features) {
  tensorflow::Example* ex = input->mutable_example_list()->add_examples();
  for (const auto& [name, value] : features) {
    (*ex->mutable_features()->mutable_feature())[name].mutable_float_list()->add_value(value);
  }
}

void AddTask(tfs::MultiInferenceRequest* request, const std::string& model,
             const std::string& signature, const std::string& method) {
  tfs::InferenceTask* task = request->add_tasks();
  task->mutable_model_spec()->set_name(model);
  task->mutable_model_spec()->set_signature_name(signature);
  task->set_method_name(method);
}

// One ServerCore + GrpcServer serving `dir` (a version directory copied
// under a fresh base path) as model `name`.
class Served {
 public:
  Served(const std::string& name, const std::string& base) {
    ServerCoreOptions options;
    options.model_server_config = SingleModelConfig(name, base);
    options.file_system_poll_wait_seconds = 0;
    auto core = ServerCore::Create(options);
    EXPECT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    auto server = GrpcServer::Create({}, core_.get());
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    EXPECT_TRUE(server_->Start().ok());
    stub_ = tfs::PredictionService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()),
        grpc::InsecureChannelCredentials()));
  }
  ~Served() { server_->Stop(); }

  grpc::Status MultiInference(const tfs::MultiInferenceRequest& request,
                              tfs::MultiInferenceResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return stub_->MultiInference(&ctx, request, response);
  }
  grpc::Status Metadata(const tfs::GetModelMetadataRequest& request,
                        tfs::GetModelMetadataResponse* response) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return stub_->GetModelMetadata(&ctx, request, response);
  }
  ServerCore* core() { return core_.get(); }

 private:
  std::unique_ptr<ServerCore> core_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<tfs::PredictionService::Stub> stub_;
};

class MultiInferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string base = testutil::FreshDir("multi_inference");
    testutil::CopyHalfPlusTwo(base + "/00000123");
    served_ = std::make_unique<Served>("h2", base);
  }

  // Expects the call to fail with `code` and a message holding `text`.
  void ExpectError(const tfs::MultiInferenceRequest& request, grpc::StatusCode code,
                   const std::string& text) {
    tfs::MultiInferenceResponse response;
    grpc::Status s = served_->MultiInference(request, &response);
    EXPECT_EQ(s.error_code(), code) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(text));
  }

  std::unique_ptr<Served> served_;
};

TEST_F(MultiInferenceTest, RegressAndClassifyRunTogether) {
  tfs::MultiInferenceRequest request;
  AddExample(request.mutable_input(), {{"x", 2}});
  AddExample(request.mutable_input(), {{"x", -7}});
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  AddTask(&request, "h2", "classify_x_to_y", kClassify);
  AddTask(&request, "h2", "regress_x_to_y2", kRegress);
  tfs::MultiInferenceResponse response;
  grpc::Status s = served_->MultiInference(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.results_size(), 3);
  // y = 0.5x + 2, y2 = 0.5x + 3, in the tasks' order.
  const auto& r0 = response.results(0);
  ASSERT_TRUE(r0.has_regression_result());
  ASSERT_EQ(r0.regression_result().regressions_size(), 2);
  EXPECT_EQ(r0.regression_result().regressions(0).value(), 3.f);
  EXPECT_EQ(r0.regression_result().regressions(1).value(), -1.5f);
  EXPECT_EQ(r0.model_spec().name(), "h2");
  EXPECT_EQ(r0.model_spec().version().value(), 123);
  EXPECT_EQ(r0.model_spec().signature_name(), "regress_x_to_y");
  const auto& r1 = response.results(1);
  ASSERT_TRUE(r1.has_classification_result());
  ASSERT_EQ(r1.classification_result().classifications_size(), 2);
  ASSERT_EQ(r1.classification_result().classifications(0).classes_size(), 1);
  EXPECT_EQ(r1.classification_result().classifications(0).classes(0).score(), 3.f);
  EXPECT_EQ(r1.classification_result().classifications(1).classes(0).score(), -1.5f);
  EXPECT_EQ(r1.classification_result().classifications(1).classes(0).label(), "");
  EXPECT_EQ(r1.model_spec().signature_name(), "classify_x_to_y");
  const auto& r2 = response.results(2);
  EXPECT_EQ(r2.regression_result().regressions(0).value(), 4.f);
  EXPECT_EQ(r2.regression_result().regressions(1).value(), -0.5f);
}

TEST_F(MultiInferenceTest, ContextIsSharedByTheExamples) {
  tfs::MultiInferenceRequest request;
  auto* list = request.mutable_input()->mutable_example_list_with_context();
  (*list->mutable_context()->mutable_features()->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(10);
  list->add_examples();  // x from the context
  (*list->add_examples()->mutable_features()->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(1);
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  tfs::MultiInferenceResponse response;
  grpc::Status s = served_->MultiInference(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.results(0).regression_result().regressions_size(), 2);
  EXPECT_EQ(response.results(0).regression_result().regressions(0).value(), 7.f);
  EXPECT_EQ(response.results(0).regression_result().regressions(1).value(), 2.5f);
}

TEST_F(MultiInferenceTest, ChecksAsTfServing) {
  tfs::MultiInferenceRequest request;
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT, "Input is empty");

  AddExample(request.mutable_input(), {{"x", 2}, {"x2", 4}});
  request.clear_tasks();
  AddTask(&request, "h2", "ThisSignatureDoesNotExist", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "Requested signature not found in model graph: ThisSignatureDoesNotExist");

  request.clear_tasks();
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  AddTask(&request, "other_model", "regress_x_to_y", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "All ModelSpecs in a MultiInferenceRequest must access the same model name.");

  request.clear_tasks();
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  AddTask(&request, "", "regress_x_to_y2", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "Found ModelSpec with an empty model name.");

  request.clear_tasks();
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "Duplicate evaluation of signature: regress_x_to_y");

  request.clear_tasks();
  AddTask(&request, "h2", "serving_default", "tensorflow/serving/predict");
  ExpectError(request, grpc::StatusCode::UNIMPLEMENTED,
              "Unsupported signature method_name: tensorflow/serving/predict");

  request.clear_tasks();
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  AddTask(&request, "h2", "regress_x2_to_y3", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "Input tensor must be the same for all Signatures.");

  // serving_default has input "x", not "inputs".
  request.clear_tasks();
  AddTask(&request, "h2", "", kRegress);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "No regression inputs found in SignatureDef");
  // A regress signature asked to classify: no classes or scores.
  request.clear_tasks();
  AddTask(&request, "h2", "regress_x_to_y", kClassify);
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT,
              "Expected classification signature outputs to contain at least one of "
              "\"classes\" or \"scores\"");

  request.clear_tasks();
  ExpectError(request, grpc::StatusCode::INVALID_ARGUMENT, "has no tasks");
  AddTask(&request, "nope", "regress_x_to_y", kRegress);
  ExpectError(request, grpc::StatusCode::NOT_FOUND, "nope");
  request.mutable_tasks(0)->mutable_model_spec()->set_name("h2");
  request.mutable_tasks(0)->mutable_model_spec()->mutable_version()->set_value(9);
  ExpectError(request, grpc::StatusCode::NOT_FOUND, "version 9");

  // A bad example (x has two values for a [1] feature): the run's error.
  request.clear_tasks();
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  request.mutable_input()->Clear();
  AddExample(request.mutable_input(), {{"x", 1}});
  (*request.mutable_input()->mutable_example_list()->mutable_examples(0)
        ->mutable_features()->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(2);
  tfs::MultiInferenceResponse response;
  grpc::Status s = served_->MultiInference(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

TEST_F(MultiInferenceTest, CountedInTheMetrics) {
  tfs::MultiInferenceRequest request;
  AddExample(request.mutable_input(), {{"x", 2}});
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  tfs::MultiInferenceResponse response;
  ASSERT_TRUE(served_->MultiInference(request, &response).ok());
  EXPECT_THAT(served_->core()->MetricsText(),
              HasSubstr("recflow_serving_request_count{model=\"h2\",version=\"123\","
                        "api=\"multi_inference\",status=\"OK\"} 1"));
}

// TensorFlow 2's half_plus_two: every signature has the predict method name
// and its own input tensor. A task is checked by the signature's structure
// (TF Serving's default), so one task runs; two tasks read different
// input tensors.
TEST(MultiInferenceTf2Test, HalfPlusTwoWrittenByTensorFlow2) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf2);
  // The fixture's parent is a base path holding version 123 (read only).
  const std::string base = Dirname(TfTestDataPath(kHalfPlusTwoTf2));
  Served served("h2", base);
  tfs::MultiInferenceRequest request;
  AddExample(request.mutable_input(), {{"x", 4}});
  AddExample(request.mutable_input(), {{"x", 1}});
  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  tfs::MultiInferenceResponse response;
  grpc::Status s = served.MultiInference(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.results(0).regression_result().regressions_size(), 2);
  EXPECT_EQ(response.results(0).regression_result().regressions(0).value(), 4.f);
  EXPECT_EQ(response.results(0).regression_result().regressions(1).value(), 2.5f);

  request.clear_tasks();
  AddTask(&request, "h2", "classify_x_to_y", kClassify);
  s = served.MultiInference(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.results(0).classification_result().classifications(1).classes(0).score(),
            2.5f);

  AddTask(&request, "h2", "regress_x_to_y", kRegress);
  s = served.MultiInference(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Input tensor must be the same for all Signatures."));
}

// GetModelMetadata of a TensorFlow 2 SavedModel: the MetaGraph's
// signature_def map as it is, __saved_model_init_op included (TF Serving's
// get_model_metadata_impl.cc copies every entry).
TEST(GetModelMetadataTf2Test, SignatureDefMapAsTfServingReturnsIt) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf2);
  // The fixture's parent is a base path holding version 123 (read only).
  const std::string base = Dirname(TfTestDataPath(kHalfPlusTwoTf2));
  Served served("h2", base);
  tfs::GetModelMetadataRequest request;
  request.mutable_model_spec()->set_name("h2");
  request.add_metadata_field("signature_def");
  tfs::GetModelMetadataResponse response;
  grpc::Status s = served.Metadata(request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_spec().name(), "h2");
  EXPECT_EQ(response.model_spec().version().value(), 123);
  tfs::SignatureDefMap map;
  ASSERT_TRUE(response.metadata().at("signature_def").UnpackTo(&map));

  // Exactly the MetaGraph's map.
  auto saved_model = checkpoint::ReadSavedModel(Env::Default(), base + "/00000123");
  ASSERT_TRUE(saved_model.ok()) << saved_model.status();
  const auto& want = saved_model->meta_graphs(0).signature_def();
  ASSERT_EQ(map.signature_def().size(), want.size());
  for (const auto& [name, sig] : want) {
    ASSERT_TRUE(map.signature_def().contains(name)) << name;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        map.signature_def().at(name), sig))
        << name;
  }
  std::vector<std::string> names;
  for (const auto& [name, sig] : map.signature_def()) names.push_back(name);
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("__saved_model_init_op", "classify_x2_to_y3", "classify_x_to_y",
                                 "regress_x2_to_y3", "regress_x_to_y", "regress_x_to_y2",
                                 "serving_default"));
  const auto& init = map.signature_def().at("__saved_model_init_op");
  EXPECT_EQ(init.method_name(), "");
  EXPECT_EQ(init.inputs_size(), 0);
  EXPECT_EQ(init.outputs().at("__saved_model_init_op").name(), "NoOp");
  const auto& predict = map.signature_def().at("serving_default");
  EXPECT_EQ(predict.method_name(), "tensorflow/serving/predict");
  EXPECT_EQ(predict.inputs().at("x").dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(map.signature_def().at("regress_x_to_y").inputs().at("inputs").dtype(),
            tensorflow::DT_STRING);
}

}  // namespace
}  // namespace recflow::serving
