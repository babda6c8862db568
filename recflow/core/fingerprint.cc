#include "recflow/core/fingerprint.h"

#include <farmhash.h>

namespace recflow {

uint64_t Fingerprint64(absl::string_view s) {
  return util::Fingerprint64(s.data(), s.size());
}

}  // namespace recflow
