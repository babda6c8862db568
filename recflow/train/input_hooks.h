// Hooks that bring a training step's input from outside the graph: the
// batch is read from an input pipeline in C++ and fed to the graph, as
// evaluation feeds its batches (evaluation.h) and as a distributed worker
// must (its step needs the batch's ids before the graph runs).
//
//   FeedInputHook      feeds each step the next element of a registered
//                      input iterator as "batch:0", "batch:1", ...; the end
//                      of the data ends the session (OutOfRange)
//   InputPositionHook  keeps that iterator's position in a file of its own
//                      across restarts (a distributed worker's share of the
//                      data; a local run keeps it in its checkpoints)
//
// Both find the iterator by the name it was registered under
// (data::RegisterIterator in the session's resource manager, default
// container; MonitoredSessionOptions::setup is the place), so a checkpoint
// that saves the graph's IteratorV2 of that name saves the same position.
// Not thread-safe: hooks run on the training thread.
#ifndef RECFLOW_TRAIN_INPUT_HOOKS_H_
#define RECFLOW_TRAIN_INPUT_HOOKS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "recflow/data/dataset.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/train/monitored_session.h"

namespace recflow::train {

// The feeds of one batch: {"<name>:i", batch[i]} for every component.
FeedList BatchFeeds(const data::Element& batch, const std::string& name = "batch");

// The IteratorResource registered as `name` in the session's resource
// manager (default container). NotFound naming it when absent.
absl::StatusOr<std::shared_ptr<data::IteratorResource>> FindInputIterator(
    Session* session, const std::string& name);

class FeedInputHook : public SessionRunHook {
 public:
  // Reads the iterator registered as `iterator`; feeds `feed_name`:i.
  explicit FeedInputHook(std::string iterator, std::string feed_name = "batch")
      : iterator_name_(std::move(iterator)), feed_name_(std::move(feed_name)) {}
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  // OutOfRange("End of sequence") at the end of the data; the pipeline's
  // error when reading fails.
  absl::Status BeforeRun(SessionRunContext* context, RunArgs* args) override;

 private:
  std::string iterator_name_, feed_name_;
  std::shared_ptr<data::IteratorResource> iterator_;
};

struct InputPositionOptions {
  std::string iterator;  // the registered iterator's name
  std::string path;      // the file (its directory is created)
  // The file's first line: what the position belongs to (the data, the
  // sharding, the batch size). A file with another key is ignored (and said
  // so): it was written for other data.
  std::string key;
  double every_secs = 5;  // also saved at the end and after a failure
  std::string name;       // messages start with it ("worker 1")
  std::FILE* log = stderr;  // null: quiet
};

class InputPositionHook : public SessionRunHook {
 public:
  explicit InputPositionHook(InputPositionOptions options) : options_(std::move(options)) {}
  // Restores the position from the file when it has this key.
  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  absl::Status End(Session* session, int64_t global_step) override;
  bool SavesState() const override { return true; }

 private:
  absl::Status Save();
  InputPositionOptions options_;
  std::shared_ptr<data::IteratorResource> iterator_;
  std::chrono::steady_clock::time_point last_save_;
};

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_INPUT_HOOKS_H_
