// Gradients of the array ops (array_ops.cc, array_index_ops.cc).
//
// Where the forward op's shapes or integer arguments are known when the
// gradient is built (static shapes, Const inputs), the gradient uses Const
// nodes instead of Shape/arithmetic nodes, so its own shapes stay known and
// the graph stays small.
//
// GatherV2's gradient is dense (UnsortedSegmentSum into params' shape)
// for AddSymbolicGradients; on axis 0 it also has a sparse form,
// TensorFlow's IndexedSlices (GatherV2SparseGrad), which
// AddSymbolicGradientsSparse and the optimizers use (framework/gradients.h,
// Note [sparse gradients]).
#include <limits>
#include <numeric>
#include <optional>

#include "recflow/ops/array_ops.h"
#include "recflow/ops/grad_util.h"
#include "recflow/ops/math_ops.h"

namespace recflow {
namespace {

// The integer values of `o` when it is a Const output, else nullopt.
std::optional<std::vector<int64_t>> ConstValues(const Output& o) {
  const Tensor* t =
      o.valid() && o.index() == 0 ? o.node()->constant_value() : nullptr;
  if (t == nullptr) return std::nullopt;
  std::vector<int64_t> v;
  if (t->dtype() == DT_INT32) {
    for (int32_t x : t->flat<int32_t>()) v.push_back(x);
  } else if (t->dtype() == DT_INT64) {
    for (int64_t x : t->flat<int64_t>()) v.push_back(x);
  } else {
    return std::nullopt;
  }
  return v;
}

// A Const vector (or scalar when `scalar`) of `dtype` (int32 or int64).
Output IntConst(const Scope& scope, const std::vector<int64_t>& values,
                DataType dtype, bool scalar = false) {
  const TensorShape shape =
      scalar ? TensorShape()
             : TensorShape({static_cast<int64_t>(values.size())});
  Tensor t(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DT_INT64) {
      t.flat<int64_t>()[i] = values[i];
    } else {
      t.flat<int32_t>()[i] = static_cast<int32_t>(values[i]);
    }
  }
  return ops::Const(scope, t);
}

// The shape of `x` as a `dtype` vector: a Const when statically known.
Output ShapeOf(const Scope& scope, const Output& x, DataType dtype = DT_INT32) {
  const PartialShape s = x.shape();
  if (s.IsFullyDefined()) {
    return IntConst(
        scope, std::vector<int64_t>(s.dims().begin(), s.dims().end()), dtype);
  }
  return ops::Shape(scope, x, dtype);
}

// A reduction of `x` over `axes` by op name (the reduction family defines
// Sum and Prod).
Output Reduce(const Scope& scope, const char* op, Output x, Output axes) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(x).Input(axes).Attr("keep_dims", false);
  return Output(scope.AddNode(b));
}

absl::Status GetIntAttr(const Node& op, const char* name, int64_t* value) {
  return GetNodeAttr(AttrSlice(op.def()), name, value);
}

// Reshape, ExpandDims, Squeeze: the gradient is g with x's shape.
absl::Status ReshapeGrad(const Scope& scope, const Node& op,
                         const std::vector<Output>& g,
                         std::vector<Output>* grad_inputs) {
  const Output x = OpInput(op, 0);
  grad_inputs->push_back(ops::Reshape(scope, g[0], ShapeOf(scope, x)));
  for (int i = 1; i < op.num_inputs(); ++i)
    grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status TransposeGrad(const Scope& scope, const Node& op,
                           const std::vector<Output>& g,
                           std::vector<Output>* grad_inputs) {
  const Output perm = OpInput(op, 1);
  Output inverse;
  if (auto p = ConstValues(perm)) {
    std::vector<int64_t> inv(p->size());
    for (size_t i = 0; i < p->size(); ++i) {
      if ((*p)[i] < 0 || (*p)[i] >= static_cast<int64_t>(p->size())) {
        return errors::InvalidArgument("perm is not a permutation");
      }
      inv[(*p)[i]] = static_cast<int64_t>(i);
    }
    inverse = IntConst(scope, inv, perm.type());
  } else {
    inverse = ops::InvertPermutation(scope, perm);
  }
  grad_inputs->push_back(ops::Transpose(scope, g[0], inverse));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status ConcatV2Grad(const Scope& scope, const Node& op,
                          const std::vector<Output>& g,
                          std::vector<Output>* grad_inputs) {
  const int n = op.num_inputs() - 1;
  const Output axis = OpInput(op, n);
  const auto axis_value = ConstValues(axis);
  // Static: every input's size along a constant axis is known -> one SplitV.
  if (axis_value && axis_value->size() == 1) {
    std::vector<int64_t> sizes;
    for (int i = 0; i < n; ++i) {
      const PartialShape s = OpInput(op, i).shape();
      if (s.unknown_rank()) break;
      const int64_t rank = s.rank();
      const int64_t a =
          (*axis_value)[0] < 0 ? (*axis_value)[0] + rank : (*axis_value)[0];
      if (a < 0 || a >= rank || s.dim(static_cast<int>(a)) < 0) break;
      sizes.push_back(s.dim(static_cast<int>(a)));
    }
    if (static_cast<int>(sizes.size()) == n) {
      std::vector<Output> parts =
          ops::SplitV(scope, g[0], IntConst(scope, sizes, DT_INT64),
                      IntConst(scope, {(*axis_value)[0]}, DT_INT32, true), n);
      for (const Output& p : parts) grad_inputs->push_back(p);
      grad_inputs->push_back(NoGradient());
      return scope.status();
    }
  }
  // Dynamic: ConcatOffset gives where each input starts; Slice it out.
  Output concat_dim;
  if (axis.type() == DT_INT32) {
    concat_dim = axis;
  } else if (axis_value && axis_value->size() == 1) {
    concat_dim = IntConst(scope, {(*axis_value)[0]}, DT_INT32, true);
  } else {
    // An int64 axis only known at run time: ConcatOffset takes int32.
    NodeBuilder cast(scope.GetUniqueNameForOp("Cast"), "Cast");
    cast.Input(axis).Attr("DstT", DT_INT32);
    concat_dim = Output(scope.AddNode(cast));
  }
  std::vector<Output> shapes;
  for (int i = 0; i < n; ++i)
    shapes.push_back(ops::Shape(scope, OpInput(op, i)));
  std::vector<Output> offsets = ops::ConcatOffset(scope, concat_dim, shapes);
  for (int i = 0; i < n; ++i)
    grad_inputs->push_back(ops::Slice(scope, g[0], offsets[i], shapes[i]));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status SplitGrad(const Scope& scope, const Node& op,
                       const std::vector<Output>& g,
                       std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(
      g.size() == 1 ? g[0] : ops::ConcatV2(scope, g, OpInput(op, 0)));
  return scope.status();
}

absl::Status SplitVGrad(const Scope& scope, const Node& op,
                        const std::vector<Output>& g,
                        std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(
      g.size() == 1 ? g[0] : ops::ConcatV2(scope, g, OpInput(op, 2)));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status PackGrad(const Scope& scope, const Node& op,
                      const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  int64_t axis = 0;
  RETURN_IF_ERROR(GetIntAttr(op, "axis", &axis));
  *grad_inputs = ops::Unpack(scope, g[0], op.num_inputs(), axis);
  return scope.status();
}

absl::Status UnpackGrad(const Scope& scope, const Node& op,
                        const std::vector<Output>& g,
                        std::vector<Output>* grad_inputs) {
  int64_t axis = 0;
  RETURN_IF_ERROR(GetIntAttr(op, "axis", &axis));
  grad_inputs->push_back(ops::Pack(scope, g, axis));
  return scope.status();
}

// Slice: pad g back to x's shape with begin zeros before and the rest after.
absl::Status SliceGrad(const Scope& scope, const Node& op,
                       const std::vector<Output>& g,
                       std::vector<Output>* grad_inputs) {
  const Output x = OpInput(op, 0), begin = OpInput(op, 1);
  const DataType index = begin.type();
  const PartialShape xs = x.shape(), ys = OpOutput(op, 0).shape();
  Output paddings;
  const auto b = ConstValues(begin);
  if (b && xs.IsFullyDefined() && ys.IsFullyDefined()) {
    std::vector<int64_t> pads;
    for (int d = 0; d < xs.rank(); ++d) {
      pads.push_back((*b)[d]);
      pads.push_back(xs.dim(d) - (*b)[d] - ys.dim(d));
    }
    Tensor t(index, TensorShape({xs.rank(), 2}));
    for (size_t i = 0; i < pads.size(); ++i) {
      if (index == DT_INT64) {
        t.flat<int64_t>()[i] = pads[i];
      } else {
        t.flat<int32_t>()[i] = static_cast<int32_t>(pads[i]);
      }
    }
    paddings = ops::Const(scope, t);
  } else {
    // after = shape(x) - begin - shape(y)
    Output minus_one = IntConst(scope, {-1}, index, true);
    Output used =
        ops::AddV2(scope, begin, ops::Shape(scope, OpOutput(op, 0), index));
    Output after = ops::AddV2(scope, ops::Shape(scope, x, index),
                              ops::Mul(scope, used, minus_one));
    paddings = ops::Pack(scope, {begin, after}, 1);
  }
  grad_inputs->push_back(ops::Pad(scope, g[0], paddings));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

ops::StridedSliceAttrs StridedSliceAttrsOf(const Node& op, absl::Status* s) {
  ops::StridedSliceAttrs a;
  for (auto [name, field] : {std::pair{"begin_mask", &a.begin_mask},
                             {"end_mask", &a.end_mask},
                             {"ellipsis_mask", &a.ellipsis_mask},
                             {"new_axis_mask", &a.new_axis_mask},
                             {"shrink_axis_mask", &a.shrink_axis_mask}}) {
    if (s->ok()) *s = GetIntAttr(op, name, field);
  }
  return a;
}

absl::Status StridedSliceGradFn(const Scope& scope, const Node& op,
                                const std::vector<Output>& g,
                                std::vector<Output>* grad_inputs) {
  absl::Status s;
  const ops::StridedSliceAttrs attrs = StridedSliceAttrsOf(op, &s);
  RETURN_IF_ERROR(s);
  const Output x = OpInput(op, 0), begin = OpInput(op, 1);
  grad_inputs->push_back(
      ops::StridedSliceGrad(scope, ShapeOf(scope, x, begin.type()), begin,
                            OpInput(op, 2), OpInput(op, 3), g[0], attrs));
  for (int i = 0; i < 3; ++i) grad_inputs->push_back(NoGradient());
  return scope.status();
}

// StridedSliceGrad is linear in dy: its gradient slices g the same way.
absl::Status StridedSliceGradGrad(const Scope& scope, const Node& op,
                                  const std::vector<Output>& g,
                                  std::vector<Output>* grad_inputs) {
  absl::Status s;
  const ops::StridedSliceAttrs attrs = StridedSliceAttrsOf(op, &s);
  RETURN_IF_ERROR(s);
  for (int i = 0; i < 4; ++i) grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::StridedSlice(
      scope, g[0], OpInput(op, 1), OpInput(op, 2), OpInput(op, 3), attrs));
  return scope.status();
}

// Tile: view g as [m0, d0, m1, d1, ...] and sum over the m axes.
absl::Status TileGrad(const Scope& scope, const Node& op,
                      const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  const Output x = OpInput(op, 0), multiples = OpInput(op, 1);
  const DataType index = multiples.type();
  const PartialShape xs = x.shape();
  const auto m = ConstValues(multiples);
  Output split_shape, axes;
  if (m && xs.IsFullyDefined()) {
    std::vector<int64_t> dims, reduce;
    for (int d = 0; d < xs.rank(); ++d) {
      reduce.push_back(static_cast<int64_t>(dims.size()));
      dims.push_back((*m)[d]);
      dims.push_back(xs.dim(d));
    }
    split_shape = IntConst(scope, dims, index);
    axes = IntConst(scope, reduce, DT_INT32);
  } else {
    split_shape = ops::Reshape(
        scope, ops::Pack(scope, {multiples, ops::Shape(scope, x, index)}, 1),
        IntConst(scope, {-1}, DT_INT32));
    axes = ops::Range(scope, ops::Const(scope, int32_t{0}),
                      ops::Size(scope, split_shape),
                      ops::Const(scope, int32_t{2}));
  }
  Output summed =
      Reduce(scope, "Sum", ops::Reshape(scope, g[0], split_shape), axes);
  grad_inputs->push_back(ops::Reshape(scope, summed, ShapeOf(scope, x)));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status PadGrad(const Scope& scope, const Node& op,
                     const std::vector<Output>& g,
                     std::vector<Output>* grad_inputs) {
  const Output x = OpInput(op, 0), paddings = OpInput(op, 1);
  const DataType index = paddings.type();
  Output begin;
  if (auto p = ConstValues(paddings)) {
    std::vector<int64_t> b;
    for (size_t i = 0; i < p->size(); i += 2) b.push_back((*p)[i]);
    begin = IntConst(scope, b, index);
  } else {
    Output before = ops::Slice(scope, paddings, IntConst(scope, {0, 0}, index),
                               IntConst(scope, {-1, 1}, index));
    begin = ops::Reshape(scope, before, IntConst(scope, {-1}, DT_INT32));
  }
  grad_inputs->push_back(
      ops::Slice(scope, g[0], begin, ShapeOf(scope, x, index)));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// Fill: every output element is `value`.
absl::Status FillGrad(const Scope& scope, const Node& op,
                      const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  const PartialShape gs = g[0].shape();
  Output axes;
  if (!gs.unknown_rank()) {
    std::vector<int64_t> all(gs.rank());
    std::iota(all.begin(), all.end(), 0);
    axes = IntConst(scope, all, DT_INT32);
  } else {
    axes = ops::Range(scope, ops::Const(scope, int32_t{0}),
                      ops::Rank(scope, g[0]), ops::Const(scope, int32_t{1}));
  }
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(Reduce(scope, "Sum", g[0], axes));
  return scope.status();
}

// GatherV2 (dense). With static ranks: move the indices' dimensions of g to
// the front, sum the rows into params.shape[axis] segments, and move that
// dimension back. Without: view g as [outer, n, inner] (outer = the product
// of params.shape[:axis], n = the number of indices, inner = the product of
// params.shape[axis+1:]) and do the same with rank-3 transposes.
// True when `indices` is a constant vector of distinct values in [0, dim)
// (dim known); then (*inverse)[n] is the position of n in it, or its size
// when n does not occur.
bool DistinctConstIndices(const Output& indices, int64_t dim,
                          std::vector<int64_t>* inverse) {
  if (dim < 0 || indices.shape().unknown_rank() || indices.shape().rank() != 1) {
    return false;
  }
  const auto idx = ConstValues(indices);
  if (!idx || idx->empty() || dim > std::numeric_limits<int32_t>::max()) return false;
  const int64_t k = static_cast<int64_t>(idx->size());
  inverse->assign(dim, k);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t v = (*idx)[i];
    if (v < 0 || v >= dim || (*inverse)[v] != k) return false;
    (*inverse)[v] = i;
  }
  return true;
}

absl::Status GatherV2Grad(const Scope& scope, const Node& op,
                          const std::vector<Output>& g,
                          std::vector<Output>* grad_inputs) {
  const Output params = OpInput(op, 0), indices = OpInput(op, 1);
  const auto axis_value = ConstValues(OpInput(op, 2));
  if (!axis_value || axis_value->size() != 1) {
    return errors::Unimplemented(
        "the gradient of GatherV2 needs a constant axis");
  }
  const PartialShape ps = params.shape(), is = indices.shape();
  int64_t axis = (*axis_value)[0];
  if (axis < 0 && !ps.unknown_rank()) axis += ps.rank();
  const Output zero = IntConst(scope, {0}, DT_INT32, true);
  Output dparams;
  if (axis >= 0 && !ps.unknown_rank() && (axis == 0 || !is.unknown_rank())) {
    const Output num_segments =
        ps.dim(static_cast<int>(axis)) >= 0
            ? IntConst(scope, {ps.dim(static_cast<int>(axis))}, DT_INT32, true)
            : ops::GatherV2(scope, ops::Shape(scope, params),
                            IntConst(scope, {axis}, DT_INT32, true), zero);
    std::vector<int64_t> inverse;
    if (axis == 0) {
      dparams = ops::UnsortedSegmentSum(scope, g[0], indices, num_segments);
    } else if (DistinctConstIndices(indices, ps.dim(static_cast<int>(axis)),
                                    &inverse)) {
      // Each slice of g goes to its own position: a gather from g with one
      // zero slice appended (index K) for the positions no index names.
      // Equal to the transposes + UnsortedSegmentSum below, at a fraction
      // of the memory traffic (DLRM's pair selection, [B, F*F] -> [B, P]).
      std::vector<int64_t> paddings(2 * ps.rank(), 0);
      paddings[2 * axis + 1] = 1;
      Tensor pad(DT_INT32, TensorShape({ps.rank(), 2}));
      for (size_t i = 0; i < paddings.size(); ++i) {
        pad.flat<int32_t>()[i] = static_cast<int32_t>(paddings[i]);
      }
      dparams = ops::GatherV2(scope, ops::Pad(scope, g[0], ops::Const(scope, pad)),
                              IntConst(scope, inverse, DT_INT32),
                              IntConst(scope, {axis}, DT_INT32, true));
    } else {
      const int64_t rp = ps.rank(), ri = is.rank(), rg = rp - 1 + ri;
      std::vector<int64_t> to_front, back;
      for (int64_t d = axis; d < axis + ri; ++d) to_front.push_back(d);
      for (int64_t d = 0; d < axis; ++d) to_front.push_back(d);
      for (int64_t d = axis + ri; d < rg; ++d) to_front.push_back(d);
      for (int64_t d = 1; d <= axis; ++d) back.push_back(d);
      back.push_back(0);
      for (int64_t d = axis + 1; d < rp; ++d) back.push_back(d);
      Output front =
          ops::Transpose(scope, g[0], IntConst(scope, to_front, DT_INT32));
      Output summed =
          ops::UnsortedSegmentSum(scope, front, indices, num_segments);
      dparams = ops::Transpose(scope, summed, IntConst(scope, back, DT_INT32));
    }
  } else {
    const Output shape = ops::Shape(scope, params);
    Output a = IntConst(scope, {axis}, DT_INT32, true);
    if (axis < 0) a = ops::AddV2(scope, a, ops::Rank(scope, params));
    const Output a_vec = ops::Reshape(scope, a, IntConst(scope, {1}, DT_INT32));
    const Output one = IntConst(scope, {1}, DT_INT32);
    const Output outer = Reduce(
        scope, "Prod",
        ops::Slice(scope, shape, IntConst(scope, {0}, DT_INT32), a_vec), zero);
    const Output inner =
        Reduce(scope, "Prod",
               ops::Slice(scope, shape, ops::AddV2(scope, a_vec, one),
                          IntConst(scope, {-1}, DT_INT32)),
               zero);
    const Output g3 = ops::Reshape(
        scope, g[0],
        ops::Pack(scope, {outer, ops::Size(scope, indices), inner}));
    const Output swap = IntConst(scope, {1, 0, 2}, DT_INT32);
    const Output summed = ops::UnsortedSegmentSum(
        scope, ops::Transpose(scope, g3, swap),
        ops::Reshape(scope, indices, IntConst(scope, {-1}, DT_INT32)),
        ops::GatherV2(scope, shape, a, zero));
    dparams = ops::Reshape(scope, ops::Transpose(scope, summed, swap), shape);
  }
  grad_inputs->push_back(dparams);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// GatherV2 on axis 0, sparse: the incoming rows, one per index, as
// IndexedSlices of params' shape (TensorFlow's _GatherV2Grad). Other axes
// fall back to the dense gradient.
absl::Status GatherV2SparseGrad(const Scope& scope, const Node& op,
                                const std::vector<Output>& g,
                                std::vector<GradientValue>* grad_inputs) {
  const Output params = OpInput(op, 0), indices = OpInput(op, 1);
  const auto axis_value = ConstValues(OpInput(op, 2));
  const PartialShape ps = params.shape();
  const bool axis0 = axis_value && axis_value->size() == 1 &&
                     ((*axis_value)[0] == 0 ||
                      (!ps.unknown_rank() && (*axis_value)[0] == -ps.rank()));
  if (!axis0) {
    std::vector<Output> dense;
    RETURN_IF_ERROR(GatherV2Grad(scope, op, g, &dense));
    for (const Output& o : dense) grad_inputs->emplace_back(o);
    return scope.status();
  }
  IndexedSlices s;
  s.dense_shape = ShapeOf(scope, params, DT_INT64);
  Output flat_indices = indices;
  if (indices.shape().rank() != 1) {
    flat_indices = ops::Reshape(scope, indices, IntConst(scope, {-1}, DT_INT64));
  }
  if (BaseType(indices.type()) != DT_INT32 && BaseType(indices.type()) != DT_INT64) {
    flat_indices = ops::Cast(scope, flat_indices, DT_INT32);
  }
  s.indices = flat_indices;
  // Values: g reshaped to [n] + params.shape[1:].
  bool inner_known = !ps.unknown_rank() && ps.rank() >= 1;
  std::vector<int64_t> rows_shape = {-1};
  for (int d = 1; inner_known && d < ps.rank(); ++d) {
    inner_known = ps.dim(d) >= 0;
    rows_shape.push_back(ps.dim(d));
  }
  Output shape = inner_known
                     ? IntConst(scope, rows_shape, DT_INT64)
                     : ops::ConcatV2(scope,
                                     {IntConst(scope, {-1}, DT_INT64),
                                      ops::Slice(scope, s.dense_shape,
                                                 IntConst(scope, {1}, DT_INT64),
                                                 IntConst(scope, {-1}, DT_INT64))},
                                     IntConst(scope, {0}, DT_INT32, true));
  s.values = indices.shape().rank() == 1 ? g[0] : ops::Reshape(scope, g[0], shape);
  grad_inputs->push_back(s);
  grad_inputs->push_back(GradientValue());
  grad_inputs->push_back(GradientValue());
  return scope.status();
}

absl::Status GatherNdGrad(const Scope& scope, const Node& op,
                          const std::vector<Output>& g,
                          std::vector<Output>* grad_inputs) {
  const Output params = OpInput(op, 0), indices = OpInput(op, 1);
  grad_inputs->push_back(ops::ScatterNd(
      scope, indices, g[0], ShapeOf(scope, params, indices.type())));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status ScatterNdGrad(const Scope& scope, const Node& op,
                           const std::vector<Output>& g,
                           std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::GatherNd(scope, g[0], OpInput(op, 0)));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// UnsortedSegmentSum: each data row gets its segment's gradient. Negative
// (dropped) ids make this GatherV2 fail at run time with the index named,
// rather than silently give a wrong gradient.
absl::Status UnsortedSegmentSumGrad(const Scope& scope, const Node& op,
                                    const std::vector<Output>& g,
                                    std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(ops::GatherV2(scope, g[0], OpInput(op, 1),
                                       IntConst(scope, {0}, DT_INT32, true)));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

absl::Status IdentityGrad(const Scope& scope, const Node& op,
                          const std::vector<Output>& g,
                          std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(g[0]);
  return absl::OkStatus();
}

// IdentityN: each input's gradient is its output's (TensorFlow's
// _IdentityNGrad).
absl::Status IdentityNGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                           std::vector<Output>* grad_inputs) {
  grad_inputs->assign(g.begin(), g.end());
  return absl::OkStatus();
}

REGISTER_GRADIENT_OP("Identity", IdentityGrad);
REGISTER_GRADIENT_OP("IdentityN", IdentityNGrad);
REGISTER_GRADIENT_OP("PlaceholderWithDefault", IdentityGrad);
REGISTER_GRADIENT_OP("Reshape", ReshapeGrad);
REGISTER_GRADIENT_OP("ExpandDims", ReshapeGrad);
REGISTER_GRADIENT_OP("Squeeze", ReshapeGrad);
REGISTER_GRADIENT_OP("Transpose", TransposeGrad);
REGISTER_GRADIENT_OP("ConcatV2", ConcatV2Grad);
REGISTER_GRADIENT_OP("Split", SplitGrad);
REGISTER_GRADIENT_OP("SplitV", SplitVGrad);
REGISTER_GRADIENT_OP("Pack", PackGrad);
REGISTER_GRADIENT_OP("Unpack", UnpackGrad);
REGISTER_GRADIENT_OP("Slice", SliceGrad);
REGISTER_GRADIENT_OP("StridedSlice", StridedSliceGradFn);
REGISTER_GRADIENT_OP("StridedSliceGrad", StridedSliceGradGrad);
REGISTER_GRADIENT_OP("Tile", TileGrad);
REGISTER_GRADIENT_OP("Pad", PadGrad);
REGISTER_GRADIENT_OP("Fill", FillGrad);
REGISTER_GRADIENT_OP("GatherV2", GatherV2Grad);
REGISTER_SPARSE_GRADIENT_OP("GatherV2", GatherV2SparseGrad);
REGISTER_GRADIENT_OP("GatherNd", GatherNdGrad);
REGISTER_GRADIENT_OP("ScatterNd", ScatterNdGrad);
REGISTER_GRADIENT_OP("UnsortedSegmentSum", UnsortedSegmentSumGrad);
REGISTER_NO_GRADIENT_OP("Const");
REGISTER_NO_GRADIENT_OP("Placeholder");
REGISTER_NO_GRADIENT_OP("NoOp");
REGISTER_NO_GRADIENT_OP("ZerosLike");
REGISTER_NO_GRADIENT_OP("OnesLike");
REGISTER_NO_GRADIENT_OP("Shape");
REGISTER_NO_GRADIENT_OP("Size");
REGISTER_NO_GRADIENT_OP("Rank");
REGISTER_NO_GRADIENT_OP("Range");
REGISTER_NO_GRADIENT_OP("OneHot");
REGISTER_NO_GRADIENT_OP("InvertPermutation");
REGISTER_NO_GRADIENT_OP("ConcatOffset");

}  // namespace
}  // namespace recflow
