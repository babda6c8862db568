// Saver: periodic checkpoints of a model's state into a directory, with
// retention and TensorFlow's `checkpoint` state file.
//
//   std::vector<Saveable> vars = {VarSaveable(rm, {"dense/w", "", "dense/w", DT_FLOAT, {16, 1}}),
//                                 ...};
//   ASSIGN_OR_RETURN(auto saver, Saver::Create({.directory = "/ckpt"}, vars));
//   ASSIGN_OR_RETURN(std::string path, saver->Save(step));  // /ckpt/model.ckpt-<step>
//   ...
//   ASSIGN_OR_RETURN(std::string latest, LatestCheckpoint(Env::Default(), "/ckpt"));
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
//   3. deletes the files of checkpoints beyond the newest max_to_keep
//      (index first, so a half-deleted checkpoint is never listed or
//      loadable). Deletion is best effort: a failure there does not fail
//      the save, and files it leaves behind are no longer tracked.
// A crash or error at any point leaves the state file naming the last
// checkpoint that was completely written, and that checkpoint loadable.
// Temporary files of a crashed save (bundle files with ".tempstate" and
// "checkpoint.tmp.*") are removed by the next Saver::Create on the
// directory, so only one process should save into a directory.
//
// Restore(prefix) reads every saveable's value from the bundle, in parallel
// (one task per saveable) on options.restore_threads threads.
//
// Thread-safe: Save and Restore are serialized.
#ifndef RECFLOW_CHECKPOINT_SAVER_H_
#define RECFLOW_CHECKPOINT_SAVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
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
// Saves the variable's value; restore assigns it, creating the variable
// first (with `ref.dtype` and `ref.shape`) when the graph has not run yet,
// so a restore may come before any initializer. `rm` is not owned and must
// outlive the saveable. Errors name the variable: FailedPrecondition when
// saving an uninitialized one, InvalidArgument when the checkpoint's dtype
// or shape does not fit.
Saveable VarSaveable(ResourceMgr* rm, VarRef ref);

struct SaverOptions {
  Env* env = Env::Default();  // Not owned.
  // Where checkpoints and the state file go. Created if missing.
  std::string directory;
  // Checkpoints are DIRECTORY/BASENAME-STEP.
  std::string basename = "model.ckpt";
  // Retain the newest N checkpoints; <= 0 keeps all.
  int max_to_keep = 5;
  BundleWriterOptions writer;
  // Threads for parallel restores; 0: one per schedulable CPU.
  int restore_threads = 0;
};

class Saver {
 public:
  // InvalidArgument for an empty directory or duplicate saveable names.
  // Adopts the retained list of an existing state file in the directory
  // (those of its checkpoints that still exist) and removes temporary
  // files left by crashed saves.
  static absl::StatusOr<std::unique_ptr<Saver>> Create(SaverOptions options,
                                                       std::vector<Saveable> saveables);

  // Saves a checkpoint for `step` and returns its prefix.
  absl::StatusOr<std::string> Save(int64_t step);
  // Restores every saveable from the checkpoint at `prefix`. NotFound
  // naming the key when one is missing from the bundle.
  absl::Status Restore(const std::string& prefix);

  // Prefixes of the retained checkpoints, oldest first.
  std::vector<std::string> checkpoints() const;
  const SaverOptions& options() const { return options_; }

 private:
  Saver(SaverOptions options, std::vector<Saveable> saveables);
  void DeleteCheckpointFiles(const std::string& prefix);

  const SaverOptions options_;
  const std::vector<Saveable> saveables_;
  std::unique_ptr<ThreadPool> pool_;
  mutable Mutex mu_;
  std::vector<std::string> checkpoints_ ABSL_GUARDED_BY(mu_);  // absolute prefixes
};

// --- The `checkpoint` state file --------------------------------------------

inline constexpr char kCheckpointStateFilename[] = "checkpoint";

// Reads DIR/checkpoint (protobuf text, as TensorFlow writes it). Relative
// paths are kept as written. NotFound when there is no state file;
// DataLoss when it does not parse.
absl::StatusOr<tensorflow::CheckpointState> ReadCheckpointState(Env* env,
                                                                const std::string& dir);
// Replaces DIR/checkpoint atomically.
absl::Status WriteCheckpointState(Env* env, const std::string& dir,
                                  const tensorflow::CheckpointState& state);

// The prefix of the newest checkpoint in `dir` per its state file, made
// absolute when relative (tf.train.latest_checkpoint). NotFound when there
// is no state file or the checkpoint it names has no index.
absl::StatusOr<std::string> LatestCheckpoint(Env* env, const std::string& dir);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_SAVER_H_
