// CPU kernels for the dense optimizer updates (ops/training_ops.cc):
// ApplyGradientDescent, ApplyMomentum, ApplyAdagrad(V2), ApplyAdam, ApplyAdamW,
// ApplyFtrl, ApplyFtrlV2 and their Resource* forms, for float and double.
//
// Each kernel is one fused pass: a single loop updates the variable and its
// slots element by element (no temporaries), split across the intra-op pool
// when the variable is big. The loops are the update rules that the sparse
// kernels and the hash tables run too (embedding/update_rules.h): the
// formulas of TensorFlow's training_ops.cc, evaluated in the same order.
//
// The variable and its slots are updated under their locks (Var::Update),
// taken in address order so that two updates sharing variables cannot
// deadlock; each update is in place unless a reader shares the buffer, in
// which case Var::Update hands out a private copy first (copy-on-write).
#include "recflow/kernels/training_kernels.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "recflow/embedding/update_rules.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/state_kernels.h"

namespace recflow {
namespace {

// Below this much estimated work (ns) the loop runs inline.
constexpr int64_t kInlineCostNs = 32 * 1024;

template <typename F>
void ParallelLoop(OpKernelContext* ctx, int64_t n, int64_t cost_per_element_ns,
                  F&& fn) {
  ThreadPool* pool = ctx->intra_op_pool();
  if (pool == nullptr || n * cost_per_element_ns < kInlineCostNs) {
    fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, cost_per_element_ns, std::forward<F>(fn));
  }
}

// What every Apply kernel shares: find the variable and slots (ref inputs
// or resource handles), check the scalars, lock, check shapes, then run the
// op's fused loop (Apply).
template <typename T, bool kResource>
class ApplyOpBase : public OpKernel {
 public:
  // Inputs [0, num_vars) are the variable and its slots, input `grad_index`
  // is the gradient, every other input a scalar hyperparameter.
  ApplyOpBase(OpKernelConstruction* c, int num_vars, int grad_index)
      : OpKernel(c), num_vars_(num_vars), grad_index_(grad_index) {
    bool use_locking = false;  // always locked; see training_ops.h
    c->SetStatus(c->GetAttr("use_locking", &use_locking));
    for (const auto& arg : c->op_def().input_arg())
      input_names_.push_back(arg.name());
  }

  void Compute(OpKernelContext* ctx) final {
    auto found = LookupUpdateVars(ctx, num_vars_, kResource,
                                  DataTypeToEnum<T>::value, input_names_);
    OP_REQUIRES_OK(ctx, found.status());
    const std::vector<std::shared_ptr<Var>>& vars = *found;
    OP_REQUIRES_OK(
        ctx, CheckScalarInputs(ctx, num_vars_, {grad_index_}, input_names_));
    OP_REQUIRES_OK(ctx, ValidateHyperparameters(ctx));
    const Tensor& grad = ctx->input(grad_index_);
    std::vector<Tensor*> values;
    OP_REQUIRES_OK(ctx, UpdateVarsLocked(vars, &values, [&]() -> absl::Status {
                     RETURN_IF_ERROR(
                         CheckSlotShapes(values, vars, input_names_));
                     if (grad.shape() != values[0]->shape()) {
                       return errors::InvalidArgument(
                           "var and ", input_names_[grad_index_],
                           " do not have the same shape: ",
                           values[0]->shape().DebugString(), " vs ",
                           grad.shape().DebugString(), " (variable '",
                           vars[0]->name(), "')");
                     }
                     Apply(ctx, absl::MakeSpan(values), grad.data<T>(),
                           grad.NumElements());
                     return absl::OkStatus();
                   }));
    if constexpr (!kResource) ctx->set_output_ref(0, vars[0]);
  }

 protected:
  static T Scalar(OpKernelContext* ctx, int i) {
    return ctx->input(i).scalar<T>();
  }
  // Checks hyperparameter values (FTRL's lr > 0, ...). Runs before locking.
  virtual absl::Status ValidateHyperparameters(OpKernelContext* ctx) const {
    return absl::OkStatus();
  }
  // The fused update over `n` elements. vars[i] is the value of input i.
  virtual void Apply(OpKernelContext* ctx, absl::Span<Tensor* const> vars,
                     const T* grad, int64_t n) const = 0;

 private:
  const int num_vars_;
  const int grad_index_;
  std::vector<std::string> input_names_;
};

// The fused loops: each thread updates its slice [begin, end) of the
// variable with the rule of embedding/update_rules.h.

// var -= alpha * delta
template <typename T, bool kResource>
class ApplyGradientDescentOp : public ApplyOpBase<T, kResource> {
 public:
  explicit ApplyGradientDescentOp(OpKernelConstruction* c)
      : ApplyOpBase<T, kResource>(c, 1, 2) {}

 private:
  void Apply(OpKernelContext* ctx, absl::Span<Tensor* const> vars, const T* g,
             int64_t n) const override {
    T* var = vars[0]->data<T>();
    const T lr = this->Scalar(ctx, 1);
    ParallelLoop(ctx, n, 1, [=](int64_t begin, int64_t end) {
      embedding::GradientDescentUpdate(lr, end - begin, g + begin, var + begin);
    });
  }
};

// inputs: var, accum, lr, grad, momentum
template <typename T, bool kResource>
class ApplyMomentumOp : public ApplyOpBase<T, kResource> {
 public:
  explicit ApplyMomentumOp(OpKernelConstruction* c)
      : ApplyOpBase<T, kResource>(c, 2, 3) {
    c->SetStatus(c->GetAttr("use_nesterov", &use_nesterov_));
  }

 private:
  void Apply(OpKernelContext* ctx, absl::Span<Tensor* const> vars, const T* g,
             int64_t n) const override {
    T* var = vars[0]->data<T>();
    T* accum = vars[1]->data<T>();
    const embedding::MomentumCoefficients<T> c{.lr = this->Scalar(ctx, 2),
                                               .momentum = this->Scalar(ctx, 4),
                                               .nesterov = use_nesterov_};
    ParallelLoop(ctx, n, 2, [=](int64_t begin, int64_t end) {
      embedding::MomentumUpdate(c, end - begin, g + begin, var + begin,
                                accum + begin);
    });
  }
  bool use_nesterov_ = false;
};

// inputs: var, accum, lr, [epsilon (kV2),] grad
template <typename T, bool kResource, bool kV2>
class ApplyAdagradOp : public ApplyOpBase<T, kResource> {
 public:
  explicit ApplyAdagradOp(OpKernelConstruction* c)
      : ApplyOpBase<T, kResource>(c, 2, kV2 ? 4 : 3) {
    c->SetStatus(c->GetAttr("update_slots", &update_slots_));
  }

 private:
  void Apply(OpKernelContext* ctx, absl::Span<Tensor* const> vars, const T* g,
             int64_t n) const override {
    T* var = vars[0]->data<T>();
    T* accum = vars[1]->data<T>();
    // ApplyAdagrad divides by sqrt(a) + 0, as it always has (the same bits
    // as sqrt(a) but for a = -0: Note [Update rule bits]).
    const embedding::AdagradCoefficients<T> c{
        .lr = this->Scalar(ctx, 2),
        .epsilon = kV2 ? this->Scalar(ctx, 3) : T(0),
        .update_slots = update_slots_};
    ParallelLoop(ctx, n, 4, [=](int64_t begin, int64_t end) {
      embedding::AdagradUpdate</*kEpsilon=*/true>(c, end - begin, g + begin,
                                                  var + begin, accum + begin);
    });
  }
  bool update_slots_ = true;
};

// inputs: var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
// [weight_decay,] grad
template <typename T, bool kResource, bool kWeightDecay>
class ApplyAdamOp : public ApplyOpBase<T, kResource> {
 public:
  explicit ApplyAdamOp(OpKernelConstruction* c)
      : ApplyOpBase<T, kResource>(c, 3, kWeightDecay ? 10 : 9) {
    c->SetStatus(c->GetAttr("use_nesterov", &use_nesterov_));
  }

 private:
  void Apply(OpKernelContext* ctx, absl::Span<Tensor* const> vars, const T* g,
             int64_t n) const override {
    T* var = vars[0]->data<T>();
    T* m = vars[1]->data<T>();
    T* v = vars[2]->data<T>();
    const T lr = this->Scalar(ctx, 5);
    embedding::AdamCoefficients<T> c = embedding::MakeAdamCoefficients(
        lr, /*beta1=*/this->Scalar(ctx, 6), /*beta2=*/this->Scalar(ctx, 7),
        /*epsilon=*/this->Scalar(ctx, 8), /*beta1_power=*/this->Scalar(ctx, 3),
        /*beta2_power=*/this->Scalar(ctx, 4));
    c.nesterov = use_nesterov_;
    // Decoupled weight decay (AdamW): var *= (1 - lr * weight_decay) first.
    if constexpr (kWeightDecay) c.decay = lr * this->Scalar(ctx, 9);
    ParallelLoop(ctx, n, 6, [=](int64_t begin, int64_t end) {
      embedding::AdamUpdate<kWeightDecay>(c, end - begin, g + begin,
                                          var + begin, m + begin, v + begin);
    });
  }
  bool use_nesterov_ = false;
};

// inputs: var, accum, linear, grad, lr, l1, l2, [l2_shrinkage,] lr_power
template <typename T, bool kResource, bool kV2>
class ApplyFtrlOp : public ApplyOpBase<T, kResource> {
 public:
  explicit ApplyFtrlOp(OpKernelConstruction* c)
      : ApplyOpBase<T, kResource>(c, 3, 3) {
    c->SetStatus(c->GetAttr("multiply_linear_by_lr", &multiply_linear_by_lr_));
  }

 private:
  static constexpr int kLr = 4, kL1 = 5, kL2 = 6, kShrinkage = 7,
                       kLrPower = kV2 ? 8 : 7;

  absl::Status ValidateHyperparameters(OpKernelContext* ctx) const override {
    return ValidateFtrlHyperparameters(
        this->Scalar(ctx, kLr), this->Scalar(ctx, kL1), this->Scalar(ctx, kL2),
        kV2 ? this->Scalar(ctx, kShrinkage) : T(0),
        this->Scalar(ctx, kLrPower));
  }

  void Apply(OpKernelContext* ctx, absl::Span<Tensor* const> vars, const T* g,
             int64_t n) const override {
    T* var = vars[0]->data<T>();
    T* accum = vars[1]->data<T>();
    T* linear = vars[2]->data<T>();
    const embedding::FtrlCoefficients<T> c = embedding::MakeFtrlCoefficients(
        this->Scalar(ctx, kLr), this->Scalar(ctx, kL1), this->Scalar(ctx, kL2),
        kV2 ? this->Scalar(ctx, kShrinkage) : T(0), this->Scalar(ctx, kLrPower),
        multiply_linear_by_lr_);
    ParallelLoop(
        ctx, n, c.sqrt_power ? 10 : 40, [=](int64_t begin, int64_t end) {
          embedding::FtrlUpdate</*kShrinkage=*/kV2>(c, end - begin, g + begin,
                                                    var + begin, accum + begin,
                                                    linear + begin);
        });
  }
  bool multiply_linear_by_lr_ = false;
};

#define RECFLOW_REGISTER_APPLY_(op, T, ...)                                   \
  REGISTER_KERNEL_BUILDER(Name(op).Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          __VA_ARGS__)

#define RECFLOW_REGISTER_APPLY_KERNELS_(T)                                     \
  RECFLOW_REGISTER_APPLY_("ApplyGradientDescent", T,                           \
                          ApplyGradientDescentOp<T, false>);                   \
  RECFLOW_REGISTER_APPLY_("ResourceApplyGradientDescent", T,                   \
                          ApplyGradientDescentOp<T, true>);                    \
  RECFLOW_REGISTER_APPLY_("ApplyMomentum", T, ApplyMomentumOp<T, false>);      \
  RECFLOW_REGISTER_APPLY_("ResourceApplyMomentum", T,                          \
                          ApplyMomentumOp<T, true>);                           \
  RECFLOW_REGISTER_APPLY_("ApplyAdagrad", T, ApplyAdagradOp<T, false, false>); \
  RECFLOW_REGISTER_APPLY_("ResourceApplyAdagrad", T,                           \
                          ApplyAdagradOp<T, true, false>);                     \
  RECFLOW_REGISTER_APPLY_("ApplyAdagradV2", T, ApplyAdagradOp<T, false, true>); \
  RECFLOW_REGISTER_APPLY_("ResourceApplyAdagradV2", T,                         \
                          ApplyAdagradOp<T, true, true>);                      \
  RECFLOW_REGISTER_APPLY_("ApplyAdam", T, ApplyAdamOp<T, false, false>);       \
  RECFLOW_REGISTER_APPLY_("ResourceApplyAdam", T,                              \
                          ApplyAdamOp<T, true, false>);                        \
  RECFLOW_REGISTER_APPLY_("ApplyAdamW", T, ApplyAdamOp<T, false, true>);       \
  RECFLOW_REGISTER_APPLY_("ResourceApplyAdamW", T,                             \
                          ApplyAdamOp<T, true, true>);                         \
  RECFLOW_REGISTER_APPLY_("ApplyFtrl", T, ApplyFtrlOp<T, false, false>);       \
  RECFLOW_REGISTER_APPLY_("ResourceApplyFtrl", T,                              \
                          ApplyFtrlOp<T, true, false>);                        \
  RECFLOW_REGISTER_APPLY_("ApplyFtrlV2", T, ApplyFtrlOp<T, false, true>);      \
  RECFLOW_REGISTER_APPLY_("ResourceApplyFtrlV2", T, ApplyFtrlOp<T, true, true>)

RECFLOW_REGISTER_APPLY_KERNELS_(float);
RECFLOW_REGISTER_APPLY_KERNELS_(double);

#undef RECFLOW_REGISTER_APPLY_KERNELS_
#undef RECFLOW_REGISTER_APPLY_

}  // namespace
}  // namespace recflow
