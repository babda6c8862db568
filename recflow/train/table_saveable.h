// TableSaveable: a HashEmbeddingTable as a checkpoint::Saveable, so the
// Saver writes it next to the dense variables, full or as a delta.
//
//   std::vector<checkpoint::Saveable> saveables = {
//       checkpoint::VarSaveable(rm, {"dense/w", "", "dense/w", DT_FLOAT, {16, 1}}),
//       TableSaveable(rm, {.checkpoint_key = "user_emb", .name = "user_emb"})};
//   ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(opts, std::move(saveables)));
//
// The tensors, their layouts (single or partitioned), the restore lanes,
// checksums, deltas and restore filters are the table <-> bundle bridge's
// (embedding/table_bundle.h, which training, serving and the CLI share);
// a TableSaveable only finds the table and calls SaveTable / RestoreTable
// under its checkpoint key K:
//   save        SaveTable(K, full)           restore        RestoreTable(K, full)
//   save_delta  SaveTable(K, since S)        restore_delta  RestoreTable(K, delta)
//   committed (a full checkpoint at step S)  TrimDeletionLog(S)
// A PartTableSaveable (one ps task's rows of a partitioned table) saves
// under TablePartKey(K, part) and restores from K in either layout.
//
// Thread-safety: the returned Saveable's callbacks are thread-safe (the
// table is); Saver serializes them.
#ifndef RECFLOW_TRAIN_TABLE_SAVEABLE_H_
#define RECFLOW_TRAIN_TABLE_SAVEABLE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/table_bundle.h"
#include "recflow/framework/resource_mgr.h"

namespace recflow::train {

// Where a table lives.
struct TableRef {
  std::string checkpoint_key;  // K in the layout above
  std::string container;       // empty: the ResourceMgr's default container
  std::string name;            // the table's shared name
  // When set, a restore into a ResourceMgr without the table creates it from
  // these options (so a restore may come before the graph's first step).
  // Unset: restoring a missing table is FailedPrecondition naming it.
  std::optional<embedding::EmbeddingTableOptions> create_options;
};

// Env, chunk size, pool (the restore lanes) and restore filter of the
// bridge.
using TableSaveableOptions = embedding::TableBundleOptions;

// A saveable over the table registered in `rm` (not owned; must outlive the
// saveable) under ref.container/ref.name, looked up at every save and
// restore.
checkpoint::Saveable TableSaveable(ResourceMgr* rm, TableRef ref,
                                   TableSaveableOptions options = {});
// A saveable over a table the caller holds.
checkpoint::Saveable TableSaveable(std::shared_ptr<embedding::EmbeddingTableResource> table,
                                   std::string checkpoint_key,
                                   TableSaveableOptions options = {});

// A saveable over one part of a partitioned table (a ps task's rows): saves
// every row the table holds under TablePartKey(ref.checkpoint_key, part),
// which is also the saveable's name, full or as a delta; restores from
// ref.checkpoint_key in either layout, keeping only the ids that pass
// `keep_id` (unset: options.keep_id, and if that is unset too, every row).
// REQUIRES: part >= 0.
checkpoint::Saveable PartTableSaveable(ResourceMgr* rm, TableRef ref, int part,
                                       std::function<bool(int64_t id)> keep_id,
                                       TableSaveableOptions options = {});
checkpoint::Saveable PartTableSaveable(
    std::shared_ptr<embedding::EmbeddingTableResource> table, std::string checkpoint_key,
    int part, std::function<bool(int64_t id)> keep_id, TableSaveableOptions options = {});

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_TABLE_SAVEABLE_H_
