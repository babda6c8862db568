// CPU kernels for the hash embedding table ops (ops/hash_table_ops.cc):
// HashEmbeddingTableOp, HashEmbeddingBag, HashEmbeddingLookup and the
// HashTableApply* optimizer steps, over embedding::HashEmbeddingTable.
//
// HashEmbeddingTableOp parses and validates the table options once, in its
// constructor (embedding::ParseTableNode, the graph tables' one parser);
// Compute finds or creates the table in the device's
// ResourceMgr (EmbeddingTableResource::LookupOrCreate) and returns a handle
// that carries the resource, so the consumers never look it up by name.
//
// HashEmbeddingBag checks row_splits first (O(B)), gathers the N rows with
// one HashEmbeddingTable::Lookup (grouped by shard, parallel over shards on
// the intra-op pool), then combines them per example, sharded over examples
// on the pool (each example by one thread: deterministic, no atomics).
//
// HashTableExport copies the whole table (sorted by id) into its outputs;
// HashTableImport clears the table and imports one chunk; HashTableEvict
// and HashTableSize call the table (what Python's tables and Saver use).
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/embedding_bag_util.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using kernels::ParallelRange;
using embedding::EmbeddingTableOptions;
using embedding::EmbeddingTableResource;
using embedding::HashEmbeddingTable;
using embedding::LookupMode;

// --- HashEmbeddingTableOp ---------------------------------------------------

class HashEmbeddingTableOp : public OpKernel {
 public:
  explicit HashEmbeddingTableOp(OpKernelConstruction* c) : OpKernel(c) {
    // Parsed as every other user of the graph's tables parses them
    // (embedding/graph_tables.h).
    auto where = embedding::ParseTableNode(c->def(), c->resource_manager()->default_container());
    if (where.ok()) {
      container_ = where->container;
      name_ = where->name;
      options_ = std::move(where->options);
    }
    c->SetStatus(where.status());
    device_ = c->device()->name();
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    auto res = EmbeddingTableResource::LookupOrCreate(
        ctx->resource_manager(), container_, name_, options_);
    OP_REQUIRES_OK(ctx, res.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    ResourceHandle handle(device_, container_, name_,
                          ResourceMgr::TypeName<EmbeddingTableResource>());
    handle.set_resource(*std::move(res));
    out->scalar<ResourceHandle>() = std::move(handle);
  }

 private:
  std::string container_, name_, device_;
  EmbeddingTableOptions options_;
};

// --- Shared helpers ----------------------------------------------------------

// The table behind the handle in input `input`.
absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> LookupTable(
    OpKernelContext* ctx, int input) {
  const Tensor& t = ctx->input(input);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return errors::InvalidArgument(
        "table must be a scalar resource handle, got ", t.DebugString());
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  if (h.resource() != nullptr) {
    auto res = std::dynamic_pointer_cast<EmbeddingTableResource>(h.resource());
    if (res == nullptr) {
      return errors::InvalidArgument("resource ", h.DebugString(),
                                     " is not a hash embedding table");
    }
    return res;
  }
  return EmbeddingTableResource::Lookup(*ctx->resource_manager(), h.container(),
                                        h.name());
}

absl::Status CheckDim(const HashEmbeddingTable& table, int64_t dim) {
  if (table.dim() != dim) {
    return errors::InvalidArgument("embedding table '", table.name(),
                                   "' has dim ", table.dim(),
                                   " but the op's dim attr is ", dim);
  }
  return absl::OkStatus();
}

absl::StatusOr<LookupMode> ParseMode(const std::string& mode) {
  if (mode == "train") return LookupMode::kTrain;
  if (mode == "serve") return LookupMode::kReadOnly;
  return errors::InvalidArgument("mode must be 'train' or 'serve', not '", mode,
                                 "'");
}

using embedding_bag::AxpyRow;
using embedding_bag::CheckSplits;
using embedding_bag::Combiner;
using embedding_bag::ParseCombiner;

// --- HashEmbeddingBag --------------------------------------------------------

absl::Status CheckBagInputs(const Tensor& ids, const Tensor& splits,
                            const Tensor& weights) {
  if (ids.dims() != 1) {
    return errors::InvalidArgument("ids must be a vector [N], but has shape ",
                                   ids.shape().DebugString());
  }
  const int64_t nnz = ids.dim_size(0);
  if (weights.dims() != 1 ||
      (weights.dim_size(0) != 0 && weights.dim_size(0) != nnz)) {
    return errors::InvalidArgument(
        "per_id_weights ", weights.shape().DebugString(),
        " must be empty or match ids ", ids.shape().DebugString());
  }
  return CheckSplits<int64_t>(splits, nnz);
}

// The ops that read a table (input 0) with attrs "dim" and "mode".
class HashTableReadOp : public OpKernel {
 public:
  explicit HashTableReadOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string s;
    c->SetStatus(c->GetAttr("dim", &dim_));
    c->SetStatus(c->GetAttr("mode", &s));
    auto mode = ParseMode(s);
    c->SetStatus(mode.status());
    if (mode.ok()) mode_ = *mode;
  }

 protected:
  // The table of input 0, checked against the dim attr (the resource is
  // kept alive by the ResourceMgr for the step).
  absl::StatusOr<std::shared_ptr<EmbeddingTableResource>> Table(OpKernelContext* ctx) const {
    ASSIGN_OR_RETURN(auto res, LookupTable(ctx, 0));
    RETURN_IF_ERROR(CheckDim(*res->table(), dim_));
    return res;
  }

  int64_t dim_ = 0;
  LookupMode mode_ = LookupMode::kTrain;
};

class HashEmbeddingBagOp : public HashTableReadOp {
 public:
  explicit HashEmbeddingBagOp(OpKernelConstruction* c) : HashTableReadOp(c) {
    std::string s;
    c->SetStatus(c->GetAttr("combiner", &s));
    auto combiner = ParseCombiner(s);
    c->SetStatus(combiner.status());
    if (combiner.ok()) combiner_ = *combiner;
  }

  void Compute(OpKernelContext* ctx) override {
    auto res = Table(ctx);
    OP_REQUIRES_OK(ctx, res.status());
    HashEmbeddingTable* table = (*res)->table();
    const Tensor& ids = ctx->input(1);
    const Tensor& splits = ctx->input(2);
    const Tensor& weights = ctx->input(3);
    OP_REQUIRES_OK(ctx, CheckBagInputs(ids, splits, weights));
    const int64_t nnz = ids.dim_size(0), batch = splits.dim_size(0) - 1;
    const int64_t dim = dim_;
    // The rows of every position, then the combination per example.
    std::vector<float> rows(static_cast<size_t>(nnz * dim));
    OP_REQUIRES_OK(
        ctx, table->Lookup(absl::MakeConstSpan(ids.data<int64_t>(), nnz),
                           absl::MakeSpan(rows), mode_, ctx->intra_op_pool()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(0, TensorShape({batch, dim}), &out));
    const int64_t* s = splits.data<int64_t>();
    const float* w = weights.dim_size(0) == 0 ? nullptr : weights.data<float>();
    float* dst = out->data<float>();
    const Combiner combiner = combiner_;
    const int64_t per_row = batch == 0 ? 0 : nnz / batch;
    ParallelRange(ctx, batch, std::max<int64_t>(1, (per_row + 1) * dim),
                  [&](int64_t b0, int64_t b1) {
                    for (int64_t b = b0; b < b1; ++b) {
                      float* d = dst + b * dim;
                      std::fill_n(d, dim, 0.0f);
                      const int64_t begin = s[b], end = s[b + 1];
                      if (begin == end) continue;
                      float denom = 0;
                      for (int64_t j = begin; j < end; ++j) {
                        const float wj = w == nullptr ? 1.0f : w[j];
                        AxpyRow(d, rows.data() + j * dim, wj, dim);
                        denom += combiner == Combiner::kSqrtN ? wj * wj : wj;
                      }
                      if (combiner == Combiner::kSum) continue;
                      if (combiner == Combiner::kSqrtN)
                        denom = std::sqrt(denom);
                      const float scale = denom == 0.0f ? 0.0f : 1.0f / denom;
                      for (int64_t k = 0; k < dim; ++k) d[k] *= scale;
                    }
                  });
  }

 private:
  Combiner combiner_ = Combiner::kMean;
};

// --- HashEmbeddingLookup -----------------------------------------------------

class HashEmbeddingLookupOp : public HashTableReadOp {
 public:
  using HashTableReadOp::HashTableReadOp;

  void Compute(OpKernelContext* ctx) override {
    auto res = Table(ctx);
    OP_REQUIRES_OK(ctx, res.status());
    HashEmbeddingTable* table = (*res)->table();
    const Tensor& ids = ctx->input(1);
    TensorShape shape = ids.shape();
    shape.AddDim(dim_);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, shape, &out));
    const int64_t n = ids.NumElements();
    OP_REQUIRES_OK(
        ctx, table->Lookup(absl::MakeConstSpan(ids.data<int64_t>(), n),
                           absl::MakeSpan(out->data<float>(), n * dim_), mode_,
                           ctx->intra_op_pool()));
  }
};

// --- HashTableApply* ---------------------------------------------------------

// Inputs 0..2 (table, ids, grad) and the step (input `step_input`) checked.
struct ApplyArgs {
  std::shared_ptr<EmbeddingTableResource> res;
  absl::Span<const int64_t> ids;
  absl::Span<const float> grads;
  int64_t step = 0;
};

absl::StatusOr<float> ScalarInput(OpKernelContext* ctx, int i,
                                  const char* name) {
  const Tensor& t = ctx->input(i);
  if (t.dims() != 0) {
    return errors::InvalidArgument(name, " must be a scalar, but has shape ",
                                   t.shape().DebugString());
  }
  return t.scalar<float>();
}

absl::StatusOr<ApplyArgs> GetApplyArgs(OpKernelContext* ctx, int step_input) {
  ApplyArgs a;
  ASSIGN_OR_RETURN(a.res, LookupTable(ctx, 0));
  const HashEmbeddingTable& table = *a.res->table();
  const Tensor& ids = ctx->input(1);
  const Tensor& grad = ctx->input(2);
  if (ids.dims() != 1) {
    return errors::InvalidArgument("ids must be a vector [U], but has shape ",
                                   ids.shape().DebugString());
  }
  if (grad.dims() != 2 || grad.dim_size(0) != ids.dim_size(0) ||
      grad.dim_size(1) != table.dim()) {
    return errors::InvalidArgument(
        "grad ", grad.shape().DebugString(), " must be [", ids.dim_size(0),
        ", ", table.dim(), "] (one row per id, the dim of embedding table '",
        table.name(), "')");
  }
  const Tensor& step = ctx->input(step_input);
  if (step.dims() != 0) {
    return errors::InvalidArgument("step must be a scalar, but has shape ",
                                   step.shape().DebugString());
  }
  a.step = step.scalar<int64_t>();
  if (a.step <= 0) a.step = table.clock() + 1;
  a.ids = absl::MakeConstSpan(ids.data<int64_t>(), ids.dim_size(0));
  a.grads = absl::MakeConstSpan(grad.data<float>(), grad.NumElements());
  return a;
}

// Reads scalar inputs first, first + 1, ... named `names` into `fields`.
absl::Status ScalarInputs(OpKernelContext* ctx, int first,
                          std::initializer_list<std::pair<const char*, float*>> fields) {
  int i = first;
  for (const auto& [name, field] : fields) {
    ASSIGN_OR_RETURN(*field, ScalarInput(ctx, i++, name));
  }
  return absl::OkStatus();
}

class HashTableApplyGradientDescentOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto a = GetApplyArgs(ctx, 4);
    OP_REQUIRES_OK(ctx, a.status());
    embedding::SgdParams p;
    OP_REQUIRES_OK(ctx, ScalarInputs(ctx, 3, {{"lr", &p.learning_rate}}));
    OP_REQUIRES_OK(ctx, a->res->table()->ApplySgd(a->ids, a->grads, p, a->step,
                                                  ctx->intra_op_pool()));
  }
};

class HashTableApplyAdagradOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto a = GetApplyArgs(ctx, 5);
    OP_REQUIRES_OK(ctx, a.status());
    embedding::AdagradParams p;
    OP_REQUIRES_OK(ctx, ScalarInputs(ctx, 3, {{"lr", &p.learning_rate}, {"epsilon", &p.epsilon}}));
    OP_REQUIRES_OK(ctx, a->res->table()->ApplyAdagrad(a->ids, a->grads, p, a->step,
                                                      ctx->intra_op_pool()));
  }
};

class HashTableApplyAdamOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto a = GetApplyArgs(ctx, 7);
    OP_REQUIRES_OK(ctx, a.status());
    embedding::AdamParams p;
    OP_REQUIRES_OK(ctx, ScalarInputs(ctx, 3,
                                     {{"lr", &p.learning_rate},
                                      {"beta1", &p.beta1},
                                      {"beta2", &p.beta2},
                                      {"epsilon", &p.epsilon}}));
    // TensorFlow's beta powers at t = step (computed in double, as the
    // product of t float multiplications would drift).
    p.beta1_power = static_cast<float>(
        std::pow(static_cast<double>(p.beta1), static_cast<double>(a->step)));
    p.beta2_power = static_cast<float>(
        std::pow(static_cast<double>(p.beta2), static_cast<double>(a->step)));
    OP_REQUIRES_OK(ctx, a->res->table()->ApplyAdam(a->ids, a->grads, p, a->step,
                                                   ctx->intra_op_pool()));
  }
};

class HashTableApplyFtrlOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    auto a = GetApplyArgs(ctx, 8);
    OP_REQUIRES_OK(ctx, a.status());
    embedding::FtrlParams p;
    OP_REQUIRES_OK(ctx, ScalarInputs(ctx, 3,
                                     {{"lr", &p.learning_rate},
                                      {"l1", &p.l1},
                                      {"l2", &p.l2},
                                      {"l2_shrinkage", &p.l2_shrinkage},
                                      {"lr_power", &p.lr_power}}));
    OP_REQUIRES_OK(ctx, a->res->table()->ApplyFtrl(a->ids, a->grads, p, a->step,
                                                   ctx->intra_op_pool()));
  }
};

// --- Export, import, eviction, size ----------------------------------------

// Copies `n` elements of each chunk's `field` after one another into `dst`.
template <typename T>
void Concat(const std::vector<embedding::TableChunk>& chunks,
            Tensor embedding::TableChunk::*field, int64_t row_elements, T* dst) {
  for (const embedding::TableChunk& c : chunks) {
    const Tensor& t = c.*field;
    const int64_t n = c.keys.NumElements() * row_elements;
    if (n > 0) std::copy(t.data<T>(), t.data<T>() + n, dst);
    dst += n;
  }
}

class HashTableExportOp : public OpKernel {
 public:
  explicit HashTableExportOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("dim", &dim_));
  }

  void Compute(OpKernelContext* ctx) override {
    auto res = LookupTable(ctx, 0);
    OP_REQUIRES_OK(ctx, res.status());
    HashEmbeddingTable* table = (*res)->table();
    OP_REQUIRES_OK(ctx, CheckDim(*table, dim_));
    std::vector<embedding::TableChunk> chunks;
    int64_t rows = 0;
    embedding::ExportOptions opts;  // every row, sorted by id
    auto exported = table->Export(
        opts,
        [&](const embedding::TableChunk& c) {
          rows += c.keys.NumElements();
          chunks.push_back(c);
          return absl::OkStatus();
        },
        ctx->intra_op_pool());
    OP_REQUIRES_OK(ctx, exported.status());
    const int64_t dim = table->dim(), slots = table->num_slots();
    Tensor keys(DT_INT64, TensorShape({rows}));
    Tensor values(DT_FLOAT, TensorShape({rows, dim}));
    Tensor slot_values(DT_FLOAT, TensorShape({rows, slots, dim}));
    Tensor frequencies(DT_INT64, TensorShape({rows}));
    Tensor versions(DT_INT64, TensorShape({rows}));
    using embedding::TableChunk;
    Concat<int64_t>(chunks, &TableChunk::keys, 1, keys.data<int64_t>());
    Concat<float>(chunks, &TableChunk::values, dim, values.data<float>());
    Concat<float>(chunks, &TableChunk::slots, slots * dim, slot_values.data<float>());
    Concat<int64_t>(chunks, &TableChunk::frequencies, 1, frequencies.data<int64_t>());
    Concat<int64_t>(chunks, &TableChunk::versions, 1, versions.data<int64_t>());
    ctx->set_output(0, std::move(keys));
    ctx->set_output(1, std::move(values));
    ctx->set_output(2, std::move(slot_values));
    ctx->set_output(3, std::move(frequencies));
    ctx->set_output(4, std::move(versions));
  }

 private:
  int64_t dim_ = 0;
};

class HashTableImportOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* ctx) override {
    auto res = LookupTable(ctx, 0);
    OP_REQUIRES_OK(ctx, res.status());
    HashEmbeddingTable* table = (*res)->table();
    embedding::TableChunk chunk;
    chunk.keys = ctx->input(1);
    chunk.values = ctx->input(2);
    chunk.slots = ctx->input(3);
    chunk.frequencies = ctx->input(4);
    chunk.versions = ctx->input(5);
    // Import checks every tensor against the table before changing it.
    table->Clear();
    absl::Status s = table->Import(chunk, ctx->intra_op_pool());
    if (!s.ok()) {
      table->Clear();
      OP_REQUIRES_OK(ctx, errors::Annotate(s, absl::StrCat("importing into embedding table '",
                                                           table->name(), "'")));
    }
  }
};

class HashTableEvictOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* ctx) override {
    auto res = LookupTable(ctx, 0);
    OP_REQUIRES_OK(ctx, res.status());
    HashEmbeddingTable* table = (*res)->table();
    const Tensor& step = ctx->input(1);
    OP_REQUIRES(ctx, step.dims() == 0,
                errors::InvalidArgument("step must be a scalar, but has shape ",
                                        step.shape().DebugString()));
    int64_t at = step.scalar<int64_t>();
    if (at <= 0) at = table->clock();
    const embedding::EvictionResult r = table->Evict(at, ctx->intra_op_pool());
    ctx->set_output(0, Tensor::Scalar<int64_t>(r.by_age + r.by_frequency));
  }
};

class HashTablePrefetchOp : public OpKernel {
 public:
  using OpKernel::OpKernel;

  void Compute(OpKernelContext* ctx) override {
    auto res = LookupTable(ctx, 0);
    OP_REQUIRES_OK(ctx, res.status());
    const Tensor& ids = ctx->input(1);
    OP_REQUIRES_OK(ctx, (*res)->table()->Prefetch(
                            absl::MakeConstSpan(ids.data<int64_t>(), ids.NumElements())));
  }
};

class HashTableSizeOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    auto res = LookupTable(ctx, 0);
    OP_REQUIRES_OK(ctx, res.status());
    ctx->set_output(0, Tensor::Scalar<int64_t>((*res)->table()->size()));
  }
};

REGISTER_KERNEL_BUILDER(Name("HashEmbeddingTableOp").Device(DEVICE_CPU),
                        HashEmbeddingTableOp);
REGISTER_KERNEL_BUILDER(Name("HashTablePrefetch").Device(DEVICE_CPU), HashTablePrefetchOp);
REGISTER_KERNEL_BUILDER(Name("HashEmbeddingBag").Device(DEVICE_CPU),
                        HashEmbeddingBagOp);
REGISTER_KERNEL_BUILDER(Name("HashEmbeddingLookup").Device(DEVICE_CPU),
                        HashEmbeddingLookupOp);
REGISTER_KERNEL_BUILDER(
    Name("HashTableApplyGradientDescent").Device(DEVICE_CPU),
    HashTableApplyGradientDescentOp);
REGISTER_KERNEL_BUILDER(Name("HashTableApplyAdagrad").Device(DEVICE_CPU),
                        HashTableApplyAdagradOp);
REGISTER_KERNEL_BUILDER(Name("HashTableApplyAdam").Device(DEVICE_CPU),
                        HashTableApplyAdamOp);
REGISTER_KERNEL_BUILDER(Name("HashTableApplyFtrl").Device(DEVICE_CPU),
                        HashTableApplyFtrlOp);
REGISTER_KERNEL_BUILDER(Name("HashTableExport").Device(DEVICE_CPU), HashTableExportOp);
REGISTER_KERNEL_BUILDER(Name("HashTableImport").Device(DEVICE_CPU), HashTableImportOp);
REGISTER_KERNEL_BUILDER(Name("HashTableEvict").Device(DEVICE_CPU), HashTableEvictOp);
REGISTER_KERNEL_BUILDER(Name("HashTableSize").Device(DEVICE_CPU), HashTableSizeOp);

}  // namespace
}  // namespace recflow
