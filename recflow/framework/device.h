// Device: where kernels run. Today one kind, the CPU; it owns the resources
// that kernels on it share (ResourceMgr) and lends kernels the intra-op
// thread pool for splitting big work. Thread-safe.
#ifndef RECFLOW_FRAMEWORK_DEVICE_H_
#define RECFLOW_FRAMEWORK_DEVICE_H_

#include <memory>
#include <string>

#include "recflow/core/allocator.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow {

inline constexpr char DEVICE_CPU[] = "CPU";

class Device {
 public:
  struct Options {
    // Fully qualified, as TensorFlow names devices.
    std::string name = "/job:localhost/replica:0/task:0/device:CPU:0";
    // Not owned; null means kernels run their work on the calling thread.
    ThreadPool* intra_op_pool = nullptr;
    Allocator* allocator = cpu_allocator();  // Not owned.
  };

  explicit Device(Options options)
      : options_(std::move(options)), resource_mgr_(std::make_unique<ResourceMgr>()) {}

  const std::string& name() const { return options_.name; }
  const char* device_type() const { return DEVICE_CPU; }
  ResourceMgr* resource_manager() const { return resource_mgr_.get(); }
  ThreadPool* intra_op_pool() const { return options_.intra_op_pool; }
  Allocator* allocator() const { return options_.allocator; }

 private:
  Options options_;
  std::unique_ptr<ResourceMgr> resource_mgr_;
};

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_DEVICE_H_
