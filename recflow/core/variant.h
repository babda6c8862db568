// Variant: the element of a DT_VARIANT tensor (TensorFlow's tensorflow::Variant
// idea). It holds any value derived from VariantValue — a dataset, for the
// tf.data graph ops — behind a shared, immutable pointer, so copying a
// variant tensor or its elements copies pointers, never the value.
//
// Variant values live only inside a process: they cannot be fed, fetched,
// serialized to a TensorProto or sent over the wire (those paths report an
// error naming the dtype). A Variant may be empty (a default-constructed
// element of a fresh DT_VARIANT tensor).
//
// Tensor (core/tensor.h) constructs, copies (Slice shares, DeepCopy copies
// the pointers) and destroys Variant elements like its string and resource
// elements. This header, not tensor.h, holds the type and its
// DataTypeToEnum entry, so that only code that touches variants includes it:
// include it to use Tensor::flat<Variant>() and friends.
//
// Thread-safety: values are immutable once wrapped; a Variant is a value.
#ifndef RECFLOW_CORE_VARIANT_H_
#define RECFLOW_CORE_VARIANT_H_

#include <memory>
#include <string>
#include <utility>

#include "recflow/core/dtype.h"

namespace recflow {

// The interface of what a Variant holds. Implementations are immutable
// after construction (several tensors and threads share one value).
class VariantValue {
 public:
  virtual ~VariantValue() = default;
  // A stable name of the kind of value, e.g. "recflow::data::Dataset".
  virtual std::string TypeName() const = 0;
  // One line for logs and errors.
  virtual std::string DebugString() const = 0;
};

class Variant {
 public:
  Variant() = default;
  explicit Variant(std::shared_ptr<const VariantValue> value)
      : value_(std::move(value)) {}

  bool empty() const { return value_ == nullptr; }
  const std::shared_ptr<const VariantValue>& value() const { return value_; }
  // The value as T, or null when empty or of another type.
  template <typename T>
  const T* get() const {
    return dynamic_cast<const T*>(value_.get());
  }
  std::string TypeName() const {
    return value_ == nullptr ? "empty" : value_->TypeName();
  }
  std::string DebugString() const {
    return value_ == nullptr ? "Variant(empty)" : value_->DebugString();
  }
  // Two variants are equal when they share the value (values are immutable).
  bool operator==(const Variant& other) const { return value_ == other.value_; }

 private:
  std::shared_ptr<const VariantValue> value_;
};

template <>
struct DataTypeToEnum<Variant> {
  static constexpr DataType value = DT_VARIANT;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_VARIANT_H_
