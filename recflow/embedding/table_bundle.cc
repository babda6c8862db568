#include "recflow/embedding/table_bundle.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/tensor_cursor.h"
#include "recflow/core/allocator.h"
#include "recflow/core/direct_file.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/row_initializer.h"

namespace recflow::embedding {
namespace {

using checkpoint::BundleReader;
using checkpoint::BundleWriter;
using checkpoint::TensorCursor;
using checkpoint::TensorInfo;

std::string Key(const std::string& key, const char* part) { return absl::StrCat(key, "/", part); }

absl::string_view Bytes(const void* data, size_t n) {
  return absl::string_view(static_cast<const char*>(data), n);
}

absl::Status CheckShape(const BundleReader& reader, const TensorInfo& info, DataType dtype,
                        const std::vector<int64_t>& dims, const HashEmbeddingTable& table) {
  bool ok = info.dtype == dtype && info.shape.dims() == static_cast<int>(dims.size());
  for (size_t d = 0; ok && d < dims.size(); ++d) {
    ok = dims[d] < 0 || info.shape.dim_size(static_cast<int>(d)) == dims[d];
  }
  if (ok) return absl::OkStatus();
  std::string want = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    absl::StrAppend(&want, d ? "," : "", dims[d] < 0 ? std::string("?") : absl::StrCat(dims[d]));
  }
  want += "]";
  return errors::InvalidArgument("checkpoint ", reader.prefix(), " holds '", info.name, "' as ",
                                 DataTypeString(info.dtype), " ", info.shape.DebugString(),
                                 " but embedding table '", table.name(), "' (dim ", table.dim(),
                                 ", ", table.num_slots(), " slots) needs ", DataTypeString(dtype),
                                 " ", want);
}

// Copies the first m entries of int64 `src` whose keep flag is set into a
// new tensor of `kept` elements.
Tensor GatherKept(const Tensor& src, const uint8_t* keep, int64_t m, int64_t kept) {
  Tensor out(DT_INT64, TensorShape({kept}));
  const int64_t* s = src.data<int64_t>();
  int64_t* d = out.data<int64_t>();
  for (int64_t i = 0; i < m; ++i) {
    if (keep[i]) *d++ = s[i];
  }
  return out;
}

// Moves the kept rows among the first m of a [rows, ...] float tensor to
// its front, in order.
void CompactRows(Tensor* t, const uint8_t* keep, int64_t m) {
  if (!t->IsInitialized() || t->NumElements() == 0) return;
  const size_t row_bytes = t->TotalBytes() / static_cast<size_t>(t->dim_size(0));
  char* base = t->raw_data();
  int64_t c = 0;
  for (int64_t i = 0; i < m; ++i) {
    if (!keep[i]) continue;
    if (c != i) std::memmove(base + c * row_bytes, base + i * row_bytes, row_bytes);
    ++c;
  }
}

// The row tensors a restore reads, in a fixed order.
enum RowTensor { kKeys, kValues, kSlots, kFreqs, kVersions, kNumTensors };

// One chunk's buffers for a restore, by RowTensor (uninitialized for a
// tensor not read): allocated once, refilled per chunk.
struct ChunkBuffers {
  Tensor t[kNumTensors];
};

// Restores the rows under `key` into `table` (no Clear, no removals); with
// options.keep_id, only the rows whose id passes; without
// options.restore_slots, no slots (they start at their initial values).
//
// Every row tensor is streamed in chunks of options.rows_per_chunk rows
// into two sets of buffers per lane (below), allocated once: the next chunk
// is read on its own thread while this one is imported, so the disk and the
// hash inserts overlap, and a restore touches no memory beyond the table's
// own and two chunks per lane. With options.pool, the rows are split into
// up to min(pool threads, 4) lanes of consecutive chunks that run in
// parallel; the checkpoint's ids are unique (a table's export), so the
// order of the lanes' imports does not matter. With a filter, the keys are
// read whole first, so a part with no wanted row is skipped without reading
// its values.
absl::Status ImportRows(HashEmbeddingTable* table, const BundleReader& reader,
                        const std::string& key, const TableBundleOptions& options) {
  ASSIGN_OR_RETURN(TensorInfo keys_info, reader.GetInfo(Key(key, "keys")));
  RETURN_IF_ERROR(CheckShape(reader, keys_info, DT_INT64, {-1}, *table));
  const int64_t n = keys_info.shape.dim_size(0);
  const int64_t dim = table->dim();
  ASSIGN_OR_RETURN(TensorInfo values_info, reader.GetInfo(Key(key, "values")));
  RETURN_IF_ERROR(CheckShape(reader, values_info, DT_FLOAT, {n, dim}, *table));
  std::optional<TensorInfo> slots_info;
  int64_t num_slots = 0;
  if (options.restore_slots && reader.Contains(Key(key, "slots"))) {
    ASSIGN_OR_RETURN(slots_info, reader.GetInfo(Key(key, "slots")));
    RETURN_IF_ERROR(CheckShape(reader, *slots_info, DT_FLOAT, {n, -1, dim}, *table));
    num_slots = slots_info->shape.dim_size(1);
    if (num_slots != 0 && num_slots != table->num_slots()) {
      return CheckShape(reader, *slots_info, DT_FLOAT, {n, table->num_slots(), dim}, *table);
    }
  }
  std::optional<TensorInfo> freqs_info, versions_info;
  for (auto [part, info] : {std::pair<const char*, std::optional<TensorInfo>*>{
                                "frequencies", &freqs_info},
                            {"versions", &versions_info}}) {
    if (!reader.Contains(Key(key, part))) continue;  // optional: Import defaults them
    ASSIGN_OR_RETURN(*info, reader.GetInfo(Key(key, part)));
    RETURN_IF_ERROR(CheckShape(reader, **info, DT_INT64, {n}, *table));
  }
  // The filter: which rows to import (empty: all).
  Tensor all_keys;
  std::vector<uint8_t> keep;
  int64_t kept = n;
  if (options.keep_id) {
    ASSIGN_OR_RETURN(all_keys, reader.Lookup(Key(key, "keys")));
    keep.resize(n);
    kept = 0;
    const int64_t* k = all_keys.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      keep[i] = options.keep_id(k[i]) ? 1 : 0;
      kept += keep[i];
    }
    // None of these rows is wanted: their values are not even read.
    if (kept == 0) return absl::OkStatus();
  }
  table->Reserve(table->size() + kept);
  const int64_t rows = std::min<int64_t>(std::max<int64_t>(1, options.rows_per_chunk),
                                         std::max<int64_t>(1, n));
  // Lanes: the rows are cut into up to `lanes` consecutive ranges of whole
  // chunks, each read and imported by a thread of its own, its chunks
  // imported inline. A table saves its rows shard after shard, so a chunk
  // mostly holds rows of one or two shards, and Import (which spreads
  // shards over the pool) would run on one thread at a time; ranges far
  // apart hold different shards. Each lane checksums what it reads; the
  // tensors' crcs are combined at the end.
  const int64_t num_chunks = (n + rows - 1) / rows;
  const int lanes = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>({options.pool != nullptr ? options.pool->NumThreads() : 1,
                            int64_t{4}, num_chunks})));
  // The tensors read: keys (unless the filter read them whole), values,
  // slots (unless there are none), frequencies, versions (when saved).
  std::optional<TensorInfo> infos[kNumTensors];
  if (!options.keep_id) infos[kKeys] = keys_info;
  infos[kValues] = values_info;
  if (num_slots > 0) infos[kSlots] = slots_info;
  infos[kFreqs] = freqs_info;
  infos[kVersions] = versions_info;
  struct Lane {
    int64_t lo = 0, hi = 0;  // rows
    std::optional<TensorCursor> cursors[kNumTensors];
    ChunkBuffers buffers[2];
    absl::Status status;
  };
  std::vector<Lane> lane(lanes);
  // Aligned for direct reads straight into the buffers.
  Allocator* const a = direct_io_allocator();
  for (int l = 0; l < lanes; ++l) {
    Lane& ln = lane[l];
    ln.lo = std::min(n, num_chunks * l / lanes * rows);
    ln.hi = std::min(n, num_chunks * (l + 1) / lanes * rows);
    for (int t = 0; t < kNumTensors; ++t) {
      if (!infos[t].has_value()) continue;
      const uint64_t row_bytes = n > 0 ? infos[t]->size / static_cast<uint64_t>(n) : 0;
      ASSIGN_OR_RETURN(ln.cursors[t],
                       TensorCursor::Open(options.env, reader, *infos[t], ln.lo * row_bytes,
                                          ln.hi * row_bytes));
    }
    for (ChunkBuffers& b : ln.buffers) {
      for (int t = 0; t < kNumTensors; ++t) {
        if (!infos[t].has_value()) continue;
        TensorShape shape = infos[t]->shape;  // [n, ...] -> [rows, ...]
        shape.set_dim(0, rows);
        ASSIGN_OR_RETURN(b.t[t], Tensor::Create(infos[t]->dtype, shape, a));
      }
    }
  }
  std::atomic<bool> failed{false};
  // One lane: the next chunk is read on a thread of its own while this one
  // is imported.
  auto run = [&](Lane* ln, ThreadPool* import_pool) -> absl::Status {
    // Reads rows [start, start + m) into `b`.
    auto read = [&, ln](int64_t start, ChunkBuffers* b) -> absl::Status {
      const int64_t m = std::min(rows, ln->hi - start);
      for (int t = 0; t < kNumTensors; ++t) {
        if (!ln->cursors[t].has_value()) continue;
        Tensor& buffer = b->t[t];
        RETURN_IF_ERROR(ln->cursors[t]->Read(
            buffer.TotalBytes() / static_cast<size_t>(buffer.dim_size(0)) * m, buffer.raw_data()));
      }
      return absl::OkStatus();
    };
    std::future<absl::Status> next;
    if (ln->lo < ln->hi) next = std::async(std::launch::async, read, ln->lo, &ln->buffers[0]);
    for (int64_t start = ln->lo, i = 0; start < ln->hi; start += rows, ++i) {
      RETURN_IF_ERROR(next.get());
      if (failed.load(std::memory_order_relaxed)) return absl::OkStatus();  // another lane's
      if (start + rows < ln->hi) {
        next = std::async(std::launch::async, read, start + rows, &ln->buffers[(i + 1) % 2]);
      }
      ChunkBuffers& b = ln->buffers[i % 2];
      const int64_t m = std::min(rows, ln->hi - start);
      const uint8_t* k = keep.empty() ? nullptr : keep.data() + start;
      int64_t c = m;  // rows of this chunk to import
      if (k != nullptr) c = std::count(k, k + m, uint8_t{1});
      if (c == 0) continue;
      TableChunk chunk;
      auto first = [](const Tensor& t, int64_t r) { return t.IsInitialized() ? t.Slice(0, r) : t; };
      if (c == m) {
        chunk.keys =
            all_keys.IsInitialized() ? all_keys.Slice(start, start + m) : first(b.t[kKeys], m);
        chunk.frequencies = first(b.t[kFreqs], m);
        chunk.versions = first(b.t[kVersions], m);
      } else {
        // Filtered: the kept rows move to the front of the buffers.
        const Tensor chunk_keys = all_keys.Slice(start, start + m);
        chunk.keys = GatherKept(chunk_keys, k, m, c);
        if (b.t[kFreqs].IsInitialized()) chunk.frequencies = GatherKept(b.t[kFreqs], k, m, c);
        if (b.t[kVersions].IsInitialized()) {
          chunk.versions = GatherKept(b.t[kVersions], k, m, c);
        }
        CompactRows(&b.t[kValues], k, m);
        CompactRows(&b.t[kSlots], k, m);
      }
      chunk.values = first(b.t[kValues], c);
      chunk.slots = first(b.t[kSlots], c);
      absl::Status s = table->Import(chunk, import_pool);
      if (!s.ok()) {
        if (next.valid()) next.wait();  // it uses this lane's cursors and buffers
        return s;
      }
    }
    return absl::OkStatus();
  };
  auto run_lane = [&](Lane* ln, ThreadPool* import_pool) {
    ln->status = run(ln, import_pool);
    if (!ln->status.ok()) failed.store(true, std::memory_order_relaxed);
  };
  if (lanes == 1) {
    run_lane(&lane[0], options.pool);
  } else {
    std::vector<std::future<void>> others;
    for (int l = 1; l < lanes; ++l) {
      others.push_back(std::async(std::launch::async, run_lane, &lane[l], nullptr));
    }
    run_lane(&lane[0], nullptr);
    for (std::future<void>& f : others) f.get();
  }
  for (const Lane& ln : lane) RETURN_IF_ERROR(ln.status);
  for (int t = 0; t < kNumTensors; ++t) {
    if (!infos[t].has_value()) continue;
    std::vector<const TensorCursor*> parts;
    for (const Lane& ln : lane) parts.push_back(&*ln.cursors[t]);
    RETURN_IF_ERROR(TensorCursor::Finish(parts));
  }
  return absl::OkStatus();
}

// The tensors every part of a table holds (deltas add "deleted_ids").
constexpr const char* kPartTensors[] = {"frequencies", "keys", "slots", "values", "versions"};

// The parts of table `key` in `reader`: part number -> the names (after
// "K/part_<p>/") of its tensors. Non-canonical part numbers are ignored.
absl::StatusOr<std::map<int64_t, std::set<std::string>>> FindParts(const BundleReader& reader,
                                                                   const std::string& key) {
  const std::string head = key + "/part_";
  std::map<int64_t, std::set<std::string>> parts;
  RETURN_IF_ERROR(reader.ForEachEntry(
      [&](absl::string_view name, const tensorflow::BundleEntryProto&) -> absl::Status {
        if (!absl::StartsWith(name, head)) return absl::OkStatus();
        absl::string_view rest = name.substr(head.size());
        const size_t slash = rest.find('/');
        if (slash == absl::string_view::npos) return absl::OkStatus();
        absl::string_view digits = rest.substr(0, slash);
        int64_t p;
        if (digits.empty() || !absl::ascii_isdigit(digits[0]) ||
            !absl::SimpleAtoi(digits, &p) || absl::StrCat(p) != digits) {
          return absl::OkStatus();
        }
        parts[p].insert(std::string(rest.substr(slash + 1)));
        return absl::OkStatus();
      }));
  return parts;
}

// Checks that parts 0..N-1 are all there, each with all its tensors.
absl::Status CheckParts(const BundleReader& reader, const std::string& key,
                        const std::map<int64_t, std::set<std::string>>& parts, bool delta) {
  const int64_t count = parts.rbegin()->first + 1;
  for (int64_t p = 0; p < count; ++p) {
    auto it = parts.find(p);
    if (it == parts.end()) {
      return errors::DataLoss("checkpoint ", reader.prefix(), " holds embedding table '", key,
                              "' in parts up to part_", count - 1, " but part_", p,
                              " is missing (no tensor '", TablePartKey(key, p), "/...')");
    }
    std::vector<const char*> need(std::begin(kPartTensors), std::end(kPartTensors));
    if (delta) need.push_back("deleted_ids");
    for (const char* t : need) {
      if (it->second.count(t) == 0) {
        return errors::DataLoss("checkpoint ", reader.prefix(), ": part ", p,
                                " of embedding table '", key, "' has no tensor '",
                                Key(TablePartKey(key, p), t), "'");
      }
    }
  }
  return absl::OkStatus();
}

// The ids a pass over the table saw, in order: their count and a 64-bit
// fingerprint of the sequence. Every pass of one save must see the same.
struct IdTrace {
  int64_t rows = 0;
  uint64_t hash = 0;

  void Add(const Tensor& keys) {
    const int64_t* k = keys.data<int64_t>();
    const int64_t m = keys.dim_size(0);
    for (int64_t i = 0; i < m; ++i) {
      // The id's mix (the table's own), folded in order-sensitively.
      hash = (hash * 0x100000001B3ull) ^ Mix64(static_cast<uint64_t>(k[i]));
    }
    rows += m;
  }
};

}  // namespace

absl::Status SaveTable(HashEmbeddingTable* table, BundleWriter* writer, const std::string& key,
                       int64_t since_step, const TableBundleOptions& options) {
  ExportOptions eo;
  eo.since_step = since_step;
  eo.max_rows_per_chunk = std::max<int64_t>(1, options.rows_per_chunk);
  // Storage order: sequential reads of the slabs, no sort (every pass sees
  // the same order while the table is unchanged).
  eo.order = ExportOptions::Order::kStorage;
  const int64_t dim = table->dim();
  const int num_slots = table->num_slots();
  auto changed = [&]() {
    return errors::FailedPrecondition("embedding table '", table->name(),
                                      "' changed while it was being saved under '", key,
                                      "'; pause training during Save");
  };
  // Each tensor of the table is streamed by its own export pass that copies
  // only that column: nothing per row is held in memory (collecting the ids,
  // frequencies and versions of a 10M-row table took 250 MB of fresh memory,
  // and on a VM its page faults cost as much as the copies). The first pass
  // fixes the rows; each later one must see the same ids in the same order.
  std::optional<IdTrace> first;
  Tensor deleted_ids;
  // A full save with save_index: K/index is built from the keys pass.
  std::optional<TableIndexBuilder> index;
  enum class Column { kKeys, kFrequencies, kVersions, kValues, kSlots };
  auto pass = [&](Column column, int64_t n,
                  const BundleWriter::ChunkSink* sink) -> absl::Status {
    ExportOptions again = eo;
    again.include_values = column == Column::kValues;
    again.include_slots = column == Column::kSlots;
    IdTrace trace;
    ASSIGN_OR_RETURN(ExportResult result,
                     table->Export(
                         again,
                         [&](const TableChunk& c) -> absl::Status {
                           if (n >= 0 && c.keys.dim_size(0) > n - trace.rows) return changed();
                           trace.Add(c.keys);
                           if (column == Column::kKeys && index.has_value() && sink != nullptr) {
                             RETURN_IF_ERROR(index->Add(c.keys.flat<int64_t>()));
                           }
                           if (sink == nullptr) return absl::OkStatus();
                           const Tensor& t = column == Column::kKeys          ? c.keys
                                             : column == Column::kFrequencies ? c.frequencies
                                             : column == Column::kVersions    ? c.versions
                                             : column == Column::kValues      ? c.values
                                                                              : c.slots;
                           return (*sink)(Bytes(t.raw_data(), t.TotalBytes()));
                         },
                         options.pool));
    if (n >= 0 && trace.rows != n) return changed();
    if (!first.has_value()) {
      first = trace;
      deleted_ids = std::move(result.deleted_ids);
    } else if (trace.rows != first->rows || trace.hash != first->hash) {
      return changed();
    }
    return absl::OkStatus();
  };
  auto stream = [&](const char* part, Column column, DataType dtype, const TensorShape& shape) {
    return writer->AddChunks(Key(key, part), dtype, shape,
                             [&](const BundleWriter::ChunkSink& sink) {
                               return pass(column, shape.dim_size(0), &sink);
                             });
  };
  int64_t n;
  if (since_step < 0) {
    n = table->size();  // a full save: every row
  } else {
    // A delta: count the changed rows first (a pass that copies no weights).
    RETURN_IF_ERROR(pass(Column::kKeys, -1, nullptr));
    n = first->rows;
  }
  if (since_step < 0 && options.save_index) {
    ASSIGN_OR_RETURN(TableIndexBuilder builder, TableIndexBuilder::Create(n));
    index.emplace(std::move(builder));
  }
  RETURN_IF_ERROR(stream("keys", Column::kKeys, DT_INT64, TensorShape({n})));
  RETURN_IF_ERROR(stream("frequencies", Column::kFrequencies, DT_INT64, TensorShape({n})));
  RETURN_IF_ERROR(stream("versions", Column::kVersions, DT_INT64, TensorShape({n})));
  RETURN_IF_ERROR(stream("values", Column::kValues, DT_FLOAT, TensorShape({n, dim})));
  if (num_slots > 0 && options.save_slots) {
    RETURN_IF_ERROR(
        stream("slots", Column::kSlots, DT_FLOAT, TensorShape({n, num_slots, dim})));
  } else {
    RETURN_IF_ERROR(writer->Add(Key(key, "slots"), Tensor(DT_FLOAT, TensorShape({n, 0, dim}))));
  }
  if (since_step >= 0) RETURN_IF_ERROR(writer->Add(Key(key, "deleted_ids"), deleted_ids));
  if (index.has_value()) {
    absl::StatusOr<Tensor> entries = index->Finish();
    if (!entries.ok()) return changed();
    RETURN_IF_ERROR(writer->Add(Key(key, "index"), *entries));
    Tensor clock(DT_INT64, TensorShape({}));
    clock.data<int64_t>()[0] = table->clock();
    RETURN_IF_ERROR(writer->Add(Key(key, "clock"), clock));
  }
  return absl::OkStatus();
}

absl::Status RestoreTable(HashEmbeddingTable* table, const BundleReader& reader,
                          const std::string& key, bool delta,
                          const TableBundleOptions& options) {
  // The sources: K itself, or its parts K/part_0 .. K/part_<N-1>.
  std::vector<std::string> sources;
  const bool single = reader.Contains(Key(key, "keys"));
  auto fail = [&](const absl::Status& s, const std::string& source) {
    // Never leave a half-restored table looking valid.
    table->Clear();
    std::string where = absl::StrCat("restoring embedding table '", table->name(), "'");
    if (source != key) {
      absl::StrAppend(&where, " part ", source.substr(key.size() + 6), " ('", source, "')");
    }
    return errors::Annotate(s, absl::StrCat(where, " from ", reader.prefix()));
  };
  // (Quantized rows are imported without a word: they are a choice to
  // encode every row, which a mapped float32 base would not be.)
  if (single && !delta && options.open_in_place && !options.keep_id &&
      table->row_format() == RowFormat::kFloat32 && reader.Contains(Key(key, "index"))) {
    absl::Status why;
    if (options.env != Env::Default()) {
      why = errors::Unimplemented("the bundle is not read through the local file system");
    } else {
      MappedRowsOptions mo;
      mo.dim = table->dim();
      mo.num_slots = table->num_slots();
      mo.slots = options.restore_slots;
      absl::StatusOr<std::shared_ptr<MappedRows>> base = MappedRows::Open(reader, key, mo);
      if (base.ok()) {
        table->Clear();
        const int64_t rows = (*base)->size(), bytes = (*base)->mapped_bytes();
        why = table->AttachBase(*std::move(base));
        if (why.ok()) {
          LOG(INFO) << "embedding table '" << table->name() << "': opened in place from "
                    << reader.prefix() << " (" << rows << " rows, "
                    << bytes / (1 << 20) << " MiB mapped)";
          return absl::OkStatus();
        }
      } else {
        why = base.status();
      }
    }
    LOG(WARNING) << "embedding table '" << table->name() << "': not opened in place from "
                 << reader.prefix() << " (" << why.message() << "); restoring its rows";
  }
  if (single) {
    sources.push_back(key);
  } else {
    ASSIGN_OR_RETURN(auto parts, FindParts(reader, key));
    if (parts.empty()) {
      return errors::NotFound("checkpoint ", reader.prefix(), " has no embedding table '", key,
                              "' (no tensor '", Key(key, "keys"), "' and no parts '",
                              Key(key, "part_0"), "/...')");
    }
    absl::Status s = CheckParts(reader, key, parts, delta);
    if (!s.ok()) return fail(s, key);
    for (const auto& [p, tensors] : parts) sources.push_back(TablePartKey(key, p));
  }
  if (delta) {
    // Every part's removals first, then every part's rows: an id removed
    // and re-added since the previous checkpoint ends up present.
    for (const std::string& source : sources) {
      auto deleted = reader.Lookup(Key(source, "deleted_ids"));
      if (!deleted.ok()) return fail(deleted.status(), source);
      if (deleted->dtype() != DT_INT64 || deleted->dims() != 1) {
        return fail(errors::InvalidArgument("checkpoint ", reader.prefix(), " holds '",
                                            Key(source, "deleted_ids"), "' as ",
                                            DataTypeString(deleted->dtype()), " ",
                                            deleted->shape().DebugString(),
                                            "; expected int64 [m]"),
                    source);
      }
      table->Remove(deleted->flat<int64_t>());
    }
  } else {
    table->Clear();
  }
  for (const std::string& source : sources) {
    absl::Status s = ImportRows(table, reader, source, options);
    if (!s.ok()) return fail(s, source);
  }
  return absl::OkStatus();
}

std::string TablePartKey(const std::string& key, int64_t part) {
  return absl::StrCat(key, "/part_", part);
}

}  // namespace recflow::embedding
