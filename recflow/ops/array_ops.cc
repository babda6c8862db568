// The array op family: definitions and shape functions (the indexing ops --
// slices, pads, gathers, scatters -- are in array_index_ops.cc). Names,
// inputs and attrs are TensorFlow's. Shape functions use constant inputs (shape
// tensors, axes, begin/size, ...) when the graph holds them, so downstream
// shapes stay known; without them they still state the rank when it can be
// had. Builder helpers are at the bottom.
#include "recflow/ops/array_ops.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_join.h"
#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops_util.h"
#include "recflow/ops/node_outputs.h"

namespace recflow {
namespace {

using array_ops_util::CanonicalAxis;
using array_ops_util::ConstInts;
using array_ops_util::ConstScalar;
using array_ops_util::VecString;

absl::Status ShapeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  c->set_output(0, PartialShape({in.unknown_rank() ? kUnknownDim : in.rank()}));
  return absl::OkStatus();
}

absl::Status ReshapeShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(1, 1).status());
  ASSIGN_OR_RETURN(PartialShape target, c->ShapeFromShapeTensor(1));
  const PartialShape& in = c->input(0);
  if (c->input_tensor(1) == nullptr || target.unknown_rank()) {
    c->set_output(0, target);
    return absl::OkStatus();
  }
  std::vector<int64_t> dims(target.dims().begin(), target.dims().end());
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) {
        return errors::InvalidArgument(
            "shape ", VecString(dims),
            " has more than one -1; only one dimension can be inferred");
      }
      infer = i;
    } else {
      known *= dims[i];
    }
  }
  if (in.IsFullyDefined()) {
    const int64_t n = in.num_elements();
    if (infer < 0 && known != n) {
      return errors::InvalidArgument(
          "cannot reshape a tensor of shape ", in.DebugString(), " (", n,
          " elements) into shape ", VecString(dims), " (", known, " elements)");
    }
    if (infer >= 0) {
      if (known == 0 ? n != 0 : n % known != 0) {
        return errors::InvalidArgument(
            "cannot reshape a tensor of shape ", in.DebugString(), " (", n,
            " elements) into shape ", VecString(dims),
            ": the known dimensions (", known, " elements) do not divide it");
      }
      dims[infer] = known == 0 ? 0 : n / known;
    }
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ExpandDimsShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  ASSIGN_OR_RETURN(std::optional<int64_t> dim, ConstScalar(c, 1, "dim"));
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (!dim) {
    c->set_output(0, PartialShape::UnknownDims(in.rank() + 1));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(int64_t axis, CanonicalAxis(*dim, in.rank() + 1, "dim"));
  std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
  dims.insert(dims.begin() + axis, 1);
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status SqueezeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  std::vector<int64_t> squeeze;
  RETURN_IF_ERROR(c->GetAttr("squeeze_dims", &squeeze));
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<bool> drop(in.rank(), false);
  for (int64_t d : squeeze) {
    ASSIGN_OR_RETURN(int64_t axis,
                     CanonicalAxis(d, in.rank(), "squeeze dimension"));
    if (in.dim(axis) >= 0 && in.dim(axis) != 1) {
      return errors::InvalidArgument("cannot squeeze dimension ", d,
                                     " of shape ", in.DebugString(),
                                     ": its size is ", in.dim(axis), ", not 1");
    }
    drop[axis] = true;
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (squeeze.empty()) {
      if (in.dim(i) == kUnknownDim) {  // may or may not be squeezed
        c->set_output(0, PartialShape::Unknown());
        return absl::OkStatus();
      }
      if (in.dim(i) == 1) continue;
    } else if (drop[i]) {
      continue;
    }
    dims.push_back(in.dim(i));
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// Checks that `perm` is a permutation of [0, n).
absl::Status CheckPermutation(absl::Span<const int64_t> perm,
                              absl::string_view what) {
  std::vector<bool> seen(perm.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm.size()) || seen[p]) {
      return errors::InvalidArgument(what, " ", VecString(perm),
                                     " is not a permutation of [0, ",
                                     perm.size(), ")");
    }
    seen[p] = true;
  }
  return absl::OkStatus();
}

absl::Status TransposeShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  RETURN_IF_ERROR(c->WithRank(1, 1).status());
  auto perm = ConstInts(c, 1);
  int rank = in.rank();
  if (rank < 0 && perm) rank = static_cast<int>(perm->size());
  if (rank < 0 && c->input(1).rank() == 1)
    rank = static_cast<int>(c->input(1).dim(0));
  if (rank < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (!perm) {
    c->set_output(0, PartialShape::UnknownDims(rank));
    return absl::OkStatus();
  }
  if (static_cast<int>(perm->size()) != rank) {
    return errors::InvalidArgument("perm ", VecString(*perm), " has ",
                                   perm->size(), " entries but the input ",
                                   in.DebugString(), " has rank ", rank);
  }
  RETURN_IF_ERROR(CheckPermutation(*perm, "perm"));
  std::vector<int64_t> dims(rank, kUnknownDim);
  if (!in.unknown_rank()) {
    for (int i = 0; i < rank; ++i) dims[i] = in.dim((*perm)[i]);
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status InvertPermutationShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape x, c->WithRank(0, 1));
  c->set_output(0, x);
  return absl::OkStatus();
}

// Shape of concatenating inputs [first, first + n) along constant `axis`
// (or an unknown axis).
absl::StatusOr<PartialShape> ConcatShapeOf(InferenceContext* c, int first,
                                           int n,
                                           std::optional<int64_t> axis_value) {
  int rank = -1;
  for (int i = first; i < first + n; ++i) {
    if (!c->input(i).unknown_rank()) {
      rank = c->input(i).rank();
      break;
    }
  }
  if (rank < 0) return PartialShape::Unknown();
  for (int i = first; i < first + n; ++i) {
    if (!c->input(i).unknown_rank() && c->input(i).rank() != rank) {
      return errors::InvalidArgument(
          "all values must have the same rank, but value ", i - first, " is ",
          c->input(i).DebugString(), " and another is rank ", rank);
    }
  }
  if (!axis_value) return PartialShape::UnknownDims(rank);
  if (rank == 0)
    return errors::InvalidArgument("cannot concatenate scalars; use Pack");
  ASSIGN_OR_RETURN(int64_t axis, CanonicalAxis(*axis_value, rank, "axis"));
  std::vector<int64_t> dims(rank, kUnknownDim);
  int64_t total = 0;
  for (int i = first; i < first + n; ++i) {
    const PartialShape& s = c->input(i);
    if (s.unknown_rank()) {
      total = kUnknownDim;
      continue;
    }
    for (int d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (dims[d] >= 0 && s.dim(d) >= 0 && dims[d] != s.dim(d)) {
        return errors::InvalidArgument(
            "dimension ", d, " of value ", i - first, " ", s.DebugString(),
            " is ", s.dim(d), " but an earlier value has ", dims[d],
            "; all dimensions except axis ", axis, " must match");
      }
      if (dims[d] < 0) dims[d] = s.dim(d);
    }
    if (total >= 0) total = s.dim(axis) < 0 ? kUnknownDim : total + s.dim(axis);
  }
  dims[axis] = total;
  return PartialShape(absl::MakeConstSpan(dims));
}

absl::Status ConcatV2Shape(InferenceContext* c) {
  const int n = c->num_inputs() - 1;
  RETURN_IF_ERROR(c->WithRank(n, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(c, n, "axis"));
  ASSIGN_OR_RETURN(PartialShape out, ConcatShapeOf(c, 0, n, axis));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

absl::Status ConcatOffsetShape(InferenceContext* c) {
  for (int i = 1; i < c->num_inputs(); ++i) {
    ASSIGN_OR_RETURN(PartialShape s, c->WithRank(i, 1));
    c->set_output(i - 1, s);
  }
  return absl::OkStatus();
}

// Outputs of splitting input `value_index` along `axis_value` into sizes
// (kUnknownDim where unknown).
absl::Status SetSplitOutputs(InferenceContext* c, int value_index,
                             std::optional<int64_t> axis_value,
                             const std::vector<int64_t>& sizes) {
  const PartialShape& in = c->input(value_index);
  for (int i = 0; i < c->num_outputs(); ++i) {
    if (in.unknown_rank()) {
      c->set_output(i, PartialShape::Unknown());
    } else if (!axis_value) {
      c->set_output(i, PartialShape::UnknownDims(in.rank()));
    } else {
      ASSIGN_OR_RETURN(int64_t axis,
                       CanonicalAxis(*axis_value, in.rank(), "split_dim"));
      std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
      dims[axis] = sizes[i];
      c->set_output(i, PartialShape(absl::MakeConstSpan(dims)));
    }
  }
  return absl::OkStatus();
}

absl::Status SplitShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(c, 0, "split_dim"));
  const int n = c->num_outputs();
  std::vector<int64_t> sizes(n, kUnknownDim);
  const PartialShape& in = c->input(1);
  if (axis && !in.unknown_rank()) {
    ASSIGN_OR_RETURN(int64_t a, CanonicalAxis(*axis, in.rank(), "split_dim"));
    if (in.dim(a) >= 0) {
      if (in.dim(a) % n != 0) {
        return errors::InvalidArgument(
            "cannot split dimension ", a, " of shape ", in.DebugString(),
            " (size ", in.dim(a), ") into ", n, " equal parts");
      }
      sizes.assign(n, in.dim(a) / n);
    }
  }
  return SetSplitOutputs(c, 1, axis, sizes);
}

absl::Status SplitVShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(1, 1).status());
  RETURN_IF_ERROR(c->WithRank(2, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> axis, ConstScalar(c, 2, "split_dim"));
  const int n = c->num_outputs();
  std::vector<int64_t> sizes(n, kUnknownDim);
  if (auto given = ConstInts(c, 1)) {
    if (static_cast<int>(given->size()) != n) {
      return errors::InvalidArgument("size_splits ", VecString(*given), " has ",
                                     given->size(),
                                     " entries but num_split is ", n);
    }
    sizes = *given;
    int infer = -1;
    int64_t sum = 0;
    for (int i = 0; i < n; ++i) {
      if (sizes[i] == -1) {
        if (infer >= 0) {
          return errors::InvalidArgument("size_splits ", VecString(*given),
                                         " has more than one -1");
        }
        infer = i;
      } else if (sizes[i] < 0) {
        return errors::InvalidArgument("size_splits ", VecString(*given),
                                       " has a negative size");
      } else {
        sum += sizes[i];
      }
    }
    const PartialShape& in = c->input(0);
    if (axis && !in.unknown_rank()) {
      ASSIGN_OR_RETURN(int64_t a, CanonicalAxis(*axis, in.rank(), "split_dim"));
      const int64_t d = in.dim(a);
      if (d >= 0 && (infer < 0 ? sum != d : sum > d)) {
        return errors::InvalidArgument(
            "size_splits ", VecString(*given), " do not add up to dimension ",
            a, " of shape ", in.DebugString(), " (", d, ")");
      }
      if (infer >= 0) sizes[infer] = d >= 0 ? d - sum : kUnknownDim;
    } else if (infer >= 0) {
      sizes[infer] = kUnknownDim;
    }
  }
  return SetSplitOutputs(c, 0, axis, sizes);
}

absl::Status PackShape(InferenceContext* c) {
  PartialShape merged = c->input(0);
  for (int i = 1; i < c->num_inputs(); ++i) {
    auto m = merged.Merge(c->input(i));
    if (!m.ok()) {
      return errors::InvalidArgument(
          "all values must have the same shape, but value ", i, " is ",
          c->input(i).DebugString(), " and value 0 is ",
          c->input(0).DebugString());
    }
    merged = *m;
  }
  int64_t axis = 0;
  RETURN_IF_ERROR(c->GetAttr("axis", &axis));
  if (merged.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(axis, CanonicalAxis(axis, merged.rank() + 1, "axis"));
  std::vector<int64_t> dims(merged.dims().begin(), merged.dims().end());
  dims.insert(dims.begin() + axis, c->num_inputs());
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status UnpackShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  int64_t axis = 0, num = 0;
  RETURN_IF_ERROR(c->GetAttr("axis", &axis));
  RETURN_IF_ERROR(c->GetAttr("num", &num));
  PartialShape out;
  if (!in.unknown_rank()) {
    ASSIGN_OR_RETURN(axis, CanonicalAxis(axis, in.rank(), "axis"));
    if (in.dim(axis) >= 0 && in.dim(axis) != num) {
      return errors::InvalidArgument("cannot unpack dimension ", axis,
                                     " of shape ", in.DebugString(),
                                     " into num = ", num, " tensors");
    }
    std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
    dims.erase(dims.begin() + axis);
    out = PartialShape(absl::MakeConstSpan(dims));
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, out);
  return absl::OkStatus();
}

absl::Status TileShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  RETURN_IF_ERROR(c->WithRank(1, 1).status());
  auto multiples = ConstInts(c, 1);
  int rank = in.rank();
  if (rank < 0 && multiples) rank = static_cast<int>(multiples->size());
  if (rank < 0 && c->input(1).rank() == 1)
    rank = static_cast<int>(c->input(1).dim(0));
  if (rank < 0) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (multiples && static_cast<int>(multiples->size()) != rank) {
    return errors::InvalidArgument("multiples ", VecString(*multiples), " has ",
                                   multiples->size(), " entries but the input ",
                                   in.DebugString(), " has rank ", rank);
  }
  std::vector<int64_t> dims(rank, kUnknownDim);
  for (int i = 0; i < rank; ++i) {
    const int64_t d = in.unknown_rank() ? kUnknownDim : in.dim(i);
    if (!multiples) continue;
    const int64_t m = (*multiples)[i];
    if (m < 0) {
      return errors::InvalidArgument("multiples ", VecString(*multiples),
                                     " has a negative entry");
    }
    dims[i] = m == 0 ? 0 : (d < 0 ? kUnknownDim : d * m);
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status FillShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 1).status());
  RETURN_IF_ERROR(c->WithRank(1, 0).status());
  ASSIGN_OR_RETURN(PartialShape out, c->ShapeFromShapeTensor(0));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<int64_t> RangeSizeOf(T start, T limit, T delta) {
  if (delta == 0) return errors::InvalidArgument("delta must not be 0");
  if (delta > 0 ? start > limit : start < limit) {
    return errors::InvalidArgument(
        "requires start ", delta > 0 ? "<=" : ">=", " limit when delta is ",
        delta > 0 ? "positive" : "negative", ": start ", start, ", limit ",
        limit, ", delta ", delta);
  }
  if constexpr (std::is_integral_v<T>) {
    const int64_t span =
        std::abs(static_cast<int64_t>(limit) - static_cast<int64_t>(start));
    const int64_t step = std::abs(static_cast<int64_t>(delta));
    return (span + step - 1) / step;
  } else {
    return static_cast<int64_t>(
        std::ceil(std::abs((double(limit) - double(start)) / double(delta))));
  }
}

absl::Status RangeShape(InferenceContext* c) {
  for (int i = 0; i < 3; ++i) {
    auto r = c->WithRank(i, 0);
    if (!r.ok()) {
      return errors::InvalidArgument(i == 0   ? "start"
                                     : i == 1 ? "limit"
                                              : "delta",
                                     " must be a scalar, but has shape ",
                                     c->input(i).DebugString());
    }
  }
  const Tensor *s = c->input_tensor(0), *l = c->input_tensor(1),
               *d = c->input_tensor(2);
  int64_t size = kUnknownDim;
  if (s && l && d) {
    absl::StatusOr<int64_t> n =
        errors::InvalidArgument("Range of ", DataTypeString(s->dtype()),
                                " cannot be computed at graph construction");
    switch (s->dtype()) {
      case DT_INT32:
        n = RangeSizeOf(s->scalar<int32_t>(), l->scalar<int32_t>(),
                        d->scalar<int32_t>());
        break;
      case DT_INT64:
        n = RangeSizeOf(s->scalar<int64_t>(), l->scalar<int64_t>(),
                        d->scalar<int64_t>());
        break;
      case DT_FLOAT:
        n = RangeSizeOf(s->scalar<float>(), l->scalar<float>(),
                        d->scalar<float>());
        break;
      case DT_DOUBLE:
        n = RangeSizeOf(s->scalar<double>(), l->scalar<double>(),
                        d->scalar<double>());
        break;
      default:
        n = int64_t{kUnknownDim};
        break;
    }
    RETURN_IF_ERROR(n.status());
    size = *n;
  }
  c->set_output(0, PartialShape({size}));
  return absl::OkStatus();
}

absl::Status OneHotShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(1, 0).status());
  RETURN_IF_ERROR(c->WithRank(2, 0).status());
  RETURN_IF_ERROR(c->WithRank(3, 0).status());
  int64_t axis = -1;
  RETURN_IF_ERROR(c->GetAttr("axis", &axis));
  if (axis < -1)
    return errors::InvalidArgument("axis must be >= -1, but is ", axis);
  ASSIGN_OR_RETURN(std::optional<int64_t> depth, ConstScalar(c, 1, "depth"));
  if (depth && *depth < 0)
    return errors::InvalidArgument("depth must be >= 0, but is ", *depth);
  const PartialShape& in = c->input(0);
  if (in.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  if (axis > in.rank()) {
    return errors::InvalidArgument(
        "axis ", axis, " is out of range for indices of shape ",
        in.DebugString(), "; expected [-1, ", in.rank(), "]");
  }
  std::vector<int64_t> dims(in.dims().begin(), in.dims().end());
  dims.insert(axis == -1 ? dims.end() : dims.begin() + axis,
              depth ? *depth : kUnknownDim);
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

absl::Status ConstShape(InferenceContext* c) {
  Tensor value;
  RETURN_IF_ERROR(c->GetAttr("value", &value));
  c->set_output(0, PartialShape(value.shape()));
  return absl::OkStatus();
}

absl::Status PlaceholderShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  // Writers up to GraphDef version 21 could not say "unknown shape" and
  // wrote a scalar shape for it (TensorFlow's rule: such a Placeholder takes
  // any shape).
  if (c->graph_def_version() <= 21 && !shape.unknown_rank() && shape.rank() == 0) {
    shape = PartialShape::Unknown();
  }
  c->set_output(0, shape);
  return absl::OkStatus();
}

absl::Status PlaceholderWithDefaultShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  if (!c->input(0).IsCompatibleWith(shape)) {
    return errors::InvalidArgument(
        "default value of shape ", c->input(0).DebugString(),
        " does not fit the declared shape ", shape.DebugString());
  }
  c->set_output(0, shape);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("Const")
    .Output("output: dtype")
    .Attr("value: tensor")
    .Attr("dtype: type")
    .SetShapeFn(ConstShape)
    .Doc("A constant tensor: the `value` attr.");

REGISTER_OP("Placeholder")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape = ?")
    .SetShapeFn(PlaceholderShape)
    .Doc(
        "A tensor that must be fed when it is needed; running it unfed is an "
        "error.");

REGISTER_OP("PlaceholderWithDefault")
    .Input("input: dtype")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .SetShapeFn(PlaceholderWithDefaultShape)
    .Doc("Passes `input` through unless the output is fed.");

REGISTER_OP("Identity")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Returns its input (a ref input is read).");

REGISTER_OP("NoOp")
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("Does nothing; used as a target to group control dependencies.");

REGISTER_OP("ZerosLike")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: type")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("A tensor of zeros with the shape and dtype of x.");

REGISTER_OP("OnesLike")
    .Input("x: T")
    .Output("y: T")
    .Attr(
        "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, "
        "uint32, int64, "
        "uint64, complex64, complex128, bool}")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("A tensor of ones with the shape and dtype of x.");

// --- Shapes and reshaping --------------------------------------------------

REGISTER_OP("Shape")
    .Input("input: T")
    .Output("output: out_type")
    .Attr("T: type")
    .Attr("out_type: {int32, int64} = int32")
    .SetShapeFn(ShapeShape)
    .Doc("The shape of `input` as a 1-D integer tensor.");

REGISTER_OP("Size")
    .Input("input: T")
    .Output("output: out_type")
    .Attr("T: type")
    .Attr("out_type: {int32, int64} = int32")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("The number of elements of `input`.");

REGISTER_OP("Rank")
    .Input("input: T")
    .Output("output: int32")
    .Attr("T: type")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("The number of dimensions of `input`.");

REGISTER_OP("Reshape")
    .Input("tensor: T")
    .Input("shape: Tshape")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tshape: {int32, int64} = int32")
    .SetShapeFn(ReshapeShape)
    .Doc(
        "`tensor` with the given shape (same elements, same order); one entry "
        "of `shape` may "
        "be -1 and is inferred. Shares the input's buffer.");

REGISTER_OP("ExpandDims")
    .Input("input: T")
    .Input("dim: Tdim")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tdim: {int32, int64} = int32")
    .SetShapeFn(ExpandDimsShape)
    .Doc(
        "Inserts a dimension of size 1 at index `dim` (negative counts from "
        "the end). Shares "
        "the input's buffer.");

REGISTER_OP("Squeeze")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("squeeze_dims: list(int) >= 0 = []")
    .SetShapeFn(SqueezeShape)
    .Doc(
        "Removes dimensions of size 1: those in `squeeze_dims` (negative "
        "counts from the end), "
        "or all of them when it is empty. Shares the input's buffer.");

REGISTER_OP("Transpose")
    .Input("x: T")
    .Input("perm: Tperm")
    .Output("y: T")
    .Attr("T: type")
    .Attr("Tperm: {int32, int64} = int32")
    .SetShapeFn(TransposeShape)
    .Doc("Permutes the dimensions of `x`: y.shape[i] = x.shape[perm[i]].");

REGISTER_OP("InvertPermutation")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {int32, int64} = int32")
    .SetShapeFn(InvertPermutationShape)
    .Doc("The inverse of a permutation: y[x[i]] = i.");

// --- Joining and splitting ------------------------------------------------

REGISTER_OP("ConcatV2")
    .Input("values: N * T")
    .Input("axis: Tidx")
    .Output("output: T")
    .Attr("N: int >= 2")
    .Attr("T: type")
    .Attr("Tidx: {int32, int64} = int32")
    .SetShapeFn(ConcatV2Shape)
    .Doc("Concatenates `values` along `axis` (negative counts from the end).");

REGISTER_OP("ConcatOffset")
    .Input("concat_dim: int32")
    .Input("shape: N * shape_type")
    .Output("offset: N * shape_type")
    .Attr("N: int >= 2")
    .Attr("shape_type: {int32, int64} = int32")
    .SetShapeFn(ConcatOffsetShape)
    .Doc(
        "Where each input of a concatenation starts in the output (for "
        "ConcatV2's gradient).");

REGISTER_OP("Split")
    .Input("split_dim: int32")
    .Input("value: T")
    .Output("output: num_split * T")
    .Attr("num_split: int >= 1")
    .Attr("T: type")
    .SetShapeFn(SplitShape)
    .Doc("Splits `value` along `split_dim` into `num_split` equal parts.");

REGISTER_OP("SplitV")
    .Input("value: T")
    .Input("size_splits: Tlen")
    .Input("split_dim: int32")
    .Output("output: num_split * T")
    .Attr("num_split: int >= 1")
    .Attr("T: type")
    .Attr("Tlen: {int8, int32, int64} = int64")
    .SetShapeFn(SplitVShape)
    .Doc(
        "Splits `value` along `split_dim` into parts of the sizes in "
        "`size_splits`; one size "
        "may be -1 and is inferred.");

REGISTER_OP("Pack")
    .Input("values: N * T")
    .Output("output: T")
    .Attr("N: int >= 1")
    .Attr("T: type")
    .Attr("axis: int = 0")
    .SetShapeFn(PackShape)
    .Doc("Stacks same-shaped `values` along a new dimension `axis`.");

REGISTER_OP("Unpack")
    .Input("value: T")
    .Output("output: num * T")
    .Attr("num: int >= 0")
    .Attr("T: type")
    .Attr("axis: int = 0")
    .SetShapeFn(UnpackShape)
    .Doc("Unstacks `value` along dimension `axis` into `num` tensors.");

REGISTER_OP("Tile")
    .Input("input: T")
    .Input("multiples: Tmultiples")
    .Output("output: T")
    .Attr("T: type")
    .Attr("Tmultiples: {int32, int64} = int32")
    .SetShapeFn(TileShape)
    .Doc("Repeats `input` multiples[i] times along dimension i.");

// --- Creating
// -----------------------------------------------------------------

REGISTER_OP("Fill")
    .Input("dims: index_type")
    .Input("value: T")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index_type: {int32, int64} = int32")
    .SetShapeFn(FillShape)
    .Doc("A tensor of shape `dims` filled with the scalar `value`.");

REGISTER_OP("Range")
    .Input("start: Tidx")
    .Input("limit: Tidx")
    .Input("delta: Tidx")
    .Output("output: Tidx")
    .Attr(
        "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, "
        "uint16, uint32} = "
        "int32")
    .SetShapeFn(RangeShape)
    .Doc(
        "The sequence start, start + delta, ... up to but not including "
        "limit.");

REGISTER_OP("OneHot")
    .Input("indices: TI")
    .Input("depth: int32")
    .Input("on_value: T")
    .Input("off_value: T")
    .Attr("axis: int = -1")
    .Output("output: T")
    .Attr("T: type")
    .Attr("TI: {uint8, int8, int32, int64} = int64")
    .SetShapeFn(OneHotShape)
    .Doc(
        "One-hot encoding: a new dimension of size `depth` at `axis` (-1: "
        "last), on_value "
        "where it equals the index, off_value elsewhere (also for out-of-range "
        "indices).");

namespace ops {
namespace {

Output AddOp(const Scope& scope, NodeBuilder& b) {
  return Output(scope.AddNode(b));
}

}  // namespace

Output Const(const Scope& scope, const Tensor& value) {
  NodeBuilder b(scope.GetUniqueNameForOp("Const"), "Const");
  b.Attr("value", value).Attr("dtype", value.dtype());
  return AddOp(scope, b);
}

Output Placeholder(const Scope& scope, DataType dtype,
                   const PartialShape& shape) {
  NodeBuilder b(scope.GetUniqueNameForOp("Placeholder"), "Placeholder");
  b.Attr("dtype", dtype).Attr("shape", shape);
  return AddOp(scope, b);
}

Output PlaceholderWithDefault(const Scope& scope, Output input,
                              const PartialShape& shape) {
  NodeBuilder b(scope.GetUniqueNameForOp("PlaceholderWithDefault"),
                "PlaceholderWithDefault");
  b.Input(input).Attr("dtype", BaseType(input.type())).Attr("shape", shape);
  return AddOp(scope, b);
}

#define RECFLOW_UNARY_HELPER_(NAME)                        \
  Output NAME(const Scope& scope, Output x) {              \
    NodeBuilder b(scope.GetUniqueNameForOp(#NAME), #NAME); \
    b.Input(x);                                            \
    return AddOp(scope, b);                                \
  }
RECFLOW_UNARY_HELPER_(Identity)
RECFLOW_UNARY_HELPER_(ZerosLike)
RECFLOW_UNARY_HELPER_(OnesLike)
RECFLOW_UNARY_HELPER_(Rank)
RECFLOW_UNARY_HELPER_(InvertPermutation)
#undef RECFLOW_UNARY_HELPER_

#define RECFLOW_BINARY_HELPER_(NAME)                        \
  Output NAME(const Scope& scope, Output a, Output b) {     \
    NodeBuilder nb(scope.GetUniqueNameForOp(#NAME), #NAME); \
    nb.Input(a).Input(b);                                   \
    return AddOp(scope, nb);                                \
  }
RECFLOW_BINARY_HELPER_(Reshape)
RECFLOW_BINARY_HELPER_(ExpandDims)
RECFLOW_BINARY_HELPER_(Transpose)
RECFLOW_BINARY_HELPER_(Tile)
RECFLOW_BINARY_HELPER_(Pad)
RECFLOW_BINARY_HELPER_(Fill)
RECFLOW_BINARY_HELPER_(GatherNd)
#undef RECFLOW_BINARY_HELPER_

Output NoOp(const Scope& scope) {
  NodeBuilder b(scope.GetUniqueNameForOp("NoOp"), "NoOp");
  return AddOp(scope, b);
}

Output Shape(const Scope& scope, Output input, DataType out_type) {
  NodeBuilder b(scope.GetUniqueNameForOp("Shape"), "Shape");
  b.Input(input).Attr("out_type", out_type);
  return AddOp(scope, b);
}

Output Size(const Scope& scope, Output input, DataType out_type) {
  NodeBuilder b(scope.GetUniqueNameForOp("Size"), "Size");
  b.Input(input).Attr("out_type", out_type);
  return AddOp(scope, b);
}

Output Squeeze(const Scope& scope, Output input,
               std::vector<int64_t> squeeze_dims) {
  NodeBuilder b(scope.GetUniqueNameForOp("Squeeze"), "Squeeze");
  b.Input(input).Attr("squeeze_dims", absl::Span<const int64_t>(squeeze_dims));
  return AddOp(scope, b);
}

Output ConcatV2(const Scope& scope, std::vector<Output> values, Output axis) {
  NodeBuilder b(scope.GetUniqueNameForOp("ConcatV2"), "ConcatV2");
  b.Input(std::move(values)).Input(axis);
  return AddOp(scope, b);
}

std::vector<Output> ConcatOffset(const Scope& scope, Output concat_dim,
                                 std::vector<Output> shapes) {
  const int64_t n = shapes.size();
  NodeBuilder b(scope.GetUniqueNameForOp("ConcatOffset"), "ConcatOffset");
  b.Input(concat_dim).Input(std::move(shapes));
  return NodeOutputs(scope.AddNode(b), n);
}

std::vector<Output> Split(const Scope& scope, Output axis, Output value,
                          int64_t num_split) {
  NodeBuilder b(scope.GetUniqueNameForOp("Split"), "Split");
  b.Input(axis).Input(value).Attr("num_split", num_split);
  return NodeOutputs(scope.AddNode(b), num_split);
}

std::vector<Output> SplitV(const Scope& scope, Output value, Output size_splits,
                           Output axis, int64_t num_split) {
  NodeBuilder b(scope.GetUniqueNameForOp("SplitV"), "SplitV");
  b.Input(value).Input(size_splits).Input(axis).Attr("num_split", num_split);
  return NodeOutputs(scope.AddNode(b), num_split);
}

Output Pack(const Scope& scope, std::vector<Output> values, int64_t axis) {
  NodeBuilder b(scope.GetUniqueNameForOp("Pack"), "Pack");
  b.Input(std::move(values)).Attr("axis", axis);
  return AddOp(scope, b);
}

std::vector<Output> Unpack(const Scope& scope, Output value, int64_t num,
                           int64_t axis) {
  NodeBuilder b(scope.GetUniqueNameForOp("Unpack"), "Unpack");
  b.Input(value).Attr("num", num).Attr("axis", axis);
  return NodeOutputs(scope.AddNode(b), num);
}

Output Range(const Scope& scope, Output start, Output limit, Output delta) {
  NodeBuilder b(scope.GetUniqueNameForOp("Range"), "Range");
  b.Input(start).Input(limit).Input(delta);
  return AddOp(scope, b);
}

Output OneHot(const Scope& scope, Output indices, Output depth, Output on_value,
              Output off_value, int64_t axis) {
  NodeBuilder b(scope.GetUniqueNameForOp("OneHot"), "OneHot");
  b.Input(indices).Input(depth).Input(on_value).Input(off_value).Attr("axis",
                                                                      axis);
  return AddOp(scope, b);
}

}  // namespace ops
}  // namespace recflow
