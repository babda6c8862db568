#include "recflow/framework/load_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "recflow/core/status.h"
#include "recflow/framework/op_registry.h"

namespace recflow {

absl::StatusOr<tensorflow::OpList> LoadOpLibrary(const std::string& path) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* loaded = new std::map<std::string, tensorflow::OpList>;
  absl::MutexLock lock(&mu);
  if (auto it = loaded->find(path); it != loaded->end()) return it->second;

  OpRegistry* registry = OpRegistry::Global();
  const std::vector<std::string> before = registry->ListOpNames();
  const size_t errors_before = registry->RegistrationErrors().size();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return errors::NotFound("cannot load op library '", path, "': ",
                            err != nullptr ? err : "unknown dlopen error");
  }
  const std::vector<std::string> reg_errors = registry->RegistrationErrors();
  if (reg_errors.size() > errors_before) {
    std::vector<std::string> mine(reg_errors.begin() + errors_before, reg_errors.end());
    return errors::InvalidArgument("op library '", path, "' failed to register: ",
                                   absl::StrJoin(mine, "; "));
  }
  tensorflow::OpList ops;
  for (const std::string& name : registry->ListOpNames()) {
    if (!std::binary_search(before.begin(), before.end(), name)) {
      *ops.add_op() = registry->Find(name)->op_def;
    }
  }
  (*loaded)[path] = ops;
  return ops;
}

}  // namespace recflow
