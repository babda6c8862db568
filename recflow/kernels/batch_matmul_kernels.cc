// CPU kernel for BatchMatMulV2: x [..., m, k] times y [..., k, n] with the
// batch dimensions broadcast NumPy-style. Each matrix product is one
// OpenBLAS sgemm/dgemm call, single-threaded as in matmul_kernels.cc; the
// work units — whole matrices, or row blocks of them when there are fewer
// matrices than threads — are spread over the intra-op pool. Integer types
// use a plain loop.

#include <cstring>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/blas_gemm.h"

namespace recflow {
namespace {

template <typename T>
class BatchMatMulOp : public OpKernel {
 public:
  explicit BatchMatMulOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("adj_x", &adj_x_));
    c->SetStatus(c->GetAttr("adj_y", &adj_y_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& y = ctx->input(1);
    OP_REQUIRES(ctx, x.dims() >= 2 && y.dims() >= 2,
                errors::InvalidArgument("x and y must be at least rank 2, but x is ",
                                        x.shape().DebugString(), " and y is ",
                                        y.shape().DebugString()));
    const int rx = x.dims(), ry = y.dims();
    const int64_t x_rows = x.dim_size(rx - 2), x_cols = x.dim_size(rx - 1);
    const int64_t y_rows = y.dim_size(ry - 2), y_cols = y.dim_size(ry - 1);
    const int64_t m = adj_x_ ? x_cols : x_rows, k = adj_x_ ? x_rows : x_cols;
    const int64_t ky = adj_y_ ? y_cols : y_rows, n = adj_y_ ? y_rows : y_cols;
    OP_REQUIRES(ctx, k == ky,
                errors::InvalidArgument("x is ", x.shape().DebugString(),
                                        adj_x_ ? " (adjoint)" : "", " but y is ",
                                        y.shape().DebugString(), adj_y_ ? " (adjoint)" : "",
                                        "; inner dimensions must match (", k, " vs ", ky, ")"));
    // Broadcast the batch dimensions; x_index[b] / y_index[b] are the
    // matrices output batch b reads.
    const int rb = std::max(rx, ry) - 2;
    absl::InlinedVector<int64_t, 6> out_batch(rb), xb(rb), yb(rb);
    for (int i = 0; i < rb; ++i) {
      const int ix = rx - 2 - rb + i, iy = ry - 2 - rb + i;
      xb[i] = ix >= 0 ? x.dim_size(ix) : 1;
      yb[i] = iy >= 0 ? y.dim_size(iy) : 1;
      OP_REQUIRES(ctx, xb[i] == yb[i] || xb[i] == 1 || yb[i] == 1,
                  errors::InvalidArgument("batch dimensions of x ", x.shape().DebugString(),
                                          " and y ", y.shape().DebugString(),
                                          " do not broadcast"));
      out_batch[i] = xb[i] == 1 ? yb[i] : xb[i];
    }
    TensorShape out_shape(absl::MakeConstSpan(out_batch));
    out_shape.AddDim(m);
    out_shape.AddDim(n);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return;
    T* po = out->data<T>();
    if (k == 0) {
      std::memset(po, 0, out->TotalBytes());
      return;
    }
    int64_t batches = 1;
    for (int64_t d : out_batch) batches *= d;
    const int64_t x_size = x_rows * x_cols, y_size = y_rows * y_cols;
    // `rows` output rows per matrix product; when one plain y serves every
    // (unbroadcast, unadjointed) x, all batches are the rows of one product.
    int64_t rows = m;
    if (!adj_x_ && y.NumElements() == y_size && x.NumElements() == batches * x_size) {
      rows = batches * m;
      batches = 1;
    }
    std::vector<int64_t> x_index(batches), y_index(batches);
    {
      int64_t sx = 1, sy = 1;  // strides in matrices, 0 where broadcast
      absl::InlinedVector<int64_t, 6> stride_x(rb), stride_y(rb);
      for (int i = rb - 1; i >= 0; --i) {
        stride_x[i] = xb[i] == 1 ? 0 : sx;
        stride_y[i] = yb[i] == 1 ? 0 : sy;
        sx *= xb[i];
        sy *= yb[i];
      }
      for (int64_t b = 0; b < batches; ++b) {
        int64_t rem = b, ox = 0, oy = 0;
        for (int i = rb - 1; i >= 0; --i) {
          const int64_t idx = rem % out_batch[i];
          rem /= out_batch[i];
          ox += idx * stride_x[i];
          oy += idx * stride_y[i];
        }
        x_index[b] = ox;
        y_index[b] = oy;
      }
    }
    const T* px = x.data<T>();
    const T* py = y.data<T>();
    const int64_t o_size = rows * n;
    // Units of work: (batch, block of output rows).
    ThreadPool* pool = ctx->intra_op_pool();
    const double flops = 2.0 * static_cast<double>(batches) * static_cast<double>(rows) *
                         static_cast<double>(n) * static_cast<double>(k);
    const int threads = pool == nullptr || flops < 1e6 ? 1 : pool->NumThreads();
    int64_t row_blocks = 1;
    if (batches < threads) {
      row_blocks = std::min<int64_t>((threads + batches - 1) / batches, (rows + 15) / 16);
      row_blocks = std::max<int64_t>(row_blocks, 1);
    }
    const int64_t rows_per_block = (rows + row_blocks - 1) / row_blocks;
    auto run = [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / row_blocks;
        const int64_t r0 = (u % row_blocks) * rows_per_block;
        const int64_t r1 = std::min(rows, r0 + rows_per_block);
        if (r0 >= r1) continue;
        const T* a = px + x_index[b] * x_size;
        // Row r of op(x) starts at a + r * x_cols, or column r when adjoint.
        const T* a0 = adj_x_ ? a + r0 : a + r0 * x_cols;
        blas::Gemm<T>(adj_x_, adj_y_, r1 - r0, n, k, a0, x_cols, py + y_index[b] * y_size, y_cols,
                po + b * o_size + r0 * n, n);
      }
    };
    const int64_t units = batches * row_blocks;
    if (threads <= 1) {
      run(0, units);
    } else {
      // Cost in ns at roughly 4 flops per ns.
      const int64_t cost = std::max<int64_t>(1, static_cast<int64_t>(flops / units / 4));
      pool->ParallelFor(units, cost, run);
    }
  }

 private:
  bool adj_x_ = false;
  bool adj_y_ = false;
};

#define RECFLOW_REGISTER_BATCH_MATMUL_(T)                                                   \
  REGISTER_KERNEL_BUILDER(Name("BatchMatMulV2").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          BatchMatMulOp<T>)
RECFLOW_REGISTER_BATCH_MATMUL_(float);
RECFLOW_REGISTER_BATCH_MATMUL_(double);
RECFLOW_REGISTER_BATCH_MATMUL_(int32_t);
RECFLOW_REGISTER_BATCH_MATMUL_(int64_t);
#undef RECFLOW_REGISTER_BATCH_MATMUL_

}  // namespace
}  // namespace recflow
