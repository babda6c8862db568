// TFRecord output for the synthetic dataset (recflow/data/synthetic.h):
// each row as a tf.train.Example with features
//   label    float_list  [0.0 or 1.0]
//   I1..I13  int64_list  [count]      absent when missing
//   C1..C26  bytes_list  ["68fd1e64"] absent when missing (8 hex digits)
// framed as TFRecord records (recflow/core/record_io.h).
//
// Used by synthetic_writer.cc. SerializeSyntheticExample is thread-safe; a
// sink is not.

#ifndef RECFLOW_DATA_SYNTHETIC_TFRECORD_H_
#define RECFLOW_DATA_SYNTHETIC_TFRECORD_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"
#include "recflow/data/synthetic.h"

namespace recflow::data {

// Appends framed records to a file.
class SyntheticRecordSink {
 public:
  virtual ~SyntheticRecordSink() = default;
  virtual absl::Status Write(absl::string_view record) = 0;
  virtual absl::Status Flush() = 0;
  virtual int64_t bytes_written() const = 0;
};

// False while the TFRecord writer or the Example protos are not in the
// build; then NewTfRecordSink returns Unimplemented.
bool TfRecordSinkAvailable();
// `file` is not owned and must outlive the sink.
absl::StatusOr<std::unique_ptr<SyntheticRecordSink>> NewTfRecordSink(
    WritableFile* file);

// The row as a serialized tf.train.Example (see above).
std::string SerializeSyntheticExample(const SyntheticRow& row);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_SYNTHETIC_TFRECORD_H_
