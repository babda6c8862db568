// CPU kernels for the seeded random ops: RandomUniform, RandomStandardNormal,
// TruncatedNormal (half, bfloat16, float, double) and RandomUniformInt
// (int32, int64). Note [Random op determinism] in ops/random_ops.h states
// the guarantees; this file keeps them:
//  - output group g (Dist::kGroupSize values) is computed from a generator
//    positioned at base + g (fixed-sample distributions) or at
//    base + g * kGroupSkip (rejection samplers), so a shard of a ParallelFor
//    jumps straight to its groups and the result never depends on sharding;
//  - each Compute reserves num_elements * 256 blocks of the node's stream
//    from an atomic offset (TensorFlow's ReserveRandomOutputs(n, 256)), so
//    runs (also concurrent ones, and runs of different signatures, whose
//    kernels share the stream through the ResourceMgr) never share values.
#include <algorithm>
#include <array>
#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "recflow/core/philox.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow {
namespace {

using random::BoxMullerDouble;
using random::BoxMullerFloat;
using random::PhiloxRandom;
using random::SingleSampleAdapter;

// Blocks of the stream reserved per output element and Run; also what a
// rejection sampler may consume per output (TensorFlow's value).
constexpr uint64_t kReservedSamplesPerOutput = 256;

// ---------------------------------------------------------------------------
// Distributions: each turns generator output into one group of kGroupSize
// values. kVariableSamples marks rejection samplers, which read words one at
// a time through a SingleSampleAdapter. kGroupCost is ns per group for
// ParallelFor's sharding.

template <typename T>
struct Uniform;
template <>
struct Uniform<float> {
  using T = float;
  static constexpr int kGroupSize = 4;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 16;
  std::array<T, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    return {random::Uint32ToFloat(s[0]), random::Uint32ToFloat(s[1]), random::Uint32ToFloat(s[2]),
            random::Uint32ToFloat(s[3])};
  }
};
template <>
struct Uniform<double> {
  using T = double;
  static constexpr int kGroupSize = 2;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 16;
  std::array<T, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    return {random::Uint64ToDouble(s[0], s[1]), random::Uint64ToDouble(s[2], s[3])};
  }
};
template <>
struct Uniform<half> {
  using T = half;
  static constexpr int kGroupSize = 4;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 16;
  std::array<T, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    std::array<T, kGroupSize> out;
    for (int i = 0; i < kGroupSize; ++i) out[i] = random::Uint16ToHalf(static_cast<uint16_t>(s[i]));
    return out;
  }
};
template <>
struct Uniform<bfloat16> {
  using T = bfloat16;
  static constexpr int kGroupSize = 4;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 16;
  std::array<T, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    std::array<T, kGroupSize> out;
    for (int i = 0; i < kGroupSize; ++i) {
      out[i] = random::Uint16ToBfloat16(static_cast<uint16_t>(s[i]));
    }
    return out;
  }
};

// Float-based normals for float, half and bfloat16 (computed in float).
template <typename T>
struct Normal {
  static constexpr int kGroupSize = 4;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 60;
  std::array<T, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    std::array<T, kGroupSize> out;
    for (int i = 0; i < kGroupSize; i += 2) {
      float f0, f1;
      BoxMullerFloat(s[i], s[i + 1], &f0, &f1);
      out[i] = T(f0);
      out[i + 1] = T(f1);
    }
    return out;
  }
};
template <>
struct Normal<double> {
  static constexpr int kGroupSize = 2;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 60;
  std::array<double, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    std::array<double, kGroupSize> out;
    BoxMullerDouble(s[0], s[1], s[2], s[3], &out[0], &out[1]);
    return out;
  }
};

// Normals with |value| < 2, by rejection (computed in float for 16-bit
// types; rounding to half/bfloat16 can turn 1.9999 into exactly 2).
template <typename T>
struct TruncNormal {
  static constexpr int kGroupSize = 4;
  static constexpr bool kVariableSamples = true;
  static constexpr int64_t kGroupCost = 90;
  std::array<T, kGroupSize> operator()(SingleSampleAdapter<PhiloxRandom>* gen) const {
    std::array<T, kGroupSize> out;
    int index = 0;
    while (true) {
      const uint32_t x0 = (*gen)();
      const uint32_t x1 = (*gen)();
      float f[2];
      BoxMullerFloat(x0, x1, &f[0], &f[1]);
      for (float v : f) {
        if (std::abs(v) < 2.0f) {
          out[index++] = T(v);
          if (index == kGroupSize) return out;
        }
      }
    }
  }
};
template <>
struct TruncNormal<double> {
  static constexpr int kGroupSize = 2;
  static constexpr bool kVariableSamples = true;
  static constexpr int64_t kGroupCost = 90;
  std::array<double, kGroupSize> operator()(SingleSampleAdapter<PhiloxRandom>* gen) const {
    std::array<double, kGroupSize> out;
    int index = 0;
    while (true) {
      const uint32_t x0 = (*gen)(), x1 = (*gen)(), x2 = (*gen)(), x3 = (*gen)();
      double d[2];
      BoxMullerDouble(x0, x1, x2, x3, &d[0], &d[1]);
      for (double v : d) {
        if (std::abs(v) < 2.0) {
          out[index++] = v;
          if (index == kGroupSize) return out;
        }
      }
    }
  }
};

// Integers in [lo, lo + range): 32 bits per int32, 64 per int64, reduced
// modulo the range.
template <typename T>
struct UniformInt {
  using U = std::make_unsigned_t<T>;
  static constexpr int kGroupSize = sizeof(T) == 4 ? 4 : 2;
  static constexpr bool kVariableSamples = false;
  static constexpr int64_t kGroupCost = 20;
  UniformInt(T lo, T hi) : lo(lo), range(static_cast<U>(hi) - static_cast<U>(lo)) {}
  std::array<T, kGroupSize> operator()(PhiloxRandom* gen) const {
    const auto s = (*gen)();
    std::array<T, kGroupSize> out;
    for (int i = 0; i < kGroupSize; ++i) {
      U bits;
      if constexpr (sizeof(T) == 4) {
        bits = s[i];
      } else {
        bits = static_cast<U>(s[2 * i]) | (static_cast<U>(s[2 * i + 1]) << 32);
      }
      out[i] = static_cast<T>(static_cast<U>(lo) + bits % range);
    }
    return out;
  }
  T lo;
  U range;
};

// Fills data[0, size) with groups of `dist`, group g drawn from `base`
// advanced to g's fixed position, so any sharding gives the same values.
template <typename T, typename Dist>
void FillPhilox(OpKernelContext* ctx, const PhiloxRandom& base, T* data, int64_t size,
                const Dist& dist) {
  constexpr int kGroup = Dist::kGroupSize;
  // Rejection samplers get kReservedSamplesPerOutput words per output.
  constexpr uint64_t kGroupSkip =
      kGroup * kReservedSamplesPerOutput / PhiloxRandom::kResultElementCount;
  const int64_t groups = (size + kGroup - 1) / kGroup;
  auto fill = [&](int64_t begin, int64_t end) {
    PhiloxRandom gen = base;
    if constexpr (!Dist::kVariableSamples) gen.Skip(static_cast<uint64_t>(begin));
    for (int64_t g = begin; g < end; ++g) {
      std::array<T, kGroup> values;
      if constexpr (Dist::kVariableSamples) {
        gen = base;
        gen.Skip(static_cast<uint64_t>(g) * kGroupSkip);
        SingleSampleAdapter<PhiloxRandom> single(&gen);
        values = dist(&single);
      } else {
        values = dist(&gen);
      }
      const int64_t offset = g * kGroup;
      const int64_t n = std::min<int64_t>(kGroup, size - offset);
      std::copy_n(values.begin(), n, data + offset);
    }
  };
  ThreadPool* pool = ctx->intra_op_pool();
  if (pool == nullptr) {
    fill(0, groups);
  } else {
    pool->ParallelFor(groups, Dist::kGroupCost, fill);
  }
}

absl::StatusOr<TensorShape> ShapeFromTensor(const Tensor& t) {
  if (t.dims() != 1) {
    return errors::InvalidArgument("shape must be a vector of dimensions, got a tensor of shape ",
                                   t.shape().DebugString());
  }
  std::vector<int64_t> dims;
  if (t.dtype() == DT_INT32) {
    for (int32_t d : t.flat<int32_t>()) dims.push_back(d);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t d : t.flat<int64_t>()) dims.push_back(d);
  } else {
    return errors::InvalidArgument("shape must be int32 or int64, got ", DataTypeString(t.dtype()));
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return errors::InvalidArgument("shape ", t.SummarizeValue(), " has dimension ", dims[i],
                                     " at index ", i, "; dimensions must be >= 0");
    }
  }
  return TensorShape::Build(dims);
}

// The random stream of one node in one session: the seeded generator and
// the position of the first block no Run has reserved yet. It lives in the
// device's ResourceMgr under the node's name so that every kernel instance
// of the node shares it: the session builds one executor, hence one kernel,
// per feed/fetch/target signature, and a per-kernel counter would replay
// the same values in each signature. Thread-safe.
class PhiloxStream : public ResourceBase {
 public:
  explicit PhiloxStream(PhiloxRandom base) : base_(base) {}

  // A generator positioned at `blocks` blocks that no other caller gets.
  PhiloxRandom Reserve(uint64_t blocks) {
    const uint64_t start = next_.fetch_add(blocks, std::memory_order_relaxed);
    PhiloxRandom gen = base_;
    gen.Skip(start);
    return gen;
  }

  std::string DebugString() const override {
    return absl::StrCat("PhiloxStream(next block ", next_.load(std::memory_order_relaxed), ")");
  }

 private:
  const PhiloxRandom base_;
  std::atomic<uint64_t> next_{0};
};

// Container of the PhiloxStream resources.
constexpr char kStreamContainer[] = "_random_op_streams";

// Finds or creates the node's stream: Note [Random op determinism] in
// ops/random_ops.h.
class PhiloxOpBase : public OpKernel {
 public:
  explicit PhiloxOpBase(OpKernelConstruction* c) : OpKernel(c) {
    int64_t seed = 0, seed2 = 0;
    c->SetStatus(c->GetAttr("seed", &seed));
    c->SetStatus(c->GetAttr("seed2", &seed2));
    if (!c->status().ok()) return;
    auto create = [seed, seed2]() -> absl::StatusOr<std::shared_ptr<PhiloxStream>> {
      uint64_t s = static_cast<uint64_t>(seed), s2 = static_cast<uint64_t>(seed2);
      if (s == 0 && s2 == 0) {  // unseeded: a fresh random seed for this session
        std::random_device rd;
        auto draw64 = [&rd] { return (static_cast<uint64_t>(rd()) << 32) | rd(); };
        s = draw64();
        s2 = draw64();
      }
      return std::make_shared<PhiloxStream>(PhiloxRandom(s, s2));
    };
    if (c->device() == nullptr || c->resource_manager() == nullptr) {
      stream_ = *create();
      return;
    }
    // The key names the node and what determines its stream, so a node of
    // the same name with other attrs never shares it.
    const std::string key =
        absl::StrCat(name(), " (", type_string(), " seed=", seed, " seed2=", seed2, ")");
    auto stream = c->resource_manager()->LookupOrCreate<PhiloxStream>(kStreamContainer, key,
                                                                      create);
    if (!stream.ok()) {
      c->SetStatus(stream.status());
      return;
    }
    stream_ = *std::move(stream);
  }

 protected:
  // A generator positioned at a stretch of num_outputs * 256 blocks that no
  // other Run of this node gets (TensorFlow's ReserveRandomOutputs).
  PhiloxRandom ReserveRandomOutputs(int64_t num_outputs) {
    return stream_->Reserve(static_cast<uint64_t>(num_outputs) * kReservedSamplesPerOutput);
  }

 private:
  std::shared_ptr<PhiloxStream> stream_;  // shared with the session's other kernels of this node
};

template <typename T, typename Dist>
class PhiloxRandomOp : public PhiloxOpBase {
 public:
  explicit PhiloxRandomOp(OpKernelConstruction* c) : PhiloxOpBase(c) {}

  void Compute(OpKernelContext* ctx) override {
    auto shape = ShapeFromTensor(ctx->input(0));
    OP_REQUIRES_OK(ctx, shape.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *shape, &out));
    const int64_t n = out->NumElements();
    FillPhilox(ctx, ReserveRandomOutputs(n), out->data<T>(), n, Dist());
  }
};

template <typename T>
class RandomUniformIntOp : public PhiloxOpBase {
 public:
  explicit RandomUniformIntOp(OpKernelConstruction* c) : PhiloxOpBase(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& minval = ctx->input(1);
    const Tensor& maxval = ctx->input(2);
    OP_REQUIRES(ctx, minval.dims() == 0,
                errors::InvalidArgument("minval must be a scalar, got shape ",
                                        minval.shape().DebugString()));
    OP_REQUIRES(ctx, maxval.dims() == 0,
                errors::InvalidArgument("maxval must be a scalar, got shape ",
                                        maxval.shape().DebugString()));
    auto shape = ShapeFromTensor(ctx->input(0));
    OP_REQUIRES_OK(ctx, shape.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *shape, &out));
    const int64_t n = out->NumElements();
    if (n == 0) return;  // nothing to draw; an empty range is fine then
    const T lo = minval.scalar<T>(), hi = maxval.scalar<T>();
    OP_REQUIRES(
        ctx, lo < hi,
        errors::InvalidArgument("need minval < maxval, got minval ", lo, " and maxval ", hi));
    FillPhilox(ctx, ReserveRandomOutputs(n), out->data<T>(), n, UniformInt<T>(lo, hi));
  }
};

#define RECFLOW_REGISTER_RANDOM_(T)                                                              \
  REGISTER_KERNEL_BUILDER(Name("RandomUniform").Device(DEVICE_CPU).TypeConstraint<T>("dtype"),   \
                          PhiloxRandomOp<T, Uniform<T>>);                                        \
  REGISTER_KERNEL_BUILDER(                                                                       \
      Name("RandomStandardNormal").Device(DEVICE_CPU).TypeConstraint<T>("dtype"),                \
      PhiloxRandomOp<T, Normal<T>>);                                                             \
  REGISTER_KERNEL_BUILDER(Name("TruncatedNormal").Device(DEVICE_CPU).TypeConstraint<T>("dtype"), \
                          PhiloxRandomOp<T, TruncNormal<T>>)

RECFLOW_REGISTER_RANDOM_(half);
RECFLOW_REGISTER_RANDOM_(bfloat16);
RECFLOW_REGISTER_RANDOM_(float);
RECFLOW_REGISTER_RANDOM_(double);
#undef RECFLOW_REGISTER_RANDOM_

REGISTER_KERNEL_BUILDER(Name("RandomUniformInt").Device(DEVICE_CPU).TypeConstraint<int32_t>("Tout"),
                        RandomUniformIntOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("RandomUniformInt").Device(DEVICE_CPU).TypeConstraint<int64_t>("Tout"),
                        RandomUniformIntOp<int64_t>);

}  // namespace
}  // namespace recflow
