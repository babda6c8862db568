// ClusterCheckpointer: the chief's side of a cluster checkpoint. Every ps
// task writes its own part (its dense variables and its shard of every hash
// embedding table, train/table_saveable.h "Partitioned layout") in
// parallel; the chief then merges the parts into one bundle, publishes its
// index atomically and updates the `checkpoint` state file, with the
// retention rules of checkpoint::Saver. It knows nothing of gRPC: a part is
// written by a callback (in a cluster, an RPC asking ps task p to save), so
// it is testable with plain functions.
//
//   ASSIGN_OR_RETURN(auto ckpt, ClusterCheckpointer::Create({.directory = dir}));
//   ASSIGN_OR_RETURN(std::string prefix,
//                    ckpt->Save(step, num_ps, [&](int part, const std::string& part_prefix) {
//                      return AskPsToSave(part, part_prefix);  // returns once written
//                    }));
//
// Save(step, n, write_part), in this order:
//   1. creates DIR/BASENAME-STEP_temp_<random>/ and calls write_part(p,
//      DIR/BASENAME-STEP_temp_<random>/part-<p>) for every p in [0, n), each
//      on its own thread (RunOnThreads: on the calling thread when no thread
//      can be started), and waits for all of them. A part's callback must
//      return only once a complete bundle (index included) is at its
//      part_prefix, e.g. written with a BundleWriter or a checkpoint::Saver
//      whose saveables name their keys uniquely across parts;
//   2. checkpoint::MergeBundles(parts -> DIR/BASENAME-STEP): the parts' data
//      files are renamed into DIR (so DIR and the temp dir must be on one
//      file system) and one index is written, atomically, last: the commit
//      point;
//   3. replaces DIR/checkpoint atomically to name it newest, with the
//      retained list (checkpoint::RetainCheckpoint: the newest max_to_keep);
//   4. deletes the files of checkpoints beyond that (index first; best
//      effort), then the temp dir.
// If any part fails, the save fails with that part's error (the lowest
// failing part, prefixed "part P of N"), nothing is published, and the temp
// dir is removed: the previous checkpoint stays the latest. A tensor name
// written by two parts fails the merge (InvalidArgument naming it), and
// likewise publishes nothing. A crash at any point leaves the last
// published checkpoint loadable and named by the state file; the next
// Create removes the crashed save's leftovers.
//
// A cluster checkpoint is always full (no deltas). Re-saving a step that
// already has a checkpoint replaces it non-atomically, as Saver does.
//
// Only one process may save into a directory (the chief): Create removes
// temp dirs and stray files that a concurrent save would still be writing.
//
// Thread-safe: Saves are serialized.
#ifndef RECFLOW_DISTRIBUTED_CLUSTER_CHECKPOINT_H_
#define RECFLOW_DISTRIBUTED_CLUSTER_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"

namespace recflow::distributed {

class ClusterCheckpointer {
 public:
  struct Options {
    Env* env = Env::Default();  // Not owned.
    // Where checkpoints and the state file go. Created if missing.
    std::string directory;
    // Checkpoints are DIRECTORY/BASENAME-STEP.
    std::string basename = "model.ckpt";
    // Retain the newest N checkpoints; <= 0 keeps all.
    int max_to_keep = 5;
    // fsync the merged index (and the directory). Off only for tests.
    bool sync = true;
  };

  // Writes part `part` of a checkpoint as a bundle at `part_prefix`.
  using WritePart = std::function<absl::Status(int part, const std::string& part_prefix)>;

  // InvalidArgument for an empty directory or a basename with a '/'.
  // Adopts the retained list of the directory's state file (those of its
  // checkpoints that still exist) and removes the leftovers of crashed saves:
  // temp dirs "BASENAME-*_temp_*", data files "BASENAME-*.data-*" whose
  // index is missing (a crash mid-merge), and what Saver::Create removes.
  static absl::StatusOr<std::unique_ptr<ClusterCheckpointer>> Create(Options options);

  // Saves checkpoint `step` from `num_parts` parts (see the top of this
  // file) and returns its prefix DIR/BASENAME-STEP. InvalidArgument when
  // num_parts < 1.
  absl::StatusOr<std::string> Save(int64_t step, int num_parts, const WritePart& write_part);

  // Prefixes of the retained checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;
  const Options& options() const { return options_; }

 private:
  explicit ClusterCheckpointer(Options options) : options_(std::move(options)) {}

  const Options options_;
  mutable Mutex mu_;
  checkpoint::RetainedCheckpoints retained_ ABSL_GUARDED_BY(mu_);
};

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_CLUSTER_CHECKPOINT_H_
