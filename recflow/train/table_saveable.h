// TableSaveable: a HashEmbeddingTable as a checkpoint::Saveable, so the
// Saver writes it next to the dense variables, full or as a delta.
//
//   std::vector<checkpoint::Saveable> saveables = {
//       checkpoint::VarSaveable(rm, {"dense/w", "", "dense/w", DT_FLOAT, {16, 1}}),
//       TableSaveable(rm, {.checkpoint_key = "user_emb", .name = "user_emb"})};
//   ASSIGN_OR_RETURN(auto saver, checkpoint::Saver::Create(opts, std::move(saveables)));
//
// Bundle layout for checkpoint key K (n rows in the table's storage order,
// not sorted: HashEmbeddingTable::Export's kStorage; see
// docs/formats/checkpoint.md, "Embedding tables"):
//   K/keys         int64 [n]
//   K/values       float [n, dim]
//   K/slots        float [n, num_slots, dim]  optimizer slots, SlotNames() order
//   K/frequencies  int64 [n]
//   K/versions     int64 [n]                  step of each row's last update
//   K/deleted_ids  int64 [m]                  deltas only: ids removed or
//                                             evicted since the previous
//                                             checkpoint
// A full checkpoint holds every row; a delta (since_step = S) the rows with
// version > S.
//
// Partitioned layout (a cluster's parameter servers; PartTableSaveable):
// ps task p of n writes the rows it holds under K/part_<p>, with the same
// tensors as above:
//   K/part_<p>/keys, K/part_<p>/values, K/part_<p>/slots,
//   K/part_<p>/frequencies, K/part_<p>/versions  [, K/part_<p>/deleted_ids]
// The parts of one table partition its ids (each id is in exactly one
// part; not checked on restore, where an id in two parts would get the
// row of the later part); parts are numbered from 0 without gaps, and every
// part holds all five tensors (a delta: six). A bundle holds a table in one layout or the
// other, never both.
//
// Restores read either layout: K/keys when the bundle has it, else every
// K/part_<i> it holds (found through the index; a gap in the numbering, or
// a part missing one of its tensors, is DataLoss naming the table and the
// part; a missing LAST part cannot be told from a smaller cluster, which is
// why a cluster checkpoint is published only once every part is written,
// distributed/cluster_checkpoint.h). A full restore Clear()s the table once,
// then imports every part; a delta restore removes every part's deleted_ids,
// then imports every part's rows. With TableSaveableOptions::keep_id set,
// only rows whose id passes are imported, from either layout and whatever
// the number of parts (a ps task restoring its shard after the cluster
// changed size, or seeding from a single-process checkpoint); the filter
// runs chunk by chunk on the streamed rows (kept rows are moved to the front
// of the chunk's buffer, no other copy), and a source none of whose ids
// pass is not read beyond its keys (so its values' crc32c is not checked
// either). deleted_ids are removed whether they pass or not (removing an id
// the table lacks does nothing).
//
// Admission-sketch counts are NOT saved: a restored table starts with empty
// sketches, so ids that were on their way to admission
// must be seen again (HashEmbeddingTable exposes no sketch accessor; the
// sketches are approximate and decayed anyway).
//
// Memory while saving: the table is exported once per tensor (keys,
// frequencies, versions, values, slots; a delta first counts its rows)
// through BundleWriter::AddChunks, each pass copying only its column, in
// storage order: a few chunks in memory and nothing per row. With
// TableSaveableOptions::pool the chunks are filled on the pool while the
// writer takes the previous ones. The table must not change during the
// save (pause training, as a checkpoint hook between steps does): a pass
// that sees other rows than the first (count and id sequence) fails the
// save with FailedPrecondition naming the table; nothing is published then.
//
// Memory while restoring: keys, frequencies and versions (24 bytes per
// row), plus two chunks of values and slots (the next chunk is read on its
// own thread while the current one is imported), read with positioned reads
// straight from the data file (crc32c checked at the end). A full restore
// Clear()s the table first; a delta restore removes K/deleted_ids and then
// imports its rows. On a read error (DataLoss: checksum, truncation) the
// table is cleared, never left half-restored silently.
//
// Frequencies: a delta holds the rows updated since S, so a row looked up
// but not updated since the previous checkpoint restores its older
// frequency. In training every looked-up row also gets its gradient
// applied, so the two agree.
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
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/env.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/hash_embedding_table.h"
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

struct TableSaveableOptions {
  // The Env of the bundles (the Saver's options.env): restores read the
  // data files directly. Not owned.
  Env* env = Env::Default();
  // Rows per exported / imported chunk.
  int64_t rows_per_chunk = 65536;
  // For Export and Import; may be null. Not owned.
  ThreadPool* pool = nullptr;
  // Restore filter: when set, only rows whose id passes are imported (see
  // "Partitioned layout" above). Unset: every row. Saves ignore it. Must be
  // thread-compatible: restores of different tables may call it
  // concurrently.
  std::function<bool(int64_t id)> keep_id;
};

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

// "K/part_<part>": where part `part` of table key K is saved.
std::string TablePartKey(const std::string& key, int64_t part);

// The pieces, for tools: write the table (since_step < 0: full, else a delta)
// under `key` (a part: key = TablePartKey(K, p)), or read table K back from
// either layout, filtered by options.keep_id (delta: apply on top of the
// current rows; otherwise replace them). RestoreTable: NotFound when the
// bundle has neither K/keys nor any K/part_<i>; on any other error the table
// is left empty.
absl::Status SaveTable(embedding::HashEmbeddingTable* table, checkpoint::BundleWriter* writer,
                       const std::string& key, int64_t since_step,
                       const TableSaveableOptions& options = {});
absl::Status RestoreTable(embedding::HashEmbeddingTable* table,
                          const checkpoint::BundleReader& reader, const std::string& key,
                          bool delta, const TableSaveableOptions& options = {});

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_TABLE_SAVEABLE_H_
