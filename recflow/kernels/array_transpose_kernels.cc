// CPU kernels for Transpose and InvertPermutation. Transpose merges
// dimensions that stay adjacent under the permutation, returns the input
// itself (no copy) when nothing moves, and otherwise copies with
// StridedCopy: 2-D and N-d transpositions go tile by tile, and runs that
// stay contiguous move with memcpy.
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"

namespace recflow {
namespace {

using array_kernels::CheckCopyType;
using array_kernels::CopyTypes;
using array_kernels::DispatchCopyType;
using array_kernels::IndexTypes;
using array_kernels::IndexVector;
using array_kernels::VecString;

class TransposeOp : public OpKernel {
 public:
  explicit TransposeOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("Transpose", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    auto perm = IndexVector(ctx->input(1), "perm");
    OP_REQUIRES_OK(ctx, perm.status());
    const int rank = x.dims();
    OP_REQUIRES(ctx, static_cast<int>(perm->size()) == rank,
                errors::InvalidArgument(
                    "perm ", VecString(*perm), " has ", perm->size(),
                    " entries but x has shape ", x.shape().DebugString()));
    std::vector<bool> seen(rank, false);
    for (int64_t p : *perm) {
      OP_REQUIRES(
          ctx, p >= 0 && p < rank && !seen[p],
          errors::InvalidArgument("perm ", VecString(*perm),
                                  " is not a permutation of [0, ", rank, ")"));
      seen[p] = true;
    }
    TensorShape out_shape;
    for (int i = 0; i < rank; ++i) out_shape.AddDim(x.dim_size((*perm)[i]));
    // Source strides in output order; the destination is row-major.
    const auto in_strides =
        array_kernels::RowMajorStrides(x.shape().dim_sizes());
    absl::InlinedVector<int64_t, 8> src(rank);
    for (int i = 0; i < rank; ++i) src[i] = in_strides[(*perm)[i]];
    const auto dst = array_kernels::RowMajorStrides(out_shape.dim_sizes());
    const array_kernels::CopyPlan plan =
        array_kernels::MakeCopyPlan(out_shape.dim_sizes(), src, dst);
    if (plan.dims.size() == 1 && plan.src[0] == 1) {  // nothing moves
      ctx->set_output(0, x.Reshaped(out_shape).value());
      return;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    DispatchCopyType(x.dtype(), [&]<typename U>() {
      array_kernels::StridedCopy<U>(ctx, plan,
                                    reinterpret_cast<const U*>(x.raw_data()),
                                    reinterpret_cast<U*>(out->raw_data()));
    });
  }
};

template <typename T>
class InvertPermutationOp : public OpKernel {
 public:
  explicit InvertPermutationOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES(ctx, x.dims() == 1,
                errors::InvalidArgument("x must be a vector, but has shape ",
                                        x.shape().DebugString()));
    const int64_t n = x.NumElements();
    Tensor* y = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &y));
    const T* src = x.data<T>();
    T* dst = y->data<T>();
    std::vector<bool> seen(n, false);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = src[i];
      OP_REQUIRES(ctx, p >= 0 && p < n && !seen[p],
                  errors::InvalidArgument(
                      "x is not a permutation of [0, ", n, "): x[", i, "] = ",
                      p, p >= 0 && p < n ? " repeats" : " is out of range"));
      seen[p] = true;
      dst[p] = static_cast<T>(i);
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("Transpose")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Tperm", IndexTypes()),
                        TransposeOp);
REGISTER_KERNEL_BUILDER(
    Name("InvertPermutation").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
    InvertPermutationOp<int32_t>);
REGISTER_KERNEL_BUILDER(
    Name("InvertPermutation").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
    InvertPermutationOp<int64_t>);

}  // namespace
}  // namespace recflow
