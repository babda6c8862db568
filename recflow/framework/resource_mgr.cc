#include "recflow/framework/resource_mgr.h"

namespace recflow {

void ResourceMgr::Cleanup(const std::string& container) {
  std::vector<std::shared_ptr<ResourceBase>> dropped;  // destroyed outside the lock
  MutexLock lock(&mu_);
  for (auto it = resources_.begin(); it != resources_.end();) {
    if (std::get<0>(it->first) == container) {
      dropped.push_back(std::move(it->second));
      it = resources_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<std::string> ResourceMgr::DebugStrings() const {
  MutexLock lock(&mu_);
  std::vector<std::string> out;
  for (const auto& [key, r] : resources_) {
    out.push_back(absl::StrCat(std::get<0>(key), "/", std::get<2>(key), " (", std::get<1>(key),
                               "): ", r->DebugString()));
  }
  return out;
}

}  // namespace recflow
