#include "recflow/framework/versions.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow {

tensorflow::VersionDef CurrentGraphDefVersions() {
  tensorflow::VersionDef v;
  v.set_producer(kGraphDefVersion);
  v.set_min_consumer(kGraphDefVersionMinConsumer);
  return v;
}

absl::Status CheckGraphDefVersions(const tensorflow::VersionDef& versions,
                                   absl::string_view what) {
  if (versions.producer() < kGraphDefVersionMinProducer) {
    return errors::InvalidArgument(what, " producer version ", versions.producer(),
                                   " is below the oldest recflow loads (",
                                   kGraphDefVersionMinProducer, ")");
  }
  if (versions.min_consumer() > kGraphDefVersion) {
    return errors::InvalidArgument(what, " needs a reader of version ", versions.min_consumer(),
                                   " or later (min_consumer); recflow reads GraphDef version ",
                                   kGraphDefVersion, " (written by producer ",
                                   versions.producer(), ")");
  }
  for (int bad : versions.bad_consumers()) {
    if (bad == kGraphDefVersion) {
      return errors::InvalidArgument(what, " disallows reader version ", bad,
                                     " (bad_consumers), which is recflow's");
    }
  }
  return absl::OkStatus();
}

tensorflow::VersionDef MergeGraphDefVersions(const tensorflow::VersionDef& existing,
                                             const tensorflow::VersionDef& imported) {
  tensorflow::VersionDef v = existing;
  v.set_producer(std::min(existing.producer(), imported.producer()));
  v.set_min_consumer(std::max(existing.min_consumer(), imported.min_consumer()));
  for (int bad : imported.bad_consumers()) {
    if (std::find(v.bad_consumers().begin(), v.bad_consumers().end(), bad) ==
        v.bad_consumers().end()) {
      v.add_bad_consumers(bad);
    }
  }
  return v;
}

}  // namespace recflow
