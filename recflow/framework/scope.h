// The C++ builder API: Scope, Output and NodeBuilder.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 16}));
//   Output w = ops::Const(root, Tensor(...));
//   Output y = ops::MatMul(root.NewSubScope("dense"), x, w);
//   RETURN_IF_ERROR(root.status());           // the first error, with the node named
//   tensorflow::GraphDef def = root.ToGraphDef().value();
//
// A Scope carries a graph, a name prefix, control dependencies and a device
// for the ops created through it. Copies share the graph and the error
// state: after the first error (bad attrs, a shape mismatch) every later op
// helper is a no-op returning an empty Output, and status() reports the
// error. Typed helpers per op live in ops/.
// Not thread-safe: build a graph from one thread.
#ifndef RECFLOW_FRAMEWORK_SCOPE_H_
#define RECFLOW_FRAMEWORK_SCOPE_H_

#include <memory>
#include <string>

#include <vector>

#include "absl/status/statusor.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/graph.h"

namespace recflow {

// One output of a node: what an op helper returns and takes.
class Output {
 public:
  Output() = default;
  Output(Node* node, int index = 0) : node_(node), index_(index) {}  // NOLINT

  Node* node() const { return node_; }
  int index() const { return index_; }
  bool valid() const { return node_ != nullptr; }
  DataType type() const { return node_ ? node_->output_type(index_) : DT_INVALID; }
  // What shape inference knows.
  PartialShape shape() const { return node_ ? node_->output_shape(index_) : PartialShape(); }
  // "node:index", the form Session::Run takes.
  std::string name() const;

 private:
  Node* node_ = nullptr;
  int index_ = 0;
};

// Builds one node: inputs, control inputs, attrs. Type and number attrs the
// op derives from its inputs (T, N, Tlist) are filled in from them when not
// set explicitly.
class NodeBuilder {
 public:
  NodeBuilder(std::string name, std::string op);

  NodeBuilder& Input(Output input);
  NodeBuilder& Input(std::vector<Output> inputs);  // a list argument
  NodeBuilder& ControlInput(Node* node);
  NodeBuilder& Device(std::string device);
  template <typename T>
  NodeBuilder& Attr(absl::string_view name, const T& value) {
    SetAttrValue(value, &(*def_.mutable_attr())[std::string(name)]);
    return *this;
  }
  NodeBuilder& Attr(absl::string_view name, std::initializer_list<int64_t> value) {
    SetAttrValue(absl::Span<const int64_t>(value.begin(), value.size()),
                 &(*def_.mutable_attr())[std::string(name)]);
    return *this;
  }

  // Adds the node to `graph`, connects it and infers its shapes.
  absl::StatusOr<Node*> Finalize(Graph* graph) const;

 private:
  struct InputArg {
    std::vector<Output> outputs;
    bool is_list = false;
  };
  tensorflow::NodeDef def_;
  std::vector<InputArg> inputs_;
  std::vector<Node*> control_inputs_;
};

class Scope {
 public:
  // A new graph and error state.
  static Scope NewRootScope();

  // Ops created through the returned scope are named `name` (under the
  // prefix), made unique: "name", "name_1", ... (TensorFlow's semantics).
  // A helper that creates several nodes should put its intermediate nodes
  // in a NewSubScope so the final node gets the name.
  Scope WithOpName(absl::string_view name) const;
  // Ops get the prefix "<prefix>/<name>/"; the sub-scope name is made
  // unique among sibling sub-scopes.
  Scope NewSubScope(absl::string_view name) const;
  // Ops created through the result run after `deps`.
  Scope WithControlDependencies(const std::vector<Output>& deps) const;
  Scope WithDevice(absl::string_view device) const;

  // Adds the node built by `builder` with this scope's control deps and
  // device. Returns null (and records the error) on failure or when the
  // scope already failed.
  Node* AddNode(NodeBuilder& builder) const;
  // The name the next op of type `op` gets: the WithOpName name, or `op`
  // made unique ("MatMul", "MatMul_1", ...), under the prefix.
  std::string GetUniqueNameForOp(absl::string_view op) const;

  Graph* graph() const;
  bool ok() const;
  absl::Status status() const;
  void UpdateStatus(const absl::Status& s) const;
  // Fails with the scope's first error, if any.
  absl::StatusOr<tensorflow::GraphDef> ToGraphDef() const;

 private:
  struct Shared;
  Scope() = default;

  std::shared_ptr<Shared> shared_;
  std::string prefix_;
  std::string op_name_;  // from WithOpName
  std::vector<Node*> control_deps_;
  std::string device_;
};

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_SCOPE_H_
