// Variables as training code sees them: created with an initial value
// whose initializer is recorded in the graph, so one "init" target
// initializes everything, and marked trainable or not, so an optimizer can
// find the variables to train (TensorFlow's GLOBAL_VARIABLES /
// TRAINABLE_VARIABLES collections and
// tf.compat.v1.global_variables_initializer).
//
//   Scope root = Scope::NewRootScope();
//   Output w = train::Variable(root, "w", {16, 1}, DT_FLOAT, ops::Const(root,
//   w0));
//   ...
//   Output init = train::GlobalVariablesInitializer(root);   // a NoOp named
//   "init" session->Run({}, {}, {"init"}, &out);
//
// Both variable styles are supported and may be mixed: a TF1 variable
// (VariableV2, a ref output, initialized by Assign) and a resource variable
// (VarHandleOp, a DT_RESOURCE handle, initialized by AssignVariableOp).
// Functions below take a variable as that Output (the ref or the handle).
//
// The records are attrs on the graph's nodes ("_recflow_trainable" on the
// variable, "_recflow_initializer" on its initializer, "_recflow_global_step"
// on the global step), so they survive a GraphDef round trip. TensorFlow
// ignores attrs beginning with '_'.
//
// Not thread-safe: build a graph from one thread (as Scope).
#ifndef RECFLOW_TRAIN_VARIABLES_H_
#define RECFLOW_TRAIN_VARIABLES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/hash_table_ops.h"

namespace recflow::train {

struct VariableOptions {
  // Listed by TrainableVariables() (so Minimize with no var_list trains it).
  bool trainable = true;
  // A resource variable (VarHandleOp) instead of a TF1 VariableV2.
  bool use_resource = false;
};

// Creates the variable `name` (under the scope's prefix, made unique) of
// `shape` and `dtype`, and its initializer "<name>/Assign" (Assign or
// AssignVariableOp of `initial_value`), recorded for
// GlobalVariablesInitializer(). Returns the variable (ref or handle); on
// error an invalid Output, with the error recorded in the scope.
// REQUIRES: initial_value has dtype `dtype` and fits `shape`.
Output Variable(const Scope& scope, absl::string_view name,
                const PartialShape& shape, DataType dtype, Output initial_value,
                const VariableOptions& options = {});

// A NoOp that runs every recorded initializer in the scope's graph (at the
// time of the call). Named "init" unless the scope has an op name.
Output GlobalVariablesInitializer(const Scope& scope);
// The recorded initializers, in creation order.
std::vector<Output> GlobalVariableInitializers(const Graph& graph);
// Variables created by Variable() (and optimizers' slots), in creation order.
std::vector<Output> GlobalVariables(const Graph& graph);
// Those of them created trainable, and the trainable hash tables
// (HashEmbeddingTable() above), in creation order.
std::vector<Output> TrainableVariables(const Graph& graph);

// --- Hash embedding tables as trainable state -------------------------------
//
// A hash embedding table (ops/hash_table_ops.h, embedding/) is trained like
// a variable: Optimizer::Minimize finds it through TrainableVariables(),
// differentiates the loss with respect to its handle (a sparse gradient over
// raw ids) and updates it with the optimizer's HashTableApply* op. The
// table holds its own optimizer slots, so no slot variables are created,
// and it needs no initializer (rows are created on lookup).

struct HashEmbeddingTableOptions {
  // Listed by TrainableVariables() (so Minimize with no var_list trains it).
  bool trainable = true;
};

// A HashEmbeddingTableOp node named `name` (under the scope's prefix, made
// unique) with `attrs`; attrs.shared_name empty means the node's full name.
// Returns the table handle; on error an invalid Output, with the error
// recorded in the scope.
Output HashEmbeddingTable(const Scope& scope, absl::string_view name,
                          const ops::HashEmbeddingTableAttrs& attrs,
                          const HashEmbeddingTableOptions& options = {});
// Tables created by HashEmbeddingTable(), in creation order (trainable or
// not). They are not in GlobalVariables(): a checkpoint saves them with
// train/table_saveable.h, not as variables.
std::vector<Output> HashTables(const Graph& graph);
// True for the output of a HashEmbeddingTableOp node.
bool IsHashTable(const Output& var);

// --- Working with a variable Output (ref or handle) ------------------------

// True for a resource handle (VarHandleOp output), false for a TF1 ref.
bool IsResourceVariable(const Output& var);
// InvalidArgument unless `var` is a VariableV2 or VarHandleOp output.
absl::Status CheckIsVariable(const Output& var);
// The variable's dtype (a base type, never a ref).
DataType VariableDtype(const Output& var);
// The declared shape (the node's "shape" attr).
PartialShape VariableShape(const Output& var);
// The variable's node name ("dense/w").
const std::string& VariableName(const Output& var);
// Its current value: the ref itself (read by the consumer when it runs) or
// a ReadVariableOp of the handle.
Output ReadValue(const Scope& scope, const Output& var);
// var = value (Assign or AssignVariableOp); returns the node for use as a
// target or control dependency.
Output AssignValue(const Scope& scope, const Output& var, Output value);
// var += value (AssignAdd or AssignAddVariableOp).
Output AssignAddValue(const Scope& scope, const Output& var, Output value);

// Implementation details follow.
namespace internal {
inline constexpr char kTrainableAttr[] = "_recflow_trainable";
inline constexpr char kInitializerAttr[] = "_recflow_initializer";
inline constexpr char kGlobalStepAttr[] = "_recflow_global_step";
// As Variable(), with exactly `full_name` (already made unique) and extra
// bool attrs set on the variable node.
Output CreateVariable(const Scope& scope, const std::string& full_name,
                      const PartialShape& shape, DataType dtype,
                      Output initial_value, const VariableOptions& options,
                      const std::vector<std::string>& marks = {});
}  // namespace internal

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_VARIABLES_H_
