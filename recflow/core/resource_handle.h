// ResourceHandle: the element of a DT_RESOURCE tensor. It names a resource
// (a variable, an embedding table, an iterator ...) by device, container and
// name, the way TensorFlow's ResourceHandleProto does, and may also carry a
// direct pointer to the resource so a kernel that receives the handle need not
// look it up again. ResourceBase is the interface every resource implements;
// the ResourceMgr that owns resources by name lives in framework/.
#ifndef RECFLOW_CORE_RESOURCE_HANDLE_H_
#define RECFLOW_CORE_RESOURCE_HANDLE_H_

#include <cstdint>
#include <memory>
#include <string>

namespace recflow {

// A resource shared between kernels and steps. Lifetime is shared: the
// ResourceMgr holds one reference and every handle in flight may hold more.
// Implementations state their own thread-safety (most are thread-safe).
class ResourceBase {
 public:
  virtual ~ResourceBase() = default;
  // One line for logs and errors, e.g. "Var(float [3,4])".
  virtual std::string DebugString() const = 0;
  // Bytes held, for memory accounting; 0 when unknown.
  virtual int64_t MemoryUsed() const { return 0; }
};

class ResourceHandle {
 public:
  ResourceHandle() = default;
  ResourceHandle(std::string device, std::string container, std::string name,
                 std::string type_name)
      : device_(std::move(device)),
        container_(std::move(container)),
        name_(std::move(name)),
        type_name_(std::move(type_name)) {}

  const std::string& device() const { return device_; }
  const std::string& container() const { return container_; }
  const std::string& name() const { return name_; }
  // The C++ type of the resource it names (e.g. "recflow::Var").
  const std::string& type_name() const { return type_name_; }

  // The resource itself when the handle was made by its owner; null for a
  // handle that only names it (e.g. one decoded from a proto).
  const std::shared_ptr<ResourceBase>& resource() const { return resource_; }
  void set_resource(std::shared_ptr<ResourceBase> r) { resource_ = std::move(r); }

  std::string DebugString() const {
    return "ResourceHandle(" + container_ + "/" + name_ + ", " + type_name_ +
           (device_.empty() ? "" : ", " + device_) + ")";
  }

 private:
  std::string device_;
  std::string container_;
  std::string name_;
  std::string type_name_;
  std::shared_ptr<ResourceBase> resource_;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_RESOURCE_HANDLE_H_
