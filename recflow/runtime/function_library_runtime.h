// LocalFunctionLibraryRuntime: the FunctionLibraryRuntime a Session owns for
// its graph's function library (GraphDef.library).
//
// Instantiate turns a function plus attrs into a graph
// (framework/function_instantiation.h), runs the session's optimization
// passes over it, and builds one Executor for it, cached under the call's
// name and attrs: the same call gives the same handle. Kernels of the body
// get this runtime (OpKernelConstruction / OpKernelContext
// function_library()), so a body may call functions in turn; a function
// that calls itself, directly or through others, is an InvalidArgument
// naming the chain, found when it is instantiated.
//
// A function body runs on the thread that calls Run, all of it (its big
// kernels still split their loops over the intra-op pool). A caller that
// blocks (a call kernel on an inter-op thread, a tf.data worker) therefore
// never waits for a pool thread that may itself be blocked; callers get
// parallelism by calling concurrently (a parallel map).
//
// Lifetime: the session destroys its device (and with it every resource:
// datasets, iterators, which may hold this runtime and handles) before this
// runtime, and this runtime before its thread pools.
//
// Thread-safe: Instantiate, Run and AddLibrary may be called concurrently.
#ifndef RECFLOW_RUNTIME_FUNCTION_LIBRARY_RUNTIME_H_
#define RECFLOW_RUNTIME_FUNCTION_LIBRARY_RUNTIME_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "recflow/core/mutex.h"
#include "recflow/framework/device.h"
#include "recflow/framework/function.h"
#include "recflow/runtime/graph_optimizer.h"

namespace recflow {

class Executor;

class LocalFunctionLibraryRuntime : public FunctionLibraryRuntime {
 public:
  struct Options {
    Device* device = nullptr;  // Not owned; required. Must outlive the runtime's Runs.
    // Passes run on each instantiated body (Disabled() to run bodies as written).
    GraphOptimizerOptions optimizer;
  };

  explicit LocalFunctionLibraryRuntime(const Options& options);
  ~LocalFunctionLibraryRuntime() override;

  // Adds the functions of `library` (TensorFlow's merge rule): a function
  // already present with an identical definition is skipped; one with the
  // same name and another definition is InvalidArgument naming it, and then
  // nothing is added. Gradient entries are kept but not used.
  absl::Status AddLibrary(const tensorflow::FunctionDefLibrary& library);
  // The functions added so far, in the order added.
  tensorflow::FunctionDefLibrary ToProto() const;

  const tensorflow::FunctionDef* Find(absl::string_view name) const override;
  absl::StatusOr<Handle> Instantiate(const tensorflow::NameAttrList& func) override;
  const std::vector<DataType>& ArgTypes(Handle handle) const override;
  const std::vector<DataType>& RetTypes(Handle handle) const override;
  absl::Status Run(Handle handle, std::vector<Tensor> args, std::vector<Tensor>* rets) override;

  // Instantiations cached so far.
  int num_instantiations() const;
  // The graph the handle's executor runs (after optimization), for tests.
  absl::StatusOr<tensorflow::GraphDef> InstantiatedGraph(Handle handle) const;

 private:
  struct Item;
  const Item* GetItem(Handle handle) const;

  Options options_;
  mutable Mutex mu_;
  // unique_ptr: Find's results stay valid while functions are added.
  absl::flat_hash_map<std::string, std::unique_ptr<tensorflow::FunctionDef>> functions_
      ABSL_GUARDED_BY(mu_);
  tensorflow::FunctionDefLibrary library_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Handle> handles_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Item>> items_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> next_step_id_{1};
};

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_FUNCTION_LIBRARY_RUNTIME_H_
