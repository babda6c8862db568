// CPU kernels of recflow's text parser ops (ops/text_parser_ops.cc):
// RecflowParseCriteo, RecflowParseLibsvm and RecflowParseCsv, each a thin
// face over a recflow/data/text_parsers.h parser built once from the attrs.
// The parser turns the lines into a data::Batch; the kernel hands its
// tensors on (no copy) and adds each sparse feature's SparseTensor indices
// [nnz, 2] and dense_shape [B', longest row] computed from the row splits.
//
// Under error_mode "skip" the parser counts dropped lines in a DataStats the
// kernel owns; the first time lines are dropped the kernel logs a warning
// with the first bad line's message, so a Python pipeline that skips lines
// does not do so silently.
#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/logging.h"
#include "recflow/data/text_parsers.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

using data::Batch;
using data::BadRecordOptions;
using data::TextParser;

absl::StatusOr<BadRecordOptions> BadRecordsFromAttrs(
    OpKernelConstruction* c, std::shared_ptr<data::DataStats> stats) {
  std::string mode;
  BadRecordOptions opts;
  RETURN_IF_ERROR(c->GetAttr("error_mode", &mode));
  RETURN_IF_ERROR(c->GetAttr("max_line_bytes", &opts.max_line_bytes));
  if (mode == "skip") {
    opts.policy.mode = data::ErrorMode::kSkip;
  } else if (mode == "fail") {
    opts.policy.mode = data::ErrorMode::kFail;
  } else {
    return errors::InvalidArgument("error_mode is '", mode,
                                   "'; expected 'skip' or 'fail'");
  }
  opts.stats = std::move(stats);
  return opts;
}

// The shared Compute: parse, then write labels, [dense,] per sparse feature
// indices / ids / [weights /] shapes / row_splits, and num_skipped.
class TextParserOp : public OpKernel {
 public:
  explicit TextParserOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES(ctx, parser_ != nullptr,
                errors::Internal("parser not initialized"));
    const Tensor& lines = ctx->input(0);
    const Tensor& origins = ctx->input(1);
    OP_REQUIRES(ctx, origins.dtype() == DT_STRING && origins.dims() <= 1,
                errors::InvalidArgument(
                    "origins must be a string vector, got ",
                    DataTypeString(origins.dtype()), " ",
                    origins.shape().DebugString()));
    const bool has_origins = origins.NumElements() > 0;
    const int64_t before = stats_->records_skipped();
    absl::StatusOr<Batch> parsed =
        parser_->ParseTensor(lines, has_origins ? &origins : nullptr);
    OP_REQUIRES_OK(ctx, parsed.status());
    Batch& batch = *parsed;
    if (stats_->records_skipped() > before &&
        !warned_.exchange(true, std::memory_order_relaxed)) {
      LOG(WARNING) << "node '" << name() << "' (" << type_string()
                   << "): skipping bad lines (error_mode 'skip'); "
                   << stats_->Summary();
    }
    const int64_t rows = batch.batch_size;
    const data::BatchSchema& schema = parser_->schema();
    const int num_sparse = static_cast<int>(schema.sparse.size());
    int out = 0;
    ctx->set_output(out++, std::move(batch.labels));
    if (has_dense_) ctx->set_output(out++, std::move(batch.dense));
    const int indices_at = out;
    const int ids_at = indices_at + num_sparse;
    const int weights_at = ids_at + num_sparse;
    const int shapes_at = weights_at + (weighted_ ? 1 : 0);
    const int splits_at = shapes_at + num_sparse;
    for (int f = 0; f < num_sparse; ++f) {
      data::SparseBatch& s = batch.sparse[f];
      const int64_t nnz = s.ids.NumElements();
      const int64_t* splits = s.row_splits.data<int64_t>();
      Tensor* indices = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(indices_at + f,
                                               TensorShape({nnz, 2}), &indices));
      int64_t* ind = indices->data<int64_t>();
      int64_t longest = 0;
      for (int64_t b = 0; b < rows; ++b) {
        longest = std::max(longest, splits[b + 1] - splits[b]);
        for (int64_t j = splits[b]; j < splits[b + 1]; ++j) {
          ind[2 * j] = b;
          ind[2 * j + 1] = j - splits[b];
        }
      }
      Tensor* shape = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(shapes_at + f,
                                               TensorShape({2}), &shape));
      shape->data<int64_t>()[0] = rows;
      shape->data<int64_t>()[1] = longest;
      ctx->set_output(ids_at + f, std::move(s.ids));
      if (weighted_) ctx->set_output(weights_at, std::move(s.weights));
      ctx->set_output(splits_at + f, std::move(s.row_splits));
    }
    Tensor* skipped = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(splits_at + num_sparse,
                                             TensorShape({}), &skipped));
    skipped->data<int64_t>()[0] = lines.NumElements() - rows;
  }

 protected:
  std::shared_ptr<const TextParser> parser_;
  std::shared_ptr<data::DataStats> stats_ = std::make_shared<data::DataStats>();
  bool has_dense_ = true;
  bool weighted_ = false;  // libsvm: one weighted feature

 private:
  std::atomic<bool> warned_{false};
};

class ParseCriteoOp : public TextParserOp {
 public:
  explicit ParseCriteoOp(OpKernelConstruction* c) : TextParserOp(c) {
    absl::Status s = Init(c);
    if (!s.ok()) c->SetStatus(s);
  }

 private:
  absl::Status Init(OpKernelConstruction* c) {
    data::CriteoOptions o;
    int64_t num_dense, num_categorical, num_sparse;
    std::string id_mode;
    std::vector<int64_t> sequence_fields;
    RETURN_IF_ERROR(c->GetAttr("num_dense", &num_dense));
    RETURN_IF_ERROR(c->GetAttr("num_categorical", &num_categorical));
    RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
    RETURN_IF_ERROR(c->GetAttr("log_transform", &o.log_transform));
    RETURN_IF_ERROR(c->GetAttr("dense_default", &o.dense_default));
    RETURN_IF_ERROR(c->GetAttr("id_mode", &id_mode));
    RETURN_IF_ERROR(c->GetAttr("sequence_fields", &sequence_fields));
    RETURN_IF_ERROR(c->GetAttr("max_sequence_length", &o.max_sequence_length));
    ASSIGN_OR_RETURN(o.bad_records, BadRecordsFromAttrs(c, stats_));
    o.num_dense = static_cast<int>(num_dense);
    o.num_categorical = static_cast<int>(num_categorical);
    o.id_mode = id_mode == "hash" ? data::CriteoOptions::IdMode::kHash
                                  : data::CriteoOptions::IdMode::kHex;
    for (int64_t f : sequence_fields) {
      o.sequence_fields.push_back(static_cast<int>(f));
    }
    if (num_sparse != num_categorical +
                          static_cast<int64_t>(sequence_fields.size())) {
      return errors::InvalidArgument(
          "num_sparse is ", num_sparse,
          " but num_categorical + len(sequence_fields) is ",
          num_categorical + sequence_fields.size());
    }
    ASSIGN_OR_RETURN(auto parser, data::CriteoParser::Create(std::move(o)));
    parser_ = std::move(parser);
    return absl::OkStatus();
  }
};

class ParseLibsvmOp : public TextParserOp {
 public:
  explicit ParseLibsvmOp(OpKernelConstruction* c) : TextParserOp(c) {
    has_dense_ = false;
    weighted_ = true;
    absl::Status s = Init(c);
    if (!s.ok()) c->SetStatus(s);
  }

 private:
  absl::Status Init(OpKernelConstruction* c) {
    data::LibsvmOptions o;
    RETURN_IF_ERROR(c->GetAttr("binary_labels", &o.binary_labels));
    ASSIGN_OR_RETURN(o.bad_records, BadRecordsFromAttrs(c, stats_));
    ASSIGN_OR_RETURN(auto parser, data::LibsvmParser::Create(std::move(o)));
    parser_ = std::move(parser);
    return absl::OkStatus();
  }
};

class ParseCsvOp : public TextParserOp {
 public:
  explicit ParseCsvOp(OpKernelConstruction* c) : TextParserOp(c) {
    absl::Status s = Init(c);
    if (!s.ok()) c->SetStatus(s);
  }

 private:
  absl::Status Init(OpKernelConstruction* c) {
    std::vector<std::string> names, kinds, id_types, separators;
    std::vector<float> defaults;
    std::string delimiter;
    int64_t num_sparse;
    data::CsvOptions o;
    RETURN_IF_ERROR(c->GetAttr("column_names", &names));
    RETURN_IF_ERROR(c->GetAttr("column_kinds", &kinds));
    RETURN_IF_ERROR(c->GetAttr("id_types", &id_types));
    RETURN_IF_ERROR(c->GetAttr("multi_value_separators", &separators));
    RETURN_IF_ERROR(c->GetAttr("dense_defaults", &defaults));
    RETURN_IF_ERROR(c->GetAttr("delimiter", &delimiter));
    RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse));
    RETURN_IF_ERROR(c->GetAttr("has_header", &o.has_header));
    RETURN_IF_ERROR(c->GetAttr("quoting", &o.quoting));
    RETURN_IF_ERROR(c->GetAttr("trim_whitespace", &o.trim_whitespace));
    ASSIGN_OR_RETURN(o.bad_records, BadRecordsFromAttrs(c, stats_));
    const size_t n = names.size();
    auto sized = [n](size_t size) { return size == 0 || size == n; };
    if (kinds.size() != n || !sized(id_types.size()) ||
        !sized(separators.size()) || !sized(defaults.size())) {
      return errors::InvalidArgument(
          "column_kinds, id_types, multi_value_separators and dense_defaults "
          "must have one entry per column (",
          n, ")");
    }
    if (delimiter.size() != 1) {
      return errors::InvalidArgument("delimiter must be one character, got '",
                                     delimiter, "'");
    }
    o.delimiter = delimiter[0];
    int64_t sparse = 0;
    for (size_t i = 0; i < n; ++i) {
      data::CsvColumn col;
      col.name = names[i];
      using Kind = data::CsvColumn::Kind;
      if (kinds[i] == "label") {
        col.kind = Kind::kLabel;
      } else if (kinds[i] == "dense") {
        col.kind = Kind::kDense;
      } else if (kinds[i] == "sparse") {
        col.kind = Kind::kSparse;
        ++sparse;
      } else if (kinds[i] == "ignore") {
        col.kind = Kind::kIgnore;
      } else {
        return errors::InvalidArgument("column '", names[i], "' has kind '",
                                       kinds[i],
                                       "'; expected label, dense, sparse or "
                                       "ignore");
      }
      if (!id_types.empty()) {
        if (id_types[i] == "int64") {
          col.id_type = data::CsvColumn::IdType::kInt64;
        } else if (id_types[i] != "string") {
          return errors::InvalidArgument("column '", names[i],
                                         "' has id type '", id_types[i],
                                         "'; expected string or int64");
        }
      }
      if (!separators.empty()) {
        if (separators[i].size() > 1) {
          return errors::InvalidArgument(
              "column '", names[i], "' has multi-value separator '",
              separators[i], "'; expected one character or none");
        }
        col.multi_value_separator =
            separators[i].empty() ? '\0' : separators[i][0];
      }
      if (!defaults.empty()) col.default_value = defaults[i];
      o.columns.push_back(std::move(col));
    }
    if (sparse != num_sparse) {
      return errors::InvalidArgument("num_sparse is ", num_sparse, " but ",
                                     sparse, " columns are sparse");
    }
    ASSIGN_OR_RETURN(auto parser, data::CsvParser::Create(std::move(o)));
    parser_ = std::move(parser);
    return absl::OkStatus();
  }
};

REGISTER_KERNEL_BUILDER(Name("RecflowParseCriteo").Device(DEVICE_CPU),
                        ParseCriteoOp);
REGISTER_KERNEL_BUILDER(Name("RecflowParseLibsvm").Device(DEVICE_CPU),
                        ParseLibsvmOp);
REGISTER_KERNEL_BUILDER(Name("RecflowParseCsv").Device(DEVICE_CPU),
                        ParseCsvOp);

}  // namespace
}  // namespace recflow
