// The model update log: the numbered updates a trainer publishes and model
// servers apply in place to the version they serve (docs/online_learning.md).
// This file is the format and the directory; the writer is
// train/update_publisher.h, the reader serving/model_updates.h.
//
//   ASSIGN_OR_RETURN(auto updates, ListUpdates(env, "/m/updates"));
//   for (const auto& [sequence, prefix] : updates) {
//     ASSIGN_OR_RETURN(auto reader, BundleReader::Open(env, prefix));
//     ASSIGN_OR_RETURN(UpdateMeta meta, ReadUpdateMeta(*reader));
//     ...
//   }
//
// Layout. Update number SEQUENCE (1, 2, 3, ... without gaps) is an ordinary
// tensor bundle at DIR/update-SEQUENCE (20 digits, zero-padded, so names
// sort as numbers), written as every bundle is (temporary names, the index
// renamed last: a reader never sees half an update). It holds
//   _recflow/update_meta  string scalar, kUpdateMetaKey (FormatUpdateMeta):
//                           recflow model update v1
//                           sequence: 12
//                           step: 3400          the global step it reflects
//                           since_step: 3300    what changed after this step
//                           time_micros: 1796250000000000  when published (Unix micros)
//                           table: user_emb     one line per table
//                           variable: dense/w   one line per dense variable
//                         A full update says "full: true" and no since_step.
//   per table K           embedding/table_bundle.h's layout without slots:
//                           K/keys, K/values, K/frequencies, K/versions,
//                           K/slots ([n, 0, dim]) and, in a delta,
//                           K/deleted_ids: the rows changed after since_step
//                           (values as of `step`) and the ids removed since.
//                           A full update holds every row: a reader drops
//                           the rows it does not list.
//   per variable V        V: its value as of `step` (a delta lists only the
//                           variables whose value changed).
//   _recflow/step_times   optional, kUpdateStepTimesKey: int64 [n, 2], rows
//                           {global step, wall-clock micros when that step
//                           ended} for the steps after since_step, so a
//                           reader can tell how long after a row's training
//                           step (its version) it was served.
// Every value is absolute (never an increment), so applying an update to a
// state that already holds some of its changes is harmless; what matters is
// that none is skipped: update N + 1 holds everything that changed after
// update N.
//
// Where a state starts. A SavedModel exported from a checkpoint says which
// updates it already reflects in assets.extra/recflow_update_base
// (kUpdateBaseFile, FormatUpdateBase): a server applies the updates after
// that sequence. The checkpoint itself keeps it under kCheckpointUpdateKey
// (int64 [2]: sequence, step of the last update published before it).
//
// Thread-compatible functions; a directory has one writer (one trainer).
#ifndef RECFLOW_CHECKPOINT_UPDATE_LOG_H_
#define RECFLOW_CHECKPOINT_UPDATE_LOG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/env.h"

namespace recflow::checkpoint {

inline constexpr char kUpdateMetaKey[] = "_recflow/update_meta";
// Every file of an update starts with this (then the 20-digit sequence).
inline constexpr char kUpdateFilePrefix[] = "update-";
inline constexpr char kUpdateStepTimesKey[] = "_recflow/step_times";
// The log's directory inside a model directory.
inline constexpr char kUpdatesDirName[] = "updates";
// In a SavedModel's assets.extra/: the updates the export reflects.
inline constexpr char kUpdateBaseFile[] = "recflow_update_base";
// In a checkpoint: int64 [2] {sequence, step} of the last update published
// before it (0, -1 when none was).
inline constexpr char kCheckpointUpdateKey[] = "_recflow/update_sequence";

struct UpdateMeta {
  int64_t sequence = 0;
  int64_t step = 0;
  bool full = false;
  int64_t since_step = -1;  // deltas: >= 0
  int64_t time_micros = 0;
  std::vector<std::string> tables;
  std::vector<std::string> variables;
};

// The text of kUpdateMetaKey, and back. ParseUpdateMeta: DataLoss naming
// `where` (the bundle) and the line for anything it does not understand, a
// missing field, or a sequence < 1.
std::string FormatUpdateMeta(const UpdateMeta& meta);
absl::StatusOr<UpdateMeta> ParseUpdateMeta(absl::string_view text, const std::string& where);
// Reads and parses the bundle's kUpdateMetaKey (DataLoss naming the bundle
// when it has none).
absl::StatusOr<UpdateMeta> ReadUpdateMeta(const BundleReader& reader);

// DIR/update-SEQUENCE.
std::string UpdatePrefix(const std::string& dir, int64_t sequence);

// The updates of `dir` that have an index, as (sequence, prefix), lowest
// first. Empty when `dir` does not exist.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListUpdates(
    Env* env, const std::string& dir);

// Removes what crashed writes left in `dir` (update bundle files whose name
// holds ".tempstate"). Best effort; returns how many files it removed.
int RemoveUpdateTemporaries(Env* env, const std::string& dir);

// Compaction: deletes the updates numbered <= `sequence` (each one's index
// first, so a half-deleted update is never listed). Best effort; returns how
// many updates it deleted.
int DeleteUpdatesThrough(Env* env, const std::string& dir, int64_t sequence);

// Resync: a server stuck on the log (a gap, a damaged update) asks the
// trainer for a full update by writing this file into the log's directory,
// its text the reason; the publisher makes its next update full and then
// removes the file. The name is not an update's: listings skip it.
inline constexpr char kFullUpdateRequestFile[] = "full-update-request";
// Writes the request (atomically; a newer one replaces an older one).
absl::Status RequestFullUpdate(Env* env, const std::string& dir, absl::string_view why);
// The pending request's text (the reason), or nullopt when there is none.
std::optional<std::string> PendingFullUpdateRequest(Env* env, const std::string& dir);
// Removes the request (best effort).
void ClearFullUpdateRequest(Env* env, const std::string& dir);

// What an export (or a checkpoint) already reflects: the last update
// published before it. sequence 0: none.
struct UpdateBase {
  int64_t sequence = 0;
  int64_t step = -1;
};
// The text of kUpdateBaseFile, and back (DataLoss naming `where`).
std::string FormatUpdateBase(const UpdateBase& base);
absl::StatusOr<UpdateBase> ParseUpdateBase(absl::string_view text, const std::string& where);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_UPDATE_LOG_H_
