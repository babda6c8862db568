// CPU kernels for the dense embedding ops (ops/embedding_ops.cc):
// EmbeddingBag and ResourceEmbeddingBag (float, double; ids and row_splits
// int32 or int64), EmbeddingBagGrad, EmbeddingBagWeightsGrad, ResourceGather
// (any POD dtype and string), VariableShape and FillEmptyBags.
//
// EmbeddingBag checks row_splits first (O(B)), then combines rows sharded
// over examples on the intra-op pool; each example's ids are bounds-checked
// inside the loop with one unsigned compare, and the first bad position is
// reported after the loop (InvalidArgument naming the id, its position and
// its row). The resource form reads the variable's current buffer (shared,
// not copied: framework's Var is copy-on-write).
//
// EmbeddingBagGrad merges duplicate ids: a hash pass assigns each distinct
// id its slot in order of first occurrence. A small gradient (a training
// batch's field) is then summed in one pass in position order; a large one
// is grouped by slot (counting sort) and slots are summed in parallel, each
// by one thread. Both are deterministic (no atomics) and give the same bits.
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"
#include "recflow/kernels/embedding_bag_util.h"
#include "recflow/kernels/parallel_range.h"
#include "recflow/kernels/state_kernels.h"

namespace recflow {
namespace {

using array_kernels::CopyTypes;
using array_kernels::DispatchCopyType;
using kernels::ParallelRange;

using embedding_bag::AddRow;
using embedding_bag::AxpyRow;
using embedding_bag::CheckSplits;
using embedding_bag::Combiner;
using embedding_bag::ParseCombiner;
using embedding_bag::ScaleRow;

absl::Status CheckIdsAndWeights(const Tensor& ids, const Tensor& weights) {
  if (ids.dims() != 1) {
    return errors::InvalidArgument("ids must be a vector, but has shape ",
                                   ids.shape().DebugString());
  }
  if (weights.dims() != 1 ||
      (weights.dim_size(0) != 0 && weights.dim_size(0) != ids.dim_size(0))) {
    return errors::InvalidArgument(
        "per_id_weights ", weights.shape().DebugString(),
        " must be empty or match ids ", ids.shape().DebugString());
  }
  return absl::OkStatus();
}

// The factor that turns the weighted sum of a row into its combination.
template <typename T>
T RowScale(Combiner c, const T* w, int64_t begin, int64_t end) {
  if (c == Combiner::kSum) return T(1);
  T denom = 0;
  if (w == nullptr) {
    denom = c == Combiner::kMean ? T(end - begin) : std::sqrt(T(end - begin));
  } else {
    for (int64_t j = begin; j < end; ++j)
      denom += c == Combiner::kMean ? w[j] : w[j] * w[j];
    if (c == Combiner::kSqrtN) denom = std::sqrt(denom);
  }
  return denom == T(0) ? T(0) : T(1) / denom;
}

// The row of position `j` given the splits (binary search).
template <typename Tsplits>
int64_t RowOf(const Tensor& splits, int64_t j) {
  const Tsplits* s = splits.data<Tsplits>();
  const int64_t n = splits.dim_size(0);
  return static_cast<int64_t>(
             std::upper_bound(s, s + n, static_cast<Tsplits>(j)) - s) -
         1;
}

// How many ids ahead a gather prefetches its row (enough to cover DRAM
// latency at a few ns of work per row).
constexpr int64_t kPrefetchDistance = 8;

// Prefetches row `r` of a [vocab, dim] table (nothing when out of range).
template <typename T, typename Tidx>
inline void PrefetchRow(const T* table, Tidx r, int64_t vocab, int64_t dim) {
  if (static_cast<uint64_t>(static_cast<int64_t>(r)) >= static_cast<uint64_t>(vocab)) return;
  const char* p = reinterpret_cast<const char*>(table + static_cast<int64_t>(r) * dim);
  const int64_t bytes = dim * static_cast<int64_t>(sizeof(T));
  for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(p + off, 0, 1);
}

// output[b] = combine(params[ids[splits[b]:splits[b+1]]]).
template <typename T, typename Tidx, typename Tsplits>
void ComputeBag(OpKernelContext* ctx, Combiner combiner, const Tensor& params,
                const Tensor& ids, const Tensor& splits, const Tensor& weights,
                const std::string& params_name) {
  OP_REQUIRES(ctx, params.dims() == 2,
              errors::InvalidArgument(
                  params_name, " must be a matrix [V, D], but has shape ",
                  params.shape().DebugString()));
  OP_REQUIRES_OK(ctx, CheckIdsAndWeights(ids, weights));
  const int64_t nnz = ids.dim_size(0);
  OP_REQUIRES_OK(ctx, CheckSplits<Tsplits>(splits, nnz));
  const int64_t batch = splits.dim_size(0) - 1;
  const int64_t vocab = params.dim_size(0), dim = params.dim_size(1);
  Tensor* out = nullptr;
  OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({batch, dim}), &out));
  const T* table = params.data<T>();
  const Tidx* id = ids.data<Tidx>();
  const Tsplits* s = splits.data<Tsplits>();
  const T* w = weights.dim_size(0) == 0 ? nullptr : weights.data<T>();
  T* dst = out->data<T>();
  std::atomic<int64_t> first_bad{nnz};
  const int64_t per_row = batch == 0 ? 0 : nnz / batch;
  ParallelRange(
      ctx, batch, std::max<int64_t>(1, (per_row + 1) * dim),
      [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          T* d = dst + b * dim;
          std::fill_n(d, dim, T(0));
          const int64_t begin = s[b], end = s[b + 1];
          bool bad = false;
          for (int64_t j = begin; j < end; ++j) {
            const uint64_t r =
                static_cast<uint64_t>(static_cast<int64_t>(id[j]));
            // Rows are random reads from a table far larger than the
            // caches: ask for one kPrefetchDistance ids ahead so its
            // miss overlaps this row's work.
            if (j + kPrefetchDistance < nnz) {
              PrefetchRow(table, id[j + kPrefetchDistance], vocab, dim);
            }
            if (ABSL_PREDICT_FALSE(r >= static_cast<uint64_t>(vocab))) {
              int64_t cur = first_bad.load(std::memory_order_relaxed);
              while (j < cur && !first_bad.compare_exchange_weak(cur, j)) {
              }
              bad = true;
              break;
            }
            const T* row = table + static_cast<int64_t>(r) * dim;
            if (w == nullptr) {
              AddRow(d, row, dim);
            } else {
              AxpyRow(d, row, w[j], dim);
            }
          }
          if (bad || end == begin) continue;
          const T scale = RowScale<T>(combiner, w, begin, end);
          if (scale != T(1)) ScaleRow(d, scale, dim);
        }
      });
  const int64_t j = first_bad.load();
  OP_REQUIRES(
      ctx, j == nnz,
      errors::InvalidArgument(
          "ids[", j, "] = ", static_cast<int64_t>(id[j < nnz ? j : 0]),
          " (row ", RowOf<Tsplits>(splits, j), ") is out of range [0, ", vocab,
          ") for ", params_name, " of shape ", params.shape().DebugString()));
}

template <typename T, typename Tidx, typename Tsplits, bool kResource>
class EmbeddingBagOp : public OpKernel {
 public:
  explicit EmbeddingBagOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string combiner;
    c->SetStatus(c->GetAttr("combiner", &combiner));
    auto parsed = ParseCombiner(combiner);
    c->SetStatus(parsed.status());
    if (parsed.ok()) combiner_ = *parsed;
  }

  void Compute(OpKernelContext* ctx) override {
    Tensor params;
    std::string name = "params";
    if constexpr (kResource) {
      auto var = LookupResourceVar(ctx, 0);
      OP_REQUIRES_OK(ctx, var.status());
      OP_REQUIRES(ctx, (*var)->dtype() == DataTypeToEnum<T>::value,
                  errors::InvalidArgument(
                      "variable '", (*var)->name(), "' has dtype ",
                      DataTypeString((*var)->dtype()), " but dtype is ",
                      DataTypeString(DataTypeToEnum<T>::value)));
      auto value = (*var)->Read();
      OP_REQUIRES_OK(ctx, value.status());
      params = *std::move(value);
      name = "variable '" + (*var)->name() + "'";
    } else {
      params = ctx->input(0);
    }
    ComputeBag<T, Tidx, Tsplits>(ctx, combiner_, params, ctx->input(1),
                                 ctx->input(2), ctx->input(3), name);
  }

 private:
  Combiner combiner_ = Combiner::kMean;
};

template <typename T, typename Tidx, typename Tsplits>
class EmbeddingBagGradOp : public OpKernel {
 public:
  explicit EmbeddingBagGradOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string combiner;
    c->SetStatus(c->GetAttr("combiner", &combiner));
    auto parsed = ParseCombiner(combiner);
    c->SetStatus(parsed.status());
    if (parsed.ok()) combiner_ = *parsed;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    const Tensor& ids = ctx->input(1);
    const Tensor& splits = ctx->input(2);
    const Tensor& weights = ctx->input(3);
    OP_REQUIRES(
        ctx, grad.dims() == 2,
        errors::InvalidArgument("grad must be a matrix [B, D], but has shape ",
                                grad.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckIdsAndWeights(ids, weights));
    const int64_t nnz = ids.dim_size(0);
    OP_REQUIRES_OK(ctx, CheckSplits<Tsplits>(splits, nnz));
    const int64_t batch = splits.dim_size(0) - 1;
    OP_REQUIRES(ctx, grad.dim_size(0) == batch,
                errors::InvalidArgument("grad ", grad.shape().DebugString(),
                                        " must have one row per example (",
                                        batch, " from row_splits)"));
    // 32-bit slots (half the scratch memory) below 2^30 ids, 64-bit above.
    if (nnz < (int64_t{1} << 30)) {
      Merge<int32_t>(ctx, grad, ids, splits, weights);
    } else {
      Merge<int64_t>(ctx, grad, ids, splits, weights);
    }
  }

 private:
  // Below this many gradient elements (nnz * dim) the rows are summed in
  // one pass in position order, straight into the output (the position
  // order is also the per-slot order of the parallel path, so both give
  // the same bits). Above it, positions are grouped by slot and slots are
  // summed in parallel.
  static constexpr int64_t kSerialElements = int64_t{1} << 18;

  template <typename Tslot>
  void Merge(OpKernelContext* ctx, const Tensor& grad, const Tensor& ids,
             const Tensor& splits, const Tensor& weights) {
    const int64_t nnz = ids.dim_size(0);
    const int64_t batch = splits.dim_size(0) - 1, dim = grad.dim_size(1);
    const Tidx* id = ids.data<Tidx>();
    const Tsplits* s = splits.data<Tsplits>();
    const T* w = weights.dim_size(0) == 0 ? nullptr : weights.data<T>();
    const T* g = grad.data<T>();
    // Slot of each position. Slots are handed out in order of first
    // occurrence through an open-addressing table (linear probing,
    // capacity a power of two >= 2 nnz, Fibonacci hashing: the top bits of
    // key * 2^64 / phi): a few ns per id where a general hash map took ~40.
    int shift = 64;
    int64_t capacity = 1;
    while (capacity < 2 * nnz) {
      capacity <<= 1;
      --shift;
    }
    std::unique_ptr<Tslot[]> table(new Tslot[capacity]);  // -1: free
    std::fill_n(table.get(), capacity, Tslot{-1});
    std::unique_ptr<Tslot[]> slot(new Tslot[nnz]);
    std::vector<Tidx> unique;
    unique.reserve(nnz);
    const uint64_t mask = static_cast<uint64_t>(capacity - 1);
    for (int64_t j = 0; j < nnz; ++j) {
      const Tidx key = id[j];
      uint64_t h = shift >= 64
                       ? 0
                       : (static_cast<uint64_t>(static_cast<int64_t>(key)) *
                          0x9E3779B97F4A7C15ull) >> shift;
      Tslot k;
      while (true) {
        k = table[h];
        if (k < 0) {
          k = static_cast<Tslot>(unique.size());
          table[h] = k;
          unique.push_back(key);
          break;
        }
        if (unique[k] == key) break;
        h = (h + 1) & mask;
      }
      slot[j] = k;
    }
    table.reset();
    const int64_t u = static_cast<int64_t>(unique.size());
    Tensor* unique_out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({u}), &unique_out));
    std::copy(unique.begin(), unique.end(), unique_out->data<Tidx>());
    Tensor* rows_out = nullptr;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(1, TensorShape({u, dim}), &rows_out));
    T* dst = rows_out->data<T>();
    if (nnz * dim < kSerialElements || ctx->intra_op_pool() == nullptr) {
      std::fill_n(dst, u * dim, T(0));
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t begin = s[b], end = s[b + 1];
        if (begin == end) continue;
        const T scale = RowScale<T>(combiner_, w, begin, end);
        const T* gb = g + b * dim;
        for (int64_t j = begin; j < end; ++j) {
          const T c = w == nullptr ? scale : scale * w[j];
          AxpyRow(dst + static_cast<int64_t>(slot[j]) * dim, gb, c, dim);
        }
      }
      return;
    }
    // The example and coefficient of each position, then the positions
    // grouped by slot (counting sort, stable).
    std::vector<int64_t> row(nnz);
    std::vector<T> coef(nnz);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t begin = s[b], end = s[b + 1];
      const T scale = RowScale<T>(combiner_, w, begin, end);
      for (int64_t j = begin; j < end; ++j) {
        row[j] = b;
        coef[j] = w == nullptr ? scale : scale * w[j];
      }
    }
    std::vector<int64_t> start(u + 1, 0), order(nnz);
    for (int64_t j = 0; j < nnz; ++j) ++start[slot[j] + 1];
    for (int64_t k = 0; k < u; ++k) start[k + 1] += start[k];
    {
      std::vector<int64_t> fill(start.begin(), start.end() - 1);
      for (int64_t j = 0; j < nnz; ++j) order[fill[slot[j]]++] = j;
    }
    const int64_t per_slot = u == 0 ? 0 : nnz / u;
    ParallelRange(ctx, u, std::max<int64_t>(1, (per_slot + 1) * dim),
                  [&](int64_t k0, int64_t k1) {
                    for (int64_t k = k0; k < k1; ++k) {
                      T* d = dst + k * dim;
                      std::fill_n(d, dim, T(0));
                      for (int64_t p = start[k]; p < start[k + 1]; ++p) {
                        const int64_t j = order[p];
                        AxpyRow(d, g + row[j] * dim, coef[j], dim);
                      }
                    }
                  });
  }

 private:
  Combiner combiner_ = Combiner::kMean;
};

// d loss / d per_id_weights (see ops/embedding_ops.h for the formulas).
template <typename T, typename Tidx, typename Tsplits>
class EmbeddingBagWeightsGradOp : public OpKernel {
 public:
  explicit EmbeddingBagWeightsGradOp(OpKernelConstruction* c) : OpKernel(c) {
    std::string combiner;
    c->SetStatus(c->GetAttr("combiner", &combiner));
    auto parsed = ParseCombiner(combiner);
    c->SetStatus(parsed.status());
    if (parsed.ok()) combiner_ = *parsed;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    const Tensor& params = ctx->input(1);
    const Tensor& ids = ctx->input(2);
    const Tensor& splits = ctx->input(3);
    const Tensor& weights = ctx->input(4);
    const Tensor& output = ctx->input(5);
    OP_REQUIRES(
        ctx, params.dims() == 2 && grad.dims() == 2 && output.dims() == 2,
        errors::InvalidArgument("grad ", grad.shape().DebugString(),
                                ", params ", params.shape().DebugString(),
                                " and output ", output.shape().DebugString(),
                                " must be matrices"));
    OP_REQUIRES_OK(ctx, CheckIdsAndWeights(ids, weights));
    const int64_t nnz = ids.dim_size(0);
    OP_REQUIRES(ctx, weights.dim_size(0) == nnz,
                errors::InvalidArgument(
                    "per_id_weights ", weights.shape().DebugString(),
                    " must have one weight per id (", nnz, ")"));
    OP_REQUIRES_OK(ctx, CheckSplits<Tsplits>(splits, nnz));
    const int64_t batch = splits.dim_size(0) - 1, dim = params.dim_size(1),
                  vocab = params.dim_size(0);
    OP_REQUIRES(
        ctx,
        grad.shape() == TensorShape({batch, dim}) &&
            output.shape() == grad.shape(),
        errors::InvalidArgument("grad ", grad.shape().DebugString(),
                                " and output ", output.shape().DebugString(),
                                " must be [", batch, ", ", dim, "]"));
    const Tidx* id = ids.data<Tidx>();
    for (int64_t j = 0; j < nnz; ++j) {
      OP_REQUIRES(ctx, id[j] >= 0 && id[j] < vocab,
                  errors::InvalidArgument("ids[", j,
                                          "] = ", static_cast<int64_t>(id[j]),
                                          " is out of range [0, ", vocab, ")"));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({nnz}), &out));
    const Tsplits* s = splits.data<Tsplits>();
    const T* w = weights.data<T>();
    const T* g = grad.data<T>();
    const T* table = params.data<T>();
    const T* fwd = output.data<T>();
    T* dw = out->data<T>();
    const Combiner combiner = combiner_;
    auto dot = [dim](const T* a, const T* b) {
      T acc = 0;
      for (int64_t k = 0; k < dim; ++k) acc += a[k] * b[k];
      return acc;
    };
    const int64_t per_row = batch == 0 ? 0 : nnz / batch;
    ParallelRange(
        ctx, batch, std::max<int64_t>(1, (per_row + 1) * dim),
        [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            const int64_t begin = s[b], end = s[b + 1];
            if (begin == end) continue;
            const T* gb = g + b * dim;
            const T scale =
                RowScale<T>(combiner, w, begin, end);  // 1, 1/W or 1/Q
            const T g_out =
                combiner == Combiner::kSum ? T(0) : dot(gb, fwd + b * dim);
            for (int64_t j = begin; j < end; ++j) {
              const T g_e = dot(gb, table + static_cast<int64_t>(id[j]) * dim);
              switch (combiner) {
                case Combiner::kSum:
                  dw[j] = g_e;
                  break;
                case Combiner::kMean:
                  dw[j] = (g_e - g_out) * scale;
                  break;
                case Combiner::kSqrtN:
                  dw[j] = (g_e - g_out * w[j] * scale) * scale;
                  break;
              }
            }
          }
        });
  }

 private:
  Combiner combiner_ = Combiner::kMean;
};

class ResourceGatherOp : public OpKernel {
 public:
  explicit ResourceGatherOp(OpKernelConstruction* c) : OpKernel(c) {
    int64_t batch_dims = 0;
    c->SetStatus(c->GetAttr("batch_dims", &batch_dims));
    if (batch_dims != 0) {
      c->SetStatus(
          errors::Unimplemented("ResourceGather with batch_dims = ", batch_dims,
                                " is not supported; only batch_dims = 0"));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    auto var = LookupResourceVar(ctx, 0);
    OP_REQUIRES_OK(ctx, var.status());
    OP_REQUIRES(ctx, (*var)->dtype() == output_type(0),
                errors::InvalidArgument(
                    "variable '", (*var)->name(), "' has dtype ",
                    DataTypeString((*var)->dtype()), ", gathered as ",
                    DataTypeString(output_type(0))));
    auto value = (*var)->Read();
    OP_REQUIRES_OK(ctx, value.status());
    const Tensor& params = *value;
    const Tensor& indices = ctx->input(1);
    OP_REQUIRES(ctx, params.dims() >= 1,
                errors::InvalidArgument(
                    "variable '", (*var)->name(),
                    "' must be at least rank 1 to gather from, but has shape ",
                    params.shape().DebugString()));
    const int64_t rows = params.dim_size(0), n = indices.NumElements();
    std::vector<int64_t> idx(n);
    if (indices.dtype() == DT_INT32) {
      std::copy_n(indices.data<int32_t>(), n, idx.begin());
    } else {
      std::copy_n(indices.data<int64_t>(), n, idx.begin());
    }
    for (int64_t i = 0; i < n; ++i) {
      OP_REQUIRES(ctx, idx[i] >= 0 && idx[i] < rows,
                  errors::InvalidArgument(
                      "indices[", i, "] = ", idx[i], " is out of range [0, ",
                      rows, ") for variable '", (*var)->name(), "' of shape ",
                      params.shape().DebugString()));
    }
    TensorShape out_shape = indices.shape();
    int64_t inner = 1;
    for (int d = 1; d < params.dims(); ++d) {
      out_shape.AddDim(params.dim_size(d));
      inner *= params.dim_size(d);
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    const bool ok = DispatchCopyType(params.dtype(), [&]<typename U>() {
      const U* src = reinterpret_cast<const U*>(params.raw_data());
      U* dst = reinterpret_cast<U*>(out->raw_data());
      ParallelRange(
          ctx, n, std::max<int64_t>(1, inner), [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i)
              std::copy_n(src + idx[i] * inner, inner, dst + i * inner);
          });
    });
    OP_REQUIRES(ctx, ok,
                errors::InvalidArgument("ResourceGather cannot gather ",
                                        DataTypeString(params.dtype())));
  }
};

class VariableShapeOp : public OpKernel {
 public:
  explicit VariableShapeOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    auto var = LookupResourceVar(ctx, 0);
    OP_REQUIRES_OK(ctx, var.status());
    auto value = (*var)->Read();
    OP_REQUIRES_OK(ctx, value.status());
    const TensorShape& shape = value->shape();
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx,
                   ctx->allocate_output(0, TensorShape({shape.dims()}), &out));
    for (int d = 0; d < shape.dims(); ++d) {
      if (output_type(0) == DT_INT32) {
        OP_REQUIRES(
            ctx, shape.dim_size(d) <= std::numeric_limits<int32_t>::max(),
            errors::InvalidArgument("variable '", (*var)->name(), "' of shape ",
                                    shape.DebugString(),
                                    " does not fit out_type int32; use int64"));
        out->data<int32_t>()[d] = static_cast<int32_t>(shape.dim_size(d));
      } else {
        out->data<int64_t>()[d] = shape.dim_size(d);
      }
    }
  }
};

// FillEmptyBags: one pass to count the empty bags (none: the inputs pass
// through), one to copy.
template <typename Tidx, typename Tsplits>
class FillEmptyBagsOp : public OpKernel {
 public:
  explicit FillEmptyBagsOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& ids = ctx->input(0);
    const Tensor& splits = ctx->input(1);
    const Tensor& fill = ctx->input(2);
    OP_REQUIRES(ctx, ids.dims() == 1,
                errors::InvalidArgument("ids must be a vector, but has shape ",
                                        ids.shape().DebugString()));
    OP_REQUIRES(ctx, fill.dims() == 0,
                errors::InvalidArgument("fill_value must be a scalar, but has shape ",
                                        fill.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckSplits<Tsplits>(splits, ids.dim_size(0)));
    const Tsplits* s = splits.data<Tsplits>();
    const int64_t batch = splits.dim_size(0) - 1;
    int64_t empty = 0;
    for (int64_t b = 0; b < batch; ++b) empty += s[b + 1] == s[b];
    if (empty == 0) {
      ctx->set_output(0, ids);
      ctx->set_output(1, splits);
      return;
    }
    const int64_t nnz = ids.dim_size(0);
    OP_REQUIRES(ctx,
                nnz + empty <= static_cast<int64_t>(std::numeric_limits<Tsplits>::max()),
                errors::InvalidArgument("filling ", empty, " empty bags gives ", nnz + empty,
                                        " ids, more than row_splits' dtype holds"));
    Tensor* out_ids = nullptr;
    Tensor* out_splits = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({nnz + empty}), &out_ids));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, splits.shape(), &out_splits));
    const Tidx* in = ids.data<Tidx>();
    const Tidx value = fill.scalar<Tidx>();
    Tidx* dst = out_ids->data<Tidx>();
    Tsplits* ds = out_splits->data<Tsplits>();
    int64_t n = 0;
    ds[0] = 0;
    for (int64_t b = 0; b < batch; ++b) {
      if (s[b + 1] == s[b]) {
        dst[n++] = value;
      } else {
        for (Tsplits j = s[b]; j < s[b + 1]; ++j) dst[n++] = in[j];
      }
      ds[b + 1] = static_cast<Tsplits>(n);
    }
  }
};

#define RECFLOW_REGISTER_FILL_(Tidx, Tsplits)                                        \
  REGISTER_KERNEL_BUILDER(Name("FillEmptyBags")                                     \
                              .Device(DEVICE_CPU)                                   \
                              .TypeConstraint<Tidx>("Tindices")                     \
                              .TypeConstraint<Tsplits>("Tsplits"),                  \
                          FillEmptyBagsOp<Tidx, Tsplits>)
RECFLOW_REGISTER_FILL_(int32_t, int32_t);
RECFLOW_REGISTER_FILL_(int32_t, int64_t);
RECFLOW_REGISTER_FILL_(int64_t, int32_t);
RECFLOW_REGISTER_FILL_(int64_t, int64_t);
#undef RECFLOW_REGISTER_FILL_

#define RECFLOW_REGISTER_BAG_(T, Tidx, Tsplits)                     \
  REGISTER_KERNEL_BUILDER(Name("EmbeddingBag")                      \
                              .Device(DEVICE_CPU)                   \
                              .TypeConstraint<T>("T")               \
                              .TypeConstraint<Tidx>("Tindices")     \
                              .TypeConstraint<Tsplits>("Tsplits"),  \
                          EmbeddingBagOp<T, Tidx, Tsplits, false>); \
  REGISTER_KERNEL_BUILDER(Name("ResourceEmbeddingBag")              \
                              .Device(DEVICE_CPU)                   \
                              .TypeConstraint<T>("dtype")           \
                              .TypeConstraint<Tidx>("Tindices")     \
                              .TypeConstraint<Tsplits>("Tsplits"),  \
                          EmbeddingBagOp<T, Tidx, Tsplits, true>);  \
  REGISTER_KERNEL_BUILDER(Name("EmbeddingBagGrad")                  \
                              .Device(DEVICE_CPU)                   \
                              .TypeConstraint<T>("T")               \
                              .TypeConstraint<Tidx>("Tindices")     \
                              .TypeConstraint<Tsplits>("Tsplits"),  \
                          EmbeddingBagGradOp<T, Tidx, Tsplits>);    \
  REGISTER_KERNEL_BUILDER(Name("EmbeddingBagWeightsGrad")           \
                              .Device(DEVICE_CPU)                   \
                              .TypeConstraint<T>("T")               \
                              .TypeConstraint<Tidx>("Tindices")     \
                              .TypeConstraint<Tsplits>("Tsplits"),  \
                          EmbeddingBagWeightsGradOp<T, Tidx, Tsplits>)
#define RECFLOW_REGISTER_BAG_ALL_(T)          \
  RECFLOW_REGISTER_BAG_(T, int32_t, int32_t); \
  RECFLOW_REGISTER_BAG_(T, int32_t, int64_t); \
  RECFLOW_REGISTER_BAG_(T, int64_t, int32_t); \
  RECFLOW_REGISTER_BAG_(T, int64_t, int64_t)
RECFLOW_REGISTER_BAG_ALL_(float);
RECFLOW_REGISTER_BAG_ALL_(double);
#undef RECFLOW_REGISTER_BAG_ALL_
#undef RECFLOW_REGISTER_BAG_

REGISTER_KERNEL_BUILDER(Name("ResourceGather")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("dtype", CopyTypes())
                            .TypeConstraint("Tindices", {DT_INT32, DT_INT64}),
                        ResourceGatherOp);
REGISTER_KERNEL_BUILDER(Name("VariableShape").Device(DEVICE_CPU),
                        VariableShapeOp);

}  // namespace
}  // namespace recflow
