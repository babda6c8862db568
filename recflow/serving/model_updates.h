// ModelUpdater: applies a trainer's model updates (checkpoint/update_log.h)
// in place to one loaded version, without reloading or copying it
// (docs/online_learning.md).
//
//   ASSIGN_OR_RETURN(auto updater, ModelUpdater::Create(bundle, {}));
//   ASSIGN_OR_RETURN(CatchUpResult r, updater->CatchUp("/m/updates"));
//   ...
//   {
//     ModelUpdater::RequestLock hold(updater.get());  // around each request
//     RunSignature(bundle, ...);
//   }
//
// Where it starts. An export written by `recflow export` says which updates
// it already reflects (assets.extra/recflow_update_base); any other export
// reflects none (sequence 0).
//
// Applying one update, in this order:
//   1. everything is read and checked first: the metadata, every tensor's
//      crc32c, every table's and variable's dtype and shape against the
//      model. An update that fails here changes nothing (DataLoss for a
//      damaged file, InvalidArgument for one that does not fit the model:
//      a table it lacks, another embedding dim, a variable of another dtype
//      or shape). Variables the served graph does not have (a trainer's
//      extra state) are skipped and counted.
//   2. tables: the ids removed since the previous update are removed, then
//      the changed rows are written (HashEmbeddingTable::Import). Each row
//      changes atomically, under its shard's lock only: lookups of other
//      shards go on, and no lookup waits for the whole update. A full
//      update then removes the rows it does not hold.
//   3. dense variables: all of them are swapped in at once under the
//      version's state lock, which every request holds (shared) while it
//      runs: a request sees the dense variables of one update, never of
//      two. The swap replaces buffers (Var::Assign), so it takes
//      microseconds. It is taken at a moment when no request runs (polling
//      for up to 100 ms, embedding::PoliteWriterLock), so requests do not
//      queue behind a waiting swap; on a server never idle that long it
//      waits for the requests in flight, and new ones wait for it.
// A request may see rows of update N + 1 with the dense variables of N
// while an update is being applied; never half a row, never a mix of two
// updates' dense variables.
//
// Order. Update N + 1 applies only after N (FailedPrecondition naming both
// otherwise, and nothing changes): a gap would lose changes. A full update
// replaces everything, so one numbered past the applied sequence applies
// whatever lies between (CatchUp starts from the newest full update it
// finds past the applied sequence). An update already applied is skipped.
//
// Thread-safety: Apply and CatchUp are serialized (an internal mutex);
// RequestLock may be taken by any number of request threads meanwhile.
#ifndef RECFLOW_SERVING_MODEL_UPDATES_H_
#define RECFLOW_SERVING_MODEL_UPDATES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/shared_mutex.h"
#include "recflow/framework/resource_var.h"
#include "recflow/serving/prediction_api.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {

struct ModelUpdaterOptions {
  Env* env = Env::Default();  // Not owned.
  // Memory budget: a table that holds more rows than this after an update
  // drops its least recently trained rows (smallest version; ties may take
  // a few more) down to it; their ids then score as ids never seen, until
  // an update brings them back. 0: no limit.
  int64_t max_rows_per_table = 0;
};

// Removes the rows with the smallest versions (the least recently trained)
// until `table` holds at most `max_rows`; the rows of the boundary version
// all go, so it may keep fewer. Returns how many it removed.
absl::StatusOr<int64_t> TrimTableToRows(embedding::HashEmbeddingTable* table, int64_t max_rows);

// What one Apply did.
struct AppliedUpdate {
  checkpoint::UpdateMeta meta;
  int64_t rows = 0;             // table rows written
  int64_t removed = 0;          // table rows removed
  int64_t evicted = 0;          // rows dropped for max_rows_per_table
  int64_t variables = 0;        // dense variables replaced
  int64_t skipped_variables = 0;  // not in the served graph
  uint64_t applied_micros = 0;  // when it was done (Env::NowUnixMicros)
  // Freshness of its table rows (a delta carrying its step times): {seconds
  // from the end of the training step that last changed a row to
  // applied_micros, rows}, one entry per step.
  std::vector<std::pair<double, int64_t>> freshness;
};

struct CatchUpResult {
  int64_t applied = 0;     // updates applied by this call
  int64_t newest = 0;      // the highest sequence in the directory (0: none)
  std::optional<AppliedUpdate> last;  // the last one this call applied
  int64_t evicted = 0;  // AppliedUpdate::evicted, summed
  // Every applied update's AppliedUpdate::freshness.
  std::vector<std::pair<double, int64_t>> freshness;
  // Why it stopped before `newest` (OK when it did not): a damaged or
  // unfitting update, or a gap.
  absl::Status error;
};

class ModelUpdater {
 public:
  // Finds the bundle's hash embedding tables and variables, and reads the
  // export's update base. The bundle must outlive the updater.
  static absl::StatusOr<std::unique_ptr<ModelUpdater>> Create(const SavedModelBundle& bundle,
                                                              const ModelUpdaterOptions& options);

  // Applies the update at `prefix`; see the file comment. Returns nullopt
  // for an update already applied (sequence <= applied_sequence()).
  absl::StatusOr<std::optional<AppliedUpdate>> Apply(const std::string& prefix);

  // Applies the updates of `dir` after applied_sequence(), in order, until
  // the newest or the first error.
  CatchUpResult CatchUp(const std::string& dir);

  // The last update applied (the export's base before any).
  int64_t applied_sequence() const;
  // Where the version stands (GetModelStatus); never waits for an update
  // being applied.
  ModelUpdateStatus status() const;
  // Records what the last look at the log found: its newest update and why
  // catching up stopped short (OK: it did not). CatchUp calls it.
  void SetLogState(int64_t newest, const absl::Status& error);

  // The last update applied by this updater, if any.
  std::optional<AppliedUpdate> last_applied() const;

  // Held shared while a request runs (null updater: no-op).
  class ABSL_SCOPED_LOCKABLE RequestLock {
   public:
    explicit RequestLock(const ModelUpdater* updater) ABSL_NO_THREAD_SAFETY_ANALYSIS
        : mu_(updater == nullptr ? nullptr : &updater->state_mu_) {
      if (mu_ != nullptr) mu_->ReaderLock();
    }
    ~RequestLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (mu_ != nullptr) mu_->ReaderUnlock();
    }
    RequestLock(const RequestLock&) = delete;
    RequestLock& operator=(const RequestLock&) = delete;

   private:
    embedding::SharedMutex* mu_;
  };

 private:
  struct Table {
    std::string key;
    std::shared_ptr<embedding::EmbeddingTableResource> resource;
  };
  struct Variable {
    std::string key;
    std::shared_ptr<Var> var;
  };
  ModelUpdater() = default;
  CatchUpResult ApplyPending(const std::string& dir);
  absl::StatusOr<std::optional<AppliedUpdate>> ApplyLocked(const std::string& prefix)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(apply_mu_);

  ModelUpdaterOptions options_;
  std::string export_dir_;
  std::vector<Table> tables_;
  std::vector<Variable> variables_;
  mutable embedding::SharedMutex state_mu_;  // requests shared, dense swaps exclusive
  mutable Mutex apply_mu_;
  int64_t applied_ ABSL_GUARDED_BY(apply_mu_) = 0;
  std::optional<AppliedUpdate> last_ ABSL_GUARDED_BY(apply_mu_);
  mutable Mutex status_mu_;  // after apply_mu_
  ModelUpdateStatus status_ ABSL_GUARDED_BY(status_mu_);
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_MODEL_UPDATES_H_
