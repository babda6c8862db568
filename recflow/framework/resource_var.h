// Var: a variable's value, held as a resource. Both TensorFlow variable
// styles map onto it: TF1's VariableV2 (whose ref output carries the Var
// along "ref" edges, read implicitly by consumers) and resource variables
// (VarHandleOp + ReadVariableOp / AssignVariableOp).
//
// Copy-on-write: Read() hands out a Tensor sharing the current buffer, and a
// writer that finds the buffer shared replaces it instead of writing in place,
// so a value read in a step never changes under its reader.
// Thread-safe.
#ifndef RECFLOW_FRAMEWORK_RESOURCE_VAR_H_
#define RECFLOW_FRAMEWORK_RESOURCE_VAR_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/core/mutex.h"
#include "recflow/core/resource_handle.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/partial_shape.h"

namespace recflow {

class Var : public ResourceBase {
 public:
  // `name` is for messages (the variable's node or shared name).
  Var(DataType dtype, PartialShape shape, std::string name)
      : dtype_(dtype), declared_shape_(std::move(shape)), name_(std::move(name)) {}

  DataType dtype() const { return dtype_; }
  const std::string& name() const { return name_; }
  const PartialShape& declared_shape() const { return declared_shape_; }
  bool is_initialized() const;

  // The current value (sharing its buffer). FailedPrecondition naming the
  // variable when it was never assigned.
  absl::StatusOr<Tensor> Read() const;

  // Sets the value. With validate_shape, the value must fit the declared
  // shape (and, once initialized, keep the current shape). The dtype must
  // match. The value's buffer is shared, not copied.
  absl::Status Assign(const Tensor& value, bool validate_shape);

  // Runs `fn` on the value under the variable's lock for an in-place update
  // (optimizers). If the buffer is shared with a reader, `fn` gets a private
  // copy that then becomes the value. FailedPrecondition when uninitialized.
  absl::Status Update(const std::function<absl::Status(Tensor*)>& fn);

  std::string DebugString() const override;
  int64_t MemoryUsed() const override;

 private:
  const DataType dtype_;
  const PartialShape declared_shape_;
  const std::string name_;
  mutable Mutex mu_;
  Tensor value_ ABSL_GUARDED_BY(mu_);
  bool initialized_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_RESOURCE_VAR_H_
