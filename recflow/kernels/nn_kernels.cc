// CPU kernels for BiasAdd, BiasAddGrad, Softmax, LogSoftmax, L2Loss and
// FactorizationMachine(Grad) (blocks of rows: each input read as one
// contiguous run per block, the block's sums kept in L1).
// (The cross-entropy losses are in nn_loss_kernels.cc, BatchMatMulV2 in
// batch_matmul_kernels.cc.) Row-wise work is split across the intra-op pool
// when the input is large; loops are compiled to vectorize (Note
// [Vectorizing reduction loops] in reduction_kernels.h).
#include "recflow/kernels/nn_kernels.h"

#include <string>
#include <vector>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/reduction_kernels.h"

RECFLOW_VECTORIZE_BEGIN_

namespace recflow {
namespace {

using nn::ParallelRows;

absl::Status ParseDataFormat(OpKernelConstruction* c, bool* nchw) {
  std::string format;
  RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC" && format != "NCHW") {
    return errors::InvalidArgument("data_format must be NHWC or NCHW, got '", format, "'");
  }
  *nchw = format == "NCHW";
  return absl::OkStatus();
}

// The [outer, channels, inner] view of a BiasAdd value: NHWC has inner 1,
// NCHW has the batch outside and the spatial dims inside.
struct ChannelView {
  int64_t outer = 1, channels = 1, inner = 1;
};

absl::StatusOr<ChannelView> ViewChannels(const TensorShape& shape, bool nchw) {
  const int rank = shape.dims();
  if (rank < (nchw ? 3 : 2)) {
    return errors::InvalidArgument("value must be at least rank ", nchw ? 3 : 2, " for ",
                                   nchw ? "NCHW" : "NHWC", ", but has shape ",
                                   shape.DebugString());
  }
  const int channel = nchw ? 1 : rank - 1;
  ChannelView v;
  v.channels = shape.dim_size(channel);
  for (int d = 0; d < channel; ++d) v.outer *= shape.dim_size(d);
  for (int d = channel + 1; d < rank; ++d) v.inner *= shape.dim_size(d);
  return v;
}

template <typename T>
class BiasAddOp : public OpKernel {
 public:
  explicit BiasAddOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(ParseDataFormat(c, &nchw_));
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& value = ctx->input(0);
    const Tensor& bias = ctx->input(1);
    OP_REQUIRES(ctx, bias.dims() == 1,
                errors::InvalidArgument("bias must be a vector, but has shape ",
                                        bias.shape().DebugString()));
    auto view = ViewChannels(value.shape(), nchw_);
    OP_REQUIRES_OK(ctx, view.status());
    OP_REQUIRES(ctx, view->channels == bias.dim_size(0),
                errors::InvalidArgument("bias has ", bias.dim_size(0), " elements but value ",
                                        value.shape().DebugString(), " has ", view->channels,
                                        " channels (data_format ", nchw_ ? "NCHW" : "NHWC",
                                        ")"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, value.shape(), &out));
    const T* in = value.data<T>();
    const T* b = bias.data<T>();
    T* o = out->data<T>();
    const int64_t channels = view->channels, inner = view->inner;
    if (inner == 1) {  // NHWC: rows of `channels`
      ParallelRows(ctx, view->outer, channels, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* x = in + r * channels;
          T* y = o + r * channels;  // may be x
          for (int64_t c = 0; c < channels; ++c) y[c] = x[c] + b[c];
        }
      });
    } else {  // NCHW: one bias value per row of `inner`
      ParallelRows(ctx, view->outer * channels, inner, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T bc = b[r % channels];
          const T* x = in + r * inner;
          T* y = o + r * inner;
          for (int64_t i = 0; i < inner; ++i) y[i] = x[i] + bc;
        }
      });
    }
  }

 private:
  bool nchw_ = false;
};

template <typename T>
class BiasAddGradOp : public OpKernel {
 public:
  explicit BiasAddGradOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(ParseDataFormat(c, &nchw_));
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    auto view = ViewChannels(grad.shape(), nchw_);
    OP_REQUIRES_OK(ctx, view.status());
    const int rank = grad.dims();
    std::vector<int64_t> axes;
    for (int d = 0; d < rank; ++d) {
      if (d != (nchw_ ? 1 : rank - 1)) axes.push_back(d);
    }
    auto plan = reduction::PlanReduction(grad.shape(), axes, /*keep_dims=*/false);
    OP_REQUIRES_OK(ctx, plan.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, plan->output_shape, &out));
    reduction::RunReduction<T, reduction::SumReducer<T>>(ctx->intra_op_pool(), *plan, grad, out);
  }

 private:
  bool nchw_ = false;
};

// Softmax (kLog false) and LogSoftmax (kLog true) along the last dimension.
template <typename T, bool kLog>
class SoftmaxOp : public OpKernel {
 public:
  explicit SoftmaxOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    OP_REQUIRES(ctx, logits.dims() >= 1,
                errors::InvalidArgument("logits must have at least one dimension, but has shape ",
                                        logits.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, logits.shape(), &out));
    const int64_t classes = logits.dim_size(logits.dims() - 1);
    if (classes == 0 || logits.NumElements() == 0) return;
    const int64_t rows = logits.NumElements() / classes;
    const T* in = logits.data<T>();
    T* o = out->data<T>();
    // ~10 element-costs per class: one exp and a few passes.
    ParallelRows(ctx, rows, 10 * classes, [&](int64_t r0, int64_t r1) {
      std::vector<T> scratch(kLog ? classes : 0);
      for (int64_t r = r0; r < r1; ++r) {
        const T* x = in + r * classes;
        T* y = o + r * classes;  // may be x: each y[j] is written after x[j] is read
        const T max = nn::RowMax(x, classes);
        if constexpr (kLog) {
          const T log_sum = nn::Log(nn::ShiftedExp(x, classes, max, scratch.data()));
          for (int64_t j = 0; j < classes; ++j) y[j] = (x[j] - max) - log_sum;
        } else {
          const T inv = T(1) / nn::ShiftedExp(x, classes, max, y);
          for (int64_t j = 0; j < classes; ++j) y[j] *= inv;
        }
      }
    });
  }
};

template <typename T>
class L2LossOp : public OpKernel {
 public:
  explicit L2LossOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& t = ctx->input(0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    const T* p = t.data<T>();
    const int64_t n = t.NumElements();
    ThreadPool* pool = ctx->intra_op_pool();
    T total = 0;
    if (pool == nullptr || n < reduction::kInlineElements) {
      total = SumOfSquares(p, n);
    } else {
      const int64_t chunks = 4 * pool->NumThreads();
      std::vector<T> partial(chunks);
      pool->ParallelFor(chunks, n / chunks, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
          partial[c] = SumOfSquares(p + b, e - b);
        }
      });
      for (T v : partial) total += v;
    }
    out->scalar<T>() = total / T(2);
  }

 private:
  // Eight accumulators so the loop vectorizes, summed per block.
  static T SumOfSquares(const T* p, int64_t n) {
    constexpr int64_t kBlock = 4096;
    T total = 0;
    for (int64_t start = 0; start < n; start += kBlock) {
      const int64_t end = std::min(n, start + kBlock);
      T acc[8] = {};
      int64_t i = start;
      for (; i + 8 <= end; i += 8) {
        for (int k = 0; k < 8; ++k) acc[k] += p[i + k] * p[i + k];
      }
      for (; i < end; ++i) acc[0] += p[i] * p[i];
      total += ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
    return total;
  }
};

// The N inputs of a FactorizationMachine(Grad) starting at `first`: each
// [B, D], all of one shape; their data.
template <typename T>
absl::Status FmInputs(OpKernelContext* ctx, int first, TensorShape* shape,
                      std::vector<const T*>* data) {
  const int n = ctx->num_inputs() - first;
  const Tensor& x0 = ctx->input(first);
  if (x0.dims() != 2) {
    return errors::InvalidArgument("inputs must be matrices [B, D], but input 0 has shape ",
                                   x0.shape().DebugString());
  }
  for (int i = 0; i < n; ++i) {
    const Tensor& x = ctx->input(first + i);
    if (x.shape() != x0.shape()) {
      return errors::InvalidArgument("inputs must all have the same shape, but input ", i,
                                     " has shape ", x.shape().DebugString(), " and input 0 ",
                                     x0.shape().DebugString());
    }
    data->push_back(x.data<T>());
  }
  *shape = x0.shape();
  return absl::OkStatus();
}

// Rows per block of the FactorizationMachine kernels: each input is read as
// one contiguous run of kFmBlockRows * D values (N short strided streams per
// row defeat the prefetchers), and the block's sums stay in L1.
constexpr int64_t kFmBlockRows = 64;

// sum[k] = sum_i x_i[row0 * dim + k] and, with `sq`, sq[k] = the sum of the
// squares, for k < len: one block of rows, all inputs.
template <typename T>
inline void SumInputsBlock(const std::vector<const T*>& xs, int64_t offset, int64_t len, T* sum,
                           T* sq) {
  std::fill_n(sum, len, T(0));
  if (sq != nullptr) std::fill_n(sq, len, T(0));
  for (const T* base : xs) {
    const T* x = base + offset;
    if (sq != nullptr) {
      for (int64_t k = 0; k < len; ++k) {
        sum[k] += x[k];
        sq[k] += x[k] * x[k];
      }
    } else {
      for (int64_t k = 0; k < len; ++k) sum[k] += x[k];
    }
  }
}

// Calls fn(row0, row1) over blocks of kFmBlockRows rows, split across the
// intra-op pool when the work is large.
template <typename F>
void ForFmBlocks(OpKernelContext* ctx, int64_t rows, int64_t cost_per_row, F&& fn) {
  const int64_t blocks = (rows + kFmBlockRows - 1) / kFmBlockRows;
  ParallelRows(ctx, blocks, cost_per_row * kFmBlockRows, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      fn(b * kFmBlockRows, std::min(rows, (b + 1) * kFmBlockRows));
    }
  });
}

// output[b] = 0.5 * sum_d ((sum_i x_i[b, d])^2 - sum_i x_i[b, d]^2).
template <typename T>
class FactorizationMachineOp : public OpKernel {
 public:
  explicit FactorizationMachineOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    TensorShape shape;
    std::vector<const T*> xs;
    OP_REQUIRES_OK(ctx, FmInputs(ctx, 0, &shape, &xs));
    const int64_t rows = shape.dim_size(0), dim = shape.dim_size(1);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({rows}), &out));
    T* o = out->data<T>();
    const int64_t n = static_cast<int64_t>(xs.size());
    ForFmBlocks(ctx, rows, 2 * n * dim, [&](int64_t r0, int64_t r1) {
      const int64_t len = (r1 - r0) * dim;
      std::vector<T> sum(len), sq(len);
      SumInputsBlock(xs, r0 * dim, len, sum.data(), sq.data());
      for (int64_t r = r0; r < r1; ++r) {
        const T* s = sum.data() + (r - r0) * dim;
        const T* q = sq.data() + (r - r0) * dim;
        T pair = 0;
        for (int64_t d = 0; d < dim; ++d) pair += s[d] * s[d] - q[d];
        o[r] = T(0.5) * pair;
      }
    });
  }
};

// backprops[i][b] = grad[b] * (sum_j x_j[b] - x_i[b]).
template <typename T>
class FactorizationMachineGradOp : public OpKernel {
 public:
  explicit FactorizationMachineGradOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    TensorShape shape;
    std::vector<const T*> xs;
    OP_REQUIRES_OK(ctx, FmInputs(ctx, 1, &shape, &xs));
    const int64_t rows = shape.dim_size(0), dim = shape.dim_size(1);
    OP_REQUIRES(ctx, grad.dims() == 1 && grad.dim_size(0) == rows,
                errors::InvalidArgument("grad ", grad.shape().DebugString(),
                                        " must be a vector with one element per row of the "
                                        "inputs ",
                                        shape.DebugString()));
    const int64_t n = static_cast<int64_t>(xs.size());
    std::vector<T*> outs;
    for (int64_t i = 0; i < n; ++i) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(static_cast<int>(i), shape, &out));
      outs.push_back(out->data<T>());
    }
    const T* g = grad.data<T>();
    ForFmBlocks(ctx, rows, 3 * n * dim, [&](int64_t r0, int64_t r1) {
      const int64_t len = (r1 - r0) * dim;
      std::vector<T> sum(len), gs(len);  // gs[k]: the grad of k's row
      SumInputsBlock(xs, r0 * dim, len, sum.data(), static_cast<T*>(nullptr));
      for (int64_t r = r0; r < r1; ++r) std::fill_n(gs.data() + (r - r0) * dim, dim, g[r]);
      for (int64_t i = 0; i < n; ++i) {
        const T* x = xs[i] + r0 * dim;
        T* y = outs[i] + r0 * dim;
        for (int64_t k = 0; k < len; ++k) y[k] = gs[k] * (sum[k] - x[k]);
      }
    });
  }
};

#define RECFLOW_REGISTER_BIAS_(T)                                                       \
  REGISTER_KERNEL_BUILDER(Name("BiasAdd").Device(DEVICE_CPU).TypeConstraint<T>("T"),    \
                          BiasAddOp<T>);                                                \
  REGISTER_KERNEL_BUILDER(Name("BiasAddGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          BiasAddGradOp<T>)
RECFLOW_REGISTER_BIAS_(float);
RECFLOW_REGISTER_BIAS_(double);
RECFLOW_REGISTER_BIAS_(int32_t);
RECFLOW_REGISTER_BIAS_(int64_t);
#undef RECFLOW_REGISTER_BIAS_

#define RECFLOW_REGISTER_FLOAT_NN_(T)                                                   \
  REGISTER_KERNEL_BUILDER(Name("Softmax").Device(DEVICE_CPU).TypeConstraint<T>("T"),    \
                          SoftmaxOp<T, false>);                                         \
  REGISTER_KERNEL_BUILDER(Name("LogSoftmax").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          SoftmaxOp<T, true>);                                          \
  REGISTER_KERNEL_BUILDER(Name("L2Loss").Device(DEVICE_CPU).TypeConstraint<T>("T"),     \
                          L2LossOp<T>);                                                 \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("FactorizationMachine").Device(DEVICE_CPU).TypeConstraint<T>("T"),           \
      FactorizationMachineOp<T>);                                                       \
  REGISTER_KERNEL_BUILDER(                                                              \
      Name("FactorizationMachineGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      FactorizationMachineGradOp<T>)
RECFLOW_REGISTER_FLOAT_NN_(float);
RECFLOW_REGISTER_FLOAT_NN_(double);
#undef RECFLOW_REGISTER_FLOAT_NN_

}  // namespace
}  // namespace recflow

RECFLOW_VECTORIZE_END_
