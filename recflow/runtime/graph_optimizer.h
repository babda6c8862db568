// Graph optimization passes a Session runs on the pruned, rewritten graph of
// each feed/fetch/target signature before it builds the executor.
//
//   GraphOptimizerStats stats;
//   RETURN_IF_ERROR(OptimizeGraph(GraphOptimizerOptions(), device, &graph_def, &stats));
//
// The input is what Session::GetOrCreateSignature makes: fed tensors are
// _Arg nodes, fetched ones feed _Retval nodes, and every node is needed by a
// fetch or target. The passes, in order (each switchable):
//
//  1. Constant folding. A node with data inputs, all of them constants
//     (Const nodes or nodes folded in this pass), that is stateless, has a
//     CPU kernel, no ref, resource or variant inputs or outputs and outputs
//     of at most max_constant_bytes each, is evaluated once (the constant
//     subgraph runs through an Executor on `device`) and replaced by a Const
//     node of the same name, carrying the control inputs of everything it
//     replaces. A folded node nobody outside the constant subgraph consumes
//     is dropped instead. Never folded: stateful ops (random ops are), _Arg /
//     _Retval, Placeholder(WithDefault), control-flow ops, ops without a
//     kernel. A multi-output node becomes one Const per consumed output
//     ("NAME/_folded_I") plus, when its name is still needed for control
//     edges, a NoOp NAME. If evaluating the constant subgraph fails, the pass
//     changes nothing, and the step reports the error when it runs.
//  2. Common-subexpression elimination. Stateless nodes with the same op,
//     attrs (defaults included), device, data inputs in order (either order
//     for commutative ops) and set of control inputs are merged into the
//     first; consumers are rewired to it. Stateful nodes, _Arg / _Retval,
//     placeholders, control flow, nodes with ref, resource or variant
//     inputs or outputs (variable reads) and constants over 64 KB (not worth
//     comparing) are never merged.
//  3. Fusion. MatMul -> BiasAdd (or Add / AddV2 with a vector of the
//     product's column count, both known statically) -> optionally one of
//     Relu, Relu6, Elu, LeakyRelu, Sigmoid, Tanh becomes one _FusedMatMul
//     node (ops/fused_ops.cc) named after the last node it replaces, when
//     each intermediate result has exactly one consumer (the next node of
//     the pattern: so a fetched intermediate, whose _Retval is a second
//     consumer, is never fused away) and no control edges out, the nodes
//     share a device, and a _FusedMatMul kernel exists for the dtype.
//  4. Int8 matmuls, only when matmul_precision is kInt8 (off by default:
//     it trades accuracy for speed, a choice for serving). A float MatMul or
//     _FusedMatMul, a not transposed, whose b is a weight (a Const, a
//     variable or a variable read, through Identity nodes) becomes a
//     _DynamicQuantizedMatMul of the same name, inputs and attrs (Note
//     [Dynamic int8 matmul] in kernels/quantized_matmul_kernels.cc). Products
//     of two activations (a two-tower model's dot products) stay float.
//
// After each pass, nodes left without consumers (they had some before) are
// removed unless they may have effects (stateful ops, ref or resource
// inputs). The graph's sinks (nodes nobody consumes: _Retval, targets) are
// never removed as dead (CSE may merge two identical ones).
//
// The passes rewrite `graph_def` in place, each all at once: on error it is
// a valid graph, what the passes before the failing one made of it. Not
// thread-safe on one GraphDef; concurrent calls on distinct GraphDefs are
// fine.
#ifndef RECFLOW_RUNTIME_GRAPH_OPTIMIZER_H_
#define RECFLOW_RUNTIME_GRAPH_OPTIMIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/framework/device.h"
#include "recflow/proto/graph.pb.h"

namespace recflow {

enum class MatMulPrecision { kFloat32, kInt8 };

struct GraphOptimizerOptions {
  bool constant_folding = true;
  bool common_subexpression_elimination = true;
  bool fusion = true;
  // A node whose output (any one of them) is bigger than this is not folded,
  // so a small expression that makes a big tensor (Fill, Tile) stays one.
  int64_t max_constant_bytes = 10 * 1024 * 1024;
  // A node whose output is bigger than this and more than 16 times the size
  // of its inputs (an expansion: Fill, Tile, BroadcastTo, ZerosLike of a
  // big shape...) is not folded either: it is cheap to compute when the
  // graph runs but costly as a constant (the Const kernel holds a second
  // copy, every later pass copies it, and a variable initialized from it
  // shares its buffer, so the first update copies it again). The zoo's
  // optimizer slots (zeros of every embedding table's shape) were 170 MB of
  // constants in the init graph, 1.5 s of passes.
  int64_t max_expansion_bytes = 1024 * 1024;
  // kInt8: pass 4 (above) computes matmuls by weights in 8-bit integers.
  MatMulPrecision matmul_precision = MatMulPrecision::kFloat32;

  // Every pass off: the executor runs the pruned graph as written. For
  // debugging a suspected optimizer problem (the environment variable
  // RECFLOW_GRAPH_OPTIMIZER=off does the same for every Session).
  static GraphOptimizerOptions Disabled() {
    GraphOptimizerOptions o;
    o.constant_folding = o.common_subexpression_elimination = o.fusion = false;
    o.matmul_precision = MatMulPrecision::kFloat32;
    return o;
  }
  bool AnyEnabled() const {
    return constant_folding || common_subexpression_elimination || fusion ||
           matmul_precision != MatMulPrecision::kFloat32;
  }
};

// What the passes did, for logs and tests.
struct GraphOptimizerStats {
  struct Pass {
    std::string name;  // "constant_folding", "cse", "fusion", "int8_matmul"
    int nodes_before = 0;
    int nodes_after = 0;  // after its dead-node cleanup
    int rewrites = 0;     // nodes folded / merged away / fused groups
    double seconds = 0;   // wall time of the pass (its dead-node cleanup included)
  };
  std::vector<Pass> passes;

  // "constant_folding: 25 -> 18 nodes (4 rewrites, 0.001 s); cse: ..."
  std::string ToString() const;
};

// Runs the enabled passes over `graph_def` in place. `device` runs the
// constant subgraphs (its intra-op pool is used; its resources are not
// touched, as only stateless ops are folded); it may be null when constant
// folding is off, and otherwise a private CPU device is used.
// `stats` may be null.
absl::Status OptimizeGraph(const GraphOptimizerOptions& options, Device* device,
                           tensorflow::GraphDef* graph_def, GraphOptimizerStats* stats = nullptr);

// "float32" / "int8" (flags and configs), and back.
absl::StatusOr<MatMulPrecision> ParseMatMulPrecision(absl::string_view name);
const char* MatMulPrecisionName(MatMulPrecision precision);

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_GRAPH_OPTIMIZER_H_
