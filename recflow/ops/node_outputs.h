// Private to ops/: the outputs of a node a builder helper just added.
#ifndef RECFLOW_OPS_NODE_OUTPUTS_H_
#define RECFLOW_OPS_NODE_OUTPUTS_H_

#include <cstdint>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// Outputs 0 .. n-1 of `node`, or n invalid Outputs when `node` is null (the
// scope recorded why), so a helper with several outputs keeps its arity.
inline std::vector<Output> NodeOutputs(Node* node, int64_t n) {
  std::vector<Output> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(node ? Output(node, static_cast<int>(i)) : Output());
  }
  return out;
}

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_NODE_OUTPUTS_H_
