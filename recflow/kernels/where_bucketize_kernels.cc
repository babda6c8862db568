// CPU kernels for Where and Bucketize (ops/where_bucketize_ops.cc).
//
// Where: one pass counts the true elements, a second writes their
// coordinates in row-major order. "True" is x != 0 as TensorFlow's kernel
// tests it: -0.0 is false, NaN is true, a complex number is true when either
// part is non-zero.
// Bucketize: the index of the first boundary greater than the value
// (std::upper_bound), the value compared with the float boundaries under
// C++'s usual conversions, as TensorFlow's kernel does.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

// Whether element i of the raw buffer is true; null for a dtype Where does
// not take.
using TruthFn = bool (*)(const void* data, int64_t i);

template <typename T>
bool NonZero(const void* data, int64_t i) {
  return static_cast<const T*>(data)[i] != T(0);
}
// half and bfloat16: every bit but the sign's.
bool NonZero16(const void* data, int64_t i) {
  return (static_cast<const uint16_t*>(data)[i] & 0x7fff) != 0;
}
template <typename T>
bool NonZeroComplex(const void* data, int64_t i) {
  const T* p = static_cast<const T*>(data) + 2 * i;
  return p[0] != T(0) || p[1] != T(0);
}

TruthFn TruthFor(DataType dtype) {
  switch (dtype) {
    case DT_BOOL:
    case DT_UINT8: return NonZero<uint8_t>;
    case DT_INT8: return NonZero<int8_t>;
    case DT_INT16: return NonZero<int16_t>;
    case DT_UINT16: return NonZero<uint16_t>;
    case DT_INT32: return NonZero<int32_t>;
    case DT_UINT32: return NonZero<uint32_t>;
    case DT_INT64: return NonZero<int64_t>;
    case DT_UINT64: return NonZero<uint64_t>;
    case DT_FLOAT: return NonZero<float>;
    case DT_DOUBLE: return NonZero<double>;
    case DT_HALF:
    case DT_BFLOAT16: return NonZero16;
    case DT_COMPLEX64: return NonZeroComplex<float>;
    case DT_COMPLEX128: return NonZeroComplex<double>;
    default: return nullptr;
  }
}

class WhereOp : public OpKernel {
 public:
  explicit WhereOp(OpKernelConstruction* c) : OpKernel(c) {
    DataType dtype = DT_INVALID;
    OP_REQUIRES_OK(c, c->GetAttr("T", &dtype));
    truth_ = TruthFor(dtype);
    OP_REQUIRES(c, truth_ != nullptr,
                errors::Unimplemented("Where of ", DataTypeString(dtype), " is not supported"));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    const int64_t n = x.NumElements();
    const int rank = x.dims();
    const void* data = x.raw_data();
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) count += truth_(data, i) ? 1 : 0;
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({count, rank}), &out));
    int64_t* o = out->flat<int64_t>().data();
    std::vector<int64_t> coord(rank, 0);
    for (int64_t i = 0; i < n; ++i) {
      if (truth_(data, i)) {
        // A scalar's coordinate is empty (coord.data() may be null).
        if (rank > 0) std::memcpy(o, coord.data(), rank * sizeof(int64_t));
        o += rank;
      }
      for (int d = rank - 1; d >= 0; --d) {  // next row-major coordinate
        if (++coord[d] < x.dim_size(d)) break;
        coord[d] = 0;
      }
    }
  }

 private:
  TruthFn truth_ = nullptr;
};

template <typename T>
class BucketizeOp : public OpKernel {
 public:
  explicit BucketizeOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("boundaries", &boundaries_));
    OP_REQUIRES(c, std::is_sorted(boundaries_.begin(), boundaries_.end()),
                errors::InvalidArgument("Bucketize '", name(), "': boundaries must be sorted"));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &out));
    const T* in = x.flat<T>().data();
    int32_t* o = out->flat<int32_t>().data();
    const std::vector<float>& b = boundaries_;
    // A binary search: a few compares per boundary bit.
    int64_t cost = 4;
    for (size_t m = b.size(); m > 0; m >>= 1) cost += 2;
    kernels::ParallelRange(ctx, x.NumElements(), cost, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        o[i] = static_cast<int32_t>(std::upper_bound(b.begin(), b.end(), in[i]) - b.begin());
      }
    });
  }

 private:
  std::vector<float> boundaries_;
};

REGISTER_KERNEL_BUILDER(Name("Where").Device(DEVICE_CPU), WhereOp);
REGISTER_KERNEL_BUILDER(Name("Bucketize").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
                        BucketizeOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("Bucketize").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
                        BucketizeOp<int64_t>);
REGISTER_KERNEL_BUILDER(Name("Bucketize").Device(DEVICE_CPU).TypeConstraint<float>("T"),
                        BucketizeOp<float>);
REGISTER_KERNEL_BUILDER(Name("Bucketize").Device(DEVICE_CPU).TypeConstraint<double>("T"),
                        BucketizeOp<double>);

}  // namespace
}  // namespace recflow
