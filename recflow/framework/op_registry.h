// The op registry: every op recflow (or a loaded custom-op library) knows,
// as an OpDef (TensorFlow's schema: typed inputs and outputs, attrs with
// defaults and constraints) plus its shape function.
//
// An op is declared once, in ops/<family>.cc:
//
//   REGISTER_OP("MatMul")
//       .Input("a: T")
//       .Input("b: T")
//       .Output("product: T")
//       .Attr("transpose_a: bool = false")
//       .Attr("transpose_b: bool = false")
//       .Attr("T: {float, double, int32}")
//       .SetShapeFn(shape_fns::MatMulShape)
//       .Doc("Multiplies matrix a by matrix b.");
//
// Spec syntax (TensorFlow's):
//   Input/Output  "name: T"          type from type attr T
//                 "name: float"      a fixed type
//                 "name: N * T"      a list of N tensors of type T
//                 "name: Tlist"      a list typed by a list(type) attr
//                 "name: Ref(T)"     a TF1 reference (mutable variable)
//   Attr          "name: int", "name: int >= 1 = 2", "name: {float, int32}",
//                 "name: list(int) = []", "name: string = 'x'",
//                 "name: shape = [-1]", "name: type", "name: tensor",
//                 "T: numbertype" (also realnumbertype, floatingpointtype,
//                 integraltype, quantizedtype: TF's type classes)
// A type or number attr an input names but no Attr() declares is added as
// "T: type" / "N: int >= 1".
//
// Registration happens in static initializers; a bad spec is recorded in
// RegistrationErrors() (a test asserts it is empty) and the op is left out.
// Thread-safe.
#ifndef RECFLOW_FRAMEWORK_OP_REGISTRY_H_
#define RECFLOW_FRAMEWORK_OP_REGISTRY_H_

#include <map>
#include <memory>
#include <string>

#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/mutex.h"
#include "recflow/framework/shape_inference.h"
#include "recflow/proto/op_def.pb.h"

namespace recflow {

struct OpRegistrationData {
  tensorflow::OpDef op_def;
  ShapeFn shape_fn;
};

class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string op_name);

  OpDefBuilder& Attr(std::string spec);
  OpDefBuilder& Input(std::string spec);
  OpDefBuilder& Output(std::string spec);
  OpDefBuilder& SetIsStateful();
  OpDefBuilder& SetIsCommutative();
  OpDefBuilder& SetIsAggregate();
  OpDefBuilder& SetAllowsUninitializedInput();
  OpDefBuilder& SetShapeFn(ShapeFn fn);
  // First line: the summary; the rest (after a blank line): description.
  OpDefBuilder& Doc(std::string text);

  const std::string& op_name() const { return name_; }
  // Parses the specs; errors name the op and the spec at fault.
  absl::StatusOr<OpRegistrationData> Finalize() const;

 private:
  std::string name_;
  std::vector<std::string> attrs_, inputs_, outputs_;
  bool stateful_ = false, commutative_ = false, aggregate_ = false,
       allows_uninitialized_input_ = false;
  ShapeFn shape_fn_;
  std::string doc_;
};

class OpRegistry {
 public:
  static OpRegistry* Global();

  // Fails when the builder's specs are invalid or the name is taken.
  absl::Status Register(const OpDefBuilder& builder);
  // NotFound naming the op (and ops with similar names) when absent.
  absl::StatusOr<const OpRegistrationData*> LookUp(absl::string_view op_name) const;
  // Null when absent.
  const OpRegistrationData* Find(absl::string_view op_name) const;
  std::vector<std::string> ListOpNames() const;  // sorted
  void Export(tensorflow::OpList* ops) const;    // sorted by name
  // Errors from registrations that failed (static initializers cannot
  // return a status); empty when every op registered.
  std::vector<std::string> RegistrationErrors() const;
  void RecordRegistrationError(std::string error);

 private:
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<OpRegistrationData>, std::less<>> ops_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::string> errors_ ABSL_GUARDED_BY(mu_);
};

// Implementation details of REGISTER_OP follow.
namespace register_op {
class OpDefBuilderWrapper {
 public:
  explicit OpDefBuilderWrapper(const char* name) : builder_(name) {}
  OpDefBuilderWrapper& Attr(std::string spec) { builder_.Attr(std::move(spec)); return *this; }
  OpDefBuilderWrapper& Input(std::string spec) { builder_.Input(std::move(spec)); return *this; }
  OpDefBuilderWrapper& Output(std::string spec) { builder_.Output(std::move(spec)); return *this; }
  OpDefBuilderWrapper& SetIsStateful() { builder_.SetIsStateful(); return *this; }
  OpDefBuilderWrapper& SetIsCommutative() { builder_.SetIsCommutative(); return *this; }
  OpDefBuilderWrapper& SetIsAggregate() { builder_.SetIsAggregate(); return *this; }
  OpDefBuilderWrapper& SetAllowsUninitializedInput() {
    builder_.SetAllowsUninitializedInput();
    return *this;
  }
  OpDefBuilderWrapper& SetShapeFn(ShapeFn fn) { builder_.SetShapeFn(std::move(fn)); return *this; }
  OpDefBuilderWrapper& Doc(std::string text) { builder_.Doc(std::move(text)); return *this; }
  const OpDefBuilder& builder() const { return builder_; }

 private:
  OpDefBuilder builder_;
};

struct OpDefBuilderReceiver {
  OpDefBuilderReceiver(const OpDefBuilderWrapper& wrapper);  // NOLINT
};
}  // namespace register_op

#define REGISTER_OP(name) RECFLOW_REGISTER_OP_UNIQ_HELPER_(__COUNTER__, name)
#define RECFLOW_REGISTER_OP_UNIQ_HELPER_(ctr, name) RECFLOW_REGISTER_OP_UNIQ_(ctr, name)
#define RECFLOW_REGISTER_OP_UNIQ_(ctr, name)                                    \
  [[maybe_unused]] static const ::recflow::register_op::OpDefBuilderReceiver \
      recflow_register_op_##ctr = ::recflow::register_op::OpDefBuilderWrapper(name)

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_OP_REGISTRY_H_
