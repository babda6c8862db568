#include "recflow/python/py_graph.h"

#include <google/protobuf/text_format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <deque>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/function_instantiation.h"
#include "recflow/framework/load_library.h"
#include "recflow/framework/node_def_util.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/shape_inference.h"
#include "recflow/framework/versions.h"
#include "recflow/python/py_attr_value.h"
#include "recflow/python/py_status.h"

namespace py = pybind11;
using tensorflow::GraphDef;
using tensorflow::NodeDef;
using tensorflow::OpDef;

namespace recflow {
namespace python {
namespace {

std::string Label(const NodeDef& def) {
  return absl::StrCat("node '", def.name(), "' (", def.op(), ")");
}

// A ref output may feed a value input (the value is read); unknown dtypes
// (an unregistered op on either side) match anything. As Graph::AddEdge.
bool TypesCompatible(DataType src, DataType dst) {
  if (src == DT_INVALID || dst == DT_INVALID) return true;
  if (src == dst) return true;
  return IsRefType(src) && BaseType(src) == dst;
}

py::object ShapeToPython(const PartialShape& shape) {
  if (shape.unknown_rank()) return py::none();
  py::list dims;
  for (int64_t d : shape.dims()) {
    dims.append(d == kUnknownDim ? py::object(py::none())
                                 : py::object(py::int_(d)));
  }
  return dims;
}

py::list TypesToPython(const std::vector<DataType>& types) {
  py::list out;
  for (DataType t : types) out.append(static_cast<int>(t));
  return out;
}

std::string TensorName(const Node* n, int index) {
  return index == 0 ? n->name() : absl::StrCat(n->name(), ":", index);
}

void WriteNode(const Node& n, NodeDef* def) {
  *def = n.def();
  for (const Edge* e : n.in_edges()) {
    if (e->IsControlEdge()) {
      def->add_input(absl::StrCat("^", e->src->name()));
    } else {
      def->add_input(TensorName(e->src, e->src_output));
    }
  }
}

GraphDef ParseGraphDef(const std::string& serialized) {
  GraphDef def;
  if (!def.ParseFromString(serialized)) {
    throw StatusError(errors::InvalidArgument("not a serialized GraphDef (",
                                              serialized.size(),
                                              " bytes that do not parse)"));
  }
  return def;
}

py::list OpDefsToPython(const tensorflow::OpList& ops) {
  py::list out;
  for (const auto& op : ops.op()) out.append(OpDefToPython(op));
  return out;
}

}  // namespace

PyGraph::PyGraph() : scope_(Scope::NewRootScope()) {}

Node* PyGraph::NodeAt(int id) const {
  if (id < 0 || id >= graph()->num_nodes()) {
    throw py::index_error(absl::StrCat("no node with id ", id,
                                       " (the graph has ", graph()->num_nodes(),
                                       " nodes)"));
  }
  return graph()->nodes()[id].get();
}

void PyGraph::CheckUsable() const {
  if (!broken_.ok()) {
    throw StatusError(absl::InternalError(
        absl::StrCat("this graph can no longer be used (build a new one): ",
                     broken_.message())));
  }
}

void PyGraph::MarkBroken(const absl::Status& cause,
                         const std::string& node_name) {
  if (broken_.ok()) {
    broken_ = absl::InternalError(absl::StrCat(
        "node '", node_name, "' was left half-built: ", cause.message()));
  }
}

Node* PyGraph::InsertNode(NodeDef def, const std::vector<Output>& inputs,
                          const std::vector<Node*>& control_inputs,
                          bool allow_unknown_op) {
  CheckUsable();
  Graph* g = graph();
  def.clear_input();
  for (const Output& o : inputs) def.add_input(o.name());
  const OpRegistrationData* reg = g->op_registry()->Find(def.op());
  if (reg == nullptr && !allow_unknown_op) {
    throw StatusError(
        errors::Annotate(g->op_registry()->LookUp(def.op()).status(),
                         absl::StrCat("node '", def.name(), "'")));
  }
  if (reg != nullptr) {
    // Everything Graph::AddNode, AddEdge and InferShapes check, first.
    const OpDef& op_def = reg->op_def;
    AddDefaultsToNodeDef(op_def, &def);
    ThrowIfError(ValidateNodeDef(def, op_def));
    std::vector<DataType> in_types, out_types;
    ThrowIfError(errors::Annotate(
        InOutTypesForNode(def, op_def, &in_types, &out_types), Label(def)));
    std::vector<PartialShape> shapes;
    std::vector<const Tensor*> values;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Output& o = inputs[i];
      if (!TypesCompatible(o.type(), in_types[i])) {
        throw StatusError(errors::InvalidArgument(
            "input ", i, " of ", Label(def), " expects ",
            DataTypeString(in_types[i]), " but '", o.name(), "' is ",
            DataTypeString(o.type()),
            IsRefType(in_types[i]) ? " (this input must come from a variable)"
                                   : ""));
      }
      shapes.push_back(o.shape());
      values.push_back(o.index() == 0 ? o.node()->constant_value() : nullptr);
    }
    if (reg->shape_fn) {
      InferenceContext ctx(def, shapes, values,
                           static_cast<int>(out_types.size()),
                           g->versions().producer());
      absl::Status s = reg->shape_fn(&ctx);
      if (!s.ok()) {
        std::vector<std::string> in;
        for (const PartialShape& p : shapes) in.push_back(p.DebugString());
        throw StatusError(absl::Status(
            s.code(),
            absl::StrCat(Label(def), ": ", s.message(),
                         " (input shapes: ", absl::StrJoin(in, ", "), ")")));
      }
    }
  }
  // Name checks happen in AddNode before anything is inserted.
  Node* node = ValueOrThrow(g->AddNode(def, allow_unknown_op));
  for (size_t i = 0; i < inputs.size(); ++i) {
    absl::Status s = g->AddEdge(inputs[i].node(), inputs[i].index(), node,
                                static_cast<int>(i));
    if (!s.ok()) {
      MarkBroken(s, node->name());
      throw StatusError(s);
    }
  }
  for (Node* c : control_inputs) g->AddControlEdge(c, node);
  absl::Status s = g->InferShapes(node);
  if (!s.ok()) {
    MarkBroken(s, node->name());
    throw StatusError(s);
  }
  return node;
}

py::tuple PyGraph::AddNode(const std::string& op, const std::string& name,
                           const py::sequence& inputs,
                           const std::vector<int>& control_inputs,
                           const py::dict& attrs, const std::string& device) {
  CheckUsable();
  const OpRegistrationData* reg =
      ValueOrThrow(graph()->op_registry()->LookUp(op));
  const OpDef& op_def = reg->op_def;
  NodeDef def;
  def.set_name(name);
  def.set_op(op);
  def.set_device(device);
  const std::string where = Label(def);
  if (static_cast<int>(py::len(inputs)) != op_def.input_arg_size()) {
    throw py::value_error(absl::StrCat(where, " was given ", py::len(inputs),
                                       " input arguments; the op takes ",
                                       op_def.input_arg_size()));
  }
  // Attrs given by the caller.
  auto* def_attrs = def.mutable_attr();
  for (const auto& [key, value] : attrs) {
    const std::string attr_name = py::cast<std::string>(key);
    const auto* attr_def = [&]() -> const OpDef::AttrDef* {
      for (const auto& a : op_def.attr()) {
        if (a.name() == attr_name) return &a;
      }
      return nullptr;
    }();
    const std::string attr_where =
        absl::StrCat("attr '", attr_name, "' of ", where);
    if (attr_def != nullptr) {
      (*def_attrs)[attr_name] =
          AttrValueFromPython(value, attr_def->type(), attr_where);
    } else if (!attr_name.empty() && attr_name[0] == '_') {
      (*def_attrs)[attr_name] = AttrValueFromPythonUntyped(value, attr_where);
    } else {
      std::vector<std::string> names;
      for (const auto& a : op_def.attr()) names.push_back(a.name());
      throw py::type_error(absl::StrCat(
          where, " has no attr '", attr_name, "' (its attrs: ",
          names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
    }
  }
  // Inputs, and the attrs they determine.
  std::vector<Output> flat;
  for (int k = 0; k < op_def.input_arg_size(); ++k) {
    const OpDef::ArgDef& arg = op_def.input_arg(k);
    const std::string arg_where =
        absl::StrCat("input '", arg.name(), "' of ", where);
    const bool is_list =
        !arg.number_attr().empty() || !arg.type_list_attr().empty();
    py::object item = inputs[k];
    auto to_output = [&](py::handle pair) {
      if (!py::isinstance<py::tuple>(pair) || py::len(pair) != 2) {
        throw py::type_error(
            absl::StrCat(arg_where, ": expected an (id, index) pair, got ",
                         std::string(py::repr(pair))));
      }
      py::tuple t = py::reinterpret_borrow<py::tuple>(pair);
      Node* src = NodeAt(py::cast<int>(t[0]));
      const int index = py::cast<int>(t[1]);
      if (index < 0 || (src->IsOpRegistered() && index >= src->num_outputs())) {
        throw py::index_error(absl::StrCat(arg_where, ": node '", src->name(),
                                           "' has ", src->num_outputs(),
                                           " outputs, not ", index + 1));
      }
      return Output(src, index);
    };
    std::vector<Output> outs;
    if (is_list) {
      if (!py::isinstance<py::list>(item) && !py::isinstance<py::tuple>(item)) {
        throw py::type_error(absl::StrCat(arg_where,
                                          " is a list argument; got ",
                                          std::string(py::repr(item))));
      }
      for (py::handle pair : item) outs.push_back(to_output(pair));
    } else {
      outs.push_back(to_output(item));
    }
    if (!arg.number_attr().empty() && !def_attrs->contains(arg.number_attr())) {
      (*def_attrs)[arg.number_attr()].set_i(static_cast<int64_t>(outs.size()));
    }
    if (!arg.type_attr().empty() && !def_attrs->contains(arg.type_attr()) &&
        !outs.empty()) {
      SetAttrValue(BaseType(outs[0].type()), &(*def_attrs)[arg.type_attr()]);
    }
    if (!arg.type_list_attr().empty() &&
        !def_attrs->contains(arg.type_list_attr())) {
      std::vector<DataType> types;
      for (const Output& o : outs) types.push_back(BaseType(o.type()));
      SetAttrValue(absl::MakeConstSpan(types),
                   &(*def_attrs)[arg.type_list_attr()]);
    }
    flat.insert(flat.end(), outs.begin(), outs.end());
  }
  std::vector<Node*> controls;
  for (int id : control_inputs) controls.push_back(NodeAt(id));
  Node* node =
      InsertNode(std::move(def), flat, controls, /*allow_unknown_op=*/false);
  return py::make_tuple(node->id(), TypesToPython(node->output_types()));
}

GraphDef PyGraph::ToGraphDef(int start, int end) const {
  CheckUsable();
  const int n = graph()->num_nodes();
  if (end < 0 || end > n) end = n;
  if (start < 0) start = 0;
  GraphDef def;
  for (int id = start; id < end; ++id)
    WriteNode(*graph()->nodes()[id], def.add_node());
  *def.mutable_versions() = graph()->versions();
  // The whole library goes with every slice: a session merges it (identical
  // functions are skipped).
  if (graph()->library().function_size() > 0) *def.mutable_library() = graph()->library();
  return def;
}

std::vector<int> PyGraph::ImportGraphDef(const std::string& serialized,
                                         const std::string& prefix,
                                         const py::dict& input_map) {
  CheckUsable();
  GraphDef imported = ParseGraphDef(serialized);
  ThrowIfError(errors::Annotate(CheckGraphDefVersions(imported.versions()),
                                "import_graph_def"));
  // As TensorFlow's importer: the graph takes the older producer, so the
  // imported nodes get their writer's shape rules.
  const tensorflow::VersionDef versions =
      MergeGraphDefVersions(graph()->versions(), imported.versions());
  // The imported functions join the library (checked before any change); a
  // node calling one by name (TF1's Defun) becomes a StatefulPartitionedCall.
  tensorflow::FunctionDefLibrary library = graph()->library();
  ThrowIfError(errors::Annotate(MergeFunctionLibrary(imported.library(), &library),
                                "import_graph_def"));
  if (library.function_size() > 0) {
    *imported.mutable_library() = library;
    ThrowIfError(errors::Annotate(RewriteCallsByName(&imported), "import_graph_def"));
  }
  auto new_name = [&](const std::string& name) {
    return prefix.empty() ? name : absl::StrCat(prefix, "/", name);
  };
  absl::flat_hash_map<std::string, int> index_of;  // imported name -> position
  for (int k = 0; k < imported.node_size(); ++k) {
    if (!index_of.emplace(imported.node(k).name(), k).second) {
      throw StatusError(errors::InvalidArgument(
          "the GraphDef has two nodes named '", imported.node(k).name(), "'"));
    }
  }
  std::map<std::pair<std::string, int>, Output> mapped;
  for (const auto& [key, value] : input_map) {
    const std::string name = py::cast<std::string>(key);
    auto id = ParseTensorName(name);
    if (!id.ok() || id->IsControl()) {
      throw py::value_error(
          absl::StrCat("input_map key '", name, "' is not a tensor name"));
    }
    py::tuple t = py::cast<py::tuple>(value);
    if (t.size() != 2)
      throw py::type_error("input_map values must be (id, index) pairs");
    Node* src = NodeAt(py::cast<int>(t[0]));
    const int index = py::cast<int>(t[1]);
    if (index < 0 || index >= src->num_outputs()) {
      throw py::index_error(absl::StrCat("input_map['", name, "']: node '",
                                         src->name(), "' has no output ",
                                         index));
    }
    mapped[{std::string(id->node), id->index}] = Output(src, index);
  }
  // Each imported node's inputs: an imported node (by position), or a mapped
  // tensor of this graph.
  struct Input {
    int position = -1;  // in `imported`, or -1 when mapped
    int index = 0;      // kControlSlot for a control input
    Output mapped;
  };
  std::vector<std::vector<Input>> inputs(imported.node_size());
  for (int k = 0; k < imported.node_size(); ++k) {
    const NodeDef& nd = imported.node(k);
    for (const std::string& in : nd.input()) {
      auto id = ParseTensorName(in);
      if (!id.ok()) throw StatusError(errors::Annotate(id.status(), Label(nd)));
      Input input;
      input.index = id->index;
      auto m = mapped.find({std::string(id->node), id->index});
      if (!id->IsControl() && m != mapped.end()) {
        input.mapped = m->second;
      } else if (auto it = index_of.find(id->node); it != index_of.end()) {
        input.position = it->second;
      } else {
        throw StatusError(
            errors::InvalidArgument(Label(nd), ": input '", in,
                                    "' names no node of the GraphDef (nor an "
                                    "input_map entry)"));
      }
      inputs[k].push_back(input);
    }
  }
  // Validate the whole import on a scratch graph first: all-or-nothing.
  {
    GraphDef scratch = ToGraphDef(0, -1);
    *scratch.mutable_versions() = versions;
    for (int k = 0; k < imported.node_size(); ++k) {
      NodeDef* nd = scratch.add_node();
      *nd = imported.node(k);
      nd->set_name(new_name(nd->name()));
      nd->clear_input();
      for (const Input& in : inputs[k]) {
        if (in.position < 0) {
          nd->add_input(in.mapped.name());
        } else {
          const std::string src = new_name(imported.node(in.position).name());
          nd->add_input(in.index == kControlSlot
                            ? absl::StrCat("^", src)
                            : absl::StrCat(src, ":", in.index));
        }
      }
    }
    Graph check;
    ThrowIfError(errors::Annotate(
        ConvertGraphDefToGraph(GraphConstructorOptions(), scratch, &check),
        "import_graph_def"));
  }
  // Insert in topological order.
  std::vector<int> pending(imported.node_size(), 0);
  std::vector<std::vector<int>> consumers(imported.node_size());
  for (int k = 0; k < imported.node_size(); ++k) {
    for (const Input& in : inputs[k]) {
      if (in.position >= 0) {
        ++pending[k];
        consumers[in.position].push_back(k);
      }
    }
  }
  std::deque<int> ready;
  for (int k = 0; k < imported.node_size(); ++k) {
    if (pending[k] == 0) ready.push_back(k);
  }
  std::vector<Node*> added(imported.node_size(), nullptr);
  graph()->set_versions(versions);
  while (!ready.empty()) {
    const int k = ready.front();
    ready.pop_front();
    NodeDef def = imported.node(k);
    def.set_name(new_name(def.name()));
    std::vector<Output> data;
    std::vector<Node*> controls;
    for (const Input& in : inputs[k]) {
      if (in.position < 0) {
        data.push_back(in.mapped);
      } else if (in.index == kControlSlot) {
        controls.push_back(added[in.position]);
      } else {
        data.push_back(Output(added[in.position], in.index));
      }
    }
    try {
      added[k] =
          InsertNode(std::move(def), data, controls, /*allow_unknown_op=*/true);
    } catch (const StatusError& e) {
      // The scratch import passed, so this is a broken invariant.
      MarkBroken(e.status(), new_name(imported.node(k).name()));
      throw;
    }
    for (int c : consumers[k]) {
      if (--pending[c] == 0) ready.push_back(c);
    }
  }
  graph()->set_library(library);
  std::vector<int> ids;
  for (Node* n : added) ids.push_back(n->id());
  return ids;
}

py::list PyGraph::CcGradient(int id, const py::sequence& grad_outputs,
                             const std::string& scope_name, bool sparse) {
  CheckUsable();
  Node* node = NodeAt(id);
  const std::string where = absl::StrCat("the C++ gradient of node '",
                                         node->name(), "' (", node->op(), ")");
  if (!scope_.ok()) {
    throw StatusError(absl::FailedPreconditionError(
        absl::StrCat(where,
                     " cannot run: an earlier C++ gradient function failed in "
                     "this graph, and "
                     "recflow's graph builder keeps its first error (",
                     scope_.status().message(), "); build the graph anew")));
  }
  if (static_cast<int>(py::len(grad_outputs)) != node->num_outputs()) {
    throw py::value_error(absl::StrCat(where, ": given ", py::len(grad_outputs),
                                       " output gradients for ",
                                       node->num_outputs(), " outputs"));
  }
  std::vector<Output> grads;
  for (py::handle g : grad_outputs) {
    py::tuple t = py::cast<py::tuple>(g);
    if (t.size() != 2)
      throw py::type_error("output gradients must be (id, index) pairs");
    Node* src = NodeAt(py::cast<int>(t[0]));
    const int index = py::cast<int>(t[1]);
    if (index < 0 || index >= src->num_outputs()) {
      throw py::index_error(absl::StrCat(where, ": node '", src->name(),
                                         "' has no output ", index));
    }
    grads.push_back(Output(src, index));
  }
  GradientRegistry* registry = GradientRegistry::Global();
  const SparseGradFunc* sparse_fn =
      sparse ? registry->LookupSparse(node->op()) : nullptr;
  const GradFunc* dense_fn = nullptr;
  if (sparse_fn == nullptr) {
    dense_fn = ValueOrThrow(registry->Lookup(node->op()));
    if (dense_fn == nullptr) {  // registered as not differentiable
      py::list none;
      for (int i = 0; i < node->num_inputs(); ++i) none.append(py::none());
      return none;
    }
  }
  const Scope scope = scope_.NewSubScope(scope_name);
  const int before = graph()->num_nodes();
  std::vector<GradientValue> values;
  absl::Status s;
  if (sparse_fn != nullptr) {
    s = (*sparse_fn)(scope, *node, grads, &values);
  } else {
    std::vector<Output> dense;
    s = (*dense_fn)(scope, *node, grads, &dense);
    for (const Output& o : dense) values.push_back(GradientValue(o));
  }
  if (s.ok() && !scope_.ok()) s = scope_.status();
  if (!s.ok()) {
    // Nodes the function added stay (the graph cannot remove nodes); they
    // are harmless unless one was left with an unconnected input.
    for (int n = before; n < graph()->num_nodes(); ++n) {
      const Node* added = graph()->nodes()[n].get();
      for (int i = 0; i < added->num_inputs(); ++i) {
        if (added->input_edge(i) == nullptr) MarkBroken(s, added->name());
      }
    }
    throw StatusError(errors::Annotate(s, where));
  }
  if (static_cast<int>(values.size()) != node->num_inputs()) {
    throw StatusError(errors::Internal(where, " returned ", values.size(),
                                       " gradients for ", node->num_inputs(),
                                       " inputs"));
  }
  auto pair = [](const Output& o) {
    return py::make_tuple(o.node()->id(), o.index());
  };
  py::list out;
  for (const GradientValue& v : values) {
    if (v.is_sparse()) {
      out.append(py::make_tuple("sparse", pair(v.sparse.values),
                                pair(v.sparse.indices),
                                pair(v.sparse.dense_shape)));
    } else if (v.dense.valid()) {
      out.append(pair(v.dense));
    } else {
      out.append(py::none());
    }
  }
  return out;
}

void RegisterGraphBindings(py::module_& m) {
  m.attr("GRAPH_DEF_VERSION") = kGraphDefVersion;
  m.attr("GRAPH_DEF_VERSION_MIN_PRODUCER") = kGraphDefVersionMinProducer;
  m.attr("GRAPH_DEF_VERSION_MIN_CONSUMER") = kGraphDefVersionMinConsumer;
  py::class_<PyGraph>(m, "Graph",
                      "The C++ half of a Python Graph (see py_graph.h).")
      .def(py::init<>())
      .def("add_node", &PyGraph::AddNode, py::arg("op"), py::arg("name"),
           py::arg("inputs"), py::arg("control_inputs"), py::arg("attrs"),
           py::arg("device"))
      .def("num_nodes", [](const PyGraph& g) { return g.graph()->num_nodes(); })
      .def("find_node",
           [](const PyGraph& g, const std::string& name) {
             const Node* n = g.graph()->FindNode(name);
             return n == nullptr ? -1 : n->id();
           })
      .def("node_summary",
           [](const PyGraph& g, int id) {
             const Node* n = g.NodeAt(id);
             return py::make_tuple(n->name(), n->op(), n->requested_device(),
                                   TypesToPython(n->output_types()));
           })
      .def("node_inputs",
           [](const PyGraph& g, int id) {
             const Node* n = g.NodeAt(id);
             py::list out;
             for (int i = 0; i < n->num_inputs(); ++i) {
               const Edge* e = n->input_edge(i);
               out.append(e == nullptr ? py::object(py::none())
                                       : py::object(py::make_tuple(
                                             e->src->id(), e->src_output)));
             }
             return out;
           })
      .def("node_control_inputs",
           [](const PyGraph& g, int id) {
             std::vector<int> out;
             for (const Edge* e : g.NodeAt(id)->in_edges()) {
               if (e->IsControlEdge()) out.push_back(e->src->id());
             }
             return out;
           })
      .def("node_consumers",
           [](const PyGraph& g, int id) {
             // (dst id, dst input, src output) of the data edges out of `id`.
             py::list out;
             for (const Edge* e : g.NodeAt(id)->out_edges()) {
               if (!e->IsControlEdge())
                 out.append(
                     py::make_tuple(e->dst->id(), e->dst_input, e->src_output));
             }
             return out;
           })
      .def("node_control_outputs",
           [](const PyGraph& g, int id) {
             std::vector<int> out;
             for (const Edge* e : g.NodeAt(id)->out_edges()) {
               if (e->IsControlEdge()) out.push_back(e->dst->id());
             }
             return out;
           })
      .def("node_input_types",
           [](const PyGraph& g, int id) {
             return TypesToPython(g.NodeAt(id)->input_types());
           })
      .def("node_output_shape",
           [](const PyGraph& g, int id, int index) {
             const Node* n = g.NodeAt(id);
             if (index < 0 || index >= n->num_outputs()) {
               throw py::index_error(absl::StrCat("node '", n->name(),
                                                  "' has no output ", index));
             }
             return ShapeToPython(n->output_shape(index));
           })
      .def("node_attr_names",
           [](const PyGraph& g, int id) {
             std::vector<std::string> names;
             for (const auto& [name, value] : g.NodeAt(id)->def().attr())
               names.push_back(name);
             std::sort(names.begin(), names.end());
             return names;
           })
      .def("node_attr",
           [](const PyGraph& g, int id, const std::string& name) {
             const Node* n = g.NodeAt(id);
             auto it = n->def().attr().find(name);
             if (it == n->def().attr().end()) {
               throw py::value_error(
                   absl::StrCat("Operation '", n->name(), "' (", n->op(),
                                ") has no attr named '", name, "'"));
             }
             return AttrValueToPython(it->second);
           })
      .def("node_def",
           [](const PyGraph& g, int id) {
             NodeDef def;
             WriteNode(*g.NodeAt(id), &def);
             return py::bytes(def.SerializeAsString());
           })
      .def(
          "to_graph_def",
          [](const PyGraph& g, int start, int end) {
            return py::bytes(g.ToGraphDef(start, end).SerializeAsString());
          },
          py::arg("start") = 0, py::arg("end") = -1)
      .def("versions",
           [](const PyGraph& g) {
             const tensorflow::VersionDef& v = g.graph()->versions();
             return py::make_tuple(
                 v.producer(), v.min_consumer(),
                 std::vector<int>(v.bad_consumers().begin(), v.bad_consumers().end()));
           })
      .def("import_graph_def", &PyGraph::ImportGraphDef, py::arg("graph_def"),
           py::arg("prefix"), py::arg("input_map"))
      .def("cc_gradient", &PyGraph::CcGradient, py::arg("id"),
           py::arg("grad_outputs"), py::arg("scope_name"),
           py::arg("sparse") = false);

  // The op registry.
  m.def(
      "op_names", [] { return OpRegistry::Global()->ListOpNames(); },
      "Every registered op's name, sorted.");
  m.def(
      "op_def",
      [](const std::string& name) {
        return OpDefToPython(
            ValueOrThrow(OpRegistry::Global()->LookUp(name))->op_def);
      },
      py::arg("name"),
      "One op's OpDef as plain Python data; NotFoundError when absent.");
  m.def(
      "op_defs",
      [] {
        tensorflow::OpList ops;
        OpRegistry::Global()->Export(&ops);
        return OpDefsToPython(ops);
      },
      "Every registered op's OpDef as plain Python data, sorted by name.");
  m.def(
      "load_op_library",
      [](const std::string& path) {
        return OpDefsToPython(ValueOrThrow(LoadOpLibrary(path)));
      },
      py::arg("path"),
      "Loads a custom-op library; returns the OpDefs of the ops it "
      "registered.");

  // The C++ gradient registry.
  m.def(
      "cc_gradient_kind",
      [](const std::string& op) -> std::string {
        auto fn = GradientRegistry::Global()->Lookup(op);
        if (!fn.ok()) return "missing";
        return *fn == nullptr ? "none" : "dense";
      },
      py::arg("op"),
      "'dense' (a gradient function), 'none' (registered as not "
      "differentiable) or "
      "'missing'.");
  m.def(
      "cc_has_sparse_gradient",
      [](const std::string& op) {
        return GradientRegistry::Global()->LookupSparse(op) != nullptr;
      },
      py::arg("op"));
  m.def("cc_gradient_ops",
        [] { return GradientRegistry::Global()->ListOps(); });

  // GraphDef helpers (no Python protobuf needed).
  m.def(
      "graph_def_to_text",
      [](const py::bytes& serialized) {
        const GraphDef def = ParseGraphDef(serialized);
        std::string text;
        google::protobuf::TextFormat::PrintToString(def, &text);
        return text;
      },
      py::arg("graph_def"));
  m.def(
      "graph_def_from_text",
      [](const std::string& text) {
        GraphDef def;
        if (!google::protobuf::TextFormat::ParseFromString(text, &def)) {
          throw StatusError(
              errors::InvalidArgument("not a GraphDef in text format"));
        }
        return py::bytes(def.SerializeAsString());
      },
      py::arg("text"));
  m.def(
      "graph_def_nodes",
      [](const py::bytes& serialized) {
        const GraphDef def = ParseGraphDef(serialized);
        py::list out;
        for (const NodeDef& n : def.node()) {
          std::vector<std::string> in(n.input().begin(), n.input().end());
          out.append(py::make_tuple(n.name(), n.op(), in, n.device()));
        }
        return out;
      },
      py::arg("graph_def"), "(name, op, inputs, device) of each node.");
}

}  // namespace python
}  // namespace recflow
