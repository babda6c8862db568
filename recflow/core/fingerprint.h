// 64-bit fingerprints of byte strings, identical to TensorFlow's
// Fingerprint64 (farmhash's Fingerprint64, stable across platforms and
// releases). StringToHashBucketFast and the data parsers hash string ids
// with it, so hashed ids agree with TensorFlow pipelines:
//   Fingerprint64("a") % 10 == 9, ("b") % 10 == 2, ("c") % 10 == 2.

#ifndef RECFLOW_CORE_FINGERPRINT_H_
#define RECFLOW_CORE_FINGERPRINT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace recflow {

uint64_t Fingerprint64(absl::string_view s);

}  // namespace recflow

#endif  // RECFLOW_CORE_FINGERPRINT_H_
