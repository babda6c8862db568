// Helpers over NodeDef + OpDef: default attrs, validation, the dtypes of a
// node's inputs and outputs, and tensor-name parsing ("node:1", "^ctrl").
#ifndef RECFLOW_FRAMEWORK_NODE_DEF_UTIL_H_
#define RECFLOW_FRAMEWORK_NODE_DEF_UTIL_H_

#include <string>

#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "recflow/core/dtype.h"
#include "recflow/proto/node_def.pb.h"
#include "recflow/proto/op_def.pb.h"

namespace recflow {

inline constexpr int kControlSlot = -1;

// A parsed tensor name: "node:3" -> {"node", 3}; "node" -> {"node", 0};
// "^node" -> {"node", kControlSlot}. Borrows the string it was parsed from.
struct TensorId {
  absl::string_view node;
  int index = 0;

  bool IsControl() const { return index == kControlSlot; }
  std::string ToString() const;
};
// InvalidArgument for an empty name, a bad index ("x:-2", "x:abc").
absl::StatusOr<TensorId> ParseTensorName(absl::string_view name);

// Adds every attr of `op_def` that has a default and is missing in `node`.
void AddDefaultsToNodeDef(const tensorflow::OpDef& op_def, tensorflow::NodeDef* node);

// Checks `node` against `op_def` (after defaults): every attr is present and
// satisfies its type, allowed values and minimum; no unknown attrs (except
// internal ones starting with '_'); the number of data inputs is right.
// Errors name the node and the attr or input at fault.
absl::Status ValidateNodeDef(const tensorflow::NodeDef& node, const tensorflow::OpDef& op_def);

// The dtypes of each input and output (ref types for Ref(...) args).
absl::Status InOutTypesForNode(const tensorflow::NodeDef& node, const tensorflow::OpDef& op_def,
                               std::vector<DataType>* inputs, std::vector<DataType>* outputs);

// For each argument name, the [begin, end) range of input/output indices it
// covers (a list argument covers several).
using NameRangeMap = absl::flat_hash_map<std::string, std::pair<int, int>>;
absl::Status NameRangesForNode(const tensorflow::NodeDef& node, const tensorflow::OpDef& op_def,
                               NameRangeMap* inputs, NameRangeMap* outputs);

// "name = Op[T=float, transpose_a=false](a, b, ^c)" for messages.
std::string SummarizeNodeDef(const tensorflow::NodeDef& node);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_NODE_DEF_UTIL_H_
