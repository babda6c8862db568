#include "recflow/framework/load_library.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_join.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// What loading one library (identified by the loader's handle, so two
// spellings of one path are the same library) produced: its ops, or the
// error its registrations hit. A library stays loaded once opened.
struct LoadResult {
  absl::Status status;
  tensorflow::OpList ops;
};

}  // namespace

absl::StatusOr<tensorflow::OpList> LoadOpLibrary(const std::string& path) {
  static Mutex mu;
  static auto* loaded = new std::map<void*, LoadResult>;
  MutexLock lock(&mu);

  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return errors::NotFound("cannot load op library '", path, "': no such file");
  }
  // dlopen searches the library path for names without a '/'; a user naming
  // a file means that file.
  const std::string resolved = path.find('/') == std::string::npos ? "./" + path : path;

  OpRegistry* ops = OpRegistry::Global();
  KernelRegistry* kernels = KernelRegistry::Global();
  const std::vector<std::string> before = ops->ListOpNames();
  const size_t op_errors_before = ops->RegistrationErrors().size();
  const size_t kernel_errors_before = kernels->RegistrationErrors().size();
  void* handle = dlopen(resolved.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return errors::InvalidArgument("cannot load op library '", path, "': ",
                                   err != nullptr ? err : "unknown loader error");
  }
  if (auto it = loaded->find(handle); it != loaded->end()) {
    dlclose(handle);  // drop the extra reference; the first load keeps it open
    if (!it->second.status.ok()) return it->second.status;
    return it->second.ops;
  }
  LoadResult result;
  std::vector<std::string> errs;
  const std::vector<std::string> op_errors = ops->RegistrationErrors();
  errs.insert(errs.end(), op_errors.begin() + op_errors_before, op_errors.end());
  const std::vector<std::string> kernel_errors = kernels->RegistrationErrors();
  errs.insert(errs.end(), kernel_errors.begin() + kernel_errors_before, kernel_errors.end());
  if (!errs.empty()) {
    result.status = errors::InvalidArgument("op library '", path, "' failed to register: ",
                                            absl::StrJoin(errs, "; "));
  } else {
    for (const std::string& name : ops->ListOpNames()) {
      if (!std::binary_search(before.begin(), before.end(), name)) {
        *result.ops.add_op() = ops->Find(name)->op_def;
      }
    }
  }
  auto& stored = (*loaded)[handle] = std::move(result);
  if (!stored.status.ok()) return stored.status;
  return stored.ops;
}

}  // namespace recflow
