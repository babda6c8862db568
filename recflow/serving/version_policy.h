// The version policy: which versions of one model should be loaded and which
// unloaded, as a pure function of what is on disk, what is loaded, what is
// being loaded and what failed. The version manager (serving/
// version_manager.h) asks it after every listing and after every load; it
// has no state and no clock, so it is tested alone, case by case
// (version_policy_test.cc).
//
// Aspired versions. Among the versions on disk that have not failed, the
// model's ServableVersionPolicy picks the aspired ones:
//   latest { num_versions: N }  the N highest (N = 0, or no policy, is 1);
//   all {}                      every one;
//   specific { versions }       those listed that are on disk.
// A failed version is left out, so with latest {1} a new version that fails
// leaves the one before it aspired, and that one keeps serving.
//
// Loads. Every aspired version that is neither loaded nor being loaded,
// newest first (the newest serves soonest).
//
// Unloads. Once every aspired version is loaded, the loaded versions that are
// not aspired (left the policy, or gone from disk). Until then nothing is
// unloaded, so a model keeps serving what it has while its new versions load
// or retry (a hot swap never leaves a gap). A version that is loading but no
// longer aspired is not cancelled (a load cannot be interrupted); when it is
// published, the next decision unloads it.
//
// Labels are not part of the policy: a label names a version for requests,
// and does not keep it loaded (as in TF Serving; use `specific` for that).
//
// Thread-safety: a pure function.
#ifndef RECFLOW_SERVING_VERSION_POLICY_H_
#define RECFLOW_SERVING_VERSION_POLICY_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "recflow/proto/file_system_storage_path_source.pb.h"

namespace recflow::serving {

using ServableVersionPolicy =
    tensorflow::serving::FileSystemStoragePathSourceConfig::
        ServableVersionPolicy;

// What the policy decides from, for one model.
struct VersionPolicyInput {
  std::set<int64_t> on_disk;  // listed by the version source
  std::set<int64_t> loaded;   // published (AVAILABLE)
  std::set<int64_t> loading;  // being loaded or waiting for a load retry
  std::set<int64_t> failed;   // failed for good; never aspired
};

struct VersionPolicyDecision {
  std::set<int64_t> aspired;
  std::vector<int64_t> load;    // newest first
  std::vector<int64_t> unload;  // ascending

  bool operator==(const VersionPolicyDecision&) const = default;
  std::string DebugString() const;  // "aspired {3} load [3] unload []"
};

VersionPolicyDecision DecideVersions(const ServableVersionPolicy& policy,
                                     const VersionPolicyInput& input);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_VERSION_POLICY_H_
