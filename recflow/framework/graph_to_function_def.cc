#include "recflow/framework/graph_to_function_def.h"

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "recflow/core/status.h"
#include "recflow/framework/node_def_util.h"

namespace recflow {
namespace {

bool IsValidFunctionName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

std::string ArgNameFrom(absl::string_view node_name) {
  std::string out;
  for (char c : node_name) {
    const char l = absl::ascii_tolower(c);
    out.push_back(absl::ascii_isalnum(l) || l == '_' ? l : '_');
  }
  if (out.empty() || !absl::ascii_isalpha(out[0])) out.insert(0, "arg_");
  return out;
}

// For each output index of `node`: "output_arg:j" (j within the argument).
absl::StatusOr<std::vector<std::string>> OutputNames(const Node& node) {
  NameRangeMap in_ranges, out_ranges;
  RETURN_IF_ERROR(NameRangesForNode(node.def(), node.op_reg()->op_def, &in_ranges, &out_ranges));
  std::vector<std::string> names(node.num_outputs());
  for (const auto& [arg, range] : out_ranges) {
    for (int i = range.first; i < range.second && i < node.num_outputs(); ++i) {
      names[i] = absl::StrCat(arg, ":", i - range.first);
    }
  }
  return names;
}

}  // namespace

absl::StatusOr<tensorflow::FunctionDef> GraphToFunctionDef(
    const Graph& graph, const GraphToFunctionDefOptions& options) {
  const std::string& fname = options.name;
  auto error = [&](auto&&... args) {
    return errors::InvalidArgument("making function '", fname, "': ", args...);
  };
  if (!IsValidFunctionName(fname)) {
    return errors::InvalidArgument("'", fname,
                                   "' is not a valid function name: use letters, digits, _ . -");
  }
  if (!options.input_names.empty() && options.input_names.size() != options.inputs.size()) {
    return error(options.inputs.size(), " inputs but ", options.input_names.size(), " names");
  }
  if (!options.output_names.empty() && options.output_names.size() != options.outputs.size()) {
    return error(options.outputs.size(), " outputs but ", options.output_names.size(), " names");
  }
  tensorflow::FunctionDef fdef;
  tensorflow::OpDef* sig = fdef.mutable_signature();
  sig->set_name(fname);
  sig->set_description(options.description);

  absl::flat_hash_set<std::string> used;  // arg names and body node names
  for (const auto& n : graph.nodes()) used.insert(n->name());
  absl::flat_hash_map<const Node*, std::string> arg_of;
  absl::flat_hash_set<std::string> arg_names;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    const Node* in = options.inputs[i];
    if (in->op() != "Placeholder" || in->num_outputs() != 1) {
      return error("input ", i, " is node '", in->name(), "' (", in->op(),
                   "); inputs must be Placeholder nodes");
    }
    if (arg_of.contains(in)) return error("node '", in->name(), "' is given twice as an input");
    std::string name;
    if (!options.input_names.empty()) {
      name = options.input_names[i];
      if (name.empty() || name.find(':') != std::string::npos || arg_names.contains(name) ||
          (used.contains(name) && name != in->name())) {
        return error("input name '", name, "' is empty, has ':' or is used twice");
      }
    } else {
      const std::string base = ArgNameFrom(in->name());
      name = base;
      for (int k = 1; arg_names.contains(name) || (used.contains(name) && name != in->name());
           ++k) {
        name = absl::StrCat(base, "_", k);
      }
    }
    arg_names.insert(name);
    used.insert(name);
    arg_of[in] = name;
    auto* arg = sig->add_input_arg();
    arg->set_name(name);
    arg->set_type(static_cast<tensorflow::DataType>(BaseType(in->output_type(0))));
  }

  // Body inputs in function-body form.
  absl::flat_hash_map<const Node*, std::vector<std::string>> out_names;
  auto tensor_name = [&](const Node* src, int index) -> absl::StatusOr<std::string> {
    if (auto it = arg_of.find(src); it != arg_of.end()) return it->second;
    auto it = out_names.find(src);
    if (it == out_names.end()) {
      ASSIGN_OR_RETURN(std::vector<std::string> names, OutputNames(*src));
      it = out_names.emplace(src, std::move(names)).first;
    }
    return absl::StrCat(src->name(), ":", it->second[index]);
  };
  bool stateful = false;
  for (const auto& n : graph.nodes()) {
    if (arg_of.contains(n.get())) continue;
    if (!n->IsOpRegistered()) {
      return error("node '", n->name(), "' uses op '", n->op(), "', which is not registered");
    }
    stateful |= n->IsStateful();
    tensorflow::NodeDef* nd = fdef.add_node_def();
    *nd = n->def();
    nd->clear_input();
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge()) {
        if (arg_of.contains(e->src)) continue;  // an argument is ready before the body runs
        nd->add_input(absl::StrCat("^", e->src->name()));
      } else {
        ASSIGN_OR_RETURN(std::string in, tensor_name(e->src, e->src_output));
        nd->add_input(std::move(in));
      }
    }
  }
  sig->set_is_stateful(stateful);

  absl::flat_hash_set<std::string> out_seen;
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    const auto& [node, index] = options.outputs[i];
    if (index < 0 || index >= node->num_outputs()) {
      return error("output ", i, " is output ", index, " of node '", node->name(), "', which has ",
                   node->num_outputs());
    }
    const DataType type = BaseType(node->output_type(index));
    if (type == DT_INVALID) return error("output ", i, " ('", node->name(), "') has no dtype");
    const std::string name =
        options.output_names.empty() ? absl::StrCat("output_", i) : options.output_names[i];
    if (name.empty() || !out_seen.insert(name).second) {
      return error("output name '", name, "' is empty or used twice");
    }
    auto* arg = sig->add_output_arg();
    arg->set_name(name);
    arg->set_type(static_cast<tensorflow::DataType>(type));
    ASSIGN_OR_RETURN(std::string ret, tensor_name(node, index));
    (*fdef.mutable_ret())[name] = ret;
  }
  for (const Node* n : options.control_outputs) {
    if (arg_of.contains(n)) return error("control output '", n->name(), "' is an input");
    if (!out_seen.insert("^" + n->name()).second) continue;
    sig->add_control_output(n->name());
    (*fdef.mutable_control_ret())[n->name()] = n->name();
  }
  return fdef;
}

}  // namespace recflow
