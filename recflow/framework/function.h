// FunctionLibraryRuntime: how a kernel calls a function of the graph's
// library (GraphDef.library, tensorflow::FunctionDefLibrary).
//
// Kernels that take a `func` attr (StatefulPartitionedCall's `f`,
// MapDataset's `f`, InterleaveDataset's `f` ...) instantiate it once, in
// their constructor or at first use, and run it per call:
//
//   FunctionLibraryRuntime* flr = c->function_library();
//   OP_REQUIRES(c, flr != nullptr, errors::FailedPrecondition(...));
//   tensorflow::NameAttrList f;
//   OP_REQUIRES_OK(c, c->GetAttr("f", &f));
//   ASSIGN_OR_RETURN(FunctionLibraryRuntime::Handle h, flr->Instantiate(f));
//   std::vector<Tensor> rets;
//   RETURN_IF_ERROR(flr->Run(h, std::move(args), &rets));
//
// The runtime is implemented by recflow/runtime (the session owns one per
// graph library); kernels see only this interface. It outlives every kernel
// and every resource (dataset, iterator) of the session that made it, so a
// dataset may keep the pointer and a handle for as long as it lives.
#ifndef RECFLOW_FRAMEWORK_FUNCTION_H_
#define RECFLOW_FRAMEWORK_FUNCTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/dtype.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/attr_value.pb.h"
#include "recflow/proto/function.pb.h"

namespace recflow {

class FunctionLibraryRuntime {
 public:
  using Handle = int64_t;

  virtual ~FunctionLibraryRuntime() = default;

  // The library's function, or null.
  virtual const tensorflow::FunctionDef* Find(absl::string_view name) const = 0;

  // Instantiates `func.name()` with `func.attr()` bound to the function's
  // attr placeholders. The same (name, attrs) gives the same handle.
  // NotFound naming the function when the library has no such function;
  // InvalidArgument naming the function and the node when its body does
  // not make a valid graph (unknown op, bad input reference, missing attr).
  virtual absl::StatusOr<Handle> Instantiate(const tensorflow::NameAttrList& func) = 0;

  // The instantiated function's argument and result dtypes.
  virtual const std::vector<DataType>& ArgTypes(Handle handle) const = 0;
  virtual const std::vector<DataType>& RetTypes(Handle handle) const = 0;

  // Runs the function on `args` (one per argument, of ArgTypes) and sets
  // *rets to its results. InvalidArgument naming the function when the
  // arguments do not match its signature; a kernel error inside the body is
  // returned annotated with the function's name. Thread-safe: one handle may
  // run on several threads at once (a parallel map).
  virtual absl::Status Run(Handle handle, std::vector<Tensor> args,
                           std::vector<Tensor>* rets) = 0;
};

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_FUNCTION_H_
