#include "recflow/framework/scope.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow {

std::string Output::name() const {
  return node_ ? absl::StrCat(node_->name(), ":", index_) : "<invalid output>";
}

NodeBuilder::NodeBuilder(std::string name, std::string op) {
  def_.set_name(std::move(name));
  def_.set_op(std::move(op));
}

NodeBuilder& NodeBuilder::Input(Output input) {
  inputs_.push_back({{input}, false});
  return *this;
}

NodeBuilder& NodeBuilder::Input(std::vector<Output> inputs) {
  inputs_.push_back({std::move(inputs), true});
  return *this;
}

NodeBuilder& NodeBuilder::ControlInput(Node* node) {
  control_inputs_.push_back(node);
  return *this;
}

NodeBuilder& NodeBuilder::Device(std::string device) {
  def_.set_device(std::move(device));
  return *this;
}

absl::StatusOr<Node*> NodeBuilder::Finalize(Graph* graph) const {
  tensorflow::NodeDef def = def_;
  const OpRegistrationData* reg = nullptr;
  ASSIGN_OR_RETURN(reg, graph->op_registry()->LookUp(def.op()));
  const tensorflow::OpDef& op_def = reg->op_def;
  if (static_cast<int>(inputs_.size()) != op_def.input_arg_size()) {
    return errors::InvalidArgument("node '", def.name(), "' (", def.op(), ") given ",
                                   inputs_.size(), " inputs; op takes ", op_def.input_arg_size());
  }
  auto* attrs = def.mutable_attr();
  // Derive type/number attrs from the inputs.
  for (int a = 0; a < op_def.input_arg_size(); ++a) {
    const auto& arg = op_def.input_arg(a);
    const InputArg& in = inputs_[a];
    for (const Output& o : in.outputs) {
      if (!o.valid()) {
        return errors::InvalidArgument("node '", def.name(), "' (", def.op(), "): input '",
                                       arg.name(), "' is an invalid Output");
      }
    }
    if (!arg.number_attr().empty() && !attrs->contains(arg.number_attr())) {
      (*attrs)[arg.number_attr()].set_i(static_cast<int64_t>(in.outputs.size()));
    }
    if (!arg.type_attr().empty() && !attrs->contains(arg.type_attr()) && !in.outputs.empty()) {
      SetAttrValue(BaseType(in.outputs[0].type()), &(*attrs)[arg.type_attr()]);
    }
    if (!arg.type_list_attr().empty() && !attrs->contains(arg.type_list_attr())) {
      std::vector<DataType> types;
      for (const Output& o : in.outputs) types.push_back(BaseType(o.type()));
      SetAttrValue(absl::MakeConstSpan(types), &(*attrs)[arg.type_list_attr()]);
    }
  }
  for (const InputArg& in : inputs_) {
    for (const Output& o : in.outputs) def.add_input(o.name());  // for validation counts
  }
  ASSIGN_OR_RETURN(Node * node, graph->AddNode(def));
  int index = 0;
  for (const InputArg& in : inputs_) {
    for (const Output& o : in.outputs) {
      RETURN_IF_ERROR(graph->AddEdge(o.node(), o.index(), node, index++));
    }
  }
  for (Node* c : control_inputs_) graph->AddControlEdge(c, node);
  RETURN_IF_ERROR(graph->InferShapes(node));
  return node;
}

struct Scope::Shared {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  absl::Status status;
  absl::flat_hash_map<std::string, int> name_counts;  // used names -> next suffix
};

Scope Scope::NewRootScope() {
  Scope s;
  s.shared_ = std::make_shared<Shared>();
  return s;
}

Scope Scope::WithOpName(absl::string_view name) const {
  Scope s = *this;
  s.op_name_ = std::string(name);
  return s;
}

Scope Scope::NewSubScope(absl::string_view name) const {
  Scope s = *this;
  s.op_name_.clear();
  const std::string base = absl::StrCat(prefix_, name);
  int& count = shared_->name_counts[base + "/"];
  const std::string unique = count == 0 ? base : absl::StrCat(base, "_", count);
  ++count;
  s.prefix_ = unique + "/";
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Output>& deps) const {
  Scope s = *this;
  for (const Output& o : deps) {
    if (o.valid()) s.control_deps_.push_back(o.node());
  }
  return s;
}

Scope Scope::WithDevice(absl::string_view device) const {
  Scope s = *this;
  s.device_ = std::string(device);
  return s;
}

std::string Scope::GetUniqueNameForOp(absl::string_view op) const {
  const std::string base = absl::StrCat(prefix_, op_name_.empty() ? op : op_name_);
  int& count = shared_->name_counts[base];
  std::string name = count == 0 ? base : absl::StrCat(base, "_", count);
  while (shared_->graph->FindNode(name) != nullptr) {
    ++count;
    name = absl::StrCat(base, "_", count);
  }
  ++count;
  return name;
}

Node* Scope::AddNode(NodeBuilder& builder) const {
  if (!ok()) return nullptr;
  for (Node* c : control_deps_) builder.ControlInput(c);
  if (!device_.empty()) builder.Device(device_);
  auto node = builder.Finalize(shared_->graph.get());
  if (!node.ok()) {
    UpdateStatus(node.status());
    return nullptr;
  }
  return *node;
}

Graph* Scope::graph() const { return shared_->graph.get(); }
bool Scope::ok() const { return shared_->status.ok(); }
absl::Status Scope::status() const { return shared_->status; }
void Scope::UpdateStatus(const absl::Status& s) const {
  if (shared_->status.ok()) shared_->status = s;
}

absl::StatusOr<tensorflow::GraphDef> Scope::ToGraphDef() const {
  RETURN_IF_ERROR(status());
  tensorflow::GraphDef def;
  shared_->graph->ToGraphDef(&def);
  return def;
}

}  // namespace recflow
