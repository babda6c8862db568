// Custom-op libraries: a shared library whose static initializers register
// ops (REGISTER_OP), kernels (REGISTER_KERNEL_BUILDER) and gradients, loaded
// at run time. Nothing in recflow changes for it.
#ifndef RECFLOW_FRAMEWORK_LOAD_LIBRARY_H_
#define RECFLOW_FRAMEWORK_LOAD_LIBRARY_H_

#include <string>

#include "absl/status/statusor.h"
#include "recflow/proto/op_def.pb.h"

namespace recflow {

// Loads the library at `path` and returns the ops it registered. Loading
// the same path again returns the same list without reloading. Errors: the
// loader's message naming the file (missing file, missing symbols, wrong
// architecture), or the library's registration errors (an op that is
// already registered, a malformed op spec). Thread-safe.
absl::StatusOr<tensorflow::OpList> LoadOpLibrary(const std::string& path);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_LOAD_LIBRARY_H_
