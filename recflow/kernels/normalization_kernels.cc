// CPU kernels for LayerNorm, LayerNormGrad, FusedBatchNormV3 and
// FusedBatchNormGradV3 (semantics in ops/normalization_ops.h), for
// (T, U) = (float, float), (half, float), (bfloat16, float), (double,
// double). 16-bit inputs are computed in float; every sum is accumulated
// in double.
//
// Note [Deterministic normalization reductions]
// Sums over rows (LayerNorm's dgamma/dbeta, BatchNorm's per-channel
// statistics) are split into row blocks whose size depends only on the
// problem's shape, never on the thread pool: each block sums its rows in
// order into a partial of its own, and the partials are added in block
// order. Results are therefore bitwise identical with any number of intra-op
// threads. Statistics use one pass with a shift (the first row or element),
// sum(x - s) and sum((x - s)^2), which keeps the variance accurate when the
// mean is large relative to the spread.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

template <typename T>
inline auto Widen(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return static_cast<float>(v);
  } else {
    return v;
  }
}

template <typename T, typename A>
inline T Narrow(A v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// Runs fn(begin, end) over [0, n), on the intra-op pool when there is one
// (ParallelFor runs small loops inline by itself).
template <typename F>
void ParallelRange(OpKernelContext* ctx, int64_t n, int64_t cost_per_unit, F&& fn) {
  ThreadPool* pool = ctx->intra_op_pool();
  if (pool == nullptr || n <= 1) {
    if (n > 0) fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, cost_per_unit, fn);
  }
}

// sum(x[i] - shift) and sum((x[i] - shift)^2) over a row, in double, with
// four independent accumulators (a single chain of dependent adds would
// bound the loop by the add latency). The order is fixed by the code, so
// the result is deterministic.
template <typename T>
void RowShiftedSums(const T* x, int64_t d, double shift, double* sum, double* sum_sq) {
  double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= d; i += 4) {
    for (int k = 0; k < 4; ++k) {
      const double v = static_cast<double>(Widen(x[i + k])) - shift;
      s[k] += v;
      q[k] += v * v;
    }
  }
  for (; i < d; ++i) {
    const double v = static_cast<double>(Widen(x[i])) - shift;
    s[0] += v;
    q[0] += v * v;
  }
  *sum = (s[0] + s[1]) + (s[2] + s[3]);
  *sum_sq = (q[0] + q[1]) + (q[2] + q[3]);
}

// sum(dy[i] * gamma[i]) and sum(dy[i] * gamma[i] * (x[i] - mean) * inv_std)
// over a row, as RowShiftedSums.
template <typename T, typename U>
void RowGradSums(const T* dy, const T* x, const U* gamma, double mean, double inv_std, int64_t d,
                 double* sum_g, double* sum_gx) {
  double s[4] = {0, 0, 0, 0}, q[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= d; i += 4) {
    for (int k = 0; k < 4; ++k) {
      const double g = static_cast<double>(Widen(dy[i + k])) * gamma[i + k];
      s[k] += g;
      q[k] += g * ((static_cast<double>(Widen(x[i + k])) - mean) * inv_std);
    }
  }
  for (; i < d; ++i) {
    const double g = static_cast<double>(Widen(dy[i])) * gamma[i];
    s[0] += g;
    q[0] += g * ((static_cast<double>(Widen(x[i])) - mean) * inv_std);
  }
  *sum_g = (s[0] + s[1]) + (s[2] + s[3]);
  *sum_gx = (q[0] + q[1]) + (q[2] + q[3]);
}

// Row blocks for deterministic column sums: Note [Deterministic
// normalization reductions]. Partials take count * cols doubles per sum,
// bounded by kMaxPartials (+ one block's worth).
struct RowBlocks {
  int64_t size = 0;   // rows per block
  int64_t count = 0;  // blocks
};

RowBlocks PlanRowBlocks(int64_t rows, int64_t cols) {
  constexpr int64_t kTargetElements = 16 * 1024;  // per block
  constexpr int64_t kMaxBlocks = 64;
  constexpr int64_t kMaxPartials = int64_t{1} << 18;
  if (rows <= 0) return {};
  cols = std::max<int64_t>(cols, 1);
  int64_t count = rows * cols / kTargetElements;
  count = std::clamp<int64_t>(count, 1, kMaxBlocks);
  count = std::min(count, std::max<int64_t>(1, kMaxPartials / cols));
  count = std::min(count, rows);
  RowBlocks b;
  b.size = (rows + count - 1) / count;
  b.count = (rows + b.size - 1) / b.size;
  return b;
}

// Column sums over a [rows, cols] problem: out[k * cols + c] = sum over
// rows r of the k-th quantity at (r, c), for K quantities, accumulated by
// `tile(r_begin, r_end, c_begin, c_end, acc)` which adds its rows into
// acc[k * cols + c]. Tiles are row blocks x column chunks; the result does
// not depend on the pool.
template <int K, typename Tile>
void ColumnSums(OpKernelContext* ctx, int64_t rows, int64_t cols, int64_t cost_per_element,
                const Tile& tile, double* out) {
  std::fill_n(out, K * cols, 0.0);
  if (rows == 0 || cols == 0) return;
  constexpr int64_t kColChunk = 512;
  const RowBlocks blocks = PlanRowBlocks(rows, cols);
  const int64_t chunks = (cols + kColChunk - 1) / kColChunk;
  std::vector<double> partials;
  if (blocks.count > 1) partials.assign(static_cast<size_t>(blocks.count * K * cols), 0.0);
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / chunks, chunk = t % chunks;
      double* acc = blocks.count > 1 ? partials.data() + b * K * cols : out;
      tile(b * blocks.size, std::min(rows, (b + 1) * blocks.size), chunk * kColChunk,
           std::min(cols, (chunk + 1) * kColChunk), acc);
    }
  };
  ParallelRange(ctx, blocks.count * chunks,
                cost_per_element * blocks.size * std::min(cols, kColChunk), run);
  if (blocks.count == 1) return;
  ParallelRange(ctx, K * cols, blocks.count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      double sum = 0;
      for (int64_t b = 0; b < blocks.count; ++b) sum += partials[b * K * cols + i];
      out[i] = sum;
    }
  });
}

// ---------------------------------------------------------------------------
// LayerNorm

template <typename T, typename U>
class LayerNormOp : public OpKernel {
 public:
  explicit LayerNormOp(OpKernelConstruction* c) : OpKernel(c) {
    float epsilon = 0;
    c->SetStatus(c->GetAttr("epsilon", &epsilon));
    if (c->status().ok() && !(epsilon >= 0)) {
      c->SetStatus(errors::InvalidArgument("epsilon must be >= 0, got ", epsilon));
    }
    epsilon_ = epsilon;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& gamma = ctx->input(1);
    const Tensor& beta = ctx->input(2);
    OP_REQUIRES(ctx, x.dims() >= 1,
                errors::InvalidArgument("x must have rank >= 1 (features last) but is a scalar"));
    const int64_t d = x.dim_size(x.dims() - 1);
    for (const Tensor* v : {&gamma, &beta}) {
      OP_REQUIRES(
          ctx, v->dims() == 1 && v->dim_size(0) == d,
          errors::InvalidArgument(v == &gamma ? "gamma" : "beta", " must be a vector of size ", d,
                                  " (the last dimension of x ", x.shape().DebugString(),
                                  "), got shape ", v->shape().DebugString()));
    }
    TensorShape stats_shape = x.shape();
    stats_shape.RemoveDim(x.dims() - 1);
    Tensor *y = nullptr, *mean = nullptr, *inv_std = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, x.shape(), &y));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, stats_shape, &mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, stats_shape, &inv_std));
    const int64_t rows = stats_shape.num_elements();
    const T* px = x.data<T>();
    T* py = y->data<T>();
    const U* pg = gamma.data<U>();
    const U* pb = beta.data<U>();
    U* pm = mean->data<U>();
    U* pi = inv_std->data<U>();
    const double eps = epsilon_;
    ParallelRange(ctx, rows, 4 * d + 10, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = px + r * d;
        T* yr = py + r * d;  // may alias xr: each element is read before it is written
        if (d == 0) {
          pm[r] = pi[r] = std::numeric_limits<U>::quiet_NaN();
          continue;
        }
        const double shift = static_cast<double>(Widen(xr[0]));
        double s1 = 0, s2 = 0;
        RowShiftedSums(xr, d, shift, &s1, &s2);
        const double m1 = s1 / d;
        const double var = std::max(s2 / d - m1 * m1, 0.0);
        const U m = static_cast<U>(shift + m1);
        const U is = static_cast<U>(1.0 / std::sqrt(var + eps));
        pm[r] = m;
        pi[r] = is;
        for (int64_t i = 0; i < d; ++i) {
          yr[i] = Narrow<T>((static_cast<U>(Widen(xr[i])) - m) * is * pg[i] + pb[i]);
        }
      }
    });
  }

 private:
  double epsilon_ = 1e-3;
};

template <typename T, typename U>
class LayerNormGradOp : public OpKernel {
 public:
  explicit LayerNormGradOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& dy = ctx->input(0);
    const Tensor& x = ctx->input(1);
    const Tensor& gamma = ctx->input(2);
    const Tensor& mean = ctx->input(3);
    const Tensor& inv_std = ctx->input(4);
    OP_REQUIRES(
        ctx, dy.shape() == x.shape(),
        errors::InvalidArgument("dy and x must have the same shape, got ", dy.shape().DebugString(),
                                " and ", x.shape().DebugString()));
    OP_REQUIRES(ctx, x.dims() >= 1,
                errors::InvalidArgument("x must have rank >= 1 (features last) but is a scalar"));
    const int64_t d = x.dim_size(x.dims() - 1);
    OP_REQUIRES(ctx, gamma.dims() == 1 && gamma.dim_size(0) == d,
                errors::InvalidArgument("gamma must be a vector of size ", d, ", got shape ",
                                        gamma.shape().DebugString()));
    TensorShape stats_shape = x.shape();
    stats_shape.RemoveDim(x.dims() - 1);
    for (const Tensor* s : {&mean, &inv_std}) {
      OP_REQUIRES(
          ctx, s->shape() == stats_shape,
          errors::InvalidArgument(s == &mean ? "mean" : "inv_std", " must have shape ",
                                  stats_shape.DebugString(), " (x ", x.shape().DebugString(),
                                  " without its last dimension), got ", s->shape().DebugString()));
    }
    Tensor *dx = nullptr, *dgamma = nullptr, *dbeta = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, x.shape(), &dx));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({d}), &dgamma));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({d}), &dbeta));
    const int64_t rows = stats_shape.num_elements();
    const T* pdy = dy.data<T>();
    const T* px = x.data<T>();
    T* pdx = dx->data<T>();
    const U* pg = gamma.data<U>();
    const U* pm = mean.data<U>();
    const U* pi = inv_std.data<U>();

    // Row blocks compute dx and add their rows' dy * xhat and dy into
    // partials of dgamma and dbeta (Note [Deterministic normalization
    // reductions]).
    const RowBlocks blocks = PlanRowBlocks(rows, d);
    std::vector<double> partials(static_cast<size_t>(std::max<int64_t>(blocks.count, 1) * 2 * d),
                                 0.0);
    ParallelRange(ctx, blocks.count, blocks.size * (8 * d + 10), [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        double* dg = partials.data() + b * 2 * d;
        double* db = dg + d;
        const int64_t r_end = std::min(rows, (b + 1) * blocks.size);
        for (int64_t r = b * blocks.size; r < r_end; ++r) {
          const T* dyr = pdy + r * d;
          const T* xr = px + r * d;
          T* dxr = pdx + r * d;  // may alias dyr: read before written
          const double m = pm[r], is = pi[r];
          double sum_g = 0, sum_gx = 0;
          RowGradSums(dyr, xr, pg, m, is, d, &sum_g, &sum_gx);
          const double mean_g = sum_g / d, mean_gx = sum_gx / d;
          for (int64_t i = 0; i < d; ++i) {
            const double dyv = static_cast<double>(Widen(dyr[i]));
            const double xhat = (static_cast<double>(Widen(xr[i])) - m) * is;
            dg[i] += dyv * xhat;
            db[i] += dyv;
            dxr[i] = Narrow<T>(is * (dyv * pg[i] - mean_g - xhat * mean_gx));
          }
        }
      }
    });
    U* pdg = dgamma->data<U>();
    U* pdb = dbeta->data<U>();
    for (int64_t i = 0; i < d; ++i) {
      double sg = 0, sb = 0;
      for (int64_t b = 0; b < blocks.count; ++b) {
        sg += partials[b * 2 * d + i];
        sb += partials[b * 2 * d + d + i];
      }
      pdg[i] = static_cast<U>(sg);
      pdb[i] = static_cast<U>(sb);
    }
  }
};

// ---------------------------------------------------------------------------
// FusedBatchNorm

// Parses data_format; only channels-last layouts have CPU kernels.
absl::Status CheckChannelsLast(OpKernelConstruction* c, std::string* data_format) {
  RETURN_IF_ERROR(c->GetAttr("data_format", data_format));
  if (*data_format != "NHWC" && *data_format != "NDHWC") {
    return errors::InvalidArgument("data_format ", *data_format,
                                   " is not supported by the CPU kernel; use a channels-last "
                                   "layout (NHWC for [N,H,W,C] or [N,C], NDHWC for [N,D,H,W,C])");
  }
  return absl::OkStatus();
}

absl::Status CheckXRank(const Tensor& x, const std::string& data_format, const char* what) {
  const bool ok = data_format == "NHWC" ? (x.dims() == 4 || x.dims() == 2) : x.dims() == 5;
  if (!ok) {
    return errors::InvalidArgument(
        what, " must be ", data_format == "NHWC" ? "rank 4 [N,H,W,C] or rank 2 [N,C]" : "rank 5",
        " for data_format ", data_format, ", got shape ", x.shape().DebugString());
  }
  return absl::OkStatus();
}

absl::Status CheckChannelVector(const Tensor& v, int64_t channels, const char* what) {
  if (v.dims() != 1 || v.dim_size(0) != channels) {
    return errors::InvalidArgument(what, " must be a vector of size ", channels,
                                   " (x's channels), got shape ", v.shape().DebugString());
  }
  return absl::OkStatus();
}

template <typename T, typename U>
class FusedBatchNormOp : public OpKernel {
 public:
  explicit FusedBatchNormOp(OpKernelConstruction* c) : OpKernel(c) {
    float epsilon = 0, factor = 1;
    c->SetStatus(c->GetAttr("epsilon", &epsilon));
    c->SetStatus(c->GetAttr("exponential_avg_factor", &factor));
    c->SetStatus(c->GetAttr("is_training", &is_training_));
    c->SetStatus(CheckChannelsLast(c, &data_format_));
    epsilon_ = epsilon;
    factor_ = factor;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const Tensor& scale = ctx->input(1);
    const Tensor& offset = ctx->input(2);
    const Tensor& mean_in = ctx->input(3);
    const Tensor& var_in = ctx->input(4);
    OP_REQUIRES_OK(ctx, CheckXRank(x, data_format_, "x"));
    const int64_t c = x.dim_size(x.dims() - 1);
    OP_REQUIRES_OK(ctx, CheckChannelVector(scale, c, "scale"));
    OP_REQUIRES_OK(ctx, CheckChannelVector(offset, c, "offset"));
    const bool uses_running = !is_training_ || factor_ != 1.0;
    if (uses_running) {
      OP_REQUIRES_OK(ctx, CheckChannelVector(mean_in, c, "mean"));
      OP_REQUIRES_OK(ctx, CheckChannelVector(var_in, c, "variance"));
    }
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, x.shape(), &y));
    Tensor* reserve3 = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(5, TensorShape({}), &reserve3));
    reserve3->scalar<U>() = U(0);
    if (!is_training_) {
      Inference(ctx, x, scale, offset, mean_in, var_in, y);
      return;
    }
    Tensor *batch_mean = nullptr, *batch_var = nullptr, *saved_mean = nullptr, *saved_var = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({c}), &batch_mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({c}), &batch_var));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({c}), &saved_mean));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({c}), &saved_var));
    const int64_t rows = c == 0 ? 0 : x.NumElements() / c;
    if (rows == 0) {  // no batch: statistics are undefined
      for (Tensor* t : {batch_mean, batch_var, saved_mean, saved_var}) {
        std::fill_n(t->data<U>(), c, std::numeric_limits<U>::quiet_NaN());
      }
      return;
    }
    const T* px = x.data<T>();
    // Shifted sums per channel, shifted by the first row.
    std::vector<double> sums(2 * c);
    ColumnSums<2>(
        ctx, rows, c, 2,
        [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, double* acc) {
          double* s1 = acc;
          double* s2 = acc + c;
          for (int64_t r = r0; r < r1; ++r) {
            const T* xr = px + r * c;
            for (int64_t j = c0; j < c1; ++j) {
              const double v =
                  static_cast<double>(Widen(xr[j])) - static_cast<double>(Widen(px[j]));
              s1[j] += v;
              s2[j] += v * v;
            }
          }
        },
        sums.data());
    const U* ps = scale.data<U>();
    const U* po = offset.data<U>();
    U* pbm = batch_mean->data<U>();
    U* pbv = batch_var->data<U>();
    U* psm = saved_mean->data<U>();
    U* psv = saved_var->data<U>();
    std::vector<U> mean(c), mul(c);
    const double bessel =
        static_cast<double>(rows) / static_cast<double>(std::max<int64_t>(rows - 1, 1));
    for (int64_t j = 0; j < c; ++j) {
      const double m1 = sums[j] / rows;
      const double var = std::max(sums[c + j] / rows - m1 * m1, 0.0);
      const double m = static_cast<double>(Widen(px[j])) + m1;
      mean[j] = static_cast<U>(m);
      mul[j] = static_cast<U>(static_cast<double>(ps[j]) / std::sqrt(var + epsilon_));
      psm[j] = static_cast<U>(m);
      psv[j] = static_cast<U>(var);
      if (factor_ == 1.0) {
        pbm[j] = static_cast<U>(m);
        pbv[j] = static_cast<U>(var * bessel);
      } else {
        const double old_m = mean_in.data<U>()[j], old_v = var_in.data<U>()[j];
        pbm[j] = static_cast<U>((1 - factor_) * old_m + factor_ * m);
        pbv[j] = static_cast<U>((1 - factor_) * old_v + factor_ * bessel * var);
      }
    }
    Normalize(ctx, px, rows, c, mean.data(), mul.data(), po, y->data<T>());
  }

 private:
  void Inference(OpKernelContext* ctx, const Tensor& x, const Tensor& scale, const Tensor& offset,
                 const Tensor& mean_in, const Tensor& var_in, Tensor* y) {
    const int64_t c = scale.NumElements();
    const int64_t rows = c == 0 ? 0 : x.NumElements() / c;
    std::vector<U> mul(c);
    for (int64_t j = 0; j < c; ++j) {
      mul[j] = static_cast<U>(static_cast<double>(scale.data<U>()[j]) /
                              std::sqrt(static_cast<double>(var_in.data<U>()[j]) + epsilon_));
    }
    Normalize(ctx, x.data<T>(), rows, c, mean_in.data<U>(), mul.data(), offset.data<U>(),
              y->data<T>());
    // The given statistics pass through (shared buffers).
    ctx->set_output(1, mean_in);
    ctx->set_output(2, var_in);
    ctx->set_output(3, mean_in);
    ctx->set_output(4, var_in);
  }

  // y = (x - mean) * mul + offset, per channel. y may alias x.
  static void Normalize(OpKernelContext* ctx, const T* px, int64_t rows, int64_t c, const U* mean,
                        const U* mul, const U* offset, T* py) {
    ParallelRange(ctx, rows, 2 * c + 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = px + r * c;
        T* yr = py + r * c;
        for (int64_t j = 0; j < c; ++j) {
          yr[j] = Narrow<T>((static_cast<U>(Widen(xr[j])) - mean[j]) * mul[j] + offset[j]);
        }
      }
    });
  }

  double epsilon_ = 1e-4;
  double factor_ = 1.0;
  bool is_training_ = true;
  std::string data_format_;
};

template <typename T, typename U>
class FusedBatchNormGradOp : public OpKernel {
 public:
  explicit FusedBatchNormGradOp(OpKernelConstruction* c) : OpKernel(c) {
    float epsilon = 0;
    c->SetStatus(c->GetAttr("epsilon", &epsilon));
    c->SetStatus(c->GetAttr("is_training", &is_training_));
    c->SetStatus(CheckChannelsLast(c, &data_format_));
    epsilon_ = epsilon;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& dy = ctx->input(0);
    const Tensor& x = ctx->input(1);
    const Tensor& scale = ctx->input(2);
    const Tensor& mean = ctx->input(3);
    const Tensor& var = ctx->input(4);
    OP_REQUIRES(
        ctx, dy.shape() == x.shape(),
        errors::InvalidArgument("y_backprop and x must have the same shape, got ",
                                dy.shape().DebugString(), " and ", x.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckXRank(x, data_format_, "x"));
    const int64_t c = x.dim_size(x.dims() - 1);
    OP_REQUIRES_OK(ctx, CheckChannelVector(scale, c, "scale"));
    OP_REQUIRES_OK(ctx, CheckChannelVector(mean, c, "reserve_space_1 (mean)"));
    OP_REQUIRES_OK(ctx, CheckChannelVector(var, c, "reserve_space_2 (variance)"));
    Tensor *dx = nullptr, *dscale = nullptr, *doffset = nullptr, *r4 = nullptr, *r5 = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, x.shape(), &dx));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, TensorShape({c}), &dscale));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, TensorShape({c}), &doffset));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, TensorShape({0}), &r4));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, TensorShape({0}), &r5));
    const int64_t rows = c == 0 ? 0 : x.NumElements() / c;
    const T* pdy = dy.data<T>();
    const T* px = x.data<T>();
    const U* pm = mean.data<U>();
    std::vector<double> inv_std(c);
    for (int64_t j = 0; j < c; ++j) {
      inv_std[j] = 1.0 / std::sqrt(static_cast<double>(var.data<U>()[j]) + epsilon_);
    }
    // sum(dy) and sum(dy * (x - mean)) per channel.
    std::vector<double> sums(2 * c);
    ColumnSums<2>(
        ctx, rows, c, 3,
        [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1, double* acc) {
          double* s_dy = acc;
          double* s_dyx = acc + c;
          for (int64_t r = r0; r < r1; ++r) {
            const T* dyr = pdy + r * c;
            const T* xr = px + r * c;
            for (int64_t j = c0; j < c1; ++j) {
              const double g = static_cast<double>(Widen(dyr[j]));
              s_dy[j] += g;
              s_dyx[j] += g * (static_cast<double>(Widen(xr[j])) - pm[j]);
            }
          }
        },
        sums.data());
    // dx = a * dy + b * (x - mean) + k per channel:
    //   training:  a = scale * inv_std, b = -a * mean(dy (x - mean)) * inv_std^2,
    //              k = -a * mean(dy);
    //   inference: a = scale * inv_std, b = k = 0.
    std::vector<U> a(c), b(c), k(c);
    const U* ps = scale.data<U>();
    U* pds = dscale->data<U>();
    U* pdo = doffset->data<U>();
    for (int64_t j = 0; j < c; ++j) {
      const double aj = static_cast<double>(ps[j]) * inv_std[j];
      a[j] = static_cast<U>(aj);
      if (is_training_ && rows > 0) {
        b[j] = static_cast<U>(-aj * (sums[c + j] / rows) * inv_std[j] * inv_std[j]);
        k[j] = static_cast<U>(-aj * (sums[j] / rows));
      } else {
        b[j] = k[j] = U(0);
      }
      pds[j] = static_cast<U>(sums[c + j] * inv_std[j]);
      pdo[j] = static_cast<U>(sums[j]);
    }
    T* pdx = dx->data<T>();
    ParallelRange(ctx, rows, 3 * c + 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* dyr = pdy + r * c;
        const T* xr = px + r * c;
        T* dxr = pdx + r * c;  // may alias dyr: read before written
        for (int64_t j = 0; j < c; ++j) {
          dxr[j] = Narrow<T>(a[j] * static_cast<U>(Widen(dyr[j])) +
                             b[j] * (static_cast<U>(Widen(xr[j])) - pm[j]) + k[j]);
        }
      }
    });
  }

 private:
  double epsilon_ = 1e-4;
  bool is_training_ = true;
  std::string data_format_;
};

#define RECFLOW_REGISTER_NORM_(T, U)                                                             \
  REGISTER_KERNEL_BUILDER(                                                                       \
      Name("LayerNorm").Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<U>("U"),        \
      LayerNormOp<T, U>);                                                                        \
  REGISTER_KERNEL_BUILDER(                                                                       \
      Name("LayerNormGrad").Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<U>("U"),    \
      LayerNormGradOp<T, U>);                                                                    \
  REGISTER_KERNEL_BUILDER(                                                                       \
      Name("FusedBatchNormV3").Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint<U>("U"), \
      FusedBatchNormOp<T, U>);                                                                   \
  REGISTER_KERNEL_BUILDER(Name("FusedBatchNormGradV3")                                           \
                              .Device(DEVICE_CPU)                                                \
                              .TypeConstraint<T>("T")                                            \
                              .TypeConstraint<U>("U"),                                           \
                          FusedBatchNormGradOp<T, U>)

RECFLOW_REGISTER_NORM_(float, float);
RECFLOW_REGISTER_NORM_(half, float);
RECFLOW_REGISTER_NORM_(bfloat16, float);
RECFLOW_REGISTER_NORM_(double, double);
#undef RECFLOW_REGISTER_NORM_

}  // namespace
}  // namespace recflow
