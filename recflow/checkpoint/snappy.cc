#include "recflow/checkpoint/snappy.h"

#include <snappy.h>

#include "recflow/core/status.h"

namespace recflow::snappy {

absl::Status GetUncompressedLength(absl::string_view compressed,
                                   uint64_t* length) {
  size_t n = 0;
  if (!::snappy::GetUncompressedLength(compressed.data(), compressed.size(), &n)) {
    return errors::DataLoss("snappy: malformed length preamble in a ",
                            compressed.size(), "-byte block");
  }
  *length = n;
  return absl::OkStatus();
}

absl::Status Uncompress(absl::string_view compressed, std::string* out,
                        uint64_t max_length) {
  uint64_t length = 0;
  RETURN_IF_ERROR(GetUncompressedLength(compressed, &length));
  if (length > max_length) {
    return errors::DataLoss("snappy: block declares ", length,
                            " uncompressed bytes, more than the limit of ",
                            max_length);
  }
  if (!::snappy::IsValidCompressedBuffer(compressed.data(), compressed.size())) {
    return errors::DataLoss("snappy: corrupt compressed block of ",
                            compressed.size(), " bytes");
  }
  out->clear();
  if (!::snappy::Uncompress(compressed.data(), compressed.size(), out) ||
      out->size() != length) {
    return errors::DataLoss("snappy: corrupt compressed block of ",
                            compressed.size(), " bytes");
  }
  return absl::OkStatus();
}

}  // namespace recflow::snappy
