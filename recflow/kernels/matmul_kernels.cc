// CPU kernel for MatMul. float and double go to OpenBLAS, which recflow runs
// single-threaded: the output is split into row (or column) blocks across
// the intra-op pool, each block one sgemm/dgemm call, so all parallelism is
// recflow's and OpenBLAS never starts threads that compete with the pools.
// Integer types use a plain cache-friendly loop.

#include <cstring>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/blas_gemm.h"

namespace recflow {
namespace {

// OpenBLAS's own thread pool stays at one thread (see file comment).
const bool kBlasSingleThreaded = [] {
  openblas_set_num_threads(1);
  return true;
}();

template <typename T>
class MatMulOp : public OpKernel {
 public:
  explicit MatMulOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("transpose_a", &transpose_a_));
    c->SetStatus(c->GetAttr("transpose_b", &transpose_b_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    OP_REQUIRES(ctx, a.dims() == 2 && b.dims() == 2,
                errors::InvalidArgument("a and b must be matrices, but a is ",
                                        a.shape().DebugString(), " and b is ",
                                        b.shape().DebugString()));
    const int64_t m = a.dim_size(transpose_a_ ? 1 : 0);
    const int64_t k = a.dim_size(transpose_a_ ? 0 : 1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0);
    const int64_t n = b.dim_size(transpose_b_ ? 0 : 1);
    OP_REQUIRES(ctx, k == kb,
                errors::InvalidArgument("a is ", a.shape().DebugString(),
                                        transpose_a_ ? " (transposed)" : "", " but b is ",
                                        b.shape().DebugString(), transpose_b_ ? " (transposed)" : "",
                                        "; inner dimensions must match"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m, n}), &out));
    if (m == 0 || n == 0) return;
    T* pc = out->data<T>();
    if (k == 0) {
      std::memset(pc, 0, out->TotalBytes());
      return;
    }
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    const int64_t lda = a.dim_size(1), ldb = b.dim_size(1), ldc = n;
    ThreadPool* pool = ctx->intra_op_pool();
    // Split along the larger output dimension into one block per thread:
    // each block is one BLAS call that packs its operands once, so fewer,
    // larger blocks waste less (8 blocks cost ~19% more than 1 for 1024^3).
    // Small products (< ~1 Mflop) stay on one thread.
    const bool by_rows = m >= n;
    const int64_t units = by_rows ? m : n;
    const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int64_t threads = pool == nullptr || flops < 1e6 ? 1 : pool->NumThreads();
    const int64_t blocks = std::min<int64_t>(threads, (units + 15) / 16);
    const int64_t per_block = ((units + blocks - 1) / blocks + 15) / 16 * 16;  // multiple of 16
    auto block = [&](int64_t begin, int64_t end) {
      if (by_rows) {
        const T* a0 = transpose_a_ ? pa + begin : pa + begin * lda;
        blas::Gemm<T>(transpose_a_, transpose_b_, end - begin, n, k, a0, lda, pb, ldb, pc + begin * ldc,
                ldc);
      } else {
        const T* b0 = transpose_b_ ? pb + begin * ldb : pb + begin;
        blas::Gemm<T>(transpose_a_, transpose_b_, m, end - begin, k, pa, lda, b0, ldb, pc + begin, ldc);
      }
    };
    if (blocks <= 1) {
      block(0, units);
      return;
    }
    // One ParallelFor unit per block, each costed high enough to get its own shard.
    pool->ParallelFor(blocks, /*cost_per_unit=*/1'000'000, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t begin = b * per_block;
        const int64_t end = std::min(units, begin + per_block);
        if (begin < end) block(begin, end);
      }
    });
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
};

REGISTER_KERNEL_BUILDER(Name("MatMul").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        MatMulOp<float>);
REGISTER_KERNEL_BUILDER(Name("MatMul").Device(DEVICE_CPU).TypeConstraint<double>("T"),
                        MatMulOp<double>);
REGISTER_KERNEL_BUILDER(Name("MatMul").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
                        MatMulOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("MatMul").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
                        MatMulOp<int64_t>);

}  // namespace
}  // namespace recflow
