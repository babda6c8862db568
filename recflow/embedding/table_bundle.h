// The table <-> bundle bridge: writes a HashEmbeddingTable into a tensor
// bundle and reads it back, the one implementation that training
// checkpoints (train/table_saveable.h), parameter servers
// (distributed/ps_server.cc), SavedModel export (train/saved_model_export.h)
// and serving's SavedModel load (serving/saved_model_bundle.h) share.
//
//   ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(env, prefix));
//   RETURN_IF_ERROR(SaveTable(table, writer.get(), "user_emb", /*since_step=*/-1));
//   RETURN_IF_ERROR(writer->Finish());
//   ...
//   ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(env, prefix));
//   RETURN_IF_ERROR(RestoreTable(table, *reader, "user_emb", /*delta=*/false,
//                                {.env = env, .pool = pool}));
//
// Bundle layout for table key K (n rows in the table's storage order, not
// sorted: HashEmbeddingTable::Export's kStorage; see
// docs/formats/checkpoint.md, "Embedding tables"):
//   K/keys         int64 [n]
//   K/values       float [n, dim]
//   K/slots        float [n, num_slots, dim]  optimizer slots, SlotNames() order
//   K/frequencies  int64 [n]
//   K/versions     int64 [n]                  step of each row's last update
//   K/deleted_ids  int64 [m]                  deltas only: ids removed or
//                                             evicted since the previous
//                                             checkpoint
// A full save holds every row; a delta (since_step = S) the rows with
// version > S.
//
// Partitioned layout (a cluster's parameter servers): ps task p of n writes
// the rows it holds under K/part_<p> (TablePartKey), with the same tensors
// as above:
//   K/part_<p>/keys, K/part_<p>/values, K/part_<p>/slots,
//   K/part_<p>/frequencies, K/part_<p>/versions  [, K/part_<p>/deleted_ids]
// The parts of one table partition its ids (each id is in exactly one
// part; not checked on restore, where an id in two parts would get the
// row of the later part); parts are numbered from 0 without gaps, and every
// part holds all five tensors (a delta: six). A bundle holds a table in one
// layout or the other, never both.
//
// RestoreTable reads either layout: K/keys when the bundle has it, else
// every K/part_<i> it holds (found through the index; a gap in the
// numbering, or a part missing one of its tensors, is DataLoss naming the
// table and the part; a missing LAST part cannot be told from a smaller
// cluster, which is why a cluster checkpoint is published only once every
// part is written, distributed/cluster_checkpoint.h). A full restore
// Clear()s the table once, then imports every part; a delta restore removes
// every part's deleted_ids, then imports every part's rows. With
// TableBundleOptions::keep_id set, only rows whose id passes are imported,
// from either layout and whatever the number of parts (a ps task restoring
// its shard after the cluster changed size, or seeding from a
// single-process checkpoint); the filter runs chunk by chunk on the
// streamed rows (kept rows are moved to the front of the chunk's buffer, no
// other copy), and a source none of whose ids pass is not read beyond its
// keys (so its values' crc32c is not checked either). deleted_ids are
// removed whether they pass or not (removing an id the table lacks does
// nothing).
//
// Admission-sketch counts are NOT saved: a restored table starts with empty
// sketches, so ids that were on their way to admission must be seen again
// (HashEmbeddingTable exposes no sketch accessor; the sketches are
// approximate and decayed anyway).
//
// Memory while saving: the table is exported once per tensor (keys,
// frequencies, versions, values, slots; a delta first counts its rows)
// through BundleWriter::AddChunks, each pass copying only its column, in
// storage order: a few chunks in memory and nothing per row. With
// TableBundleOptions::pool the chunks are filled on the pool while the
// writer takes the previous ones. The table must not change during the
// save (pause training, as a checkpoint hook between steps does): a pass
// that sees other rows than the first (count and id sequence) fails the
// save with FailedPrecondition naming the table; nothing is published then.
//
// Memory while restoring (the restore lanes): keys, frequencies and
// versions are streamed like the weights unless keep_id is set (then K/keys
// is read whole first, 8 bytes per row); every row tensor is read in chunks
// of rows_per_chunk rows with positioned reads straight from the data file
// into two sets of chunk buffers per lane (the next chunk is read on its own
// thread while the current one is imported). With a pool, the rows are cut
// into up to min(pool threads, 4) lanes of consecutive chunks, each read,
// checksummed and imported by a thread of its own; every tensor's crc32c is
// joined from its lanes' ranges and checked at the end. A full restore
// Clear()s the table first; a delta restore removes K/deleted_ids and then
// imports its rows. On any error after the table was touched (DataLoss:
// checksum, truncation, a missing part or tensor; InvalidArgument: a shape
// that does not fit the table) the table is cleared, never left
// half-restored silently, and the message names the table, the tensor and
// the bundle.
//
// Frequencies: a delta holds the rows updated since S, so a row looked up
// but not updated since the previous checkpoint restores its older
// frequency. In training every looked-up row also gets its gradient
// applied, so the two agree.
//
// Thread-safety: SaveTable and RestoreTable may run concurrently on
// different tables; on one table the caller serializes them (the table
// itself is thread-safe, but a save needs it unchanged and a restore
// replaces it).
#ifndef RECFLOW_EMBEDDING_TABLE_BUNDLE_H_
#define RECFLOW_EMBEDDING_TABLE_BUNDLE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/env.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/hash_embedding_table.h"

namespace recflow::embedding {

struct TableBundleOptions {
  // The Env of the bundles: restores read the data files directly. Not
  // owned.
  Env* env = Env::Default();
  // Rows per exported / imported chunk.
  int64_t rows_per_chunk = 65536;
  // For Export and Import, and the restore lanes; may be null (one lane).
  // Not owned.
  ThreadPool* pool = nullptr;
  // Restore filter: when set, only rows whose id passes are imported (see
  // the partitioned layout above). Unset: every row. Saves ignore it. Must
  // be thread-compatible: restores of different tables may call it
  // concurrently.
  std::function<bool(int64_t id)> keep_id;
  // Restores: false leaves K/slots unread and unchecked, and the rows get
  // their initial slot values (serving, whose lookups read no slot). Saves
  // ignore it.
  bool restore_slots = true;
  // Full saves: also write K/index and K/clock, the hash index that lets a
  // restore open the table in place (mapped_rows.h; memory while saving:
  // about 21 bytes per row for the index). Deltas and restores ignore it.
  bool save_index = false;
  // Full restores of the single layout: when the bundle has K/index, map
  // the table's tensors and make them the table's base (Note [Base rows] in
  // hash_embedding_table.h) instead of importing every row; the restore
  // returns at once and rows are read from the file as they are looked up.
  // Falls back to importing (with a warning naming the reason) where the
  // bundle cannot be mapped: no local file (options.env is not
  // Env::Default()), a tensor not aligned for its type, a damaged index.
  // Tables of quantized rows and restores with keep_id are imported. The mapped files must not be rewritten in
  // place while the table uses them (recflow never does).
  bool open_in_place = false;
  // Saves: false writes K/slots with no slots ([n, 0, dim]) and copies none
  // (a model update for serving, train/update_publisher.h, whose readers
  // need only the weights). Restores ignore it.
  bool save_slots = true;
};

// Writes `table` under `key` (a part: key = TablePartKey(K, p)): full when
// since_step < 0, else a delta of the rows with version > since_step plus
// K/deleted_ids. FailedPrecondition naming the table when it changes during
// the save.
absl::Status SaveTable(HashEmbeddingTable* table, checkpoint::BundleWriter* writer,
                       const std::string& key, int64_t since_step,
                       const TableBundleOptions& options = {});

// Reads table K = `key` back from either layout, filtered by
// options.keep_id: delta = apply on top of the current rows; otherwise
// replace them. NotFound (table untouched) when the bundle has neither
// K/keys nor any K/part_<i>; on any other error the table is left empty.
absl::Status RestoreTable(HashEmbeddingTable* table, const checkpoint::BundleReader& reader,
                          const std::string& key, bool delta,
                          const TableBundleOptions& options = {});

// "K/part_<part>": where part `part` of table key K is saved.
std::string TablePartKey(const std::string& key, int64_t part);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_TABLE_BUNDLE_H_
