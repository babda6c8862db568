// TensorBoard event files: scalars (loss, AUC, learning rate, examples/s),
// histograms (weights) and the graph, written as TensorFlow does so that
// `tensorboard --logdir DIR` shows them.
//
// File: LOGDIR/events.out.tfevents.<unix seconds>.<hostname>[.N][suffix]
// (.N only when a file of that name exists already, never overwritten), a
// TFRecord file (recflow/core/record_io.h: length, masked crc32c of the
// length, data, masked crc32c of the data) of tensorflow.Event protos
// (recflow/proto/event.proto). The first record is
// Event{wall_time, file_version: "brain.Event:2"}.
//
// Events are buffered by the file and reach the disk on Flush() (call it
// every few seconds or steps; the CheckpointSaver/summary hooks do) and on
// Close()/destruction. Not thread-safe: one writer per thread, or a lock.

#ifndef RECFLOW_TRAIN_SUMMARY_WRITER_H_
#define RECFLOW_TRAIN_SUMMARY_WRITER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/core/env.h"
#include "recflow/core/histogram.h"
#include "recflow/core/record_io.h"
#include "recflow/proto/event.pb.h"
#include "recflow/proto/graph.pb.h"

namespace recflow::train {

class SummaryWriter {
 public:
  // Creates LOGDIR (and parents) and a new event file in it.
  static absl::StatusOr<std::unique_ptr<SummaryWriter>> Create(
      Env* env, const std::string& logdir, const std::string& filename_suffix = "");
  ~SummaryWriter();

  absl::Status AddScalar(const std::string& tag, int64_t step, double value);
  // A histogram over TensorFlow's default buckets (core/histogram.h), with
  // min/max/num/sum/sum_squares and runs of empty buckets collapsed, as TF
  // encodes it. NaNs are skipped (counted in nothing), so a diverging weight
  // still shows what is finite.
  absl::Status AddHistogram(const std::string& tag, int64_t step,
                            absl::Span<const float> values);
  absl::Status AddGraph(const tensorflow::GraphDef& graph);
  // Writes an arbitrary event (wall_time is set when zero).
  absl::Status WriteEvent(tensorflow::Event event);

  absl::Status Flush();
  absl::Status Close();
  const std::string& path() const { return path_; }

 private:
  SummaryWriter(Env* env, std::string path, std::unique_ptr<WritableFile> file);
  Env* env_;
  std::string path_;
  std::unique_ptr<WritableFile> file_;
  std::unique_ptr<RecordWriter> writer_;
};

// The default histogram bucket limits (ascending, first -DBL_MAX, last
// DBL_MAX): histogram::DefaultBucketLimits().
const std::vector<double>& DefaultHistogramBucketLimits();

// `histo` as a tensorflow.HistogramProto (TF's encoding, empty runs collapsed).
void HistogramToProto(const histogram::Histogram& histo, tensorflow::HistogramProto* proto);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_SUMMARY_WRITER_H_
