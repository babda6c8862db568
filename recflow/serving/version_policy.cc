#include "recflow/serving/version_policy.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace recflow::serving {

std::string VersionPolicyDecision::DebugString() const {
  return absl::StrCat("aspired {", absl::StrJoin(aspired, ","), "} load [",
                      absl::StrJoin(load, ","), "] unload [",
                      absl::StrJoin(unload, ","), "]");
}

VersionPolicyDecision DecideVersions(const ServableVersionPolicy& policy,
                                     const VersionPolicyInput& input) {
  // Candidates: on disk and not failed, ascending.
  std::vector<int64_t> candidates;
  for (int64_t v : input.on_disk) {
    if (!input.failed.contains(v)) candidates.push_back(v);
  }
  VersionPolicyDecision d;
  if (policy.has_all()) {
    d.aspired.insert(candidates.begin(), candidates.end());
  } else if (policy.has_specific()) {
    for (int64_t v : policy.specific().versions()) {
      if (std::binary_search(candidates.begin(), candidates.end(), v)) {
        d.aspired.insert(v);
      }
    }
  } else {
    const size_t n = std::max<uint32_t>(1, policy.latest().num_versions());
    for (size_t i = 0; i < n && i < candidates.size(); ++i) {
      d.aspired.insert(candidates[candidates.size() - 1 - i]);
    }
  }

  bool all_loaded = true;
  for (auto it = d.aspired.rbegin(); it != d.aspired.rend(); ++it) {
    if (input.loaded.contains(*it)) continue;
    all_loaded = false;
    if (!input.loading.contains(*it)) d.load.push_back(*it);
  }
  if (all_loaded) {
    for (int64_t v : input.loaded) {
      if (!d.aspired.contains(v)) d.unload.push_back(v);
    }
  }
  return d;
}

}  // namespace recflow::serving
