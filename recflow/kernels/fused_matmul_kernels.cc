// CPU kernel for _FusedMatMul: act(op(a) x op(b) + bias) in one pass.
//
// The product is computed much as MatMul's kernel does (matmul_kernels.cc):
// OpenBLAS kept single-threaded, the output split along rows (or columns)
// across the intra-op pool; here into panels of at most kEpiloguePanelBytes
// of output (up to kPanelsPerThread per thread), which the threads take as
// they come free. The bias and activation are the epilogue: each panel gets
// its gemm call and then,
// while the panel is still in cache, the bias + activation sweep. So the
// output is swept once more, in cache, instead of twice more from memory
// (a BiasAdd and an activation kernel, each a node to schedule). Measured
// single-threaded (thread CPU time): 1.04x (512^3) to 1.4x (4096x64 x 64x64,
// the shape of a recommendation MLP's narrow layers) faster than the
// unfused nodes.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/blas_gemm.h"
#include "recflow/kernels/cwise_ops_common.h"
#include "recflow/kernels/fused_matmul_epilogue.h"

namespace recflow {
namespace {

// A gemm panel's output is at most this big, so the epilogue finds it in
// cache (L2 or better) wherever it runs. Panels never go below
// kMinPanelUnits rows/columns, and are not made smaller: each gemm call
// packs its other operand again, and on a Xeon with 2 MB L2 per core 256 KB
// panels made 512x512x512 ~7% slower than whole blocks, while 1 MB panels
// measured the same as whole blocks (and bound the working set on bigger
// blocks).
constexpr int64_t kEpiloguePanelBytes = 1024 * 1024;
constexpr int64_t kMinPanelUnits = 64;
// Split across threads, a product is cut into up to this many panels per
// thread, taken by whichever thread is free.
constexpr int64_t kPanelsPerThread = 4;

}  // namespace

namespace fused_matmul {

absl::StatusOr<Activation> ParseFusedOps(const std::vector<std::string>& fused_ops,
                                         const char* op) {
  if (fused_ops.empty() || fused_ops[0] != "BiasAdd" || fused_ops.size() > 2) {
    return errors::Unimplemented(op,
                                 " supports fused_ops [BiasAdd] or [BiasAdd, ACTIVATION], got [",
                                 absl::StrJoin(fused_ops, ", "), "]");
  }
  if (fused_ops.size() == 1) return Activation::kNone;
  const std::string& act = fused_ops[1];
  if (act == "Relu") return Activation::kRelu;
  if (act == "Relu6") return Activation::kRelu6;
  if (act == "Elu") return Activation::kElu;
  if (act == "LeakyRelu") return Activation::kLeakyRelu;
  if (act == "Sigmoid") return Activation::kSigmoid;
  if (act == "Tanh") return Activation::kTanh;
  return errors::Unimplemented(op, ": unsupported activation '", act, "' in fused_ops [",
                               absl::StrJoin(fused_ops, ", "),
                               "]; supported: Relu, Relu6, Elu, LeakyRelu, Sigmoid, Tanh");
}

}  // namespace fused_matmul
}  // namespace recflow

// The epilogue loops are compiled like the elementwise kernels (Note
// [Vectorizing elementwise loops] in cwise_ops_common.h): branch-free
// functors, float transcendentals from cwise_fast_math.h (the same
// functions the Sigmoid / Tanh / Elu kernels use, so fused and unfused
// graphs agree to rounding of the bias add).
RECFLOW_CWISE_BEGIN_

#include "recflow/kernels/cwise_fast_math.h"

namespace recflow {
namespace {

using fused_matmul::Activation;
using fused_matmul::EpilogueFn;

inline float ExpOf(float x) { return cwise::fast::Exp(x); }
inline double ExpOf(double x) { return __builtin_exp(x); }
inline float Expm1Of(float x) { return cwise::fast::Exp(x) - 1.0f; }  // as the Elu kernel
inline double Expm1Of(double x) { return __builtin_expm1(x); }
inline float TanhOf(float x) { return cwise::fast::Tanh(x); }
inline double TanhOf(double x) { return __builtin_tanh(x); }

template <typename T, Activation kAct>
struct Act {
  T alpha;
  T operator()(T x) const {
    if constexpr (kAct == Activation::kNone) {
      return x;
    } else if constexpr (kAct == Activation::kRelu) {
      return x < T(0) ? T(0) : x;
    } else if constexpr (kAct == Activation::kRelu6) {
      const T low = x < T(0) ? T(0) : x;
      return x > T(6) ? T(6) : low;
    } else if constexpr (kAct == Activation::kLeakyRelu) {
      const T scaled = x * alpha;
      return x < T(0) ? scaled : x;
    } else if constexpr (kAct == Activation::kElu) {
      const T e = Expm1Of(x);
      return x < T(0) ? e : x;
    } else if constexpr (kAct == Activation::kSigmoid) {
      return T(1) / (T(1) + ExpOf(-x));
    } else {
      return TanhOf(x);
    }
  }
};

template <typename T, Activation kAct>
void BiasActivate(const void* bias_v, double alpha, void* c_v, int64_t n) {
  const T* __restrict bias = static_cast<const T*>(bias_v);
  T* __restrict c = static_cast<T*>(c_v);
  const Act<T, kAct> act{static_cast<T>(alpha)};
  for (int64_t j = 0; j < n; ++j) c[j] = act(c[j] + bias[j]);
}

}  // namespace

namespace fused_matmul {

template <typename T>
EpilogueFn EpilogueFor(Activation act) {
  switch (act) {
    case Activation::kNone:
      return BiasActivate<T, Activation::kNone>;
    case Activation::kRelu:
      return BiasActivate<T, Activation::kRelu>;
    case Activation::kRelu6:
      return BiasActivate<T, Activation::kRelu6>;
    case Activation::kElu:
      return BiasActivate<T, Activation::kElu>;
    case Activation::kLeakyRelu:
      return BiasActivate<T, Activation::kLeakyRelu>;
    case Activation::kSigmoid:
      return BiasActivate<T, Activation::kSigmoid>;
    case Activation::kTanh:
      return BiasActivate<T, Activation::kTanh>;
  }
  return BiasActivate<T, Activation::kNone>;
}

template EpilogueFn EpilogueFor<float>(Activation act);
template EpilogueFn EpilogueFor<double>(Activation act);

}  // namespace fused_matmul
}  // namespace recflow

RECFLOW_CWISE_END_

namespace recflow {
namespace {

using fused_matmul::EpilogueFn;
using fused_matmul::EpilogueFor;
using fused_matmul::ParseFusedOps;

template <typename T>
class FusedMatMulOp : public OpKernel {
 public:
  explicit FusedMatMulOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("transpose_a", &transpose_a_));
    c->SetStatus(c->GetAttr("transpose_b", &transpose_b_));
    std::vector<std::string> fused_ops;
    c->SetStatus(c->GetAttr("fused_ops", &fused_ops));
    float alpha = 0.2f;
    c->SetStatus(c->GetAttr("leakyrelu_alpha", &alpha));
    alpha_ = alpha;
    if (!c->status().ok()) return;
    auto act = ParseFusedOps(fused_ops);
    if (!act.ok()) {
      c->SetStatus(act.status());
      return;
    }
    epilogue_ = EpilogueFor<T>(*act);
    if (num_inputs() != 3) {
      c->SetStatus(
          errors::InvalidArgument("_FusedMatMul with fused_ops [", absl::StrJoin(fused_ops, ", "),
                                  "] needs num_args = 1 (the bias), got ", num_inputs() - 2));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    const Tensor& bias = ctx->input(2);
    OP_REQUIRES(
        ctx, a.dims() == 2 && b.dims() == 2,
        errors::InvalidArgument("a and b must be matrices, but a is ", a.shape().DebugString(),
                                " and b is ", b.shape().DebugString()));
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0);
    const int64_t k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0);
    const int64_t n = b.dim_size(transpose_b_ ? 0 : 1);
    OP_REQUIRES(ctx, k == kb,
                errors::InvalidArgument(
                    "a is ", a.shape().DebugString(), transpose_a_ ? " (transposed)" : "",
                    " but b is ", b.shape().DebugString(), transpose_b_ ? " (transposed)" : "",
                    "; inner dimensions must match"));
    OP_REQUIRES(ctx, bias.dims() == 1 && bias.dim_size(0) == n,
                errors::InvalidArgument("bias must be a vector of the product's ", n,
                                        " columns, but is ", bias.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m, n}), &out));
    if (m == 0 || n == 0) return;
    T* pc = out->data<T>();
    const T* pbias = bias.data<T>();
    if (k == 0) {
      // An empty product is zeros; the epilogue still applies.
      std::memset(pc, 0, out->TotalBytes());
      for (int64_t i = 0; i < m; ++i) epilogue_(pbias, alpha_, pc + i * n, n);
      return;
    }
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const int64_t lda = a.dim_size(1), ldb = b.dim_size(1), ldc = n;
    // Split as MatMul does, along the larger output dimension; small
    // products stay on one thread.
    ThreadPool* pool = ctx->intra_op_pool();
    const bool by_rows = m >= n;
    const int64_t units = by_rows ? m : n;
    const int64_t other = by_rows ? n : m;
    const double flops =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int64_t threads = pool == nullptr || flops < 1e6 ? 1 : pool->NumThreads();
    const int64_t blocks = std::min<int64_t>(threads, (units + 15) / 16);
    const int64_t panel = std::max<int64_t>(
        kMinPanelUnits, kEpiloguePanelBytes / static_cast<int64_t>(sizeof(T) * other));
    // Rows (or columns) [begin, end) of the output: gemm, then epilogue.
    auto gemm_and_epilogue = [&](int64_t begin, int64_t end) {
      if (by_rows) {
        const T* a0 = transpose_a_ ? pa + begin : pa + begin * lda;
        blas::Gemm<T>(transpose_a_, transpose_b_, end - begin, n, k, a0, lda, pb, ldb, pc + begin * ldc,
                ldc);
        for (int64_t i = begin; i < end; ++i) {
          epilogue_(pbias, alpha_, pc + i * ldc, n);
        }
      } else {
        const T* b0 = transpose_b_ ? pb + begin * ldb : pb + begin;
        blas::Gemm<T>(transpose_a_, transpose_b_, m, end - begin, k, pa, lda, b0, ldb, pc + begin, ldc);
        for (int64_t i = 0; i < m; ++i) {
          epilogue_(pbias + begin, alpha_, pc + i * ldc + begin, end - begin);
        }
      }
    };
    if (blocks <= 1) {
      for (int64_t p = 0; p < units; p += panel) gemm_and_epilogue(p, std::min(units, p + panel));
      return;
    }
    // Split: panels of up to kPanelsPerThread per thread (multiples of 16,
    // at least kMinPanelUnits unless a thread's share is smaller), taken by
    // whichever thread is free, so a helper that wakes late (0.9-1.4 ms was
    // seen on a 2-vCPU VM, against 2.5 ms halves) costs the caller only the
    // panels it takes over. Each extra panel packs the other operand once
    // more, which kMinPanelUnits bounds.
    const int64_t per_thread = ((units + blocks - 1) / blocks + 15) / 16 * 16;
    const int64_t balanced =
        ((units + kPanelsPerThread * blocks - 1) / (kPanelsPerThread * blocks) + 15) / 16 * 16;
    const int64_t shared_panel =
        std::min(panel, std::max(balanced, std::min(kMinPanelUnits, per_thread)));
    const int64_t num_panels = (units + shared_panel - 1) / shared_panel;
    pool->ParallelFor(num_panels, /*cost_per_unit=*/1'000'000, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        gemm_and_epilogue(p * shared_panel, std::min(units, (p + 1) * shared_panel));
      }
    });
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
  EpilogueFn epilogue_ = nullptr;
  double alpha_ = 0.2;
};

REGISTER_KERNEL_BUILDER(Name("_FusedMatMul").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        FusedMatMulOp<float>);
REGISTER_KERNEL_BUILDER(Name("_FusedMatMul").Device(DEVICE_CPU).TypeConstraint<double>("T"),
                        FusedMatMulOp<double>);

}  // namespace
}  // namespace recflow
