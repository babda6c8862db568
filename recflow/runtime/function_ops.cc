// _Arg and _Retval: the nodes a Session puts in place of fed tensors and
// after fetched ones. Internal (their names start with '_'); they read and
// write the step's CallFrame.
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

REGISTER_OP("_Arg")
    .Output("output: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(shape_fns::UnknownShape)
    .Doc("A step argument: the value fed for a tensor (internal).");

REGISTER_OP("_Retval")
    .Input("input: T")
    .Attr("T: type")
    .Attr("index: int >= 0")
    .SetIsStateful()
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("A step result: the value of a fetched tensor (internal).");

class ArgOp : public OpKernel {
 public:
  explicit ArgOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("index", &index_));
    if (c->GetAttr("_feed_name", &feed_name_).ok()) return;
    feed_name_ = name();
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES(ctx, ctx->call_frame() != nullptr,
                errors::Internal("_Arg run without a call frame"));
    Tensor value;
    OP_REQUIRES_OK(ctx, ctx->call_frame()->GetArg(index_, &value));
    OP_REQUIRES(ctx, value.dtype() == output_type(0),
                errors::InvalidArgument("feed '", feed_name_, "' has dtype ",
                                        DataTypeString(value.dtype()), " but the graph expects ",
                                        DataTypeString(output_type(0))));
    ctx->set_output(0, std::move(value));
  }

 private:
  int64_t index_ = 0;
  std::string feed_name_;
};

class RetvalOp : public OpKernel {
 public:
  explicit RetvalOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("index", &index_));
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    OP_REQUIRES(ctx, ctx->call_frame() != nullptr,
                errors::Internal("_Retval run without a call frame"));
    OP_REQUIRES_OK(ctx, ctx->call_frame()->SetRetval(index_, ctx->input(0)));
  }

 private:
  int64_t index_ = 0;
};

REGISTER_KERNEL_BUILDER(Name("_Arg").Device(DEVICE_CPU), ArgOp);
REGISTER_KERNEL_BUILDER(Name("_Retval").Device(DEVICE_CPU), RetvalOp);

}  // namespace
}  // namespace recflow
