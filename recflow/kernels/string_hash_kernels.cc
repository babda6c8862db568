// CPU kernel for StringToHashBucketFast (ops/embedding_ops.cc):
// Fingerprint64(s) % num_buckets per string, the values TensorFlow gives
// (recflow/core/fingerprint.h is farmhash's Fingerprint64). Sharded over the
// intra-op pool for big inputs.
#include <string>

#include "recflow/core/fingerprint.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

class StringToHashBucketFastOp : public OpKernel {
 public:
  explicit StringToHashBucketFastOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("num_buckets", &num_buckets_));
    if (num_buckets_ < 1) {
      c->SetStatus(errors::InvalidArgument("num_buckets must be >= 1, got ",
                                           num_buckets_));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, input.shape(), &out));
    const std::string* src = input.data<std::string>();
    int64_t* dst = out->data<int64_t>();
    const uint64_t buckets = static_cast<uint64_t>(num_buckets_);
    kernels::ParallelRange(
        ctx, input.NumElements(), 50, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            dst[i] = static_cast<int64_t>(Fingerprint64(src[i]) % buckets);
          }
        });
  }

 private:
  int64_t num_buckets_ = 1;
};

REGISTER_KERNEL_BUILDER(Name("StringToHashBucketFast").Device(DEVICE_CPU),
                        StringToHashBucketFastOp);

}  // namespace
}  // namespace recflow
