// Snappy decompression, for `.index` files that older TensorFlow releases
// (before 1.2) wrote with snappy-compressed blocks (the half_plus_two
// SavedModel's index is one). recflow never writes compressed blocks
// (TensorFlow itself stopped), so only decompression is offered. A thin,
// bounds-checked wrapper over Debian's libsnappy (libsnappy-dev).
//
// Thread-safe (pure functions). Input is untrusted: the declared length is
// checked against a limit before anything is allocated, and a corrupt stream
// is reported as DataLoss, never overrun.
#ifndef RECFLOW_CHECKPOINT_SNAPPY_H_
#define RECFLOW_CHECKPOINT_SNAPPY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace recflow::snappy {

// The uncompressed length the stream declares. DataLoss when the preamble is
// malformed.
absl::Status GetUncompressedLength(absl::string_view compressed,
                                   uint64_t* length);

// Decompresses `compressed` into *out (replacing its contents). DataLoss
// when the stream is corrupt or declares more than `max_length` bytes.
absl::Status Uncompress(absl::string_view compressed, std::string* out,
                        uint64_t max_length);

}  // namespace recflow::snappy

#endif  // RECFLOW_CHECKPOINT_SNAPPY_H_
