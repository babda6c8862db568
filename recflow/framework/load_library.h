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
// the same library again (by any spelling of its path) returns the same
// result without re-running its registrations. Errors: NotFound when there is
// no such file; InvalidArgument with the loader's message when the file is
// not a loadable library (wrong format or architecture, missing symbols) or
// when its registrations fail (an op or kernel that is already registered, a
// malformed op spec). A library whose registrations failed stays loaded and
// keeps failing; kernels it did register are not removed.
// A path without '/' names a file in the current directory. Thread-safe.
absl::StatusOr<tensorflow::OpList> LoadOpLibrary(const std::string& path);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_LOAD_LIBRARY_H_
