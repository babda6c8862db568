// CPU kernels for variables: VariableV2 / Assign / AssignAdd / AssignSub
// (TF1 ref style) and VarHandleOp / ReadVariableOp / AssignVariableOp /
// AssignAddVariableOp / AssignSubVariableOp (resource style). Both styles
// hold their value in a framework Var in the device's ResourceMgr.
#include "recflow/kernels/state_kernels.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include "absl/base/call_once.h"
#include "recflow/core/status.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

// Finds or creates the Var a variable node names (NodeResourceLocation).
class VarFinder {
 public:
  explicit VarFinder(OpKernelConstruction* c, DataType dtype) : dtype_(dtype) {
    ResourceLocation where = NodeResourceLocation(c->def(), c->resource_manager()->default_container());
    container_ = std::move(where.container);
    name_ = std::move(where.name);
    c->SetStatus(c->GetAttr("shape", &shape_));
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

// Note [Assign takes a buffer of its own]
// A variable shares the assigned value's buffer when nothing else holds it
// (the usual case: an initializer's output). When the buffer is shared, with
// a Const kernel (constant folding turns an initializer such as
// Fill(shape, 0.001) into one) or with other variables (CSE merges identical
// initializers), the variable takes a private copy now. Sharing would be
// correct too (Var::Update copies on write), but then the variable's first
// in-place update, inside a training step, copies it into freshly faulted
// memory: 26 Adagrad accumulators of 6.4 MB made DeepFM's first step take
// 0.2-2 s instead of 0.1 s. Assigning runs once, at initialization.
Tensor OwnedValue(const Tensor& value) {
  return value.RefCountIsOne() || !value.IsInitialized() ? value : value.DeepCopy();
}

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
    OP_REQUIRES_OK(ctx, var->Assign(OwnedValue(ctx->input(1)), validate_shape_));
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
    OP_REQUIRES_OK(ctx, (*var)->Assign(OwnedValue(ctx->input(1)), validate_shape_));
  }

 private:
  bool validate_shape_ = false;
};

REGISTER_KERNEL_BUILDER(Name("VariableV2").Device(DEVICE_CPU), VariableV2Op);
REGISTER_KERNEL_BUILDER(Name("Assign").Device(DEVICE_CPU), AssignOp);
REGISTER_KERNEL_BUILDER(Name("VarHandleOp").Device(DEVICE_CPU), VarHandleOp);
REGISTER_KERNEL_BUILDER(Name("ReadVariableOp").Device(DEVICE_CPU), ReadVariableOp);
REGISTER_KERNEL_BUILDER(Name("AssignVariableOp").Device(DEVICE_CPU), AssignVariableOp);

// AssignAdd / AssignSub and their resource forms: var op= value, in place
// under the variable's lock (copy-on-write when a reader shares the buffer).
// Big variables are split across the intra-op pool.
template <typename T, bool kAdd, bool kResource>
class AssignUpdateOp : public OpKernel {
 public:
  explicit AssignUpdateOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    std::shared_ptr<Var> var;
    if constexpr (kResource) {
      auto looked_up = VarFromHandle(ctx, 0);
      OP_REQUIRES_OK(ctx, looked_up.status());
      var = *std::move(looked_up);
      OP_REQUIRES(ctx, var->dtype() == DataTypeToEnum<T>::value,
                  errors::InvalidArgument("variable '", var->name(), "' has dtype ",
                                          DataTypeString(var->dtype()), ", updated as ",
                                          DataTypeString(DataTypeToEnum<T>::value)));
    } else {
      var = ctx->input_ref(0);
      OP_REQUIRES(ctx, var != nullptr,
                  errors::InvalidArgument("input 'ref' must come from a variable"));
    }
    const Tensor& value = ctx->input(1);
    OP_REQUIRES_OK(ctx, var->Update([&](Tensor* t) -> absl::Status {
      if (t->shape() != value.shape()) {
        return errors::InvalidArgument("cannot ", kAdd ? "add" : "subtract", " a value of shape ",
                                       value.shape().DebugString(), kAdd ? " to" : " from",
                                       " variable '", var->name(), "' of shape ",
                                       t->shape().DebugString(), "; shapes must be equal");
      }
      T* dst = t->data<T>();
      const T* src = value.data<T>();
      auto fn = [dst, src](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          if constexpr (kAdd) {
            dst[i] += src[i];
          } else {
            dst[i] -= src[i];
          }
        }
      };
      const int64_t n = t->NumElements();
      ThreadPool* pool = ctx->intra_op_pool();
      if (pool == nullptr || n < kParallelElements) {
        fn(0, n);
      } else {
        pool->ParallelFor(n, /*cost_per_unit=*/1, fn);
      }
      return absl::OkStatus();
    }));
    if constexpr (!kResource) ctx->set_output_ref(0, var);
  }

 private:
  static constexpr int64_t kParallelElements = 32 * 1024;
};

#define RECFLOW_REGISTER_ASSIGN_UPDATE_(T)                                             \
  REGISTER_KERNEL_BUILDER(Name("AssignAdd").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          AssignUpdateOp<T, true, false>);                             \
  REGISTER_KERNEL_BUILDER(Name("AssignSub").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          AssignUpdateOp<T, false, false>);                            \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AssignAddVariableOp").Device(DEVICE_CPU).TypeConstraint<T>("dtype"),       \
      AssignUpdateOp<T, true, true>);                                                  \
  REGISTER_KERNEL_BUILDER(                                                             \
      Name("AssignSubVariableOp").Device(DEVICE_CPU).TypeConstraint<T>("dtype"),       \
      AssignUpdateOp<T, false, true>)
RECFLOW_REGISTER_ASSIGN_UPDATE_(float);
RECFLOW_REGISTER_ASSIGN_UPDATE_(double);
RECFLOW_REGISTER_ASSIGN_UPDATE_(int32_t);
RECFLOW_REGISTER_ASSIGN_UPDATE_(int64_t);
#undef RECFLOW_REGISTER_ASSIGN_UPDATE_

}  // namespace

absl::StatusOr<std::shared_ptr<Var>> LookupResourceVar(OpKernelContext* ctx, int input) {
  return VarFromHandle(ctx, input);
}

absl::StatusOr<std::vector<std::shared_ptr<Var>>> LookupUpdateVars(
    OpKernelContext* ctx, int num_vars, bool resource, DataType dtype,
    absl::Span<const std::string> input_names) {
  std::vector<std::shared_ptr<Var>> vars(num_vars);
  for (int i = 0; i < num_vars; ++i) {
    if (resource) {
      ASSIGN_OR_RETURN(vars[i], LookupResourceVar(ctx, i));
      if (vars[i]->dtype() != dtype) {
        return errors::InvalidArgument(input_names[i], " is variable '",
                                       vars[i]->name(), "' of dtype ",
                                       DataTypeString(vars[i]->dtype()),
                                       " but T is ", DataTypeString(dtype));
      }
    } else {
      vars[i] = ctx->input_ref(i);
      if (vars[i] == nullptr) {
        return errors::InvalidArgument("input '", input_names[i],
                                       "' must come from a variable");
      }
    }
    for (int j = 0; j < i; ++j) {
      if (vars[i] == vars[j]) {
        return errors::InvalidArgument(
            input_names[j], " and ", input_names[i], " are the same variable '",
            vars[i]->name(), "'; each slot needs a variable of its own");
      }
    }
  }
  return vars;
}

absl::Status CheckScalarInputs(OpKernelContext* ctx, int first,
                               std::initializer_list<int> skip,
                               absl::Span<const std::string> input_names) {
  for (int i = first; i < ctx->num_inputs(); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
    if (ctx->input(i).dims() != 0) {
      return errors::InvalidArgument(input_names[i], " is not a scalar: ",
                                     ctx->input(i).shape().DebugString());
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSlotShapes(absl::Span<Tensor* const> values,
                             const std::vector<std::shared_ptr<Var>>& vars,
                             absl::Span<const std::string> input_names) {
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i]->shape() != values[0]->shape()) {
      return errors::InvalidArgument(
          "var and ", input_names[i],
          " do not have the same shape: ", values[0]->shape().DebugString(),
          " vs ", values[i]->shape().DebugString(), " (variables '",
          vars[0]->name(), "' and '", vars[i]->name(), "')");
    }
  }
  return absl::OkStatus();
}

absl::Status UpdateVarsLocked(const std::vector<std::shared_ptr<Var>>& vars,
                              std::vector<Tensor*>* tensors,
                              const std::function<absl::Status()>& fn) {
  std::vector<int> order(vars.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return std::less<Var*>()(vars[a].get(), vars[b].get());
  });
  tensors->assign(vars.size(), nullptr);
  std::function<absl::Status(size_t)> lock_from =
      [&](size_t k) -> absl::Status {
    if (k == order.size()) return fn();
    return vars[order[k]]->Update([&](Tensor* t) {
      (*tensors)[order[k]] = t;
      return lock_from(k + 1);
    });
  };
  return lock_from(0);
}

}  // namespace recflow
