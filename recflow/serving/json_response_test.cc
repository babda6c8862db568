#include "recflow/serving/json_response.h"

#include <gtest/gtest.h>

#include <string>

#include "recflow/core/tensor.h"

namespace recflow::serving {
namespace {

tensorflow::SignatureDef Sig(std::map<std::string, DataType> inputs) {
  tensorflow::SignatureDef def;
  for (const auto& [name, dtype] : inputs) {
    tensorflow::TensorInfo info;
    info.set_dtype(static_cast<tensorflow::DataType>(dtype));
    (*def.mutable_inputs())[name] = info;
  }
  tensorflow::TensorInfo y;
  y.set_dtype(tensorflow::DT_FLOAT);
  (*def.mutable_outputs())["y"] = y;
  def.set_method_name("tensorflow/serving/predict");
  return def;
}

TEST(JsonResponseTest, PredictResponses) {
  PredictResponse r;
  r.outputs["y"] = Tensor::FromVector<float>({2.5f, 3.f, 4.5f}, {3});
  EXPECT_EQ(*PredictResponseToJson(r, JsonPredictFormat::kRow),
            R"({"predictions": [2.5, 3.0, 4.5]})");
  EXPECT_EQ(*PredictResponseToJson(r, JsonPredictFormat::kColumnar),
            R"({"outputs": [2.5, 3.0, 4.5]})");
  r.outputs["labels"] = Tensor::FromVector<std::string>({"a\"", "b", "c"}, {3});
  r.outputs["raw_bytes"] = Tensor::FromVector<std::string>({"hello", "", "x"}, {3});
  r.outputs["y"] = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  EXPECT_EQ(*PredictResponseToJson(r, JsonPredictFormat::kRow),
            R"({"predictions": [{"labels": "a\"", "raw_bytes": {"b64": "aGVsbG8="}, )"
            R"("y": [1.0, 2.0]}, {"labels": "b", "raw_bytes": {"b64": ""}, "y": [3.0, 4.0]}, )"
            R"({"labels": "c", "raw_bytes": {"b64": "eA=="}, "y": [5.0, 6.0]}]})");
  EXPECT_EQ(*PredictResponseToJson(r, JsonPredictFormat::kColumnar),
            R"({"outputs": {"labels": ["a\"", "b", "c"], "raw_bytes": [{"b64": "aGVsbG8="}, )"
            R"({"b64": ""}, {"b64": "eA=="}], "y": [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]}})");
  r.outputs["z"] = Tensor::FromVector<int64_t>({1, 2}, {2});
  auto bad = PredictResponseToJson(r, JsonPredictFormat::kRow);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("output 'z' has 2 rows"), std::string::npos);
  r.outputs.clear();
  r.outputs["s"] = Tensor::Scalar<int32_t>(7);
  EXPECT_FALSE(PredictResponseToJson(r, JsonPredictFormat::kRow).ok());
  EXPECT_EQ(*PredictResponseToJson(r, JsonPredictFormat::kColumnar), R"({"outputs": 7})");
}

TEST(JsonResponseTest, ClassifyRegressStatusMetadataResponses) {
  ClassifyResponse c;
  c.classifications = {{{"cat", 0.75f}, {"dog", 0.25f}}, {{"", 1.f}}};
  EXPECT_EQ(ClassifyResponseToJson(c),
            R"({"results": [[["cat", 0.75], ["dog", 0.25]], [["", 1.0]]]})");
  RegressResponse r;
  r.results = {2.5f, 3.f};
  EXPECT_EQ(RegressResponseToJson(r), R"({"results": [2.5, 3.0]})");
  StatusResponse s;
  s.versions.push_back({123, ModelVersionState::kAvailable, absl::OkStatus()});
  s.versions.push_back({124, ModelVersionState::kEnd,
                        absl::DataLossError("corrupt \"variables\"")});
  EXPECT_EQ(StatusResponseToJson(s),
            R"({"model_version_status": [{"version": "123", "state": "AVAILABLE", )"
            R"("status": {"error_code": "OK", "error_message": ""}}, {"version": "124", )"
            R"("state": "END", "status": {"error_code": "DATA_LOSS", "error_message": )"
            R"("corrupt \"variables\""}}]})");
  // A version following a model update log says where it stands.
  s.versions.resize(1);
  s.versions[0].update = ModelUpdateStatus{.export_base = 3, .applied = 7, .step = 120,
                                           .lag_seconds = 0.25, .behind = 1, .error = ""};
  EXPECT_EQ(StatusResponseToJson(s),
            R"({"model_version_status": [{"version": "123", "state": "AVAILABLE", )"
            R"("status": {"error_code": "OK", "error_message": ""}, "recflow_model_update": )"
            R"({"export_base": "3", "applied": "7", "step": "120", "lag_seconds": 0.25, )"
            R"("behind": "1", "error": ""}}]})");
  MetadataResponse m;
  m.model_spec.name = "half_plus_two";
  m.model_spec.version = 123;
  m.signature_def["serving_default"] = Sig({{"x", DT_FLOAT}});
  auto json = MetadataResponseToJson(m);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(json->rfind(R"({"model_spec": {"name": "half_plus_two", "signature_name": "", )"
                        R"("version": "123"}, "metadata": {"signature_def": {"signature_def": )"
                        R"({"serving_default": {)",
                        0),
            0u)
      << *json;
  EXPECT_NE(json->find(R"("method_name":"tensorflow/serving/predict")"), std::string::npos)
      << *json;
  EXPECT_NE(json->find(R"("dtype":"DT_FLOAT")"), std::string::npos) << *json;
}

}  // namespace
}  // namespace recflow::serving
