// Translation between TF Serving's apis protos (recflow/proto/serving_*.proto,
// package tensorflow.serving) and the PredictionApi structs
// (prediction_api.h). The gRPC services (grpc_server.h) use it; so can
// anything else that holds TF Serving protos, e.g. the warm-up records
// (PredictionLog) of a SavedModel.
//
//   tensorflow::serving::PredictRequest proto = ...;  // from the wire
//   PredictRequest request;
//   RETURN_IF_ERROR(PredictRequestFromProto(proto, {}, &request));
//   PredictResponse response;
//   RETURN_IF_ERROR(api->Predict(request, &response));
//   tensorflow::serving::PredictResponse out;
//   PredictResponseToProto(response, {}, &out);
//
// A proto from a request is untrusted: every *FromProto checks it and
// returns InvalidArgument naming the field at fault (a missing model_spec,
// an input tensor whose bytes do not match its dtype and shape, an Input
// with no examples), or ResourceExhausted for tensors over ProtoLimits.
// The checks TF Serving makes in its front end are made here with the same
// outcome; the rest (unknown model, signature, input key, ...) are the
// PredictionApi's.
//
// Thread-safe: free functions without shared state.
#ifndef RECFLOW_SERVING_PREDICTION_API_PROTO_H_
#define RECFLOW_SERVING_PREDICTION_API_PROTO_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/serving_classification.pb.h"
#include "recflow/proto/serving_get_model_metadata.pb.h"
#include "recflow/proto/serving_get_model_status.pb.h"
#include "recflow/proto/serving_inference.pb.h"
#include "recflow/proto/serving_predict.pb.h"
#include "recflow/proto/serving_regression.pb.h"
#include "recflow/proto/serving_status.pb.h"
#include "recflow/serving/prediction_api.h"

namespace recflow::serving {

// The metadata field GetModelMetadata supports, and the type URL of its
// value (an Any packing a SignatureDefMap).
inline constexpr char kSignatureDefField[] = "signature_def";
inline constexpr char kSignatureDefMapTypeUrl[] =
    "type.googleapis.com/tensorflow.serving.SignatureDefMap";

// Limits on the tensors a request decodes, checked from the declared dtype
// and shape BEFORE anything is allocated: a TensorProto's typed fields
// repeat their last value (an empty list means zeros), so a 40-byte proto
// can declare [2147483648, 1] and cost gigabytes once decoded. Every path
// of the model server that decodes a TensorProto from outside (gRPC
// Predict, warm-up records) or makes up a tensor from a signature (the
// generated warm-up requests) applies them, through CheckTensorLimits.
struct ProtoLimits {
  // Most elements one input tensor may declare (its shape's product).
  // 2^27 = 128M elements (512 MiB of floats): far above any real request,
  // far below what would exhaust the machine.
  int64_t max_tensor_elements = int64_t{1} << 27;
  // Most bytes the decoded input tensors of one request may take together:
  // elements x their size in a Tensor (sizeof(std::string) plus the string's
  // bytes for DT_STRING, repeated values counted each time). 1 GiB.
  int64_t max_request_bytes = int64_t{1} << 30;
};

// Whether a tensor named `key` of `dtype` and `dims` fits `limits`:
// ResourceExhausted naming the key, its shape and the limit otherwise.
// `string_bytes` is the bytes of its string elements (DT_STRING; 0
// otherwise). `*request_bytes` (may be null) accumulates the decoded bytes
// across one request's tensors, for limits.max_request_bytes. Negative dims
// are let through (the decoder names them).
absl::Status CheckTensorLimits(const std::string& key, DataType dtype,
                               absl::Span<const int64_t> dims,
                               int64_t string_bytes, const ProtoLimits& limits,
                               int64_t* request_bytes);

// The one way the model server decodes a TensorProto from outside (a gRPC
// request, a warm-up record): CheckTensorLimits, then TensorFromProto
// (framework/tensor_util.h). Errors name the input `key`.
absl::StatusOr<Tensor> TensorFromRequestProto(
    const std::string& key, const tensorflow::TensorProto& proto,
    const ProtoLimits& limits, int64_t* request_bytes);

struct TensorEncoding {
  // false (TF Serving's default): typed fields (float_val, int64_val, ...),
  // which clients reading e.g. `outputs["y"].float_val` expect. true:
  // tensor_content bytes, more compact for big outputs.
  bool use_tensor_content = false;
};

// ModelSpec. A proto version (Int64Value) becomes `version`; a
// version_label stays a label. FromProto never fails.
void ModelSpecFromProto(const tensorflow::serving::ModelSpec& proto,
                        ModelSpec* spec);
void ModelSpecToProto(const ModelSpec& spec,
                      tensorflow::serving::ModelSpec* proto);

// A Tensor as a TensorProto (see TensorEncoding).
void TensorToApiProto(const Tensor& tensor, const TensorEncoding& encoding,
                      tensorflow::TensorProto* proto);

// An absl status as TF Serving's StatusProto (error_code is the same number;
// error_message is set only for an error).
void StatusToProto(const absl::Status& status,
                   tensorflow::serving::StatusProto* proto);

// Predict. InvalidArgument for a missing model_spec or an input tensor that
// does not decode (the message names the input key); ResourceExhausted for
// inputs over `limits` (TensorFromRequestProto).
absl::Status PredictRequestFromProto(
    const tensorflow::serving::PredictRequest& proto, const ProtoLimits& limits,
    PredictRequest* request);
void PredictResponseToProto(const PredictResponse& response,
                            const TensorEncoding& encoding,
                            tensorflow::serving::PredictResponse* proto);

// Input (ExampleList or ExampleListWithContext). InvalidArgument when
// neither is set or there are no examples. The examples are moved out of
// `*proto`, which is left empty: a request with hundreds of candidates is
// not copied.
absl::Status ExampleInputFromProto(tensorflow::serving::Input* proto,
                                   ExampleInput* input);

// Classify / Regress; the request's Input is moved out of `*proto` (above).
absl::Status ClassifyRequestFromProto(
    tensorflow::serving::ClassificationRequest* proto,
    ClassifyRequest* request);
void ClassifyResponseToProto(
    const ClassifyResponse& response,
    tensorflow::serving::ClassificationResponse* proto);
absl::Status RegressRequestFromProto(
    tensorflow::serving::RegressionRequest* proto, RegressRequest* request);
void RegressResponseToProto(const RegressResponse& response,
                            tensorflow::serving::RegressionResponse* proto);

// MultiInference. Never fails on its own: the tasks are checked by the
// PredictionApi (TF Serving checks them in its core, with their messages),
// and an Input without examples is left empty for it to refuse. The
// examples are moved out of `*proto` (above).
absl::Status MultiInferenceRequestFromProto(
    tensorflow::serving::MultiInferenceRequest* proto,
    MultiInferenceRequest* request);
void MultiInferenceResponseToProto(
    const MultiInferenceResponse& response,
    tensorflow::serving::MultiInferenceResponse* proto);

// GetModelMetadata. InvalidArgument for a missing model_spec, no
// metadata_field, or a field other than "signature_def" (TF Serving's
// checks and messages).
absl::Status MetadataRequestFromProto(
    const tensorflow::serving::GetModelMetadataRequest& proto,
    MetadataRequest* request);
// The response's metadata["signature_def"] is an Any packing a
// SignatureDefMap (kSignatureDefMapTypeUrl).
void MetadataResponseToProto(
    const MetadataResponse& response,
    tensorflow::serving::GetModelMetadataResponse* proto);

// GetModelStatus. InvalidArgument for a missing model_spec.
absl::Status StatusRequestFromProto(
    const tensorflow::serving::GetModelStatusRequest& proto,
    StatusRequest* request);
void StatusResponseToProto(const StatusResponse& response,
                           tensorflow::serving::GetModelStatusResponse* proto);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_PREDICTION_API_PROTO_H_
