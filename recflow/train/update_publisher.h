// Publishing a training session's model as numbered updates
// (checkpoint/update_log.h) for model servers to apply in place
// (serving/model_updates.h; docs/online_learning.md).
//
//   auto state = std::make_shared<PublishedUpdates>();
//   options.saveables.push_back(state->CheckpointSaveable());  // see below
//   hooks.push_back(std::make_unique<UpdatePublishHook>(
//       UpdatePublisherOptions{.directory = "/m/updates"}, /*every_secs=*/1, state));
//
// What an update holds: the rows of every hash embedding table of the graph
// changed after the previous update (weights, no optimizer slots) and the
// ids removed since, and the value of every dense model variable
// (TrainableVariables: no optimizer slots, no global step) whose bytes
// changed since the previous update (a Fingerprint64 per variable).
//
// The first update a publisher writes is full (every row, every variable):
// the log may hold updates of an earlier run of the trainer that no
// checkpoint reflects (it crashed after publishing them, and its restart
// trains again from an older checkpoint), and a restored table has lost the
// ids its run evicted; a full update sets every server to exactly the
// restored model, after which deltas follow. Its cost is a serving export's.
//
// Numbering. The next update is numbered one past the highest of the
// directory's updates and of the restored checkpoint's (kCheckpointUpdateKey):
// sequence numbers never repeat within a directory, even across restarts.
// The checkpoint saveable records the last update published before each
// checkpoint, so an export of that checkpoint knows which updates it
// reflects (`recflow export` writes it as the export's update base).
//
// Deletions. A table's deletion log is what makes evictions reach the
// servers; the publisher holds it from being trimmed by checkpoints
// (HashEmbeddingTable::KeepDeletionsAfter) until it has published them.
//
// Not thread-safe: publish between training steps (the hook runs in the
// training loop), so every update is one consistent model state.
#ifndef RECFLOW_TRAIN_UPDATE_PUBLISHER_H_
#define RECFLOW_TRAIN_UPDATE_PUBLISHER_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/core/threadpool.h"
#include "recflow/runtime/session.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/variables.h"

namespace recflow::train {

// The last update the model state reflects, shared by the publisher and the
// checkpoint saveable that records it. Thread-safe.
class PublishedUpdates {
 public:
  checkpoint::UpdateBase Get() const;
  void Set(const checkpoint::UpdateBase& base);
  // Whether a checkpoint restore set it.
  bool restored() const;
  // Saves {sequence, step} under kCheckpointUpdateKey and restores it (a
  // checkpoint without the key restores nothing: a run that never
  // published).
  checkpoint::Saveable CheckpointSaveable();

 private:
  mutable Mutex mu_;
  checkpoint::UpdateBase base_ ABSL_GUARDED_BY(mu_);
  bool restored_ ABSL_GUARDED_BY(mu_) = false;
};

struct UpdatePublisherOptions {
  Env* env = Env::Default();  // Not owned.
  // The update log (MODEL_DIR/updates); created if missing.
  std::string directory;
  // The dense variables to publish (node names); empty: the graph's
  // TrainableVariables() that are not hash tables.
  std::vector<std::string> variable_names;
  // Rows per chunk when copying table rows out.
  int64_t rows_per_chunk = 65536;
  // For copying table rows; null: the session's intra-op pool. Not owned.
  ThreadPool* pool = nullptr;
};

struct PublishResult {
  checkpoint::UpdateMeta meta;
  std::string prefix;  // where it was written
  int64_t rows = 0;    // table rows in it
  int64_t deleted_ids = 0;
  int64_t bytes = 0;   // of tensor data
};

// What UpdatePublishHook drives: one process's UpdatePublisher, or a
// cluster's (distributed/cluster_updates.h).
class UpdateWriter {
 public:
  virtual ~UpdateWriter() = default;
  // Writes the next update for the model as of global step `step`: full the
  // first time or when `full`, else a delta since the previous one. On
  // error nothing is published (the next call retries the same content and
  // number).
  virtual absl::StatusOr<PublishResult> Publish(int64_t step, bool full) = 0;
  absl::StatusOr<PublishResult> Publish(int64_t step) { return Publish(step, false); }
  // Records that global step `step` ended at wall-clock (Unix) `micros`; the
  // next update carries the times of its steps (kUpdateStepTimesKey) so
  // servers can measure freshness.
  virtual void NoteStepTime(int64_t step, int64_t micros) = 0;
};
using UpdateWriterFactory =
    std::function<absl::StatusOr<std::unique_ptr<UpdateWriter>>(Session* session)>;

// Keeps the step times an update has not published yet (at most the newest
// 100000): for UpdateWriter::NoteStepTime.
class StepTimes {
 public:
  void Note(int64_t step, int64_t micros);
  // {step, micros} rows for steps in (after, through], flattened.
  std::vector<int64_t> Between(int64_t after, int64_t through) const;
  // Forgets the steps up to `through` (published).
  void DropThrough(int64_t through);

 private:
  std::vector<std::pair<int64_t, int64_t>> times_;
};

// The dense variables an update publishes: the graph's TrainableVariables()
// that are not hash tables, or `names` (each must be one of those).
absl::StatusOr<std::vector<Output>> PublishedVariables(const Graph& graph,
                                                       const std::vector<std::string>& names);

class UpdatePublisher : public UpdateWriter {
 public:
  // Finds the session graph's tables and dense variables, creates the
  // directory, removes temporaries of crashed writes, and reads the
  // directory's highest sequence. `state` (not null) holds what the restored
  // checkpoint reflects and receives every publish.
  static absl::StatusOr<std::unique_ptr<UpdatePublisher>> Create(
      Session* session, const UpdatePublisherOptions& options,
      std::shared_ptr<PublishedUpdates> state);

  using UpdateWriter::Publish;
  absl::StatusOr<PublishResult> Publish(int64_t step, bool full) override;
  void NoteStepTime(int64_t step, int64_t micros) override { step_times_.Note(step, micros); }

  int64_t last_sequence() const { return last_sequence_; }
  const std::vector<std::string>& table_keys() const { return table_keys_; }
  const std::vector<std::string>& variable_keys() const { return variable_keys_; }

 private:
  struct DenseVar {
    std::string key;
    std::string container, name;
    std::optional<uint64_t> fingerprint;  // of the last published value
  };
  UpdatePublisher() = default;

  UpdatePublisherOptions options_;
  Session* session_ = nullptr;
  std::shared_ptr<PublishedUpdates> state_;
  std::vector<std::string> table_keys_;
  std::vector<std::pair<std::string, std::string>> table_locations_;  // container, name
  std::vector<std::string> variable_keys_;
  std::vector<DenseVar> vars_;
  int64_t last_sequence_ = 0;  // the directory's highest
  std::optional<int64_t> last_step_;  // of this publisher's last update
  StepTimes step_times_;
};

// Publishes every `every_secs` seconds (checked after each step), and once
// more at the end of training (End) or after a failure (the state after the
// last completed step; never after a NaN loss: SavesState()). A publish
// that fails stops training with its error unless `on_failed_publish` is
// set (then it is told and the next period retries).
class UpdatePublishHook : public SessionRunHook {
 public:
  UpdatePublishHook(UpdatePublisherOptions options, double every_secs,
                    std::shared_ptr<PublishedUpdates> state);
  // Publishes through the writer `factory` makes for the session (errors
  // name `directory`).
  UpdatePublishHook(UpdateWriterFactory factory, std::string directory, double every_secs,
                    Env* env = Env::Default());
  std::function<void(int64_t step, const absl::Status& error)> on_failed_publish;
  // Called after every publish (the progress line, tests).
  std::function<void(const PublishResult&)> on_published;

  absl::Status AfterCreateSession(Session* session, int64_t global_step) override;
  absl::Status AfterRun(SessionRunContext* context, const RunValues& values) override;
  absl::Status End(Session* session, int64_t global_step) override;
  bool SavesState() const override { return true; }

  // Says on `log` (not null) where the first update and every later full
  // one went, and any failed periodic publish (training goes on; the next
  // period retries).
  void ReportTo(std::FILE* log);

 private:
  absl::Status PublishNow(int64_t step, bool periodic);

  UpdateWriterFactory factory_;
  std::string directory_;
  Env* env_;
  double every_secs_;
  std::unique_ptr<UpdateWriter> publisher_;
  uint64_t last_micros_ = 0;
  int64_t last_step_ = -1;
};

// The hook `recflow train --publish_interval_secs` adds: publishes into
// MODEL_DIR/updates; says on `log` (may be null) where the first update went
// and any failed periodic publish (training goes on; the next period
// retries).
std::unique_ptr<UpdatePublishHook> MakeUpdatePublishHook(const std::string& model_dir,
                                                         double every_secs,
                                                         std::shared_ptr<PublishedUpdates> state,
                                                         std::FILE* log);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_UPDATE_PUBLISHER_H_
