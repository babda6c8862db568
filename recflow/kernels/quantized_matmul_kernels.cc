// CPU kernel for _DynamicQuantizedMatMul (ops/fused_ops.cc): what MatMul or
// _FusedMatMul computes, with the product in 8-bit integers. The graph
// optimizer puts it in place of float matmuls by weights when a session is
// asked for int8 matmuls (GraphOptimizerOptions::matmul_precision, `recflow
// serve --matmul_precision=int8`). Note [Dynamic int8 matmul].

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "recflow/core/mutex.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/blas_gemm.h"
#include "recflow/kernels/cwise_ops_common.h"
#include "recflow/kernels/fused_matmul_epilogue.h"
#include "recflow/kernels/onednn_gemm.h"

// Note [Dynamic int8 matmul]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// y = a b (+ bias, activation) for float a [m, k] and weights b [k, n]:
//
//  - b is quantized once per value it takes: column j symmetrically to int8
//    in [-127, 127] with scale sb_j = max_k |b[k, j]| / 127. The kernel keeps
//    a copy of the float b it quantized and compares each call's b with it
//    (a memcmp, a few percent of the product's time), so a model update that
//    rewrites the weights is picked up at its next call, never served stale.
//    When b is a resource variable's value or a constant (the graph pass says
//    so: weights_copy_on_write), the kernel holds b's buffer instead, and the
//    same buffer is the same weights: a variable updated while its buffer is
//    shared gets a new one.
//  - a is quantized per call and per row (dynamic quantization, no
//    calibration set to go stale): row i maps [lo_i, hi_i] (its min and max)
//    onto [0, 127] with step s_i = (hi_i - lo_i) / 127. Seven bits, not
//    eight: CPUs without VNNI add pairs of u8 x s8 products in saturating
//    16-bit lanes (onednn_gemm.h). Each candidate row gets its own range, so
//    one outlier request does not coarsen the others.
//  - acc = qa qb in int32 (oneDNN's u8 x s8 GEMM), and since
//    a[i, k] ~ s_i qa[i, k] + lo_i and b[k, j] ~ sb_j qb[k, j],
//      y[i, j] ~ s_i sb_j acc[i, j] + lo_i sb_j sum_k qb[k, j]
//    (the second term is the zero-point correction, its column sums made
//    once with b's quantization). Then bias and activation, through the
//    same epilogue as _FusedMatMul.
//
// Error: |y - a b| <= sum_k (s_i/2 |b[k, j]| + sb_j/2 |a[i, k]| + s_i sb_j/4)
// per element (rounding to nearest on both sides), which the tests check.
// Rows or weights holding Inf or NaN are computed in float instead, so they
// give what MatMul gives. So are products by small weights (fewer than
// kMinQuantizedWeights elements: a DeepFM's linear part [13, 1], its dense
// projection [13, 16], the output layer [128, 1]): they cost little in
// float, and quantizing them cost the most accuracy (on bench/run serving's
// DeepFM, quantizing them too moved predictions by up to 7e-3).
// Rows are split across the intra-op pool as MatMul splits them, each block
// quantized, multiplied and finished on its thread.
//
// Note [Calibration]
// ~~~~~~~~~~~~~~~~~~
// One range per row is coarse when a row mixes scales: a DeepFM's first
// layer reads 13 log-scaled dense features (up to ~10) next to 26 embeddings
// (~0.05), and a step of range/127 wipes out the embeddings. So the first
// calibration_calls calls (16 by default; the op's attr) are computed in
// float while the kernel records each input column's largest magnitude
// range_k. Then, as SmoothQuant does with alpha 0.5, column k of a is
// divided and row k of b multiplied by c_k = sqrt(range_k / max_j |b[k, j]|)
// (the product is unchanged), which evens out the columns of a (and of b)
// before each is quantized. The ranges stay fixed afterwards, so a row's
// answer depends on that row alone, never on what else is in its batch; new
// weights are equalized with the same ranges. On bench/run serving's DeepFM
// this cut the largest change of a served probability (256 candidates)
// from 6.0e-3 to 2.9e-3.

namespace recflow {
namespace {

using fused_matmul::EpilogueFn;

// Weights with fewer elements stay float (Note [Dynamic int8 matmul]).
constexpr int64_t kMinQuantizedWeights = 4096;

// b quantized: see the Note. Immutable once made; shared by the calls that
// run while a newer one replaces it.
struct QuantizedWeights {
  std::vector<float> source;  // b as it was given (its layout), to compare
  Tensor held;                // or b itself, when its buffer is copy-on-write
  bool transposed = false;    // b is [n, k]
  int64_t k = 0, n = 0;
  bool use_float = false;     // small, or some weight is Inf or NaN
  std::vector<int8_t> q;      // [k, n]
  std::vector<float> scale;   // [n]: sb_j
  std::vector<float> offset;  // [n]: sb_j * sum_k q[k, j]
  // Equalization (Note [Calibration]): the activation ranges it was made
  // with (null: none), and 1 / c_k for each row of b (empty: none).
  std::shared_ptr<const std::vector<float>> ranges;
  std::vector<float> inv_equalize;
  std::unique_ptr<onednn::U8S8Gemm> gemm;
};

}  // namespace
}  // namespace recflow

RECFLOW_CWISE_BEGIN_

namespace recflow {
namespace {

// out[p] = a[p] * scale[p].
void ScaleRow(const float* __restrict a, const float* __restrict scale, int64_t k,
              float* __restrict out) {
  for (int64_t p = 0; p < k; ++p) out[p] = a[p] * scale[p];
}

// range[p] = max(range[p], |a[p]|) over the rows of a, NaN and Inf skipped.
void UpdateRanges(const float* __restrict a, int64_t rows, int64_t k, float* __restrict range) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* __restrict row = a + i * k;
    for (int64_t p = 0; p < k; ++p) {
      const float v = row[p] < 0.0f ? -row[p] : row[p];
      const bool ok = v <= 3.0e38f;  // false for Inf and NaN
      range[p] = ok && v > range[p] ? v : range[p];
    }
  }
}

// Quantizes row `a` (k values) to q in [0, 127]; returns false when the row
// holds Inf or NaN (not quantized).
bool QuantizeRow(const float* __restrict a, int64_t k, uint8_t* __restrict q, float* step,
                 float* lo_out) {
  float lo = a[0], hi = a[0], nan_probe = 0.0f;  // x * 0 is NaN for Inf and NaN
  for (int64_t p = 0; p < k; ++p) {
    lo = a[p] < lo ? a[p] : lo;
    hi = a[p] > hi ? a[p] : hi;
    nan_probe += a[p] * 0.0f;
  }
  const float range = hi - lo;
  if (nan_probe != 0.0f || !std::isfinite(range)) return false;
  *lo_out = lo;
  if (range == 0.0f) {
    *step = 0.0f;
    std::memset(q, 0, k);
    return true;
  }
  *step = range / 127.0f;
  const float inv = 127.0f / range;
  for (int64_t p = 0; p < k; ++p) {
    float v = (a[p] - lo) * inv + 0.5f;
    v = v > 127.0f ? 127.0f : v;
    v = v < 0.0f ? 0.0f : v;
    q[p] = static_cast<uint8_t>(static_cast<int32_t>(v));
  }
  return true;
}

// y[j] = acc[j] * (step * scale[j]) + lo * offset[j].
void Dequantize(const int32_t* __restrict acc, int64_t n, float step, float lo,
                const float* __restrict scale, const float* __restrict offset,
                float* __restrict y) {
  for (int64_t j = 0; j < n; ++j) {
    y[j] = static_cast<float>(acc[j]) * (step * scale[j]) + lo * offset[j];
  }
}

}  // namespace
}  // namespace recflow

RECFLOW_CWISE_END_

namespace recflow {
namespace {

absl::StatusOr<std::shared_ptr<const QuantizedWeights>> Quantize(
    const float* b, bool transposed, int64_t k, int64_t n,
    std::shared_ptr<const std::vector<float>> ranges) {
  auto w = std::make_shared<QuantizedWeights>();
  w->source.assign(b, b + k * n);
  w->transposed = transposed;
  w->k = k;
  w->n = n;
  w->ranges = ranges;
  if (k * n < kMinQuantizedWeights) {
    w->use_float = true;
    return std::shared_ptr<const QuantizedWeights>(std::move(w));
  }
  for (int64_t i = 0; i < k * n; ++i) {
    if (!std::isfinite(b[i])) {
      w->use_float = true;
      return std::shared_ptr<const QuantizedWeights>(std::move(w));
    }
  }
  // c_k = sqrt(range_k / max_j |b[k, j]|) (1 where either is 0): row k of
  // b is multiplied by c_k, column k of a divided by it.
  std::vector<float> equalize;
  if (ranges != nullptr && static_cast<int64_t>(ranges->size()) == k) {
    equalize.assign(k, 1.0f);
    w->inv_equalize.assign(k, 1.0f);
    for (int64_t p = 0; p < k; ++p) {
      float wmax = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        wmax = std::max(wmax, std::abs(transposed ? b[j * k + p] : b[p * n + j]));
      }
      const float amax = (*ranges)[p];
      if (wmax > 0.0f && amax > 0.0f && std::isfinite(amax)) {
        equalize[p] = std::sqrt(amax / wmax);
        w->inv_equalize[p] = 1.0f / equalize[p];
      }
    }
  }
  auto at = [&](int64_t p, int64_t j) {
    const float v = transposed ? b[j * k + p] : b[p * n + j];
    return equalize.empty() ? v : v * equalize[p];
  };
  w->q.resize(k * n);
  w->scale.assign(n, 0.0f);
  w->offset.assign(n, 0.0f);
  std::vector<float> max_abs(n, 0.0f);
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) max_abs[j] = std::max(max_abs[j], std::abs(at(p, j)));
  }
  std::vector<int64_t> sums(n, 0);
  for (int64_t j = 0; j < n; ++j) w->scale[j] = max_abs[j] / 127.0f;
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      const float s = w->scale[j];
      const int32_t v = s == 0.0f ? 0 : static_cast<int32_t>(std::lround(at(p, j) / s));
      const int8_t q = static_cast<int8_t>(std::clamp(v, -127, 127));
      w->q[p * n + j] = q;
      sums[j] += q;
    }
  }
  for (int64_t j = 0; j < n; ++j) w->offset[j] = w->scale[j] * static_cast<float>(sums[j]);
  ASSIGN_OR_RETURN(w->gemm, onednn::U8S8Gemm::Create(k, n));
  return std::shared_ptr<const QuantizedWeights>(std::move(w));
}

class DynamicQuantizedMatMulOp : public OpKernel {
 public:
  explicit DynamicQuantizedMatMulOp(OpKernelConstruction* c) : OpKernel(c) {
    bool transpose_a = false;
    c->SetStatus(c->GetAttr("transpose_a", &transpose_a));
    c->SetStatus(c->GetAttr("transpose_b", &transpose_b_));
    std::vector<std::string> fused_ops;
    c->SetStatus(c->GetAttr("fused_ops", &fused_ops));
    float alpha = 0.2f;
    c->SetStatus(c->GetAttr("leakyrelu_alpha", &alpha));
    alpha_ = alpha;
    c->SetStatus(c->GetAttr("calibration_calls", &calibration_calls_));
    c->SetStatus(c->GetAttr("weights_copy_on_write", &weights_copy_on_write_));
    if (!c->status().ok()) return;
    calibrated_.store(calibration_calls_ == 0);
    if (transpose_a) {
      c->SetStatus(errors::Unimplemented(
          "_DynamicQuantizedMatMul quantizes the rows of a, so a must not be transposed "
          "(transpose_a=true)"));
      return;
    }
    if (!fused_ops.empty()) {
      auto act = fused_matmul::ParseFusedOps(fused_ops, "_DynamicQuantizedMatMul");
      if (!act.ok()) {
        c->SetStatus(act.status());
        return;
      }
      epilogue_ = fused_matmul::EpilogueFor<float>(*act);
    }
    const int want_args = fused_ops.empty() ? 0 : 1;
    if (num_inputs() != 2 + want_args) {
      c->SetStatus(errors::InvalidArgument(
          "_DynamicQuantizedMatMul with fused_ops [", absl::StrJoin(fused_ops, ", "),
          "] needs num_args = ", want_args, ", got ", num_inputs() - 2));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    OP_REQUIRES(
        ctx, a.dims() == 2 && b.dims() == 2,
        errors::InvalidArgument("a and b must be matrices, but a is ", a.shape().DebugString(),
                                " and b is ", b.shape().DebugString()));
    const int64_t m = a.dim_size(0), k = a.dim_size(1);
    const int64_t kb = b.dim_size(transpose_b_ ? 1 : 0);
    const int64_t n = b.dim_size(transpose_b_ ? 0 : 1);
    OP_REQUIRES(ctx, k == kb,
                errors::InvalidArgument("a is ", a.shape().DebugString(), " but b is ",
                                        b.shape().DebugString(),
                                        transpose_b_ ? " (transposed)" : "",
                                        "; inner dimensions must match"));
    const float* bias = nullptr;
    if (epilogue_ != nullptr) {
      const Tensor& t = ctx->input(2);
      OP_REQUIRES(ctx, t.dims() == 1 && t.dim_size(0) == n,
                  errors::InvalidArgument("bias must be a vector of the product's ", n,
                                          " columns, but is ", t.shape().DebugString()));
      bias = t.data<float>();
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({m, n}), &out));
    if (m == 0 || n == 0) return;
    float* y = out->data<float>();
    if (k == 0) {
      std::memset(y, 0, out->TotalBytes());
      if (epilogue_ != nullptr) {
        for (int64_t i = 0; i < m; ++i) epilogue_(bias, alpha_, y + i * n, n);
      }
      return;
    }
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    // Calibration (Note [Calibration]): a float product while the column
    // ranges of a are recorded.
    bool calibrating = false;
    if (k * n >= kMinQuantizedWeights && !calibrated_.load(std::memory_order_acquire)) {
      std::vector<float> ranges(k, 0.0f);
      UpdateRanges(pa, m, k, ranges.data());
      MutexLock lock(&mu_);
      if (calls_ < calibration_calls_) {
        calibrating = true;
        if (ranges_seen_.empty()) ranges_seen_.assign(k, 0.0f);
        if (static_cast<int64_t>(ranges_seen_.size()) == k) {
          for (int64_t p = 0; p < k; ++p) ranges_seen_[p] = std::max(ranges_seen_[p], ranges[p]);
        }
        if (++calls_ == calibration_calls_) {
          ranges_ = std::make_shared<const std::vector<float>>(std::move(ranges_seen_));
          calibrated_.store(true, std::memory_order_release);
        }
      }
    }
    std::shared_ptr<const QuantizedWeights> weights;
    if (!calibrating) {
      auto w = Weights(b, k, n);
      OP_REQUIRES_OK(ctx, w.status());
      weights = std::move(*w);
    }
    const bool all_float = calibrating || weights->use_float;

    // Rows [begin, end): float where a row (or the weights) is not finite.
    auto float_rows = [&](int64_t begin, int64_t end) {
      blas::Gemm<float>(false, transpose_b_, end - begin, n, k, pa + begin * k, k, pb,
                        transpose_b_ ? k : n, y + begin * n, n);
    };
    auto rows = [&](int64_t begin, int64_t end) -> absl::Status {
      if (all_float) {
        float_rows(begin, end);
      } else {
        const QuantizedWeights& w = *weights;
        const float* inv_equalize = w.inv_equalize.empty() ? nullptr : w.inv_equalize.data();
        // Panels of rows whose int32 products stay in cache.
        const int64_t panel = std::clamp<int64_t>((256 << 10) / (4 * n), 16, 512);
        thread_local std::vector<uint8_t> qa;
        thread_local std::vector<int32_t> acc;
        thread_local std::vector<float> step, lo, scaled;
        thread_local std::vector<char> finite;
        if (inv_equalize != nullptr) scaled.resize(k);
        for (int64_t p0 = begin; p0 < end; p0 += panel) {
          const int64_t count = std::min(panel, end - p0);
          qa.resize(count * k);
          acc.resize(count * n);
          step.resize(count);
          lo.resize(count);
          finite.resize(count);
          for (int64_t i = 0; i < count; ++i) {
            const float* row = pa + (p0 + i) * k;
            if (inv_equalize != nullptr) {
              ScaleRow(row, inv_equalize, k, scaled.data());
              row = scaled.data();
            }
            finite[i] = QuantizeRow(row, k, qa.data() + i * k, &step[i], &lo[i]);
            if (!finite[i]) std::memset(qa.data() + i * k, 0, k);
          }
          RETURN_IF_ERROR(w.gemm->Run(count, qa.data(), k, w.q.data(), acc.data(), n));
          for (int64_t i = 0; i < count; ++i) {
            if (finite[i]) {
              Dequantize(acc.data() + i * n, n, step[i], lo[i], w.scale.data(), w.offset.data(),
                         y + (p0 + i) * n);
            } else {
              float_rows(p0 + i, p0 + i + 1);
            }
          }
        }
      }
      if (epilogue_ != nullptr) {
        for (int64_t i = begin; i < end; ++i) epilogue_(bias, alpha_, y + i * n, n);
      }
      return absl::OkStatus();
    };

    ThreadPool* pool = ctx->intra_op_pool();
    const double flops =
        2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    const int64_t threads = pool == nullptr || flops < 1e6 ? 1 : pool->NumThreads();
    const int64_t blocks = std::min<int64_t>(threads, (m + 15) / 16);
    if (blocks <= 1) {
      OP_REQUIRES_OK(ctx, rows(0, m));
      return;
    }
    const int64_t per_block = ((m + blocks - 1) / blocks + 15) / 16 * 16;
    std::vector<absl::Status> status(blocks);
    pool->ParallelFor(blocks, /*cost_per_unit=*/1'000'000, [&](int64_t b0, int64_t b1) {
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t begin = blk * per_block;
        const int64_t end = std::min(m, begin + per_block);
        if (begin < end) status[blk] = rows(begin, end);
      }
    });
    for (const absl::Status& s : status) OP_REQUIRES_OK(ctx, s);
  }

 private:
  // The quantized form of b (Note [Dynamic int8 matmul]): the one made for
  // the last distinct value of b.
  absl::StatusOr<std::shared_ptr<const QuantizedWeights>> Weights(const Tensor& b_tensor,
                                                                  int64_t k, int64_t n) {
    const float* b = b_tensor.data<float>();
    std::shared_ptr<const QuantizedWeights> w;
    std::shared_ptr<const std::vector<float>> ranges;
    {
      MutexLock lock(&mu_);
      w = weights_;
      ranges = ranges_;
    }
    if (w != nullptr && w->k == k && w->n == n && w->ranges == ranges &&
        (weights_copy_on_write_
             ? w->held.data<float>() == b
             : std::memcmp(w->source.data(), b, sizeof(float) * k * n) == 0)) {
      return w;
    }
    ASSIGN_OR_RETURN(w, Quantize(b, transpose_b_, k, n, std::move(ranges)));
    if (weights_copy_on_write_) {
      auto mutable_w = std::const_pointer_cast<QuantizedWeights>(w);
      mutable_w->held = b_tensor;
      mutable_w->source.clear();
      mutable_w->source.shrink_to_fit();
    }
    MutexLock lock(&mu_);
    weights_ = w;
    return w;
  }

  bool transpose_b_ = false;
  EpilogueFn epilogue_ = nullptr;  // null: a plain MatMul
  double alpha_ = 0.2;
  int64_t calibration_calls_ = 0;
  // b is a resource variable's value or a constant: its buffer never changes
  // while the kernel holds it (a variable's update copies a shared buffer), so
  // the same buffer means the same weights.
  bool weights_copy_on_write_ = false;
  std::atomic<bool> calibrated_{false};  // Note [Calibration] done (or off)
  Mutex mu_;
  std::shared_ptr<const QuantizedWeights> weights_ ABSL_GUARDED_BY(mu_);
  // Note [Calibration]: calls seen so far, the column ranges they showed,
  // and those ranges once calibration_calls calls are done.
  int64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<float> ranges_seen_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const std::vector<float>> ranges_ ABSL_GUARDED_BY(mu_);
};

REGISTER_KERNEL_BUILDER(
    Name("_DynamicQuantizedMatMul").Device(DEVICE_CPU).TypeConstraint<float>("T"),
    DynamicQuantizedMatMulOp);

}  // namespace
}  // namespace recflow
