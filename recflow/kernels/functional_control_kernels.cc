// Kernels of If / StatelessIf, Case / StatelessCase and While /
// StatelessWhile (ops/functional_control_ops.cc), as TensorFlow's
// kernels/functional_ops.cc runs them, synchronously: every function is
// instantiated once, when the kernel is made, and its argument and result
// dtypes checked against the op's attrs there, so a missing function or a
// branch of the wrong signature fails before the first step, naming the
// function. Each step then runs the chosen branch, or cond and body in turn,
// through the session's FunctionLibraryRuntime on the kernel's thread.
#include "absl/strings/str_join.h"
#include "recflow/framework/function.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

using Handle = FunctionLibraryRuntime::Handle;

std::string TypesString(const std::vector<DataType>& types) {
  std::vector<std::string> parts;
  for (DataType t : types) parts.push_back(DataTypeString(t));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

// TensorFlow's ToBool: a scalar of a numeric type is true when non-zero, a
// string scalar when non-empty; any other tensor when it has elements.
absl::Status ToBool(const Tensor& t, bool* v) {
  if (t.dims() != 0) {
    *v = t.NumElements() > 0;
    return absl::OkStatus();
  }
  switch (t.dtype()) {
    case DT_FLOAT: *v = t.scalar<float>() != 0; break;
    case DT_DOUBLE: *v = t.scalar<double>() != 0; break;
    case DT_INT32: *v = t.scalar<int32_t>() != 0; break;
    case DT_UINT8: *v = t.scalar<uint8_t>() != 0; break;
    case DT_INT16: *v = t.scalar<int16_t>() != 0; break;
    case DT_INT8: *v = t.scalar<int8_t>() != 0; break;
    case DT_INT64: *v = t.scalar<int64_t>() != 0; break;
    case DT_BOOL: *v = t.scalar<bool>(); break;
    case DT_STRING: *v = !t.scalar<std::string>().empty(); break;
    default:
      return errors::InvalidArgument(DataTypeString(t.dtype()),
                                     " cannot be converted to a boolean");
  }
  return absl::OkStatus();
}

std::vector<DataType> BaseTypes(const std::vector<DataType>& types) {
  std::vector<DataType> out;
  for (DataType t : types) out.push_back(BaseType(t));
  return out;
}

// The function attr `attr` (or each function of a list(func) attr), read
// from the node.
absl::StatusOr<std::vector<tensorflow::NameAttrList>> FuncAttr(OpKernelConstruction* c,
                                                               absl::string_view attr) {
  const tensorflow::AttrValue* v = AttrSlice(c->def()).Find(attr);
  if (v != nullptr && v->value_case() == tensorflow::AttrValue::kFunc) {
    return std::vector<tensorflow::NameAttrList>{v->func()};
  }
  if (v != nullptr && v->value_case() == tensorflow::AttrValue::kList &&
      v->list().func_size() > 0) {
    return std::vector<tensorflow::NameAttrList>(v->list().func().begin(),
                                                 v->list().func().end());
  }
  return errors::InvalidArgument("attr '", attr, "' must name a function");
}

// Instantiates `f`, the op's `role` function, and checks that it takes `args`
// and (unless `rets` is null) returns `rets`.
absl::StatusOr<Handle> InstantiateChecked(FunctionLibraryRuntime* flr,
                                          const tensorflow::NameAttrList& f,
                                          absl::string_view role,
                                          const std::vector<DataType>& args,
                                          const std::vector<DataType>* rets) {
  auto handle = flr->Instantiate(f);
  if (!handle.ok()) {
    return errors::Annotate(handle.status(), absl::StrCat(role, " '", f.name(), "'"));
  }
  if (flr->ArgTypes(*handle) != args) {
    return errors::InvalidArgument(role, " '", f.name(), "' takes ",
                                   TypesString(flr->ArgTypes(*handle)), " but the op passes ",
                                   TypesString(args));
  }
  if (rets != nullptr && flr->RetTypes(*handle) != *rets) {
    return errors::InvalidArgument(role, " '", f.name(), "' returns ",
                                   TypesString(flr->RetTypes(*handle)), " but the op outputs ",
                                   TypesString(*rets));
  }
  return *handle;
}

FunctionLibraryRuntime* RequireLibrary(OpKernelConstruction* c) {
  FunctionLibraryRuntime* flr = c->function_library();
  if (flr == nullptr) {
    c->SetStatus(errors::FailedPrecondition(
        c->def().op(), " needs a function library, and none is available here (run it in a "
                       "Session whose graph carries the library)"));
  }
  return flr;
}

// Sets the kernel's outputs from `rets`, which the function's checked
// signature makes match the op's output types.
void SetOutputs(OpKernelContext* ctx, std::vector<Tensor>* rets) {
  OP_REQUIRES(ctx, static_cast<int>(rets->size()) == ctx->num_outputs(),
              errors::Internal("expected ", ctx->num_outputs(), " results, got ", rets->size()));
  for (int i = 0; i < ctx->num_outputs(); ++i) ctx->set_output(i, std::move((*rets)[i]));
}

// If / StatelessIf (branches {else, then}, chosen by ToBool(cond)) and
// Case / StatelessCase (branches in order, chosen by branch_index; out of
// range runs the last one).
class BranchOp : public OpKernel {
 public:
  explicit BranchOp(OpKernelConstruction* c) : OpKernel(c) {
    is_if_ = c->def().op() == "If" || c->def().op() == "StatelessIf";
    flr_ = RequireLibrary(c);
    if (flr_ == nullptr) return;
    std::vector<tensorflow::NameAttrList> funcs;
    std::vector<std::string> roles;
    if (is_if_) {
      for (const char* attr : {"else_branch", "then_branch"}) {
        auto f = FuncAttr(c, attr);
        OP_REQUIRES_OK(c, f.status());
        funcs.push_back((*f)[0]);
        roles.push_back(attr);
      }
    } else {
      auto f = FuncAttr(c, "branches");
      OP_REQUIRES_OK(c, f.status());
      funcs = *std::move(f);
      for (size_t i = 0; i < funcs.size(); ++i) roles.push_back(absl::StrCat("branches[", i, "]"));
    }
    const std::vector<DataType> all_in = BaseTypes(c->input_types());
    const std::vector<DataType> args(all_in.begin() + 1, all_in.end());
    const std::vector<DataType> rets = BaseTypes(c->output_types());
    for (size_t i = 0; i < funcs.size(); ++i) {
      auto h = InstantiateChecked(flr_, funcs[i], roles[i], args, &rets);
      OP_REQUIRES_OK(c, h.status());
      branches_.push_back(*h);
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& selector = ctx->input(0);
    size_t branch = 0;
    if (is_if_) {
      bool cond = false;
      OP_REQUIRES_OK(ctx, ToBool(selector, &cond));
      branch = cond ? 1 : 0;
    } else {
      OP_REQUIRES(ctx, selector.dims() == 0,
                  errors::InvalidArgument("branch_index must be scalar, got shape ",
                                          selector.shape().DebugString()));
      const int32_t index = selector.scalar<int32_t>();
      branch = index < 0 || static_cast<size_t>(index) >= branches_.size()
                   ? branches_.size() - 1
                   : static_cast<size_t>(index);
    }
    std::vector<Tensor> args;
    args.reserve(ctx->num_inputs() - 1);
    for (int i = 1; i < ctx->num_inputs(); ++i) args.push_back(ctx->input(i));
    std::vector<Tensor> rets;
    OP_REQUIRES_OK(ctx, flr_->Run(branches_[branch], std::move(args), &rets));
    SetOutputs(ctx, &rets);
  }

 private:
  bool is_if_ = false;
  FunctionLibraryRuntime* flr_ = nullptr;  // Not owned.
  std::vector<Handle> branches_;
};

// While / StatelessWhile: evaluates cond on the loop variables and, while
// it holds, replaces them with body's results.
class WhileOp : public OpKernel {
 public:
  explicit WhileOp(OpKernelConstruction* c) : OpKernel(c) {
    flr_ = RequireLibrary(c);
    if (flr_ == nullptr) return;
    auto cond = FuncAttr(c, "cond");
    OP_REQUIRES_OK(c, cond.status());
    auto body = FuncAttr(c, "body");
    OP_REQUIRES_OK(c, body.status());
    const std::vector<DataType> vars = BaseTypes(c->input_types());
    auto cond_handle = InstantiateChecked(flr_, (*cond)[0], "cond", vars, nullptr);
    OP_REQUIRES_OK(c, cond_handle.status());
    OP_REQUIRES(c, flr_->RetTypes(*cond_handle).size() == 1,
                errors::InvalidArgument("cond '", (*cond)[0].name(), "' returns ",
                                        TypesString(flr_->RetTypes(*cond_handle)),
                                        "; a While cond must return a single tensor"));
    auto body_handle = InstantiateChecked(flr_, (*body)[0], "body", vars, &vars);
    OP_REQUIRES_OK(c, body_handle.status());
    cond_ = *cond_handle;
    body_ = *body_handle;
    cond_name_ = (*cond)[0].name();
  }

  void Compute(OpKernelContext* ctx) override {
    std::vector<Tensor> vars;
    vars.reserve(ctx->num_inputs());
    for (int i = 0; i < ctx->num_inputs(); ++i) vars.push_back(ctx->input(i));
    std::vector<Tensor> cond_rets, body_rets;
    for (int64_t iteration = 0;; ++iteration) {
      cond_rets.clear();
      OP_REQUIRES_OK(ctx, flr_->Run(cond_, vars, &cond_rets));
      bool go = false;
      absl::Status s = cond_rets.size() == 1
                           ? ToBool(cond_rets[0], &go)
                           : errors::Internal("cond returned ", cond_rets.size(), " tensors");
      OP_REQUIRES(ctx, s.ok(),
                  errors::InvalidArgument("cond '", cond_name_, "' at iteration ", iteration,
                                          ": ", s.message()));
      if (!go) break;
      body_rets.clear();
      OP_REQUIRES_OK(ctx, flr_->Run(body_, std::move(vars), &body_rets));
      vars.swap(body_rets);
    }
    SetOutputs(ctx, &vars);
  }

 private:
  FunctionLibraryRuntime* flr_ = nullptr;  // Not owned.
  Handle cond_ = -1;
  Handle body_ = -1;
  std::string cond_name_;
};

REGISTER_KERNEL_BUILDER(Name("If").Device(DEVICE_CPU), BranchOp);
REGISTER_KERNEL_BUILDER(Name("StatelessIf").Device(DEVICE_CPU), BranchOp);
REGISTER_KERNEL_BUILDER(Name("Case").Device(DEVICE_CPU), BranchOp);
REGISTER_KERNEL_BUILDER(Name("StatelessCase").Device(DEVICE_CPU), BranchOp);
REGISTER_KERNEL_BUILDER(Name("While").Device(DEVICE_CPU), WhileOp);
REGISTER_KERNEL_BUILDER(Name("StatelessWhile").Device(DEVICE_CPU), WhileOp);

}  // namespace
}  // namespace recflow
