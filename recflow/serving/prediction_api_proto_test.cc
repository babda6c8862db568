#include "recflow/serving/prediction_api_proto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "recflow/framework/tensor_util.h"
#include "recflow/proto/serving_prediction_log.pb.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace tfs = ::tensorflow::serving;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

// Wire compatibility: the bytes below are hand-encoded from TF Serving's
// definitions (field numbers and wire types of
// tensorflow_serving/apis/*.proto and tensorflow/core/framework/*.proto),
// not produced by our own protos, so a renumbered field fails here.

TEST(ApiProtoWireTest, PredictRequestBytes) {
  tfs::PredictRequest request;
  request.mutable_model_spec()->set_name("m");
  request.mutable_model_spec()->mutable_version()->set_value(7);
  request.mutable_model_spec()->set_signature_name("s");
  tensorflow::TensorProto& x = (*request.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(1);
  x.add_float_val(1.5f);
  request.add_output_filter("y");

  // clang-format off
  const std::string expected = Bytes({
      0x0A, 0x0A,                          // model_spec (1), 10 bytes
      0x0A, 0x01, 'm',                     //   name (1)
      0x12, 0x02, 0x08, 0x07,              //   version (2): Int64Value{7}
      0x1A, 0x01, 's',                     //   signature_name (3)
      0x12, 0x13,                          // inputs (2): map entry, 19 bytes
      0x0A, 0x01, 'x',                     //   key
      0x12, 0x0E,                          //   value: TensorProto, 14 bytes
      0x08, 0x01,                          //     dtype (1) = DT_FLOAT
      0x12, 0x04, 0x12, 0x02, 0x08, 0x01,  //     tensor_shape (2) {dim (2) {size (1): 1}}
      0x2A, 0x04, 0x00, 0x00, 0xC0, 0x3F,  //     float_val (5), packed: 1.5f
      0x1A, 0x01, 'y',                     // output_filter (3)
  });
  // clang-format on
  EXPECT_EQ(request.SerializeAsString(), expected);

  tfs::PredictRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(expected));
  EXPECT_EQ(parsed.model_spec().version().value(), 7);
  EXPECT_EQ(parsed.model_spec().signature_name(), "s");
  EXPECT_THAT(parsed.inputs().at("x").float_val(), ElementsAre(1.5f));
}

TEST(ApiProtoWireTest, ModelSpecVersionLabelIsField4) {
  tfs::ModelSpec spec;
  spec.set_name("m");
  spec.set_version_label("L");
  EXPECT_EQ(spec.SerializeAsString(),
            Bytes({0x0A, 0x01, 'm', 0x22, 0x01, 'L'}));
}

TEST(ApiProtoWireTest, ResponsesAndStatusBytes) {
  tfs::GetModelStatusResponse status;
  auto* v = status.add_model_version_status();
  v->set_version(123);
  v->set_state(tfs::ModelVersionStatus::AVAILABLE);
  v->mutable_status()->set_error_code(tensorflow::error::DATA_LOSS);
  v->mutable_status()->set_error_message("bad");
  EXPECT_EQ(status.SerializeAsString(),
            Bytes({0x0A, 0x0D, 0x08, 0x7B, 0x10, 0x1E, 0x1A, 0x07, 0x08, 0x0F,
                   0x12, 0x03, 'b', 'a', 'd'}));

  tfs::ClassificationResponse cls;
  auto* c = cls.mutable_result()->add_classifications()->add_classes();
  c->set_label("a");
  c->set_score(0.5f);
  cls.mutable_model_spec()->set_name("m");
  EXPECT_EQ(cls.SerializeAsString(),
            Bytes({0x0A, 0x0C, 0x0A, 0x0A, 0x0A, 0x08, 0x0A, 0x01, 'a', 0x15,
                   0x00, 0x00, 0x00, 0x3F, 0x12, 0x03, 0x0A, 0x01, 'm'}));

  tfs::RegressionResponse reg;
  reg.mutable_result()->add_regressions()->set_value(2.5f);
  reg.mutable_model_spec()->set_name("m");
  EXPECT_EQ(reg.SerializeAsString(),
            Bytes({0x0A, 0x07, 0x0A, 0x05, 0x0D, 0x00, 0x00, 0x20, 0x40, 0x12,
                   0x03, 0x0A, 0x01, 'm'}));
}

TEST(ApiProtoWireTest, RequestsWithInputMetadataAndWarmupLog) {
  tfs::ClassificationRequest cls;
  cls.mutable_model_spec()->set_name("m");
  auto* with_context = cls.mutable_input()->mutable_example_list_with_context();
  with_context->add_examples();
  with_context->mutable_context();
  EXPECT_EQ(cls.SerializeAsString(),
            Bytes({0x0A, 0x03, 0x0A, 0x01, 'm', 0x12, 0x06, 0x12, 0x04, 0x0A,
                   0x00, 0x12, 0x00}));

  tfs::GetModelMetadataRequest meta;
  meta.mutable_model_spec()->set_name("m");
  meta.add_metadata_field("signature_def");
  EXPECT_EQ(meta.SerializeAsString(),
            Bytes({0x0A, 0x03, 0x0A, 0x01, 'm', 0x12, 0x0D}) + "signature_def");

  tfs::PredictionLog log;
  log.mutable_predict_log()->mutable_request()->mutable_model_spec()->set_name(
      "m");
  EXPECT_EQ(log.SerializeAsString(),
            Bytes({0x32, 0x07, 0x0A, 0x05, 0x0A, 0x03, 0x0A, 0x01, 'm'}));
}

TEST(ApiProtoTest, ModelSpecRoundTrip) {
  ModelSpec spec;
  spec.name = "m";
  spec.version = 42;
  spec.signature_name = "sig";
  tfs::ModelSpec proto;
  ModelSpecToProto(spec, &proto);
  EXPECT_EQ(proto.version().value(), 42);
  ModelSpec back;
  back.version_label = "stale";
  ModelSpecFromProto(proto, &back);
  EXPECT_EQ(back.name, "m");
  EXPECT_EQ(back.version, 42);
  EXPECT_EQ(back.version_label, "");
  EXPECT_EQ(back.signature_name, "sig");

  proto.set_version_label("canary");
  ModelSpecFromProto(proto, &back);
  EXPECT_FALSE(back.version.has_value());
  EXPECT_EQ(back.version_label, "canary");
  ModelSpecToProto(back, &proto);
  EXPECT_EQ(proto.version_choice_case(), tfs::ModelSpec::kVersionLabel);
}

// Typed-field encoding (TF Serving's default) decodes back to the same
// tensor for every dtype, on random values.
TEST(ApiProtoTest, TensorEncodingsRoundTrip) {
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> real(-100, 100);
  std::uniform_int_distribution<int64_t> big(-(int64_t{1} << 40),
                                             int64_t{1} << 40);
  std::vector<Tensor> tensors;
  {
    Tensor t(DT_FLOAT, TensorShape({3, 5}));
    for (float& v : t.flat<float>()) v = real(rng);
    tensors.push_back(t);
  }
  {
    Tensor t(DT_DOUBLE, TensorShape({7}));
    for (double& v : t.flat<double>()) v = real(rng) * 1e-3;
    tensors.push_back(t);
  }
  {
    Tensor t(DT_INT64, TensorShape({2, 2, 3}));
    for (int64_t& v : t.flat<int64_t>()) v = big(rng);
    tensors.push_back(t);
  }
  {
    Tensor t(DT_INT32, TensorShape({4}));
    for (int32_t& v : t.flat<int32_t>()) v = static_cast<int32_t>(big(rng));
    tensors.push_back(t);
  }
  {
    Tensor t(DT_UINT8, TensorShape({6}));
    for (int i = 0; i < 6; ++i)
      t.flat<uint8_t>()[i] = static_cast<uint8_t>(40 * i + 3);
    tensors.push_back(t);
  }
  {
    Tensor t(DT_BOOL, TensorShape({3}));
    t.flat<bool>()[0] = true;
    t.flat<bool>()[1] = false;
    t.flat<bool>()[2] = true;
    tensors.push_back(t);
  }
  {
    Tensor t(DT_STRING, TensorShape({2}));
    t.flat<std::string>()[0] = "user:17";
    t.flat<std::string>()[1] = std::string("\0bin\xff", 5);
    tensors.push_back(t);
  }
  tensors.push_back(Tensor::Scalar<float>(3.25f));
  for (bool content : {false, true}) {
    for (const Tensor& t : tensors) {
      tensorflow::TensorProto proto;
      TensorToApiProto(t, {content}, &proto);
      if (!content && t.dtype() != DT_STRING) {
        EXPECT_TRUE(proto.tensor_content().empty()) << t.DebugString();
      }
      auto back = TensorFromProto(proto);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->dtype(), t.dtype());
      EXPECT_EQ(back->shape(), t.shape());
      EXPECT_EQ(back->DebugString(100), t.DebugString(100));
    }
  }
  tensorflow::TensorProto proto;
  TensorToApiProto(Tensor::FromVector<float>({1, 2, 5}, {3}), {}, &proto);
  EXPECT_THAT(proto.float_val(), ElementsAre(1.f, 2.f, 5.f));
}

TEST(ApiProtoTest, PredictRequestChecks) {
  tfs::PredictRequest proto;
  PredictRequest request;
  absl::Status s = PredictRequestFromProto(proto, {}, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Missing ModelSpec"));

  proto.mutable_model_spec()->set_name("m");
  tensorflow::TensorProto& x = (*proto.mutable_inputs())["x"];
  x.set_dtype(tensorflow::DT_FLOAT);
  x.mutable_tensor_shape()->add_dim()->set_size(3);
  x.set_tensor_content(std::string(5, '\1'));
  s = PredictRequestFromProto(proto, {}, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'x'"));
  EXPECT_THAT(s.message(), HasSubstr("5 bytes"));

  // The element limit is checked on the declared shape, before allocating.
  x.clear_tensor_content();
  x.mutable_tensor_shape()->mutable_dim(0)->set_size(int64_t{1} << 40);
  x.mutable_tensor_shape()->add_dim()->set_size(int64_t{1} << 40);
  s = PredictRequestFromProto(proto, {}, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("input 'x'"));
  EXPECT_THAT(s.message(), HasSubstr("limit"));

  ProtoLimits small;
  small.max_tensor_elements = 10;
  x.mutable_tensor_shape()->Clear();
  x.mutable_tensor_shape()->add_dim()->set_size(11);
  s = PredictRequestFromProto(proto, small, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  x.mutable_tensor_shape()->mutable_dim(0)->set_size(10);
  x.add_float_val(0.5f);
  ASSERT_TRUE(PredictRequestFromProto(proto, small, &request).ok());
  EXPECT_EQ(request.inputs.at("x").NumElements(), 10);

  x.mutable_tensor_shape()->mutable_dim(0)->set_size(-4);
  s = PredictRequestFromProto(proto, {}, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("input 'x'"));

  x.set_dtype(static_cast<tensorflow::DataType>(999));
  x.mutable_tensor_shape()->mutable_dim(0)->set_size(1);
  s = PredictRequestFromProto(proto, {}, &request);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("dtype"));
}

// Byte limits count what the decoded tensors take, repeated values included:
// a short string_val repeats its last string over the whole shape.
TEST(ApiProtoTest, RequestByteLimitCountsDecodedBytes) {
  ProtoLimits limits;
  limits.max_request_bytes = 1 << 20;
  tensorflow::TensorProto s;
  s.set_dtype(tensorflow::DT_STRING);
  s.mutable_tensor_shape()->add_dim()->set_size(1024);
  s.add_string_val(std::string(2000, 'a'));  // 1024 x 2000 bytes decoded
  int64_t used = 0;
  auto t = TensorFromRequestProto("s", s, limits, &used);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(t.status().message(), HasSubstr("input 's' (string [1024])"));
  EXPECT_THAT(t.status().message(), HasSubstr("limit of 1048576 bytes"));
  EXPECT_EQ(used, 0);

  // Two float inputs of 600 KiB each: the second brings the request over.
  tensorflow::TensorProto f;
  f.set_dtype(tensorflow::DT_FLOAT);
  f.mutable_tensor_shape()->add_dim()->set_size(600 << 8);
  t = TensorFromRequestProto("a", f, limits, &used);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(used, 600 << 10);
  t = TensorFromRequestProto("b", f, limits, &used);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(t.status().message(), HasSubstr("input 'b'"));

  // Element counts saturate instead of wrapping around.
  EXPECT_EQ(CheckTensorLimits("w", DT_DOUBLE, {int64_t{1} << 62, 4, 4}, 0, {},
                              nullptr)
                .code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(
      CheckTensorLimits("z", DT_DOUBLE, {int64_t{1} << 62, 0}, 0, {}, nullptr)
          .ok());
}

TEST(ApiProtoTest, ExampleInputIsMovedAndChecked) {
  tfs::Input input;
  ExampleInput out;
  absl::Status s = ExampleInputFromProto(&input, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("Input is empty"));
  input.mutable_example_list();
  s = ExampleInputFromProto(&input, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no examples"));

  auto* with_context = input.mutable_example_list_with_context();
  (*with_context->mutable_context()->mutable_features()->mutable_feature())["u"]
      .mutable_int64_list()
      ->add_value(9);
  for (int i = 0; i < 3; ++i) {
    (*with_context->add_examples()->mutable_features()->mutable_feature())["x"]
        .mutable_float_list()
        ->add_value(0.5f + i);
  }
  ASSERT_TRUE(ExampleInputFromProto(&input, &out).ok());
  ASSERT_EQ(out.examples.size(), 3u);
  EXPECT_EQ(out.examples[2].features().feature().at("x").float_list().value(0),
            2.5f);
  ASSERT_TRUE(out.context.has_value());
  EXPECT_EQ(out.context->features().feature().at("u").int64_list().value(0), 9);
  // Moved, not copied.
  EXPECT_TRUE(
      input.example_list_with_context().context().features().feature().empty());
  EXPECT_TRUE(input.example_list_with_context()
                  .examples(0)
                  .features()
                  .feature()
                  .empty());
}

TEST(ApiProtoTest, MetadataAndStatusConversions) {
  tfs::GetModelMetadataRequest proto;
  MetadataRequest request;
  EXPECT_THAT(MetadataRequestFromProto(proto, &request).message(),
              HasSubstr("Missing ModelSpec"));
  proto.mutable_model_spec()->set_name("m");
  EXPECT_THAT(MetadataRequestFromProto(proto, &request).message(),
              HasSubstr("at least one metadata_field"));
  proto.add_metadata_field("graph_def");
  EXPECT_THAT(MetadataRequestFromProto(proto, &request).message(),
              HasSubstr("Metadata field graph_def is not supported"));
  proto.set_metadata_field(0, "signature_def");
  EXPECT_TRUE(MetadataRequestFromProto(proto, &request).ok());

  MetadataResponse response;
  response.model_spec.name = "m";
  response.model_spec.version = 3;
  response.signature_def["serving_default"].set_method_name(
      "tensorflow/serving/predict");
  tfs::GetModelMetadataResponse out;
  MetadataResponseToProto(response, &out);
  const google::protobuf::Any& any = out.metadata().at("signature_def");
  EXPECT_EQ(any.type_url(), kSignatureDefMapTypeUrl);
  tfs::SignatureDefMap map;
  ASSERT_TRUE(any.UnpackTo(&map));
  EXPECT_EQ(map.signature_def().at("serving_default").method_name(),
            "tensorflow/serving/predict");
  EXPECT_EQ(out.model_spec().version().value(), 3);

  StatusResponse status;
  status.versions.push_back({1, ModelVersionState::kEnd,
                             absl::DataLossError("version 1: bad checksum")});
  status.versions.push_back(
      {2, ModelVersionState::kAvailable, absl::OkStatus()});
  tfs::GetModelStatusResponse status_out;
  StatusResponseToProto(status, &status_out);
  ASSERT_EQ(status_out.model_version_status_size(), 2);
  EXPECT_EQ(status_out.model_version_status(0).state(),
            tfs::ModelVersionStatus::END);
  EXPECT_EQ(status_out.model_version_status(0).status().error_code(),
            tensorflow::error::DATA_LOSS);
  EXPECT_EQ(status_out.model_version_status(0).status().error_message(),
            "version 1: bad checksum");
  EXPECT_EQ(status_out.model_version_status(1).state(),
            tfs::ModelVersionStatus::AVAILABLE);
  EXPECT_EQ(status_out.model_version_status(1).status().error_code(),
            tensorflow::error::OK);
  EXPECT_EQ(status_out.model_version_status(1).status().error_message(), "");
}

}  // namespace
}  // namespace recflow::serving
