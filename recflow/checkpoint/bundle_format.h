// Names and constants of the tensor-bundle checkpoint format (TensorFlow's V2
// checkpoints), shared by BundleWriter and BundleReader. A bundle at prefix P
// is
//   P.index                      a table (table.h): key "" holds a
//                                BundleHeaderProto, every other key is a
//                                tensor name holding its BundleEntryProto
//   P.data-00000-of-0000N ...    N shards of raw tensor bytes
// docs/formats/checkpoint.md states the byte layout, including how string
// tensors are laid out.
#ifndef RECFLOW_CHECKPOINT_BUNDLE_FORMAT_H_
#define RECFLOW_CHECKPOINT_BUNDLE_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "recflow/core/dtype.h"
#include "recflow/core/tensor_shape.h"
#include "recflow/framework/tensor_slice_spec.h"

namespace recflow::checkpoint {

// Key of the BundleHeaderProto entry; sorts first.
inline constexpr char kHeaderEntryKey[] = "";
// Version written into the header (TensorFlow's kTensorBundleVersion) and
// the oldest producer a reader accepts.
inline constexpr int kTensorBundleVersion = 1;
inline constexpr int kTensorBundleMinProducer = 0;
inline constexpr int kTensorBundleMinConsumer = 0;

// "P.index"
std::string MetaFilename(absl::string_view prefix);
// "P.data-00003-of-00008"
std::string DataFilename(absl::string_view prefix, int shard_id, int num_shards);

// One dimension of a part of a sliced tensor: [start, start + length),
// length -1 for the whole dimension. (tensor_slice.h works on these.)
using SliceExtentInfo = ::recflow::SliceExtent;

// What the index says about one saved tensor.

struct TensorInfo {
  std::string name;
  DataType dtype = DT_INVALID;
  TensorShape shape;
  int shard_id = 0;
  uint64_t offset = 0;  // in the shard
  uint64_t size = 0;    // bytes in the shard
  uint32_t masked_crc32c = 0;
  // A tensor TensorFlow saved in parts (see tensor_slice.h): the parts'
  // extents, one vector per part; then shard_id, offset, size and crc are
  // unused. Empty for an ordinary tensor.
  std::vector<std::vector<SliceExtentInfo>> slices;
};

// Whether a tensor of `dtype` can be stored: every fixed-size type and
// string. InvalidArgument naming the tensor for resource, variant, refs.
absl::Status CheckSavableDtype(absl::string_view name, DataType dtype);

// Implementation details follow.
// Extends a string tensor's crc with one element length the way TensorFlow
// does: as a uint32 when it fits (older checkpoints stored uint32 lengths),
// else as a uint64 (little endian).
uint32_t ExtendCrcWithStringLength(uint32_t crc, uint64_t length);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_BUNDLE_FORMAT_H_
