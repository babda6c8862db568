#include "recflow/ops/nn_ops.h"

#include <vector>

#include "recflow/framework/op_registry.h"
#include "recflow/ops/node_outputs.h"

namespace recflow {
namespace {

// Input i and j merged into one shape; the error names both.
absl::StatusOr<PartialShape> MergeInputs(InferenceContext* c, int i, int j, const char* what_i,
                                         const char* what_j) {
  auto merged = c->input(i).Merge(c->input(j));
  if (!merged.ok()) {
    return errors::InvalidArgument(what_i, " and ", what_j, " must have the same shape, but ",
                                   what_i, " is ", c->input(i).DebugString(), " and ", what_j,
                                   " is ", c->input(j).DebugString());
  }
  return merged;
}

absl::Status GetDataFormat(InferenceContext* c, bool* nchw) {
  std::string format;
  RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  *nchw = format == "NCHW";
  return absl::OkStatus();
}

absl::Status BiasAddShape(InferenceContext* c) {
  bool nchw = false;
  RETURN_IF_ERROR(GetDataFormat(c, &nchw));
  ASSIGN_OR_RETURN(PartialShape value, c->WithRankAtLeast(0, nchw ? 3 : 2));
  ASSIGN_OR_RETURN(PartialShape bias, c->WithRank(1, 1));
  if (value.unknown_rank()) {
    c->set_output(0, value);
    return absl::OkStatus();
  }
  const int channel = nchw ? 1 : value.rank() - 1;
  std::vector<int64_t> dims(value.dims().begin(), value.dims().end());
  if (dims[channel] >= 0 && bias.dim(0) >= 0 && dims[channel] != bias.dim(0)) {
    return errors::InvalidArgument("bias has ", bias.dim(0), " elements but value ",
                                   value.DebugString(), " has ", dims[channel],
                                   " channels (dimension ", channel, ", data_format ",
                                   nchw ? "NCHW" : "NHWC", ")");
  }
  if (dims[channel] < 0) dims[channel] = bias.dim(0);
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status BiasAddGradShape(InferenceContext* c) {
  bool nchw = false;
  RETURN_IF_ERROR(GetDataFormat(c, &nchw));
  ASSIGN_OR_RETURN(PartialShape grad, c->WithRankAtLeast(0, nchw ? 3 : 2));
  if (grad.unknown_rank()) {
    c->set_output(0, PartialShape({kUnknownDim}));
  } else {
    c->set_output(0, PartialShape({grad.dim(nchw ? 1 : grad.rank() - 1)}));
  }
  return absl::OkStatus();
}

absl::Status SoftmaxShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape logits, c->WithRankAtLeast(0, 1));
  c->set_output(0, logits);
  return absl::OkStatus();
}

absl::Status SoftmaxCrossEntropyShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 2).status());
  RETURN_IF_ERROR(c->WithRank(1, 2).status());
  ASSIGN_OR_RETURN(PartialShape both, MergeInputs(c, 0, 1, "features", "labels"));
  both = PartialShape::UnknownDims(2).Merge(both).value();
  c->set_output(0, PartialShape({both.dim(0)}));
  c->set_output(1, both);
  return absl::OkStatus();
}

absl::Status SparseSoftmaxCrossEntropyShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape features, c->WithRank(0, 2));
  ASSIGN_OR_RETURN(PartialShape labels, c->WithRank(1, 1));
  auto batch = c->MergeDim(features.dim(0), labels.dim(0), "the batch sizes of features and labels");
  RETURN_IF_ERROR(batch.status());
  c->set_output(0, PartialShape({*batch}));
  c->set_output(1, PartialShape({*batch, features.dim(1)}));
  return absl::OkStatus();
}

absl::Status SameShapeBinary(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape both, MergeInputs(c, 0, 1, "logits", "labels"));
  c->set_output(0, both);
  return absl::OkStatus();
}

absl::Status BatchMatMulV2Shape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape x, c->WithRankAtLeast(0, 2));
  ASSIGN_OR_RETURN(PartialShape y, c->WithRankAtLeast(1, 2));
  bool adj_x = false, adj_y = false;
  RETURN_IF_ERROR(c->GetAttr("adj_x", &adj_x));
  RETURN_IF_ERROR(c->GetAttr("adj_y", &adj_y));
  if (x.unknown_rank() || y.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int rx = x.rank(), ry = y.rank();
  const int64_t m = x.dim(adj_x ? rx - 1 : rx - 2), kx = x.dim(adj_x ? rx - 2 : rx - 1);
  const int64_t ky = y.dim(adj_y ? ry - 1 : ry - 2), n = y.dim(adj_y ? ry - 2 : ry - 1);
  if (kx >= 0 && ky >= 0 && kx != ky) {
    return errors::InvalidArgument("x is ", x.DebugString(), adj_x ? " (adjoint)" : "",
                                   " but y is ", y.DebugString(), adj_y ? " (adjoint)" : "",
                                   "; inner dimensions must match (", kx, " vs ", ky, ")");
  }
  const PartialShape bx(x.dims().subspan(0, rx - 2)), by(y.dims().subspan(0, ry - 2));
  auto batch = BroadcastShapes(bx, by);
  if (!batch.ok()) {
    return errors::InvalidArgument("batch dimensions of x ", x.DebugString(), " and y ",
                                   y.DebugString(), " do not broadcast");
  }
  std::vector<int64_t> dims(batch->dims().begin(), batch->dims().end());
  dims.push_back(m);
  dims.push_back(n);
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

}  // namespace

#define RECFLOW_NN_NUMBER_TYPES_ \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, "  \
  "complex64, complex128"

REGISTER_OP("BiasAdd")
    .Input("value: T")
    .Input("bias: T")
    .Output("output: T")
    .Attr("T: {" RECFLOW_NN_NUMBER_TYPES_ "}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .SetShapeFn(BiasAddShape)
    .Doc("Adds bias, a vector, to value along its channel dimension.");

REGISTER_OP("BiasAddGrad")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {" RECFLOW_NN_NUMBER_TYPES_ "}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .SetShapeFn(BiasAddGradShape)
    .Doc("The gradient of BiasAdd for the bias: out_backprop summed over all but the channels.");

#undef RECFLOW_NN_NUMBER_TYPES_

REGISTER_OP("Softmax")
    .Input("logits: T")
    .Output("softmax: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(SoftmaxShape)
    .Doc("exp(logits) / sum(exp(logits)) along the last dimension.");

REGISTER_OP("LogSoftmax")
    .Input("logits: T")
    .Output("logsoftmax: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(SoftmaxShape)
    .Doc("logits - log(sum(exp(logits))) along the last dimension.");

REGISTER_OP("SoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: T")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(SoftmaxCrossEntropyShape)
    .Doc("Per-row softmax cross-entropy of [batch, classes] logits against label distributions.\n\n"
         "loss[i] = -sum_j labels[i,j] * log_softmax(features)[i,j]; backprop is "
         "softmax(features) - labels.");

REGISTER_OP("SparseSoftmaxCrossEntropyWithLogits")
    .Input("features: T")
    .Input("labels: Tlabels")
    .Output("loss: T")
    .Output("backprop: T")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("Tlabels: {int32, int64} = int64")
    .SetShapeFn(SparseSoftmaxCrossEntropyShape)
    .Doc("Per-row softmax cross-entropy of [batch, classes] logits against class indices.\n\n"
         "A label outside [0, classes) is an error.");

REGISTER_OP("SigmoidCrossEntropyWithLogits")
    .Input("logits: T")
    .Input("labels: T")
    .Output("loss: T")
    .Attr("T: {float, double}")
    .SetShapeFn(SameShapeBinary)
    .Doc("Elementwise max(x, 0) - x * z + log(1 + exp(-|x|)) for logits x and labels z.\n\n"
         "A fused form of TensorFlow's tf.nn.sigmoid_cross_entropy_with_logits.");

REGISTER_OP("L2Loss")
    .Input("t: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double}")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("sum(t ** 2) / 2, a scalar.");

// Inputs first .. first + n - 1, each [B, D], merged into one shape of rank
// 2; InvalidArgument naming the first input that does not fit.
absl::StatusOr<PartialShape> MergeFmInputs(InferenceContext* c, int first, int n) {
  PartialShape merged = PartialShape::UnknownDims(2);
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(PartialShape x, c->WithRank(first + i, 2));
    auto m = merged.Merge(x);
    if (!m.ok()) {
      return errors::InvalidArgument("inputs must all have the same shape [B, D], but input ", i,
                                     " is ", x.DebugString(), " and the ones before it ",
                                     merged.DebugString());
    }
    merged = *m;
  }
  return merged;
}

REGISTER_OP("FactorizationMachine")
    .Input("inputs: N * T")
    .Output("output: T")
    .Attr("N: int >= 1")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      ASSIGN_OR_RETURN(PartialShape x, MergeFmInputs(c, 0, c->num_inputs()));
      c->set_output(0, PartialShape({x.dim(0)}));
      return absl::OkStatus();
    })
    .Doc("The factorization machine's pairwise term over N vectors x_i [B, D]: "
         "output[b] = sum_{i<j} <x_i[b], x_j[b]> = 0.5 * sum_d ((sum_i x_i[b, d])^2 - "
         "sum_i x_i[b, d]^2), [B]. One pass over the inputs, without stacking them.");

REGISTER_OP("FactorizationMachineGrad")
    .Input("grad: T")
    .Input("inputs: N * T")
    .Output("backprops: N * T")
    .Attr("N: int >= 1")
    .Attr("T: {float, double}")
    .SetShapeFn([](InferenceContext* c) {
      const int n = c->num_inputs() - 1;
      ASSIGN_OR_RETURN(PartialShape grad, c->WithRank(0, 1));
      ASSIGN_OR_RETURN(PartialShape x, MergeFmInputs(c, 1, n));
      if (grad.dim(0) >= 0 && x.dim(0) >= 0 && grad.dim(0) != x.dim(0)) {
        return errors::InvalidArgument("grad ", grad.DebugString(),
                                       " must have one element per row of the inputs ",
                                       x.DebugString());
      }
      if (x.dim(0) < 0) x = PartialShape({grad.dim(0), x.dim(1)});
      for (int i = 0; i < n; ++i) c->set_output(i, x);
      return absl::OkStatus();
    })
    .Doc("The gradient of FactorizationMachine: backprops[i][b] = grad[b] * (sum_j x_j[b] - "
         "x_i[b]), one [B, D] per input.");

REGISTER_OP("BatchMatMulV2")
    .Input("x: T")
    .Input("y: T")
    .Output("output: T")
    .Attr("T: {bfloat16, half, float, double, int16, int32, int64, complex64, complex128}")
    .Attr("adj_x: bool = false")
    .Attr("adj_y: bool = false")
    .SetShapeFn(BatchMatMulV2Shape)
    .Doc("Matrix products over the last two dimensions; batch dimensions broadcast.");

namespace ops {
namespace {

Output Build(const Scope& scope, NodeBuilder& b) { return Output(scope.AddNode(b)); }

CrossEntropyOutputs TwoOutputs(const Scope& scope, NodeBuilder& b) {
  Node* node = scope.AddNode(b);
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

}  // namespace

Output BiasAdd(const Scope& scope, Output value, Output bias, const BiasAddAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("BiasAdd"), "BiasAdd");
  b.Input(value).Input(bias).Attr("data_format", attrs.data_format);
  return Build(scope, b);
}

Output BiasAddGrad(const Scope& scope, Output out_backprop, const BiasAddAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("BiasAddGrad"), "BiasAddGrad");
  b.Input(out_backprop).Attr("data_format", attrs.data_format);
  return Build(scope, b);
}

Output Softmax(const Scope& scope, Output logits) {
  NodeBuilder b(scope.GetUniqueNameForOp("Softmax"), "Softmax");
  b.Input(logits);
  return Build(scope, b);
}

Output LogSoftmax(const Scope& scope, Output logits) {
  NodeBuilder b(scope.GetUniqueNameForOp("LogSoftmax"), "LogSoftmax");
  b.Input(logits);
  return Build(scope, b);
}

CrossEntropyOutputs SoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                  Output labels) {
  NodeBuilder b(scope.GetUniqueNameForOp("SoftmaxCrossEntropyWithLogits"),
                "SoftmaxCrossEntropyWithLogits");
  b.Input(features).Input(labels);
  return TwoOutputs(scope, b);
}

CrossEntropyOutputs SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                        Output labels) {
  NodeBuilder b(scope.GetUniqueNameForOp("SparseSoftmaxCrossEntropyWithLogits"),
                "SparseSoftmaxCrossEntropyWithLogits");
  b.Input(features).Input(labels);
  return TwoOutputs(scope, b);
}

Output SigmoidCrossEntropyWithLogits(const Scope& scope, Output logits, Output labels) {
  NodeBuilder b(scope.GetUniqueNameForOp("SigmoidCrossEntropyWithLogits"),
                "SigmoidCrossEntropyWithLogits");
  b.Input(logits).Input(labels);
  return Build(scope, b);
}

Output L2Loss(const Scope& scope, Output t) {
  NodeBuilder b(scope.GetUniqueNameForOp("L2Loss"), "L2Loss");
  b.Input(t);
  return Build(scope, b);
}

Output FactorizationMachine(const Scope& scope, std::vector<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp("FactorizationMachine"), "FactorizationMachine");
  b.Input(std::move(inputs));
  return Build(scope, b);
}

std::vector<Output> FactorizationMachineGrad(const Scope& scope, Output grad,
                                             std::vector<Output> inputs) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  NodeBuilder b(scope.GetUniqueNameForOp("FactorizationMachineGrad"), "FactorizationMachineGrad");
  b.Input(grad).Input(std::move(inputs));
  return NodeOutputs(scope.AddNode(b), n);
}

Output BatchMatMulV2(const Scope& scope, Output x, Output y, const BatchMatMulAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("BatchMatMulV2"), "BatchMatMulV2");
  b.Input(x).Input(y).Attr("adj_x", attrs.adj_x).Attr("adj_y", attrs.adj_y);
  return Build(scope, b);
}

}  // namespace ops
}  // namespace recflow
