#include "recflow/distributed/placement.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <unordered_set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/status.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/train/global_step.h"
#include "recflow/train/variables.h"

namespace recflow::distributed {

int PsShardOf(int64_t id, int num_ps) {
  if (num_ps <= 1) return 0;
  // splitmix64's finalizer: every input bit moves every output bit.
  uint64_t x = static_cast<uint64_t>(id) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return static_cast<int>(x % static_cast<uint64_t>(num_ps));
}

std::vector<const VariablePlacement*> TrainPlan::PrimaryVariablesOn(int ps) const {
  std::vector<const VariablePlacement*> out;
  for (const VariablePlacement& v : variables) {
    if (v.primary && (v.ps == ps || v.ps == kPartitioned)) out.push_back(&v);
  }
  return out;
}

std::vector<const VariablePlacement*> TrainPlan::SavedVariablesOn(int ps) const {
  std::vector<const VariablePlacement*> out;
  for (const VariablePlacement& v : variables) {
    if (v.ps == ps || v.ps == kPartitioned || (v.ps == kReplicated && ps == 0)) {
      out.push_back(&v);
    }
  }
  return out;
}

std::vector<int64_t> TrainPlan::BytesPerPs() const {
  std::vector<int64_t> out(num_ps, 0);
  for (const VariablePlacement& v : variables) {
    if (v.bytes <= 0) continue;
    if (v.ps >= 0) {
      out[v.ps] += v.bytes;
    } else if (v.ps == kPartitioned) {
      const int64_t rows = v.shape.dim(0);
      for (int p = 0; p < num_ps; ++p) {
        out[p] += v.bytes / rows * (v.part_offsets[p + 1] - v.part_offsets[p]);
      }
    }
  }
  return out;
}

const VariablePlacement* TrainPlan::FindVariable(const std::string& node) const {
  for (const VariablePlacement& v : variables) {
    if (v.node == node) return &v;
  }
  return nullptr;
}

namespace {

bool IsFeedNode(const Node& n) {
  return n.op() == "Placeholder" || n.op() == "PlaceholderWithDefault" ||
         n.op() == "IteratorGetNext";
}

bool IsVariableNode(const Node& n) {
  return n.op() == "VarHandleOp" || n.op() == "VariableV2" || n.op() == "Variable";
}

std::string Endpoint(const Edge* e) { return absl::StrCat(e->src->name(), ":", e->src_output); }

// Nodes reachable from the feed nodes, over data edges only or over every edge.
std::unordered_set<const Node*> BatchDependent(const Graph& graph, bool data_only) {
  std::unordered_set<const Node*> seen;
  std::deque<const Node*> frontier;
  for (const auto& n : graph.nodes()) {
    if (n && IsFeedNode(*n)) {
      seen.insert(n.get());
      frontier.push_back(n.get());
    }
  }
  while (!frontier.empty()) {
    const Node* n = frontier.front();
    frontier.pop_front();
    for (const Edge* e : n->out_edges()) {
      if (data_only && e->IsControlEdge()) continue;
      if (seen.insert(e->dst).second) frontier.push_back(e->dst);
    }
  }
  return seen;
}

uint64_t GraphFingerprint(const Graph& graph) {
  std::vector<const Node*> nodes;
  for (const auto& n : graph.nodes()) {
    if (n) nodes.push_back(n.get());
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const Node* a, const Node* b) { return a->name() < b->name(); });
  std::string text;
  for (const Node* n : nodes) {
    absl::StrAppend(&text, n->name(), "=", n->op(), "(");
    for (const std::string& in : n->def().input()) absl::StrAppend(&text, in, ",");
    std::map<std::string, std::string> attrs;
    for (const auto& [k, v] : n->def().attr()) attrs[k] = v.SerializeAsString();
    for (const auto& [k, v] : attrs) absl::StrAppend(&text, k, ":", v, ";");
    absl::StrAppend(&text, ")\n");
  }
  return Fingerprint64(text);
}

std::string DefaultDevices(int num_ps) {
  std::vector<std::string> d;
  for (int i = 0; i < num_ps; ++i) d.push_back(absl::StrCat("/job:ps/task:", i));
  return absl::StrJoin(d, ", ");
}

// The ps task a variable node asks for, -1 when it asks for none.
absl::StatusOr<int> RequestedPs(const Node& n, const PlanOptions& options) {
  const std::string& device = n.requested_device();
  if (device.empty()) return -1;
  const std::string listed = options.devices.empty() ? DefaultDevices(options.num_ps)
                                                     : absl::StrJoin(options.devices, ", ");
  auto bad = [&]() {
    return errors::InvalidArgument("node '", n.name(), "' is pinned to device '", device,
                                   "', which the cluster does not have; its devices are: ",
                                   listed);
  };
  // "/job:ps/task:K" with optional "/replica:R" and "/device:..." parts.
  if (!absl::StartsWith(device, "/job:ps")) {
    if (absl::StartsWith(device, "/job:")) {
      return errors::InvalidArgument("variable '", n.name(), "' is pinned to device '", device,
                                     "'; variables live on ps tasks (", listed, ")");
    }
    return -1;  // "/device:CPU:0" and the like: no job, no constraint
  }
  const size_t t = device.find("/task:");
  if (t == std::string::npos) return -1;  // any ps task
  int task = 0;
  size_t i = t + 6;
  if (i >= device.size() || !isdigit(device[i])) return bad();
  while (i < device.size() && isdigit(device[i])) task = task * 10 + (device[i++] - '0');
  if (task >= options.num_ps) return bad();
  return task;
}

}  // namespace

absl::StatusOr<TrainPlan> PlanTraining(const Graph& graph, const PlanOptions& options) {
  if (options.num_ps < 1) {
    return errors::InvalidArgument("a distributed plan needs at least one ps task, got ",
                                   options.num_ps);
  }
  TrainPlan plan;
  plan.num_ps = options.num_ps;
  // The placement options are part of what tasks must agree on.
  plan.graph_fingerprint = Fingerprint64(absl::StrCat(
      GraphFingerprint(graph), " ps=", options.num_ps, " partition=", options.partition_bytes));
  if (auto gs = train::GetGlobalStep(graph); gs.ok()) plan.global_step = gs->node()->name();

  const std::unordered_set<const Node*> batch_data = BatchDependent(graph, /*data_only=*/true);

  std::map<std::string, size_t> var_index;  // node -> plan.variables
  for (const Output& v : train::GlobalVariables(graph)) {
    VariablePlacement p;
    p.node = v.node()->name();
    // Container "": each ps resolves it to its own default container.
    ResourceLocation where = NodeResourceLocation(v.node()->def(), "");
    p.container = std::move(where.container);
    p.shared_name = std::move(where.name);
    p.dtype = train::VariableDtype(v);
    p.shape = train::VariableShape(v);
    p.bytes = p.shape.IsFullyDefined() ? p.shape.num_elements() * DataTypeSize(p.dtype) : -1;
    var_index[p.node] = plan.variables.size();
    plan.variables.push_back(std::move(p));
  }
  for (const Output& t : train::HashTables(graph)) {
    TablePlacement p;
    p.node = t.node()->name();
    // Container "": each ps resolves it to its own default container.
    ResourceLocation where = NodeResourceLocation(t.node()->def(), "");
    p.container = std::move(where.container);
    p.shared_name = std::move(where.name);
    auto dim = t.node()->def().attr().find("dim");
    p.dim = dim == t.node()->def().attr().end() ? 0 : dim->second.i();
    for (const Edge* e : t.node()->out_edges()) {
      if (e->IsControlEdge() || e->dst_input != 0) continue;
      const std::string& op = e->dst->op();
      if (op != "HashEmbeddingBag" && op != "HashEmbeddingLookup") continue;
      const Edge* ids = e->dst->input_edge(1);
      if (ids != nullptr) p.ids_endpoints.push_back(Endpoint(ids));
    }
    std::sort(p.ids_endpoints.begin(), p.ids_endpoints.end());
    p.ids_endpoints.erase(std::unique(p.ids_endpoints.begin(), p.ids_endpoints.end()),
                          p.ids_endpoints.end());
    plan.tables.push_back(std::move(p));
  }
  std::set<std::string> table_nodes;
  for (const TablePlacement& t : plan.tables) table_nodes.insert(t.node);

  // Update ops.
  std::unordered_set<const Node*> apply_nodes;
  std::map<std::string, std::vector<std::string>> slots_of;  // primary -> slots
  for (const auto& np : graph.nodes()) {
    if (!np) continue;
    const Node& n = *np;
    if (n.op().find("Apply") == std::string::npos || n.num_inputs() == 0) continue;
    const Edge* target = n.input_edge(0);
    if (target == nullptr) continue;
    const bool is_table = table_nodes.count(target->src->name()) > 0;
    if (!is_table && !IsVariableNode(*target->src)) continue;
    if (!is_table && var_index.count(target->src->name()) == 0) continue;
    ApplyPlacement a;
    a.node = n.name();
    a.op = n.op();
    a.target = target->src->name();
    a.table = is_table;
    // A graph may hold ops this binary does not register (an imported
    // GraphDef): their argument names are unknown.
    if (!n.IsOpRegistered()) {
      return errors::InvalidArgument("update op '", n.name(), "' has op '", n.op(),
                                     "', which is not registered");
    }
    const auto& args = n.op_reg()->op_def.input_arg();
    for (int i = 1; i < n.num_inputs(); ++i) {
      const Edge* e = n.input_edge(i);
      if (e == nullptr) continue;
      const std::string arg = i < args.size() ? args[i].name() : "";
      if (batch_data.count(e->src) > 0) {
        if (arg == "indices" || arg == "ids") {
          a.indices = Endpoint(e);
          a.indices_input = i;
          a.indices_dtype = BaseType(e->src->output_type(e->src_output));
          a.ps_indices_feed = absl::StrCat("_ps_feed/", n.name(), "/indices");
        } else if (a.grad.empty()) {
          a.grad = Endpoint(e);
          a.grad_input = i;
          a.grad_dtype = BaseType(e->src->output_type(e->src_output));
          a.ps_grad_feed = absl::StrCat("_ps_feed/", n.name(), "/grad");
        } else {
          return errors::InvalidArgument("update op '", n.name(), "' (", n.op(),
                                         ") has more than one gradient input ('", a.grad,
                                         "' and '", Endpoint(e), "')");
        }
      } else if (!is_table && IsVariableNode(*e->src) &&
                 var_index.count(e->src->name()) > 0) {
        slots_of[a.target].push_back(e->src->name());
      }
    }
    if (a.grad.empty()) {
      return errors::InvalidArgument("update op '", n.name(), "' (", n.op(),
                                     ") takes no gradient computed from the batch; a "
                                     "distributed job cannot place it");
    }
    if (is_table && a.indices.empty()) {
      return errors::InvalidArgument("table update op '", n.name(), "' has no ids input");
    }
    apply_nodes.insert(&n);
    plan.applies.push_back(std::move(a));
  }
  if (plan.applies.empty()) {
    return errors::InvalidArgument(
        "the graph has no update ops (Apply*): build it with an optimizer (trainable) for "
        "distributed training");
  }

  // Placement: pinned first, then largest first to the least loaded ps.
  std::vector<int64_t> load(options.num_ps, 0);
  std::vector<std::pair<int64_t, std::string>> unpinned;  // (-cost, node)
  std::set<std::string> primaries;
  for (const ApplyPlacement& a : plan.applies) {
    if (!a.table) primaries.insert(a.target);
  }
  auto cost = [&](const std::string& primary) {
    int64_t c = std::max<int64_t>(plan.variables[var_index[primary]].bytes, 1);
    for (const std::string& s : slots_of[primary]) {
      c += std::max<int64_t>(plan.variables[var_index[s]].bytes, 0);
    }
    return c;
  };
  for (const std::string& primary : primaries) {
    const Node* n = graph.FindNode(primary);
    ASSIGN_OR_RETURN(int pinned, RequestedPs(*n, options));
    VariablePlacement& v = plan.variables[var_index[primary]];
    v.primary = true;
    const bool big = options.partition_bytes > 0 && v.bytes >= options.partition_bytes &&
                     v.shape.rank() >= 1 && v.shape.dim(0) >= options.num_ps &&
                     options.num_ps > 1;
    if (pinned < 0 && big) {
      v.ps = kPartitioned;
      const int64_t rows = v.shape.dim(0);
      for (int p = 0; p <= options.num_ps; ++p) {
        v.part_offsets.push_back(rows / options.num_ps * p + std::min<int64_t>(p, rows % options.num_ps));
      }
      for (int p = 0; p < options.num_ps; ++p) load[p] += cost(primary) / options.num_ps;
      continue;
    }
    if (pinned >= 0) {
      v.ps = pinned;
      load[pinned] += cost(primary);
    } else {
      unpinned.emplace_back(-cost(primary), primary);
    }
  }
  std::sort(unpinned.begin(), unpinned.end());
  for (const auto& [neg_cost, primary] : unpinned) {
    const int ps = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    plan.variables[var_index[primary]].ps = ps;
    load[ps] += -neg_cost;
  }
  for (const auto& [primary, slots] : slots_of) {
    const int ps = plan.variables[var_index[primary]].ps;
    const std::vector<int64_t> offsets = plan.variables[var_index[primary]].part_offsets;
    for (const std::string& s : slots) {
      VariablePlacement& v = plan.variables[var_index[s]];
      if (v.primary) {
        return errors::InvalidArgument("variable '", s, "' is both updated by an optimizer and "
                                       "a slot of '", primary, "'");
      }
      if (!v.primary_of.empty() && v.primary_of != primary) {
        return errors::InvalidArgument("variable '", s, "' is a slot of both '", v.primary_of,
                                       "' and '", primary, "'");
      }
      v.primary_of = primary;
      v.ps = ps;
      v.part_offsets = offsets;
      if (ps == kPartitioned && (!v.shape.IsFullyDefined() || v.shape.rank() < 1 ||
                                 v.shape.dim(0) != offsets.back())) {
        return errors::InvalidArgument("slot '", s, "' of partitioned variable '", primary,
                                       "' has shape ", v.shape.DebugString(),
                                       "; partitioning needs the variable's rows");
      }
    }
  }
  for (ApplyPlacement& a : plan.applies) {
    if (!a.table) a.ps = plan.variables[var_index[a.target]].ps;
  }

  // Post-update assignments: of replicated variables (not the global step),
  // run after an update op: a control input from one, or (as TF's
  // control_dependencies leaves it when the assigned value is computed in
  // the same block) from an op between.
  std::unordered_set<const Node*> after_updates;
  {
    std::deque<const Node*> frontier(apply_nodes.begin(), apply_nodes.end());
    while (!frontier.empty()) {
      const Node* n = frontier.front();
      frontier.pop_front();
      for (const Edge* e : n->out_edges()) {
        if (IsVariableNode(*e->dst) || !after_updates.insert(e->dst).second) continue;
        frontier.push_back(e->dst);
      }
    }
  }
  for (const auto& np : graph.nodes()) {
    if (!np || !absl::StartsWith(np->op(), "Assign") || after_updates.count(np.get()) == 0) {
      continue;
    }
    const Edge* target = np->input_edge(0);
    if (target == nullptr || target->src->name() == plan.global_step) continue;
    auto v = var_index.find(target->src->name());
    if (v == var_index.end() || plan.variables[v->second].ps != kReplicated) continue;
    plan.post_update_nodes.push_back(np->name());
  }
  return plan;
}

absl::StatusOr<tensorflow::GraphDef> PsGraphDef(const Graph& graph, const TrainPlan& plan) {
  const std::unordered_set<const Node*> batch_any = BatchDependent(graph, /*data_only=*/false);
  std::set<std::string> drop;
  for (const Node* n : batch_any) drop.insert(absl::StrCat("^", n->name()));
  tensorflow::GraphDef def;
  graph.ToGraphDef(&def);
  std::map<std::string, const ApplyPlacement*> applies;
  for (const ApplyPlacement& a : plan.applies) applies[a.node] = &a;
  for (tensorflow::NodeDef& n : *def.mutable_node()) {
    auto* inputs = n.mutable_input();
    inputs->erase(std::remove_if(inputs->begin(), inputs->end(),
                                 [&](const std::string& in) { return drop.count(in) > 0; }),
                  inputs->end());
    auto a = applies.find(n.name());
    if (a == applies.end()) continue;
    for (const auto& [index, feed] :
         {std::pair(a->second->grad_input, a->second->ps_grad_feed),
          std::pair(a->second->indices_input, a->second->ps_indices_feed)}) {
      if (index < 0) continue;
      if (index >= inputs->size()) {
        return errors::Internal("update op '", n.name(), "' has no input ", index);
      }
      (*inputs)[index] = feed;
    }
  }
  for (const ApplyPlacement& a : plan.applies) {
    for (const auto& [feed, dtype] : {std::pair(a.ps_grad_feed, a.grad_dtype),
                                      std::pair(a.ps_indices_feed, a.indices_dtype)}) {
      if (feed.empty()) continue;
      tensorflow::NodeDef* p = def.add_node();
      p->set_name(feed);
      p->set_op("Placeholder");
      (*p->mutable_attr())["dtype"].set_type(static_cast<tensorflow::DataType>(dtype));
    }
  }
  return def;
}

}  // namespace recflow::distributed
