// Kernels of PartitionedCall and StatefulPartitionedCall
// (ops/functional_ops.cc): instantiate the function once, when the kernel is
// made, and run it per step through the session's FunctionLibraryRuntime.
#include "recflow/framework/op_kernel.h"

#include "absl/strings/str_join.h"

namespace recflow {
namespace {

std::string TypesString(const std::vector<DataType>& types) {
  std::vector<std::string> parts;
  for (DataType t : types) parts.push_back(DataTypeString(t));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

class PartitionedCallOp : public OpKernel {
 public:
  explicit PartitionedCallOp(OpKernelConstruction* c) : OpKernel(c) {
    const tensorflow::AttrValue* f = AttrSlice(c->def()).Find("f");
    if (f == nullptr || f->value_case() != tensorflow::AttrValue::kFunc) {
      c->SetStatus(errors::InvalidArgument("attr 'f' must name a function"));
      return;
    }
    function_ = f->func().name();
    flr_ = c->function_library();
    if (flr_ == nullptr) {
      c->SetStatus(errors::FailedPrecondition(
          "calls function '", function_,
          "' but no function library is available here (run it in a Session whose graph "
          "carries the library)"));
      return;
    }
    auto handle = flr_->Instantiate(f->func());
    if (!handle.ok()) {
      c->SetStatus(handle.status());
      return;
    }
    handle_ = *handle;
    std::vector<DataType> tin, tout;
    for (DataType t : c->input_types()) tin.push_back(BaseType(t));
    for (DataType t : c->output_types()) tout.push_back(BaseType(t));
    if (tin != flr_->ArgTypes(handle_)) {
      c->SetStatus(errors::InvalidArgument("function '", function_, "' takes ",
                                           TypesString(flr_->ArgTypes(handle_)), " but Tin is ",
                                           TypesString(tin)));
    } else if (tout != flr_->RetTypes(handle_)) {
      c->SetStatus(errors::InvalidArgument("function '", function_, "' returns ",
                                           TypesString(flr_->RetTypes(handle_)),
                                           " but Tout is ", TypesString(tout)));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    std::vector<Tensor> args;
    args.reserve(ctx->num_inputs());
    for (int i = 0; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    std::vector<Tensor> rets;
    OP_REQUIRES_OK(ctx, flr_->Run(handle_, std::move(args), &rets));
    OP_REQUIRES(ctx, static_cast<int>(rets.size()) == ctx->num_outputs(),
                errors::Internal("function '", function_, "' returned ", rets.size(),
                                 " results for ", ctx->num_outputs(), " outputs"));
    for (int i = 0; i < ctx->num_outputs(); ++i) ctx->set_output(i, std::move(rets[i]));
  }

 private:
  std::string function_;
  FunctionLibraryRuntime* flr_ = nullptr;  // Not owned.
  FunctionLibraryRuntime::Handle handle_ = -1;
};

REGISTER_KERNEL_BUILDER(Name("PartitionedCall").Device(DEVICE_CPU), PartitionedCallOp);
REGISTER_KERNEL_BUILDER(Name("StatefulPartitionedCall").Device(DEVICE_CPU), PartitionedCallOp);

}  // namespace
}  // namespace recflow
