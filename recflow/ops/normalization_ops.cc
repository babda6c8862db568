// The fused normalization ops: LayerNorm / LayerNormGrad (recflow's) and
// FusedBatchNormV3 / FusedBatchNormGradV3 (TensorFlow's), with their shape
// functions and builder helpers. Semantics in normalization_ops.h.
#include "recflow/ops/normalization_ops.h"

#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

// x's shape with dimension `d` replaced by `size`.
PartialShape WithDim(const PartialShape& x, int d, int64_t size) {
  std::vector<int64_t> dims(x.dims().begin(), x.dims().end());
  dims[d] = size;
  return PartialShape(absl::MakeConstSpan(dims));
}

// x's shape without its last dimension.
PartialShape DropLast(const PartialShape& x) {
  if (x.unknown_rank()) return PartialShape::Unknown();
  return PartialShape(x.dims().subspan(0, x.rank() - 1));
}

// Merges the size of vector input `i` (named `what`) into `*size`.
absl::Status MergeVector(InferenceContext* c, int i, absl::string_view what,
                         absl::string_view size_name, int64_t* size) {
  auto v = c->WithRank(i, 1);
  if (!v.ok()) return errors::InvalidArgument(what, " must be a vector: ", v.status().message());
  if (*size >= 0 && v->dim(0) >= 0 && *size != v->dim(0)) {
    return errors::InvalidArgument(what, " has ", v->dim(0), " elements but ", size_name, " is ",
                                   *size);
  }
  if (*size < 0) *size = v->dim(0);
  return absl::OkStatus();
}

absl::Status LayerNormShape(InferenceContext* c) {
  const PartialShape& x = c->input(0);
  if (!x.unknown_rank() && x.rank() < 1) {
    return errors::InvalidArgument("x must have rank >= 1 (features last) but is a scalar");
  }
  int64_t d = x.unknown_rank() ? kUnknownDim : x.dim(x.rank() - 1);
  RETURN_IF_ERROR(MergeVector(c, 1, "gamma", "x's last dimension", &d));
  RETURN_IF_ERROR(MergeVector(c, 2, "beta", "x's last dimension", &d));
  c->set_output(0, x.unknown_rank() ? x : WithDim(x, x.rank() - 1, d));
  c->set_output(1, DropLast(x));
  c->set_output(2, DropLast(x));
  return absl::OkStatus();
}

absl::Status LayerNormGradShape(InferenceContext* c) {
  auto merged = c->input(0).Merge(c->input(1));
  if (!merged.ok()) {
    return errors::InvalidArgument("dy and x must have the same shape, got ",
                                   c->input(0).DebugString(), " and ", c->input(1).DebugString());
  }
  PartialShape x = *merged;
  if (!x.unknown_rank() && x.rank() < 1) {
    return errors::InvalidArgument("x must have rank >= 1 (features last) but is a scalar");
  }
  int64_t d = x.unknown_rank() ? kUnknownDim : x.dim(x.rank() - 1);
  RETURN_IF_ERROR(MergeVector(c, 2, "gamma", "x's last dimension", &d));
  if (!x.unknown_rank()) x = WithDim(x, x.rank() - 1, d);
  for (int i : {3, 4}) {
    if (!c->input(i).IsCompatibleWith(DropLast(x))) {
      return errors::InvalidArgument(i == 3 ? "mean" : "inv_std", " must have shape ",
                                     DropLast(x).DebugString(), " (x without its last dimension)",
                                     ", got ", c->input(i).DebugString());
    }
  }
  c->set_output(0, x);
  c->set_output(1, PartialShape({d}));
  c->set_output(2, PartialShape({d}));
  return absl::OkStatus();
}

// The index of the channel dimension for `data_format` and x's rank, or an
// error naming the ranks the format takes.
absl::StatusOr<int> ChannelIndex(const std::string& data_format, int rank) {
  if (data_format == "NHWC") {
    if (rank == 4 || rank == 2) return rank - 1;
    return errors::InvalidArgument("x must be rank 4 [N,H,W,C] or rank 2 [N,C] for data_format ",
                                   "NHWC, but is rank ", rank);
  }
  if (data_format == "NDHWC") {
    if (rank == 5) return 4;
    return errors::InvalidArgument("x must be rank 5 for data_format NDHWC, but is rank ", rank);
  }
  if (data_format == "NCHW" || data_format == "NCDHW") {
    const int want = data_format == "NCHW" ? 4 : 5;
    if (rank == want) return 1;
    return errors::InvalidArgument("x must be rank ", want, " for data_format ", data_format,
                                   ", but is rank ", rank);
  }
  return errors::InvalidArgument("unknown data_format '", data_format, "'");
}

absl::Status FusedBatchNormShape(InferenceContext* c) {
  std::string data_format;
  bool is_training = true;
  float factor = 1.0f;
  RETURN_IF_ERROR(c->GetAttr("data_format", &data_format));
  RETURN_IF_ERROR(c->GetAttr("is_training", &is_training));
  RETURN_IF_ERROR(c->GetAttr("exponential_avg_factor", &factor));
  const PartialShape& x = c->input(0);
  int64_t channels = kUnknownDim;
  int ci = -1;
  if (!x.unknown_rank()) {
    ASSIGN_OR_RETURN(ci, ChannelIndex(data_format, x.rank()));
    channels = x.dim(ci);
  }
  // mean and variance are read only in inference or for running averages.
  const int num_checked = (is_training && factor == 1.0f) ? 3 : 5;
  static const char* const kNames[] = {"x", "scale", "offset", "mean", "variance"};
  for (int i = 1; i < num_checked; ++i) {
    RETURN_IF_ERROR(MergeVector(c, i, kNames[i], "the number of channels", &channels));
  }
  c->set_output(0, ci < 0 ? x : WithDim(x, ci, channels));
  for (int i = 1; i <= 4; ++i) c->set_output(i, PartialShape({channels}));
  c->set_output(5, PartialShape({}));
  return absl::OkStatus();
}

absl::Status FusedBatchNormGradShape(InferenceContext* c) {
  std::string data_format;
  RETURN_IF_ERROR(c->GetAttr("data_format", &data_format));
  auto merged = c->input(0).Merge(c->input(1));
  if (!merged.ok()) {
    return errors::InvalidArgument("y_backprop and x must have the same shape, got ",
                                   c->input(0).DebugString(), " and ", c->input(1).DebugString());
  }
  const PartialShape x = *merged;
  int64_t channels = kUnknownDim;
  int ci = -1;
  if (!x.unknown_rank()) {
    ASSIGN_OR_RETURN(ci, ChannelIndex(data_format, x.rank()));
    channels = x.dim(ci);
  }
  static const char* const kNames[] = {"scale", "reserve_space_1", "reserve_space_2"};
  for (int i = 2; i <= 4; ++i) {
    RETURN_IF_ERROR(MergeVector(c, i, kNames[i - 2], "the number of channels", &channels));
  }
  c->set_output(0, ci < 0 ? x : WithDim(x, ci, channels));
  c->set_output(1, PartialShape({channels}));
  c->set_output(2, PartialShape({channels}));
  c->set_output(3, PartialShape({0}));
  c->set_output(4, PartialShape({0}));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("LayerNorm")
    .Input("x: T")
    .Input("gamma: U")
    .Input("beta: U")
    .Output("y: T")
    .Output("mean: U")
    .Output("inv_std: U")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("U: {float, double}")
    .Attr("epsilon: float = 0.001")
    .SetShapeFn(LayerNormShape)
    .Doc(
        "Layer normalization over x's last dimension: y = (x - mean) * inv_std * gamma + beta.\n\n"
        "mean and inv_std = 1/sqrt(var + epsilon) (biased variance) are per row, shaped like x "
        "without its last dimension, and saved for LayerNormGrad. U is float, or double when T "
        "is double. epsilon defaults to Keras's 1e-3.");

REGISTER_OP("LayerNormGrad")
    .Input("dy: T")
    .Input("x: T")
    .Input("gamma: U")
    .Input("mean: U")
    .Input("inv_std: U")
    .Output("dx: T")
    .Output("dgamma: U")
    .Output("dbeta: U")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("U: {float, double}")
    .SetShapeFn(LayerNormGradShape)
    .Doc(
        "Gradients of LayerNorm's y with respect to x, gamma and beta, from its saved mean "
        "and inv_std.");

REGISTER_OP("FusedBatchNormV3")
    .Input("x: T")
    .Input("scale: U")
    .Input("offset: U")
    .Input("mean: U")
    .Input("variance: U")
    .Output("y: T")
    .Output("batch_mean: U")
    .Output("batch_variance: U")
    .Output("reserve_space_1: U")
    .Output("reserve_space_2: U")
    .Output("reserve_space_3: U")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("U: {float, double}")
    .Attr("epsilon: float = 0.0001")
    .Attr("exponential_avg_factor: float = 1.0")
    .Attr("data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'")
    .Attr("is_training: bool = true")
    .SetShapeFn(FusedBatchNormShape)
    .Doc(
        "Batch normalization over every dimension but the channels (TensorFlow's).\n\n"
        "Training: y = (x - batch_mean) / sqrt(batch_var + epsilon) * scale + offset with the "
        "batch's biased variance; batch_variance is Bessel-corrected (n / (n - 1)); with "
        "exponential_avg_factor f != 1, batch_mean / batch_variance are (1 - f) * mean + f * "
        "batch statistic. reserve_space_1/2 hold the batch mean and biased variance. "
        "Inference: normalizes with the given mean and variance and returns them. CPU kernels "
        "take channels-last layouts; recflow also accepts rank-2 [N,C] x and T = U = double.");

REGISTER_OP("FusedBatchNormGradV3")
    .Input("y_backprop: T")
    .Input("x: T")
    .Input("scale: U")
    .Input("reserve_space_1: U")
    .Input("reserve_space_2: U")
    .Input("reserve_space_3: U")
    .Output("x_backprop: T")
    .Output("scale_backprop: U")
    .Output("offset_backprop: U")
    .Output("reserve_space_4: U")
    .Output("reserve_space_5: U")
    .Attr("T: {half, bfloat16, float, double}")
    .Attr("U: {float, double}")
    .Attr("epsilon: float = 0.0001")
    .Attr("data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'")
    .Attr("is_training: bool = true")
    .SetShapeFn(FusedBatchNormGradShape)
    .Doc(
        "Gradients of FusedBatchNormV3's y with respect to x, scale and offset (TensorFlow's).\n\n"
        "reserve_space_1/2 are the forward op's saved batch mean and biased variance "
        "(training) or the population mean and variance (inference). TensorFlow types scale "
        "as float; recflow types it U (float, or double for T = double).");

namespace ops {
namespace {

// An empty [0] constant named `name` (not through the scope's op name,
// which belongs to the op the helper builds).
Output EmptyVector(const Scope& scope, const std::string& name, DataType dtype) {
  NodeBuilder b(name, "Const");
  b.Attr("value", Tensor(dtype, TensorShape({0}))).Attr("dtype", dtype);
  return Output(scope.AddNode(b));
}

}  // namespace

LayerNormOutputs LayerNorm(const Scope& scope, Output x, Output gamma, Output beta,
                           const LayerNormAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("LayerNorm"), "LayerNorm");
  b.Input(x).Input(gamma).Input(beta).Attr("epsilon", attrs.epsilon);
  Node* n = scope.AddNode(b);
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

LayerNormGradOutputs LayerNormGrad(const Scope& scope, Output dy, Output x, Output gamma,
                                   Output mean, Output inv_std) {
  NodeBuilder b(scope.GetUniqueNameForOp("LayerNormGrad"), "LayerNormGrad");
  b.Input(dy).Input(x).Input(gamma).Input(mean).Input(inv_std);
  Node* n = scope.AddNode(b);
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2)};
}

FusedBatchNormOutputs FusedBatchNormV3(const Scope& scope, Output x, Output scale, Output offset,
                                       Output mean, Output variance,
                                       const FusedBatchNormAttrs& attrs) {
  if (!scope.ok()) return {};
  const std::string name = scope.GetUniqueNameForOp("FusedBatchNormV3");
  if (!mean.valid()) mean = EmptyVector(scope, name + "/unused_mean", BaseType(scale.type()));
  if (!variance.valid()) {
    variance = EmptyVector(scope, name + "/unused_variance", BaseType(scale.type()));
  }
  NodeBuilder b(name, "FusedBatchNormV3");
  b.Input(x)
      .Input(scale)
      .Input(offset)
      .Input(mean)
      .Input(variance)
      .Attr("epsilon", attrs.epsilon)
      .Attr("exponential_avg_factor", attrs.exponential_avg_factor)
      .Attr("data_format", attrs.data_format)
      .Attr("is_training", attrs.is_training);
  Node* n = scope.AddNode(b);
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2), Output(n, 3), Output(n, 4), Output(n, 5)};
}

FusedBatchNormGradOutputs FusedBatchNormGradV3(const Scope& scope, Output y_backprop, Output x,
                                               Output scale, Output reserve_space_1,
                                               Output reserve_space_2, Output reserve_space_3,
                                               const FusedBatchNormGradAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("FusedBatchNormGradV3"), "FusedBatchNormGradV3");
  b.Input(y_backprop)
      .Input(x)
      .Input(scale)
      .Input(reserve_space_1)
      .Input(reserve_space_2)
      .Input(reserve_space_3)
      .Attr("epsilon", attrs.epsilon)
      .Attr("data_format", attrs.data_format)
      .Attr("is_training", attrs.is_training);
  Node* n = scope.AddNode(b);
  if (n == nullptr) return {};
  return {Output(n, 0), Output(n, 1), Output(n, 2), Output(n, 3), Output(n, 4)};
}

}  // namespace ops
}  // namespace recflow
