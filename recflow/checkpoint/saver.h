// Saver: periodic checkpoints of a model's state into a directory, with
// retention and TensorFlow's `checkpoint` state file.
//
//   std::vector<Saveable> vars = {VarSaveable(rm, {"dense/w", "", "dense/w", DT_FLOAT, {16, 1}}),
//                                 ...};
//   ASSIGN_OR_RETURN(auto saver, Saver::Create({.directory = "/ckpt"}, vars));
//   ASSIGN_OR_RETURN(std::string path, saver->Save(step));  // /ckpt/model.ckpt-<step>
//   ...
//   ASSIGN_OR_RETURN(std::string latest, LatestCheckpoint(Env::Default(), "/ckpt"));
//   // (or FindLatestCheckpoint, checkpoint_state.h, to report a recovery)
//   RETURN_IF_ERROR(saver->Restore(latest));
//
// What is saved: a list of Saveables, each a name (its key in the bundle)
// and two callbacks, one writing its value into a BundleWriter and one
// reading it back from a BundleReader. checkpoint/ sits below runtime/ and
// train/, so the Saver does not know Sessions or graph variables; it works
// on these callbacks, and helpers build them for the common cases: a
// tensor read/assign pair (TensorSaveable), a variable in a ResourceMgr
// such as a Session's device()->resource_manager() (VarSaveable), or a
// chunked export/import (say, a hash table's rows) through
// BundleWriter::AddChunks / BundleReader::ReadChunks.
//
// Save(step), in this order:
//   1. writes the bundle DIR/BASENAME-STEP (temporary names, published by
//      rename with the index last; see bundle_writer.h);
//   2. replaces DIR/checkpoint atomically (WriteStringToFileAtomically) to
//      name it as the latest, with the retained list;
//   3. deletes the files of checkpoints beyond the newest max_to_keep that
//      no retained delta needs (index first, so a half-deleted checkpoint
//      is never listed or loadable). Deletion is best effort: a failure there does not fail
//      the save, and files it leaves behind are no longer tracked.
// A crash or error at any point leaves the state file naming the last
// checkpoint that was completely written, and that checkpoint loadable.
// Temporary files of a crashed save (bundle files with ".tempstate" and
// "checkpoint.tmp.*") are removed by the next Saver::Create on the
// directory, so only one process should save into a directory.
//
// The bundle is full, or a delta of what changed since the previous save
// (SaverOptions::full_every_n_saves; Note [Incremental checkpoints]).
//
// Restore(prefix) reads every saveable's value from the bundle, in parallel
// (one task per saveable) on options.restore_threads threads, the saveables
// with the most bytes in the bundle first: a big table then starts at once
// and the small variables fill in beside it.
//
// Thread-safe: Save and Restore are serialized.
#ifndef RECFLOW_CHECKPOINT_SAVER_H_
#define RECFLOW_CHECKPOINT_SAVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/checkpoint_state.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/proto/tensor_bundle.pb.h"

namespace recflow::checkpoint {

// One piece of state the Saver saves and restores.
struct Saveable {
  // Its key in the bundle (a saveable may also add keys under "name/...").
  std::string name;
  // Adds the current value to `writer`. Called from Save's thread.
  std::function<absl::Status(BundleWriter* writer, const std::string& name)> save;
  // Sets the value from `reader`. May run on a pool thread, concurrently
  // with other saveables' restores.
  std::function<absl::Status(const BundleReader& reader, const std::string& name)> restore;

  // Incremental checkpoints (all optional; see Note [Incremental
  // checkpoints] below).
  //
  // Writes what changed since the checkpoint of `since_step` that this
  // saveable last saw committed (it may write nothing). Unset: a delta holds
  // the full value (save()).
  std::function<absl::Status(BundleWriter* writer, const std::string& name,
                             int64_t since_step)>
      save_delta;
  // Set for saveables whose deltas accumulate (a table's changed rows):
  // restoring a delta calls restore() on the full base, then restore_delta()
  // on every delta of the chain in order. Unset: deltas replace the value,
  // and restore() reads it from the newest bundle of the chain that holds
  // `name` (the base when none does).
  std::function<absl::Status(const BundleReader& reader, const std::string& name)>
      restore_delta;
  // Called after a checkpoint holding this saveable was published (bundle
  // and state file), with its step and whether it was full; a save_delta
  // compares against what was committed last.
  std::function<void(int64_t step, bool full)> committed;
};

// A saveable over a tensor getter and setter.
Saveable TensorSaveable(std::string name, std::function<absl::StatusOr<Tensor>()> read,
                        std::function<absl::Status(const Tensor&)> assign);

// Where a variable (framework's Var, as VariableV2 and VarHandleOp kernels
// hold it) lives, and what it is.
struct VarRef {
  std::string checkpoint_key;  // name in the bundle (TensorFlow: the op name)
  std::string container;       // empty: the ResourceMgr's default container
  std::string name;            // the variable's shared_name or node name
  DataType dtype = DT_INVALID;
  PartialShape shape;          // declared shape; the restored value must fit
};
// Saves the variable's value; restore assigns it (whole, or stacked from
// its row parts: ReadTensorOrParts), creating the variable
// first (with `ref.dtype` and `ref.shape`) when the graph has not run yet,
// so a restore may come before any initializer. `rm` is not owned and must
// outlive the saveable. Errors name the variable: FailedPrecondition when
// saving an uninitialized one, InvalidArgument when the checkpoint's dtype
// or shape does not fit.
//
// Deltas: the variable is written only when its content changed since the
// last committed checkpoint, detected by a Fingerprint64 of its bytes
// computed at every save (cost: one read pass over the value per save, ~1 ms
// per few MB; no extra copy is kept). A Var has no version counter, and
// keeping the saved buffer to detect copy-on-write replacement would double
// the memory of every updated variable.
Saveable VarSaveable(ResourceMgr* rm, VarRef ref);

// A fingerprint of a tensor's dtype, shape and bytes (strings: each
// element's), to tell whether a value changed without keeping a copy.
uint64_t ContentFingerprint(const Tensor& t);

// The tensor `name` of the bundle or, when the bundle has none, its row
// parts "name/part_0", "name/part_1", ... (a variable partitioned over the
// ps tasks of a cluster, docs/formats/checkpoint.md) stacked along dim 0.
// NotFound naming `name` when neither is there; InvalidArgument when the
// parts do not stack.
absl::StatusOr<Tensor> ReadTensorOrParts(const BundleReader& reader, const std::string& name);

struct SaverOptions {
  Env* env = Env::Default();  // Not owned.
  // Where checkpoints and the state file go. Created if missing.
  std::string directory;
  // Checkpoints are DIRECTORY/BASENAME-STEP.
  std::string basename = "model.ckpt";
  // Retain the newest N checkpoints; <= 0 keeps all.
  int max_to_keep = 5;
  BundleWriterOptions writer;
  // How restores read the bundles (direct I/O on by default).
  BundleReaderOptions reader;
  // Threads for parallel restores; 0: one per schedulable CPU.
  int restore_threads = 0;
  // Incremental checkpoints: every full_every_n_saves-th save is full and
  // the saves in between are deltas (1: every save is full, TensorFlow's
  // behaviour). With full_every_seconds > 0, a save is also full when the
  // last full one is at least that old. Either way the first save of a Saver
  // and the first after a Restore are full.
  int full_every_n_saves = 1;
  int64_t full_every_seconds = 0;
  // Saver::Create cleans up the directory and adopts its retained list
  // (AdoptCheckpointDir). False for a Saver that only restores (evaluation,
  // export): it leaves the directory alone, so it may read checkpoints while
  // the process that owns the directory is saving into it.
  bool adopt_directory = true;
};

// Note [Incremental checkpoints]
// A delta checkpoint is an ordinary bundle at DIR/BASENAME-STEP holding, per
// saveable, only what changed since the previous checkpoint (save_delta),
// plus the string scalar kCheckpointMetaKey naming its chain:
//   recflow incremental checkpoint v1
//   step: 40
//   since_step: 30
//   chain: model.ckpt-10      <- the full base
//   chain: model.ckpt-20
//   chain: model.ckpt-30      <- the previous checkpoint
// (prefixes relative to the delta's directory). Full checkpoints have no
// such key and are plain TensorFlow bundles. Restore(delta) opens the whole
// chain (NotFound naming a missing member) and restores every saveable as
// Saveable::restore_delta describes. The state file stays TensorFlow's: it
// names the newest checkpoint (full or delta), and its retained list holds
// the newest max_to_keep checkpoints plus every checkpoint one of them
// needs, so retention never deletes a base a retained delta depends on.
// Steps must increase: a save at the step of a checkpoint in the current
// chain is written full.
inline constexpr char kCheckpointMetaKey[] = "_recflow/checkpoint_meta";

class Saver {
 public:
  // InvalidArgument for an empty directory or duplicate saveable names.
  // Unless options.adopt_directory is false, adopts the checkpoints the
  // directory retains and removes temporary files left by crashed saves
  // (AdoptCheckpointDir).
  static absl::StatusOr<std::unique_ptr<Saver>> Create(SaverOptions options,
                                                       std::vector<Saveable> saveables);

  // Saves a checkpoint for `step` (full or delta per the options) and
  // returns its prefix.
  absl::StatusOr<std::string> Save(int64_t step);
  // Restores every saveable from the checkpoint at `prefix` (for a delta:
  // its chain). NotFound naming the key when one is missing from the
  // bundle, or naming the checkpoint when a delta's base or another chain
  // member is gone.
  absl::Status Restore(const std::string& prefix);

  // Prefixes of the retained checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;
  // Whether the last successful Save wrote a full checkpoint.
  bool last_save_was_full() const;
  const SaverOptions& options() const { return options_; }

 private:
  Saver(SaverOptions options, std::vector<Saveable> saveables);
  // Indices of saveables_, the most bytes in `reader` first (ties keep
  // their order).
  std::vector<size_t> RestoreOrder(const BundleReader& reader) const;

  // The checkpoint the next delta builds on.
  struct Last {
    std::string prefix;
    int64_t step = 0;
    std::vector<std::string> chain;  // absolute prefixes, base first, then prefix
    uint64_t full_micros = 0;        // when its base was written
  };

  const SaverOptions options_;
  const std::vector<Saveable> saveables_;
  std::unique_ptr<ThreadPool> pool_;
  mutable Mutex mu_;
  std::vector<std::string> checkpoints_ ABSL_GUARDED_BY(mu_);  // absolute prefixes
  // For each retained delta, the checkpoints it needs (absolute).
  std::map<std::string, std::vector<std::string>> deps_ ABSL_GUARDED_BY(mu_);
  std::optional<Last> last_ ABSL_GUARDED_BY(mu_);
  bool last_full_ ABSL_GUARDED_BY(mu_) = false;
};

// What a delta's kCheckpointMetaKey says.
struct DeltaInfo {
  int64_t step = 0;
  int64_t since_step = 0;
  std::vector<std::string> chain;  // absolute prefixes, base first
};
// The chain of the bundle at `prefix`'s reader: nullopt for a full
// checkpoint, DataLoss naming the bundle when the meta does not parse.
absl::StatusOr<std::optional<DeltaInfo>> ReadDeltaInfo(const BundleReader& reader);

// --- Retention and cleanup, shared with distributed::ClusterCheckpointer ------

// The checkpoints a directory retains.
struct RetainedCheckpoints {
  std::vector<std::string> prefixes;  // absolute, oldest first
  // For each retained delta, the checkpoints it needs (absolute).
  std::map<std::string, std::vector<std::string>> deps;
};

// What Saver::Create does to a directory (which must exist): removes the
// temporary files crashed saves left there ("BASENAME-*" files containing
// ".tempstate", and "checkpoint.tmp.*"), and returns the checkpoints it
// retains, with their delta chains: those its state file lists that are in
// the directory and still have an index, when the state file is usable (it
// parses and names a checkpoint there with an index); else (no state file,
// or a damaged one, from which FindLatestCheckpoint recovers) every
// BASENAME-STEP with an index, oldest first (ListCheckpoints).
absl::StatusOr<RetainedCheckpoints> AdoptCheckpointDir(Env* env, const std::string& dir,
                                                       const std::string& basename);
// Adds the just-written checkpoint `prefix` as the newest (a delta when
// `chain` is not null: the checkpoints it needs, base first) and applies
// retention: the newest max_to_keep (<= 0: all) stay, plus every checkpoint
// one of them needs; deltas built on an earlier checkpoint at `prefix` are
// dropped. Returns the dropped prefixes, whose files the caller deletes
// (DeleteCheckpointFiles) after writing the state file.
std::vector<std::string> RetainCheckpoint(RetainedCheckpoints* retained,
                                          const std::string& prefix,
                                          const std::vector<std::string>* chain,
                                          int max_to_keep);
// The state file naming `newest` and retaining `retained` (paths relative
// to `dir` when inside it).
tensorflow::CheckpointState MakeCheckpointState(const std::string& dir, const std::string& newest,
                                                const RetainedCheckpoints& retained);
// Deletes the files of the bundle at `prefix`, its index first (so a
// half-deleted checkpoint is never listed or loadable). Best effort.
void DeleteCheckpointFiles(Env* env, const std::string& prefix);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_SAVER_H_
