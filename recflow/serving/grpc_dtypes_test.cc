// gRPC Predict with every dtype TF Serving accepts in a TensorProto, end
// to end through ServerCore: a SavedModel y = Identity(x) per dtype, a
// request in the typed field a TensorFlow client fills
// (tf.make_tensor_proto), the answer in the field TensorFlow's
// Tensor::AsProtoField writes (TF Serving's default encoding).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "grpcpp/grpcpp.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/dtype.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/serving/grpc_server.h"
#include "recflow/serving/prediction_service.grpc.pb.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
namespace tfs = ::tensorflow::serving;

// Model "id_<dtype>": signature serving_default, x [-1] -> y = Identity(x).
absl::Status WriteIdentityModel(const std::string& dir, tensorflow::DataType dtype) {
  tensorflow::SavedModel sm;
  sm.set_saved_model_schema_version(1);
  tensorflow::MetaGraphDef* mg = sm.add_meta_graphs();
  mg->mutable_meta_info_def()->add_tags("serve");
  tensorflow::NodeDef* x = mg->mutable_graph_def()->add_node();
  x->set_name("x");
  x->set_op("Placeholder");
  (*x->mutable_attr())["dtype"].set_type(dtype);
  (*x->mutable_attr())["shape"].mutable_shape()->add_dim()->set_size(-1);
  tensorflow::NodeDef* y = mg->mutable_graph_def()->add_node();
  y->set_name("y");
  y->set_op("Identity");
  y->add_input("x");
  (*y->mutable_attr())["T"].set_type(dtype);
  auto info = [&](const std::string& name) {
    tensorflow::TensorInfo t;
    t.set_name(name);
    t.set_dtype(dtype);
    t.mutable_tensor_shape()->add_dim()->set_size(-1);
    return t;
  };
  auto& sig = (*mg->mutable_signature_def())["serving_default"];
  sig.set_method_name(checkpoint::kPredictMethodName);
  (*sig.mutable_inputs())["x"] = info("x:0");
  (*sig.mutable_outputs())["y"] = info("y:0");
  return checkpoint::WriteSavedModel(Env::Default(), dir, sm, {});
}

// One request per dtype: its values in the typed field, n elements.
struct Case {
  tensorflow::DataType dtype;
  std::function<void(tensorflow::TensorProto*)> fill;
  int n;
};

std::vector<Case> Cases() {
  using P = tensorflow::TensorProto;
  return {
      {tensorflow::DT_UINT8, [](P* p) { for (int v : {0, 7, 255}) p->add_int_val(v); }, 3},
      {tensorflow::DT_INT8, [](P* p) { for (int v : {-128, -1, 127}) p->add_int_val(v); }, 3},
      {tensorflow::DT_INT16, [](P* p) { for (int v : {-32768, 5, 32767}) p->add_int_val(v); }, 3},
      {tensorflow::DT_UINT16, [](P* p) { for (int v : {0, 40000, 65535}) p->add_int_val(v); }, 3},
      {tensorflow::DT_INT32, [](P* p) { for (int v : {-70000, 0, 2147483647}) p->add_int_val(v); }, 3},
      {tensorflow::DT_UINT32,
       [](P* p) { for (uint32_t v : {0u, 3000000000u, 4294967295u}) p->add_uint32_val(v); }, 3},
      {tensorflow::DT_INT64,
       [](P* p) { for (int64_t v : {int64_t{-1} << 40, int64_t{9}}) p->add_int64_val(v); }, 2},
      {tensorflow::DT_UINT64,
       [](P* p) { for (uint64_t v : {uint64_t{1} << 63, uint64_t{3}}) p->add_uint64_val(v); }, 2},
      // 1.5, -2, 0.25 as IEEE half and as bfloat16 bits.
      {tensorflow::DT_HALF, [](P* p) { for (int v : {0x3E00, 0xC000, 0x3400}) p->add_half_val(v); }, 3},
      {tensorflow::DT_BFLOAT16,
       [](P* p) { for (int v : {0x3FC0, 0xC000, 0x3E80}) p->add_half_val(v); }, 3},
      {tensorflow::DT_FLOAT, [](P* p) { for (float v : {1.5f, -0.125f}) p->add_float_val(v); }, 2},
      {tensorflow::DT_DOUBLE, [](P* p) { for (double v : {1e300, -3.25}) p->add_double_val(v); }, 2},
      {tensorflow::DT_BOOL, [](P* p) { for (bool v : {true, false, true}) p->add_bool_val(v); }, 3},
      {tensorflow::DT_STRING,
       [](P* p) {
         p->add_string_val("abc");
         p->add_string_val(std::string("\0\xff\x01", 3));
         p->add_string_val("");
       },
       3},
      {tensorflow::DT_COMPLEX64,
       [](P* p) { for (float v : {1.f, -2.f, 0.5f, 3.f}) p->add_scomplex_val(v); }, 2},
      {tensorflow::DT_COMPLEX128,
       [](P* p) { for (double v : {1e-9, 2., -7., 0.}) p->add_dcomplex_val(v); }, 2},
  };
}

class GrpcDtypesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = testutil::FreshDir("grpc_dtypes");
    ServerCoreOptions options;
    auto* list = options.model_server_config.mutable_model_config_list();
    for (const Case& c : Cases()) {
      const std::string name = Name(c.dtype);
      ASSERT_TRUE(WriteIdentityModel(dir + "/" + name + "/1", c.dtype).ok());
      auto* model = list->add_config();
      model->set_name(name);
      model->set_base_path(dir + "/" + name);
    }
    options.file_system_poll_wait_seconds = 0;
    auto core = ServerCore::Create(options);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = core->release();
    auto server = GrpcServer::Create({}, core_);
    ASSERT_TRUE(server.ok());
    server_ = server->release();
    ASSERT_TRUE(server_->Start().ok());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete core_;
  }
  static std::string Name(tensorflow::DataType dtype) {
    return "id_" + DataTypeString(static_cast<DataType>(dtype));
  }

  grpc::Status Predict(const tfs::PredictRequest& request, tfs::PredictResponse* response) {
    auto stub = tfs::PredictionService::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(server_->port()), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    return stub->Predict(&ctx, request, response);
  }

  static ServerCore* core_;
  static GrpcServer* server_;
};

ServerCore* GrpcDtypesTest::core_ = nullptr;
GrpcServer* GrpcDtypesTest::server_ = nullptr;

// The typed field round-trips: same dtype, shape and values in the field
// TensorFlow writes for that dtype.
TEST_F(GrpcDtypesTest, EveryDtypeInItsTypedField) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE(Name(c.dtype));
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name(Name(c.dtype));
    tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
    x.set_dtype(c.dtype);
    x.mutable_tensor_shape()->add_dim()->set_size(c.n);
    c.fill(&x);
    tfs::PredictResponse response;
    grpc::Status s = Predict(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    const tensorflow::TensorProto& y = response.outputs().at("y");
    EXPECT_EQ(y.dtype(), c.dtype);
    EXPECT_TRUE(y.tensor_content().empty());
    ASSERT_EQ(y.tensor_shape().dim_size(), 1);
    EXPECT_EQ(y.tensor_shape().dim(0).size(), c.n);
    // The answer is the request's tensor, field for field.
    tensorflow::TensorProto want = x;
    EXPECT_EQ(y.SerializeAsString(), want.SerializeAsString()) << y.ShortDebugString();
  }
}

// tensor_content (what tf.make_tensor_proto writes for NumPy arrays) for
// every fixed-size dtype: decoded by the dtype's size.
TEST_F(GrpcDtypesTest, EveryDtypeAsTensorContent) {
  std::mt19937 rng(25);
  for (const Case& c : Cases()) {
    if (c.dtype == tensorflow::DT_STRING) continue;
    SCOPED_TRACE(Name(c.dtype));
    const DataType dtype = static_cast<DataType>(c.dtype);
    const int n = 5;
    std::string bytes(n * DataTypeSize(dtype), '\0');
    for (char& b : bytes) b = static_cast<char>(rng() & 0xff);
    if (dtype == DT_BOOL) {
      for (char& b : bytes) b &= 1;
    }
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name(Name(c.dtype));
    tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
    x.set_dtype(c.dtype);
    x.mutable_tensor_shape()->add_dim()->set_size(n);
    x.set_tensor_content(bytes);
    tfs::PredictResponse response;
    grpc::Status s = Predict(request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    auto y = TensorFromProto(response.outputs().at("y"));
    ASSERT_TRUE(y.ok()) << y.status();
    ASSERT_EQ(y->dtype(), dtype);
    ASSERT_EQ(y->NumElements(), n);
    EXPECT_EQ(std::string(static_cast<const char*>(y->raw_data()), bytes.size()), bytes);
  }
}

// Bad tensors of these dtypes: InvalidArgument naming the input, no crash.
TEST_F(GrpcDtypesTest, BadTensorsAreRefused) {
  struct Bad {
    tensorflow::DataType dtype;
    std::function<void(tensorflow::TensorProto*)> fill;
    const char* message;
  };
  using P = tensorflow::TensorProto;
  const std::vector<Bad> bad = {
      // More values than the shape holds.
      {tensorflow::DT_HALF, [](P* p) { for (int v : {1, 2, 3}) p->add_half_val(v); }, "half_val"},
      {tensorflow::DT_UINT8, [](P* p) { for (int v : {1, 2, 3}) p->add_int_val(v); }, "int_val"},
      {tensorflow::DT_UINT64, [](P* p) { for (int v : {1, 2, 3}) p->add_uint64_val(v); },
       "uint64_val"},
      // An odd number of complex components.
      {tensorflow::DT_COMPLEX64, [](P* p) { p->add_scomplex_val(1); }, "complex components"},
      // tensor_content of the wrong size.
      {tensorflow::DT_UINT16, [](P* p) { p->set_tensor_content("abc"); }, "tensor_content"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(Name(b.dtype));
    tfs::PredictRequest request;
    request.mutable_model_spec()->set_name(Name(b.dtype));
    tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
    x.set_dtype(b.dtype);
    x.mutable_tensor_shape()->add_dim()->set_size(2);
    b.fill(&x);
    tfs::PredictResponse response;
    grpc::Status s = Predict(request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(b.message));
    EXPECT_THAT(s.error_message(), HasSubstr("'x'"));
  }
  // A dtype the signature does not declare.
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name(Name(tensorflow::DT_UINT8));
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_INT8);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.add_int_val(1);
  tfs::PredictResponse response;
  grpc::Status s = Predict(request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("uint8"));
}

}  // namespace
}  // namespace recflow::serving
