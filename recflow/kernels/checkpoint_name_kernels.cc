// CPU kernels of ops/checkpoint_name_ops.cc: StringJoin, ShardedFilename,
// ShardedFilespec. All cheap: they run inline in the executor.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

class StringJoinOp : public OpKernel {
 public:
  explicit StringJoinOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("separator", &separator_));
  }
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    const Tensor* shaped = nullptr;
    for (int i = 0; i < n; ++i) {
      const Tensor& in = ctx->input(i);
      if (in.dims() == 0) continue;
      if (shaped == nullptr) {
        shaped = &in;
      } else {
        OP_REQUIRES(ctx, in.shape() == shaped->shape(),
                    errors::InvalidArgument(
                        "StringJoin '", name(),
                        "': non-scalar inputs must have one shape, got ",
                        shaped->shape().DebugString(), " and ",
                        in.shape().DebugString(), " (input ", i, ")"));
      }
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(0, shaped ? shaped->shape() : TensorShape({}),
                                  &out));
    auto dst = out->flat<std::string>();
    for (int64_t j = 0; j < out->NumElements(); ++j) {
      std::string& s = dst[j];
      s.clear();
      for (int i = 0; i < n; ++i) {
        const Tensor& in = ctx->input(i);
        if (i > 0) s += separator_;
        s += in.dims() == 0 ? in.scalar<std::string>()
                            : in.flat<std::string>()[j];
      }
    }
  }

 private:
  std::string separator_;
};

// Reads the int32 scalar input `i` named `what`.
bool ScalarInt(OpKernelContext* ctx, const OpKernel& k, int i, const char* what,
               int32_t* v) {
  const Tensor& t = ctx->input(i);
  if (t.dims() != 0) {
    ctx->SetStatus(errors::InvalidArgument(
        k.type_string(), " '", k.name(), "': ", what, " must be a scalar, got ",
        t.shape().DebugString()));
    return false;
  }
  *v = t.scalar<int32_t>();
  return true;
}

class ShardedFilenameOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& base = ctx->input(0);
    OP_REQUIRES(ctx, base.dims() == 0,
                errors::InvalidArgument("ShardedFilename '", name(),
                                        "': basename must be a scalar, got ",
                                        base.shape().DebugString()));
    int32_t shard = 0, num_shards = 0;
    if (!ScalarInt(ctx, *this, 1, "shard", &shard)) return;
    if (!ScalarInt(ctx, *this, 2, "num_shards", &num_shards)) return;
    OP_REQUIRES(ctx, num_shards > 0 && shard >= 0 && shard < num_shards,
                errors::InvalidArgument(
                    "ShardedFilename '", name(), "': shard ", shard,
                    " is not in [0, num_shards = ", num_shards, ")"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<std::string>() = absl::StrFormat(
        "%s-%05d-of-%05d", base.scalar<std::string>(), shard, num_shards);
  }
};

class ShardedFilespecOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& base = ctx->input(0);
    OP_REQUIRES(ctx, base.dims() == 0,
                errors::InvalidArgument("ShardedFilespec '", name(),
                                        "': basename must be a scalar, got ",
                                        base.shape().DebugString()));
    int32_t num_shards = 0;
    if (!ScalarInt(ctx, *this, 1, "num_shards", &num_shards)) return;
    OP_REQUIRES(ctx, num_shards > 0,
                errors::InvalidArgument("ShardedFilespec '", name(),
                                        "': num_shards must be "
                                        "positive, got ",
                                        num_shards));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<std::string>() = absl::StrFormat(
        "%s-\?\?\?\?\?-of-%05d", base.scalar<std::string>(), num_shards);
  }
};

REGISTER_KERNEL_BUILDER(Name("StringJoin").Device(DEVICE_CPU), StringJoinOp);
REGISTER_KERNEL_BUILDER(Name("ShardedFilename").Device(DEVICE_CPU),
                        ShardedFilenameOp);
REGISTER_KERNEL_BUILDER(Name("ShardedFilespec").Device(DEVICE_CPU),
                        ShardedFilespecOp);

}  // namespace
}  // namespace recflow
