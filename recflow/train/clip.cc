#include "recflow/train/clip.h"

#include "recflow/core/status.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"

namespace recflow::train {
namespace {

Output CastTo(const Scope& scope, Output x, DataType dtype) {
  if (BaseType(x.type()) == dtype) return x;
  return ops::Cast(scope, x, dtype);
}

bool IsFloat(DataType dtype) {
  dtype = BaseType(dtype);
  return dtype == DT_FLOAT || dtype == DT_DOUBLE || dtype == DT_HALF ||
         dtype == DT_BFLOAT16;
}

// sum(t^2) over every element of t.
Output SumOfSquares(const Scope& scope, Output t) {
  Output sq = ops::Square(scope, t);
  const PartialShape shape = t.shape();
  if (shape.unknown_rank()) {
    return ops::Sum(
        scope,
        ops::Reshape(scope, sq,
                     ops::Const(scope, {int64_t{-1}}, TensorShape({1}))),
        {0});
  }
  std::vector<int> axes(shape.rank());
  for (int i = 0; i < shape.rank(); ++i) axes[i] = i;
  return ops::Sum(scope, sq, axes);
}

}  // namespace

Output GlobalNorm(const Scope& outer, const std::vector<Output>& tensors) {
  if (!outer.ok()) return Output();
  const Scope scope = outer.NewSubScope("global_norm");
  std::vector<Output> terms;
  DataType dtype = DT_INVALID;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Output& t = tensors[i];
    if (!t.valid()) continue;
    if (!IsFloat(t.type())) {
      outer.UpdateStatus(errors::InvalidArgument(
          "GlobalNorm: tensor ", i, " ('", t.name(), "') is ",
          DataTypeString(BaseType(t.type())), "; expected a floating type"));
      return Output();
    }
    if (dtype == DT_INVALID) dtype = BaseType(t.type());
    terms.push_back(CastTo(scope, SumOfSquares(scope, t), dtype));
  }
  if (terms.empty()) {
    outer.UpdateStatus(errors::InvalidArgument(
        "GlobalNorm: no valid tensors among the ", tensors.size(), " given"));
    return Output();
  }
  Output total = terms.size() == 1 ? terms[0] : ops::AddN(scope, terms);
  return ops::Sqrt(outer.WithOpName("global_norm"), total);
}

ClippedGradients ClipByGlobalNorm(const Scope& outer,
                                  const std::vector<Output>& tensors,
                                  const Hyperparameter& clip_norm) {
  ClippedGradients result;
  result.clipped.resize(tensors.size());
  if (!outer.ok()) return result;
  const Scope scope = outer.NewSubScope("clip_by_global_norm");
  Output norm = GlobalNorm(scope, tensors);
  if (!scope.ok()) return result;
  const DataType dtype = BaseType(norm.type());
  Output clip = clip_norm.ToTensor(scope.WithOpName("clip_norm"), dtype);
  Output one = dtype == DT_DOUBLE
                   ? ops::Const(scope, 1.0)
                   : CastTo(scope, ops::Const(scope, 1.0f), dtype);
  // scale = clip_norm * min(1 / norm, 1 / clip_norm) + (norm - norm): the
  // last term turns an infinite or NaN norm into a NaN scale.
  Output scale_for_finite =
      ops::Mul(scope, clip,
               ops::Minimum(scope, ops::RealDiv(scope, one, norm),
                            ops::RealDiv(scope, one, clip)));
  Output scale = ops::AddV2(scope.WithOpName("scale"), scale_for_finite,
                            ops::Sub(scope, norm, norm));
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].valid()) continue;
    result.clipped[i] =
        ops::Mul(scope.WithOpName("clipped"), tensors[i],
                 CastTo(scope, scale, BaseType(tensors[i].type())));
  }
  result.global_norm = norm;
  if (!outer.ok()) {
    result.clipped.assign(tensors.size(), Output());
    result.global_norm = Output();
  }
  return result;
}

}  // namespace recflow::train
