// Bindings for graph functions (recflow/python/recflow/framework/function.py):
// a Python graph's function library (Graph._add_function and friends) and
// the conversion of a tracing graph into a FunctionDef.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>
#include <vector>

#include "recflow/framework/function_instantiation.h"
#include "recflow/framework/graph_to_function_def.h"
#include "recflow/python/py_graph.h"
#include "recflow/python/py_status.h"

namespace py = pybind11;

namespace recflow {
namespace python {
namespace {

tensorflow::FunctionDef ParseFunctionDef(const std::string& serialized) {
  tensorflow::FunctionDef f;
  if (!f.ParseFromString(serialized) || f.signature().name().empty()) {
    throw StatusError(errors::InvalidArgument("not a serialized FunctionDef with a name (",
                                              serialized.size(), " bytes)"));
  }
  return f;
}

}  // namespace

void RegisterFunctionBindings(py::module_& m) {
  m.def(
      "graph_add_function",
      [](PyGraph& g, const py::bytes& serialized) {
        g.CheckUsable();
        tensorflow::FunctionDefLibrary add;
        *add.add_function() = ParseFunctionDef(serialized);
        tensorflow::FunctionDefLibrary lib = g.graph()->library();
        ThrowIfError(MergeFunctionLibrary(add, &lib));
        g.graph()->set_library(lib);
      },
      py::arg("graph"), py::arg("function_def"),
      "Adds a serialized FunctionDef to the graph's library; an identical "
      "function of the same name is kept, a different one is an error.");
  m.def(
      "graph_function_names",
      [](const PyGraph& g) {
        std::vector<std::string> names;
        for (const auto& f : g.graph()->library().function()) {
          names.push_back(f.signature().name());
        }
        return names;
      },
      py::arg("graph"), "Names of the graph's library functions, in the order added.");
  m.def(
      "graph_get_function",
      [](const PyGraph& g, const std::string& name) -> py::object {
        for (const auto& f : g.graph()->library().function()) {
          if (f.signature().name() == name) return py::bytes(f.SerializeAsString());
        }
        return py::none();
      },
      py::arg("graph"), py::arg("name"),
      "The serialized FunctionDef named `name`, or None.");
  m.def(
      "graph_to_function_def",
      [](const PyGraph& g, const std::string& name, const std::vector<int>& input_ids,
         const std::vector<std::string>& input_names,
         const std::vector<std::pair<int, int>>& outputs,
         const std::vector<std::string>& output_names,
         const std::vector<int>& control_output_ids, const std::string& description) {
        g.CheckUsable();
        GraphToFunctionDefOptions options;
        options.name = name;
        options.description = description;
        for (int id : input_ids) options.inputs.push_back(g.NodeAt(id));
        options.input_names = input_names;
        for (const auto& [id, index] : outputs) options.outputs.push_back({g.NodeAt(id), index});
        options.output_names = output_names;
        for (int id : control_output_ids) options.control_outputs.push_back(g.NodeAt(id));
        tensorflow::FunctionDef fdef = ValueOrThrow(GraphToFunctionDef(*g.graph(), options));
        return py::bytes(fdef.SerializeAsString());
      },
      py::arg("graph"), py::arg("name"), py::arg("input_ids"), py::arg("input_names"),
      py::arg("outputs"), py::arg("output_names"), py::arg("control_output_ids"),
      py::arg("description") = "",
      "The graph as a serialized FunctionDef: placeholders `input_ids` become "
      "the arguments, (id, index) `outputs` the results, every other node "
      "the body.");
}

}  // namespace python
}  // namespace recflow
