// Test helper for kernel tests (here, in train/, as the module that may
// include both ops and runtime): builds a small graph over placeholders,
// feeds them and fetches what the graph builder returns. For tests only.
#ifndef RECFLOW_TRAIN_TESTING_RUN_OPS_H_
#define RECFLOW_TRAIN_TESTING_RUN_OPS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/status.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow::kernel_test {

// Given the root's "out" sub-scope and one placeholder per input.
using BuildFn = std::function<std::vector<Output>(const Scope&, std::vector<Output>)>;

// Runs build(root/out, placeholders "in0", "in1", ... fed `inputs`) in a
// session with `threads` inter- and intra-op threads; its outputs' values.
inline absl::StatusOr<std::vector<Tensor>> RunOps(const std::vector<Tensor>& inputs,
                                                  const BuildFn& build, int threads = 1) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> phs;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    phs.push_back(ops::Placeholder(root.WithOpName(name), inputs[i].dtype()));
    feeds.emplace_back(name, inputs[i]);
  }
  std::vector<Output> outs = build(root.NewSubScope("out"), phs);
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<std::string> fetches;
  for (const Output& o : outs) fetches.push_back(o.name());
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session->Run(feeds, fetches, {}, &outputs));
  return outputs;
}

}  // namespace recflow::kernel_test

#endif  // RECFLOW_TRAIN_TESTING_RUN_OPS_H_
