#include "recflow/checkpoint/saved_model_functions.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/function_instantiation.h"

namespace recflow::checkpoint {
namespace {

using tensorflow::FunctionDef;
using tensorflow::NodeDef;

std::string TypesString(const std::vector<DataType>& types) {
  std::vector<std::string> parts;
  for (DataType t : types) parts.push_back(DataTypeString(t));
  return absl::StrCat("(", absl::StrJoin(parts, ", "), ")");
}

// The expanded dtypes of `args` under `attrs`, or nullopt when some attr is
// not bound by the call (left to instantiation).
std::optional<std::vector<DataType>> Expand(
    const google::protobuf::RepeatedPtrField<tensorflow::OpDef::ArgDef>& args,
    const AttrMap& attrs) {
  std::vector<DataType> out;
  for (const auto& arg : args) {
    auto types = ArgDTypes(arg, attrs);
    if (!types.ok()) return std::nullopt;
    out.insert(out.end(), types->begin(), types->end());
  }
  return out;
}

std::vector<DataType> TypeListAttr(const NodeDef& node, const char* name) {
  std::vector<DataType> out;
  auto it = node.attr().find(name);
  if (it == node.attr().end()) return out;
  for (int t : it->second.list().type()) out.push_back(BaseType(static_cast<DataType>(t)));
  return out;
}

class Checker {
 public:
  explicit Checker(const tensorflow::GraphDef& graph_def) {
    for (const FunctionDef& f : graph_def.library().function()) {
      functions_[f.signature().name()] = &f;
    }
  }

  absl::Status CheckNode(const NodeDef& node, const std::string& where) {
    for (const auto& [attr, value] : node.attr()) {
      std::vector<const tensorflow::NameAttrList*> funcs;
      if (value.has_func()) funcs.push_back(&value.func());
      for (const auto& f : value.list().func()) funcs.push_back(&f);
      for (const tensorflow::NameAttrList* f : funcs) {
        RETURN_IF_ERROR(CheckCallee(node, where, attr, *f));
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string Caller(const NodeDef& node, const std::string& where) const {
    return absl::StrCat(where, "node '", node.name(), "' (", node.op(), ")");
  }

  absl::Status CheckCallee(const NodeDef& node, const std::string& where, const std::string& attr,
                           const tensorflow::NameAttrList& f) {
    auto it = functions_.find(f.name());
    if (it == functions_.end()) {
      std::vector<std::string> names;
      for (const auto& [name, fdef] : functions_) names.push_back(name);
      std::sort(names.begin(), names.end());
      return errors::NotFound(Caller(node, where), " names function '", f.name(), "' in attr '",
                              attr, "', which is not in the function library (",
                              names.empty() ? "the library is empty"
                                            : "it has: " + absl::StrJoin(names, ", "),
                              ")");
    }
    const FunctionDef& fdef = *it->second;
    std::optional<std::vector<DataType>> takes = Expand(fdef.signature().input_arg(), f.attr());
    std::optional<std::vector<DataType>> gives = Expand(fdef.signature().output_arg(), f.attr());
    // What the op passes to and wants back from this function.
    std::optional<std::vector<DataType>> passes, wants;
    const std::string& op = node.op();
    if (op == "PartitionedCall" || op == "StatefulPartitionedCall") {
      passes = TypeListAttr(node, "Tin");
      wants = TypeListAttr(node, "Tout");
    } else if (op == "If" || op == "StatelessIf" || op == "Case" || op == "StatelessCase") {
      passes = TypeListAttr(node, "Tin");
      wants = TypeListAttr(node, "Tout");
    } else if (op == "While" || op == "StatelessWhile") {
      passes = TypeListAttr(node, "T");
      if (attr == "body") wants = passes;
    }
    if (passes.has_value() && takes.has_value() && *passes != *takes) {
      return errors::InvalidArgument(Caller(node, where), " calls function '", f.name(),
                                     "' (attr '", attr, "') with ", passes->size(),
                                     " argument(s) ", TypesString(*passes), " but '", f.name(),
                                     "' takes ", takes->size(), " ", TypesString(*takes));
    }
    if (wants.has_value() && gives.has_value() && *wants != *gives) {
      return errors::InvalidArgument(Caller(node, where), " wants ", wants->size(),
                                     " result(s) ", TypesString(*wants), " from function '",
                                     f.name(), "' (attr '", attr, "') but it returns ",
                                     gives->size(), " ", TypesString(*gives));
    }
    return absl::OkStatus();
  }

  absl::flat_hash_map<std::string, const FunctionDef*> functions_;
};

}  // namespace

absl::Status CheckFunctionCalls(const tensorflow::GraphDef& graph_def) {
  Checker checker(graph_def);
  for (const NodeDef& node : graph_def.node()) RETURN_IF_ERROR(checker.CheckNode(node, ""));
  for (const FunctionDef& f : graph_def.library().function()) {
    const std::string where = absl::StrCat("function '", f.signature().name(), "': ");
    for (const NodeDef& node : f.node_def()) RETURN_IF_ERROR(checker.CheckNode(node, where));
  }
  return absl::OkStatus();
}

}  // namespace recflow::checkpoint
