#include "recflow/ops/reduction_ops.h"

#include <string>
#include <vector>

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// The values of an int32/int64 tensor.
std::vector<int64_t> IndexValues(const Tensor& t) {
  std::vector<int64_t> v;
  if (t.dtype() == DT_INT32) {
    for (int32_t x : t.flat<int32_t>()) v.push_back(x);
  } else {
    for (int64_t x : t.flat<int64_t>()) v.push_back(x);
  }
  return v;
}

// TensorFlow's ReductionShape: exact when the axes are a known constant and
// the input rank is known; else the rank when keep_dims says it, else
// unknown.
absl::Status ReductionShape(InferenceContext* c) {
  bool keep_dims = false;
  RETURN_IF_ERROR(c->GetAttr("keep_dims", &keep_dims));
  const PartialShape& axes_shape = c->input(1);
  // Graphs written before GraphDef version 21 may give the axes with any
  // rank ([[1, 2]] for [1, 2]); the kernel reads them flattened.
  if (axes_shape.rank() > 1 && c->graph_def_version() >= 21) {
    return errors::InvalidArgument("reduction_indices must be a scalar or vector, but has shape ",
                                   axes_shape.DebugString());
  }
  const PartialShape& input = c->input(0);
  const Tensor* axes_t = c->input_tensor(1);
  if (axes_t == nullptr || input.unknown_rank()) {
    if (keep_dims && !input.unknown_rank()) {
      c->set_output(0, PartialShape::UnknownDims(input.rank()));
    } else if (!input.unknown_rank() && axes_shape.rank() >= 1 && axes_shape.num_elements() == 0) {
      c->set_output(0, input);  // no axes: nothing is reduced
    } else {
      c->set_output(0, PartialShape::Unknown());
    }
    return absl::OkStatus();
  }
  const int rank = input.rank();
  std::vector<bool> reduced(rank, false);
  for (int64_t axis : IndexValues(*axes_t)) {
    if (axis < -rank || axis >= rank) {
      return errors::InvalidArgument("invalid reduction axis ", axis, " for input of rank ", rank,
                                     " (shape ", input.DebugString(), "); axes must be in [",
                                     -rank, ", ", rank, ")");
    }
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    if (reduced[a]) {
      return errors::InvalidArgument("reduction axes contain dimension ", a, " twice");
    }
    reduced[a] = true;
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) {
    if (!reduced[d]) {
      dims.push_back(input.dim(d));
    } else if (keep_dims) {
      dims.push_back(1);
    }
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

// ArgMax/ArgMin: the input with `dimension` removed.
absl::Status ArgOpShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape input, c->WithRankAtLeast(0, 1));
  if (c->input(1).rank() > 0) {
    return errors::InvalidArgument("dimension must be a scalar, but has shape ",
                                   c->input(1).DebugString());
  }
  if (input.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  const int rank = input.rank();
  const Tensor* dim_t = c->input_tensor(1);
  if (dim_t == nullptr) {
    c->set_output(0, PartialShape::UnknownDims(rank - 1));
    return absl::OkStatus();
  }
  const std::vector<int64_t> v = IndexValues(*dim_t);
  if (v.size() != 1) {
    return errors::InvalidArgument("dimension must hold one value, has ", v.size());
  }
  const int64_t axis = v[0];
  if (axis < -rank || axis >= rank) {
    return errors::InvalidArgument("invalid dimension ", axis, " for input of rank ", rank,
                                   " (shape ", input.DebugString(), "); must be in [", -rank,
                                   ", ", rank, ")");
  }
  const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) {
    if (d != a) dims.push_back(input.dim(d));
  }
  c->set_output(0, PartialShape(absl::MakeConstSpan(dims)));
  return absl::OkStatus();
}

}  // namespace

#define RECFLOW_REDUCTION_NUMBER_TYPES_ \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64"

#define RECFLOW_REGISTER_REDUCTION_OP_(NAME, TYPES, DOC) \
  REGISTER_OP(NAME)                                      \
      .Input("input: T")                                 \
      .Input("reduction_indices: Tidx")                  \
      .Output("output: T")                               \
      .Attr("keep_dims: bool = false")                   \
      .Attr("T: {" TYPES "}")                            \
      .Attr("Tidx: {int32, int64} = int32")              \
      .SetShapeFn(ReductionShape)                        \
      .Doc(DOC)

RECFLOW_REGISTER_REDUCTION_OP_("Sum", RECFLOW_REDUCTION_NUMBER_TYPES_ ", complex64, complex128",
                               "Sums the input along the axes in reduction_indices.");
RECFLOW_REGISTER_REDUCTION_OP_("Mean", RECFLOW_REDUCTION_NUMBER_TYPES_ ", complex64, complex128",
                               "Averages the input along the axes in reduction_indices.");
RECFLOW_REGISTER_REDUCTION_OP_("Prod", RECFLOW_REDUCTION_NUMBER_TYPES_ ", complex64, complex128",
                               "Multiplies the input's elements along the axes in "
                               "reduction_indices.");
RECFLOW_REGISTER_REDUCTION_OP_("Max", RECFLOW_REDUCTION_NUMBER_TYPES_,
                               "The maximum of the input along the axes in reduction_indices.");
RECFLOW_REGISTER_REDUCTION_OP_("Min", RECFLOW_REDUCTION_NUMBER_TYPES_,
                               "The minimum of the input along the axes in reduction_indices.");

REGISTER_OP("ArgMax")
    .Input("input: T")
    .Input("dimension: Tidx")
    .Output("output: output_type")
    .Attr("T: {" RECFLOW_REDUCTION_NUMBER_TYPES_ ", bool}")
    .Attr("Tidx: {int16, int32, int64} = int32")
    .Attr("output_type: {int16, uint16, int32, int64} = int64")
    .SetShapeFn(ArgOpShape)
    .Doc("The index of the largest value along a dimension (the first among ties).");

REGISTER_OP("ArgMin")
    .Input("input: T")
    .Input("dimension: Tidx")
    .Output("output: output_type")
    .Attr("T: {" RECFLOW_REDUCTION_NUMBER_TYPES_ ", bool}")
    .Attr("Tidx: {int16, int32, int64} = int32")
    .Attr("output_type: {int16, uint16, int32, int64} = int64")
    .SetShapeFn(ArgOpShape)
    .Doc("The index of the smallest value along a dimension (the first among ties).");

#undef RECFLOW_REGISTER_REDUCTION_OP_
#undef RECFLOW_REDUCTION_NUMBER_TYPES_

namespace ops {
namespace {

// A Const named `name`, built directly so that it sits beside the op that
// uses it ("Sum/reduction_indices", as TensorFlow names it).
Output NamedConst(const Scope& scope, const std::string& name, const Tensor& value) {
  NodeBuilder b(name, "Const");
  b.Attr("value", value).Attr("dtype", value.dtype());
  return Output(scope.AddNode(b));
}

Output Reduction(const Scope& scope, const std::string& name, const char* op, Output input,
                 Output axes, const ReductionAttrs& attrs) {
  NodeBuilder b(name, op);
  b.Input(input).Input(axes).Attr("keep_dims", attrs.keep_dims);
  return Output(scope.AddNode(b));
}

Output Reduction(const Scope& scope, const char* op, Output input, Output axes,
                 const ReductionAttrs& attrs) {
  return Reduction(scope, scope.GetUniqueNameForOp(op), op, input, axes, attrs);
}

Output Reduction(const Scope& scope, const char* op, Output input, absl::Span<const int> axes,
                 const ReductionAttrs& attrs) {
  const std::string name = scope.GetUniqueNameForOp(op);
  std::vector<int32_t> v(axes.begin(), axes.end());
  Output axes_const = NamedConst(scope, name + "/reduction_indices",
                                 Tensor::FromVector<int32_t>(absl::MakeConstSpan(v)));
  return Reduction(scope, name, op, input, axes_const, attrs);
}

Output ArgOp(const Scope& scope, const std::string& name, const char* op, Output input,
             Output dimension, const ArgMaxAttrs& attrs) {
  NodeBuilder b(name, op);
  b.Input(input).Input(dimension).Attr("output_type", attrs.output_type);
  return Output(scope.AddNode(b));
}

Output ArgOp(const Scope& scope, const char* op, Output input, int dimension,
             const ArgMaxAttrs& attrs) {
  const std::string name = scope.GetUniqueNameForOp(op);
  Output dim = NamedConst(scope, name + "/dimension", Tensor::Scalar<int32_t>(dimension));
  return ArgOp(scope, name, op, input, dim, attrs);
}

}  // namespace

#define RECFLOW_DEFINE_REDUCTION_(OP)                                                         \
  Output OP(const Scope& scope, Output input, Output axes, const ReductionAttrs& attrs) {     \
    return Reduction(scope, #OP, input, axes, attrs);                                         \
  }                                                                                           \
  Output OP(const Scope& scope, Output input, const std::vector<int>& axes,                  \
            const ReductionAttrs& attrs) {                                                    \
    return Reduction(scope, #OP, input, absl::MakeConstSpan(axes), attrs);                    \
  }                                                                                           \
  Output OP(const Scope& scope, Output input, std::initializer_list<int> axes,               \
            const ReductionAttrs& attrs) {                                                    \
    return Reduction(scope, #OP, input, absl::Span<const int>(axes.begin(), axes.size()),     \
                     attrs);                                                                  \
  }

RECFLOW_DEFINE_REDUCTION_(Sum)
RECFLOW_DEFINE_REDUCTION_(Mean)
RECFLOW_DEFINE_REDUCTION_(Max)
RECFLOW_DEFINE_REDUCTION_(Min)
RECFLOW_DEFINE_REDUCTION_(Prod)

#undef RECFLOW_DEFINE_REDUCTION_

Output ArgMax(const Scope& scope, Output input, Output dimension, const ArgMaxAttrs& attrs) {
  return ArgOp(scope, scope.GetUniqueNameForOp("ArgMax"), "ArgMax", input, dimension, attrs);
}
Output ArgMax(const Scope& scope, Output input, int dimension, const ArgMaxAttrs& attrs) {
  return ArgOp(scope, "ArgMax", input, dimension, attrs);
}
Output ArgMin(const Scope& scope, Output input, Output dimension, const ArgMinAttrs& attrs) {
  return ArgOp(scope, scope.GetUniqueNameForOp("ArgMin"), "ArgMin", input, dimension, attrs);
}
Output ArgMin(const Scope& scope, Output input, int dimension, const ArgMinAttrs& attrs) {
  return ArgOp(scope, "ArgMin", input, dimension, attrs);
}

}  // namespace ops
}  // namespace recflow
