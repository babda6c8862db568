// The `checkpoint` state file (TensorFlow's CheckpointState in protobuf
// text) and the one rule that finds the checkpoint of a directory that a
// run resumes from, which training, evaluation, export and `recflow ckpt`
// share (FindLatestCheckpoint).
//
// Note [Finding the latest checkpoint]
// FindLatestCheckpoint(dir) returns, in this order:
//   1. the checkpoint the state file DIR/checkpoint names, when the file is
//      usable: it parses, its model_checkpoint_path is not empty and lies
//      inside DIR (a relative path without "..", or an absolute one under
//      DIR: TensorFlow writes those), and that checkpoint is intact (its
//      index opens, its data files exist, a delta's chain has its members);
//   2. otherwise the newest intact checkpoint DIR/BASENAME-STEP (highest
//      STEP), with `recovery` saying why the state file was not used, for the
//      caller to report ("resumed from a recovered checkpoint" is never
//      silent);
//   3. otherwise an error: NotFound when DIR has neither a state file nor a
//      checkpoint (a fresh start), DataLoss when it has a state file it
//      cannot use, or damaged checkpoints, and nothing intact (the message
//      says what is wrong and that removing the state file starts over).
// A path outside DIR (say "/etc/passwd", or "../other/model.ckpt-5") is
// never opened: the state file is taken as damaged.
//
// TensorFlow differs here on purpose: tf.train.get_checkpoint_state logs and
// ignores a state file that does not parse, and tf.train.latest_checkpoint
// returns None when the named checkpoint is missing, so a restarted TF job
// trains from scratch beside its old checkpoints and later overwrites them.
// A state file written by TensorFlow that is usable is read the same way
// (absolute paths under DIR included).
#ifndef RECFLOW_CHECKPOINT_CHECKPOINT_STATE_H_
#define RECFLOW_CHECKPOINT_CHECKPOINT_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/proto/tensor_bundle.pb.h"

namespace recflow::checkpoint {

inline constexpr char kCheckpointStateFilename[] = "checkpoint";
inline constexpr char kDefaultCheckpointBasename[] = "model.ckpt";

// Reads DIR/checkpoint (protobuf text, as TensorFlow writes it). Relative
// paths are kept as written. NotFound when there is no state file;
// DataLoss when it does not parse.
absl::StatusOr<tensorflow::CheckpointState> ReadCheckpointState(Env* env,
                                                                const std::string& dir);
// Replaces DIR/checkpoint atomically. InvalidArgument, and nothing written,
// when a path in `state` is not a relative path inside DIR (the state file
// never names anything outside its directory).
absl::Status WriteCheckpointState(Env* env, const std::string& dir,
                                  const tensorflow::CheckpointState& state);

// Where `path`, as a state file in `dir` names it, points: JoinPath(dir, p)
// for a relative p without a ".." that leaves dir, or for an absolute p
// under dir's absolute path (lexically: symbolic links are not followed);
// nullopt for anything else (empty, outside dir).
std::optional<std::string> CheckpointPathInDir(const std::string& dir, const std::string& path);

// OK when the checkpoint at `prefix` can be restored as far as its files
// go: its index opens, its data files exist, and, for a delta, every member
// of its chain has an index. Otherwise the error naming what is missing or
// damaged. (Checksums of the data are checked by the restore itself.)
absl::Status CheckCheckpointIntact(Env* env, const std::string& prefix);

// The checkpoints DIR/BASENAME-STEP that have an index file, oldest (lowest
// STEP) first, as (STEP, prefix). Empty when `dir` does not exist.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(
    Env* env, const std::string& dir, const std::string& basename = kDefaultCheckpointBasename);

// What FindLatestCheckpoint found.
struct LatestCheckpointInfo {
  std::string prefix;  // JoinPath(dir, name)
  // Empty when the state file named `prefix`. Otherwise one line saying why
  // the state file was not used and that `prefix`, the newest intact
  // checkpoint of the directory, is used instead; callers show it.
  std::string recovery;
};

// The checkpoint of `dir` that a run resumes from, that eval and export
// read and that `recflow ckpt inspect DIR` shows: see Note [Finding the
// latest checkpoint] above. `basename` names the checkpoints looked for
// when the state file cannot be used.
absl::StatusOr<LatestCheckpointInfo> FindLatestCheckpoint(
    Env* env, const std::string& dir, const std::string& basename = kDefaultCheckpointBasename);

// FindLatestCheckpoint's prefix (tf.train.latest_checkpoint); a recovery is
// logged as a warning. Errors as FindLatestCheckpoint's.
absl::StatusOr<std::string> LatestCheckpoint(Env* env, const std::string& dir);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_CHECKPOINT_STATE_H_
