// GrpcServer over a real channel: a client built on TF Serving's protos (the
// generated PredictionService / ModelService stubs) against a fake
// PredictionApi with exact expected values, and end to end against
// ServerCore serving TensorFlow's half_plus_two.
#include "recflow/serving/grpc_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/core/testing/thread_creation_failure.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/model_server_config.pb.h"
#include "recflow/serving/model_service.grpc.pb.h"
#include "recflow/serving/prediction_service.grpc.pb.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace tfs = ::tensorflow::serving;

float FeatureFloat(const tensorflow::Example& ex, const std::string& name) {
  auto it = ex.features().feature().find(name);
  if (it == ex.features().feature().end()) return 0;
  return it->second.float_list().value(0);
}

tensorflow::Example ExampleWith(const std::string& name, float value) {
  tensorflow::Example ex;
  (*ex.mutable_features()->mutable_feature())[name]
      .mutable_float_list()
      ->add_value(value);
  return ex;
}

// Model "half": Predict y = x / 2 + 2 (float "x"), also "x_copy"; version
// 123. Model "error:N" answers status code N. Model "block" waits in
// Predict until Release(). Classify: classes "sum" (x + u) and "diff"
// (x - u), u from the context; Regress: x + u.
class FakeApi : public PredictionApi {
 public:
  absl::Status Predict(const PredictRequest& request,
                       PredictResponse* response) override {
    RETURN_IF_ERROR(Check(request.model_spec));
    {
      MutexLock lock(&mu_);
      last_output_filter_ = request.output_filter;
      last_label_ = request.model_spec.version_label;
    }
    if (request.model_spec.name == "block") {
      ++in_block_;
      entered_.Notify();
      release_.WaitForNotification();
    }
    auto it = request.inputs.find("x");
    if (it == request.inputs.end() || it->second.dtype() != DT_FLOAT) {
      return absl::InvalidArgumentError("input 'x' (float) is missing");
    }
    Tensor y(DT_FLOAT, it->second.shape());
    for (int64_t i = 0; i < y.NumElements(); ++i) {
      y.flat<float>()[i] = it->second.flat<float>()[i] / 2 + 2;
    }
    std::map<std::string, Tensor> all = {{"y", y}, {"x_copy", it->second}};
    if (request.output_filter.empty()) {
      response->outputs = all;
    } else {
      for (const std::string& key : request.output_filter) {
        if (!all.count(key)) {
          return absl::NotFoundError("output '" + key + "' does not exist");
        }
        response->outputs[key] = all[key];
      }
    }
    Answer(request.model_spec, &response->model_spec);
    return absl::OkStatus();
  }

  absl::Status Classify(const ClassifyRequest& request,
                        ClassifyResponse* response) override {
    RETURN_IF_ERROR(Check(request.model_spec));
    const float u =
        request.input.context ? FeatureFloat(*request.input.context, "u") : 0;
    for (const tensorflow::Example& ex : request.input.examples) {
      const float x = FeatureFloat(ex, "x");
      response->classifications.push_back({{"sum", x + u}, {"diff", x - u}});
    }
    Answer(request.model_spec, &response->model_spec);
    return absl::OkStatus();
  }

  absl::Status Regress(const RegressRequest& request,
                       RegressResponse* response) override {
    RETURN_IF_ERROR(Check(request.model_spec));
    const float u =
        request.input.context ? FeatureFloat(*request.input.context, "u") : 0;
    for (const tensorflow::Example& ex : request.input.examples) {
      response->results.push_back(FeatureFloat(ex, "x") + u);
    }
    Answer(request.model_spec, &response->model_spec);
    return absl::OkStatus();
  }

  absl::Status GetModelMetadata(const MetadataRequest& request,
                                MetadataResponse* response) override {
    RETURN_IF_ERROR(Check(request.model_spec));
    response->signature_def = Signatures();
    Answer(request.model_spec, &response->model_spec);
    return absl::OkStatus();
  }

  absl::Status GetModelStatus(const StatusRequest& request,
                              StatusResponse* response) override {
    RETURN_IF_ERROR(Check(request.model_spec));
    response->versions = {
        {122, ModelVersionState::kEnd,
         absl::DataLossError("version 122: variables.index is corrupt")},
        {123, ModelVersionState::kAvailable, absl::OkStatus()}};
    return absl::OkStatus();
  }

  static std::map<std::string, tensorflow::SignatureDef> Signatures() {
    std::map<std::string, tensorflow::SignatureDef> sigs;
    tensorflow::SignatureDef& def = sigs["serving_default"];
    def.set_method_name("tensorflow/serving/predict");
    tensorflow::TensorInfo& x = (*def.mutable_inputs())["x"];
    x.set_name("x:0");
    x.set_dtype(tensorflow::DT_FLOAT);
    x.mutable_tensor_shape()->add_dim()->set_size(-1);
    (*def.mutable_outputs())["y"].set_name("y:0");
    sigs["other"].set_method_name("tensorflow/serving/regress");
    return sigs;
  }

  void WaitUntilEntered() { entered_.WaitForNotification(); }
  // Calls that have entered "block" (and may still wait there).
  int in_block() const { return in_block_.load(); }
  void Release() { release_.Notify(); }
  std::vector<std::string> last_output_filter() {
    MutexLock lock(&mu_);
    return last_output_filter_;
  }
  std::string last_label() {
    MutexLock lock(&mu_);
    return last_label_;
  }

 private:
  static absl::Status Check(const ModelSpec& spec) {
    if (spec.name.rfind("error:", 0) == 0) {
      const int code = std::stoi(spec.name.substr(6));
      return absl::Status(static_cast<absl::StatusCode>(code),
                          "injected error " + std::to_string(code));
    }
    if (spec.name != "half" && spec.name != "block") {
      return absl::NotFoundError("model '" + spec.name + "' is not served");
    }
    if (spec.version.has_value() && *spec.version != 123) {
      return absl::NotFoundError("model '" + spec.name + "' has no version " +
                                 std::to_string(*spec.version));
    }
    return absl::OkStatus();
  }
  static void Answer(const ModelSpec& in, ModelSpec* out) {
    out->name = in.name;
    out->version = 123;
    out->signature_name =
        in.signature_name.empty() ? kDefaultSignature : in.signature_name;
  }

  Mutex mu_;
  std::vector<std::string> last_output_filter_ ABSL_GUARDED_BY(mu_);
  std::string last_label_ ABSL_GUARDED_BY(mu_);
  Notification entered_;
  Notification release_;
  std::atomic<int> in_block_{0};
};

class GrpcServerTest : public ::testing::Test {
 protected:
  void StartServer(GrpcServerOptions options = {}) {
    auto server = GrpcServer::Create(options, &api_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
    channel_ =
        grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                            grpc::InsecureChannelCredentials());
    prediction_ = tfs::PredictionService::NewStub(channel_);
    model_ = tfs::ModelService::NewStub(channel_);
  }

  static void SetDeadline(grpc::ClientContext* ctx) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(20));
  }

  grpc::Status Predict(const tfs::PredictRequest& request,
                       tfs::PredictResponse* response) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    return prediction_->Predict(&ctx, request, response);
  }

  // Predict x = 6 on model "block": returns once the FakeApi is released.
  grpc::Status PredictBlocking(tfs::PredictResponse* response) {
    tfs::PredictRequest request = HalfRequest({6});
    request.mutable_model_spec()->set_name("block");
    return Predict(request, response);
  }

  static tfs::PredictRequest HalfRequest(const std::vector<float>& xs) {
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name("half");
    tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
    x.set_dtype(tensorflow::DT_FLOAT);
    x.mutable_tensor_shape()->add_dim()->set_size(xs.size());
    for (float v : xs) x.add_float_val(v);
    return request;
  }

  FakeApi api_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tfs::PredictionService::Stub> prediction_;
  std::unique_ptr<tfs::ModelService::Stub> model_;
};

TEST_F(GrpcServerTest, PredictAnswersWithTypedFieldsAndTheVersion) {
  StartServer();
  tfs::PredictResponse response;
  grpc::Status s = Predict(HalfRequest({1, 2, 5}), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_spec().name(), "half");
  EXPECT_EQ(response.model_spec().version().value(), 123);
  EXPECT_EQ(response.model_spec().signature_name(), "serving_default");
  const tensorflow::TensorProto& y = response.outputs().at("y");
  EXPECT_EQ(y.dtype(), tensorflow::DT_FLOAT);
  ASSERT_EQ(y.tensor_shape().dim_size(), 1);
  EXPECT_EQ(y.tensor_shape().dim(0).size(), 3);
  EXPECT_THAT(y.float_val(), ElementsAre(2.5f, 3.f, 4.5f));
  EXPECT_EQ(response.outputs().size(), 2u);
}

TEST_F(GrpcServerTest, PredictRandomTensorContentAndOutputFilter) {
  GrpcServerOptions options;
  options.output_encoding.use_tensor_content = true;
  StartServer(options);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-50, 50);
  for (int round = 0; round < 5; ++round) {
    const int rows = 1 + round * 3, cols = 2 + round;
    Tensor x(DT_FLOAT, TensorShape({rows, cols}));
    for (float& v : x.flat<float>()) v = dist(rng);
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name("half");
    request.mutable_model_spec()->mutable_version()->set_value(123);
    TensorToProto(x, &(*request.mutable_inputs())["x"]);  // tensor_content
    request.add_output_filter("y");
    tfs::PredictResponse response;
    grpc::Status s = Predict(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ASSERT_EQ(response.outputs().size(), 1u);
    EXPECT_FALSE(response.outputs().at("y").tensor_content().empty());
    auto y = TensorFromProto(response.outputs().at("y"));
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->shape(), x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      ASSERT_EQ(y->flat<float>()[i], x.flat<float>()[i] / 2 + 2) << i;
    }
  }
  EXPECT_THAT(api_.last_output_filter(), ElementsAre("y"));

  tfs::PredictRequest request = HalfRequest({1});
  request.mutable_model_spec()->set_version_label("stable");
  request.add_output_filter("nope");
  tfs::PredictResponse response;
  grpc::Status s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("output 'nope'"));
  EXPECT_EQ(api_.last_label(), "stable");
}

TEST_F(GrpcServerTest, ClassifyAndRegressWithContext) {
  StartServer();
  tfs::ClassificationRequest cls;
  cls.mutable_model_spec()->set_name("half");
  auto* with_context = cls.mutable_input()->mutable_example_list_with_context();
  *with_context->mutable_context() = ExampleWith("u", 10);
  for (float x : {1.f, 2.5f, -4.f}) {
    *with_context->add_examples() = ExampleWith("x", x);
  }
  tfs::ClassificationResponse cls_out;
  grpc::ClientContext ctx1;
  SetDeadline(&ctx1);
  grpc::Status s = prediction_->Classify(&ctx1, cls, &cls_out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(cls_out.result().classifications_size(), 3);
  const auto& third = cls_out.result().classifications(2);
  ASSERT_EQ(third.classes_size(), 2);
  EXPECT_EQ(third.classes(0).label(), "sum");
  EXPECT_EQ(third.classes(0).score(), 6.f);
  EXPECT_EQ(third.classes(1).label(), "diff");
  EXPECT_EQ(third.classes(1).score(), -14.f);
  EXPECT_EQ(cls_out.result().classifications(1).classes(0).score(), 12.5f);
  EXPECT_EQ(cls_out.model_spec().version().value(), 123);

  tfs::RegressionRequest reg;
  reg.mutable_model_spec()->set_name("half");
  reg.mutable_model_spec()->set_signature_name("other");
  for (float x : {0.5f, 7.f}) {
    *reg.mutable_input()->mutable_example_list()->add_examples() =
        ExampleWith("x", x);
  }
  tfs::RegressionResponse reg_out;
  grpc::ClientContext ctx2;
  SetDeadline(&ctx2);
  s = prediction_->Regress(&ctx2, reg, &reg_out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(reg_out.result().regressions_size(), 2);
  EXPECT_EQ(reg_out.result().regressions(0).value(), 0.5f);
  EXPECT_EQ(reg_out.result().regressions(1).value(), 7.f);
  EXPECT_EQ(reg_out.model_spec().signature_name(), "other");

  // No input at all, and an empty list.
  reg.clear_input();
  grpc::ClientContext ctx3;
  SetDeadline(&ctx3);
  s = prediction_->Regress(&ctx3, reg, &reg_out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Input is empty"));
  cls.mutable_input()->mutable_example_list();
  grpc::ClientContext ctx4;
  SetDeadline(&ctx4);
  s = prediction_->Classify(&ctx4, cls, &cls_out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("no examples"));
}

TEST_F(GrpcServerTest, MetadataPacksSignatureDefMap) {
  StartServer();
  tfs::GetModelMetadataRequest request;
  request.mutable_model_spec()->set_name("half");
  request.add_metadata_field("signature_def");
  tfs::GetModelMetadataResponse response;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = prediction_->GetModelMetadata(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.model_spec().version().value(), 123);
  const google::protobuf::Any& any = response.metadata().at("signature_def");
  EXPECT_EQ(any.type_url(),
            "type.googleapis.com/tensorflow.serving.SignatureDefMap");
  tfs::SignatureDefMap map;
  ASSERT_TRUE(any.UnpackTo(&map));
  ASSERT_EQ(map.signature_def_size(), 2);
  const auto expected = FakeApi::Signatures();
  EXPECT_EQ(map.signature_def().at("serving_default").SerializeAsString(),
            expected.at("serving_default").SerializeAsString());

  request.set_metadata_field(0, "graph_def");
  grpc::ClientContext ctx2;
  SetDeadline(&ctx2);
  s = prediction_->GetModelMetadata(&ctx2, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("graph_def"));
  request.clear_metadata_field();
  grpc::ClientContext ctx3;
  SetDeadline(&ctx3);
  s = prediction_->GetModelMetadata(&ctx3, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("metadata_field"));
}

TEST_F(GrpcServerTest, ModelStatusCarriesVersionErrors) {
  StartServer();
  tfs::GetModelStatusRequest request;
  request.mutable_model_spec()->set_name("half");
  tfs::GetModelStatusResponse response;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = model_->GetModelStatus(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.model_version_status_size(), 2);
  const auto& bad = response.model_version_status(0);
  EXPECT_EQ(bad.version(), 122);
  EXPECT_EQ(bad.state(), tfs::ModelVersionStatus::END);
  EXPECT_EQ(bad.status().error_code(), tensorflow::error::DATA_LOSS);
  EXPECT_THAT(bad.status().error_message(), HasSubstr("corrupt"));
  const auto& good = response.model_version_status(1);
  EXPECT_EQ(good.version(), 123);
  EXPECT_EQ(good.state(), tfs::ModelVersionStatus::AVAILABLE);
  EXPECT_EQ(good.status().error_code(), tensorflow::error::OK);

  grpc::ClientContext ctx2;
  SetDeadline(&ctx2);
  s = model_->GetModelStatus(&ctx2, tfs::GetModelStatusRequest(), &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Missing ModelSpec"));
}

TEST_F(GrpcServerTest, ReloadConfigUsesTheHookOrIsUnimplemented) {
  StartServer();
  tfs::ReloadConfigRequest request;
  request.mutable_config()->mutable_model_config_list()->add_config()->set_name(
      "new_model");
  tfs::ReloadConfigResponse response;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  grpc::Status s = model_->HandleReloadConfigRequest(&ctx, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);

  server_.reset();
  std::string seen;
  GrpcServerOptions options;
  options.reload_config = [&](const tfs::ModelServerConfig& config) {
    seen = config.model_config_list().config(0).name();
    return seen == "new_model" ? absl::OkStatus()
                               : absl::InvalidArgumentError("bad config");
  };
  StartServer(options);
  grpc::ClientContext ctx2;
  SetDeadline(&ctx2);
  s = model_->HandleReloadConfigRequest(&ctx2, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(seen, "new_model");
  EXPECT_EQ(response.status().error_code(), tensorflow::error::OK);
  request.mutable_config()
      ->mutable_model_config_list()
      ->mutable_config(0)
      ->set_name("other");
  grpc::ClientContext ctx3;
  SetDeadline(&ctx3);
  s = model_->HandleReloadConfigRequest(&ctx3, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(), "bad config");
}

// Every absl code reaches the client as the same gRPC code and message.
TEST_F(GrpcServerTest, ErrorsKeepTheirCodeAndMessage) {
  StartServer();
  for (int code = 1; code <= 16; ++code) {
    tfs::PredictRequest request = HalfRequest({1});
    request.mutable_model_spec()->set_name("error:" + std::to_string(code));
    tfs::PredictResponse response;
    grpc::Status s = Predict(request, &response);
    EXPECT_EQ(static_cast<int>(s.error_code()), code);
    EXPECT_EQ(s.error_message(), "injected error " + std::to_string(code));
  }
  tfs::PredictRequest request = HalfRequest({1});
  request.mutable_model_spec()->set_name("unknown");
  tfs::PredictResponse response;
  grpc::Status s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("model 'unknown'"));
  request.mutable_model_spec()->set_name("half");
  request.mutable_model_spec()->mutable_version()->set_value(99);
  s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("version 99"));
}

TEST_F(GrpcServerTest, MalformedAndOversizedRequests) {
  GrpcServerOptions options;
  options.max_receive_message_bytes = 1 << 20;
  options.limits.max_tensor_elements = 1000;
  StartServer(options);
  tfs::PredictResponse response;

  tfs::PredictRequest request = HalfRequest({});
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.mutable_tensor_shape()->mutable_dim(0)->set_size(3);
  x.set_tensor_content(std::string(7, 'a'));  // 7 bytes for 3 floats
  grpc::Status s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("input 'x'"));
  EXPECT_THAT(s.error_message(), HasSubstr("7 bytes"));

  x.set_tensor_content(std::string(12, 'a'));
  x.set_dtype(static_cast<tensorflow::DataType>(77));  // no such dtype
  s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("dtype"));

  x.Clear();
  x.set_dtype(tensorflow::DT_INT64);  // fake wants float: its own error
  x.add_int64_val(1);
  s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("input 'x'"));

  x.Clear();
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1001);  // over the limit
  s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("1000 elements"));

  request.clear_model_spec();
  s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("Missing ModelSpec"));

  // 2 MiB against a 1 MiB limit: refused by gRPC before parsing.
  request = HalfRequest({});
  (*request.mutable_inputs())["x"]
      .mutable_tensor_shape()
      ->mutable_dim(0)
      ->set_size(1 << 19);
  (*request.mutable_inputs())["x"].set_tensor_content(
      std::string(size_t{2} << 20, '\0'));
  s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);

  // Garbage bytes on the Predict method: a parse failure, not a crash.
  grpc::GenericStub generic(channel_);
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  const std::string junk = "\xff\xff\xff\xff\x0f garbage";
  grpc::Slice slice(junk);
  grpc::ByteBuffer send(&slice, 1), recv;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status generic_status;
  generic.UnaryCall(&ctx, "/tensorflow.serving.PredictionService/Predict",
                    grpc::StubOptions(), &send, &recv, [&](grpc::Status st) {
                      std::lock_guard<std::mutex> lock(mu);
                      generic_status = st;
                      done = true;
                      cv.notify_all();
                    });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  EXPECT_FALSE(generic_status.ok());
  EXPECT_NE(generic_status.error_code(), grpc::StatusCode::UNAVAILABLE);

  // The server still answers.
  s = Predict(HalfRequest({4}), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(response.outputs().at("y").float_val(), ElementsAre(4.f));
}

TEST_F(GrpcServerTest, ConcurrentCallersGetTheirOwnAnswers) {
  StartServer();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::uniform_real_distribution<float> dist(-10, 10);
      for (int i = 0; i < 40; ++i) {
        const float v = dist(rng);
        tfs::PredictResponse response;
        grpc::Status s = Predict(HalfRequest({v, -v}), &response);
        if (!s.ok() || response.outputs().at("y").float_val(0) != v / 2 + 2 ||
            response.outputs().at("y").float_val(1) != -v / 2 + 2) {
          ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(GrpcServerTest, StopLetsTheCallInFlightFinish) {
  StartServer();
  grpc::Status in_flight;
  tfs::PredictResponse response;
  std::thread caller([&] { in_flight = PredictBlocking(&response); });
  api_.WaitUntilEntered();
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server_->Stop();
    stopped = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(stopped.load());  // waits for the handler
  api_.Release();
  caller.join();
  stopper.join();
  EXPECT_TRUE(stopped.load());
  ASSERT_TRUE(in_flight.ok()) << in_flight.error_message();
  EXPECT_THAT(response.outputs().at("y").float_val(), ElementsAre(5.f));
  server_->Wait();  // returns: stopped
  server_->Stop();  // idempotent

  grpc::Status after = Predict(HalfRequest({1}), &response);
  EXPECT_EQ(after.error_code(), grpc::StatusCode::UNAVAILABLE);
}

// With num_threads, callers beyond the busy threads are refused at once
// instead of queueing without bound.
TEST_F(GrpcServerTest, ThreadLimitRefusesExtraCallers) {
  GrpcServerOptions options;
  options.num_threads = 2;
  StartServer(options);
  constexpr int kCallers = 4;
  std::vector<grpc::Status> results(kCallers);
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      tfs::PredictResponse response;
      results[i] = PredictBlocking(&response);
    });
  }
  api_.WaitUntilEntered();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  tfs::PredictResponse response;
  grpc::Status extra = Predict(HalfRequest({1}), &response);
  api_.Release();
  for (auto& th : callers) th.join();
  int ok = 0, exhausted = 0;
  for (const grpc::Status& s : results) {
    ok += s.ok();
    exhausted += s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  }
  EXPECT_GE(ok, 1);
  EXPECT_EQ(ok + exhausted, kCallers);
  EXPECT_EQ(extra.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << extra.error_message();
  // Once the threads are free again, calls succeed. gRPC returns a thread
  // to the quota just after its response goes out, so on a loaded machine
  // the first call may still find none (seen once under `make test`): retry
  // for up to 2 s.
  grpc::Status after;
  for (int attempt = 0; attempt < 100; ++attempt) {
    after = Predict(HalfRequest({1}), &response);
    if (after.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(after.ok()) << after.error_message();
}

// Admission control: over max_concurrent_requests running and
// max_queued_requests queued, a model call is answered UNAVAILABLE at once,
// a queued one once it has waited max_queue_wait_ms; metadata and status
// calls are never held back; the metrics count all of it.
TEST_F(GrpcServerTest, AdmissionControlShedsCallsOverCapacity) {
  GrpcServerOptions options;
  options.max_concurrent_requests = 1;
  options.max_queued_requests = 1;
  options.max_queue_wait_ms = 60'000;
  StartServer(options);
  EXPECT_THAT(server_->MetricsText(),
              HasSubstr("recflow_serving_grpc_running_requests 0\n"));

  grpc::Status blocked, queued;
  std::thread blocker([&] {
    tfs::PredictResponse response;
    blocked = PredictBlocking(&response);
  });
  api_.WaitUntilEntered();
  tfs::PredictResponse queued_response;
  std::thread waiter([&] { queued = Predict(HalfRequest({2}), &queued_response); });
  for (int i = 0; i < 4000 && !absl::StrContains(server_->MetricsText(),
                                                 "recflow_serving_grpc_queued_requests 1\n");
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_THAT(server_->MetricsText(), HasSubstr("recflow_serving_grpc_queued_requests 1\n"));

  // The queue is full: every model method is refused at once.
  tfs::PredictResponse response;
  grpc::Status shed = Predict(HalfRequest({1}), &response);
  EXPECT_EQ(shed.error_code(), grpc::StatusCode::UNAVAILABLE) << shed.error_message();
  EXPECT_THAT(shed.error_message(), HasSubstr("server overloaded: 1 gRPC model calls running"));
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    tfs::RegressionRequest request;
    request.mutable_model_spec()->set_name("half");
    tfs::RegressionResponse out;
    EXPECT_EQ(prediction_->Regress(&ctx, request, &out).error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  // Metadata and status still answer.
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    tfs::GetModelMetadataRequest request;
    request.mutable_model_spec()->set_name("half");
    request.add_metadata_field("signature_def");
    tfs::GetModelMetadataResponse out;
    grpc::Status s = prediction_->GetModelMetadata(&ctx, request, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    tfs::GetModelStatusRequest request;
    request.mutable_model_spec()->set_name("half");
    tfs::GetModelStatusResponse out;
    grpc::Status s = model_->GetModelStatus(&ctx, request, &out);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  api_.Release();
  blocker.join();
  waiter.join();
  ASSERT_TRUE(blocked.ok()) << blocked.error_message();
  ASSERT_TRUE(queued.ok()) << queued.error_message();
  EXPECT_THAT(queued_response.outputs().at("y").float_val(), ElementsAre(3.f));
  const std::string metrics = server_->MetricsText();
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_grpc_requests_admitted_total 2\n"));
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_grpc_requests_shed_total 2\n"));
  EXPECT_THAT(metrics, HasSubstr("recflow_serving_grpc_queued_requests 0\n"));
}

TEST_F(GrpcServerTest, AdmissionControlQueueWaitAndCallerDeadline) {
  GrpcServerOptions options;
  options.max_concurrent_requests = 1;
  options.max_queue_wait_ms = 100;  // queue: 4 per running call
  StartServer(options);
  std::thread blocker([&] {
    tfs::PredictResponse response;
    EXPECT_TRUE(PredictBlocking(&response).ok());
  });
  api_.WaitUntilEntered();
  tfs::PredictResponse response;
  grpc::Status waited = Predict(HalfRequest({1}), &response);
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(waited.error_message(), HasSubstr("waited 100 ms"));
  // A caller whose deadline comes before the queue wait: DEADLINE_EXCEEDED
  // on both sides, counted as expired by the server.
  api_.Release();
  blocker.join();
  server_.reset();
  options.max_queue_wait_ms = 60'000;
  FakeApi api;
  auto server = GrpcServer::Create(options, &api);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Start().ok());
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = tfs::PredictionService::NewStub(channel);
  std::thread blocker2([&] {
    grpc::ClientContext ctx;
    SetDeadline(&ctx);
    tfs::PredictRequest request = HalfRequest({6});
    request.mutable_model_spec()->set_name("block");
    tfs::PredictResponse out;
    EXPECT_TRUE(stub->Predict(&ctx, request, &out).ok());
  });
  api.WaitUntilEntered();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    grpc::Status s = stub->Predict(&ctx, HalfRequest({1}), &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  bool expired = false;
  for (int i = 0; i < 4000 && !expired; ++i) {
    expired = absl::StrContains((*server)->MetricsText(),
                                "recflow_serving_grpc_requests_expired_total 1\n");
    if (!expired) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(expired) << (*server)->MetricsText();
  api.Release();
  blocker2.join();
}

TEST_F(GrpcServerTest, NoAdmissionControlRunsEveryCall) {
  GrpcServerOptions options;
  options.max_concurrent_requests = 0;
  StartServer(options);
  EXPECT_EQ(server_->MetricsText(), "");
  constexpr int kCallers = 6;  // more than the default 4 running
  std::vector<std::thread> callers;
  std::vector<grpc::Status> results(kCallers);
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      tfs::PredictResponse response;
      results[i] = PredictBlocking(&response);
    });
  }
  // All of them are inside the model at once (a limit would hold some back).
  for (int i = 0; i < 4000 && api_.in_block() < kCallers; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(api_.in_block(), kCallers);
  api_.Release();
  for (auto& th : callers) th.join();
  for (const grpc::Status& s : results) EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(GrpcServerTest, StartAndOptionErrors) {
  StartServer();
  EXPECT_EQ(server_->Start().code(), absl::StatusCode::kFailedPrecondition);

  GrpcServerOptions same_port;
  same_port.port = server_->port();
  auto second = GrpcServer::Create(same_port, &api_);
  ASSERT_TRUE(second.ok());
  absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr(std::to_string(server_->port())));
  (*second)->Wait();  // never started: returns at once

  GrpcServerOptions bad;
  bad.port = 70000;
  EXPECT_EQ(GrpcServer::Create(bad, &api_).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.max_receive_message_bytes = 0;
  EXPECT_EQ(GrpcServer::Create(bad, &api_).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = {};
  bad.max_concurrent_requests = -1;
  EXPECT_THAT(GrpcServer::Create(bad, &api_).status().message(),
              HasSubstr("max_concurrent_requests -1 must be >= 0"));
  bad = {};
  bad.max_queue_wait_ms = 0;
  EXPECT_THAT(GrpcServer::Create(bad, &api_).status().message(),
              HasSubstr("max_queue_wait_ms must be > 0"));
  bad = {};
  bad.num_threads = 100000;
  EXPECT_THAT(GrpcServer::Create(bad, &api_).status().message(),
              HasSubstr("num_threads is 100000; must be between 0 and 4096"));
  EXPECT_EQ(GrpcServer::Create({}, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// gRPC aborts when it cannot start its threads; Start refuses first.
TEST(GrpcServerThreadsTest, StartWithoutThreadsIsAStatus) {
  FakeApi api;
  auto server = GrpcServer::Create({}, &api);
  ASSERT_TRUE(server.ok());
  absl::Status s;
  {
    ScopedThreadCreationFailure no_threads;
    s = (*server)->Start();
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("gRPC server on 127.0.0.1:0"));
  EXPECT_THAT(s.message(), HasSubstr("cannot start thread"));
}

// End to end: TF Serving's own test model through ServerCore, called with
// TF Serving's protos.
TEST(GrpcServerEndToEndTest, HalfPlusTwoThroughServerCore) {
  const std::string base = testutil::FreshDir("grpc_h2");
  testutil::CopyHalfPlusTwo(base + "/00000123");
  ServerCoreOptions core_options;
  core_options.model_server_config = SingleModelConfig("half_plus_two", base);
  core_options.file_system_poll_wait_seconds = 0;
  auto core = ServerCore::Create(core_options);
  ASSERT_TRUE(core.ok()) << core.status();
  auto server = GrpcServer::Create({}, core->get());
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                          grpc::InsecureChannelCredentials());
  auto stub = tfs::PredictionService::NewStub(channel);
  auto model_stub = tfs::ModelService::NewStub(channel);

  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("half_plus_two");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  // [3, 1], the signature's own shape (-1, 1); then [3] below.
  x.mutable_tensor_shape()->add_dim()->set_size(3);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  for (float v : {1.f, 2.f, 5.f}) x.add_float_val(v);
  tfs::PredictResponse response;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_THAT(response.outputs().at("y").float_val(),
              ElementsAre(2.5f, 3.f, 4.5f));
  EXPECT_EQ(response.outputs().at("y").tensor_shape().dim_size(), 2);
  EXPECT_EQ(response.model_spec().version().value(), 123);
  EXPECT_EQ(response.model_spec().signature_name(), "serving_default");

  // TF Serving's canonical request: x as [3].
  x.mutable_tensor_shape()->mutable_dim()->RemoveLast();
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  EXPECT_THAT(response.outputs().at("y").float_val(),
              ElementsAre(2.5f, 3.f, 4.5f));
  ASSERT_EQ(response.outputs().at("y").tensor_shape().dim_size(), 1);
  EXPECT_EQ(response.outputs().at("y").tensor_shape().dim(0).size(), 3);

  tfs::RegressionRequest reg;
  reg.mutable_model_spec()->set_name("half_plus_two");
  reg.mutable_model_spec()->set_signature_name("regress_x_to_y");
  auto* with_context = reg.mutable_input()->mutable_example_list_with_context();
  *with_context->mutable_context() = ExampleWith("x", 10);
  with_context->add_examples();
  *with_context->add_examples() = ExampleWith("x", 1);
  tfs::RegressionResponse reg_out;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Regress(&ctx, reg, &reg_out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(reg_out.result().regressions_size(), 2);
  EXPECT_EQ(reg_out.result().regressions(0).value(), 7.f);
  EXPECT_EQ(reg_out.result().regressions(1).value(), 2.5f);

  tfs::ClassificationRequest cls;
  cls.mutable_model_spec()->set_name("half_plus_two");
  cls.mutable_model_spec()->set_signature_name("classify_x_to_y");
  for (float v : {4.f, -2.f}) {
    *cls.mutable_input()->mutable_example_list()->add_examples() =
        ExampleWith("x", v);
  }
  tfs::ClassificationResponse cls_out;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Classify(&ctx, cls, &cls_out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(cls_out.result().classifications_size(), 2);
  EXPECT_EQ(cls_out.result().classifications(0).classes(0).score(), 4.f);
  EXPECT_EQ(cls_out.result().classifications(1).classes(0).score(), 1.f);

  tfs::GetModelMetadataRequest meta;
  meta.mutable_model_spec()->set_name("half_plus_two");
  meta.add_metadata_field("signature_def");
  tfs::GetModelMetadataResponse meta_out;
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->GetModelMetadata(&ctx, meta, &meta_out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  tfs::SignatureDefMap map;
  ASSERT_TRUE(meta_out.metadata().at("signature_def").UnpackTo(&map));
  EXPECT_EQ(map.signature_def().at("classify_x_to_y").method_name(),
            "tensorflow/serving/classify");
  EXPECT_EQ(map.signature_def().at("serving_default").inputs().at("x").dtype(),
            tensorflow::DT_FLOAT);

  tfs::GetModelStatusRequest status;
  status.mutable_model_spec()->set_name("half_plus_two");
  tfs::GetModelStatusResponse status_out;
  {
    grpc::ClientContext ctx;
    grpc::Status s = model_stub->GetModelStatus(&ctx, status, &status_out);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  ASSERT_EQ(status_out.model_version_status_size(), 1);
  EXPECT_EQ(status_out.model_version_status(0).version(), 123);
  EXPECT_EQ(status_out.model_version_status(0).state(),
            tfs::ModelVersionStatus::AVAILABLE);

  // Unknown model, version and signature; a wrong dtype.
  request.mutable_model_spec()->set_name("nope");
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("nope"));
  }
  request.mutable_model_spec()->set_name("half_plus_two");
  request.mutable_model_spec()->mutable_version()->set_value(7);
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  }
  request.mutable_model_spec()->clear_version();
  request.mutable_model_spec()->set_signature_name("no_such_signature");
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(s.error_message(), HasSubstr("no_such_signature"));
  }
  request.mutable_model_spec()->clear_signature_name();
  x.Clear();
  x.set_dtype(tensorflow::DT_INT64);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.add_int64_val(3);
  {
    grpc::ClientContext ctx;
    grpc::Status s = stub->Predict(&ctx, request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  (*server)->Stop();
}

}  // namespace
}  // namespace recflow::serving
