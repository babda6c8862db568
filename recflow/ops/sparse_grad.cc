// Gradients of the sparse-segment ops (sparse_ops.cc): with respect to
// data, through the matching SparseSegment*Grad op (TensorFlow's
// math_grad.py); indices, segment ids and num_segments get none. Unique and
// the *Grad ops themselves are not differentiated (as in TensorFlow); nor
// are the sparse optimizer updates.
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/sparse_ops.h"

namespace recflow {
namespace {

// data.shape[0] as an int32 scalar: a Const when statically known.
Output Dim0(const Scope& scope, const Output& data) {
  const PartialShape s = data.shape();
  if (!s.unknown_rank() && s.rank() >= 1 && s.dim(0) >= 0) {
    return ops::Const(scope, static_cast<int32_t>(s.dim(0)));
  }
  return ops::GatherV2(scope, ops::Shape(scope, data, DT_INT32),
                       ops::Const(scope, int32_t{0}),
                       ops::Const(scope, int32_t{0}));
}

using GradOpFn = Output (*)(const Scope&, Output, Output, Output, Output);

template <GradOpFn kGradOp>
absl::Status SparseSegmentGrad(const Scope& scope, const Node& op,
                               const std::vector<Output>& g,
                               std::vector<Output>* grad_inputs) {
  const Output data = OpInput(op, 0);
  grad_inputs->push_back(
      kGradOp(scope, g[0], OpInput(op, 1), OpInput(op, 2), Dim0(scope, data)));
  for (int i = 1; i < op.num_inputs(); ++i)
    grad_inputs->push_back(NoGradient());
  return scope.status();
}

REGISTER_GRADIENT_OP("SparseSegmentSum",
                     SparseSegmentGrad<ops::SparseSegmentSumGrad>);
REGISTER_GRADIENT_OP("SparseSegmentMean",
                     SparseSegmentGrad<ops::SparseSegmentMeanGrad>);
REGISTER_GRADIENT_OP("SparseSegmentSqrtN",
                     SparseSegmentGrad<ops::SparseSegmentSqrtNGrad>);
REGISTER_GRADIENT_OP("SparseSegmentSumWithNumSegments",
                     SparseSegmentGrad<ops::SparseSegmentSumGrad>);
REGISTER_GRADIENT_OP("SparseSegmentMeanWithNumSegments",
                     SparseSegmentGrad<ops::SparseSegmentMeanGrad>);
REGISTER_GRADIENT_OP("SparseSegmentSqrtNWithNumSegments",
                     SparseSegmentGrad<ops::SparseSegmentSqrtNGrad>);
REGISTER_NO_GRADIENT_OP("SparseSegmentSumGrad");
REGISTER_NO_GRADIENT_OP("SparseSegmentMeanGrad");
REGISTER_NO_GRADIENT_OP("SparseSegmentSqrtNGrad");
REGISTER_NO_GRADIENT_OP("Unique");

// The sparse optimizer updates (sparse_training_ops.cc) end a training
// step; nothing differentiable flows through them.
REGISTER_NO_GRADIENT_OP("SparseApplyGradientDescent");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyGradientDescent");
REGISTER_NO_GRADIENT_OP("SparseApplyMomentum");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyMomentum");
REGISTER_NO_GRADIENT_OP("SparseApplyAdagrad");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyAdagrad");
REGISTER_NO_GRADIENT_OP("SparseApplyAdagradV2");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyAdagradV2");
REGISTER_NO_GRADIENT_OP("SparseApplyAdam");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyAdam");
REGISTER_NO_GRADIENT_OP("SparseApplyFtrl");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyFtrl");
REGISTER_NO_GRADIENT_OP("SparseApplyFtrlV2");
REGISTER_NO_GRADIENT_OP("ResourceSparseApplyFtrlV2");

}  // namespace
}  // namespace recflow
