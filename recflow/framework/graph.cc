#include "recflow/framework/graph.h"

#include <algorithm>
#include <deque>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/versions.h"

namespace recflow {
namespace {

std::string Label(const Node* n) { return absl::StrCat("node '", n->name(), "' (", n->op(), ")"); }

bool TypesCompatible(DataType src, DataType dst) {
  if (src == DT_INVALID || dst == DT_INVALID) return true;  // unknown op on one side
  if (src == dst) return true;
  return IsRefType(src) && BaseType(src) == dst;
}

}  // namespace

bool IsValidNodeName(absl::string_view name) {
  if (name.empty()) return false;
  auto first_ok = [](char c) { return absl::ascii_isalnum(c) || c == '.' || c == '_'; };
  auto rest_ok = [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == '>';
  };
  if (!first_ok(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(), rest_ok);
}

const Edge* Node::input_edge(int i) const {
  return i < static_cast<int>(data_inputs_.size()) ? data_inputs_[i] : nullptr;
}

Graph::Graph(const OpRegistry* ops) : ops_(ops), versions_(CurrentGraphDefVersions()) {}
Graph::~Graph() = default;

absl::StatusOr<Node*> Graph::AddNode(tensorflow::NodeDef def, bool allow_unknown_op) {
  if (!IsValidNodeName(def.name())) {
    return errors::InvalidArgument("node name '", def.name(),
                                   "' is not valid: use letters, digits and _ . / -");
  }
  if (by_name_.contains(def.name())) {
    return errors::AlreadyExists("a node named '", def.name(), "' is already in the graph");
  }
  auto node = std::unique_ptr<Node>(new Node);
  node->op_reg_ = ops_->Find(def.op());
  if (node->op_reg_ == nullptr && !allow_unknown_op) {
    return errors::Annotate(ops_->LookUp(def.op()).status(),
                            absl::StrCat("node '", def.name(), "'"));
  }
  if (node->op_reg_ != nullptr) {
    const tensorflow::OpDef& op_def = node->op_reg_->op_def;
    AddDefaultsToNodeDef(op_def, &def);
    RETURN_IF_ERROR(ValidateNodeDef(def, op_def));
    RETURN_IF_ERROR(errors::Annotate(
        InOutTypesForNode(def, op_def, &node->input_types_, &node->output_types_),
        absl::StrCat("node '", def.name(), "' (", def.op(), ")")));
  } else {
    for (const auto& in : def.input()) {
      if (!in.empty() && in[0] != '^') node->input_types_.push_back(DT_INVALID);
    }
  }
  if (def.op() == "Const") {
    Tensor value;
    RETURN_IF_ERROR(GetNodeAttr(AttrSlice(def), "value", &value));
    DataType dtype;
    RETURN_IF_ERROR(GetNodeAttr(AttrSlice(def), "dtype", &dtype));
    if (value.dtype() != dtype) {
      return errors::InvalidArgument("node '", def.name(), "' (Const): value is ",
                                     DataTypeString(value.dtype()), " but dtype attr is ",
                                     DataTypeString(dtype));
    }
    node->constant_ = std::make_unique<Tensor>(std::move(value));
  }
  def.clear_input();
  node->def_ = std::move(def);
  node->id_ = static_cast<int>(nodes_.size());
  node->output_shapes_.assign(node->output_types_.size(), PartialShape::Unknown());
  node->data_inputs_.assign(node->input_types_.size(), nullptr);
  Node* raw = node.get();
  by_name_[raw->name()] = raw;
  nodes_.push_back(std::move(node));
  return raw;
}

absl::Status Graph::AddEdge(Node* src, int src_output, Node* dst, int dst_input) {
  if (!src->IsOpRegistered() && src_output >= src->num_outputs()) {
    src->output_types_.resize(src_output + 1, DT_INVALID);
    src->output_shapes_.resize(src_output + 1, PartialShape::Unknown());
  }
  if (!dst->IsOpRegistered() && dst_input >= dst->num_inputs()) {
    dst->input_types_.resize(dst_input + 1, DT_INVALID);
    dst->data_inputs_.resize(dst_input + 1, nullptr);
  }
  if (src_output < 0 || src_output >= src->num_outputs()) {
    return errors::InvalidArgument("input ", dst_input, " of ", Label(dst), " refers to output ",
                                   src_output, " of ", Label(src), ", which has ",
                                   src->num_outputs(), " outputs");
  }
  if (dst_input < 0 || dst_input >= dst->num_inputs()) {
    return errors::InvalidArgument(Label(dst), " has ", dst->num_inputs(),
                                   " inputs; cannot connect input ", dst_input);
  }
  if (dst->data_inputs_[dst_input] != nullptr) {
    return errors::InvalidArgument("input ", dst_input, " of ", Label(dst),
                                   " is already connected");
  }
  const DataType out_type = src->output_type(src_output);
  const DataType in_type = dst->input_type(dst_input);
  if (!TypesCompatible(out_type, in_type)) {
    return errors::InvalidArgument(
        "input ", dst_input, " of ", Label(dst), " expects ", DataTypeString(in_type), " but '",
        src->name(), ":", src_output, "' is ", DataTypeString(out_type),
        IsRefType(in_type) ? " (this input must come from a variable)" : "");
  }
  edges_.push_back(std::make_unique<Edge>(Edge{src, src_output, dst, dst_input}));
  const Edge* e = edges_.back().get();
  src->out_edges_.push_back(e);
  dst->data_inputs_[dst_input] = e;
  // Keep data edges sorted by input index ahead of control edges.
  auto pos = std::find_if(dst->in_edges_.begin(), dst->in_edges_.end(), [&](const Edge* x) {
    return x->IsControlEdge() || x->dst_input > dst_input;
  });
  dst->in_edges_.insert(pos, e);
  return absl::OkStatus();
}

void Graph::AddControlEdge(Node* src, Node* dst) {
  for (const Edge* e : dst->in_edges_) {
    if (e->IsControlEdge() && e->src == src) return;  // already there
  }
  edges_.push_back(std::make_unique<Edge>(Edge{src, kControlSlot, dst, kControlSlot}));
  const Edge* e = edges_.back().get();
  src->out_edges_.push_back(e);
  dst->in_edges_.push_back(e);
}

absl::Status Graph::InferShapes(Node* node) {
  if (node->op_reg_ == nullptr || !node->op_reg_->shape_fn) return absl::OkStatus();
  std::vector<PartialShape> shapes;
  std::vector<const Tensor*> values;
  for (int i = 0; i < node->num_inputs(); ++i) {
    const Edge* e = node->data_inputs_[i];
    if (e == nullptr) {
      return errors::Internal("input ", i, " of ", Label(node), " is not connected");
    }
    shapes.push_back(e->src->output_shape(e->src_output));
    values.push_back(e->src_output == 0 ? e->src->constant_value() : nullptr);
  }
  InferenceContext ctx(node->def_, std::move(shapes), std::move(values), node->num_outputs(),
                       versions_.producer());
  absl::Status s = node->op_reg_->shape_fn(&ctx);
  if (!s.ok()) {
    std::vector<std::string> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.input(i).DebugString());
    return absl::Status(s.code(), absl::StrCat(Label(node), ": ", s.message(),
                                               " (input shapes: ", absl::StrJoin(in, ", "), ")"));
  }
  for (int i = 0; i < node->num_outputs(); ++i) node->output_shapes_[i] = ctx.output(i);
  return absl::OkStatus();
}

Node* Graph::FindNode(absl::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

absl::StatusOr<std::vector<Node*>> Graph::TopologicalOrder() const {
  std::vector<int> pending(nodes_.size());
  std::deque<Node*> ready;
  for (const auto& n : nodes_) {
    pending[n->id()] = static_cast<int>(n->in_edges_.size());
    if (pending[n->id()] == 0) ready.push_back(n.get());
  }
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    Node* n = ready.front();
    ready.pop_front();
    order.push_back(n);
    for (const Edge* e : n->out_edges_) {
      if (--pending[e->dst->id()] == 0) ready.push_back(e->dst);
    }
  }
  if (order.size() != nodes_.size()) {
    std::vector<std::string> stuck;
    for (const auto& n : nodes_) {
      if (pending[n->id()] > 0 && stuck.size() < 10) stuck.push_back(n->name());
    }
    return errors::InvalidArgument("graph has a cycle; nodes on or after it include: ",
                                   absl::StrJoin(stuck, ", "));
  }
  return order;
}

void Graph::ToGraphDef(tensorflow::GraphDef* graph_def) const {
  graph_def->Clear();
  for (const auto& n : nodes_) {
    tensorflow::NodeDef* def = graph_def->add_node();
    *def = n->def_;
    for (const Edge* e : n->in_edges_) {
      if (e->IsControlEdge()) {
        def->add_input(absl::StrCat("^", e->src->name()));
      } else if (e->src_output == 0) {
        def->add_input(e->src->name());
      } else {
        def->add_input(absl::StrCat(e->src->name(), ":", e->src_output));
      }
    }
  }
  *graph_def->mutable_versions() = versions_;
  if (library_.ByteSizeLong() > 0) *graph_def->mutable_library() = library_;
}

absl::Status ConvertGraphDefToGraph(const GraphConstructorOptions& options,
                                    const tensorflow::GraphDef& graph_def, Graph* graph) {
  if (graph->num_nodes() != 0) {
    return errors::InvalidArgument("ConvertGraphDefToGraph needs an empty graph");
  }
  RETURN_IF_ERROR(CheckGraphDefVersions(graph_def.versions()));
  std::vector<Node*> nodes;
  nodes.reserve(graph_def.node_size());
  for (const auto& def : graph_def.node()) {
    ASSIGN_OR_RETURN(Node * n, graph->AddNode(def, options.allow_unknown_ops));
    nodes.push_back(n);
  }
  for (int k = 0; k < graph_def.node_size(); ++k) {
    const tensorflow::NodeDef& def = graph_def.node(k);
    Node* dst = nodes[k];
    int data_index = 0;
    for (const std::string& input : def.input()) {
      auto id = ParseTensorName(input);
      if (!id.ok()) return errors::Annotate(id.status(), Label(dst));
      Node* src = graph->FindNode(id->node);
      if (src == nullptr) {
        return errors::InvalidArgument(Label(dst), ": input '", input, "' refers to node '",
                                       id->node, "', which is not in the graph");
      }
      if (id->IsControl()) {
        graph->AddControlEdge(src, dst);
      } else {
        RETURN_IF_ERROR(graph->AddEdge(src, id->index, dst, data_index++));
      }
    }
  }
  graph->set_versions(graph_def.versions());
  graph->set_library(graph_def.library());
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph->TopologicalOrder());
  if (options.infer_shapes) {
    for (Node* n : order) RETURN_IF_ERROR(graph->InferShapes(n));
  }
  return absl::OkStatus();
}

}  // namespace recflow
