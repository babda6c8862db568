// GrpcServer's listening options, TF Serving's --grpc_socket_path and
// --grpc_channel_arguments: a client over a Unix domain socket, and channel
// arguments that change what the server accepts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grpcpp/grpcpp.h"
#include "recflow/core/env.h"
#include "recflow/serving/grpc_server.h"
#include "recflow/serving/prediction_service.grpc.pb.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
namespace tfs = ::tensorflow::serving;

// Predict: y = x + 1 for float "x" of model "plus_one" (version 4).
class PlusOneApi : public PredictionApi {
 public:
  absl::Status Predict(const PredictRequest& request,
                       PredictResponse* response) override {
    if (request.model_spec.name != "plus_one") {
      return absl::NotFoundError("model '" + request.model_spec.name +
                                 "' is not served");
    }
    const Tensor& x = request.inputs.at("x");
    Tensor y(DT_FLOAT, x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      y.flat<float>()[i] = x.flat<float>()[i] + 1;
    }
    response->outputs["y"] = y;
    response->model_spec = ModelSpec{"plus_one", 4, "", kDefaultSignature};
    return absl::OkStatus();
  }
  absl::Status Classify(const ClassifyRequest&, ClassifyResponse*) override {
    return absl::UnimplementedError("classify");
  }
  absl::Status Regress(const RegressRequest&, RegressResponse*) override {
    return absl::UnimplementedError("regress");
  }
  absl::Status GetModelMetadata(const MetadataRequest&,
                                MetadataResponse*) override {
    return absl::UnimplementedError("metadata");
  }
  absl::Status GetModelStatus(const StatusRequest&, StatusResponse*) override {
    return absl::UnimplementedError("status");
  }
};

tfs::PredictRequest PlusOneRequest(int n) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("plus_one");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(n);
  for (int i = 0; i < n; ++i) x.add_float_val(0.25f * i - 3);
  return request;
}

grpc::Status CallPredict(const std::string& target, int n,
                         tfs::PredictResponse* response) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = tfs::PredictionService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  return stub->Predict(&ctx, PlusOneRequest(n), response);
}

// A fresh directory for sockets, short enough for sun_path.
std::string SocketDir(const std::string& name) {
  const std::string dir = "/tmp/recflow_grpc_" + name + "_" +
                          std::to_string(::getpid());
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  EXPECT_TRUE(Env::Default()->RecursivelyCreateDir(dir).ok());
  return dir;
}

bool IsSocket(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

TEST(GrpcServerListenTest, ServesOnAUnixSocketAndTcp) {
  const std::string dir = SocketDir("both");
  const std::string socket = dir + "/model_server.sock";
  PlusOneApi api;
  GrpcServerOptions options;
  options.socket_path = socket;
  auto server = GrpcServer::Create(options, &api);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  EXPECT_TRUE(IsSocket(socket));
  ASSERT_GT((*server)->port(), 0);

  tfs::PredictResponse response;
  grpc::Status s = CallPredict("unix:" + socket, 3, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_THAT(response.outputs().at("y").float_val(),
              ::testing::ElementsAre(-2.f, -1.75f, -1.5f));
  EXPECT_EQ(response.model_spec().version().value(), 4);
  // The TCP port answers too.
  s = CallPredict("127.0.0.1:" + std::to_string((*server)->port()), 1,
                  &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  (*server)->Stop();
  server->reset();
  EXPECT_TRUE(DeleteRecursively(Env::Default(), dir).ok());
  EXPECT_FALSE(Env::Default()->FileExists(dir));
}

TEST(GrpcServerListenTest, SocketOnlyAndAStaleSocketFile) {
  const std::string dir = SocketDir("only");
  const std::string socket = dir + "/s";
  PlusOneApi api;
  GrpcServerOptions options;
  options.port = -1;
  options.socket_path = socket;
  for (int round = 0; round < 2; ++round) {  // the 2nd reuses the path
    auto server = GrpcServer::Create(options, &api);
    ASSERT_TRUE(server.ok()) << server.status();
    ASSERT_TRUE((*server)->Start().ok());
    EXPECT_EQ((*server)->port(), 0);
    tfs::PredictResponse response;
    grpc::Status s = CallPredict("unix:" + socket, 2, &response);
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s.error_message();
    EXPECT_EQ(response.outputs().at("y").float_val(1), -1.75f);
  }
  EXPECT_TRUE(DeleteRecursively(Env::Default(), dir).ok());
}

TEST(GrpcServerListenTest, SocketErrors) {
  PlusOneApi api;
  GrpcServerOptions options;
  options.port = -1;  // no TCP and no socket
  auto server = GrpcServer::Create(options, &api);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("needs a socket_path"));

  options.socket_path = "/tmp/" + std::string(200, 'x');
  server = GrpcServer::Create(options, &api);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("at most 107"));

  // A directory that does not exist: Start fails, naming the address.
  options.socket_path = "/tmp/recflow_no_such_dir_for_grpc/s.sock";
  server = GrpcServer::Create(options, &api);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status s = (*server)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(s.message(),
              HasSubstr("unix:/tmp/recflow_no_such_dir_for_grpc/s.sock"));
}

TEST(GrpcServerListenTest, ParsesChannelArgumentsAsTfServing) {
  auto args = ParseGrpcChannelArguments(
      "grpc.max_connection_age_ms=2000,,grpc.primary_user_agent=a=b");
  ASSERT_TRUE(args.ok()) << args.status();
  ASSERT_EQ(args->size(), 2u);
  EXPECT_EQ((*args)[0].key, "grpc.max_connection_age_ms");
  EXPECT_EQ((*args)[0].value, "2000");
  EXPECT_EQ((*args)[1].key, "grpc.primary_user_agent");
  EXPECT_EQ((*args)[1].value, "a=b");
  auto none = ParseGrpcChannelArguments("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  for (const char* bad : {"grpc.max_connection_age_ms", "=5", "a=1,nokey"}) {
    auto parsed = ParseGrpcChannelArguments(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("--grpc_channel_arguments"));
  }
  auto parsed = ParseGrpcChannelArguments("a=1,nokey");
  EXPECT_THAT(parsed.status().message(), HasSubstr("'nokey' is not key=value"));
}

// A channel argument reaches the server: a receive limit given as
// grpc.max_receive_message_length (an int) replaces the server's own.
TEST(GrpcServerListenTest, ChannelArgumentsApplyToTheServer) {
  PlusOneApi api;
  GrpcServerOptions options;
  auto args = ParseGrpcChannelArguments(
      "grpc.max_receive_message_length=1024,grpc.primary_user_agent=recflow");
  ASSERT_TRUE(args.ok());
  options.channel_arguments = *args;
  auto server = GrpcServer::Create(options, &api);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Start().ok());
  const std::string target = "127.0.0.1:" + std::to_string((*server)->port());
  tfs::PredictResponse response;
  grpc::Status s = CallPredict(target, 16, &response);  // ~100 bytes
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.outputs().at("y").float_val_size(), 16);
  s = CallPredict(target, 1000, &response);  // ~4 KB
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << s.error_message();
  (*server)->Stop();

  // Without it, the server's default limit (64 MiB) accepts the request.
  GrpcServerOptions defaults;
  auto plain = GrpcServer::Create(defaults, &api);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->Start().ok());
  s = CallPredict("127.0.0.1:" + std::to_string((*plain)->port()), 1000,
                  &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.outputs().at("y").float_val_size(), 1000);

  options.channel_arguments = {{"", "1"}};
  EXPECT_FALSE(GrpcServer::Create(options, &api).ok());
}

}  // namespace
}  // namespace recflow::serving
