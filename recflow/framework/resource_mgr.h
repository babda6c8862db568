// ResourceMgr: resources (variables, embedding tables, iterators, queues)
// that outlive a step, held by container and name. Kernels find them through
// the device's ResourceMgr; a graph refers to them by handle, so the same
// graph can run against local resources or remote proxies that implement the
// same interfaces. Lifetime is shared: Lookup hands out shared_ptrs, so a
// resource deleted from the manager lives until the last user lets go.
// Thread-safe.
#ifndef RECFLOW_FRAMEWORK_RESOURCE_MGR_H_
#define RECFLOW_FRAMEWORK_RESOURCE_MGR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/mutex.h"
#include "recflow/core/resource_handle.h"
#include "recflow/core/status.h"

namespace tensorflow {
class NodeDef;
}  // namespace tensorflow

namespace recflow {

class ResourceMgr {
 public:
  explicit ResourceMgr(std::string default_container = "localhost")
      : default_container_(std::move(default_container)) {}

  const std::string& default_container() const { return default_container_; }

  // AlreadyExists when a resource of type T has that container and name.
  template <typename T>
  absl::Status Create(const std::string& container, const std::string& name,
                      std::shared_ptr<T> resource) {
    MutexLock lock(&mu_);
    auto [it, inserted] = resources_.try_emplace(Key{container, TypeName<T>(), name},
                                                 std::move(resource));
    if (!inserted) {
      return errors::AlreadyExists("resource ", container, "/", name, " of type ",
                                   TypeName<T>(), " already exists");
    }
    return absl::OkStatus();
  }

  // NotFound naming the resource when absent.
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> Lookup(const std::string& container,
                                            const std::string& name) const {
    MutexLock lock(&mu_);
    auto it = resources_.find(Key{container, TypeName<T>(), name});
    if (it == resources_.end()) {
      return errors::NotFound("resource ", container, "/", name, " of type ", TypeName<T>(),
                              " does not exist");
    }
    return std::static_pointer_cast<T>(it->second);
  }

  // Returns the existing resource, or the one `creator` makes (called at most
  // once per key, under the manager's lock: keep it cheap).
  template <typename T>
  absl::StatusOr<std::shared_ptr<T>> LookupOrCreate(
      const std::string& container, const std::string& name,
      const std::function<absl::StatusOr<std::shared_ptr<T>>()>& creator) {
    MutexLock lock(&mu_);
    Key key{container, TypeName<T>(), name};
    auto it = resources_.find(key);
    if (it != resources_.end()) return std::static_pointer_cast<T>(it->second);
    ASSIGN_OR_RETURN(std::shared_ptr<T> created, creator());
    resources_.emplace(std::move(key), created);
    return created;
  }

  template <typename T>
  absl::Status Delete(const std::string& container, const std::string& name) {
    MutexLock lock(&mu_);
    if (resources_.erase(Key{container, TypeName<T>(), name}) == 0) {
      return errors::NotFound("resource ", container, "/", name, " of type ", TypeName<T>(),
                              " does not exist");
    }
    return absl::OkStatus();
  }

  // Drops every resource in `container`.
  void Cleanup(const std::string& container);

  // "container/name (type): debug string" for every resource, sorted.
  std::vector<std::string> DebugStrings() const;

  template <typename T>
  static std::string TypeName() {
    return typeid(T).name();
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // container, type, name

  const std::string default_container_;
  mutable Mutex mu_;
  std::map<Key, std::shared_ptr<ResourceBase>> resources_ ABSL_GUARDED_BY(mu_);
};

// Where the resource of a stateful node (VariableV2, VarHandleOp,
// IteratorV2, HashEmbeddingTableOp, ...) lives, as TensorFlow's ContainerInfo
// resolves it: the node's "container" attr, else `default_container`, and
// its "shared_name" attr, else the node's name. The one rule shared by the
// kernels that create resources and the code that finds them again (savers,
// SavedModel export, ps placement).
struct ResourceLocation {
  std::string container;
  std::string name;
};
ResourceLocation NodeResourceLocation(const tensorflow::NodeDef& node,
                                      const std::string& default_container);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_RESOURCE_MGR_H_
