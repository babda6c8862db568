// CPU kernels of the tf.Example parsing ops (ops/parsing_ops.cc):
// ParseExample, ParseSingleExample and ParseExampleV2, over
// recflow/data/example_parser.h.
//
// Keys and defaults are inputs (constants in practice), so the parser is
// built per run; that costs a few hundred nanoseconds per feature, far less
// than parsing a batch. Errors name the node, the example (and its name when
// `names` is given), the feature key and the problem.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/data/example_parser.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

using data::DenseFeature;
using data::ExampleParser;
using data::ExampleSpec;
using data::ParsedExamples;
using data::VarLenFeature;

// What to parse, gathered from the attrs and the key / default inputs.
struct ParseConfig {
  std::vector<std::string> sparse_keys;
  std::vector<DataType> sparse_types;
  std::vector<std::string> dense_keys;
  std::vector<DataType> dense_types;
  std::vector<PartialShape> dense_shapes;
  std::vector<Tensor> dense_defaults;
  std::vector<std::string> ragged_keys;
  std::vector<DataType> ragged_value_types;
  std::vector<DataType> ragged_split_types;
};

// Output positions of each group.
struct OutputLayout {
  int sparse_indices = 0, sparse_values = 0, sparse_shapes = 0, dense = 0;
  int ragged_values = 0, ragged_splits = 0;
};

template <typename T>
void FillValue(Tensor* t, int64_t begin, int64_t end, const T& v) {
  T* p = t->data<T>();
  for (int64_t i = begin; i < end; ++i) p[i] = v;
}

// Copies values [src, src + n) of `from` to [dst, dst + n) of `to`.
void CopyValues(const Tensor& from, int64_t src, Tensor* to, int64_t dst,
                int64_t n) {
  if (n <= 0) return;
  switch (from.dtype()) {
    case DT_INT64:
      std::memcpy(to->data<int64_t>() + dst, from.data<int64_t>() + src,
                  n * sizeof(int64_t));
      break;
    case DT_FLOAT:
      std::memcpy(to->data<float>() + dst, from.data<float>() + src,
                  n * sizeof(float));
      break;
    default:
      for (int64_t i = 0; i < n; ++i) {
        to->data<std::string>()[dst + i] = from.data<std::string>()[src + i];
      }
  }
}

// Parses and sets the outputs. `scalar`: serialized is one Example (V2).
absl::Status ParseAndOutput(OpKernelContext* ctx, const Tensor& serialized,
                            const Tensor& names, const ParseConfig& cfg,
                            const OutputLayout& layout, bool scalar) {
  // The executor puts "node '<name>' (<op>): " in front of kernel errors.
  auto fail = [](const absl::Status& s) { return s; };
  ExampleSpec spec;
  std::vector<int> dense_var_len(cfg.dense_keys.size(),
                                 -1);  // index into var_len
  std::vector<int> dense_fixed(cfg.dense_keys.size(), -1);  // index into dense
  for (size_t i = 0; i < cfg.sparse_keys.size(); ++i) {
    spec.var_len.push_back(
        VarLenFeature{cfg.sparse_keys[i], cfg.sparse_types[i]});
  }
  for (size_t d = 0; d < cfg.dense_keys.size(); ++d) {
    const PartialShape& shape = cfg.dense_shapes[d];
    const Tensor& def = cfg.dense_defaults[d];
    if (def.dtype() != cfg.dense_types[d]) {
      return fail(errors::InvalidArgument(
          "dense_defaults[", d, "] is ", DataTypeString(def.dtype()),
          " but Tdense[", d, "] is ", DataTypeString(cfg.dense_types[d])));
    }
    const bool variable = shape.rank() >= 1 && shape.dim(0) < 0;
    if (variable) {
      if (def.NumElements() > 1) {
        return fail(errors::InvalidArgument(
            "dense feature '", cfg.dense_keys[d],
            "' has variable length (shape ", shape.DebugString(),
            "); its default is the padding value and must have at "
            "most one element, got ",
            def.shape().DebugString()));
      }
      dense_var_len[d] = static_cast<int>(spec.var_len.size());
      spec.var_len.push_back(
          VarLenFeature{cfg.dense_keys[d], cfg.dense_types[d]});
      continue;
    }
    DenseFeature f;
    f.key = cfg.dense_keys[d];
    f.dtype = cfg.dense_types[d];
    f.shape = shape.ToTensorShape();
    if (def.NumElements() > 0) {
      if (def.NumElements() != f.shape.num_elements()) {
        return fail(errors::InvalidArgument(
            "dense_defaults[", d, "] for feature '", f.key, "' has shape ",
            def.shape().DebugString(), " but dense_shapes[", d, "] is ",
            shape.DebugString()));
      }
      f.default_value = def;
    }
    dense_fixed[d] = static_cast<int>(spec.dense.size());
    spec.dense.push_back(std::move(f));
  }
  const size_t ragged_start = spec.var_len.size();
  for (size_t k = 0; k < cfg.ragged_keys.size(); ++k) {
    spec.var_len.push_back(
        VarLenFeature{cfg.ragged_keys[k], cfg.ragged_value_types[k]});
  }
  auto parser = ExampleParser::Create(std::move(spec));
  if (!parser.ok()) return fail(parser.status());

  auto records = data::StringViews(serialized, "serialized");
  if (!records.ok()) return fail(records.status());
  std::vector<absl::string_view> name_views;
  if (names.NumElements() > 0) {
    if (names.dtype() != DT_STRING || names.shape() != serialized.shape()) {
      return fail(errors::InvalidArgument("names ", names.shape().DebugString(),
                                          " must be empty or match serialized ",
                                          serialized.shape().DebugString()));
    }
    auto v = data::StringViews(names, "names");
    if (!v.ok()) return fail(v.status());
    name_views = std::move(*v);
  }
  absl::StatusOr<ParsedExamples> parsed =
      (*parser)->Parse(*records, name_views, ctx->intra_op_pool());
  if (!parsed.ok()) return fail(parsed.status());
  const int64_t batch = parsed->batch_size;

  // Sparse: indices [nnz, rank + 1], values, dense_shape.
  for (size_t i = 0; i < cfg.sparse_keys.size(); ++i) {
    ParsedExamples::VarLen& v = parsed->var_len[i];
    const int64_t nnz = v.values.NumElements();
    const int64_t* splits = v.row_splits.data<int64_t>();
    int64_t longest = 0;
    for (int64_t b = 0; b < batch; ++b)
      longest = std::max(longest, splits[b + 1] - splits[b]);
    const int64_t cols = scalar ? 1 : 2;
    Tensor* indices = nullptr;
    RETURN_IF_ERROR(ctx->allocate_output(layout.sparse_indices + i,
                                         TensorShape({nnz, cols}), &indices));
    int64_t* ind = indices->data<int64_t>();
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = splits[b]; j < splits[b + 1]; ++j) {
        if (scalar) {
          ind[j] = j;
        } else {
          ind[2 * j] = b;
          ind[2 * j + 1] = j - splits[b];
        }
      }
    }
    ctx->set_output(layout.sparse_values + i, std::move(v.values));
    Tensor* shape = nullptr;
    RETURN_IF_ERROR(ctx->allocate_output(layout.sparse_shapes + i,
                                         TensorShape({cols}), &shape));
    if (scalar) {
      shape->data<int64_t>()[0] = longest;
    } else {
      shape->data<int64_t>()[0] = batch;
      shape->data<int64_t>()[1] = longest;
    }
  }

  // Dense: fixed ones as parsed; variable-length ones padded.
  for (size_t d = 0; d < cfg.dense_keys.size(); ++d) {
    const int out = layout.dense + static_cast<int>(d);
    if (dense_fixed[d] >= 0) {
      Tensor t = std::move(parsed->dense[dense_fixed[d]]);
      if (scalar) {
        auto r = t.Reshaped(cfg.dense_shapes[d].ToTensorShape());
        if (!r.ok()) return fail(r.status());
        t = *r;
      }
      ctx->set_output(out, std::move(t));
      continue;
    }
    const ParsedExamples::VarLen& v = parsed->var_len[dense_var_len[d]];
    const PartialShape& ds = cfg.dense_shapes[d];
    int64_t inner = 1;
    for (int i = 1; i < ds.rank(); ++i) inner *= ds.dim(i);
    const int64_t* splits = v.row_splits.data<int64_t>();
    int64_t rows = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = splits[b + 1] - splits[b];
      if (inner == 0 ? n != 0 : n % inner != 0) {
        return fail(errors::InvalidArgument(
            "example ", b, ", feature '", cfg.dense_keys[d], "': ", n,
            " values do not fill whole rows of shape ", ds.DebugString(), " (",
            inner, " values per row) [wrong_length]"));
      }
      if (inner > 0) rows = std::max(rows, n / inner);
    }
    TensorShape shape;
    if (!scalar) shape.AddDim(batch);
    shape.AddDim(rows);
    for (int i = 1; i < ds.rank(); ++i) shape.AddDim(ds.dim(i));
    Tensor* t = nullptr;
    RETURN_IF_ERROR(ctx->allocate_output(out, shape, &t));
    const Tensor& def = cfg.dense_defaults[d];
    const int64_t per_example = rows * inner;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = splits[b + 1] - splits[b];
      CopyValues(v.values, splits[b], t, b * per_example, n);
      const int64_t begin = b * per_example + n, end = (b + 1) * per_example;
      switch (t->dtype()) {
        case DT_INT64:
          FillValue<int64_t>(t, begin, end,
                             def.NumElements() ? def.data<int64_t>()[0] : 0);
          break;
        case DT_FLOAT:
          FillValue<float>(t, begin, end,
                           def.NumElements() ? def.data<float>()[0] : 0.f);
          break;
        default:
          FillValue<std::string>(
              t, begin, end,
              def.NumElements() ? def.data<std::string>()[0] : "");
      }
    }
  }

  // Ragged: values and row splits (int32 or int64).
  for (size_t k = 0; k < cfg.ragged_keys.size(); ++k) {
    ParsedExamples::VarLen& v = parsed->var_len[ragged_start + k];
    ctx->set_output(layout.ragged_values + static_cast<int>(k),
                    std::move(v.values));
    const int out = layout.ragged_splits + static_cast<int>(k);
    const int64_t* splits = v.row_splits.data<int64_t>();
    const int64_t n = v.row_splits.NumElements();
    Tensor* t = nullptr;
    RETURN_IF_ERROR(ctx->allocate_output(out, TensorShape({n}), &t));
    if (cfg.ragged_split_types[k] == DT_INT32) {
      if (splits[n - 1] > INT32_MAX) {
        return fail(errors::InvalidArgument(
            "ragged feature '", cfg.ragged_keys[k], "' has ", splits[n - 1],
            " values, too many for int32 "
            "row splits"));
      }
      for (int64_t i = 0; i < n; ++i)
        t->data<int32_t>()[i] = static_cast<int32_t>(splits[i]);
    } else {
      std::memcpy(t->data<int64_t>(), splits, n * sizeof(int64_t));
    }
  }
  return absl::OkStatus();
}

std::string KeyOf(const Tensor& t) {
  return t.NumElements() == 1 ? t.flat<std::string>()[0] : std::string();
}

class ParseExampleOp : public OpKernel {
 public:
  explicit ParseExampleOp(OpKernelConstruction* c) : OpKernel(c) {
    int64_t ns = 0, nd = 0;
    auto attrs = [&]() -> absl::Status {
      RETURN_IF_ERROR(c->GetAttr("Nsparse", &ns));
      RETURN_IF_ERROR(c->GetAttr("Ndense", &nd));
      RETURN_IF_ERROR(c->GetAttr("sparse_types", &cfg_.sparse_types));
      RETURN_IF_ERROR(c->GetAttr("Tdense", &cfg_.dense_types));
      RETURN_IF_ERROR(c->GetAttr("dense_shapes", &cfg_.dense_shapes));
      if (static_cast<int64_t>(cfg_.sparse_types.size()) != ns ||
          static_cast<int64_t>(cfg_.dense_types.size()) != nd ||
          static_cast<int64_t>(cfg_.dense_shapes.size()) != nd) {
        return errors::InvalidArgument(
            "Nsparse ", ns, " / len(sparse_types) ", cfg_.sparse_types.size(),
            ", Ndense ", nd, " / len(Tdense) ", cfg_.dense_types.size(),
            " / len(dense_shapes) ", cfg_.dense_shapes.size(), " disagree");
      }
      for (const PartialShape& s : cfg_.dense_shapes) {
        for (int d = s.unknown_rank() ? 0 : 1; d < std::max(s.rank(), 1); ++d) {
          if (s.unknown_rank() || s.dim(d) < 0) {
            return errors::InvalidArgument("dense shape ", s.DebugString(),
                                           " may only have an unknown "
                                           "first dimension");
          }
        }
      }
      return absl::OkStatus();
    };
    absl::Status s = attrs();
    if (!s.ok()) c->SetStatus(s);
    num_sparse_ = static_cast<int>(ns);
    num_dense_ = static_cast<int>(nd);
    layout_.sparse_indices = 0;
    layout_.sparse_values = num_sparse_;
    layout_.sparse_shapes = 2 * num_sparse_;
    layout_.dense = 3 * num_sparse_;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    OP_REQUIRES(ctx, serialized.dims() == 1,
                errors::InvalidArgument("serialized must be a vector, got ",
                                        serialized.shape().DebugString()));
    ParseConfig cfg = cfg_;
    for (int i = 0; i < num_sparse_ + num_dense_; ++i) {
      const Tensor& k = ctx->input(2 + i);
      OP_REQUIRES(
          ctx, k.dtype() == DT_STRING && k.NumElements() == 1,
          errors::InvalidArgument("key ", i, " must be a string scalar, got ",
                                  k.shape().DebugString()));
      (i < num_sparse_ ? cfg.sparse_keys : cfg.dense_keys).push_back(KeyOf(k));
    }
    for (int d = 0; d < num_dense_; ++d) {
      cfg.dense_defaults.push_back(
          ctx->input(2 + num_sparse_ + num_dense_ + d));
    }
    OP_REQUIRES_OK(ctx,
                   ParseAndOutput(ctx, serialized, ctx->input(1), cfg, layout_,
                                  /*scalar=*/false));
  }

 private:
  ParseConfig cfg_;  // without keys and defaults
  int num_sparse_ = 0, num_dense_ = 0;
  OutputLayout layout_;
};

class ParseExampleV2Op : public OpKernel {
 public:
  explicit ParseExampleV2Op(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = [&]() -> absl::Status {
      RETURN_IF_ERROR(c->GetAttr("num_sparse", &num_sparse_));
      RETURN_IF_ERROR(c->GetAttr("sparse_types", &cfg_.sparse_types));
      RETURN_IF_ERROR(c->GetAttr("Tdense", &cfg_.dense_types));
      RETURN_IF_ERROR(c->GetAttr("dense_shapes", &cfg_.dense_shapes));
      RETURN_IF_ERROR(
          c->GetAttr("ragged_value_types", &cfg_.ragged_value_types));
      RETURN_IF_ERROR(
          c->GetAttr("ragged_split_types", &cfg_.ragged_split_types));
      if (static_cast<int64_t>(cfg_.sparse_types.size()) != num_sparse_ ||
          cfg_.dense_types.size() != cfg_.dense_shapes.size() ||
          cfg_.ragged_value_types.size() != cfg_.ragged_split_types.size()) {
        return errors::InvalidArgument("the list attrs' lengths disagree");
      }
      for (const PartialShape& s : cfg_.dense_shapes) {
        for (int d = s.unknown_rank() ? 0 : 1; d < std::max(s.rank(), 1); ++d) {
          if (s.unknown_rank() || s.dim(d) < 0) {
            return errors::InvalidArgument("dense shape ", s.DebugString(),
                                           " may only have an unknown "
                                           "first dimension");
          }
        }
      }
      return absl::OkStatus();
    };
    absl::Status s = attrs();
    if (!s.ok()) c->SetStatus(s);
    const int ns = static_cast<int>(num_sparse_);
    const int nd = static_cast<int>(cfg_.dense_types.size());
    const int nr = static_cast<int>(cfg_.ragged_value_types.size());
    layout_.sparse_indices = 0;
    layout_.sparse_values = ns;
    layout_.sparse_shapes = 2 * ns;
    layout_.dense = 3 * ns;
    layout_.ragged_values = 3 * ns + nd;
    layout_.ragged_splits = 3 * ns + nd + nr;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    OP_REQUIRES(
        ctx, serialized.dims() <= 1,
        errors::InvalidArgument("serialized must be a scalar or a vector, got ",
                                serialized.shape().DebugString()));
    ParseConfig cfg = cfg_;
    const size_t counts[] = {static_cast<size_t>(num_sparse_),
                             cfg.dense_types.size(),
                             cfg.ragged_value_types.size()};
    std::vector<std::string>* dst[] = {&cfg.sparse_keys, &cfg.dense_keys,
                                       &cfg.ragged_keys};
    const char* what[] = {"sparse_keys", "dense_keys", "ragged_keys"};
    for (int k = 0; k < 3; ++k) {
      const Tensor& keys = ctx->input(2 + k);
      OP_REQUIRES(ctx,
                  keys.dtype() == DT_STRING && keys.dims() == 1 &&
                      static_cast<size_t>(keys.NumElements()) == counts[k],
                  errors::InvalidArgument(
                      "", what[k], " must be a string vector of ", counts[k],
                      " keys, got ", keys.shape().DebugString()));
      dst[k]->assign(keys.flat<std::string>().begin(),
                     keys.flat<std::string>().end());
    }
    for (size_t d = 0; d < cfg.dense_types.size(); ++d) {
      cfg.dense_defaults.push_back(ctx->input(5 + static_cast<int>(d)));
    }
    OP_REQUIRES_OK(ctx,
                   ParseAndOutput(ctx, serialized, ctx->input(1), cfg, layout_,
                                  /*scalar=*/serialized.dims() == 0));
  }

 private:
  ParseConfig cfg_;
  int64_t num_sparse_ = 0;
  OutputLayout layout_;
};

// Keys are attrs here; serialized is one Example (a scalar).
class ParseSingleExampleOp : public OpKernel {
 public:
  explicit ParseSingleExampleOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = [&]() -> absl::Status {
      RETURN_IF_ERROR(c->GetAttr("sparse_keys", &cfg_.sparse_keys));
      RETURN_IF_ERROR(c->GetAttr("dense_keys", &cfg_.dense_keys));
      RETURN_IF_ERROR(c->GetAttr("sparse_types", &cfg_.sparse_types));
      RETURN_IF_ERROR(c->GetAttr("Tdense", &cfg_.dense_types));
      RETURN_IF_ERROR(c->GetAttr("dense_shapes", &cfg_.dense_shapes));
      if (cfg_.sparse_keys.size() != cfg_.sparse_types.size() ||
          cfg_.dense_keys.size() != cfg_.dense_types.size() ||
          cfg_.dense_keys.size() != cfg_.dense_shapes.size()) {
        return errors::InvalidArgument(
            "len(sparse_keys) ", cfg_.sparse_keys.size(),
            " / len(sparse_types) ", cfg_.sparse_types.size(),
            ", len(dense_keys) ", cfg_.dense_keys.size(), " / len(Tdense) ",
            cfg_.dense_types.size(), " / len(dense_shapes) ",
            cfg_.dense_shapes.size(), " disagree");
      }
      for (const PartialShape& s : cfg_.dense_shapes) {
        for (int d = s.unknown_rank() ? 0 : 1; d < std::max(s.rank(), 1); ++d) {
          if (s.unknown_rank() || s.dim(d) < 0) {
            return errors::InvalidArgument("dense shape ", s.DebugString(),
                                           " may only have an unknown "
                                           "first dimension");
          }
        }
      }
      return absl::OkStatus();
    };
    absl::Status s = attrs();
    if (!s.ok()) c->SetStatus(s);
    const int ns = static_cast<int>(cfg_.sparse_keys.size());
    layout_.sparse_indices = 0;
    layout_.sparse_values = ns;
    layout_.sparse_shapes = 2 * ns;
    layout_.dense = 3 * ns;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& serialized = ctx->input(0);
    OP_REQUIRES(ctx, serialized.dims() == 0,
                errors::InvalidArgument("serialized must be a scalar, got ",
                                        serialized.shape().DebugString()));
    ParseConfig cfg = cfg_;
    for (size_t d = 0; d < cfg.dense_keys.size(); ++d) {
      cfg.dense_defaults.push_back(ctx->input(1 + static_cast<int>(d)));
    }
    OP_REQUIRES_OK(ctx, ParseAndOutput(ctx, serialized, no_names_, cfg, layout_,
                                       /*scalar=*/true));
  }

 private:
  ParseConfig cfg_;  // without defaults
  OutputLayout layout_;
  const Tensor no_names_{DT_STRING, TensorShape({0})};
};

REGISTER_KERNEL_BUILDER(Name("ParseExample").Device(DEVICE_CPU),
                        ParseExampleOp);
REGISTER_KERNEL_BUILDER(Name("ParseSingleExample").Device(DEVICE_CPU),
                        ParseSingleExampleOp);
REGISTER_KERNEL_BUILDER(Name("ParseExampleV2").Device(DEVICE_CPU),
                        ParseExampleV2Op);

}  // namespace
}  // namespace recflow
