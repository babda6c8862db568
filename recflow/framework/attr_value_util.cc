#include "recflow/framework/attr_value_util.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/framework/tensor_util.h"

namespace recflow {

using tensorflow::AttrValue;

AttrSlice::AttrSlice(const tensorflow::NodeDef& def)
    : attrs_(&def.attr()), node_name_(def.name()) {}

const AttrValue* AttrSlice::Find(absl::string_view name) const {
  auto it = attrs_->find(std::string(name));
  return it == attrs_->end() ? nullptr : &it->second;
}

namespace {

std::string Where(const AttrSlice& attrs) {
  return attrs.node_name().empty() ? std::string()
                                   : absl::StrCat(" of node '", attrs.node_name(), "'");
}

absl::StatusOr<const AttrValue*> FindAttr(const AttrSlice& attrs,
                                          absl::string_view name,
                                          AttrValue::ValueCase expected,
                                          const char* expected_name) {
  const AttrValue* v = attrs.Find(name);
  if (v == nullptr) {
    return errors::NotFound("no attr named '", name, "'", Where(attrs));
  }
  if (v->value_case() != expected) {
    // An empty list is stored as an unset list; accept it for list reads.
    if (!(expected == AttrValue::kList && v->value_case() == AttrValue::VALUE_NOT_SET)) {
      return errors::InvalidArgument("attr '", name, "'", Where(attrs), " holds ",
                                     AttrValueKind(*v), ", expected ", expected_name);
    }
  }
  return v;
}

}  // namespace

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, std::string* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kS, "string"));
  *value = v->s();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, int64_t* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kI, "int"));
  *value = v->i();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, int32_t* value) {
  int64_t v;
  RETURN_IF_ERROR(GetNodeAttr(attrs, name, &v));
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return errors::InvalidArgument("attr '", name, "'", Where(attrs), " is ", v,
                                   ", which does not fit in int32");
  }
  *value = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, float* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kF, "float"));
  *value = v->f();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, bool* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kB, "bool"));
  *value = v->b();
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, DataType* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kType, "type"));
  *value = static_cast<DataType>(v->type());
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, PartialShape* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kShape, "shape"));
  ASSIGN_OR_RETURN(*value, PartialShape::FromProto(v->shape()));
  return absl::OkStatus();
}

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name, Tensor* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kTensor, "tensor"));
  auto t = TensorFromProto(v->tensor());
  if (!t.ok()) {
    return errors::Annotate(t.status(), absl::StrCat("attr '", name, "'", Where(attrs)));
  }
  *value = *std::move(t);
  return absl::OkStatus();
}

#define RECFLOW_GET_LIST_(TYPE, FIELD, CONVERT)                                     \
  absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name,           \
                           std::vector<TYPE>* value) {                              \
    ASSIGN_OR_RETURN(const AttrValue* v,                                            \
                     FindAttr(attrs, name, AttrValue::kList, "list"));              \
    value->clear();                                                                 \
    for (const auto& x : v->list().FIELD()) value->push_back(CONVERT(x));          \
    return absl::OkStatus();                                                        \
  }
#define RECFLOW_IDENTITY_(x) (x)
#define RECFLOW_TO_DTYPE_(x) static_cast<DataType>(x)
RECFLOW_GET_LIST_(std::string, s, RECFLOW_IDENTITY_)
RECFLOW_GET_LIST_(int64_t, i, RECFLOW_IDENTITY_)
RECFLOW_GET_LIST_(int32_t, i, static_cast<int32_t>)
RECFLOW_GET_LIST_(float, f, RECFLOW_IDENTITY_)
RECFLOW_GET_LIST_(bool, b, RECFLOW_IDENTITY_)
RECFLOW_GET_LIST_(DataType, type, RECFLOW_TO_DTYPE_)
#undef RECFLOW_GET_LIST_
#undef RECFLOW_IDENTITY_
#undef RECFLOW_TO_DTYPE_

absl::Status GetNodeAttr(const AttrSlice& attrs, absl::string_view name,
                         std::vector<PartialShape>* value) {
  ASSIGN_OR_RETURN(const AttrValue* v, FindAttr(attrs, name, AttrValue::kList, "list"));
  value->clear();
  for (const auto& s : v->list().shape()) {
    ASSIGN_OR_RETURN(PartialShape p, PartialShape::FromProto(s));
    value->push_back(std::move(p));
  }
  return absl::OkStatus();
}

void SetAttrValue(absl::string_view value, AttrValue* out) { out->set_s(std::string(value)); }
void SetAttrValue(int64_t value, AttrValue* out) { out->set_i(value); }
void SetAttrValue(float value, AttrValue* out) { out->set_f(value); }
void SetAttrValue(bool value, AttrValue* out) { out->set_b(value); }
void SetAttrValue(DataType value, AttrValue* out) {
  out->set_type(static_cast<tensorflow::DataType>(value));
}
void SetAttrValue(const PartialShape& value, AttrValue* out) {
  value.ToProto(out->mutable_shape());
}
void SetAttrValue(const TensorShape& value, AttrValue* out) {
  PartialShape(value).ToProto(out->mutable_shape());
}
void SetAttrValue(const Tensor& value, AttrValue* out) {
  TensorToProto(value, out->mutable_tensor());
}
void SetAttrValue(absl::Span<const std::string> value, AttrValue* out) {
  auto* list = out->mutable_list();
  list->Clear();
  for (const auto& v : value) list->add_s(v);
}
void SetAttrValue(absl::Span<const int64_t> value, AttrValue* out) {
  auto* list = out->mutable_list();
  list->Clear();
  for (int64_t v : value) list->add_i(v);
}
void SetAttrValue(absl::Span<const float> value, AttrValue* out) {
  auto* list = out->mutable_list();
  list->Clear();
  for (float v : value) list->add_f(v);
}
void SetAttrValue(absl::Span<const DataType> value, AttrValue* out) {
  auto* list = out->mutable_list();
  list->Clear();
  for (DataType v : value) list->add_type(static_cast<tensorflow::DataType>(v));
}
void SetAttrValue(absl::Span<const PartialShape> value, AttrValue* out) {
  auto* list = out->mutable_list();
  list->Clear();
  for (const auto& v : value) v.ToProto(list->add_shape());
}

std::string AttrValueKind(const AttrValue& value) {
  switch (value.value_case()) {
    case AttrValue::kS: return "string";
    case AttrValue::kI: return "int";
    case AttrValue::kF: return "float";
    case AttrValue::kB: return "bool";
    case AttrValue::kType: return "type";
    case AttrValue::kShape: return "shape";
    case AttrValue::kTensor: return "tensor";
    case AttrValue::kFunc: return "func";
    case AttrValue::kPlaceholder: return "placeholder";
    case AttrValue::kList: {
      const auto& l = value.list();
      if (l.s_size()) return "list(string)";
      if (l.i_size()) return "list(int)";
      if (l.f_size()) return "list(float)";
      if (l.b_size()) return "list(bool)";
      if (l.type_size()) return "list(type)";
      if (l.shape_size()) return "list(shape)";
      if (l.tensor_size()) return "list(tensor)";
      if (l.func_size()) return "list(func)";
      return "list";
    }
    case AttrValue::VALUE_NOT_SET:
      return "list";  // how TensorFlow stores an empty list
  }
  return "unknown";
}

namespace {

std::string ShapeString(const tensorflow::TensorShapeProto& proto) {
  auto s = PartialShape::FromProto(proto);
  return s.ok() ? s->DebugString() : "<invalid shape>";
}

std::string TensorString(const tensorflow::TensorProto& proto) {
  auto t = TensorFromProto(proto);
  return t.ok() ? t->DebugString(6) : "<invalid tensor>";
}

}  // namespace

std::string SummarizeAttrValue(const AttrValue& value) {
  switch (value.value_case()) {
    case AttrValue::kS:
      return absl::StrCat("\"", absl::CEscape(value.s()), "\"");
    case AttrValue::kI:
      return absl::StrCat(value.i());
    case AttrValue::kF:
      return absl::StrCat(value.f());
    case AttrValue::kB:
      return value.b() ? "true" : "false";
    case AttrValue::kType:
      return DataTypeString(static_cast<DataType>(value.type()));
    case AttrValue::kShape:
      return ShapeString(value.shape());
    case AttrValue::kTensor:
      return TensorString(value.tensor());
    case AttrValue::kFunc:
      return absl::StrCat("func ", value.func().name());
    case AttrValue::kPlaceholder:
      return absl::StrCat("$", value.placeholder());
    case AttrValue::kList:
    case AttrValue::VALUE_NOT_SET: {
      const auto& l = value.list();
      std::vector<std::string> parts;
      for (const auto& s : l.s()) parts.push_back(absl::StrCat("\"", absl::CEscape(s), "\""));
      for (int64_t i : l.i()) parts.push_back(absl::StrCat(i));
      for (float f : l.f()) parts.push_back(absl::StrCat(f));
      for (bool b : l.b()) parts.push_back(b ? "true" : "false");
      for (int t : l.type()) parts.push_back(DataTypeString(static_cast<DataType>(t)));
      for (const auto& s : l.shape()) parts.push_back(ShapeString(s));
      for (const auto& t : l.tensor()) parts.push_back(TensorString(t));
      for (const auto& f : l.func()) parts.push_back(f.name());
      return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
    }
  }
  return "?";
}

}  // namespace recflow
