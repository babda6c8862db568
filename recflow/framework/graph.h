// Graph: nodes (op instances with attrs and dtypes) joined by data edges
// (output i of one node feeds input j of another) and control edges (run
// after). Built with the builder API (scope.h) or imported from a GraphDef;
// exported back to a GraphDef with the same nodes, inputs and attrs.
//
// Nodes whose op is not registered may exist (a SavedModel carries ops a
// serving path never runs); their dtypes are unknown (DT_INVALID) and running
// one is an error that names it. Shapes are inferred as nodes are added, so a
// mismatch is caught at construction with the node named.
//
// Not thread-safe to mutate; concurrent reads of a finished graph are safe.
#ifndef RECFLOW_FRAMEWORK_GRAPH_H_
#define RECFLOW_FRAMEWORK_GRAPH_H_

#include <memory>
#include <string>

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/node_def_util.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/proto/graph.pb.h"

namespace recflow {

class Node;

struct Edge {
  Node* src;
  int src_output;  // kControlSlot for a control edge
  Node* dst;
  int dst_input;   // kControlSlot for a control edge

  bool IsControlEdge() const { return src_output == kControlSlot; }
};

class Node {
 public:
  int id() const { return id_; }
  const std::string& name() const { return def_.name(); }
  const std::string& op() const { return def_.op(); }
  // Attrs include the op's defaults; the `input` field is not kept up to
  // date (edges are the truth; Graph::ToGraphDef writes inputs from them).
  const tensorflow::NodeDef& def() const { return def_; }
  const std::string& requested_device() const { return def_.device(); }
  // Null when the op is not registered.
  const OpRegistrationData* op_reg() const { return op_reg_; }
  bool IsOpRegistered() const { return op_reg_ != nullptr; }
  bool IsStateful() const { return op_reg_ != nullptr && op_reg_->op_def.is_stateful(); }

  int num_inputs() const { return static_cast<int>(input_types_.size()); }
  int num_outputs() const { return static_cast<int>(output_types_.size()); }
  DataType input_type(int i) const { return input_types_[i]; }
  DataType output_type(int i) const { return output_types_[i]; }
  const std::vector<DataType>& input_types() const { return input_types_; }
  const std::vector<DataType>& output_types() const { return output_types_; }
  // What shape inference knows of output i (unknown until inferred).
  const PartialShape& output_shape(int i) const { return output_shapes_[i]; }

  // Data edges sorted by dst_input, then control edges.
  const std::vector<const Edge*>& in_edges() const { return in_edges_; }
  const std::vector<const Edge*>& out_edges() const { return out_edges_; }
  // The edge into data input i, or null if not connected yet.
  const Edge* input_edge(int i) const;

  // For Const nodes, the parsed value; else null.
  const Tensor* constant_value() const { return constant_.get(); }

 private:
  friend class Graph;
  Node() = default;

  int id_ = -1;
  tensorflow::NodeDef def_;
  const OpRegistrationData* op_reg_ = nullptr;  // Not owned.
  std::vector<DataType> input_types_;
  std::vector<DataType> output_types_;
  std::vector<PartialShape> output_shapes_;
  std::vector<const Edge*> in_edges_;
  std::vector<const Edge*> out_edges_;
  std::vector<const Edge*> data_inputs_;  // by input index
  std::unique_ptr<Tensor> constant_;
};

class Graph {
 public:
  explicit Graph(const OpRegistry* ops = OpRegistry::Global());
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Adds a node without edges: looks up the op, adds default attrs,
  // validates attrs and computes dtypes. The def's `input` field is ignored
  // (add edges with AddEdge). Unknown ops are accepted when
  // allow_unknown_op; their inputs take any type and their outputs appear
  // as edges refer to them.
  absl::StatusOr<Node*> AddNode(tensorflow::NodeDef def, bool allow_unknown_op = false);
  // Connects src:src_output to dst:dst_input, checking dtypes (a ref output
  // may feed a value input; the value is read).
  absl::Status AddEdge(Node* src, int src_output, Node* dst, int dst_input);
  void AddControlEdge(Node* src, Node* dst);
  // Runs the node's shape function over its inputs' inferred shapes.
  // REQUIRES: every data input is connected.
  absl::Status InferShapes(Node* node);

  Node* FindNode(absl::string_view name) const;
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  // In the order added (ids 0..n-1).
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  const OpRegistry* op_registry() const { return ops_; }

  // Nodes ordered so every node follows its inputs (data and control);
  // InvalidArgument naming nodes on a cycle otherwise.
  absl::StatusOr<std::vector<Node*>> TopologicalOrder() const;

  // A new graph has recflow's versions (versions.h); an imported one the
  // GraphDef's, whose producer decides a few shape rules.
  const tensorflow::VersionDef& versions() const { return versions_; }
  void set_versions(const tensorflow::VersionDef& v) { versions_ = v; }
  // Functions are carried through import/export; recflow does not run them.
  const tensorflow::FunctionDefLibrary& library() const { return library_; }
  void set_library(const tensorflow::FunctionDefLibrary& l) { library_ = l; }

  // Nodes in id order with inputs written from the edges.
  void ToGraphDef(tensorflow::GraphDef* graph_def) const;

 private:
  const OpRegistry* ops_;  // Not owned.
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Edge>> edges_;
  absl::flat_hash_map<std::string, Node*> by_name_;
  tensorflow::VersionDef versions_;
  tensorflow::FunctionDefLibrary library_;
};

struct GraphConstructorOptions {
  // Keep nodes whose op is not registered (they fail only if run).
  bool allow_unknown_ops = true;
  // Run shape functions (errors name the node).
  bool infer_shapes = true;
};

// Builds `graph` (which must be empty) from `graph_def`. Errors name the node
// and input at fault: unknown input nodes, bad input syntax, dtype
// mismatches, invalid attrs, duplicate names, shape errors, cycles.
absl::Status ConvertGraphDefToGraph(const GraphConstructorOptions& options,
                                    const tensorflow::GraphDef& graph_def, Graph* graph);

// True when `name` is a legal node name: [A-Za-z0-9.][A-Za-z0-9_./-]*.
bool IsValidNodeName(absl::string_view name);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_GRAPH_H_
