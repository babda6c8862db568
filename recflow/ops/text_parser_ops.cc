// recflow's own text parsers as graph ops (TensorFlow has no equivalent):
// RecflowParseCriteo, RecflowParseLibsvm and RecflowParseCsv take a batch of
// text lines (a string vector, e.g. TextLineDataset(files).batch(4096)) and
// the format as attrs, and return recflow's batch layout
// (recflow/data/batch.h) with each sparse feature in two forms:
//   sparse_indices [nnz, 2] + sparse_ids [nnz] + sparse_shapes [2]
//     (a SparseTensor [B', longest row], for embedding_lookup_sparse), and
//   sparse_row_splits [B' + 1] (for EmbeddingBag / recflow's zoo).
// The formats, id schemes and bad-line rules are recflow/data/text_parsers.h's
// (docs/formats/text.md). `origins` is [0] or one "path:LINE" per line, used
// only to name lines in errors. With error_mode "skip" bad lines are dropped
// (B' <= B; num_skipped counts the lines of the batch that are not in the
// output, CSV header lines included); with "fail" the first bad line is an
// InvalidArgument naming it, the field and the reason.
// Kernels: kernels/text_parser_kernels.cc. Not differentiable.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// lines: a vector (or a scalar: a batch of one); origins: [0] or like lines.
// Returns the number of output rows when it is known: B when lines is [B]
// and bad lines fail (nothing is dropped), else unknown.
absl::StatusOr<int64_t> CheckLines(InferenceContext* c) {
  const PartialShape& lines = c->input(0);
  if (!lines.unknown_rank() && lines.rank() > 1) {
    return errors::InvalidArgument("lines must be a string vector, got ",
                                   lines.DebugString());
  }
  const PartialShape& origins = c->input(1);
  if (!origins.unknown_rank() && origins.rank() > 1) {
    return errors::InvalidArgument(
        "origins must be a string vector (empty, or one per line), got ",
        origins.DebugString());
  }
  std::string mode;
  RETURN_IF_ERROR(c->GetAttr("error_mode", &mode));
  if (mode != "fail" || lines.unknown_rank()) return kUnknownDim;
  return lines.rank() == 0 ? 1 : lines.dim(0);
}

// labels [B'], dense [B', num_dense] (when has_dense), per sparse feature
// indices / ids / shapes / row_splits, then the weighted feature's weights
// when `weighted` (libsvm), then num_skipped.
void SetBatchShapes(InferenceContext* c, int64_t rows, bool has_dense,
                    int64_t num_dense, int64_t num_sparse, bool weighted) {
  int out = 0;
  c->set_output(out++, PartialShape({rows}));
  if (has_dense) c->set_output(out++, PartialShape({rows, num_dense}));
  const int64_t splits = rows < 0 ? kUnknownDim : rows + 1;
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim, 2}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({kUnknownDim}));
  if (weighted) c->set_output(out++, PartialShape({kUnknownDim}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({2}));
  for (int64_t i = 0; i < num_sparse; ++i)
    c->set_output(out++, PartialShape({splits}));
  c->set_output(out++, PartialShape({}));
}

absl::Status ParseCriteoShape(InferenceContext* c) {
  int64_t num_dense, num_categorical, num_sparse, max_len;
  std::vector<int64_t> sequence_fields;
  RETURN_IF_ERROR(c->GetAttr("num_dense", &num_dense));
  RETURN_IF_ERROR(c->GetAttr("num_categorical", &num_categorical));
  RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
  RETURN_IF_ERROR(c->GetAttr("sequence_fields", &sequence_fields));
  RETURN_IF_ERROR(c->GetAttr("max_sequence_length", &max_len));
  if (num_sparse !=
      num_categorical + static_cast<int64_t>(sequence_fields.size())) {
    return errors::InvalidArgument(
        "num_sparse is ", num_sparse, " but num_categorical (",
        num_categorical, ") + len(sequence_fields) (", sequence_fields.size(),
        ") is ", num_categorical + sequence_fields.size());
  }
  for (size_t s = 0; s < sequence_fields.size(); ++s) {
    if (sequence_fields[s] < 0 || sequence_fields[s] >= num_categorical) {
      return errors::InvalidArgument("sequence_fields[", s, "] is ",
                                     sequence_fields[s],
                                     "; it must be a categorical field in [0, ",
                                     num_categorical, ")");
    }
  }
  ASSIGN_OR_RETURN(int64_t rows, CheckLines(c));
  SetBatchShapes(c, rows, /*has_dense=*/true, num_dense, num_sparse,
                 /*weighted=*/false);
  return absl::OkStatus();
}

absl::Status ParseLibsvmShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(int64_t rows, CheckLines(c));
  SetBatchShapes(c, rows, /*has_dense=*/false, 0, 1, /*weighted=*/true);
  return absl::OkStatus();
}

absl::Status ParseCsvShape(InferenceContext* c) {
  std::vector<std::string> names, kinds, id_types, separators;
  std::vector<float> defaults;
  std::string delimiter;
  int64_t num_sparse;
  RETURN_IF_ERROR(c->GetAttr("column_names", &names));
  RETURN_IF_ERROR(c->GetAttr("column_kinds", &kinds));
  RETURN_IF_ERROR(c->GetAttr("id_types", &id_types));
  RETURN_IF_ERROR(c->GetAttr("multi_value_separators", &separators));
  RETURN_IF_ERROR(c->GetAttr("dense_defaults", &defaults));
  RETURN_IF_ERROR(c->GetAttr("delimiter", &delimiter));
  RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
  const size_t n = names.size();
  if (kinds.size() != n) {
    return errors::InvalidArgument("column_kinds has ", kinds.size(),
                                   " entries but column_names has ", n);
  }
  const struct {
    const char* attr;
    size_t size;
  } per_column[] = {{"id_types", id_types.size()},
                    {"multi_value_separators", separators.size()},
                    {"dense_defaults", defaults.size()}};
  for (const auto& a : per_column) {
    if (a.size != 0 && a.size != n) {
      return errors::InvalidArgument(a.attr, " has ", a.size,
                                     " entries; it must be empty or have one "
                                     "per column (",
                                     n, ")");
    }
  }
  if (delimiter.size() != 1) {
    return errors::InvalidArgument("delimiter must be one character, got '",
                                   delimiter, "'");
  }
  int64_t dense = 0, sparse = 0;
  for (size_t i = 0; i < n; ++i) {
    if (kinds[i] == "dense") {
      ++dense;
    } else if (kinds[i] == "sparse") {
      ++sparse;
    } else if (kinds[i] != "label" && kinds[i] != "ignore") {
      return errors::InvalidArgument(
          "column_kinds[", i, "] (column '", names[i], "') is '", kinds[i],
          "'; expected 'label', 'dense', 'sparse' or 'ignore'");
    }
    if (!id_types.empty() && id_types[i] != "string" && id_types[i] != "int64") {
      return errors::InvalidArgument("id_types[", i, "] (column '", names[i],
                                     "') is '", id_types[i],
                                     "'; expected 'string' or 'int64'");
    }
    if (!separators.empty() && separators[i].size() > 1) {
      return errors::InvalidArgument(
          "multi_value_separators[", i, "] (column '", names[i], "') is '",
          separators[i], "'; expected '' (one value) or one character");
    }
  }
  if (sparse != num_sparse) {
    return errors::InvalidArgument("num_sparse is ", num_sparse, " but ",
                                   sparse, " columns are 'sparse'");
  }
  ASSIGN_OR_RETURN(int64_t rows, CheckLines(c));
  // A header line is dropped, so with has_header the row count is unknown.
  bool has_header;
  RETURN_IF_ERROR(c->GetAttr("has_header", &has_header));
  if (has_header) rows = kUnknownDim;
  SetBatchShapes(c, rows, /*has_dense=*/true, dense, num_sparse,
                 /*weighted=*/false);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("RecflowParseCriteo")
    .Input("lines: string")
    .Input("origins: string")
    .Output("labels: float")
    .Output("dense: float")
    .Output("sparse_indices: num_sparse * int64")
    .Output("sparse_ids: num_sparse * int64")
    .Output("sparse_shapes: num_sparse * int64")
    .Output("sparse_row_splits: num_sparse * int64")
    .Output("num_skipped: int64")
    .Attr("num_dense: int >= 0 = 13")
    .Attr("num_categorical: int >= 0 = 26")
    .Attr("num_sparse: int >= 0 = 26")
    .Attr("log_transform: bool = true")
    .Attr("dense_default: float = 0")
    .Attr("id_mode: {'hex', 'hash'} = 'hex'")
    .Attr("sequence_fields: list(int) = []")
    .Attr("max_sequence_length: int >= 1 = 1024")
    .Attr("error_mode: {'skip', 'fail'} = 'skip'")
    .Attr("max_line_bytes: int >= 1 = 1048576")
    .SetShapeFn(ParseCriteoShape)
    .Doc(
        "recflow's own: parses Criteo TSV lines (label, I1..I<num_dense>, "
        "C1..C<num_categorical>,\n"
        "then one column per sequence field) into labels [B'], dense [B', "
        "num_dense] and\n"
        "per sparse feature (C1.., then H1..) a SparseTensor of ids and its "
        "row splits.\n"
        "num_sparse must be num_categorical + len(sequence_fields).");

REGISTER_OP("RecflowParseLibsvm")
    .Input("lines: string")
    .Input("origins: string")
    .Output("labels: float")
    .Output("indices: int64")
    .Output("ids: int64")
    .Output("weights: float")
    .Output("dense_shape: int64")
    .Output("row_splits: int64")
    .Output("num_skipped: int64")
    .Attr("binary_labels: bool = true")
    .Attr("error_mode: {'skip', 'fail'} = 'skip'")
    .Attr("max_line_bytes: int >= 1 = 1048576")
    .SetShapeFn(ParseLibsvmShape)
    .Doc(
        "recflow's own: parses libsvm lines (label idx:val ...) into labels "
        "[B'] and one\n"
        "weighted sparse feature: indices [nnz, 2], ids [nnz] (idx), weights "
        "[nnz] (val),\n"
        "dense_shape [2] and row_splits [B' + 1].");

REGISTER_OP("RecflowParseCsv")
    .Input("lines: string")
    .Input("origins: string")
    .Output("labels: float")
    .Output("dense: float")
    .Output("sparse_indices: num_sparse * int64")
    .Output("sparse_ids: num_sparse * int64")
    .Output("sparse_shapes: num_sparse * int64")
    .Output("sparse_row_splits: num_sparse * int64")
    .Output("num_skipped: int64")
    .Attr("column_names: list(string) >= 1")
    .Attr("column_kinds: list(string) >= 1")
    .Attr("id_types: list(string) = []")
    .Attr("multi_value_separators: list(string) = []")
    .Attr("dense_defaults: list(float) = []")
    .Attr("num_sparse: int >= 0")
    .Attr("delimiter: string = ','")
    .Attr("has_header: bool = false")
    .Attr("quoting: bool = true")
    .Attr("trim_whitespace: bool = true")
    .Attr("error_mode: {'skip', 'fail'} = 'skip'")
    .Attr("max_line_bytes: int >= 1 = 1048576")
    .SetShapeFn(ParseCsvShape)
    .Doc(
        "recflow's own: parses CSV lines with a declared schema (one kind per "
        "column:\n"
        "'label', 'dense', 'sparse' or 'ignore') into labels [B'], dense [B', "
        "dense columns]\n"
        "and per sparse column a SparseTensor of ids (Fingerprint64 of the "
        "text, or the\n"
        "int64 written) and its row splits.");

REGISTER_NO_GRADIENT_OP("RecflowParseCriteo");
REGISTER_NO_GRADIENT_OP("RecflowParseLibsvm");
REGISTER_NO_GRADIENT_OP("RecflowParseCsv");

}  // namespace recflow
