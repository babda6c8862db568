// Typed access to the attrs of a NodeDef (AttrValue protos): read them with
// GetNodeAttr, write them with SetAttrValue, print them with
// SummarizeAttrValue. Errors name the attr and the type found and expected.
#ifndef RECFLOW_FRAMEWORK_ATTR_VALUE_UTIL_H_
#define RECFLOW_FRAMEWORK_ATTR_VALUE_UTIL_H_

#include <cstdint>
#include <string>

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "recflow/core/dtype.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/proto/attr_value.pb.h"
#include "recflow/proto/node_def.pb.h"

namespace recflow {

using AttrMap = google::protobuf::Map<std::string, tensorflow::AttrValue>;

// A read-only view of a set of attrs. Borrows; the attrs must outlive it.
class AttrSlice {
 public:
  AttrSlice(const tensorflow::NodeDef& def);  // NOLINT
  explicit AttrSlice(const AttrMap* attrs) : attrs_(attrs) {}

  // Null when absent.
  const tensorflow::AttrValue* Find(absl::string_view name) const;
  const AttrMap& map() const { return *attrs_; }
  // The NodeDef's name when the slice came from one, for messages.
  const std::string& node_name() const { return node_name_; }

 private:
  const AttrMap* attrs_;  // Not owned.
  std::string node_name_;
};

// Each returns NotFound when the attr is absent and InvalidArgument when it
// holds another type. int32_t fails when the value does not fit.
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::string* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, int64_t* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, int32_t* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, float* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, bool* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, DataType* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, PartialShape* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, Tensor* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<std::string>* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<int64_t>* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<int32_t>* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<float>* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<bool>* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<DataType>* value);
absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::vector<PartialShape>* value);

void SetAttrValue(absl::string_view value, tensorflow::AttrValue* out);
inline void SetAttrValue(const char* value, tensorflow::AttrValue* out) {
  SetAttrValue(absl::string_view(value), out);
}
void SetAttrValue(int64_t value, tensorflow::AttrValue* out);
inline void SetAttrValue(int value, tensorflow::AttrValue* out) {
  SetAttrValue(static_cast<int64_t>(value), out);
}
void SetAttrValue(float value, tensorflow::AttrValue* out);
void SetAttrValue(bool value, tensorflow::AttrValue* out);
void SetAttrValue(DataType value, tensorflow::AttrValue* out);
void SetAttrValue(const PartialShape& value, tensorflow::AttrValue* out);
void SetAttrValue(const TensorShape& value, tensorflow::AttrValue* out);
void SetAttrValue(const Tensor& value, tensorflow::AttrValue* out);
void SetAttrValue(absl::Span<const std::string> value, tensorflow::AttrValue* out);
void SetAttrValue(absl::Span<const int64_t> value, tensorflow::AttrValue* out);
void SetAttrValue(absl::Span<const float> value, tensorflow::AttrValue* out);
void SetAttrValue(absl::Span<const DataType> value, tensorflow::AttrValue* out);
void SetAttrValue(absl::Span<const PartialShape> value, tensorflow::AttrValue* out);
inline void SetAttrValue(const tensorflow::AttrValue& value, tensorflow::AttrValue* out) {
  *out = value;
}

// The attr's kind as OpDef spells it: "int", "list(type)", "tensor", ...;
// "list" for an empty list (whose element kind is unknowable).
std::string AttrValueKind(const tensorflow::AttrValue& value);
// Short human form: 3, 1.5, true, "s", float, [2,?], Tensor<float [2]: 1 2>,
// [1, 2, 3].
std::string SummarizeAttrValue(const tensorflow::AttrValue& value);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_ATTR_VALUE_UTIL_H_
