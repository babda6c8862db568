#include "recflow/runtime/graph_optimizer.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/runtime/call_frame.h"
#include "recflow/runtime/executor.h"

namespace recflow {

std::string GraphOptimizerStats::ToString() const {
  std::vector<std::string> parts;
  for (const Pass& p : passes) {
    parts.push_back(absl::StrCat(p.name, ": ", p.nodes_before, " -> ", p.nodes_after, " nodes (",
                                 p.rewrites, " rewrites, ",
                                 absl::StrFormat("%.3f", p.seconds), " s)"));
  }
  return parts.empty() ? "no passes" : absl::StrJoin(parts, "; ");
}

namespace {

using tensorflow::GraphDef;
using tensorflow::NodeDef;

// Note [Optimizer passes work on GraphDef]
// Graph has no node or edge removal, so each pass builds a Graph from the
// GraphDef for analysis (dtypes, op registrations, inferred shapes, edges in
// both directions), decides a Rewrite (nodes removed, nodes replaced by new
// NodeDefs, tensor and control renames), and applies it to the GraphDef.
// ConvertGraphDefToGraph adds nodes in GraphDef order, so a node's id is its
// index in the GraphDef.

bool IsControlFlowOp(absl::string_view op) {
  static const auto* const kOps = new absl::flat_hash_set<std::string>{
      "Switch", "RefSwitch", "Merge",         "RefMerge",         "Enter",    "RefEnter",
      "Exit",   "RefExit",   "NextIteration", "RefNextIteration", "LoopCond", "ControlTrigger"};
  return kOps->contains(op);
}

bool IsPlaceholderOp(absl::string_view op) {
  return op == "Placeholder" || op == "PlaceholderV2" || op == "PlaceholderWithDefault";
}

// Refs and resources stand for mutable state; variants may hold anything.
bool HasStateTypes(const Node& n) {
  auto bad = [](DataType t) {
    return IsRefType(t) || BaseType(t) == DT_RESOURCE || BaseType(t) == DT_VARIANT;
  };
  return std::any_of(n.input_types().begin(), n.input_types().end(), bad) ||
         std::any_of(n.output_types().begin(), n.output_types().end(), bad);
}

// "node" for output 0, else "node:i".
std::string TensorName(const Node* n, int index) {
  return index == 0 ? n->name() : absl::StrCat(n->name(), ":", index);
}
std::string EdgeSource(const Edge* e) { return TensorName(e->src, e->src_output); }

absl::StatusOr<std::unique_ptr<Graph>> BuildGraph(const GraphDef& def) {
  auto graph = std::make_unique<Graph>();
  RETURN_IF_ERROR(ConvertGraphDefToGraph(GraphConstructorOptions(), def, graph.get()));
  if (graph->num_nodes() != def.node_size()) {
    return errors::Internal("graph optimizer: the graph has ", graph->num_nodes(),
                            " nodes but its GraphDef ", def.node_size());
  }
  return graph;
}

// What one pass changes (see Note [Optimizer passes work on GraphDef]).
struct Rewrite {
  explicit Rewrite(int num_nodes) : removed(num_nodes, false) {}

  std::vector<bool> removed;                                  // by node index
  absl::flat_hash_map<int, std::vector<NodeDef>> replaced;    // emitted in the node's place
  absl::flat_hash_map<std::string, std::string> tensor_map;   // "node:i" -> tensor name
  absl::flat_hash_map<std::string, std::string> control_map;  // node -> node
};

void RemapInputs(const Rewrite& rw, NodeDef* node) {
  if (rw.tensor_map.empty() && rw.control_map.empty()) return;
  std::vector<std::string> inputs(node->input().begin(), node->input().end());
  node->clear_input();
  absl::flat_hash_set<std::string> controls;
  for (std::string& input : inputs) {
    auto id = ParseTensorName(input);
    if (id.ok() && id->IsControl()) {
      if (auto it = rw.control_map.find(id->node); it != rw.control_map.end()) {
        input = absl::StrCat("^", it->second);
      }
      if (!controls.insert(input).second) continue;  // merged into one already listed
    } else if (id.ok()) {
      if (auto it = rw.tensor_map.find(absl::StrCat(id->node, ":", id->index));
          it != rw.tensor_map.end()) {
        input = it->second;
      }
    }
    node->add_input(std::move(input));
  }
}

void ApplyRewrite(Rewrite rw, GraphDef* def) {
  GraphDef out;
  *out.mutable_versions() = def->versions();
  *out.mutable_library() = std::move(*def->mutable_library());
  for (int i = 0; i < def->node_size(); ++i) {
    if (auto it = rw.replaced.find(i); it != rw.replaced.end()) {
      for (NodeDef& node : it->second) {
        RemapInputs(rw, &node);
        *out.add_node() = std::move(node);
      }
    } else if (!rw.removed[i]) {
      NodeDef* node = out.add_node();
      *node = std::move(*def->mutable_node(i));
      RemapInputs(rw, node);
    }
  }
  *def = std::move(out);
}

// Nodes nobody consumes: _Retval, targets. Their names survive every pass.
absl::flat_hash_set<std::string> Sinks(const GraphDef& def) {
  absl::flat_hash_set<absl::string_view> consumed;
  for (const NodeDef& node : def.node()) {
    for (const std::string& input : node.input()) {
      if (auto id = ParseTensorName(input); id.ok()) consumed.insert(id->node);
    }
  }
  absl::flat_hash_set<std::string> sinks;
  for (const NodeDef& node : def.node()) {
    if (!consumed.contains(node.name())) sinks.insert(node.name());
  }
  return sinks;
}

// Removes nodes that are not sinks, have no effects and no longer have
// consumers, transitively. Returns how many.
int RemoveDeadNodes(const absl::flat_hash_set<std::string>& sinks, GraphDef* def) {
  const int n = def->node_size();
  absl::flat_hash_map<absl::string_view, int> index;
  for (int i = 0; i < n; ++i) index[def->node(i).name()] = i;
  std::vector<int> consumers(n, 0);
  std::vector<std::vector<int>> sources(n);
  for (int i = 0; i < n; ++i) {
    for (const std::string& input : def->node(i).input()) {
      auto id = ParseTensorName(input);
      if (!id.ok()) continue;
      auto it = index.find(id->node);
      if (it == index.end()) continue;
      ++consumers[it->second];
      sources[i].push_back(it->second);
    }
  }
  // Not removable: sinks, unknown ops, and ops that may have an effect
  // besides their outputs (stateful, or writing through a ref or resource
  // input: TF1's Assign is not marked stateful).
  auto removable = [&](int i) {
    const NodeDef& node = def->node(i);
    if (sinks.contains(node.name())) return false;
    const OpRegistrationData* reg = OpRegistry::Global()->Find(node.op());
    if (reg == nullptr || reg->op_def.is_stateful()) return false;
    for (const auto& arg : reg->op_def.input_arg()) {
      if (arg.is_ref() || arg.type() == tensorflow::DT_RESOURCE) return false;
    }
    return true;
  };
  std::vector<bool> dead(n, false);
  std::vector<int> stack;
  for (int i = 0; i < n; ++i) {
    if (consumers[i] == 0 && removable(i)) {
      dead[i] = true;
      stack.push_back(i);
    }
  }
  if (stack.empty()) return 0;
  int removed = 0;
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    ++removed;
    for (int src : sources[i]) {
      if (--consumers[src] == 0 && !dead[src] && removable(src)) {
        dead[src] = true;
        stack.push_back(src);
      }
    }
  }
  Rewrite rw(n);
  rw.removed = std::move(dead);
  ApplyRewrite(std::move(rw), def);
  return removed;
}

// ---------------------------------------------------------------------------
// Constant folding.

// Bytes a folded value adds to the GraphDef.
int64_t ValueBytes(const Tensor& t) {
  if (t.dtype() != DT_STRING) return static_cast<int64_t>(t.TotalBytes());
  int64_t bytes = 0;
  for (const std::string& s : t.flat<std::string>()) bytes += static_cast<int64_t>(s.size()) + 8;
  return bytes;
}

// The node's own properties; whether its inputs are constant is checked by
// the caller.
bool IsFoldable(const Node& n, const GraphOptimizerOptions& options) {
  if (!n.IsOpRegistered() || n.IsStateful() || n.num_outputs() == 0) return false;
  // A function call (PartitionedCall, StatelessIf, any node with a func or
  // list(func) attr) needs the session's function library, which the folding
  // executor does not have: never folded (graph_optimizer.h's list of
  // never-folded nodes omits it).
  for (const auto& [name, value] : n.def().attr()) {
    if (value.value_case() == tensorflow::AttrValue::kFunc) return false;
    if (value.value_case() == tensorflow::AttrValue::kList && value.list().func_size() > 0)
      return false;
  }
  if (n.op() == "Const" || IsPlaceholderOp(n.op()) || IsControlFlowOp(n.op())) return false;
  if (HasStateTypes(n)) return false;
  // The inputs' size, when every input's shape is known (-1 otherwise).
  double in_bytes = 0;
  for (const Edge* e : n.in_edges()) {
    if (e->IsControlEdge()) continue;
    const PartialShape& shape = e->src->output_shape(e->src_output);
    const DataType type = e->src->output_type(e->src_output);
    if (type == DT_STRING || !shape.IsFullyDefined()) {
      in_bytes = -1;
      break;
    }
    in_bytes +=
        static_cast<double>(shape.num_elements()) * static_cast<double>(ElementStorageSize(type));
  }
  for (int i = 0; i < n.num_outputs(); ++i) {
    const PartialShape& shape = n.output_shape(i);
    const DataType type = n.output_type(i);
    if (type == DT_STRING || !shape.IsFullyDefined()) continue;  // checked after evaluation
    const double bytes =
        static_cast<double>(shape.num_elements()) * static_cast<double>(ElementStorageSize(type));
    if (bytes > static_cast<double>(options.max_constant_bytes)) return false;
    if (in_bytes >= 0 && bytes > static_cast<double>(options.max_expansion_bytes) &&
        bytes > 16 * in_bytes) {
      return false;  // an expansion (see GraphOptimizerOptions::max_expansion_bytes)
    }
  }
  return KernelRegistry::Global()->FindKernel(DEVICE_CPU, n.def()).ok();
}

NodeDef MakeConst(std::string name, const std::string& device, const Tensor& value,
                  const std::vector<std::string>& controls) {
  NodeDef c;
  c.set_name(std::move(name));
  c.set_op("Const");
  c.set_device(device);
  SetAttrValue(value.dtype(), &(*c.mutable_attr())["dtype"]);
  SetAttrValue(value, &(*c.mutable_attr())["value"]);
  for (const std::string& ctrl : controls) c.add_input(absl::StrCat("^", ctrl));
  return c;
}

// A data-inputs-only copy of a node, for the evaluation graph.
NodeDef WithoutControlInputs(const NodeDef& node) {
  NodeDef copy = node;
  copy.clear_input();
  for (const std::string& input : node.input()) {
    if (input.empty() || input[0] != '^') copy.add_input(input);
  }
  return copy;
}

class ConstantFolder {
 public:
  ConstantFolder(const GraphOptimizerOptions& options, Device* device)
      : options_(options), device_(device) {}

  // Returns the number of nodes folded.
  absl::StatusOr<int> Run(GraphDef* def) {
    // A folded value too big to keep (its size unknown until evaluated)
    // excludes its node, and the next attempt folds around it.
    for (int attempt = 0; attempt < 4; ++attempt) {
      ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, BuildGraph(*def));
      ASSIGN_OR_RETURN(Result r, Attempt(*graph, def));
      if (r == Result::kRetry) continue;
      return r == Result::kFolded ? folded_count_ : 0;
    }
    return 0;
  }

 private:
  enum class Result { kNothing, kFolded, kRetry };

  // A folded node and what the rest of the graph needs of it.
  struct Folded {
    Node* node;
    bool boundary = false;     // consumed outside the constant subgraph: kept as Const
    std::vector<int> outputs;  // outputs whose values are needed (sorted)
    std::vector<int> retvals;  // their indices among the evaluation's results
  };

  absl::StatusOr<Result> Attempt(const Graph& graph, GraphDef* def) {
    ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());
    const int n = graph.num_nodes();
    std::vector<char> is_const(n, 0);
    std::vector<int> folded_index(n, -1);
    std::vector<Folded> folded;  // topological order
    for (Node* node : order) {
      if (node->op() == "Const" && node->IsOpRegistered()) {
        is_const[node->id()] = 1;
        continue;
      }
      if (excluded_.contains(node->name()) || !IsFoldable(*node, options_)) continue;
      bool constant_inputs = true;
      int data_inputs = 0;
      for (const Edge* e : node->in_edges()) {
        if (e->IsControlEdge()) continue;
        ++data_inputs;
        if (!is_const[e->src->id()] && folded_index[e->src->id()] < 0) {
          constant_inputs = false;
          break;
        }
      }
      if (!constant_inputs || data_inputs == 0) continue;
      folded_index[node->id()] = static_cast<int>(folded.size());
      folded.push_back({node});
    }
    if (folded.empty()) return Result::kNothing;

    // Boundary nodes and the outputs the rest of the graph reads.
    for (Folded& f : folded) {
      absl::flat_hash_set<int> outputs;
      f.boundary = f.node->out_edges().empty();
      for (const Edge* e : f.node->out_edges()) {
        if (e->IsControlEdge()) {
          f.boundary = true;
        } else if (folded_index[e->dst->id()] < 0) {
          f.boundary = true;
          outputs.insert(e->src_output);
        }
      }
      if (f.boundary && f.node->num_outputs() == 1) outputs.insert(0);
      f.outputs.assign(outputs.begin(), outputs.end());
      std::sort(f.outputs.begin(), f.outputs.end());
    }

    // The constant subgraph, with a _Retval per needed output.
    GraphDef eval;
    *eval.mutable_versions() = def->versions();
    absl::flat_hash_set<int> added_consts;
    int num_retvals = 0;
    for (Folded& f : folded) {
      for (const Edge* e : f.node->in_edges()) {
        if (!e->IsControlEdge() && is_const[e->src->id()] &&
            added_consts.insert(e->src->id()).second) {
          *eval.add_node() = WithoutControlInputs(def->node(e->src->id()));
        }
      }
      *eval.add_node() = WithoutControlInputs(def->node(f.node->id()));
    }
    for (Folded& f : folded) {
      for (int out : f.outputs) {
        NodeDef* ret = eval.add_node();
        ret->set_name(absl::StrCat("_fold_retval_", num_retvals));
        ret->set_op("_Retval");
        ret->add_input(TensorName(f.node, out));
        SetAttrValue(BaseType(f.node->output_type(out)), &(*ret->mutable_attr())["T"]);
        SetAttrValue(static_cast<int64_t>(num_retvals), &(*ret->mutable_attr())["index"]);
        f.retvals.push_back(num_retvals++);
      }
    }
    auto values = Evaluate(eval, num_retvals);
    if (!values.ok()) {
      // The step will fail the same way when it runs, with the node named.
      VLOG(1) << "constant folding skipped: " << values.status();
      return Result::kNothing;
    }
    bool retry = false;
    for (const Folded& f : folded) {
      for (size_t k = 0; k < f.outputs.size(); ++k) {
        const Tensor& v = (*values)[f.retvals[k]];
        if (ValueBytes(v) > options_.max_constant_bytes ||
            v.dtype() != BaseType(f.node->output_type(f.outputs[k]))) {
          excluded_.insert(f.node->name());
          retry = true;
        }
      }
    }
    if (retry) return Result::kRetry;

    // Control inputs each replacement carries: its own, and those of the
    // folded nodes and Consts it no longer reads (see graph_optimizer.h).
    std::vector<std::vector<std::string>> controls(folded.size());
    for (size_t k = 0; k < folded.size(); ++k) {
      absl::flat_hash_set<std::string> seen;
      auto add = [&](const std::string& name) {
        if (seen.insert(name).second) controls[k].push_back(name);
      };
      for (const Edge* e : folded[k].node->in_edges()) {
        if (e->IsControlEdge()) {
          add(e->src->name());
        } else if (folded_index[e->src->id()] >= 0) {
          for (const std::string& c : controls[folded_index[e->src->id()]]) add(c);
        } else {
          for (const Edge* ce : e->src->in_edges()) {
            if (ce->IsControlEdge()) add(ce->src->name());
          }
        }
      }
    }

    absl::flat_hash_set<std::string> names;
    for (const NodeDef& node : def->node()) names.insert(node.name());
    Rewrite rw(n);
    for (size_t k = 0; k < folded.size(); ++k) {
      const Folded& f = folded[k];
      const Node* node = f.node;
      if (!f.boundary) {
        rw.removed[node->id()] = true;
        continue;
      }
      std::vector<NodeDef>& replacement = rw.replaced[node->id()];
      if (node->num_outputs() == 1) {
        replacement.push_back(MakeConst(node->name(), node->requested_device(),
                                        (*values)[f.retvals[0]], controls[k]));
        continue;
      }
      for (size_t j = 0; j < f.outputs.size(); ++j) {
        std::string name = absl::StrCat(node->name(), "/_folded_", f.outputs[j]);
        for (int s = 1; names.contains(name); ++s) {
          name = absl::StrCat(node->name(), "/_folded_", f.outputs[j], "_", s);
        }
        names.insert(name);
        rw.tensor_map[absl::StrCat(node->name(), ":", f.outputs[j])] = name;
        replacement.push_back(
            MakeConst(name, node->requested_device(), (*values)[f.retvals[j]], controls[k]));
      }
      bool named = node->out_edges().empty();
      for (const Edge* e : node->out_edges()) named = named || e->IsControlEdge();
      if (named) {  // "^NAME" or a target: a NoOp keeps the name
        NodeDef noop;
        noop.set_name(node->name());
        noop.set_op("NoOp");
        noop.set_device(node->requested_device());
        for (const std::string& c : controls[k]) noop.add_input(absl::StrCat("^", c));
        replacement.push_back(std::move(noop));
      }
    }
    folded_count_ = static_cast<int>(folded.size());
    ApplyRewrite(std::move(rw), def);
    return Result::kFolded;
  }

  absl::StatusOr<std::vector<Tensor>> Evaluate(const GraphDef& eval, int num_retvals) {
    ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, BuildGraph(eval));
    Executor::Options exec_options;
    exec_options.device = device_;
    exec_options.inter_op_pool = nullptr;  // inline, on this thread
    ASSIGN_OR_RETURN(std::unique_ptr<Executor> executor,
                     Executor::Create(exec_options, std::move(graph)));
    FunctionCallFrame frame({}, num_retvals);
    Executor::Args args;
    args.call_frame = &frame;
    RETURN_IF_ERROR(executor->Run(args));
    std::vector<Tensor> values;
    RETURN_IF_ERROR(frame.ConsumeRetvals(&values));
    return values;
  }

  const GraphOptimizerOptions& options_;
  Device* device_;  // Not owned.
  absl::flat_hash_set<std::string> excluded_;
  int folded_count_ = 0;
};

// ---------------------------------------------------------------------------
// Common-subexpression elimination.

std::string SerializeDeterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

// Constants bigger than this are not compared: keys hold attrs serialized,
// and a frozen graph's weights are big and rarely duplicated, where the
// scalars gradient code makes are small and often are.
constexpr int64_t kCseMaxConstBytes = 64 * 1024;

bool IsCseCandidate(const Node& n) {
  if (n.op() == "Const" && n.constant_value() != nullptr &&
      static_cast<int64_t>(n.constant_value()->TotalBytes()) > kCseMaxConstBytes) {
    return false;
  }
  return n.IsOpRegistered() && !n.IsStateful() && !IsPlaceholderOp(n.op()) &&
         !IsControlFlowOp(n.op()) && !HasStateTypes(n);
}

// Equal keys mean equal values: op, device, attrs, inputs through their
// representatives (sorted for commutative ops), control inputs as a set.
std::string CseKey(const Node& n, const std::vector<int>& rep) {
  std::string key = absl::StrCat(n.op().size(), ":", n.op(), n.requested_device().size(), ":",
                                 n.requested_device());
  std::vector<const std::string*> attr_names;
  for (const auto& [name, value] : n.def().attr()) attr_names.push_back(&name);
  std::sort(attr_names.begin(), attr_names.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  for (const std::string* name : attr_names) {
    const std::string value = SerializeDeterministic(n.def().attr().at(*name));
    absl::StrAppend(&key, name->size(), ":", *name, value.size(), ":", value);
  }
  std::vector<std::pair<int, int>> inputs;
  std::vector<int> controls;
  for (const Edge* e : n.in_edges()) {
    if (e->IsControlEdge()) {
      controls.push_back(rep[e->src->id()]);
    } else {
      inputs.emplace_back(rep[e->src->id()], e->src_output);
    }
  }
  if (n.op_reg()->op_def.is_commutative()) std::sort(inputs.begin(), inputs.end());
  std::sort(controls.begin(), controls.end());
  controls.erase(std::unique(controls.begin(), controls.end()), controls.end());
  absl::StrAppend(&key, "|");
  for (const auto& [src, out] : inputs) absl::StrAppend(&key, src, ":", out, ",");
  absl::StrAppend(&key, "|");
  for (int c : controls) absl::StrAppend(&key, c, ",");
  return key;
}

// Returns the number of nodes merged away.
absl::StatusOr<int> EliminateCommonSubexpressions(GraphDef* def) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, BuildGraph(*def));
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph->TopologicalOrder());
  const int n = graph->num_nodes();
  std::vector<int> rep(n);
  std::iota(rep.begin(), rep.end(), 0);
  absl::flat_hash_map<std::string, const Node*> seen;
  Rewrite rw(n);
  int merged = 0;
  for (const Node* node : order) {
    if (!IsCseCandidate(*node)) continue;
    auto [it, inserted] = seen.emplace(CseKey(*node, rep), node);
    if (inserted) continue;
    const Node* keep = it->second;
    rep[node->id()] = keep->id();
    rw.removed[node->id()] = true;
    for (int i = 0; i < node->num_outputs(); ++i) {
      rw.tensor_map[absl::StrCat(node->name(), ":", i)] = TensorName(keep, i);
    }
    rw.control_map[node->name()] = keep->name();
    ++merged;
  }
  if (merged > 0) ApplyRewrite(std::move(rw), def);
  return merged;
}

// ---------------------------------------------------------------------------
// MatMul fusion.

bool IsFusableActivation(absl::string_view op) {
  return op == "Relu" || op == "Relu6" || op == "Elu" || op == "LeakyRelu" || op == "Sigmoid" ||
         op == "Tanh";
}

// The consumer of output 0 when that is the node's only out edge.
const Node* SoleConsumer(const Node& n) {
  if (n.out_edges().size() != 1) return nullptr;
  const Edge* e = n.out_edges()[0];
  if (e->IsControlEdge() || e->src_output != 0) return nullptr;
  return e->dst;
}

// The bias edge when `add` adds a bias vector to `mm`'s product the way
// BiasAdd does, else null.
const Edge* BiasEdge(const Node& mm, const Node& add) {
  if (!add.IsOpRegistered() || add.num_inputs() != 2) return nullptr;
  if (add.op() == "BiasAdd") {
    std::string format;
    if (!GetNodeAttr(AttrSlice(add.def()), "data_format", &format).ok() || format != "NHWC") {
      return nullptr;
    }
    return add.input_edge(0)->src == &mm ? add.input_edge(1) : nullptr;
  }
  if (add.op() != "AddV2" && add.op() != "Add") return nullptr;
  // Broadcasting must not change the product's shape: a vector of exactly
  // its column count, both known.
  const Edge* bias = add.input_edge(0)->src == &mm ? add.input_edge(1) : add.input_edge(0);
  const PartialShape& b = bias->src->output_shape(bias->src_output);
  const PartialShape& p = mm.output_shape(0);
  if (b.rank() != 1 || p.rank() != 2 || b.dim(0) < 0 || b.dim(0) != p.dim(1)) return nullptr;
  return bias;
}

// Returns the number of _FusedMatMul nodes made.
absl::StatusOr<int> FuseMatMuls(GraphDef* def) {
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> graph, BuildGraph(*def));
  const int n = graph->num_nodes();
  Rewrite rw(n);
  std::vector<bool> used(n, false);
  int fused = 0;
  for (const auto& owned : graph->nodes()) {
    const Node* mm = owned.get();
    if (mm->op() != "MatMul" || !mm->IsOpRegistered() || used[mm->id()]) continue;
    const Node* add = SoleConsumer(*mm);
    if (add == nullptr || used[add->id()] || add->requested_device() != mm->requested_device()) {
      continue;
    }
    const Edge* bias = BiasEdge(*mm, *add);
    if (bias == nullptr) continue;
    const Node* last = add;
    std::vector<std::string> fused_ops = {"BiasAdd"};
    float alpha = 0.2f;
    if (const Node* act = SoleConsumer(*add);
        act != nullptr && !used[act->id()] && IsFusableActivation(act->op()) &&
        act->IsOpRegistered() && act->requested_device() == mm->requested_device()) {
      last = act;
      fused_ops.push_back(act->op());
      if (act->op() == "LeakyRelu" && !GetNodeAttr(AttrSlice(act->def()), "alpha", &alpha).ok()) {
        continue;
      }
    }
    DataType type = DT_INVALID;
    bool transpose_a = false, transpose_b = false;
    if (!GetNodeAttr(AttrSlice(mm->def()), "T", &type).ok() ||
        !GetNodeAttr(AttrSlice(mm->def()), "transpose_a", &transpose_a).ok() ||
        !GetNodeAttr(AttrSlice(mm->def()), "transpose_b", &transpose_b).ok()) {
      continue;
    }
    NodeDef node;
    node.set_name(last->name());
    node.set_op("_FusedMatMul");
    node.set_device(last->requested_device());
    node.add_input(EdgeSource(mm->input_edge(0)));
    node.add_input(EdgeSource(mm->input_edge(1)));
    node.add_input(EdgeSource(bias));
    absl::flat_hash_set<std::string> controls;
    for (const Node* part : {mm, add, last}) {
      for (const Edge* e : part->in_edges()) {
        if (e->IsControlEdge() && controls.insert(e->src->name()).second) {
          node.add_input(absl::StrCat("^", e->src->name()));
        }
      }
    }
    auto& attr = *node.mutable_attr();
    SetAttrValue(type, &attr["T"]);
    SetAttrValue(transpose_a, &attr["transpose_a"]);
    SetAttrValue(transpose_b, &attr["transpose_b"]);
    SetAttrValue(int64_t{1}, &attr["num_args"]);
    SetAttrValue(absl::Span<const std::string>(fused_ops), &attr["fused_ops"]);
    SetAttrValue(0.0001f, &attr["epsilon"]);
    SetAttrValue(alpha, &attr["leakyrelu_alpha"]);
    if (!KernelRegistry::Global()->FindKernel(DEVICE_CPU, node).ok()) continue;  // e.g. half
    used[mm->id()] = used[add->id()] = used[last->id()] = true;
    rw.removed[mm->id()] = true;
    if (last != add) rw.removed[add->id()] = true;
    rw.replaced[last->id()].push_back(std::move(node));
    ++fused;
  }
  if (fused > 0) ApplyRewrite(std::move(rw), def);
  return fused;
}

// Whether `tensor` ("node:i") is a weight: a Const, a variable or a variable
// read, possibly behind Identity nodes. *copy_on_write: a Const or a resource
// variable's read, whose buffer is never written in place.
bool IsWeight(const absl::flat_hash_map<std::string, const NodeDef*>& by_name,
              absl::string_view tensor, bool* copy_on_write) {
  for (int hops = 0; hops < 16; ++hops) {
    auto id = ParseTensorName(tensor);
    if (!id.ok() || id->IsControl()) return false;
    auto it = by_name.find(id->node);
    if (it == by_name.end()) return false;
    const NodeDef& node = *it->second;
    const std::string& op = node.op();
    if (op == "Const" || op == "ReadVariableOp" || op == "VariableV2" || op == "Variable") {
      *copy_on_write = op == "Const" || op == "ReadVariableOp";
      return true;
    }
    if ((op != "Identity" && op != "Snapshot") || node.input_size() == 0) return false;
    tensor = node.input(0);
  }
  return false;
}

// Returns the number of matmuls made int8.
absl::StatusOr<int> QuantizeMatMuls(GraphDef* def) {
  absl::flat_hash_map<std::string, const NodeDef*> by_name;
  for (const NodeDef& node : def->node()) by_name[node.name()] = &node;
  int rewritten = 0;
  for (NodeDef& node : *def->mutable_node()) {
    if (node.op() != "MatMul" && node.op() != "_FusedMatMul") continue;
    DataType type = DT_INVALID;
    bool transpose_a = true, copy_on_write = false;
    if (!GetNodeAttr(AttrSlice(node), "T", &type).ok() || type != DT_FLOAT ||
        !GetNodeAttr(AttrSlice(node), "transpose_a", &transpose_a).ok() || transpose_a ||
        node.input_size() < 2 || !IsWeight(by_name, node.input(1), &copy_on_write)) {
      continue;
    }
    // The attrs _DynamicQuantizedMatMul declares, from MatMul's (whose
    // grad_a / grad_b it has no use for) or _FusedMatMul's.
    bool transpose_b = false;
    int64_t num_args = 0;
    std::vector<std::string> fused_ops;
    float alpha = 0.2f;
    if (!GetNodeAttr(AttrSlice(node), "transpose_b", &transpose_b).ok()) continue;
    if (node.op() == "_FusedMatMul" &&
        (!GetNodeAttr(AttrSlice(node), "num_args", &num_args).ok() ||
         !GetNodeAttr(AttrSlice(node), "fused_ops", &fused_ops).ok() ||
         !GetNodeAttr(AttrSlice(node), "leakyrelu_alpha", &alpha).ok())) {
      continue;
    }
    NodeDef q;
    q.set_name(node.name());
    q.set_op("_DynamicQuantizedMatMul");
    q.set_device(node.device());
    *q.mutable_input() = node.input();
    auto& attr = *q.mutable_attr();
    SetAttrValue(type, &attr["T"]);
    SetAttrValue(false, &attr["transpose_a"]);
    SetAttrValue(transpose_b, &attr["transpose_b"]);
    SetAttrValue(num_args, &attr["num_args"]);
    SetAttrValue(absl::Span<const std::string>(fused_ops), &attr["fused_ops"]);
    SetAttrValue(alpha, &attr["leakyrelu_alpha"]);
    SetAttrValue(int64_t{16}, &attr["calibration_calls"]);  // the op's default
    SetAttrValue(copy_on_write, &attr["weights_copy_on_write"]);
    if (!KernelRegistry::Global()->FindKernel(DEVICE_CPU, q).ok()) continue;
    node = std::move(q);
    ++rewritten;
  }
  return rewritten;
}

}  // namespace

absl::StatusOr<MatMulPrecision> ParseMatMulPrecision(absl::string_view name) {
  if (name == "float32") return MatMulPrecision::kFloat32;
  if (name == "int8") return MatMulPrecision::kInt8;
  return errors::InvalidArgument("unknown matmul precision '", name,
                                 "'; expected float32 or int8");
}

const char* MatMulPrecisionName(MatMulPrecision precision) {
  return precision == MatMulPrecision::kInt8 ? "int8" : "float32";
}

absl::Status OptimizeGraph(const GraphOptimizerOptions& options, Device* device,
                           GraphDef* graph_def, GraphOptimizerStats* stats) {
  if (!options.AnyEnabled()) return absl::OkStatus();
  // Passes rewrite graph_def in place (no copy of a possibly big frozen
  // graph); each applies its rewrite at once, so on error graph_def is what
  // the passes before the failing one made of it.
  const absl::flat_hash_set<std::string> sinks = Sinks(*graph_def);
  std::unique_ptr<Device> own_device;
  if (device == nullptr) {
    own_device = std::make_unique<Device>(Device::Options());
    device = own_device.get();
  }
  auto run = [&](const char* name, auto pass) -> absl::Status {
    GraphOptimizerStats::Pass p;
    p.name = name;
    p.nodes_before = graph_def->node_size();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<int> rewrites = pass(graph_def);
    if (!rewrites.ok()) {
      return errors::Annotate(rewrites.status(), absl::StrCat("graph optimizer pass ", name));
    }
    p.rewrites = *rewrites;
    if (p.rewrites > 0) RemoveDeadNodes(sinks, graph_def);
    p.nodes_after = graph_def->node_size();
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (stats != nullptr) stats->passes.push_back(std::move(p));
    return absl::OkStatus();
  };
  if (options.constant_folding) {
    ConstantFolder folder(options, device);
    RETURN_IF_ERROR(run("constant_folding", [&](GraphDef* d) { return folder.Run(d); }));
  }
  if (options.common_subexpression_elimination) {
    RETURN_IF_ERROR(run("cse", EliminateCommonSubexpressions));
  }
  if (options.fusion) RETURN_IF_ERROR(run("fusion", FuseMatMuls));
  if (options.matmul_precision == MatMulPrecision::kInt8) {
    RETURN_IF_ERROR(run("int8_matmul", QuantizeMatMuls));
  }
  return absl::OkStatus();
}

}  // namespace recflow
