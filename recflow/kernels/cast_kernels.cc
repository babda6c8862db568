// CPU kernel for Cast between float, double, half, bfloat16, every integer
// type (int8/16/32/64, uint8/16/32/64) and bool, in any pair. The conversion loop is chosen once, in
// the constructor, from SrcT / DstT / Truncate.
//
// Semantics: floating to integer rounds toward zero and saturates at the
// integer type's range, NaN becomes 0 (C++ leaves these undefined; TF's
// result is platform-specific); integer to narrower integer wraps; to bool
// is x != 0; from bool is 0 / 1. half and bfloat16 convert through float.
// Truncate=true makes narrowing floating conversions (double -> float,
// float/double -> half/bfloat16) round toward zero by clearing the mantissa
// bits the destination cannot hold, as TensorFlow's LSBZeroSetter does.
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "recflow/kernels/cwise_ops_common.h"

RECFLOW_CWISE_BEGIN_

namespace recflow {
namespace cwise {
namespace {

template <typename T>
inline constexpr bool kIsFloat16 = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Float to integer, in range by construction: NaN -> 0, saturating.
template <typename D, typename F>
D FloatToInt(F v) {
  constexpr F kLow = static_cast<F>(std::numeric_limits<D>::min());  // 0 or -2^k: exact
  constexpr F kHighExcl = static_cast<F>(std::numeric_limits<D>::max() / 2 + 1) * F(2);  // 2^k
  constexpr F kHighBelow = kHighExcl * (F(1) - std::numeric_limits<F>::epsilon() / F(2));
  F c = v < kLow ? kLow : v;
  c = c > kHighBelow ? kHighBelow : c;
  c = v != v ? F(0) : c;
  const D r = static_cast<D>(c);
  return v >= kHighExcl ? std::numeric_limits<D>::max() : r;
}

// Number of low mantissa bits of S that D cannot hold (0: not narrowing).
template <typename S, typename D>
constexpr int TruncatedBits() {
  if constexpr (std::is_same_v<S, float>) {
    if constexpr (std::is_same_v<D, half>) return 13;
    if constexpr (std::is_same_v<D, bfloat16>) return 16;
  } else if constexpr (std::is_same_v<S, double>) {
    if constexpr (std::is_same_v<D, float>) return 29;
    if constexpr (std::is_same_v<D, half>) return 42;
    if constexpr (std::is_same_v<D, bfloat16>) return 45;
  }
  return 0;
}

template <typename S>
S ClearLowBits(S v, int bits) {
  using U = std::conditional_t<sizeof(S) == 4, uint32_t, uint64_t>;
  const U mask = ~((U{1} << bits) - 1);
  return __builtin_bit_cast(S, static_cast<U>(__builtin_bit_cast(U, v) & mask));
}

template <typename S, typename D, bool kTruncate>
D CastValue(S s) {
  using C = ComputeType<S>;  // float for half / bfloat16
  const C v = static_cast<C>(s);
  if constexpr (std::is_same_v<D, bool>) {
    return v != C(0);
  } else if constexpr (kIsFloat16<D>) {
    constexpr int kBits = TruncatedBits<C, D>();
    if constexpr (kTruncate && kBits > 0) {
      return D(static_cast<float>(ClearLowBits(v, kBits)));
    } else {
      return D(static_cast<float>(v));
    }
  } else if constexpr (std::is_floating_point_v<D>) {
    constexpr int kBits = TruncatedBits<C, D>();
    if constexpr (kTruncate && kBits > 0) {
      return static_cast<D>(ClearLowBits(v, kBits));
    } else {
      return static_cast<D>(v);
    }
  } else if constexpr (std::is_floating_point_v<C>) {
    return FloatToInt<D>(v);
  } else {
    return static_cast<D>(v);  // integer or bool to integer: wraps
  }
}

using CastLoopFn = void (*)(const void* src, void* dst, int64_t begin, int64_t end);

template <typename S, typename D, bool kTruncate>
void CastLoop(const void* src, void* dst, int64_t begin, int64_t end) {
  const S* s = static_cast<const S*>(src);
  D* d = static_cast<D*>(dst);
  for (int64_t i = begin; i < end; ++i) d[i] = CastValue<S, D, kTruncate>(s[i]);
}

template <typename S, typename D>
CastLoopFn LoopFor(bool truncate) {
  return truncate ? &CastLoop<S, D, true> : &CastLoop<S, D, false>;
}

template <typename S>
CastLoopFn PickDst(DataType dst, bool truncate) {
  switch (dst) {
    case DT_FLOAT: return LoopFor<S, float>(truncate);
    case DT_DOUBLE: return LoopFor<S, double>(truncate);
    case DT_HALF: return LoopFor<S, half>(truncate);
    case DT_BFLOAT16: return LoopFor<S, bfloat16>(truncate);
    case DT_INT32: return LoopFor<S, int32_t>(truncate);
    case DT_INT64: return LoopFor<S, int64_t>(truncate);
    case DT_UINT8: return LoopFor<S, uint8_t>(truncate);
    case DT_INT8: return LoopFor<S, int8_t>(truncate);
    case DT_INT16: return LoopFor<S, int16_t>(truncate);
    case DT_UINT16: return LoopFor<S, uint16_t>(truncate);
    case DT_UINT32: return LoopFor<S, uint32_t>(truncate);
    case DT_UINT64: return LoopFor<S, uint64_t>(truncate);
    case DT_BOOL: return LoopFor<S, bool>(truncate);
    default: return nullptr;
  }
}

CastLoopFn PickLoop(DataType src, DataType dst, bool truncate) {
  switch (src) {
    case DT_FLOAT: return PickDst<float>(dst, truncate);
    case DT_DOUBLE: return PickDst<double>(dst, truncate);
    case DT_HALF: return PickDst<half>(dst, truncate);
    case DT_BFLOAT16: return PickDst<bfloat16>(dst, truncate);
    case DT_INT32: return PickDst<int32_t>(dst, truncate);
    case DT_INT64: return PickDst<int64_t>(dst, truncate);
    case DT_UINT8: return PickDst<uint8_t>(dst, truncate);
    case DT_INT8: return PickDst<int8_t>(dst, truncate);
    case DT_INT16: return PickDst<int16_t>(dst, truncate);
    case DT_UINT16: return PickDst<uint16_t>(dst, truncate);
    case DT_UINT32: return PickDst<uint32_t>(dst, truncate);
    case DT_UINT64: return PickDst<uint64_t>(dst, truncate);
    case DT_BOOL: return PickDst<bool>(dst, truncate);
    default: return nullptr;
  }
}

class CastOp : public OpKernel {
 public:
  explicit CastOp(OpKernelConstruction* c) : OpKernel(c) {
    DataType src = DT_INVALID, dst = DT_INVALID;
    bool truncate = false;
    OP_REQUIRES_OK(c, c->GetAttr("SrcT", &src));
    OP_REQUIRES_OK(c, c->GetAttr("DstT", &dst));
    OP_REQUIRES_OK(c, c->GetAttr("Truncate", &truncate));
    identity_ = src == dst;
    loop_ = PickLoop(src, dst, truncate);
    OP_REQUIRES(c, identity_ || loop_ != nullptr,
                errors::Unimplemented("Cast from ", DataTypeString(src), " to ",
                                      DataTypeString(dst), " is not supported"));
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    if (identity_) {
      ctx->set_output(0, x);
      return;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &out));
    const void* src = x.raw_data();
    void* dst = out->raw_data();
    const CastLoopFn loop = loop_;
    kernels::ParallelRange(ctx, x.NumElements(), 1,
             [&](int64_t begin, int64_t end) { loop(src, dst, begin, end); });
  }

 private:
  bool identity_ = false;
  CastLoopFn loop_ = nullptr;
};

#define RECFLOW_CAST_TYPES_                                                                 \
  {DT_FLOAT, DT_DOUBLE, DT_HALF,   DT_BFLOAT16, DT_INT32,  DT_INT64, DT_UINT8, DT_INT8, DT_INT16, \
   DT_UINT16, DT_UINT32, DT_UINT64, DT_BOOL}
REGISTER_KERNEL_BUILDER(Name("Cast")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("SrcT", RECFLOW_CAST_TYPES_)
                            .TypeConstraint("DstT", RECFLOW_CAST_TYPES_),
                        CastOp);
#undef RECFLOW_CAST_TYPES_

}  // namespace
}  // namespace cwise
}  // namespace recflow

RECFLOW_CWISE_END_
