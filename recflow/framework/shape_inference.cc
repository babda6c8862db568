#include "recflow/framework/shape_inference.h"

namespace recflow {

InferenceContext::InferenceContext(const tensorflow::NodeDef& node_def,
                                   std::vector<PartialShape> input_shapes,
                                   std::vector<const Tensor*> input_tensors,
                                   int num_outputs, int graph_def_version)
    : node_def_(node_def),
      inputs_(std::move(input_shapes)),
      input_tensors_(std::move(input_tensors)),
      outputs_(num_outputs),
      graph_def_version_(graph_def_version) {
  input_tensors_.resize(inputs_.size(), nullptr);
}

absl::StatusOr<PartialShape> InferenceContext::WithRank(int i, int rank) const {
  const PartialShape& s = inputs_[i];
  if (s.unknown_rank()) return PartialShape::UnknownDims(rank);
  if (s.rank() != rank) {
    return errors::InvalidArgument("input ", i, " must be rank ", rank, " but is rank ",
                                   s.rank(), " with shape ", s.DebugString());
  }
  return s;
}

absl::StatusOr<PartialShape> InferenceContext::WithRankAtLeast(int i, int rank) const {
  const PartialShape& s = inputs_[i];
  if (!s.unknown_rank() && s.rank() < rank) {
    return errors::InvalidArgument("input ", i, " must be at least rank ", rank,
                                   " but is rank ", s.rank(), " with shape ",
                                   s.DebugString());
  }
  return s;
}

absl::StatusOr<int64_t> InferenceContext::MergeDim(int64_t a, int64_t b,
                                                   absl::string_view what) const {
  if (a >= 0 && b >= 0 && a != b) {
    return errors::InvalidArgument(what, " must be equal, but are ", a, " and ", b);
  }
  return a >= 0 ? a : b;
}

absl::StatusOr<PartialShape> InferenceContext::ShapeFromShapeTensor(int i) const {
  const Tensor* t = input_tensors_[i];
  if (t != nullptr) {
    if (t->dims() > 1) {
      return errors::InvalidArgument("input ", i, " must be a 1-D shape tensor but has shape ",
                                     t->shape().DebugString());
    }
    std::vector<int64_t> dims;
    if (t->dtype() == DT_INT32) {
      for (int32_t d : t->flat<int32_t>()) dims.push_back(d);
    } else if (t->dtype() == DT_INT64) {
      for (int64_t d : t->flat<int64_t>()) dims.push_back(d);
    } else {
      return errors::InvalidArgument("input ", i, " must be an int32 or int64 shape tensor, got ",
                                     DataTypeString(t->dtype()));
    }
    for (int64_t& d : dims) {
      if (d < -1) {
        return errors::InvalidArgument("input ", i, " holds dimension ", d,
                                       "; sizes must be >= -1");
      }
    }
    return PartialShape(absl::MakeConstSpan(dims));
  }
  const PartialShape& s = inputs_[i];
  if (s.rank() == 1 && s.dim(0) >= 0) return PartialShape::UnknownDims(static_cast<int>(s.dim(0)));
  return PartialShape::Unknown();
}

absl::StatusOr<PartialShape> BroadcastShapes(const PartialShape& a, const PartialShape& b) {
  if (a.unknown_rank() || b.unknown_rank()) return PartialShape::Unknown();
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.rank() - rank + i;
    const int ib = b.rank() - rank + i;
    const int64_t da = ia >= 0 ? a.dim(ia) : 1;
    const int64_t db = ib >= 0 ? b.dim(ib) : 1;
    if (da == 1) {
      dims[i] = db;
    } else if (db == 1) {
      dims[i] = da;
    } else if (da < 0 || db < 0) {
      // One side unknown, the other not 1: the known side wins if it is > 1.
      dims[i] = da < 0 ? db : da;
    } else if (da == db) {
      dims[i] = da;
    } else {
      return errors::InvalidArgument("incompatible shapes for broadcasting: ",
                                     a.DebugString(), " and ", b.DebugString());
    }
  }
  return PartialShape(absl::MakeConstSpan(dims));
}

namespace shape_fns {

absl::Status UnchangedShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(0));
  return absl::OkStatus();
}

absl::Status ScalarShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, PartialShape({}));
  return absl::OkStatus();
}

absl::Status UnknownShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, PartialShape::Unknown());
  return absl::OkStatus();
}

absl::Status NoOutputs(InferenceContext* c) { return absl::OkStatus(); }

absl::Status BroadcastBinaryOpShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape out, BroadcastShapes(c->input(0), c->input(1)));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

absl::Status MatMulShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape a, c->WithRank(0, 2));
  ASSIGN_OR_RETURN(PartialShape b, c->WithRank(1, 2));
  bool ta = false, tb = false;
  RETURN_IF_ERROR(c->GetAttr("transpose_a", &ta));
  RETURN_IF_ERROR(c->GetAttr("transpose_b", &tb));
  const int64_t m = a.dim(ta ? 1 : 0), ka = a.dim(ta ? 0 : 1);
  const int64_t kb = b.dim(tb ? 1 : 0), n = b.dim(tb ? 0 : 1);
  if (ka >= 0 && kb >= 0 && ka != kb) {
    return errors::InvalidArgument(
        "a is ", c->input(0).DebugString(), (ta ? " (transposed)" : ""), " but b is ",
        c->input(1).DebugString(), (tb ? " (transposed)" : ""),
        "; inner dimensions must match (", ka, " vs ", kb, ")");
  }
  c->set_output(0, PartialShape({m, n}));
  return absl::OkStatus();
}

}  // namespace shape_fns
}  // namespace recflow
