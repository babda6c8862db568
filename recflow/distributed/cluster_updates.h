// ClusterUpdatePublisher: the chief's side of online learning in a cluster
// (docs/online_learning.md "In a cluster"). An update is written as a
// cluster checkpoint is (cluster_checkpoint.h): every ps task writes its
// part at once (its rows of every hash table changed since its previous
// part, and the dense variables it holds; PsServer::PublishUpdate), the
// chief writes the metadata part, and the parts are merged into one bundle
// at MODEL_DIR/updates/update-SEQUENCE whose index is written last: servers
// see the whole update or none of it, in the same format as one process's
// (checkpoint/update_log.h; tables in the partitioned layout K/part_<p>/...,
// partitioned variables as V/part_<p>), under one sequence number.
//
//   ClusterUpdateOptions o;
//   o.directory = model_dir + "/updates";
//   o.num_ps = 2;
//   o.publish_part = [&](int ps, const PublishUpdateRequest& r, PublishUpdateResponse* out) {
//     return client.PublishUpdate(ps, r, out);
//   };
//   hooks.push_back(std::make_unique<train::UpdatePublishHook>(
//       ClusterUpdateWriterFactory(o), o.directory, /*every_secs=*/1));
//
// Consistency: each ps writes its part with its pushes paused, so every row
// is whole and every part is one state of its ps; the parts of one update
// are taken at about the same moment but not at one global step (the
// workers are asynchronous). Deltas are since each ps's own step at its
// previous part, so no change is missed whichever ps a worker pushed to
// while the update was written. Dense variables are published whole in
// every update (a delta does not compare them).
//
// A ps restarted since the previous update has restored an older
// checkpoint: its rows went back, and a delta would not carry them. The
// ps's state id (PublishUpdateResponse::state_id) says so, and the update
// is then written again as a full one.
//
// Numbering as one process's publisher: one past the directory's highest;
// the first update of every chief run is full. The chief's checkpoints do
// not record an update base (they are written by the ps tasks): a server
// loading an export of one starts from the log's newest full update.
//
// Not thread-safe: called between the chief's steps (UpdatePublishHook).
#ifndef RECFLOW_DISTRIBUTED_CLUSTER_UPDATES_H_
#define RECFLOW_DISTRIBUTED_CLUSTER_UPDATES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/distributed/ps_service.pb.h"
#include "recflow/train/update_publisher.h"

namespace recflow::distributed {

struct ClusterUpdateOptions {
  Env* env = Env::Default();  // Not owned.
  std::string directory;      // the update log; created if missing
  int num_ps = 1;
  // Asks ps task `ps` to write its part (an RPC in a cluster); returns once
  // the part's bundle is complete.
  std::function<absl::Status(int ps, const PublishUpdateRequest& request,
                             PublishUpdateResponse* response)>
      publish_part;
  // The hash tables (node names) and dense variables the update lists.
  std::vector<std::string> tables;
  std::vector<std::string> variables;
};

class ClusterUpdatePublisher : public train::UpdateWriter {
 public:
  // Creates the directory, removes what crashed publishes left, reads the
  // highest sequence.
  static absl::StatusOr<std::unique_ptr<ClusterUpdatePublisher>> Create(
      ClusterUpdateOptions options);

  using train::UpdateWriter::Publish;
  absl::StatusOr<train::PublishResult> Publish(int64_t step, bool full) override;
  void NoteStepTime(int64_t step, int64_t micros) override { step_times_.Note(step, micros); }

 private:
  explicit ClusterUpdatePublisher(ClusterUpdateOptions options) : options_(std::move(options)) {}
  // Aborted when a ps's state id changed in a delta (nothing published).
  absl::StatusOr<train::PublishResult> PublishOnce(int64_t step, bool full);

  ClusterUpdateOptions options_;
  int64_t last_sequence_ = 0;
  std::optional<int64_t> last_step_;   // the chief's step at its last update
  std::vector<int64_t> since_;         // per ps: its step at its last part
  std::vector<uint64_t> state_ids_;    // per ps: its state at its last part
  train::StepTimes step_times_;
};

// An UpdateWriterFactory for the chief: the tables and dense variables
// (train::PublishedVariables) come from the chief's session graph.
train::UpdateWriterFactory ClusterUpdateWriterFactory(ClusterUpdateOptions options);

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_CLUSTER_UPDATES_H_
