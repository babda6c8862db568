#include "recflow/framework/resource_mgr.h"

#include "recflow/proto/node_def.pb.h"

namespace recflow {

ResourceLocation NodeResourceLocation(const tensorflow::NodeDef& node,
                                      const std::string& default_container) {
  auto string_attr = [&](const char* key) -> std::string {
    auto it = node.attr().find(key);
    return it == node.attr().end() ? "" : it->second.s();
  };
  ResourceLocation where{string_attr("container"), string_attr("shared_name")};
  if (where.container.empty()) where.container = default_container;
  if (where.name.empty()) where.name = node.name();
  return where;
}

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
