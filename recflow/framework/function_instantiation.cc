#include "recflow/framework/function_instantiation.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/message_differencer.h"
#include "recflow/core/status.h"
#include "recflow/framework/node_def_util.h"

namespace recflow {

using tensorflow::AttrValue;
using tensorflow::FunctionDef;
using tensorflow::NodeDef;
using tensorflow::OpDef;

namespace {

constexpr char kCallOp[] = "StatefulPartitionedCall";

// An attr as written in a signature or op, for messages: "T: type".
std::string ArgString(const OpDef::ArgDef& arg) {
  std::string type = arg.type() != tensorflow::DT_INVALID
                         ? DataTypeString(static_cast<DataType>(arg.type()))
                         : !arg.type_list_attr().empty() ? arg.type_list_attr() : arg.type_attr();
  if (!arg.number_attr().empty()) type = absl::StrCat(arg.number_attr(), "*", type);
  return absl::StrCat(arg.name(), ": ", type);
}

// Replaces placeholders in `value` (recursively inside func attrs) by
// `bound` values. False, with *missing set, when one is unbound.
bool SubstitutePlaceholders(const AttrMap& bound, AttrValue* value, std::string* missing) {
  switch (value->value_case()) {
    case AttrValue::kPlaceholder: {
      auto it = bound.find(value->placeholder());
      if (it == bound.end()) {
        *missing = value->placeholder();
        return false;
      }
      *value = it->second;
      return true;
    }
    case AttrValue::kFunc:
      for (auto& [name, v] : *value->mutable_func()->mutable_attr()) {
        if (!SubstitutePlaceholders(bound, &v, missing)) return false;
      }
      return true;
    case AttrValue::kList:
      for (auto& f : *value->mutable_list()->mutable_func()) {
        for (auto& [name, v] : *f.mutable_attr()) {
          if (!SubstitutePlaceholders(bound, &v, missing)) return false;
        }
      }
      return true;
    default:
      return true;
  }
}

// What a name usable as a body input stands for: argument tensors (_Arg
// nodes nid .. nid+n-1) or outputs idx .. idx+n-1 of node nid.
struct NameItem {
  bool is_arg = false;
  int nid = 0;
  int idx = 0;
  std::vector<DataType> dtypes;
};

class Instantiator {
 public:
  Instantiator(const FunctionDef& fdef, const AttrMap& attrs, const FunctionLookup& lookup,
               const OpRegistry* ops)
      : fdef_(fdef), sig_(fdef.signature()), lookup_(lookup), ops_(ops) {
    bound_ = attrs;
  }

  absl::StatusOr<InstantiatedFunction> Run() {
    RETURN_IF_ERROR(BindSignatureAttrs());
    for (int i = 0; i < sig_.input_arg_size(); ++i) RETURN_IF_ERROR(AddArg(i));
    const int first_body = result_.graph.node_size();
    body_ops_.resize(fdef_.node_def_size());
    for (int i = 0; i < fdef_.node_def_size(); ++i) {
      RETURN_IF_ERROR(IndexBodyNode(i, first_body + i));
    }
    for (int i = 0; i < fdef_.node_def_size(); ++i) RETURN_IF_ERROR(AddBodyNode(i));
    for (const auto& out : sig_.output_arg()) RETURN_IF_ERROR(AddRetval(out));
    for (const std::string& c : sig_.control_output()) {
      auto it = fdef_.control_ret().find(c);
      if (it == fdef_.control_ret().end()) {
        return Error("control output '", c, "' has no entry in control_ret");
      }
    }
    for (const auto& [name, node] : fdef_.control_ret()) {
      if (!body_names_.contains(node)) {
        return Error("control_ret '", name, "' names node '", node,
                     "', which is not in the function body");
      }
    }
    return std::move(result_);
  }

 private:
  template <typename... Args>
  absl::Status Error(const Args&... args) const {
    return errors::InvalidArgument("function '", sig_.name(), "': ", args...);
  }

  // Every signature attr gets a value: the call's, else its default.
  absl::Status BindSignatureAttrs() {
    for (const auto& attr : sig_.attr()) {
      auto it = bound_.find(attr.name());
      if (it == bound_.end()) {
        if (!attr.has_default_value()) {
          return Error("attr '", attr.name(), "' (", attr.type(),
                       ") is not bound: the call gives no value and it has no default");
        }
        bound_[attr.name()] = attr.default_value();
        continue;
      }
      const std::string kind = AttrValueKind(it->second);
      const bool list_ok = absl::StartsWith(attr.type(), "list(") && kind == "list";
      if (kind != attr.type() && !list_ok) {
        return Error("attr '", attr.name(), "' must be ", attr.type(), " but the call gives ",
                     kind, " ", SummarizeAttrValue(it->second));
      }
    }
    return absl::OkStatus();
  }

  absl::Status AddName(const std::string& name, NameItem item) {
    if (!index_.emplace(name, std::move(item)).second) {
      return Error("the name '", name, "' is defined twice (an argument or body node)");
    }
    return absl::OkStatus();
  }

  NodeDef* AddNode(const std::string& name) {
    graph_names_.insert(name);
    NodeDef* n = result_.graph.add_node();
    n->set_name(name);
    return n;
  }

  absl::Status AddArg(int i) {
    const OpDef::ArgDef& arg = sig_.input_arg(i);
    auto dtypes = ArgDTypes(arg, bound_);
    if (!dtypes.ok()) return Error(dtypes.status().message());
    if (dtypes->empty()) return Error("argument '", ArgString(arg), "' has no tensors");
    const int nid = result_.graph.node_size();
    RETURN_IF_ERROR(AddName(arg.name(), {true, nid, 0, *dtypes}));
    for (size_t k = 0; k < dtypes->size(); ++k) {
      RETURN_IF_ERROR(AddName(absl::StrCat(arg.name(), ":", k), {true, nid + int(k), 0,
                                                                 {(*dtypes)[k]}}));
      std::string name = arg.name();
      if (dtypes->size() > 1) absl::StrAppend(&name, "_", k);
      NodeDef* n = AddNode(name);
      n->set_op("_Arg");
      SetAttrValue((*dtypes)[k], &(*n->mutable_attr())["T"]);
      SetAttrValue(static_cast<int64_t>(result_.arg_types.size()), &(*n->mutable_attr())["index"]);
      if (auto it = fdef_.resource_arg_unique_id().find(i);
          it != fdef_.resource_arg_unique_id().end()) {
        SetAttrValue(static_cast<int64_t>(it->second),
                     &(*n->mutable_attr())["_resource_arg_unique_id"]);
      }
      if (auto it = fdef_.arg_attr().find(i); it != fdef_.arg_attr().end()) {
        for (const auto& [k2, v] : it->second.attr()) (*n->mutable_attr())[k2] = v;
      }
      result_.arg_types.push_back((*dtypes)[k]);
    }
    return absl::OkStatus();
  }

  // Binds the node's attrs and indexes the names of its outputs.
  absl::Status IndexBodyNode(int i, int nid) {
    const NodeDef& fnode = fdef_.node_def(i);
    auto label = [&] { return absl::StrCat("node '", fnode.name(), "' (", fnode.op(), ")"); };
    if (!body_names_.insert(fnode.name()).second) {
      return Error("two body nodes are named '", fnode.name(), "'");
    }
    if (graph_names_.contains(fnode.name())) {
      return Error("the name '", fnode.name(), "' is defined twice (an argument and a body node)");
    }
    AttrMap attrs;
    for (const auto& [name, value] : fnode.attr()) {
      AttrValue v = value;
      std::string missing;
      if (!SubstitutePlaceholders(bound_, &v, &missing)) {
        return Error(label(), ": attr '", name, "' is the placeholder $", missing,
                     ", which the function's attrs do not bind");
      }
      attrs[name] = std::move(v);
    }
    const OpDef* op_def = nullptr;
    if (const OpRegistrationData* reg = ops_->Find(fnode.op())) {
      op_def = &reg->op_def;
    } else if (const FunctionDef* f = lookup_ ? lookup_(fnode.op()) : nullptr) {
      op_def = &f->signature();
      body_ops_[i].callee = f;
    } else {
      return errors::NotFound("function '", sig_.name(), "': ", label(), " uses op '",
                              fnode.op(),
                              "', which is neither a registered op nor a function of the library");
    }
    body_ops_[i].op_def = op_def;
    for (const auto& attr : op_def->attr()) {
      if (attr.has_default_value() && !attrs.contains(attr.name())) {
        attrs[attr.name()] = attr.default_value();
      }
    }
    body_ops_[i].attrs = std::move(attrs);
    const AttrMap& bound = body_ops_[i].attrs;
    if (op_def->output_arg_size() == 0) return AddName(fnode.name(), {false, nid, 0, {}});
    int start = 0;
    for (const auto& out : op_def->output_arg()) {
      auto dtypes = ArgDTypes(out, bound);
      if (!dtypes.ok()) return Error(label(), ": ", dtypes.status().message());
      const std::string base = absl::StrCat(fnode.name(), ":", out.name());
      RETURN_IF_ERROR(AddName(base, {false, nid, start, *dtypes}));
      for (size_t k = 0; k < dtypes->size(); ++k) {
        RETURN_IF_ERROR(
            AddName(absl::StrCat(base, ":", k), {false, nid, start + int(k), {(*dtypes)[k]}}));
      }
      start += static_cast<int>(dtypes->size());
    }
    return absl::OkStatus();
  }

  static std::string GraphInput(const NodeDef& src, int index) {
    return index == 0 ? src.name() : absl::StrCat(src.name(), ":", index);
  }

  absl::Status AddBodyNode(int i) {
    const NodeDef& fnode = fdef_.node_def(i);
    const OpDef& op_def = *body_ops_[i].op_def;
    auto label = [&] { return absl::StrCat("node '", fnode.name(), "' (", fnode.op(), ")"); };
    NodeDef* gnode = AddNode(fnode.name());
    gnode->set_op(fnode.op());
    gnode->set_device(fnode.device());
    *gnode->mutable_attr() = body_ops_[i].attrs;
    int next = 0;  // index into fnode.input()
    for (const auto& in_arg : op_def.input_arg()) {
      auto dtypes = ArgDTypes(in_arg, body_ops_[i].attrs);
      if (!dtypes.ok()) return Error(label(), ": ", dtypes.status().message());
      for (size_t j = 0; j < dtypes->size(); ++next) {
        if (next >= fnode.input_size() || absl::StartsWith(fnode.input(next), "^")) {
          return Error(label(), ": input '", in_arg.name(), "' needs ", dtypes->size(),
                       " tensor(s) but the node gives fewer");
        }
        const std::string& name = fnode.input(next);
        auto it = index_.find(name);
        if (it == index_.end()) {
          return Error(label(), ": input '", name,
                       "' is not an argument or node output of the function (inside a function "
                       "body, tensors are named 'arg', 'node:output_arg:index' or "
                       "'node:output_arg')");
        }
        const NameItem& item = it->second;
        if (item.dtypes.size() > dtypes->size() - j) {
          return Error(label(), ": input '", name, "' has ", item.dtypes.size(),
                       " tensors, too many for input '", in_arg.name(), "'");
        }
        for (size_t k = 0; k < item.dtypes.size(); ++k, ++j) {
          if (item.dtypes[k] != (*dtypes)[j]) {
            return Error(label(), ": input '", in_arg.name(), "'[", j, "] expects ",
                         DataTypeString((*dtypes)[j]), " but '", name, "'[", k, "] is ",
                         DataTypeString(item.dtypes[k]));
          }
          if (item.is_arg) {
            gnode->add_input(result_.graph.node(item.nid + int(k)).name());
          } else {
            gnode->add_input(GraphInput(result_.graph.node(item.nid), item.idx + int(k)));
          }
        }
      }
    }
    for (; next < fnode.input_size(); ++next) {
      const std::string& input = fnode.input(next);
      if (!absl::StartsWith(input, "^")) {
        return Error(label(), ": input '", input, "' is one more data input than op ",
                     fnode.op(), " takes (control inputs, '^node', come last)");
      }
      const std::string dep = input.substr(1);
      int nid = -1;
      if (auto it = index_.find(dep); it != index_.end()) {
        nid = it->second.nid;
      } else {
        // A node with outputs is indexed as "node:out"; any entry will do.
        auto lo = index_.lower_bound(dep + ":");
        if (lo != index_.end() && absl::StartsWith(lo->first, dep + ":")) nid = lo->second.nid;
      }
      if (nid < 0) return Error(label(), ": control input '", input, "' names no body node");
      gnode->add_input(absl::StrCat("^", result_.graph.node(nid).name()));
    }
    if (body_ops_[i].callee != nullptr) {
      RETURN_IF_ERROR(RewriteCallByName(*body_ops_[i].callee, gnode));
    }
    return absl::OkStatus();
  }

  absl::Status AddRetval(const OpDef::ArgDef& out) {
    auto ret = fdef_.ret().find(out.name());
    if (ret == fdef_.ret().end()) {
      return Error("output '", out.name(), "' has no entry in ret");
    }
    auto dtypes = ArgDTypes(out, bound_);
    if (!dtypes.ok()) return Error(dtypes.status().message());
    auto it = index_.find(ret->second);
    if (it == index_.end()) {
      return Error("output '", out.name(), "' returns '", ret->second,
                   "', which is not an argument or node output of the function");
    }
    const NameItem& item = it->second;
    if (item.dtypes != *dtypes) {
      std::vector<std::string> want, got;
      for (DataType t : *dtypes) want.push_back(DataTypeString(t));
      for (DataType t : item.dtypes) got.push_back(DataTypeString(t));
      return Error("output '", ArgString(out), "' is [", absl::StrJoin(want, ", "), "] but '",
                   ret->second, "' is [", absl::StrJoin(got, ", "), "]");
    }
    for (size_t k = 0; k < dtypes->size(); ++k) {
      std::string name = absl::StrCat(out.name(), "_RetVal");
      if (dtypes->size() > 1) absl::StrAppend(&name, "_", k);
      if (graph_names_.contains(name)) {
        return Error("output '", out.name(), "' needs a node named '", name,
                     "', which the body already has");
      }
      NodeDef* n = AddNode(name);
      n->set_op("_Retval");
      if (item.is_arg) {
        n->add_input(result_.graph.node(item.nid + int(k)).name());
      } else {
        n->add_input(GraphInput(result_.graph.node(item.nid), item.idx + int(k)));
      }
      SetAttrValue((*dtypes)[k], &(*n->mutable_attr())["T"]);
      SetAttrValue(static_cast<int64_t>(result_.ret_types.size()), &(*n->mutable_attr())["index"]);
      result_.ret_types.push_back((*dtypes)[k]);
    }
    return absl::OkStatus();
  }

  struct BodyOp {
    const OpDef* op_def = nullptr;
    const FunctionDef* callee = nullptr;  // set when the op is a library function
    AttrMap attrs;
  };

  const FunctionDef& fdef_;
  const OpDef& sig_;
  const FunctionLookup& lookup_;
  const OpRegistry* ops_;
  AttrMap bound_;
  std::map<std::string, NameItem> index_;
  absl::flat_hash_set<std::string> body_names_;
  absl::flat_hash_set<std::string> graph_names_;  // nodes of result_.graph so far
  std::vector<BodyOp> body_ops_;
  InstantiatedFunction result_;
};

}  // namespace

absl::StatusOr<std::vector<DataType>> ArgDTypes(const OpDef::ArgDef& arg, const AttrMap& attrs) {
  std::vector<DataType> dtypes;
  auto attr = [&](const std::string& name) -> const AttrValue* {
    auto it = attrs.find(name);
    return it == attrs.end() ? nullptr : &it->second;
  };
  if (!arg.type_list_attr().empty()) {
    const AttrValue* v = attr(arg.type_list_attr());
    if (v == nullptr) {
      return errors::InvalidArgument("argument '", ArgString(arg), "' needs attr '",
                                     arg.type_list_attr(), "', which is not set");
    }
    for (int t : v->list().type()) dtypes.push_back(static_cast<DataType>(t));
    return dtypes;
  }
  int64_t num = 1;
  if (!arg.number_attr().empty()) {
    const AttrValue* v = attr(arg.number_attr());
    if (v == nullptr || v->value_case() != AttrValue::kI || v->i() < 0) {
      return errors::InvalidArgument("argument '", ArgString(arg), "' needs attr '",
                                     arg.number_attr(), "' (a count >= 0), which is not set");
    }
    num = v->i();
  }
  DataType dtype = static_cast<DataType>(arg.type());
  if (dtype == DT_INVALID) {
    const AttrValue* v = attr(arg.type_attr());
    if (v == nullptr || v->value_case() != AttrValue::kType) {
      return errors::InvalidArgument("argument '", ArgString(arg), "' needs type attr '",
                                     arg.type_attr(), "', which is not set");
    }
    dtype = static_cast<DataType>(v->type());
  }
  dtypes.assign(num, dtype);
  return dtypes;
}

absl::StatusOr<InstantiatedFunction> InstantiateFunction(const FunctionDef& fdef,
                                                         const AttrMap& attrs,
                                                         const FunctionLookup& lookup,
                                                         const OpRegistry* ops) {
  return Instantiator(fdef, attrs, lookup, ops).Run();
}

absl::Status RewriteCallByName(const FunctionDef& fdef, NodeDef* node) {
  const OpDef& sig = fdef.signature();
  AttrMap attrs;
  for (const auto& [name, value] : node->attr()) {
    if (!absl::StartsWith(name, "_")) attrs[name] = value;
  }
  for (const auto& attr : sig.attr()) {
    if (!attrs.contains(attr.name()) && attr.has_default_value()) {
      attrs[attr.name()] = attr.default_value();
    }
  }
  std::vector<DataType> tin, tout;
  auto label = [&] { return absl::StrCat("node '", node->name(), "' (calls function '",
                                         sig.name(), "')"); };
  for (const auto& arg : sig.input_arg()) {
    auto d = ArgDTypes(arg, attrs);
    if (!d.ok()) return errors::InvalidArgument(label(), ": ", d.status().message());
    tin.insert(tin.end(), d->begin(), d->end());
  }
  for (const auto& arg : sig.output_arg()) {
    auto d = ArgDTypes(arg, attrs);
    if (!d.ok()) return errors::InvalidArgument(label(), ": ", d.status().message());
    tout.insert(tout.end(), d->begin(), d->end());
  }
  AttrMap internal;
  for (const auto& [name, value] : node->attr()) {
    if (absl::StartsWith(name, "_")) internal[name] = value;
  }
  node->set_op(kCallOp);
  *node->mutable_attr() = internal;
  SetAttrValue(tin, &(*node->mutable_attr())["Tin"]);
  SetAttrValue(tout, &(*node->mutable_attr())["Tout"]);
  tensorflow::NameAttrList* f = (*node->mutable_attr())["f"].mutable_func();
  f->set_name(sig.name());
  *f->mutable_attr() = attrs;
  return absl::OkStatus();
}

absl::Status RewriteCallsByName(tensorflow::GraphDef* graph_def, const OpRegistry* ops) {
  if (graph_def->library().function_size() == 0) return absl::OkStatus();
  std::map<std::string, const FunctionDef*> functions;
  for (const auto& f : graph_def->library().function()) functions[f.signature().name()] = &f;
  for (NodeDef& node : *graph_def->mutable_node()) {
    if (ops->Find(node.op()) != nullptr) continue;
    auto it = functions.find(node.op());
    if (it != functions.end()) RETURN_IF_ERROR(RewriteCallByName(*it->second, &node));
  }
  return absl::OkStatus();
}

absl::Status MergeFunctionLibrary(const tensorflow::FunctionDefLibrary& src,
                                  tensorflow::FunctionDefLibrary* dst) {
  std::map<std::string, const FunctionDef*> have;
  for (const auto& f : dst->function()) have[f.signature().name()] = &f;
  std::vector<const FunctionDef*> added;
  for (const auto& f : src.function()) {
    const std::string& name = f.signature().name();
    if (name.empty()) return errors::InvalidArgument("a library function has no name");
    auto it = have.find(name);
    if (it != have.end()) {
      if (!google::protobuf::util::MessageDifferencer::Equals(*it->second, f)) {
        return errors::InvalidArgument("cannot add function '", name,
                                       "': the library already has a different function of "
                                       "that name");
      }
      continue;
    }
    have[name] = &f;
    added.push_back(&f);
  }
  for (const FunctionDef* f : added) *dst->add_function() = *f;
  for (const auto& g : src.gradient()) {
    bool seen = false;
    for (const auto& h : dst->gradient()) {
      seen |= h.function_name() == g.function_name() && h.gradient_func() == g.gradient_func();
    }
    if (!seen) *dst->add_gradient() = g;
  }
  return absl::OkStatus();
}

std::string CanonicalCallName(const tensorflow::NameAttrList& func) {
  std::vector<std::string> entries;
  for (const auto& [name, value] : func.attr()) {
    entries.push_back(absl::StrCat(name, "=",
                                   value.value_case() == AttrValue::kFunc
                                       ? CanonicalCallName(value.func())
                                       : SummarizeAttrValue(value)));
  }
  if (entries.empty()) return func.name();
  std::sort(entries.begin(), entries.end());
  return absl::StrCat(func.name(), "[", absl::StrJoin(entries, ", "), "]");
}

}  // namespace recflow
