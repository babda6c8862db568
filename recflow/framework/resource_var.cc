#include "recflow/framework/resource_var.h"

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow {

bool Var::is_initialized() const {
  MutexLock lock(&mu_);
  return initialized_;
}

absl::StatusOr<Tensor> Var::Read() const {
  MutexLock lock(&mu_);
  if (!initialized_) {
    return errors::FailedPrecondition("attempting to use uninitialized variable '", name_,
                                      "'; run its initializer (or restore a checkpoint) first");
  }
  return value_;
}

absl::Status Var::Assign(const Tensor& value, bool validate_shape) {
  if (value.dtype() != dtype_) {
    return errors::InvalidArgument("cannot assign a ", DataTypeString(value.dtype()),
                                   " value to variable '", name_, "' of dtype ",
                                   DataTypeString(dtype_));
  }
  MutexLock lock(&mu_);
  if (validate_shape) {
    if (!declared_shape_.IsCompatibleWith(PartialShape(value.shape()))) {
      return errors::InvalidArgument("cannot assign a value of shape ", value.shape().DebugString(),
                                     " to variable '", name_, "' declared with shape ",
                                     declared_shape_.DebugString());
    }
    if (initialized_ && value_.shape() != value.shape()) {
      return errors::InvalidArgument("cannot assign a value of shape ", value.shape().DebugString(),
                                     " to variable '", name_, "' of shape ",
                                     value_.shape().DebugString(),
                                     " (set validate_shape=false to allow reshaping)");
    }
  }
  value_ = value;
  initialized_ = true;
  return absl::OkStatus();
}

absl::Status Var::Update(const std::function<absl::Status(Tensor*)>& fn) {
  MutexLock lock(&mu_);
  if (!initialized_) {
    return errors::FailedPrecondition("attempting to update uninitialized variable '", name_,
                                      "'");
  }
  if (!value_.RefCountIsOne()) value_ = value_.DeepCopy();
  return fn(&value_);
}

std::string Var::DebugString() const {
  MutexLock lock(&mu_);
  return absl::StrCat("Var(", name_, ": ", DataTypeString(dtype_), " ",
                      initialized_ ? value_.shape().DebugString()
                                   : declared_shape_.DebugString() + ", uninitialized",
                      ")");
}

int64_t Var::MemoryUsed() const {
  MutexLock lock(&mu_);
  return initialized_ ? static_cast<int64_t>(value_.TotalBytes()) : 0;
}

}  // namespace recflow
