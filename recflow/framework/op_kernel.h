// OpKernel: the code that computes one node, and the registry that maps an
// op + device + dtypes to the kernel class.
//
// A kernel plans in its constructor (parse attrs, pick an implementation,
// report bad attrs through the OpKernelConstruction) and only computes in
// Compute(). Bad input is reported through the context and the kernel
// returns; it never aborts or throws:
//
//   class ZeroOutOp : public OpKernel {
//    public:
//     explicit ZeroOutOp(OpKernelConstruction* c) : OpKernel(c) {}
//     void Compute(OpKernelContext* ctx) override {
//       const Tensor& in = ctx->input(0);
//       OP_REQUIRES(ctx, in.dims() == 1,
//                   errors::InvalidArgument("expected a vector, got ", in.shape().DebugString()));
//       Tensor* out = nullptr;
//       OP_REQUIRES_OK(ctx, ctx->allocate_output(0, in.shape(), &out));
//       ...
//     }
//   };
//   REGISTER_KERNEL_BUILDER(Name("ZeroOut").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
//                           ZeroOutOp);
//
// One kernel object serves every step of an executor, possibly from several
// threads at once: Compute() must not mutate the kernel.
#ifndef RECFLOW_FRAMEWORK_OP_KERNEL_H_
#define RECFLOW_FRAMEWORK_OP_KERNEL_H_

#include <functional>
#include <memory>
#include <string>

#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/device.h"
#include "recflow/framework/function.h"
#include "recflow/framework/node_def_util.h"
#include "recflow/framework/resource_var.h"
#include "recflow/proto/node_def.pb.h"
#include "recflow/proto/op_def.pb.h"

namespace recflow {

// What flows along an edge: a tensor, or for a TF1 ref edge the variable
// itself (a consumer expecting a plain value reads it; one expecting a ref,
// such as Assign, writes it).
struct TensorValue {
  Tensor tensor;
  std::shared_ptr<Var> ref;

  bool is_ref() const { return ref != nullptr; }
};

// Arguments in and results out of one step, for the _Arg and _Retval nodes
// that a session puts where feeds and fetches are. Implemented by the
// runtime. Thread-safe for distinct indices.
class CallFrame {
 public:
  virtual ~CallFrame() = default;
  virtual absl::Status GetArg(int index, Tensor* value) const = 0;
  virtual absl::Status SetRetval(int index, const Tensor& value) = 0;
};

class OpKernelConstruction {
 public:
  OpKernelConstruction(Device* device, const tensorflow::NodeDef& def,
                       const tensorflow::OpDef& op_def, std::vector<DataType> input_types,
                       std::vector<DataType> output_types)
      : device_(device),
        def_(def),
        op_def_(op_def),
        input_types_(std::move(input_types)),
        output_types_(std::move(output_types)) {}

  const tensorflow::NodeDef& def() const { return def_; }
  const tensorflow::OpDef& op_def() const { return op_def_; }
  Device* device() const { return device_; }
  ResourceMgr* resource_manager() const { return device_->resource_manager(); }
  const std::vector<DataType>& input_types() const { return input_types_; }
  const std::vector<DataType>& output_types() const { return output_types_; }
  // The runtime of the graph's function library; null where the kernel is
  // made outside a session that has one.
  FunctionLibraryRuntime* function_library() const { return function_library_; }
  void set_function_library(FunctionLibraryRuntime* flr) { function_library_ = flr; }

  template <typename T>
  absl::Status GetAttr(absl::string_view name, T* value) const {
    return GetNodeAttr(AttrSlice(def_), name, value);
  }

  void SetStatus(const absl::Status& s) {
    if (status_.ok()) status_ = s;
  }
  const absl::Status& status() const { return status_; }

 private:
  Device* device_;                       // Not owned.
  const tensorflow::NodeDef& def_;       // Not owned.
  const tensorflow::OpDef& op_def_;      // Not owned.
  std::vector<DataType> input_types_;
  std::vector<DataType> output_types_;
  FunctionLibraryRuntime* function_library_ = nullptr;  // Not owned.
  absl::Status status_;
};

class OpKernelContext;

class OpKernel {
 public:
  explicit OpKernel(OpKernelConstruction* c);
  virtual ~OpKernel() = default;
  OpKernel(const OpKernel&) = delete;
  OpKernel& operator=(const OpKernel&) = delete;

  virtual void Compute(OpKernelContext* ctx) = 0;

  // Cheap kernels run inline on the thread that made them ready; expensive
  // ones are dispatched to the inter-op pool. Kernels that do little work
  // (Const, Identity, small elementwise ops) override this to false.
  virtual bool IsExpensive() const { return true; }

  const std::string& name() const { return def_.name(); }
  const std::string& type_string() const { return def_.op(); }
  const tensorflow::NodeDef& def() const { return def_; }
  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  // The [start, stop) input indices of the input argument `arg_name`.
  absl::Status InputRange(absl::string_view arg_name, int* start, int* stop) const;

 private:
  const tensorflow::NodeDef def_;
  const std::vector<DataType> input_types_;
  const std::vector<DataType> output_types_;
  NameRangeMap input_ranges_;
};

class OpKernelContext {
 public:
  struct Params {
    OpKernel* op_kernel = nullptr;            // Not owned.
    Device* device = nullptr;                 // Not owned.
    absl::Span<TensorValue> inputs;           // Not owned; one per input.
    CallFrame* call_frame = nullptr;          // Not owned; may be null.
    FunctionLibraryRuntime* function_library = nullptr;  // Not owned; may be null.
    int64_t step_id = 0;
  };

  explicit OpKernelContext(Params* params)
      : params_(params), outputs_(params->op_kernel->num_outputs()) {}

  const OpKernel& op_kernel() const { return *params_->op_kernel; }
  Device* device() const { return params_->device; }
  ResourceMgr* resource_manager() const { return params_->device->resource_manager(); }
  // Null when kernels must run single-threaded.
  ThreadPool* intra_op_pool() const { return params_->device->intra_op_pool(); }
  CallFrame* call_frame() const { return params_->call_frame; }
  // See OpKernelConstruction::function_library().
  FunctionLibraryRuntime* function_library() const { return params_->function_library; }
  int64_t step_id() const { return params_->step_id; }

  int num_inputs() const { return static_cast<int>(params_->inputs.size()); }
  // A value input. REQUIRES: input i is not a ref input (the executor reads
  // ref edges into values for inputs that expect values).
  const Tensor& input(int i) const { return params_->inputs[i].tensor; }
  // The variable behind ref input i. REQUIRES: input i is declared Ref(T).
  const std::shared_ptr<Var>& input_ref(int i) const { return params_->inputs[i].ref; }
  // The tensors of a list input argument.
  absl::Status input_list(absl::string_view arg_name, std::vector<Tensor>* tensors) const;

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  DataType expected_output_dtype(int i) const { return params_->op_kernel->output_type(i); }

  // Allocates output i. ResourceExhausted naming the size if memory runs out.
  absl::Status allocate_output(int i, const TensorShape& shape, Tensor** out);
  // Reuses input `input_index`'s buffer for output `output_index` when this
  // kernel holds the only reference to it and dtype and size match (so an
  // elementwise chain allocates once); else allocates. *out is the output.
  absl::Status forward_input_or_allocate_output(int input_index, int output_index,
                                                const TensorShape& shape, Tensor** out);
  void set_output(int i, Tensor tensor) { outputs_[i].tensor = std::move(tensor); }
  // For Ref(T) outputs: the output carries the variable.
  void set_output_ref(int i, std::shared_ptr<Var> var) { outputs_[i].ref = std::move(var); }
  Tensor* mutable_output(int i) { return &outputs_[i].tensor; }
  const TensorValue& output_value(int i) const { return outputs_[i]; }
  TensorValue release_output(int i) { return std::move(outputs_[i]); }

  // The first error wins; later ones are dropped.
  void SetStatus(const absl::Status& s) {
    if (status_.ok()) status_ = s;
  }
  const absl::Status& status() const { return status_; }

 private:
  Params* params_;  // Not owned.
  absl::InlinedVector<TensorValue, 2> outputs_;
  absl::Status status_;
};

// Reports `status` through `ctx` and returns when `cond` is false.
#define OP_REQUIRES(CTX, COND, STATUS) \
  do {                                 \
    if (ABSL_PREDICT_FALSE(!(COND))) { \
      (CTX)->SetStatus(STATUS);        \
      return;                          \
    }                                  \
  } while (0)

// Reports and returns when `expr` yields a non-OK status.
#define OP_REQUIRES_OK(CTX, EXPR)                         \
  do {                                                    \
    ::absl::Status _recflow_op_status = (EXPR);           \
    if (ABSL_PREDICT_FALSE(!_recflow_op_status.ok())) {   \
      (CTX)->SetStatus(_recflow_op_status);               \
      return;                                             \
    }                                                     \
  } while (0)

// ---------------------------------------------------------------------------
// Kernel registry.

// Which node a kernel class serves: the op, the device type, and for type
// attrs the dtypes it handles.
struct KernelDef {
  std::string op;
  std::string device_type;
  std::vector<std::pair<std::string, std::vector<DataType>>> type_constraints;
  int priority = 0;

  // "MatMul on CPU [T in {float}]"
  std::string DebugString() const;
};

class KernelDefBuilder {
 public:
  explicit KernelDefBuilder(const char* op) { def_.op = op; }
  KernelDefBuilder& Device(const char* device_type) {
    def_.device_type = device_type;
    return *this;
  }
  template <typename T>
  KernelDefBuilder& TypeConstraint(const char* attr) {
    return TypeConstraint(attr, {DataTypeToEnum<T>::value});
  }
  KernelDefBuilder& TypeConstraint(const char* attr, std::vector<DataType> allowed) {
    def_.type_constraints.emplace_back(attr, std::move(allowed));
    return *this;
  }
  // Higher wins when several kernels match.
  KernelDefBuilder& Priority(int priority) {
    def_.priority = priority;
    return *this;
  }
  const KernelDef& def() const { return def_; }

 private:
  KernelDef def_;
};

// Spelled Name(...) in REGISTER_KERNEL_BUILDER, as in TensorFlow.
class Name : public KernelDefBuilder {
 public:
  explicit Name(const char* op) : KernelDefBuilder(op) {}
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(OpKernelConstruction*)>;

class KernelRegistry {
 public:
  static KernelRegistry* Global();

  // A second kernel with the same op, device and type constraints is not
  // added; the clash is recorded in RegistrationErrors().
  void Register(KernelDef def, std::string class_name, KernelFactory factory);
  std::vector<std::string> RegistrationErrors() const;
  // The best kernel for `node` on `device_type`. NotFound naming the node,
  // its dtypes and the kernels registered for the op when none matches.
  absl::StatusOr<const KernelDef*> FindKernel(absl::string_view device_type,
                                              const tensorflow::NodeDef& node) const;
  bool HasKernelForOp(absl::string_view op, absl::string_view device_type) const;
  // "KernelDef.DebugString() -> class name", sorted.
  std::vector<std::string> ListKernels() const;

  // Instantiates the kernel for `def` (defaults already added) on `device`.
  // Errors name the node: no kernel, or the constructor's reported failure.
  // `flr` (may be null) is what the kernel's function_library() returns.
  absl::StatusOr<std::unique_ptr<OpKernel>> CreateKernel(
      Device* device, const tensorflow::NodeDef& def, const tensorflow::OpDef& op_def,
      const std::vector<DataType>& input_types, const std::vector<DataType>& output_types,
      FunctionLibraryRuntime* flr = nullptr) const;

 private:
  struct Registration {
    KernelDef def;
    std::string class_name;
    KernelFactory factory;
  };
  absl::StatusOr<const Registration*> Find(absl::string_view device_type,
                                           const tensorflow::NodeDef& node) const;

  mutable Mutex mu_;
  std::multimap<std::string, Registration, std::less<>> kernels_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
};

// Implementation details of REGISTER_KERNEL_BUILDER follow.
namespace register_kernel {
struct KernelRegistrar {
  KernelRegistrar(const KernelDefBuilder& builder, const char* class_name, KernelFactory factory) {
    KernelRegistry::Global()->Register(builder.def(), class_name, std::move(factory));
  }
};
}  // namespace register_kernel

#define REGISTER_KERNEL_BUILDER(kernel_builder, ...) \
  RECFLOW_REGISTER_KERNEL_UNIQ_HELPER_(__COUNTER__, kernel_builder, __VA_ARGS__)
#define RECFLOW_REGISTER_KERNEL_UNIQ_HELPER_(ctr, kernel_builder, ...) \
  RECFLOW_REGISTER_KERNEL_UNIQ_(ctr, kernel_builder, __VA_ARGS__)
#define RECFLOW_REGISTER_KERNEL_UNIQ_(ctr, kernel_builder, ...)                        \
  [[maybe_unused]] static const ::recflow::register_kernel::KernelRegistrar           \
      recflow_register_kernel_##ctr(                                                  \
          ::recflow::kernel_builder, #__VA_ARGS__,                                    \
          [](::recflow::OpKernelConstruction* c) -> std::unique_ptr<::recflow::OpKernel> { \
            return std::make_unique<__VA_ARGS__>(c);                                  \
          })

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_OP_KERNEL_H_
