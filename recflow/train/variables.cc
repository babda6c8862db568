#include "recflow/train/variables.h"

#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/ops/state_ops.h"

namespace recflow::train {
namespace {

bool BoolAttr(const Node& node, absl::string_view name, bool* value) {
  const tensorflow::AttrValue* attr = AttrSlice(node.def()).Find(name);
  if (attr == nullptr) return false;
  *value = attr->b();
  return true;
}

bool IsVariableNode(const Node& node) {
  return node.op() == "VariableV2" || node.op() == "VarHandleOp";
}

}  // namespace

namespace internal {

Output CreateVariable(const Scope& scope, const std::string& full_name,
                      const PartialShape& shape, DataType dtype,
                      Output initial_value, const VariableOptions& options,
                      const std::vector<std::string>& marks) {
  if (!scope.ok()) return Output();
  if (!initial_value.valid()) {
    scope.UpdateStatus(errors::InvalidArgument(
        "variable '", full_name, "': the initial value is an invalid Output"));
    return Output();
  }
  if (BaseType(initial_value.type()) != dtype) {
    scope.UpdateStatus(errors::InvalidArgument(
        "variable '", full_name, "' has dtype ", DataTypeString(dtype),
        " but its initial value '", initial_value.name(), "' is ",
        DataTypeString(BaseType(initial_value.type()))));
    return Output();
  }
  NodeBuilder vb(full_name,
                 options.use_resource ? "VarHandleOp" : "VariableV2");
  vb.Attr("shape", shape)
      .Attr("dtype", dtype)
      .Attr(kTrainableAttr, options.trainable);
  for (const std::string& mark : marks) vb.Attr(mark, true);
  Node* var = scope.AddNode(vb);
  if (var == nullptr) return Output();
  NodeBuilder ib(full_name + "/Assign",
                 options.use_resource ? "AssignVariableOp" : "Assign");
  ib.Input(Output(var)).Input(initial_value).Attr(kInitializerAttr, true);
  if (!options.use_resource) ib.Attr("validate_shape", true);
  if (scope.AddNode(ib) == nullptr) return Output();
  return Output(var);
}

}  // namespace internal

Output Variable(const Scope& scope, absl::string_view name,
                const PartialShape& shape, DataType dtype, Output initial_value,
                const VariableOptions& options) {
  if (!scope.ok()) return Output();
  return internal::CreateVariable(scope, scope.GetUniqueNameForOp(name), shape,
                                  dtype, initial_value, options);
}

std::vector<Output> GlobalVariableInitializers(const Graph& graph) {
  std::vector<Output> out;
  for (const auto& node : graph.nodes()) {
    bool is_init = false;
    if (BoolAttr(*node, internal::kInitializerAttr, &is_init) && is_init) {
      out.push_back(Output(node.get()));
    }
  }
  return out;
}

Output GlobalVariablesInitializer(const Scope& scope) {
  if (!scope.ok()) return Output();
  NodeBuilder b(scope.GetUniqueNameForOp("init"), "NoOp");
  for (const Output& init : GlobalVariableInitializers(*scope.graph()))
    b.ControlInput(init.node());
  return Output(scope.AddNode(b));
}

std::vector<Output> GlobalVariables(const Graph& graph) {
  std::vector<Output> out;
  for (const auto& node : graph.nodes()) {
    bool trainable = false;
    if (IsVariableNode(*node) &&
        BoolAttr(*node, internal::kTrainableAttr, &trainable)) {
      out.push_back(Output(node.get()));
    }
  }
  return out;
}

std::vector<Output> TrainableVariables(const Graph& graph) {
  std::vector<Output> out;
  for (const auto& node : graph.nodes()) {
    bool trainable = false;
    if ((IsVariableNode(*node) || node->op() == "HashEmbeddingTableOp") &&
        BoolAttr(*node, internal::kTrainableAttr, &trainable) && trainable) {
      out.push_back(Output(node.get()));
    }
  }
  return out;
}

Output HashEmbeddingTable(const Scope& scope, absl::string_view name,
                          const ops::HashEmbeddingTableAttrs& attrs,
                          const HashEmbeddingTableOptions& options) {
  if (!scope.ok()) return Output();
  const std::string full_name = scope.GetUniqueNameForOp(name);
  ops::HashEmbeddingTableAttrs a = attrs;
  if (a.shared_name.empty()) a.shared_name = full_name;
  NodeBuilder b(full_name, "HashEmbeddingTableOp");
  ops::SetHashEmbeddingTableAttrs(b, a).Attr(internal::kTrainableAttr,
                                             options.trainable);
  Node* node = scope.AddNode(b);
  return node == nullptr ? Output() : Output(node);
}

std::vector<Output> HashTables(const Graph& graph) {
  std::vector<Output> out;
  for (const auto& node : graph.nodes()) {
    bool trainable = false;
    if (node->op() == "HashEmbeddingTableOp" &&
        BoolAttr(*node, internal::kTrainableAttr, &trainable)) {
      out.push_back(Output(node.get()));
    }
  }
  return out;
}

bool IsHashTable(const Output& var) {
  return var.valid() && var.node()->op() == "HashEmbeddingTableOp";
}

bool IsResourceVariable(const Output& var) {
  return var.valid() && var.node()->op() == "VarHandleOp";
}

absl::Status CheckIsVariable(const Output& var) {
  if (!var.valid())
    return errors::InvalidArgument(
        "expected a variable, got an invalid Output");
  if (!IsVariableNode(*var.node())) {
    return errors::InvalidArgument(
        "'", var.name(), "' (", var.node()->op(),
        ") is not a variable; expected the output of a VariableV2 "
        "or VarHandleOp node");
  }
  return absl::OkStatus();
}

DataType VariableDtype(const Output& var) {
  if (!var.valid()) return DT_INVALID;
  DataType dtype = DT_INVALID;
  if (GetNodeAttr(AttrSlice(var.node()->def()), "dtype", &dtype).ok())
    return dtype;
  return BaseType(var.type());
}

PartialShape VariableShape(const Output& var) {
  PartialShape shape;
  if (var.valid()) {
    (void)GetNodeAttr(AttrSlice(var.node()->def()), "shape", &shape);
  }
  return shape;
}

const std::string& VariableName(const Output& var) {
  return var.node()->name();
}

Output ReadValue(const Scope& scope, const Output& var) {
  if (!IsResourceVariable(var)) return var;
  return ops::ReadVariableOp(scope, var, VariableDtype(var));
}

Output AssignValue(const Scope& scope, const Output& var, Output value) {
  if (IsResourceVariable(var)) return ops::AssignVariableOp(scope, var, value);
  return ops::Assign(scope, var, value);
}

Output AssignAddValue(const Scope& scope, const Output& var, Output value) {
  if (IsResourceVariable(var))
    return ops::AssignAddVariableOp(scope, var, value);
  return ops::AssignAdd(scope, var, value);
}

}  // namespace recflow::train
