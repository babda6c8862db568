// TensorFlow's parsing ops (tensorflow/core/ops/parsing_ops.cc) with their
// shape functions: the tf.Example parsers ParseExample, ParseSingleExample
// and ParseExampleV2, and DecodeCSV. None is differentiable; the no-gradient
// registrations are at the bottom.
#include "recflow/ops/parsing_ops.h"

#include "absl/strings/str_cat.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// A dense shape may have an unknown first dimension (a variable-length
// feature, padded per batch) and no other unknown dimension.
absl::Status CheckDenseShapes(const std::vector<PartialShape>& shapes) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const PartialShape& s = shapes[i];
    if (s.unknown_rank()) {
      return errors::InvalidArgument("dense_shapes[", i, "] has unknown rank");
    }
    for (int d = 1; d < s.rank(); ++d) {
      if (s.dim(d) < 0) {
        return errors::InvalidArgument(
            "dense_shapes[", i, "] is ", s.DebugString(),
            "; only the first dimension may be unknown (variable length)");
      }
    }
  }
  return absl::OkStatus();
}

// batch (a known-rank shape) followed by the dense shape.
PartialShape Concat(const PartialShape& batch, const PartialShape& dense) {
  std::vector<int64_t> dims(batch.dims().begin(), batch.dims().end());
  dims.insert(dims.end(), dense.dims().begin(), dense.dims().end());
  return PartialShape(absl::MakeConstSpan(dims));
}

absl::Status ParseExampleShape(InferenceContext* c) {
  int64_t num_sparse, num_dense;
  std::vector<DataType> sparse_types, dense_types;
  std::vector<PartialShape> dense_shapes;
  RETURN_IF_ERROR(c->GetAttr("Nsparse", &num_sparse));
  RETURN_IF_ERROR(c->GetAttr("Ndense", &num_dense));
  RETURN_IF_ERROR(c->GetAttr("sparse_types", &sparse_types));
  RETURN_IF_ERROR(c->GetAttr("Tdense", &dense_types));
  RETURN_IF_ERROR(c->GetAttr("dense_shapes", &dense_shapes));
  if (static_cast<int64_t>(sparse_types.size()) != num_sparse) {
    return errors::InvalidArgument("len(sparse_types) is ", sparse_types.size(),
                                   " but Nsparse is ", num_sparse);
  }
  if (static_cast<int64_t>(dense_types.size()) != num_dense ||
      static_cast<int64_t>(dense_shapes.size()) != num_dense) {
    return errors::InvalidArgument(
        "len(Tdense) is ", dense_types.size(), " and len(dense_shapes) is ",
        dense_shapes.size(), " but Ndense is ", num_dense);
  }
  RETURN_IF_ERROR(CheckDenseShapes(dense_shapes));
  ASSIGN_OR_RETURN(PartialShape input, c->WithRank(0, 1));
  RETURN_IF_ERROR(c->WithRank(1, 1).status());  // names
  for (int i = 2; i < 2 + num_sparse + num_dense; ++i) {
    RETURN_IF_ERROR(c->WithRank(i, 0).status());  // keys are scalars
  }
  int out = 0;
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim, 2}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({2}));
  for (int64_t i = 0; i < num_dense; ++i)
    c->set_output(out++, Concat(input, dense_shapes[i]));
  return absl::OkStatus();
}

absl::Status ParseExampleV2Shape(InferenceContext* c) {
  int64_t num_sparse;
  std::vector<DataType> sparse_types, dense_types, ragged_value_types,
      ragged_split_types;
  std::vector<PartialShape> dense_shapes;
  RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
  RETURN_IF_ERROR(c->GetAttr("sparse_types", &sparse_types));
  RETURN_IF_ERROR(c->GetAttr("Tdense", &dense_types));
  RETURN_IF_ERROR(c->GetAttr("dense_shapes", &dense_shapes));
  RETURN_IF_ERROR(c->GetAttr("ragged_value_types", &ragged_value_types));
  RETURN_IF_ERROR(c->GetAttr("ragged_split_types", &ragged_split_types));
  if (static_cast<int64_t>(sparse_types.size()) != num_sparse) {
    return errors::InvalidArgument("len(sparse_types) is ", sparse_types.size(),
                                   " but num_sparse is ", num_sparse);
  }
  if (dense_types.size() != dense_shapes.size()) {
    return errors::InvalidArgument("len(Tdense) is ", dense_types.size(),
                                   " but len(dense_shapes) is ",
                                   dense_shapes.size());
  }
  if (ragged_value_types.size() != ragged_split_types.size()) {
    return errors::InvalidArgument(
        "len(ragged_value_types) is ", ragged_value_types.size(),
        " but len(ragged_split_types) is ", ragged_split_types.size());
  }
  RETURN_IF_ERROR(CheckDenseShapes(dense_shapes));
  // serialized: a vector or a scalar (one Example).
  PartialShape input = c->input(0);
  if (input.unknown_rank()) {
    input = PartialShape::Unknown();
  } else if (input.rank() > 1) {
    return errors::InvalidArgument(
        "serialized must be a scalar or a vector, got ", input.DebugString());
  }
  const int rank = input.rank();  // -1 when unknown
  // The key vectors: lengths must match the attrs when known.
  const int64_t num_dense = static_cast<int64_t>(dense_types.size());
  const int64_t num_ragged = static_cast<int64_t>(ragged_value_types.size());
  const char* key_names[] = {"sparse_keys", "dense_keys", "ragged_keys"};
  const int64_t key_counts[] = {num_sparse, num_dense, num_ragged};
  for (int k = 0; k < 3; ++k) {
    ASSIGN_OR_RETURN(PartialShape keys, c->WithRank(2 + k, 1));
    RETURN_IF_ERROR(c->MergeDim(keys.dim(0), key_counts[k],
                                absl::StrCat(key_names[k], " length"))
                        .status());
  }
  int out = 0;
  const int64_t index_cols = rank < 0 ? kUnknownDim : rank + 1;
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim, index_cols}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({index_cols}));
  for (int64_t i = 0; i < num_dense; ++i) {
    c->set_output(out++, rank < 0 ? PartialShape::Unknown()
                                  : Concat(input, dense_shapes[i]));
  }
  int64_t splits = kUnknownDim;
  if (rank == 0) splits = 2;
  if (rank == 1 && input.dim(0) >= 0) splits = input.dim(0) + 1;
  for (int64_t i = 0; i < num_ragged; ++i)
    c->set_output(out++, PartialShape({kUnknownDim}));
  for (int64_t i = 0; i < num_ragged; ++i)
    c->set_output(out++, PartialShape({splits}));
  return absl::OkStatus();
}

absl::Status ParseSingleExampleShape(InferenceContext* c) {
  int64_t num_sparse;
  std::vector<std::string> sparse_keys, dense_keys;
  std::vector<DataType> sparse_types, dense_types;
  std::vector<PartialShape> dense_shapes;
  RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
  RETURN_IF_ERROR(c->GetAttr("sparse_keys", &sparse_keys));
  RETURN_IF_ERROR(c->GetAttr("dense_keys", &dense_keys));
  RETURN_IF_ERROR(c->GetAttr("sparse_types", &sparse_types));
  RETURN_IF_ERROR(c->GetAttr("Tdense", &dense_types));
  RETURN_IF_ERROR(c->GetAttr("dense_shapes", &dense_shapes));
  if (static_cast<int64_t>(sparse_keys.size()) != num_sparse ||
      static_cast<int64_t>(sparse_types.size()) != num_sparse) {
    return errors::InvalidArgument(
        "len(sparse_keys) is ", sparse_keys.size(), " and len(sparse_types) is ",
        sparse_types.size(), " but num_sparse is ", num_sparse);
  }
  if (dense_types.size() != dense_keys.size() ||
      dense_shapes.size() != dense_keys.size()) {
    return errors::InvalidArgument(
        "len(dense_keys) is ", dense_keys.size(), " but len(Tdense) is ",
        dense_types.size(), " and len(dense_shapes) is ", dense_shapes.size());
  }
  RETURN_IF_ERROR(CheckDenseShapes(dense_shapes));
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  int out = 0;
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim, 1}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({1}));
  for (const PartialShape& s : dense_shapes) c->set_output(out++, s);
  return absl::OkStatus();
}

// select_cols: empty, or one strictly increasing non-negative column per
// output.
absl::Status CheckSelectCols(absl::Span<const int64_t> select_cols,
                             int num_outputs) {
  if (select_cols.empty()) return absl::OkStatus();
  if (static_cast<int64_t>(select_cols.size()) != num_outputs) {
    return errors::InvalidArgument("select_cols has ", select_cols.size(),
                                   " columns but there are ", num_outputs,
                                   " record_defaults; they must match");
  }
  if (select_cols[0] < 0) {
    return errors::InvalidArgument(
        "select_cols should be non-negative indices, got ", select_cols[0]);
  }
  for (size_t i = 1; i < select_cols.size(); ++i) {
    if (select_cols[i - 1] >= select_cols[i]) {
      return errors::InvalidArgument(
          "select_cols should be strictly increasing indices, got ",
          select_cols[i - 1], " then ", select_cols[i]);
    }
  }
  return absl::OkStatus();
}

// DecodeCSV: every default is a scalar or a vector of at most one element;
// every output has the records' shape. The attrs TensorFlow checks in the
// kernel are checked here too, so a bad node fails when it is built.
absl::Status DecodeCsvShape(InferenceContext* c) {
  std::string delim;
  std::vector<int64_t> select_cols;
  RETURN_IF_ERROR(c->GetAttr("field_delim", &delim));
  RETURN_IF_ERROR(c->GetAttr("select_cols", &select_cols));
  if (delim.size() != 1) {
    return errors::InvalidArgument("field_delim should be only 1 char, got '",
                                   delim, "'");
  }
  RETURN_IF_ERROR(CheckSelectCols(select_cols, c->num_outputs()));
  for (int i = 1; i < c->num_inputs(); ++i) {
    const PartialShape& d = c->input(i);
    if (d.unknown_rank()) continue;
    if (d.rank() > 1 || (d.rank() == 1 && d.dim(0) > 1)) {
      return errors::InvalidArgument(
          "record_defaults[", i - 1, "] has shape ", d.DebugString(),
          "; a default must be a length-0 or length-1 vector, or a scalar");
    }
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(0));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("ParseExample")
    .Input("serialized: string")
    .Input("names: string")
    .Input("sparse_keys: Nsparse * string")
    .Input("dense_keys: Ndense * string")
    .Input("dense_defaults: Tdense")
    .Output("sparse_indices: Nsparse * int64")
    .Output("sparse_values: sparse_types")
    .Output("sparse_shapes: Nsparse * int64")
    .Output("dense_values: Tdense")
    .Attr("Nsparse: int >= 0")
    .Attr("Ndense: int >= 0")
    .Attr("sparse_types: list({float,int64,string}) >= 0")
    .Attr("Tdense: list({float,int64,string}) >= 0")
    .Attr("dense_shapes: list(shape) >= 0")
    .SetShapeFn(ParseExampleShape)
    .Doc(
        "Parses a batch of serialized tf.Example protos into sparse and dense "
        "tensors.\n\n"
        "A dense feature with an empty default is required; a dense shape "
        "whose first\n"
        "dimension is -1 is variable length, padded to the batch's longest.");

REGISTER_OP("ParseExampleV2")
    .Input("serialized: string")
    .Input("names: string")
    .Input("sparse_keys: string")
    .Input("dense_keys: string")
    .Input("ragged_keys: string")
    .Input("dense_defaults: Tdense")
    .Output("sparse_indices: num_sparse * int64")
    .Output("sparse_values: sparse_types")
    .Output("sparse_shapes: num_sparse * int64")
    .Output("dense_values: Tdense")
    .Output("ragged_values: ragged_value_types")
    .Output("ragged_row_splits: ragged_split_types")
    .Attr("Tdense: list({float,int64,string}) >= 0")
    .Attr("num_sparse: int >= 0")
    .Attr("sparse_types: list({float,int64,string}) >= 0")
    .Attr("ragged_value_types: list({float,int64,string}) >= 0")
    .Attr("ragged_split_types: list({int32,int64}) >= 0")
    .Attr("dense_shapes: list(shape) >= 0")
    .SetShapeFn(ParseExampleV2Shape)
    .Doc(
        "Parses serialized tf.Example protos (a scalar or a vector) into "
        "sparse, dense\n"
        "and ragged tensors; keys are given as string vectors.");

REGISTER_OP("ParseSingleExample")
    .Input("serialized: string")
    .Input("dense_defaults: Tdense")
    .Output("sparse_indices: num_sparse * int64")
    .Output("sparse_values: sparse_types")
    .Output("sparse_shapes: num_sparse * int64")
    .Output("dense_values: Tdense")
    .Attr("num_sparse: int >= 0")
    .Attr("sparse_keys: list(string) >= 0")
    .Attr("dense_keys: list(string) >= 0")
    .Attr("sparse_types: list({float,int64,string}) >= 0")
    .Attr("Tdense: list({float,int64,string}) >= 0")
    .Attr("dense_shapes: list(shape) >= 0")
    .SetShapeFn(ParseSingleExampleShape)
    .Doc(
        "Parses one serialized tf.Example (a scalar) into sparse and dense "
        "tensors; keys\n"
        "are attrs. Sparse indices are [nnz, 1] and shapes [1]; dense values "
        "have\n"
        "dense_shapes[j] (a first dimension of -1 is variable length).");

REGISTER_OP("DecodeCSV")
    .Input("records: string")
    .Input("record_defaults: OUT_TYPE")
    .Output("output: OUT_TYPE")
    .Attr("OUT_TYPE: list({float,double,int32,int64,string})")
    .Attr("field_delim: string = ','")
    .Attr("use_quote_delim: bool = true")
    .Attr("na_value: string = ''")
    .Attr("select_cols: list(int) = []")
    .SetShapeFn(DecodeCsvShape)
    .Doc(
        "Converts CSV records (RFC 4180) to one tensor per column, each of "
        "the records'\n"
        "shape. record_defaults[i] is the column's default (one element) or "
        "empty\n"
        "(required); its dtype is the column's. An empty field or one equal "
        "to\n"
        "na_value is missing. select_cols picks columns (strictly increasing).");

REGISTER_NO_GRADIENT_OP("ParseExample");
REGISTER_NO_GRADIENT_OP("ParseSingleExample");
REGISTER_NO_GRADIENT_OP("DecodeCSV");
REGISTER_NO_GRADIENT_OP("ParseExampleV2");

namespace ops {
namespace {

std::vector<Output> Outputs(Node* node, int start, int64_t n) {
  std::vector<Output> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(node != nullptr ? Output(node, start + static_cast<int>(i))
                                  : Output());
  }
  return out;
}

}  // namespace

ParseExampleOutputs ParseExample(
    const Scope& scope, Output serialized, Output names,
    std::vector<Output> sparse_keys, std::vector<Output> dense_keys,
    std::vector<Output> dense_defaults,
    const std::vector<DataType>& sparse_types,
    const std::vector<PartialShape>& dense_shapes) {
  const int64_t ns = static_cast<int64_t>(sparse_keys.size());
  const int64_t nd = static_cast<int64_t>(dense_keys.size());
  NodeBuilder b(scope.GetUniqueNameForOp("ParseExample"), "ParseExample");
  b.Input(serialized)
      .Input(names)
      .Input(std::move(sparse_keys))
      .Input(std::move(dense_keys))
      .Input(std::move(dense_defaults))
      .Attr("sparse_types", absl::MakeConstSpan(sparse_types))
      .Attr("dense_shapes", absl::MakeConstSpan(dense_shapes));
  Node* node = scope.AddNode(b);
  ParseExampleOutputs out;
  const int s = static_cast<int>(ns);
  out.sparse_indices = Outputs(node, 0, ns);
  out.sparse_values = Outputs(node, s, ns);
  out.sparse_shapes = Outputs(node, 2 * s, ns);
  out.dense_values = Outputs(node, 3 * s, nd);
  return out;
}

ParseExampleV2Outputs ParseExampleV2(
    const Scope& scope, Output serialized, Output names, Output sparse_keys,
    Output dense_keys, Output ragged_keys, std::vector<Output> dense_defaults,
    const std::vector<DataType>& sparse_types,
    const std::vector<DataType>& ragged_value_types,
    const std::vector<DataType>& ragged_split_types,
    const std::vector<PartialShape>& dense_shapes) {
  const int64_t ns = static_cast<int64_t>(sparse_types.size());
  const int64_t nd = static_cast<int64_t>(dense_defaults.size());
  const int64_t nr = static_cast<int64_t>(ragged_value_types.size());
  NodeBuilder b(scope.GetUniqueNameForOp("ParseExampleV2"), "ParseExampleV2");
  b.Input(serialized)
      .Input(names)
      .Input(sparse_keys)
      .Input(dense_keys)
      .Input(ragged_keys)
      .Input(std::move(dense_defaults))
      .Attr("num_sparse", ns)
      .Attr("sparse_types", absl::MakeConstSpan(sparse_types))
      .Attr("ragged_value_types", absl::MakeConstSpan(ragged_value_types))
      .Attr("ragged_split_types", absl::MakeConstSpan(ragged_split_types))
      .Attr("dense_shapes", absl::MakeConstSpan(dense_shapes));
  Node* node = scope.AddNode(b);
  ParseExampleV2Outputs out;
  int at = 0;
  out.sparse_indices = Outputs(node, at, ns);
  at += static_cast<int>(ns);
  out.sparse_values = Outputs(node, at, ns);
  at += static_cast<int>(ns);
  out.sparse_shapes = Outputs(node, at, ns);
  at += static_cast<int>(ns);
  out.dense_values = Outputs(node, at, nd);
  at += static_cast<int>(nd);
  out.ragged_values = Outputs(node, at, nr);
  at += static_cast<int>(nr);
  out.ragged_row_splits = Outputs(node, at, nr);
  return out;
}

}  // namespace ops
}  // namespace recflow
