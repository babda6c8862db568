// PyGraph: the C++ half of recflow's Python Graph (recflow/framework/ops.py).
//
// Owns a recflow Graph through a root Scope, so that C++ gradient functions
// (framework/gradients.h) can add their nodes to it. Python names every node
// it adds (TensorFlow's name scopes live in Python); C++ gradient functions
// name theirs under the scope name Python gives them.
//
// Nodes are added all-or-nothing: attrs, input dtypes and the shape function
// are checked before the node is inserted, so a TypeError or ValueError at
// graph construction leaves the graph as it was. Should an insertion still
// fail halfway (a broken invariant, or a C++ gradient function that failed
// after adding half a node), the graph is marked unusable and every later
// call says why, instead of handing a session a half-built node.
//
// Node ids are recflow's (0..n-1, in the order added); Python refers to
// nodes and tensors by id and (id, output index).
//
// Thread-safety: none of its own. Every method runs with the GIL held and
// never releases it, which serializes all access from Python threads.
#ifndef RECFLOW_PYTHON_PY_GRAPH_H_
#define RECFLOW_PYTHON_PY_GRAPH_H_

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "recflow/framework/scope.h"
#include "recflow/proto/graph.pb.h"

namespace recflow {
namespace python {

class PyGraph {
 public:
  PyGraph();

  Graph* graph() const { return scope_.graph(); }

  // Adds node `name` running `op`. `inputs` has one entry per input argument
  // of the op: an (id, index) pair, or a list of pairs for a list argument.
  // Type and number attrs the inputs determine (T, N, Tlist) are derived when
  // not given. Returns (id, [output dtype numbers]).
  pybind11::tuple AddNode(const std::string& op, const std::string& name,
                          const pybind11::sequence& inputs,
                          const std::vector<int>& control_inputs,
                          const pybind11::dict& attrs,
                          const std::string& device);

  // Nodes [start, end) (end < 0: to the last) as a GraphDef, inputs written
  // from the edges.
  tensorflow::GraphDef ToGraphDef(int start, int end) const;

  // Adds the nodes of a serialized GraphDef, named prefix + "/" + name (no
  // prefix when empty). `input_map` maps tensor names of the GraphDef
  // ("x:0" or "x") to (id, index) pairs of this graph that replace them.
  // All-or-nothing: the whole import is validated first. Returns the new
  // node ids in GraphDef order.
  std::vector<int> ImportGraphDef(const std::string& serialized,
                                  const std::string& prefix,
                                  const pybind11::dict& input_map);

  // Runs the C++ gradient function registered for node `id`'s op. One
  // (id, index) gradient per output of the node (Python materializes zeros
  // for outputs that received none). Nodes are named under `scope_name`.
  // Returns one entry per input: None (no gradient), an (id, index) pair,
  // or, with `sparse` and a sparse gradient function registered,
  // ("sparse", values, indices, dense_shape) pairs for IndexedSlices.
  pybind11::list CcGradient(int id, const pybind11::sequence& grad_outputs,
                            const std::string& scope_name, bool sparse);

  // REQUIRES for the rest: 0 <= id < num_nodes() (else IndexError).
  Node* NodeAt(int id) const;
  // Throws when the graph was marked unusable.
  void CheckUsable() const;
  // The root scope of the graph, for C++ graph builders run on behalf of
  // Python (the model zoo, py_models.cc). Python names nothing they add.
  const Scope& root_scope() const { return scope_; }
  // Marks the graph unusable: a C++ builder failed after adding nodes.
  void MarkBroken(const absl::Status& cause, const std::string& node_name);

 private:
  // The checked insertion behind AddNode and ImportGraphDef. `def` carries
  // name, op, device and attrs (inputs ignored); `inputs` are the data
  // inputs in order.
  Node* InsertNode(tensorflow::NodeDef def, const std::vector<Output>& inputs,
                   const std::vector<Node*>& control_inputs,
                   bool allow_unknown_op);

  Scope scope_;
  absl::Status broken_;
};

// Registers PyGraph and the op-registry, op-library, gradient-registry and
// GraphDef functions of the module.
void RegisterGraphBindings(pybind11::module_& m);

}  // namespace python
}  // namespace recflow

#endif  // RECFLOW_PYTHON_PY_GRAPH_H_
