// ZeroOut: the worked example of docs/adding_an_op.md, built as a custom-op
// library (build/lib/zero_out.so) and loaded at run time with
// LoadOpLibrary(). It holds the two registrations a custom op needs: the op
// (interface and shape function) and its CPU kernels.
//
// ZeroOut returns a tensor of its input's shape that is all zeros except for
// element `preserve_index` of the flattened input, which is copied through:
//
//   to_zero = [[5, 7], [3, 9]], preserve_index = 2  ->  [[0, 0], [3, 0]]
#include <algorithm>
#include <cstdint>

#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/shape_inference.h"

namespace recflow {
namespace {

// --- Shape function --------------------------------------------------------

// The output has the input's shape; the input must be at least a vector.
// Only what is known at graph construction can be checked here: when the
// rank is unknown this passes, and the kernel checks again at run time.
absl::Status ZeroOutShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape input, c->WithRankAtLeast(0, 1));
  c->set_output(0, std::move(input));
  return absl::OkStatus();
}

// --- Kernel ----------------------------------------------------------------

// Estimated cost of zeroing one element, in nanoseconds: ParallelFor uses it
// to decide whether splitting the loop is worth scheduling threads for.
constexpr int64_t kCostPerElement = 1;

template <typename T>
class ZeroOutOp : public OpKernel {
 public:
  // Plans once per node: reads and checks the attrs. An error reported here
  // fails building the executor (the first Run), with the node named.
  explicit ZeroOutOp(OpKernelConstruction* c) : OpKernel(c) {
    OP_REQUIRES_OK(c, c->GetAttr("preserve_index", &preserve_index_));
    // Graph construction already enforces the op's "int >= 0"; checking
    // here too keeps the kernel safe on its own, at no cost per step.
    OP_REQUIRES(c, preserve_index_ >= 0,
                errors::InvalidArgument("preserve_index must be >= 0, got ",
                                        preserve_index_));
  }

  // Runs every step, possibly on several threads at once: reads only
  // members set in the constructor, never writes them.
  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const int64_t n = input.NumElements();
    OP_REQUIRES(ctx, input.dims() >= 1,
                errors::InvalidArgument("input must have rank >= 1, got rank ",
                                        input.dims(), " with shape ",
                                        input.shape().DebugString()));
    OP_REQUIRES(ctx, n > 0,
                errors::InvalidArgument("input must not be empty, got shape ",
                                        input.shape().DebugString()));
    OP_REQUIRES(ctx, preserve_index_ < n,
                errors::InvalidArgument("preserve_index is ", preserve_index_,
                                        " but the input has only ", n,
                                        " elements (shape ",
                                        input.shape().DebugString(), ")"));

    Tensor* output = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, input.shape(), &output));
    T* dst = output->data<T>();
    const auto zero = [dst](int64_t begin, int64_t end) {
      std::fill(dst + begin, dst + end, T(0));
    };
    if (ThreadPool* pool = ctx->intra_op_pool(); pool != nullptr) {
      pool->ParallelFor(n, kCostPerElement, zero);
    } else {
      zero(0, n);  // the session asked for single-threaded kernels
    }
    dst[preserve_index_] = input.data<T>()[preserve_index_];
  }

 private:
  int64_t preserve_index_ = 0;
};

}  // namespace

// --- Registrations ---------------------------------------------------------

REGISTER_OP("ZeroOut")
    .Input("to_zero: T")
    .Output("zeroed: T")
    .Attr("T: {int32, int64, float, double}")
    .Attr("preserve_index: int >= 0 = 0")
    .SetShapeFn(ZeroOutShape)
    .Doc(R"doc(Zeros every element of the input except one.

The output has the shape of `to_zero`. Element `preserve_index` of the
flattened input is copied to the same position of the output; every other
element is 0. `to_zero` must have rank >= 1 and at least preserve_index + 1
elements.)doc");

REGISTER_KERNEL_BUILDER(
    Name("ZeroOut").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
    ZeroOutOp<int32_t>);
REGISTER_KERNEL_BUILDER(
    Name("ZeroOut").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
    ZeroOutOp<int64_t>);
REGISTER_KERNEL_BUILDER(
    Name("ZeroOut").Device(DEVICE_CPU).TypeConstraint<float>("T"),
    ZeroOutOp<float>);
REGISTER_KERNEL_BUILDER(
    Name("ZeroOut").Device(DEVICE_CPU).TypeConstraint<double>("T"),
    ZeroOutOp<double>);

}  // namespace recflow
