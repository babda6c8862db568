// Gradients of the reduction ops (reduction_ops.cc).
//
// Every reduction's gradient first brings the incoming gradient (and for
// Max/Min/Prod the output) back to the "kept dims" shape — the input's shape
// with each reduced dimension 1 — and then broadcasts it against the input:
//   * keep_dims=true: it already has that shape;
//   * the reduced axes are the leading ones (a batch reduction, a full
//     reduction): NumPy broadcasting already lines it up, no reshape;
//   * else it is reshaped to a shape that is a Const when the input's shape
//     is static, Shape(input) * mask + (1 - mask) when only the rank and the
//     axes are, and Shape(Sum(input, axes, keep_dims=true)) otherwise (an
//     extra reduction at run time, for unknown ranks or fed axes).
//
// Mean's is Sum's times 1 / count (a Const when the reduced dimensions are
// static). Max/Min's goes to the positions equal to the result, split
// evenly among ties (TensorFlow's). Prod's is g * y / x: correct for inputs
// without zeros (a zero input yields inf/nan where TensorFlow's
// cumulative-product formulation gives the product of the others).
#include <algorithm>
#include <limits>
#include <vector>

#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"

namespace recflow {
namespace {

// An op built by name (for ops whose typed helpers live in other families).
Output Op(const Scope& scope, const char* op, std::vector<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (Output& in : inputs) b.Input(in);
  return Output(scope.AddNode(b));
}

Output Cast(const Scope& scope, Output x, DataType dst) {
  NodeBuilder b(scope.GetUniqueNameForOp("Cast"), "Cast");
  b.Input(x).Attr("DstT", dst);
  return Output(scope.AddNode(b));
}

Output ScalarOfType(const Scope& scope, DataType dtype, double value) {
  Tensor t(dtype, TensorShape());
  if (dtype == DT_DOUBLE) {
    t.scalar<double>() = value;
  } else if (dtype == DT_FLOAT) {
    t.scalar<float>() = static_cast<float>(value);
  } else {
    scope.UpdateStatus(errors::Unimplemented("gradient constant of type ", DataTypeString(dtype),
                                             "; only float and double are differentiable"));
    return Output();
  }
  return ops::Const(scope, t);
}

Output Int32Vector(const Scope& scope, const std::vector<int64_t>& values) {
  std::vector<int32_t> v(values.begin(), values.end());
  return ops::Const(scope, Tensor::FromVector<int32_t>(absl::MakeConstSpan(v)));
}

// What graph construction knows of one reduction node.
struct Reduction {
  Output input, axes, output;
  bool keep_dims = false;
  PartialShape input_shape;
  // The reduced axes, normalized and sorted, when the axes are a Const and
  // the input rank is known.
  bool axes_known = false;
  std::vector<int> reduced;
};

absl::StatusOr<Reduction> Describe(const Node& op) {
  Reduction r;
  r.input = OpInput(op, 0);
  r.axes = OpInput(op, 1);
  r.output = OpOutput(op, 0);
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "keep_dims", &r.keep_dims));
  r.input_shape = r.input.shape();
  const Tensor* axes = r.axes.index() == 0 ? r.axes.node()->constant_value() : nullptr;
  const int rank = r.input_shape.rank();
  if (axes != nullptr && rank >= 0) {
    std::vector<int64_t> v;
    if (axes->dtype() == DT_INT32) {
      for (int32_t a : axes->flat<int32_t>()) v.push_back(a);
    } else {
      for (int64_t a : axes->flat<int64_t>()) v.push_back(a);
    }
    for (int64_t a : v) r.reduced.push_back(static_cast<int>(a < 0 ? a + rank : a));
    std::sort(r.reduced.begin(), r.reduced.end());
    r.axes_known = true;
  }
  return r;
}

// True when `t`, shaped like the reduction's output, broadcasts against the
// input as the kept-dims shape would.
bool BroadcastsAsIs(const Reduction& r) {
  if (r.keep_dims) return true;
  if (!r.axes_known) return false;
  for (size_t i = 0; i < r.reduced.size(); ++i) {
    if (r.reduced[i] != static_cast<int>(i)) return false;
  }
  return true;  // the leading axes: broadcasting prepends them
}

// The kept-dims shape as an int32 vector, or an invalid Output when the
// output already broadcasts against the input (BroadcastsAsIs).
Output KeptDimsShape(const Scope& scope, const Reduction& r) {
  if (BroadcastsAsIs(r)) return Output();
  if (!r.axes_known) {
    return Op(scope, "Shape", {ops::Sum(scope, r.input, r.axes, {.keep_dims = true})});
  }
  const int rank = r.input_shape.rank();
  std::vector<int64_t> kept(r.input_shape.dims().begin(), r.input_shape.dims().end());
  std::vector<int64_t> mask(rank, 1), fill(rank, 0);
  for (int a : r.reduced) {
    kept[a] = 1;
    mask[a] = 0;
    fill[a] = 1;
  }
  if (std::all_of(kept.begin(), kept.end(), [](int64_t d) { return d >= 0; })) {
    return Int32Vector(scope, kept);
  }
  // One unknown dimension (typically the batch) among positive ones: a
  // Const with -1 there, so the reshaped gradient's shape stays known.
  if (std::count_if(kept.begin(), kept.end(), [](int64_t d) { return d < 0; }) == 1 &&
      std::none_of(kept.begin(), kept.end(), [](int64_t d) { return d == 0; })) {
    for (int64_t& d : kept) d = std::max<int64_t>(d, -1);
    return Int32Vector(scope, kept);
  }
  return ops::AddV2(scope,
                    ops::Mul(scope, Op(scope, "Shape", {r.input}), Int32Vector(scope, mask)),
                    Int32Vector(scope, fill));
}

// `t` (shaped like the output) in the kept-dims shape `kept_shape`.
Output ToKeptDims(const Scope& scope, const Output& kept_shape, Output t) {
  return kept_shape.valid() ? Op(scope, "Reshape", {t, kept_shape}) : t;
}

// The number of input elements per output element, as a scalar of the
// input's type: a Const when the reduced dimensions are static.
Output InverseCount(const Scope& scope, const Reduction& r) {
  const DataType dtype = BaseType(r.input.type());
  if (r.axes_known) {
    int64_t count = 1;
    bool known = true;
    for (int a : r.reduced) {
      if (r.input_shape.dim(a) < 0) known = false;
      count *= std::max<int64_t>(r.input_shape.dim(a), 0);
    }
    if (known) return ScalarOfType(scope, dtype, count == 0 ? 0.0 : 1.0 / count);
  }
  // out_size / in_size, from the shapes at run time.
  Output zero = ops::Const(scope, 0);
  Output in_size = ops::Prod(scope, Op(scope, "Shape", {r.input}), zero);
  Output out_size = ops::Prod(scope, Op(scope, "Shape", {r.output}), zero);
  return Op(scope, "RealDiv", {Cast(scope, out_size, dtype), Cast(scope, in_size, dtype)});
}

// The kept-dims gradient broadcast to the input's shape. `kept_rank`: g_kept
// has the input's rank with 1 in every reduced dimension (it was reshaped to
// the kept-dims shape, or keep_dims was set). Then, when the reduced
// dimensions are static, the broadcast is a Tile by Const multiples: one
// copy, where Mul(g_kept, OnesLike(input)) also writes a tensor of ones and
// reads it back (DeepFM's FM term had two [B, 27, 16] of them per step).
// The values are the same (g * 1 is g).
Output BroadcastToInput(const Scope& scope, const Reduction& r, Output g_kept,
                        bool kept_rank) {
  const int rank = r.input_shape.rank();
  bool tile = kept_rank && r.axes_known && rank >= 0;
  std::vector<int64_t> multiples(std::max(rank, 0), 1);
  for (int a : r.reduced) {
    if (!tile) break;
    tile = a >= 0 && a < rank && r.input_shape.dim(a) >= 0 &&
           r.input_shape.dim(a) <= std::numeric_limits<int32_t>::max();
    if (tile) multiples[a] = r.input_shape.dim(a);
  }
  if (tile) return Op(scope, "Tile", {g_kept, Int32Vector(scope, multiples)});
  return ops::Mul(scope, g_kept, ops::OnesLike(scope, r.input));
}

absl::Status SumGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                     std::vector<Output>* grad_inputs) {
  ASSIGN_OR_RETURN(Reduction r, Describe(op));
  const Output kept_shape = KeptDimsShape(scope, r);
  grad_inputs->push_back(BroadcastToInput(scope, r, ToKeptDims(scope, kept_shape, g[0]),
                                          kept_shape.valid() || r.keep_dims));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status MeanGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  ASSIGN_OR_RETURN(Reduction r, Describe(op));
  const Output kept_shape = KeptDimsShape(scope, r);
  Output scaled = ops::Mul(scope, ToKeptDims(scope, kept_shape, g[0]), InverseCount(scope, r));
  grad_inputs->push_back(
      BroadcastToInput(scope, r, scaled, kept_shape.valid() || r.keep_dims));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// TensorFlow's: the gradient goes to the positions equal to the extreme,
// split evenly among ties.
absl::Status MinOrMaxGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                          std::vector<Output>* grad_inputs) {
  ASSIGN_OR_RETURN(Reduction r, Describe(op));
  const DataType dtype = BaseType(r.input.type());
  const Output kept_shape = KeptDimsShape(scope, r);
  Output y_kept = ToKeptDims(scope, kept_shape, r.output);
  Output g_kept = ToKeptDims(scope, kept_shape, g[0]);
  Output indicators = Cast(scope, Op(scope, "Equal", {r.input, y_kept}), dtype);
  Output num_selected = ops::Sum(scope, indicators, r.axes, {.keep_dims = true});
  Output share = Op(scope, "RealDiv", {g_kept, num_selected});
  grad_inputs->push_back(ops::Mul(scope, indicators, share));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// d prod / d x_i = prod / x_i (inputs without zeros; see the file comment).
absl::Status ProdGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  ASSIGN_OR_RETURN(Reduction r, Describe(op));
  const Output kept_shape = KeptDimsShape(scope, r);
  Output gy = ops::Mul(scope, ToKeptDims(scope, kept_shape, g[0]),
                       ToKeptDims(scope, kept_shape, r.output));
  grad_inputs->push_back(Op(scope, "RealDiv", {gy, r.input}));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

REGISTER_GRADIENT_OP("Sum", SumGrad);
REGISTER_GRADIENT_OP("Mean", MeanGrad);
REGISTER_GRADIENT_OP("Max", MinOrMaxGrad);
REGISTER_GRADIENT_OP("Min", MinOrMaxGrad);
REGISTER_GRADIENT_OP("Prod", ProdGrad);
REGISTER_NO_GRADIENT_OP("ArgMax");
REGISTER_NO_GRADIENT_OP("ArgMin");

}  // namespace
}  // namespace recflow
