#include "recflow/framework/node_def_util.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"

namespace recflow {

using tensorflow::AttrValue;
using tensorflow::NodeDef;
using tensorflow::OpDef;

std::string TensorId::ToString() const {
  if (IsControl()) return absl::StrCat("^", node);
  return absl::StrCat(node, ":", index);
}

absl::StatusOr<TensorId> ParseTensorName(absl::string_view name) {
  TensorId id;
  if (!name.empty() && name[0] == '^') {
    id.node = name.substr(1);
    id.index = kControlSlot;
  } else {
    const size_t colon = name.rfind(':');
    id.node = name;
    if (colon != absl::string_view::npos) {
      int index;
      if (!absl::SimpleAtoi(name.substr(colon + 1), &index) || index < 0) {
        return errors::InvalidArgument("bad tensor name '", name,
                                       "': expected 'node' or 'node:output_index'");
      }
      id.node = name.substr(0, colon);
      id.index = index;
    }
  }
  if (id.node.empty()) return errors::InvalidArgument("empty node name in '", name, "'");
  return id;
}

void AddDefaultsToNodeDef(const OpDef& op_def, NodeDef* node) {
  auto* attrs = node->mutable_attr();
  for (const auto& attr : op_def.attr()) {
    if (attr.has_default_value() && attrs->find(attr.name()) == attrs->end()) {
      (*attrs)[attr.name()] = attr.default_value();
    }
  }
}

namespace {

std::string NodeLabel(const NodeDef& node) {
  return absl::StrCat("node '", node.name(), "' (", node.op(), ")");
}

absl::Status CheckAttr(const NodeDef& node, const OpDef::AttrDef& def, const AttrValue& v) {
  const std::string kind = AttrValueKind(v);
  const bool is_list = def.type().rfind("list(", 0) == 0;
  bool kind_ok = kind == def.type() || (is_list && kind == "list");
  if (!kind_ok) {
    return errors::InvalidArgument(NodeLabel(node), ": attr '", def.name(), "' must be ",
                                   def.type(), " but is ", kind, " ", SummarizeAttrValue(v));
  }
  if (def.has_allowed_values()) {
    const auto& allowed = def.allowed_values().list();
    auto check_type = [&](int t) -> absl::Status {
      if (std::find(allowed.type().begin(), allowed.type().end(), t) == allowed.type().end()) {
        std::vector<std::string> names;
        for (int a : allowed.type()) names.push_back(DataTypeString(static_cast<DataType>(a)));
        return errors::InvalidArgument(NodeLabel(node), ": attr '", def.name(), "' is ",
                                       DataTypeString(static_cast<DataType>(t)),
                                       ", which is not one of the allowed types: ",
                                       absl::StrJoin(names, ", "));
      }
      return absl::OkStatus();
    };
    auto check_string = [&](const std::string& s) -> absl::Status {
      if (std::find(allowed.s().begin(), allowed.s().end(), s) == allowed.s().end()) {
        return errors::InvalidArgument(NodeLabel(node), ": attr '", def.name(), "' is \"", s,
                                       "\", which is not one of the allowed values: ",
                                       absl::StrJoin(allowed.s(), ", "));
      }
      return absl::OkStatus();
    };
    if (v.value_case() == AttrValue::kType) RETURN_IF_ERROR(check_type(v.type()));
    if (v.value_case() == AttrValue::kS) RETURN_IF_ERROR(check_string(v.s()));
    if (v.value_case() == AttrValue::kList) {
      for (int t : v.list().type()) RETURN_IF_ERROR(check_type(t));
      for (const auto& s : v.list().s()) RETURN_IF_ERROR(check_string(s));
    }
  }
  if (def.has_minimum()) {
    int64_t value = 0;
    if (is_list) {
      const auto& l = v.list();
      value = l.s_size() + l.i_size() + l.f_size() + l.b_size() + l.type_size() +
              l.shape_size() + l.tensor_size() + l.func_size();
    } else {
      value = v.i();
    }
    if (value < def.minimum()) {
      return errors::InvalidArgument(NodeLabel(node), ": attr '", def.name(), "' is ",
                                     is_list ? "a list of length " : "", value,
                                     ", less than the minimum ", def.minimum());
    }
  }
  return absl::OkStatus();
}

// Appends the dtypes of one argument.
absl::Status AddArgTypes(const NodeDef& node, const OpDef::ArgDef& arg,
                         std::vector<DataType>* types) {
  const AttrSlice attrs(node);
  int64_t repeats = 1;
  if (!arg.number_attr().empty()) RETURN_IF_ERROR(GetNodeAttr(attrs, arg.number_attr(), &repeats));
  std::vector<DataType> one;
  if (arg.type() != tensorflow::DT_INVALID) {
    one.push_back(static_cast<DataType>(arg.type()));
  } else if (!arg.type_attr().empty()) {
    DataType dt;
    RETURN_IF_ERROR(GetNodeAttr(attrs, arg.type_attr(), &dt));
    one.push_back(dt);
  } else if (!arg.type_list_attr().empty()) {
    RETURN_IF_ERROR(GetNodeAttr(attrs, arg.type_list_attr(), &one));
  } else {
    return errors::Internal("argument '", arg.name(), "' of op ", node.op(), " has no type");
  }
  for (int64_t r = 0; r < repeats; ++r) {
    for (DataType dt : one) types->push_back(arg.is_ref() ? MakeRefType(dt) : dt);
  }
  return absl::OkStatus();
}

int NumDataInputs(const NodeDef& node) {
  int n = 0;
  for (const auto& in : node.input()) {
    if (!in.empty() && in[0] == '^') break;
    ++n;
  }
  return n;
}

}  // namespace

absl::Status ValidateNodeDef(const NodeDef& node, const OpDef& op_def) {
  for (const auto& def : op_def.attr()) {
    auto it = node.attr().find(def.name());
    if (it == node.attr().end()) {
      return errors::InvalidArgument(NodeLabel(node), " is missing attr '", def.name(),
                                     "' (", def.type(), ")");
    }
    RETURN_IF_ERROR(CheckAttr(node, def, it->second));
  }
  for (const auto& entry : node.attr()) {
    const std::string& name = entry.first;
    if (!name.empty() && name[0] == '_') continue;
    const bool known = std::any_of(op_def.attr().begin(), op_def.attr().end(),
                                   [&](const auto& a) { return a.name() == name; });
    if (!known) {
      return errors::InvalidArgument(NodeLabel(node), " has attr '", name,
                                     "', which op ", op_def.name(), " does not declare");
    }
  }
  // Control inputs come after data inputs.
  bool seen_control = false;
  for (const auto& in : node.input()) {
    const bool control = !in.empty() && in[0] == '^';
    if (seen_control && !control) {
      return errors::InvalidArgument(NodeLabel(node), ": data input '", in,
                                     "' follows a control input; control inputs must come last");
    }
    seen_control |= control;
  }
  std::vector<DataType> inputs, outputs;
  RETURN_IF_ERROR(errors::Annotate(InOutTypesForNode(node, op_def, &inputs, &outputs),
                                   NodeLabel(node)));
  const int given = NumDataInputs(node);
  if (given != static_cast<int>(inputs.size())) {
    return errors::InvalidArgument(NodeLabel(node), " has ", given, " data inputs but op ",
                                   op_def.name(), " expects ", inputs.size());
  }
  return absl::OkStatus();
}

absl::Status InOutTypesForNode(const NodeDef& node, const OpDef& op_def,
                               std::vector<DataType>* inputs, std::vector<DataType>* outputs) {
  inputs->clear();
  outputs->clear();
  for (const auto& arg : op_def.input_arg()) RETURN_IF_ERROR(AddArgTypes(node, arg, inputs));
  for (const auto& arg : op_def.output_arg()) RETURN_IF_ERROR(AddArgTypes(node, arg, outputs));
  return absl::OkStatus();
}

absl::Status NameRangesForNode(const NodeDef& node, const OpDef& op_def, NameRangeMap* inputs,
                               NameRangeMap* outputs) {
  auto fill = [&](const auto& args, NameRangeMap* map) -> absl::Status {
    if (map == nullptr) return absl::OkStatus();
    int start = 0;
    for (const auto& arg : args) {
      std::vector<DataType> types;
      RETURN_IF_ERROR(AddArgTypes(node, arg, &types));
      const int end = start + static_cast<int>(types.size());
      (*map)[arg.name()] = {start, end};
      start = end;
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(fill(op_def.input_arg(), inputs));
  return fill(op_def.output_arg(), outputs);
}

std::string SummarizeNodeDef(const NodeDef& node) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : node.attr()) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  std::vector<std::string> attrs;
  for (const auto& k : keys) {
    attrs.push_back(absl::StrCat(k, "=", SummarizeAttrValue(node.attr().at(k))));
  }
  return absl::StrCat(node.name(), " = ", node.op(), "[", absl::StrJoin(attrs, ", "), "](",
                      absl::StrJoin(node.input(), ", "), ")");
}

}  // namespace recflow
