// The indexing part of the array op family: Slice, StridedSlice,
// StridedSliceGrad, Pad, GatherV2, GatherNd, ScatterNd, UnsortedSegmentSum
// (definitions, shape functions and builder helpers). Names, inputs and
// attrs are TensorFlow's; shape functions use constant inputs when present.
#include <algorithm>
#include <optional>

#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/array_ops_util.h"

namespace recflow {
namespace {

using array_ops_util::CanonicalAxis;
using array_ops_util::ConstInts;
using array_ops_util::ConstScalar;
using array_ops_util::VecString;

absl::Status SliceShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  RETURN_IF_ERROR(c->WithRank(1, 1).status());
  RETURN_IF_ERROR(c->WithRank(2, 1).status());
  auto begin = ConstInts(c, 1);
  auto size = ConstInts(c, 2);
  int rank = in.rank();
  if (rank < 0 && begin) rank = static_cast<int>(begin->size());
  if (rank < 0 && size) rank = static_cast<int>(size->size());
  for (int i = 1; i <= 2 && rank < 0; ++i) {
    if (c->input(i).rank() == 1) rank = static_cast<int>(c->input(i).dim(0));
  }
  if (rank < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  for (const auto* v : {&begin, &size}) {
    if (*v && static_cast<int>((*v)->size()) != rank) {
      return errors::InvalidArgument(v == &begin ? "begin " : "size ",
                                     VecString(**v), " has ", (*v)->size(),
                                     " entries but the input ",
                                     in.DebugString(), " has rank ", rank);
    }
  }
  std::vector<int64_t> dims(rank, kUnknownDim);
  for (int i = 0; i < rank; ++i) {
    const int64_t d = in.unknown_rank() ? kUnknownDim : in.dim(i);
    const int64_t b = begin ? (*begin)[i] : -1;
    const int64_t s = size ? (*size)[i] : -2;
    if (begin && (b < 0 || (d >= 0 && b > d))) {
      return errors::InvalidArgument("begin ", VecString(*begin),
                                     " is out of range for shape ",
                                     in.DebugString(), " at dimension ", i);
    }
    if (size && s < -1) {
      return errors::InvalidArgument("size ", VecString(*size), " has ", s,
                                     " at dimension ", i,
                                     "; sizes must be >= -1");
    }
    if (s >= 0) {
      if (begin && d >= 0 && b + s > d) {
        return errors::InvalidArgument("slice begin ", VecString(*begin),
                                       " size ", VecString(*size),
                                       " is out of range for shape ",
                                       in.DebugString(), " at dimension ", i);
      }
      dims[i] = s;
    } else if (s == -1 && begin && d >= 0) {
      dims[i] = d - b;
    }
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// Note [strided slice spec]: the canonicalization below mirrors the one in
// kernels/array_slice_kernels.cc (TensorFlow keeps one copy in core/util;
// here ops/ and kernels/ cannot include each other, and framework/ has no
// home for it yet). This version works on partial shapes: an unknown input
// dimension, or an unknown begin/end, gives an unknown output dimension.
absl::StatusOr<PartialShape> StridedSliceOutput(
    const InferenceContext* c, const PartialShape& in,
    const std::optional<std::vector<int64_t>>& begin,
    const std::optional<std::vector<int64_t>>& end,
    const std::vector<int64_t>& strides) {
  int64_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0,
          shrink_mask = 0;
  RETURN_IF_ERROR(c->GetAttr("begin_mask", &begin_mask));
  RETURN_IF_ERROR(c->GetAttr("end_mask", &end_mask));
  RETURN_IF_ERROR(c->GetAttr("ellipsis_mask", &ellipsis_mask));
  RETURN_IF_ERROR(c->GetAttr("new_axis_mask", &new_axis_mask));
  RETURN_IF_ERROR(c->GetAttr("shrink_axis_mask", &shrink_mask));
  int n = static_cast<int>(strides.size());
  if ((begin && static_cast<int>(begin->size()) != n) ||
      (end && static_cast<int>(end->size()) != n)) {
    return errors::InvalidArgument(
        "begin, end and strides must have the same length");
  }
  if (ellipsis_mask & (ellipsis_mask - 1)) {
    return errors::InvalidArgument("ellipsis_mask ", ellipsis_mask,
                                   " sets more than one ellipsis");
  }
  const int rank = in.rank();
  // Sparse spec -> one entry per input dimension.
  struct Dense {
    int64_t begin, end, stride;
    bool begin_masked, end_masked, shrink, begin_known, end_known;
  };
  std::vector<Dense> dense;
  std::vector<int> gather;  // per output dim: dense index, or -1 for a new axis
  int after_ellipsis_new = 0;
  bool seen_ellipsis = false;
  for (int i = 0; i < n; ++i) {
    if (seen_ellipsis && (new_axis_mask >> i & 1)) ++after_ellipsis_new;
    if (ellipsis_mask >> i & 1) seen_ellipsis = true;
  }
  if (!seen_ellipsis) {
    ellipsis_mask |= int64_t{1} << n;
    ++n;
  }
  for (int i = 0; i < n; ++i) {
    if (ellipsis_mask >> i & 1) {
      const int next = std::min(rank - (n - i) + 1 + after_ellipsis_new, rank);
      while (static_cast<int>(dense.size()) < next) {
        gather.push_back(static_cast<int>(dense.size()));
        dense.push_back({0, 0, 1, true, true, false, true, true});
      }
    } else if (new_axis_mask >> i & 1) {
      gather.push_back(-1);
    } else {
      if (static_cast<int>(dense.size()) >= rank) {
        return errors::InvalidArgument(
            "the slice spec indexes ", dense.size() + 1,
            " dimensions but the input ", in.DebugString(), " has rank ", rank);
      }
      const bool shrink = shrink_mask >> i & 1;
      if (!shrink) gather.push_back(static_cast<int>(dense.size()));
      dense.push_back({begin ? (*begin)[i] : 0, end ? (*end)[i] : 0, strides[i],
                       static_cast<bool>(begin_mask >> i & 1),
                       static_cast<bool>(end_mask >> i & 1), shrink,
                       begin.has_value(), end.has_value()});
    }
  }
  std::vector<int64_t> sizes(dense.size());
  for (size_t i = 0; i < dense.size(); ++i) {
    const Dense& s = dense[i];
    const int64_t dim = in.dim(static_cast<int>(i));
    if (s.stride == 0)
      return errors::InvalidArgument("strides[", i, "] must be non-zero");
    if (s.shrink) {
      if (dim >= 0 && s.begin_known) {
        const int64_t b = s.begin < 0 ? s.begin + dim : s.begin;
        if (b < 0 || b >= dim) {
          return errors::InvalidArgument(
              "slice index ", s.begin, " of dimension ", i,
              " is out of bounds for shape ", in.DebugString());
        }
      }
      sizes[i] = 1;
      continue;
    }
    const bool begin_known = s.begin_known || s.begin_masked;
    const bool end_known = s.end_known || s.end_masked;
    if (dim < 0 || !begin_known || !end_known) {
      sizes[i] = kUnknownDim;
      continue;
    }
    const int64_t lo = s.stride > 0 ? 0 : -1, hi = s.stride > 0 ? dim : dim - 1;
    auto canonical = [&](int64_t x, bool masked, bool is_end) {
      if (masked) return (s.stride > 0) == is_end ? hi : lo;
      const int64_t fwd = x < 0 ? x + dim : x;
      return std::clamp(fwd, lo, hi);
    };
    const int64_t b = canonical(s.begin, s.begin_masked, false);
    const int64_t e = canonical(s.end, s.end_masked, true);
    const int64_t len = e - b;
    sizes[i] = (len == 0 || (len < 0) != (s.stride < 0))
                   ? 0
                   : len / s.stride + (len % s.stride != 0 ? 1 : 0);
  }
  std::vector<int64_t> out;
  for (int g : gather) out.push_back(g < 0 ? 1 : sizes[g]);
  return PartialShape(absl::MakeConstSpan(out));
}

absl::Status StridedSliceShape(InferenceContext* c) {
  for (int i = 1; i <= 3; ++i) RETURN_IF_ERROR(c->WithRank(i, 1).status());
  auto strides = ConstInts(c, 3);
  if (c->input(0).unknown_rank() || !strides) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(PartialShape out,
                   StridedSliceOutput(c, c->input(0), ConstInts(c, 1),
                                      ConstInts(c, 2), *strides));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

absl::Status StridedSliceGradShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 1).status());
  ASSIGN_OR_RETURN(PartialShape out, c->ShapeFromShapeTensor(0));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

absl::Status GatherV2Shape(InferenceContext* c) {
  int64_t batch_dims = 0;
  RETURN_IF_ERROR(c->GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) {
    return errors::Unimplemented("GatherV2 with batch_dims = ", batch_dims,
                                 " is not supported; only batch_dims = 0");
  }
  RETURN_IF_ERROR(c->WithRank(2, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> axis_value,
                   ConstScalar(c, 2, "axis"));
  const PartialShape& params = c->input(0);
  const PartialShape& indices = c->input(1);
  if (params.unknown_rank() || indices.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (params.rank() == 0)
    return errors::InvalidArgument("params must be at least rank 1");
  if (!axis_value) {
    c->set_output(
        0, PartialShape::UnknownDims(params.rank() - 1 + indices.rank()));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(int64_t axis,
                   CanonicalAxis(*axis_value, params.rank(), "axis"));
  std::vector<int64_t> dims(params.dims().begin(),
                            params.dims().begin() + axis);
  dims.insert(dims.end(), indices.dims().begin(), indices.dims().end());
  dims.insert(dims.end(), params.dims().begin() + axis + 1,
              params.dims().end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status GatherNdShape(InferenceContext* c) {
  const PartialShape& params = c->input(0);
  ASSIGN_OR_RETURN(PartialShape indices, c->WithRankAtLeast(1, 1));
  if (indices.unknown_rank() || params.unknown_rank() ||
      indices.dim(indices.rank() - 1) < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int64_t k = indices.dim(indices.rank() - 1);
  if (k > params.rank()) {
    return errors::InvalidArgument("indices ", indices.DebugString(), " index ",
                                   k, " dimensions but params ",
                                   params.DebugString(), " has only ",
                                   params.rank());
  }
  std::vector<int64_t> dims(indices.dims().begin(), indices.dims().end() - 1);
  dims.insert(dims.end(), params.dims().begin() + k, params.dims().end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ScatterNdShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape indices, c->WithRankAtLeast(0, 1));
  RETURN_IF_ERROR(c->WithRank(2, 1).status());
  ASSIGN_OR_RETURN(PartialShape out, c->ShapeFromShapeTensor(2));
  const PartialShape& updates = c->input(1);
  if (!indices.unknown_rank() && !out.unknown_rank() &&
      !updates.unknown_rank() && indices.dim(indices.rank() - 1) >= 0) {
    const int64_t k = indices.dim(indices.rank() - 1);
    std::vector<int64_t> want(indices.dims().begin(), indices.dims().end() - 1);
    if (k > out.rank()) {
      return errors::InvalidArgument(
          "indices ", indices.DebugString(), " index ", k,
          " dimensions but the output shape ", out.DebugString(), " has only ",
          out.rank());
    }
    want.insert(want.end(), out.dims().begin() + k, out.dims().end());
    if (!updates.IsCompatibleWith(PartialShape(absl::MakeConstSpan(want)))) {
      return errors::InvalidArgument(
          "updates ", updates.DebugString(), " must have shape ",
          PartialShape(absl::MakeConstSpan(want)).DebugString(),
          " (indices.shape[:-1] + shape[", k, ":])");
    }
  }
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

absl::Status UnsortedSegmentSumShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(2, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> num,
                   ConstScalar(c, 2, "num_segments"));
  if (num && *num < 0) {
    return errors::InvalidArgument("num_segments must be >= 0, but is ", *num);
  }
  const PartialShape& data = c->input(0);
  const PartialShape& ids = c->input(1);
  if (data.unknown_rank() || ids.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const PartialShape prefix(
      data.dims().subspan(0, std::min<size_t>(ids.rank(), data.rank())));
  if (ids.rank() > data.rank() || !prefix.IsCompatibleWith(ids)) {
    return errors::InvalidArgument("segment_ids ", ids.DebugString(),
                                   " must be a prefix of the data shape ",
                                   data.DebugString());
  }
  std::vector<int64_t> dims = {num ? *num : kUnknownDim};
  dims.insert(dims.end(), data.dims().begin() + ids.rank(), data.dims().end());
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status PadShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(PartialShape pshape, c->WithRank(1, 2));
  if (pshape.dim(1) >= 0 && pshape.dim(1) != 2) {
    return errors::InvalidArgument(
        "paddings must have shape [rank, 2], but has ", pshape.DebugString());
  }
  int rank = in.rank();
  if (rank < 0) rank = static_cast<int>(pshape.dim(0));
  if (rank < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (pshape.dim(0) >= 0 && pshape.dim(0) != rank) {
    return errors::InvalidArgument("paddings ", pshape.DebugString(),
                                   " must have ", rank, " rows for the input ",
                                   in.DebugString());
  }
  auto pads = ConstInts(c, 1);
  std::vector<int64_t> dims(rank, kUnknownDim);
  for (int i = 0; i < rank && pads; ++i) {
    const int64_t before = (*pads)[2 * i], after = (*pads)[2 * i + 1];
    if (before < 0 || after < 0) {
      return errors::InvalidArgument("paddings ", VecString(*pads),
                                     " must be non-negative");
    }
    const int64_t d = in.unknown_rank() ? kUnknownDim : in.dim(i);
    dims[i] = d < 0 ? kUnknownDim : d + before + after;
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("Pad")
    .Input("input: T")
    .Input("paddings: Tpaddings")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tpaddings: {int32, int64} = int32")
    .SetShapeFn(PadShape)
    .Doc(
        "Pads `input` with zeros: paddings[i] = [before, after] for dimension "
        "i.");

// --- Slicing
// ------------------------------------------------------------------

REGISTER_OP("Slice")
    .Input("input: T")
    .Input("begin: Index")
    .Input("size: Index")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int32, int64}")
    .SetShapeFn(SliceShape)
    .Doc(
        "The block of `input` starting at `begin` with extent `size` (-1: to "
        "the end).");

REGISTER_OP("StridedSlice")
    .Input("input: T")
    .Input("begin: Index")
    .Input("end: Index")
    .Input("strides: Index")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int16, int32, int64}")
    .Attr("begin_mask: int = 0")
    .Attr("end_mask: int = 0")
    .Attr("ellipsis_mask: int = 0")
    .Attr("new_axis_mask: int = 0")
    .Attr("shrink_axis_mask: int = 0")
    .SetShapeFn(StridedSliceShape)
    .Doc(
        "NumPy-style slicing input[begin:end:strides] with masks: begin_mask / "
        "end_mask "
        "ignore begin / end, ellipsis_mask marks `...`, new_axis_mask inserts "
        "a dimension of "
        "size 1, shrink_axis_mask indexes (drops) a dimension.");

REGISTER_OP("StridedSliceGrad")
    .Input("shape: Index")
    .Input("begin: Index")
    .Input("end: Index")
    .Input("strides: Index")
    .Input("dy: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Index: {int16, int32, int64}")
    .Attr("begin_mask: int = 0")
    .Attr("end_mask: int = 0")
    .Attr("ellipsis_mask: int = 0")
    .Attr("new_axis_mask: int = 0")
    .Attr("shrink_axis_mask: int = 0")
    .SetShapeFn(StridedSliceGradShape)
    .Doc(
        "The gradient of StridedSlice: zeros of `shape` with `dy` written "
        "where the slice "
        "came from.");

// --- Gathering and scattering
// ---------------------------------------------------

REGISTER_OP("GatherV2")
    .Input("params: Tparams")
    .Input("indices: Tindices")
    .Input("axis: Taxis")
    .Attr("batch_dims: int = 0")
    .Output("output: Tparams")
    .Attr("Tparams: type")
    .Attr("Tindices: {int16, int32, int64}")
    .Attr("Taxis: {int32, int64}")
    .SetShapeFn(GatherV2Shape)
    .Doc(
        "Gathers slices of `params` along `axis` at `indices`: output shape is "
        "params.shape[:axis] + indices.shape + params.shape[axis+1:]. Only "
        "batch_dims = 0.");

REGISTER_OP("GatherNd")
    .Input("params: Tparams")
    .Input("indices: Tindices")
    .Output("output: Tparams")
    .Attr("Tparams: type")
    .Attr("Tindices: {int16, int32, int64}")
    .SetShapeFn(GatherNdShape)
    .Doc(
        "Gathers slices of `params` addressed by the last dimension of "
        "`indices`.");

REGISTER_OP("ScatterNd")
    .Input("indices: Tindices")
    .Input("updates: T")
    .Input("shape: Tindices")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tindices: {int16, int32, int64}")
    .SetShapeFn(ScatterNdShape)
    .Doc(
        "Zeros of `shape` with `updates` added at `indices` (duplicates are "
        "summed).");

REGISTER_OP("UnsortedSegmentSum")
    .Input("data: T")
    .Input("segment_ids: Tindices")
    .Input("num_segments: Tnumsegments")
    .Output("output: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, complex64, int64, "
        "bfloat16, uint16, "
        "complex128, half, uint32, uint64}")
    .Attr("Tindices: {int32, int64}")
    .Attr("Tnumsegments: {int32, int64} = int32")
    .SetShapeFn(UnsortedSegmentSumShape)
    .Doc(
        "output[i] = sum of data[j...] over the j with segment_ids[j...] == i; "
        "negative ids "
        "are dropped.");

namespace ops {
namespace {

Output AddOp(const Scope& scope, NodeBuilder& b) {
  return Output(scope.AddNode(b));
}

}  // namespace

Output Slice(const Scope& scope, Output input, Output begin, Output size) {
  NodeBuilder b(scope.GetUniqueNameForOp("Slice"), "Slice");
  b.Input(input).Input(begin).Input(size);
  return AddOp(scope, b);
}

namespace {
void SetStridedSliceAttrs(NodeBuilder& b, const StridedSliceAttrs& a) {
  b.Attr("begin_mask", a.begin_mask)
      .Attr("end_mask", a.end_mask)
      .Attr("ellipsis_mask", a.ellipsis_mask)
      .Attr("new_axis_mask", a.new_axis_mask)
      .Attr("shrink_axis_mask", a.shrink_axis_mask);
}
}  // namespace

Output StridedSlice(const Scope& scope, Output input, Output begin, Output end,
                    Output strides, const StridedSliceAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("StridedSlice"), "StridedSlice");
  b.Input(input).Input(begin).Input(end).Input(strides);
  SetStridedSliceAttrs(b, attrs);
  return AddOp(scope, b);
}

Output StridedSliceGrad(const Scope& scope, Output shape, Output begin,
                        Output end, Output strides, Output dy,
                        const StridedSliceAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("StridedSliceGrad"),
                "StridedSliceGrad");
  b.Input(shape).Input(begin).Input(end).Input(strides).Input(dy);
  SetStridedSliceAttrs(b, attrs);
  return AddOp(scope, b);
}

Output GatherV2(const Scope& scope, Output params, Output indices,
                Output axis) {
  NodeBuilder b(scope.GetUniqueNameForOp("GatherV2"), "GatherV2");
  b.Input(params).Input(indices).Input(axis);
  return AddOp(scope, b);
}

Output ScatterNd(const Scope& scope, Output indices, Output updates,
                 Output shape) {
  NodeBuilder b(scope.GetUniqueNameForOp("ScatterNd"), "ScatterNd");
  b.Input(indices).Input(updates).Input(shape);
  return AddOp(scope, b);
}

Output UnsortedSegmentSum(const Scope& scope, Output data, Output segment_ids,
                          Output num_segments) {
  NodeBuilder b(scope.GetUniqueNameForOp("UnsortedSegmentSum"),
                "UnsortedSegmentSum");
  b.Input(data).Input(segment_ids).Input(num_segments);
  return AddOp(scope, b);
}

}  // namespace ops
}  // namespace recflow
