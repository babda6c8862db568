// CPU kernels of the lookup table ops (ops/lookup_ops.cc) over LookupTable
// (lookup_table.h) resources in the session's ResourceMgr.
//
// HashTableV2 finds or creates its table at (container attr or the
// manager's default, shared_name or else the node's name) and outputs a
// handle to it. TensorFlow gives a table with no shared_name and
// use_node_name_sharing false a name private to the kernel instance; within
// one session that is the same as the node's name, which recflow uses, so
// the initializer and the lookups of one graph always meet.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "recflow/core/env.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/kernels/lookup_table.h"

namespace recflow {
namespace {

// TensorFlow's kLineNumber and kWholeLine (lookup_util.h).
constexpr int64_t kLineNumber = -2;
constexpr int64_t kWholeLine = -1;

class HashTableOp : public OpKernel {
 public:
  explicit HashTableOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("key_dtype", &key_dtype_));
    c->SetStatus(c->GetAttr("value_dtype", &value_dtype_));
    ResourceLocation where = NodeResourceLocation(c->def(), c->resource_manager()->default_container());
    container_ = std::move(where.container);
    table_name_ = std::move(where.name);
    device_ = c->device()->name();
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    auto table = ctx->resource_manager()->LookupOrCreate<LookupTable>(
        container_, table_name_, [this]() { return LookupTable::Create(key_dtype_, value_dtype_); });
    OP_REQUIRES_OK(ctx, errors::Annotate(table.status(), absl::StrCat("HashTableV2 '", name(), "'")));
    OP_REQUIRES(ctx, (*table)->key_dtype() == key_dtype_ && (*table)->value_dtype() == value_dtype_,
                errors::InvalidArgument("HashTableV2 '", name(), "': table '", table_name_,
                                        "' exists as ", (*table)->DebugString(),
                                        "; this node declares ", DataTypeString(key_dtype_), " -> ",
                                        DataTypeString(value_dtype_)));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    ResourceHandle handle(device_, container_, table_name_, ResourceMgr::TypeName<LookupTable>());
    handle.set_resource(*std::move(table));
    out->scalar<ResourceHandle>() = std::move(handle);
  }

 private:
  DataType key_dtype_ = DT_INVALID;
  DataType value_dtype_ = DT_INVALID;
  std::string container_;
  std::string table_name_;
  std::string device_;
};

absl::StatusOr<std::shared_ptr<LookupTable>> TableFromHandle(OpKernelContext* ctx) {
  const Tensor& t = ctx->input(0);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return errors::InvalidArgument("expected a scalar table handle, got ", t.DebugString());
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  if (h.resource() != nullptr) {
    auto table = std::dynamic_pointer_cast<LookupTable>(h.resource());
    if (table == nullptr) {
      return errors::InvalidArgument("resource ", h.DebugString(), " is not a lookup table");
    }
    return table;
  }
  return ctx->resource_manager()->Lookup<LookupTable>(h.container(), h.name());
}

// InitializeTableV2 and LookupTableImportV2 (a HashTable imports by
// initializing, as TensorFlow's InitializableLookupTable::ImportValues).
class InitializeTableOp : public OpKernel {
 public:
  explicit InitializeTableOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    auto table = TableFromHandle(ctx);
    OP_REQUIRES_OK(ctx, table.status());
    OP_REQUIRES_OK(ctx, errors::Annotate((*table)->Initialize(ctx->input(1), ctx->input(2)),
                                         absl::StrCat(type_string(), " '", name(), "'")));
  }
};

class LookupTableFindOp : public OpKernel {
 public:
  explicit LookupTableFindOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    auto table = TableFromHandle(ctx);
    OP_REQUIRES_OK(ctx, table.status());
    auto out = (*table)->Find(ctx->input(1), ctx->input(2));
    OP_REQUIRES_OK(ctx, errors::Annotate(out.status(),
                                         absl::StrCat("LookupTableFindV2 '", name(), "'")));
    ctx->set_output(0, *std::move(out));
  }
};

class LookupTableSizeOp : public OpKernel {
 public:
  explicit LookupTableSizeOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto table = TableFromHandle(ctx);
    OP_REQUIRES_OK(ctx, table.status());
    ctx->set_output(0, Tensor::Scalar<int64_t>((*table)->size()));
  }
};

// One field of a vocabulary line as a `dtype` element of out[i].
absl::Status SetField(absl::string_view token, int64_t line, const std::string& file,
                      int64_t i, Tensor* out) {
  auto bad = [&](absl::string_view type) {
    return errors::InvalidArgument("Field ", token, " in line ", line, " of ", file,
                                   " is not a valid ", type, ".");
  };
  switch (out->dtype()) {
    case DT_INT32:
      if (!absl::SimpleAtoi(token, &out->data<int32_t>()[i])) return bad("int32");
      return absl::OkStatus();
    case DT_INT64:
      if (!absl::SimpleAtoi(token, &out->data<int64_t>()[i])) return bad("int64");
      return absl::OkStatus();
    case DT_FLOAT:
      if (!absl::SimpleAtof(token, &out->data<float>()[i])) return bad("float");
      return absl::OkStatus();
    case DT_DOUBLE:
      if (!absl::SimpleAtod(token, &out->data<double>()[i])) return bad("double");
      return absl::OkStatus();
    case DT_STRING:
      out->data<std::string>()[i] = std::string(token);
      return absl::OkStatus();
    default:
      return errors::InvalidArgument("Data type ", DataTypeString(out->dtype()),
                                     " not supported.");
  }
}

// TensorFlow's InitializeTableFromTextFile (lookup_util.cc) and its
// TextFileLineIterator: the file's entries as two vectors.
absl::Status ReadVocabulary(const std::string& file, int64_t vocab_size, char delimiter,
                            int64_t key_index, int64_t value_index, int64_t offset,
                            DataType key_dtype, DataType value_dtype, Tensor* keys,
                            Tensor* values) {
  if (key_index == kLineNumber && key_dtype != DT_INT64) {
    return errors::InvalidArgument(
        "Key index for line number requires table key dtype of int64, got ",
        DataTypeString(key_dtype));
  }
  if (key_index == kWholeLine && !DataTypeIsInteger(key_dtype) && key_dtype != DT_STRING) {
    return errors::InvalidArgument(
        "Key index for whole line requires string or integer table key, got ",
        DataTypeString(key_dtype));
  }
  if (value_index == kLineNumber && value_dtype != DT_INT64) {
    return errors::InvalidArgument(
        "Value index for line number requires table value dtype of int64, got ",
        DataTypeString(value_dtype));
  }
  if (value_index == kWholeLine && !DataTypeIsInteger(value_dtype) && value_dtype != DT_STRING) {
    return errors::InvalidArgument(
        "Value index for whole line requires string or integer table value, got ",
        DataTypeString(value_dtype));
  }
  std::string contents;
  RETURN_IF_ERROR(ReadFileToString(Env::Default(), file, &contents));
  std::vector<absl::string_view> lines = absl::StrSplit(contents, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();  // the final newline
  int64_t n = static_cast<int64_t>(lines.size());
  if (vocab_size != -1) {
    if (n < vocab_size) {
      return errors::InvalidArgument("Invalid vocab_size in ", file, ": expected ", vocab_size,
                                     " but got ", n);
    }
    n = vocab_size;
  }
  ASSIGN_OR_RETURN(*keys, Tensor::Create(key_dtype, TensorShape({n})));
  ASSIGN_OR_RETURN(*values, Tensor::Create(value_dtype, TensorShape({n})));
  const bool whole_line_only = (key_index == kWholeLine && value_index == kLineNumber) ||
                               (key_index == kLineNumber && value_index == kWholeLine);
  for (int64_t i = 0; i < n; ++i) {
    absl::string_view line = lines[i];
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      return errors::InvalidArgument("Invalid content in ", file, ": empty line found at line ",
                                     i, ".");
    }
    std::vector<absl::string_view> tokens;
    if (whole_line_only) {
      tokens.push_back(line);
    } else {
      tokens = absl::StrSplit(line, delimiter);
    }
    const int64_t max_index = std::max(key_index, value_index);
    if (max_index >= static_cast<int64_t>(tokens.size())) {
      return errors::InvalidArgument("Invalid number of columns in ", file, " line ", i, " (",
                                     line, ") : expected ", max_index, " got ", tokens.size());
    }
    for (auto [index, out] : {std::pair<int64_t, Tensor*>{key_index, keys},
                              std::pair<int64_t, Tensor*>{value_index, values}}) {
      if (index == kLineNumber) {
        out->data<int64_t>()[i] = i + offset;
        continue;
      }
      RETURN_IF_ERROR(SetField(index == kWholeLine ? line : tokens[index], i, file, i, out));
    }
  }
  return absl::OkStatus();
}

class InitializeTableFromTextFileOp : public OpKernel {
 public:
  explicit InitializeTableFromTextFileOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string delimiter;
    c->SetStatus(c->GetAttr("vocab_size", &vocab_size_));
    c->SetStatus(c->GetAttr("key_index", &key_index_));
    c->SetStatus(c->GetAttr("value_index", &value_index_));
    c->SetStatus(c->GetAttr("offset", &offset_));
    c->SetStatus(c->GetAttr("delimiter", &delimiter));
    if (delimiter.size() != 1) {
      c->SetStatus(errors::InvalidArgument("InitializeTableFromTextFileV2 '", name(),
                                           "': delimiter should be only 1 char, got \"",
                                           delimiter, "\""));
    } else {
      delimiter_ = delimiter[0];
    }
  }

  void Compute(OpKernelContext* ctx) override {
    auto table = TableFromHandle(ctx);
    OP_REQUIRES_OK(ctx, table.status());
    const Tensor& filename = ctx->input(1);
    OP_REQUIRES(ctx, filename.dims() == 0,
                errors::InvalidArgument("InitializeTableFromTextFileV2 '", name(),
                                        "': filename should be a single string, but got ",
                                        filename.shape().DebugString()));
    const std::string& file = filename.scalar<std::string>();
    OP_REQUIRES(ctx, !file.empty(),
                errors::InvalidArgument("InitializeTableFromTextFileV2 '", name(),
                                        "': filename cannot be empty."));
    auto annotate = [&](const absl::Status& s) {
      return errors::Annotate(s, absl::StrCat("InitializeTableFromTextFileV2 '", name(), "'"));
    };
    // TensorFlow: a table already initialized from a file is left as it is.
    if ((*table)->is_initialized()) return;
    Tensor keys, values;
    OP_REQUIRES_OK(ctx, annotate(ReadVocabulary(file, vocab_size_, delimiter_, key_index_,
                                                value_index_, offset_, (*table)->key_dtype(),
                                                (*table)->value_dtype(), &keys, &values)));
    absl::Status s = (*table)->Initialize(keys, values);
    if (absl::IsFailedPrecondition(s) && (*table)->is_initialized()) return;
    OP_REQUIRES_OK(ctx, annotate(s));
  }

 private:
  int64_t vocab_size_ = -1;
  int64_t key_index_ = 0;
  int64_t value_index_ = 0;
  int64_t offset_ = 0;
  char delimiter_ = '\t';
};

REGISTER_KERNEL_BUILDER(Name("HashTableV2").Device(DEVICE_CPU), HashTableOp);
REGISTER_KERNEL_BUILDER(Name("InitializeTableV2").Device(DEVICE_CPU), InitializeTableOp);
REGISTER_KERNEL_BUILDER(Name("LookupTableImportV2").Device(DEVICE_CPU), InitializeTableOp);
REGISTER_KERNEL_BUILDER(Name("InitializeTableFromTextFileV2").Device(DEVICE_CPU),
                        InitializeTableFromTextFileOp);
REGISTER_KERNEL_BUILDER(Name("LookupTableFindV2").Device(DEVICE_CPU), LookupTableFindOp);
REGISTER_KERNEL_BUILDER(Name("LookupTableSizeV2").Device(DEVICE_CPU), LookupTableSizeOp);

}  // namespace
}  // namespace recflow
