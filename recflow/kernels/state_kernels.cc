// CPU kernels for variables: VariableV2 / Assign (TF1 ref style) and
// VarHandleOp / ReadVariableOp / AssignVariableOp (resource style). Both
// styles hold their value in a framework Var in the device's ResourceMgr.
#include "absl/base/call_once.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

// Finds or creates the Var a variable node names (container and
// shared_name attrs, defaulting to the device's container and node name).
class VarFinder {
 public:
  explicit VarFinder(OpKernelConstruction* c, DataType dtype) : dtype_(dtype) {
    c->SetStatus(c->GetAttr("container", &container_));
    c->SetStatus(c->GetAttr("shared_name", &name_));
    c->SetStatus(c->GetAttr("shape", &shape_));
    if (container_.empty()) container_ = c->resource_manager()->default_container();
    if (name_.empty()) name_ = c->def().name();
  }

  absl::StatusOr<std::shared_ptr<Var>> Get(ResourceMgr* rm) const {
    auto var = rm->LookupOrCreate<Var>(container_, name_, [this]() -> absl::StatusOr<std::shared_ptr<Var>> {
      return std::make_shared<Var>(dtype_, shape_, name_);
    });
    if (var.ok() && (*var)->dtype() != dtype_) {
      return errors::InvalidArgument("variable '", name_, "' exists with dtype ",
                                     DataTypeString((*var)->dtype()), "; this node declares ",
                                     DataTypeString(dtype_));
    }
    return var;
  }

  const std::string& container() const { return container_; }
  const std::string& name() const { return name_; }

 private:
  DataType dtype_;
  std::string container_;
  std::string name_;
  PartialShape shape_;
};

class VariableV2Op : public OpKernel {
 public:
  explicit VariableV2Op(OpKernelConstruction* c)
      : OpKernel(c), finder_(c, BaseType(output_type(0))) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto var = finder_.Get(ctx->resource_manager());
    OP_REQUIRES_OK(ctx, var.status());
    ctx->set_output_ref(0, *std::move(var));
  }

 private:
  VarFinder finder_;
};

class AssignOp : public OpKernel {
 public:
  explicit AssignOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("validate_shape", &validate_shape_));
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const std::shared_ptr<Var>& var = ctx->input_ref(0);
    OP_REQUIRES(ctx, var != nullptr,
                errors::InvalidArgument("input 'ref' must come from a variable"));
    OP_REQUIRES_OK(ctx, var->Assign(ctx->input(1), validate_shape_));
    ctx->set_output_ref(0, var);
  }

 private:
  bool validate_shape_ = true;
};

class VarHandleOp : public OpKernel {
 public:
  explicit VarHandleOp(OpKernelConstruction* c) : OpKernel(c), finder_(c, Dtype(c)) {
    device_ = c->device()->name();
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto var = finder_.Get(ctx->resource_manager());
    OP_REQUIRES_OK(ctx, var.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(), &out));
    ResourceHandle handle(device_, finder_.container(), finder_.name(),
                          ResourceMgr::TypeName<Var>());
    handle.set_resource(*std::move(var));
    out->scalar<ResourceHandle>() = std::move(handle);
  }

 private:
  static DataType Dtype(OpKernelConstruction* c) {
    DataType dt = DT_INVALID;
    c->SetStatus(c->GetAttr("dtype", &dt));
    return dt;
  }
  VarFinder finder_;
  std::string device_;
};

// The Var a resource handle input points to.
absl::StatusOr<std::shared_ptr<Var>> VarFromHandle(OpKernelContext* ctx, int input) {
  const Tensor& t = ctx->input(input);
  if (t.dtype() != DT_RESOURCE || t.NumElements() != 1) {
    return errors::InvalidArgument("expected a scalar resource handle, got ", t.DebugString());
  }
  const ResourceHandle& h = t.scalar<ResourceHandle>();
  if (h.resource() != nullptr) {
    auto var = std::dynamic_pointer_cast<Var>(h.resource());
    if (var == nullptr) {
      return errors::InvalidArgument("resource ", h.DebugString(), " is not a variable");
    }
    return var;
  }
  return ctx->resource_manager()->Lookup<Var>(h.container(), h.name());
}

class ReadVariableOp : public OpKernel {
 public:
  explicit ReadVariableOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto var = VarFromHandle(ctx, 0);
    OP_REQUIRES_OK(ctx, var.status());
    OP_REQUIRES(ctx, (*var)->dtype() == output_type(0),
                errors::InvalidArgument("variable '", (*var)->name(), "' has dtype ",
                                        DataTypeString((*var)->dtype()), ", read as ",
                                        DataTypeString(output_type(0))));
    auto value = (*var)->Read();
    OP_REQUIRES_OK(ctx, value.status());
    ctx->set_output(0, *std::move(value));
  }
};

class AssignVariableOp : public OpKernel {
 public:
  explicit AssignVariableOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("validate_shape", &validate_shape_));
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    auto var = VarFromHandle(ctx, 0);
    OP_REQUIRES_OK(ctx, var.status());
    OP_REQUIRES_OK(ctx, (*var)->Assign(ctx->input(1), validate_shape_));
  }

 private:
  bool validate_shape_ = false;
};

REGISTER_KERNEL_BUILDER(Name("VariableV2").Device(DEVICE_CPU), VariableV2Op);
REGISTER_KERNEL_BUILDER(Name("Assign").Device(DEVICE_CPU), AssignOp);
REGISTER_KERNEL_BUILDER(Name("VarHandleOp").Device(DEVICE_CPU), VarHandleOp);
REGISTER_KERNEL_BUILDER(Name("ReadVariableOp").Device(DEVICE_CPU), ReadVariableOp);
REGISTER_KERNEL_BUILDER(Name("AssignVariableOp").Device(DEVICE_CPU), AssignVariableOp);

}  // namespace
}  // namespace recflow
