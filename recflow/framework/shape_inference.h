// Shape inference: every op registers a shape function that, given what is
// known of its inputs' shapes (and the values of constant inputs), states its
// outputs' shapes or reports why the inputs cannot work. Shape functions run
// while a graph is built or imported, so a mismatch is caught at
// construction with the node named, not at run time.
//
// InferenceContext is what a shape function sees. Not thread-safe; one per
// node per inference.
#ifndef RECFLOW_FRAMEWORK_SHAPE_INFERENCE_H_
#define RECFLOW_FRAMEWORK_SHAPE_INFERENCE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/framework/versions.h"
#include "recflow/proto/node_def.pb.h"

namespace recflow {

class InferenceContext {
 public:
  // Borrows `node_def`; it must outlive the context. input_tensors[i] is the
  // value of input i when it is a known constant, else null.
  // graph_def_version: the producer version of the graph the node is in.
  InferenceContext(const tensorflow::NodeDef& node_def,
                   std::vector<PartialShape> input_shapes,
                   std::vector<const Tensor*> input_tensors, int num_outputs,
                   int graph_def_version = kGraphDefVersion);

  const std::string& node_name() const { return node_def_.name(); }
  const std::string& op() const { return node_def_.op(); }
  const tensorflow::NodeDef& node_def() const { return node_def_; }
  // The producer version of the node's graph: a few shape rules depend on it
  // as in TensorFlow (see versions.h).
  int graph_def_version() const { return graph_def_version_; }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const PartialShape& input(int i) const { return inputs_[i]; }
  // The constant value of input i, or null when it is not known.
  const Tensor* input_tensor(int i) const { return input_tensors_[i]; }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  void set_output(int i, PartialShape shape) { outputs_[i] = std::move(shape); }
  const PartialShape& output(int i) const { return outputs_[i]; }
  const std::vector<PartialShape>& outputs() const { return outputs_; }

  template <typename T>
  absl::Status GetAttr(absl::string_view name, T* value) const {
    return GetNodeAttr(AttrSlice(node_def_), name, value);
  }

  // Input i merged with "rank r, any dims"; error names the input.
  absl::StatusOr<PartialShape> WithRank(int i, int rank) const;
  absl::StatusOr<PartialShape> WithRankAtLeast(int i, int rank) const;
  // The dimension both a and b can be (kUnknownDim if neither knows), or an
  // error naming `what`.
  absl::StatusOr<int64_t> MergeDim(int64_t a, int64_t b, absl::string_view what) const;
  // For ops whose input i is a 1-D shape tensor (Reshape, Fill, ...): the
  // shape it holds when constant, else a shape of unknown dims whose rank is
  // the input's length when known.
  absl::StatusOr<PartialShape> ShapeFromShapeTensor(int i) const;

 private:
  const tensorflow::NodeDef& node_def_;
  std::vector<PartialShape> inputs_;
  std::vector<const Tensor*> input_tensors_;
  std::vector<PartialShape> outputs_;
  int graph_def_version_;
};

using ShapeFn = std::function<absl::Status(InferenceContext*)>;

// Shape functions many ops share.
namespace shape_fns {
// Every output has input 0's shape.
absl::Status UnchangedShape(InferenceContext* c);
// Every output is a scalar.
absl::Status ScalarShape(InferenceContext* c);
// Every output's shape is unknown (for ops whose output shape depends on
// data, stated on purpose).
absl::Status UnknownShape(InferenceContext* c);
// The op has no outputs to shape.
absl::Status NoOutputs(InferenceContext* c);
// NumPy broadcasting of inputs 0 and 1 into output 0.
absl::Status BroadcastBinaryOpShape(InferenceContext* c);
// [m,k] x [k,n] honouring bool attrs transpose_a / transpose_b.
absl::Status MatMulShape(InferenceContext* c);
}  // namespace shape_fns

// Broadcasts two partial shapes by NumPy's rules; error on a definite clash.
absl::StatusOr<PartialShape> BroadcastShapes(const PartialShape& a,
                                             const PartialShape& b);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_SHAPE_INFERENCE_H_
