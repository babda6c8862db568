// CPU kernels for the sparse optimizer updates (ops/sparse_training_ops.cc),
// float and double, int32 or int64 indices, ref and resource forms:
// SparseApply{GradientDescent,Momentum,Adagrad,AdagradV2,Adam,Ftrl,FtrlV2}.
//
// Each update touches only the rows in `indices`. Per row it runs the update
// rule the dense kernels run per slice (embedding/update_rules.h,
// TensorFlow's order of evaluation). Duplicate indices are applied in order, as
// TensorFlow's kernels do. Small updates run inline; big ones group the
// positions by row (a stable sort) and update groups in parallel, each group
// by one thread in the original order, so the result equals the sequential
// one and no two threads touch a row.
//
// Variables are found (ref inputs or resource handles), checked, locked in
// address order (Var::Update: in place unless a reader shares the buffer,
// then copy-on-write), and indices are checked before any row changes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "recflow/embedding/update_rules.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"
#include "recflow/kernels/state_kernels.h"
#include "recflow/kernels/training_kernels.h"

namespace recflow {
namespace {

// What every sparse update shares. `Update` provides:
//   static constexpr int kNumVars, kGrad;   (indices are at kGrad + 1)
//   struct Hyper;  Hyper Load(ctx) const;  absl::Status Validate(const Hyper&)
//   const; static void Row(const Hyper&, T* const* rows, const T* g, int64_t
//   inner);
template <typename T, typename Tidx, bool kResource, typename Update>
class SparseApplyOp : public OpKernel {
 public:
  explicit SparseApplyOp(OpKernelConstruction* c) : OpKernel(c), update_(c) {
    bool use_locking = false;  // always locked; see ops/training_ops.h
    c->SetStatus(c->GetAttr("use_locking", &use_locking));
    for (const auto& arg : c->op_def().input_arg())
      names_.push_back(arg.name());
  }

  void Compute(OpKernelContext* ctx) override {
    constexpr int kNumVars = Update::kNumVars, kGrad = Update::kGrad;
    auto found = LookupUpdateVars(ctx, kNumVars, kResource,
                                  DataTypeToEnum<T>::value, names_);
    OP_REQUIRES_OK(ctx, found.status());
    const std::vector<std::shared_ptr<Var>>& vars = *found;
    OP_REQUIRES_OK(
        ctx, CheckScalarInputs(ctx, kNumVars, {kGrad, kGrad + 1}, names_));
    const typename Update::Hyper hyper = update_.Load(ctx);
    OP_REQUIRES_OK(ctx, update_.Validate(hyper));
    const Tensor& grad = ctx->input(kGrad);
    const Tensor& indices = ctx->input(kGrad + 1);
    OP_REQUIRES(
        ctx, indices.dims() == 1,
        errors::InvalidArgument("indices must be a vector, but has shape ",
                                indices.shape().DebugString()));
    OP_REQUIRES(ctx,
                grad.dims() >= 1 && grad.dim_size(0) == indices.dim_size(0),
                errors::InvalidArgument("grad ", grad.shape().DebugString(),
                                        " must have one row per index (",
                                        indices.dim_size(0), " indices)"));
    std::vector<Tensor*> values;
    OP_REQUIRES_OK(ctx, UpdateVarsLocked(vars, &values, [&]() -> absl::Status {
                     return Apply(ctx, vars, values, grad, indices, hyper);
                   }));
    if constexpr (!kResource) ctx->set_output_ref(0, vars[0]);
  }

 private:
  absl::Status Apply(OpKernelContext* ctx,
                     const std::vector<std::shared_ptr<Var>>& vars,
                     const std::vector<Tensor*>& values, const Tensor& grad,
                     const Tensor& indices,
                     const typename Update::Hyper& hyper) const {
    constexpr int kNumVars = Update::kNumVars;
    const TensorShape& shape = values[0]->shape();
    if (shape.dims() < 1) {
      return errors::InvalidArgument(
          "variable '", vars[0]->name(),
          "' must be at least rank 1 for a sparse update, but has "
          "shape ",
          shape.DebugString());
    }
    RETURN_IF_ERROR(CheckSlotShapes(values, vars, names_));
    bool rows_match = grad.dims() == shape.dims();
    for (int d = 1; rows_match && d < shape.dims(); ++d) {
      rows_match = grad.dim_size(d) == shape.dim_size(d);
    }
    if (!rows_match) {
      return errors::InvalidArgument("grad ", grad.shape().DebugString(),
                                     " must match the shape of variable '",
                                     vars[0]->name(), "' ", shape.DebugString(),
                                     " after the first dimension");
    }
    const int64_t n = indices.dim_size(0), rows = shape.dim_size(0);
    const int64_t inner = rows == 0 ? 0 : shape.num_elements() / rows;
    const Tidx* idx = indices.data<Tidx>();
    for (int64_t i = 0; i < n; ++i) {
      if (idx[i] < 0 || idx[i] >= rows) {
        return errors::InvalidArgument(
            "indices[", i, "] = ", static_cast<int64_t>(idx[i]),
            " is out of range [0, ", rows, ") for variable '", vars[0]->name(),
            "' of shape ", shape.DebugString());
      }
    }
    T* bases[kNumVars];
    for (int i = 0; i < kNumVars; ++i) bases[i] = values[i]->data<T>();
    const T* g = grad.data<T>();
    // Rows are random accesses into variables far larger than the caches:
    // each step prefetches the rows (of every variable) of the index
    // kPrefetchDistance positions ahead among those it will apply.
    constexpr int64_t kPrefetchDistance = 8;
    auto prefetch = [&](int64_t i) {
      const int64_t off = static_cast<int64_t>(idx[i]) * inner;
      for (int v = 0; v < kNumVars; ++v) {
        const char* p = reinterpret_cast<const char*>(bases[v] + off);
        for (int64_t b = 0; b < inner * static_cast<int64_t>(sizeof(T)); b += 64) {
          __builtin_prefetch(p + b, 1, 1);
        }
      }
    };
    auto apply_one = [&](int64_t i) {
      const int64_t off = static_cast<int64_t>(idx[i]) * inner;
      T* rows_ptr[kNumVars];
      for (int v = 0; v < kNumVars; ++v) rows_ptr[v] = bases[v] + off;
      Update::Row(hyper, rows_ptr, g + i * inner, inner);
    };
    ThreadPool* pool = ctx->intra_op_pool();
    const int64_t cost = std::max<int64_t>(1, inner * Update::kCostPerElement);
    if (pool == nullptr || n * cost < kernels::kInlineCostNs || n < 2) {
      for (int64_t i = 0; i < n; ++i) {
        if (i + kPrefetchDistance < n) prefetch(i + kPrefetchDistance);
        apply_one(i);
      }
      return absl::OkStatus();
    }
    // Parallel: part p owns the rows [rows * p / P, rows * (p + 1) / P) and
    // applies, in index order, the positions whose row it owns. A row is
    // owned by one part, so repeated indices update it in order (as the
    // sequential loop does) with no locking and no sort; each part scans
    // the index vector once (sequential reads, cheap next to the row work).
    const int64_t parts =
        std::min<int64_t>(n, std::max<int64_t>(1, pool->NumThreads() + 1) * 4);
    pool->ParallelFor(parts, cost * std::max<int64_t>(1, n / parts), [&](int64_t b, int64_t e) {
      const int64_t lo = static_cast<int64_t>(static_cast<__int128>(rows) * b / parts);
      const int64_t hi = static_cast<int64_t>(static_cast<__int128>(rows) * e / parts);
      std::vector<int64_t> mine;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = static_cast<int64_t>(idx[i]);
        if (r >= lo && r < hi) mine.push_back(i);
      }
      const int64_t m = static_cast<int64_t>(mine.size());
      for (int64_t k = 0; k < m; ++k) {
        if (k + kPrefetchDistance < m) prefetch(mine[k + kPrefetchDistance]);
        apply_one(mine[k]);
      }
    });
    return absl::OkStatus();
  }

  Update update_;
  std::vector<std::string> names_;
};

template <typename T>
T Scalar(OpKernelContext* ctx, int i) {
  return ctx->input(i).scalar<T>();
}

// --- The updates (one row each, embedding/update_rules.h) --------------------

// var, alpha, grad, indices
template <typename T>
struct GradientDescentRows {
  static constexpr int kNumVars = 1, kGrad = 2, kCostPerElement = 1;
  struct Hyper {
    T lr;
  };
  explicit GradientDescentRows(OpKernelConstruction*) {}
  Hyper Load(OpKernelContext* ctx) const { return {Scalar<T>(ctx, 1)}; }
  absl::Status Validate(const Hyper&) const { return absl::OkStatus(); }
  static void Row(const Hyper& h, T* const* r, const T* g, int64_t n) {
    embedding::GradientDescentUpdate(h.lr, n, g, r[0]);
  }
};

// var, accum, lr, grad, indices, momentum
template <typename T>
struct MomentumRows {
  static constexpr int kNumVars = 2, kGrad = 3, kCostPerElement = 2;
  using Hyper = embedding::MomentumCoefficients<T>;
  explicit MomentumRows(OpKernelConstruction* c) {
    c->SetStatus(c->GetAttr("use_nesterov", &use_nesterov));
  }
  Hyper Load(OpKernelContext* ctx) const {
    return {Scalar<T>(ctx, 2), Scalar<T>(ctx, 5), use_nesterov};
  }
  absl::Status Validate(const Hyper&) const { return absl::OkStatus(); }
  static void Row(const Hyper& h, T* const* r, const T* g, int64_t n) {
    embedding::MomentumUpdate(h, n, g, r[0], r[1]);
  }
  bool use_nesterov = false;
};

// var, accum, lr, [epsilon,] grad, indices
template <typename T, bool kV2>
struct AdagradRows {
  static constexpr int kNumVars = 2, kGrad = kV2 ? 4 : 3, kCostPerElement = 4;
  using Hyper = embedding::AdagradCoefficients<T>;
  explicit AdagradRows(OpKernelConstruction* c) {
    c->SetStatus(c->GetAttr("update_slots", &update_slots));
  }
  Hyper Load(OpKernelContext* ctx) const {
    return {Scalar<T>(ctx, 2), kV2 ? Scalar<T>(ctx, 3) : T(0), update_slots};
  }
  absl::Status Validate(const Hyper&) const { return absl::OkStatus(); }
  static void Row(const Hyper& h, T* const* r, const T* g, int64_t n) {
    embedding::AdagradUpdate</*kEpsilon=*/kV2>(h, n, g, r[0], r[1]);
  }
  bool update_slots = true;
};

// var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
// indices
template <typename T>
struct AdamRows {
  static constexpr int kNumVars = 3, kGrad = 9, kCostPerElement = 6;
  using Hyper = embedding::AdamCoefficients<T>;
  explicit AdamRows(OpKernelConstruction* c) {
    c->SetStatus(c->GetAttr("use_nesterov", &use_nesterov));
  }
  Hyper Load(OpKernelContext* ctx) const {
    Hyper h = embedding::MakeAdamCoefficients(
        /*lr=*/Scalar<T>(ctx, 5), /*beta1=*/Scalar<T>(ctx, 6),
        /*beta2=*/Scalar<T>(ctx, 7), /*epsilon=*/Scalar<T>(ctx, 8),
        /*beta1_power=*/Scalar<T>(ctx, 3), /*beta2_power=*/Scalar<T>(ctx, 4));
    h.nesterov = use_nesterov;
    return h;
  }
  absl::Status Validate(const Hyper&) const { return absl::OkStatus(); }
  static void Row(const Hyper& h, T* const* r, const T* g, int64_t n) {
    embedding::AdamUpdate(h, n, g, r[0], r[1], r[2]);
  }
  bool use_nesterov = false;
};

// var, accum, linear, grad, indices, lr, l1, l2, [l2_shrinkage,] lr_power
template <typename T, bool kV2>
struct FtrlRows {
  static constexpr int kNumVars = 3, kGrad = 3, kCostPerElement = 20;
  static constexpr int kLr = 5, kL1 = 6, kL2 = 7, kShrinkage = 8,
                       kLrPower = kV2 ? 9 : 8;
  // The inputs as given (for Validate) and the coefficients they make.
  struct Hyper {
    T lr, l1, l2, shrinkage, lr_power;
    embedding::FtrlCoefficients<T> c;
  };
  explicit FtrlRows(OpKernelConstruction* c) {
    c->SetStatus(c->GetAttr("multiply_linear_by_lr", &multiply_linear_by_lr));
  }
  Hyper Load(OpKernelContext* ctx) const {
    Hyper h;
    h.lr = Scalar<T>(ctx, kLr);
    h.l1 = Scalar<T>(ctx, kL1);
    h.l2 = Scalar<T>(ctx, kL2);
    h.shrinkage = kV2 ? Scalar<T>(ctx, kShrinkage) : T(0);
    h.lr_power = Scalar<T>(ctx, kLrPower);
    h.c = embedding::MakeFtrlCoefficients(h.lr, h.l1, h.l2, h.shrinkage,
                                          h.lr_power, multiply_linear_by_lr);
    return h;
  }
  absl::Status Validate(const Hyper& h) const {
    return ValidateFtrlHyperparameters(h.lr, h.l1, h.l2, h.shrinkage,
                                       h.lr_power);
  }
  static void Row(const Hyper& h, T* const* r, const T* g, int64_t n) {
    embedding::FtrlUpdate</*kShrinkage=*/kV2>(h.c, n, g, r[0], r[1], r[2]);
  }
  bool multiply_linear_by_lr = false;
};

#define RECFLOW_REGISTER_SPARSE_(name, T, Tidx, R, ...)          \
  REGISTER_KERNEL_BUILDER(Name(name)                             \
                              .Device(DEVICE_CPU)                \
                              .TypeConstraint<T>("T")            \
                              .TypeConstraint<Tidx>("Tindices"), \
                          SparseApplyOp<T, Tidx, R, __VA_ARGS__>)

#define RECFLOW_REGISTER_FORMS_(name, T, Tidx, ...)            \
  RECFLOW_REGISTER_SPARSE_(name, T, Tidx, false, __VA_ARGS__); \
  RECFLOW_REGISTER_SPARSE_("Resource" name, T, Tidx, true, __VA_ARGS__)

#define RECFLOW_REGISTER_ALL_(T, Tidx)                                      \
  RECFLOW_REGISTER_FORMS_("SparseApplyGradientDescent", T, Tidx,            \
                          GradientDescentRows<T>);                          \
  RECFLOW_REGISTER_FORMS_("SparseApplyMomentum", T, Tidx, MomentumRows<T>); \
  RECFLOW_REGISTER_FORMS_("SparseApplyAdagrad", T, Tidx,                    \
                          AdagradRows<T, false>);                           \
  RECFLOW_REGISTER_FORMS_("SparseApplyAdagradV2", T, Tidx,                  \
                          AdagradRows<T, true>);                            \
  RECFLOW_REGISTER_FORMS_("SparseApplyAdam", T, Tidx, AdamRows<T>);         \
  RECFLOW_REGISTER_FORMS_("SparseApplyFtrl", T, Tidx, FtrlRows<T, false>);  \
  RECFLOW_REGISTER_FORMS_("SparseApplyFtrlV2", T, Tidx, FtrlRows<T, true>)

RECFLOW_REGISTER_ALL_(float, int32_t);
RECFLOW_REGISTER_ALL_(float, int64_t);
RECFLOW_REGISTER_ALL_(double, int32_t);
RECFLOW_REGISTER_ALL_(double, int64_t);

#undef RECFLOW_REGISTER_ALL_
#undef RECFLOW_REGISTER_FORMS_
#undef RECFLOW_REGISTER_SPARSE_

}  // namespace
}  // namespace recflow
