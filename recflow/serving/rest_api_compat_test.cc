// TF Serving's REST behaviour where clients see it, end to end through
// ServerCore: every dtype its JSON takes, shapes left to the graph,
// signatures without inputs, version labels, and TensorFlow 2's
// half_plus_two (predict, classify and regress) with TF Serving's answers.
// The models are written here as NodeDefs (serving/ tests may not build
// graphs with ops/).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/env.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/serving/rest_api.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Builds a SavedModel of NodeDefs and signatures.
class ModelBuilder {
 public:
  ModelBuilder() {
    sm_.set_saved_model_schema_version(1);
    mg_ = sm_.add_meta_graphs();
    mg_->mutable_meta_info_def()->add_tags("serve");
  }

  tensorflow::NodeDef* Node(const std::string& name, const std::string& op,
                            const std::vector<std::string>& inputs = {}) {
    tensorflow::NodeDef* n = mg_->mutable_graph_def()->add_node();
    n->set_name(name);
    n->set_op(op);
    for (const auto& in : inputs) n->add_input(in);
    return n;
  }
  // A Placeholder of `dtype` and `dims` (-1 unknown).
  void Placeholder(const std::string& name, tensorflow::DataType dtype,
                   const std::vector<int64_t>& dims) {
    tensorflow::NodeDef* n = Node(name, "Placeholder");
    (*n->mutable_attr())["dtype"].set_type(dtype);
    auto* shape = (*n->mutable_attr())["shape"].mutable_shape();
    for (int64_t d : dims) shape->add_dim()->set_size(d);
  }
  void Const(const std::string& name, const Tensor& value) {
    tensorflow::NodeDef* n = Node(name, "Const");
    (*n->mutable_attr())["dtype"].set_type(
        static_cast<tensorflow::DataType>(value.dtype()));
    TensorToProto(value, (*n->mutable_attr())["value"].mutable_tensor());
  }
  void Typed(const std::string& name, const std::string& op,
             const std::vector<std::string>& inputs, tensorflow::DataType t) {
    (*Node(name, op, inputs)->mutable_attr())["T"].set_type(t);
  }
  // Signature `sig`: `inputs` and `outputs` as {key, tensor name}, of
  // `dtype` and `dims`.
  void Signature(const std::string& sig,
                 const std::vector<std::pair<std::string, std::string>>& inputs,
                 const std::vector<std::pair<std::string, std::string>>& outputs,
                 tensorflow::DataType dtype, const std::vector<int64_t>& dims,
                 const std::string& method = checkpoint::kPredictMethodName) {
    auto& def = (*mg_->mutable_signature_def())[sig];
    def.set_method_name(method);
    auto info = [&](const std::string& name) {
      tensorflow::TensorInfo t;
      t.set_name(name);
      t.set_dtype(dtype);
      for (int64_t d : dims) t.mutable_tensor_shape()->add_dim()->set_size(d);
      return t;
    };
    for (const auto& [k, n] : inputs) (*def.mutable_inputs())[k] = info(n);
    for (const auto& [k, n] : outputs) (*def.mutable_outputs())[k] = info(n);
  }
  absl::Status Write(const std::string& dir) {
    return checkpoint::WriteSavedModel(Env::Default(), dir, sm_);
  }

 private:
  tensorflow::SavedModel sm_;
  tensorflow::MetaGraphDef* mg_;  // in sm_
};

struct DtypeCase {
  const char* name;  // the signature's name
  tensorflow::DataType dtype;
  const char* request;   // "instances" value
  const char* response;  // "predictions" value
  const char* refused;   // an "instances" value the dtype refuses
  const char* why;       // ... and the message
};

const std::vector<DtypeCase>& DtypeCases() {
  static const auto* cases = new std::vector<DtypeCase>{
      {"uint8", tensorflow::DT_UINT8, "[0, 255, 7]", "[0, 255, 7]", "[256]",
       "out of range for uint8"},
      {"int8", tensorflow::DT_INT8, "[-128, 127]", "[-128, 127]", "[-129]",
       "out of range for int8"},
      {"int16", tensorflow::DT_INT16, "[-32768, 32767]", "[-32768, 32767]",
       "[1.5]", "not of expected type int16"},
      {"uint16", tensorflow::DT_UINT16, "[65535]", "[65535]", "[-1]",
       "out of range for uint16"},
      {"uint32", tensorflow::DT_UINT32, "[4294967295]", "[4294967295]",
       "[4294967296]", "out of range for uint32"},
      {"uint64", tensorflow::DT_UINT64, "[18446744073709551615]",
       "[18446744073709551615]", "[-1]", "out of range for uint64"},
      {"int64", tensorflow::DT_INT64, "[-9223372036854775808]",
       "[-9223372036854775808]", "[true]", "not of expected type int64"},
      // 16-bit floats: integers only up to their exact ones (2047, 255),
      // as TF Serving's lossless rule for float.
      {"half", tensorflow::DT_HALF, "[0.5, -2.25, 2047]",
       "[0.5, -2.25, 2047.0]", "[70000]", "half"},
      {"bfloat16", tensorflow::DT_BFLOAT16, "[1.5, -255]", "[1.5, -255.0]",
       "[\"x\"]", "not of expected type bfloat16"},
      {"double", tensorflow::DT_DOUBLE, "[0.1, 1e300]", "[0.1, 1e+300]",
       "[null]", "not of expected type double"},
      {"bool", tensorflow::DT_BOOL, "[true, false]", "[true, false]", "[1]",
       "not of expected type bool"},
      {"string", tensorflow::DT_STRING, R"(["h\u00e9", "a b"])",
       "[\"h\xC3\xA9\", \"a b\"]", "[1]", "not of expected type string"},
  };
  return *cases;
}

// Model "m": one echo signature per dtype (x -> Identity -> y; the string
// one also as "y_bytes", which TF Serving answers in base64), "const"
// without inputs, "matmul" (x [?,2] times [[1],[10]]) and "affine"
// (0.5 x + 2 with x declared [-1, 1] in the signature and the graph alike,
// half_plus_two's layout).
absl::Status WriteCompatModel(const std::string& dir) {
  ModelBuilder b;
  for (const DtypeCase& c : DtypeCases()) {
    const std::string x = absl::StrCat("x_", c.name);
    const std::string y = absl::StrCat("y_", c.name);
    b.Placeholder(x, c.dtype, {-1});
    b.Typed(y, "Identity", {x}, c.dtype);
    b.Signature(c.name, {{"x", x + ":0"}}, {{"y", y + ":0"}}, c.dtype, {-1});
  }
  b.Signature("bytes", {{"x", "x_string:0"}}, {{"y_bytes", "y_string:0"}},
              tensorflow::DT_STRING, {-1});
  b.Const("c", Tensor::FromVector<int32_t>({7, 8}, {2}));
  b.Signature("const", {}, {{"c", "c:0"}}, tensorflow::DT_INT32, {2});
  b.Placeholder("mx", tensorflow::DT_FLOAT, {-1, 2});
  b.Const("w", Tensor::FromVector<float>({1, 10}, {2, 1}));
  b.Typed("mm", "MatMul", {"mx", "w"}, tensorflow::DT_FLOAT);
  b.Signature("matmul", {{"x", "mx:0"}}, {{"y", "mm:0"}}, tensorflow::DT_FLOAT,
              {-1, 2});
  b.Placeholder("ax", tensorflow::DT_FLOAT, {-1, 1});
  b.Const("half", Tensor::Scalar<float>(0.5f));
  b.Const("two", Tensor::Scalar<float>(2.f));
  b.Typed("amul", "Mul", {"ax", "half"}, tensorflow::DT_FLOAT);
  b.Typed("ay", "Add", {"amul", "two"}, tensorflow::DT_FLOAT);
  b.Signature("affine", {{"x", "ax:0"}}, {{"y", "ay:0"}}, tensorflow::DT_FLOAT,
              {-1, 1});
  return b.Write(dir);
}

class RestCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string base = testutil::FreshDir("rest_compat");
    absl::Status s = WriteCompatModel(base + "/3");
    ASSERT_TRUE(s.ok()) << s;
    ServerCoreOptions options;
    options.model_server_config = SingleModelConfig("m", base);
    options.file_system_poll_wait_seconds = 0;
    options.session.inter_op_threads = 1;
    options.session.intra_op_threads = 1;
    auto core = ServerCore::Create(options);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = *std::move(core);
    rest_ = std::make_unique<RestApi>(core_.get());
  }
  HttpResponse Call(const std::string& method, const std::string& path,
                    const std::string& body = "") {
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    return rest_->Handle(r);
  }
  HttpResponse Predict(const std::string& body) {
    return Call("POST", "/v1/models/m:predict", body);
  }

  std::unique_ptr<ServerCore> core_;
  std::unique_ptr<RestApi> rest_;
};

TEST_F(RestCompatTest, EveryDtypeInAndOut) {
  for (const DtypeCase& c : DtypeCases()) {
    SCOPED_TRACE(c.name);
    HttpResponse r = Predict(absl::StrCat(R"({"signature_name": ")", c.name,
                                          R"(", "instances": )", c.request, "}"));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, absl::StrCat(R"({"predictions": )", c.response, "}"));
    // Columnar: the same values, any shape.
    r = Predict(absl::StrCat(R"({"signature_name": ")", c.name,
                             R"(", "inputs": )", c.request, "}"));
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.body, absl::StrCat(R"({"outputs": )", c.response, "}"));
    r = Predict(absl::StrCat(R"({"signature_name": ")", c.name,
                             R"(", "instances": )", c.refused, "}"));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_THAT(r.body, HasSubstr(c.why));
  }
  // Binary strings: {"b64": ...} in, and out for an output named *_bytes.
  HttpResponse r = Predict(
      R"({"signature_name": "bytes", "instances": ["a", {"b64": "AP8="}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [{"b64": "YQ=="}, {"b64": "AP8="}]})");
  r = Predict(R"({"signature_name": "bytes", "instances": [{"b64": "A"}]})");
  EXPECT_EQ(r.status, 400) << r.body;
}

// TF Serving checks no shapes: a tensor the graph accepts runs whatever the
// signature declares; one the graph's kernels refuse is a 400 naming them.
TEST_F(RestCompatTest, ShapesAreTheGraphs) {
  HttpResponse r = Predict(
      R"({"signature_name": "affine", "instances": [[1.0, 2.0], [3.0, 4.0]]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [[2.5, 3.0], [3.5, 4.0]]})");
  r = Predict(R"({"signature_name": "affine", "inputs": 4.0})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"outputs": 4.0})");
  r = Predict(R"({"signature_name": "matmul", "instances": [[1.0, 2.0]]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [[21.0]]})");
  r = Predict(R"({"signature_name": "matmul", "instances": [[1.0, 2.0, 3.0]]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, StartsWith(R"({"error": ")"));
  EXPECT_THAT(r.body, HasSubstr("'mm'"));
  EXPECT_THAT(r.body, HasSubstr("running signature 'matmul'"));
}

// A signature without inputs: TF Serving's REST API refuses it with its
// message (json_tensor.cc); gRPC Predict (PredictionApi) runs it.
TEST_F(RestCompatTest, SignatureWithoutInputs) {
  HttpResponse r = Predict(R"({"signature_name": "const"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("Failed to get input map for signature: const"));
  r = Predict(R"({"signature_name": "const", "inputs": {}})");
  EXPECT_EQ(r.status, 400);
  PredictRequest request;
  request.model_spec.name = "m";
  request.model_spec.signature_name = "const";
  PredictResponse response;
  absl::Status s = core_->Predict(request, &response);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(TensorsEqual(response.outputs.at("c"),
                           Tensor::FromVector<int32_t>({7, 8}, {2})));
}

// The messages TF Serving's clients and scripts look for.
TEST_F(RestCompatTest, TfServingMessages) {
  HttpResponse r = Call("POST", "/v1/models/nope:predict", R"({"instances": [1]})");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, StartsWith(R"({"error": "Servable not found for request: Latest(nope))"));
  r = Call("POST", "/v1/models/m/versions/9:predict", R"({"instances": [1]})");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, StartsWith(R"({"error": "Servable not found for request: Specific(m, 9))"));
  r = Call("POST", "/v1/models/m/labels/canary:predict", R"({"instances": [1]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, StartsWith(R"({"error": "Unrecognized servable version label: canary)"));
  r = Call("GET", "/v1/models/m/labels/canary");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("Unrecognized servable version label: canary"));
  r = Call("GET", "/v1/models/nope");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, HasSubstr("Could not find any versions of model nope"));
  r = Call("GET", "/v1/models/m/versions/9");
  EXPECT_EQ(r.status, 404);
  EXPECT_THAT(r.body, HasSubstr("Could not find version 9 of model m"));
  r = Predict("{\"instances\": [1, 2");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("JSON Parse error: "));
  r = Predict(R"({"signature_name": "nope", "instances": [1]})");
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body,
              HasSubstr(R"(Serving signature name: \"nope\" not found in signature def)"));
  r = Call("GET", "/v1/models/m:predict");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body, R"({"error": "Malformed request: GET /v1/models/m:predict"})");
}

// TensorFlow 2's half_plus_two (tf.saved_model.save; TF Serving's test
// model), answering as tensorflow_model_server_test.py expects. Its
// classify and regress signatures have method_name
// tensorflow/serving/predict and one string input "inputs" of serialized
// tf.Examples, which TF Serving's classifier and regressor accept.
TEST(RestTf2Test, HalfPlusTwo) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf2);
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig(
      "default", Dirname(TfTestDataPath(kHalfPlusTwoTf2)));
  options.file_system_poll_wait_seconds = 0;
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  RestApi rest(core->get());
  auto call = [&](const std::string& method, const std::string& path,
                  const std::string& body) {
    HttpRequest r;
    r.method = method;
    r.path = path;
    r.body = body;
    return rest.Handle(r);
  };
  HttpResponse r = call("POST", "/v1/models/default:predict",
                        R"({"instances": [2.0, 3.0, 4.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [3.0, 3.5, 4.0]})");
  r = call("POST", "/v1/models/default:predict", R"({"inputs": [2.0, 3.0, 4.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"outputs": [3.0, 3.5, 4.0]})");
  r = call("POST", "/v1/models/default/versions/123:classify",
           R"({"signature_name": "classify_x_to_y", "examples": [{"x": 2.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [[["", 3.0]]]})");
  r = call("POST", "/v1/models/default:regress",
           R"({"signature_name": "regress_x_to_y", "examples": [{"x": 2.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [3.0]})");
  r = call("POST", "/v1/models/default:regress",
           R"({"signature_name": "regress_x_to_y", "context": {"x": 10.0},)"
           R"( "examples": [{}, {"x": 4.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [7.0, 4.0]})");
  // serving_default takes a float, not examples: refused, naming why.
  r = call("POST", "/v1/models/default:classify", R"({"examples": [{"x": 2.0}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_THAT(r.body, HasSubstr("one DT_STRING input keyed 'inputs'"));
  r = call("GET", "/v1/models/default", "");
  EXPECT_EQ(r.body,
            R"({"model_version_status": [{"version": "123", "state": "AVAILABLE", )"
            R"("status": {"error_code": "OK", "error_message": ""}}]})");
  r = call("GET", "/v1/models/default/metadata", "");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("classify_x_to_y")"));
}

}  // namespace
}  // namespace recflow::serving
