// HashEmbeddingTable: export (full and delta, streamed in chunks sorted by key
// or in storage order) and
// import (merge) of rows as tensors.
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <utility>

#include "recflow/core/status.h"
#include "recflow/embedding/hash_embedding_table.h"

namespace recflow::embedding {

namespace {

// "int64 [3,16]" for messages.
std::string Describe(const Tensor& t) {
  return absl::StrCat(DataTypeString(t.dtype()), " ", t.shape().DebugString());
}

bool Present(const Tensor& t) { return t.dtype() != DT_INVALID; }

// dst[0, n) = src[0, n), inlined: a row is a few dozen bytes, and a memcpy
// call per row was a large part of export and import passes.
inline void CopyFloats(float* __restrict dst, const float* __restrict src, int64_t n) {
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) __builtin_memcpy(dst + k, src + k, 16 * sizeof(float));
  for (; k < n; ++k) dst[k] = src[k];
}

}  // namespace

absl::Status HashEmbeddingTable::ValidateChunk(const TableChunk& c) const {
  auto bad = [this](auto... what) {
    return errors::InvalidArgument("Import into embedding table '",
                                   options_.name, "': ", what...);
  };
  if (c.keys.dtype() != DT_INT64 || c.keys.dims() != 1) {
    return bad("keys must be int64 [n], got ", Describe(c.keys));
  }
  const int64_t n = c.keys.dim_size(0);
  const int64_t dim = options_.dim;
  if (c.values.dtype() != DT_FLOAT || c.values.dims() != 2 ||
      c.values.dim_size(0) != n || c.values.dim_size(1) != dim) {
    return bad("values must be float [n=", n, ", dim=", dim, "], got ",
               Describe(c.values));
  }
  // Quantized rows keep no slots: a chunk's are dropped.
  if (Present(c.slots) && !quantized_) {
    if (c.slots.dtype() != DT_FLOAT || c.slots.dims() != 3 ||
        c.slots.dim_size(0) != n || c.slots.dim_size(2) != dim ||
        (c.slots.dim_size(1) != num_slots_ && c.slots.dim_size(1) != 0)) {
      return bad("slots must be float [n=", n, ", num_slots=", num_slots_, " (",
                 OptimizerName(options_.optimizer), "), dim=", dim,
                 "] or have 0 slots, got ", Describe(c.slots));
    }
  }
  for (const auto& [t, name] :
       {std::pair<const Tensor*, const char*>{&c.frequencies, "frequencies"},
        {&c.versions, "versions"}}) {
    if (Present(*t) &&
        (t->dtype() != DT_INT64 || t->dims() != 1 || t->dim_size(0) != n)) {
      return bad(name, " must be int64 [n=", n, "], got ", Describe(*t));
    }
  }
  return absl::OkStatus();
}

absl::Status HashEmbeddingTable::Import(const TableChunk& chunk,
                                        ThreadPool* pool) {
  RETURN_IF_ERROR(ValidateChunk(chunk));
  const int64_t n = chunk.keys.dim_size(0);
  if (n == 0) return absl::OkStatus();
  const int64_t dim = options_.dim;
  const int64_t* keys = chunk.keys.data<int64_t>();
  const float* values = chunk.values.data<float>();
  const float* slots =
      Present(chunk.slots) && chunk.slots.dim_size(1) > 0 && !quantized_
          ? chunk.slots.data<float>()
          : nullptr;
  const int64_t* freqs =
      Present(chunk.frequencies) ? chunk.frequencies.data<int64_t>() : nullptr;
  const int64_t* versions =
      Present(chunk.versions) ? chunk.versions.data<int64_t>() : nullptr;
  const int64_t default_version = clock() + 1;
  const absl::Span<const int64_t> key_span(keys, n);
  const ShardGroups groups = GroupByShard(key_span);
  std::vector<absl::Status> statuses(options_.num_shards);
  ForEachShard(n * (60 + 2 * row_floats_), pool, [&](int si) {
    const int64_t b = groups.begin[si], e = groups.begin[si + 1];
    if (b == e) return;
    Shard& s = shards_[si];
    MaybeReaderLock migrating(&migration_mu_, tiered_);
    WriterLock lock(&s.mu);
    // Prefetching the index entries a few rows ahead hides most of the
    // cache misses of a big table's random probes.
    constexpr int64_t kAhead = 8;
    for (int64_t k = b; k < std::min(e, b + kAhead); ++k) {
      s.index.prefetch(keys[groups.positions[k]]);
    }
    // Counted here and added once: a locked add per row would wait for
    // every store before it (the new rows' first touches) to drain.
    int64_t inserted = 0;
    // Note [Tiers]: a tiered table takes the rows in pieces, each after
    // making room for it (its rows replace their cold copies), so memory
    // overshoots the budget by a piece at most; others take them at once.
    const int64_t piece =
        tiered_ ? std::max<int64_t>(16, HotCap(s) / 4) : e - b;
    for (int64_t pb = b; pb < e; pb += piece) {
      const int64_t pe = std::min(e, pb + piece);
      if (tiered_) {
        std::vector<int64_t> piece_ids;
        piece_ids.reserve(pe - pb);
        int64_t need = 0;
        for (int64_t k = pb; k < pe; ++k) {
          piece_ids.push_back(keys[groups.positions[k]]);
          need += s.index.contains(piece_ids.back()) ? 0 : 1;
        }
        statuses[si] = MakeRoom(s, need, piece_ids);
        if (!statuses[si].ok()) {
          s.inserts.fetch_add(inserted, std::memory_order_relaxed);
          return;
        }
        s.cold->Remove(piece_ids);
      }
      for (int64_t k = pb; k < pe; ++k) {
        const int64_t pos = groups.positions[k];
        if (k + kAhead < e)
          s.index.prefetch(keys[groups.positions[k + kAhead]]);
        const int64_t version = versions ? versions[pos] : default_version;
        // One probe: insert a placeholder, and fill it in for a new row.
        auto [it, fresh] = s.index.try_emplace(keys[pos], 0u);
        if (fresh) {
          // The chunk supplies the weights (and the slots, or InitSlots
          // below), so the row is not initialized first.
          absl::StatusOr<uint32_t> allocated = AllocateSlot(s);
          if (!allocated.ok()) {
            s.index.erase(it);
            statuses[si] = allocated.status();
            s.inserts.fetch_add(inserted, std::memory_order_relaxed);
            return;
          }
          it->second = *allocated;
          Meta(s, *allocated).id = keys[pos];
          ++inserted;
          // Note [Base rows]: the new row hides the base's.
          if (base_ != nullptr && base_->Find(keys[pos]) >= 0)
            s.base_hidden.insert(keys[pos]);
        }
        const uint32_t slot = it->second;
        if (quantized_) {
          WriteWeights(s, slot, values + pos * dim);
        } else {
          float* row = RowData(s, slot);
          CopyFloats(row, values + pos * dim, dim);
          if (slots != nullptr) {
            CopyFloats(row + dim, slots + pos * num_slots_ * dim,
                       num_slots_ * dim);
          } else {
            InitSlots(row);
          }
        }
        RowMeta& meta = Meta(s, slot);
        meta.frequency.store(freqs ? freqs[pos] : 0, std::memory_order_relaxed);
        meta.version = version;
      }
    }
    s.inserts.fetch_add(inserted, std::memory_order_relaxed);
  });
  if (versions != nullptr) {
    AdvanceClock(*std::max_element(versions, versions + n));
  }
  for (const absl::Status& st : statuses) RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

void HashEmbeddingTable::Reserve(int64_t rows) {
  if (rows <= 0) return;
  int64_t per_shard = rows / options_.num_shards + rows / options_.num_shards / 8 + 16;
  int64_t cold_per_shard = 0;
  if (tiered_) {
    // Note [Tiers]: what will not fit in memory gets its cold index now,
    // so the budget counts it from the first row on (rather than memory
    // filling with rows while the cold index is small, and the index then
    // growing past the budget). The cold index costs ~20 bytes a row.
    const int64_t hot = std::clamp<int64_t>(
        (shard_budget_bytes_ - 20 * per_shard) / stride_bytes_, 0, per_shard);
    cold_per_shard = per_shard - hot;
    per_shard = hot + 16;
  }
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    WriterLock lock(&s.mu);
    if (static_cast<int64_t>(s.index.size()) < per_shard) s.index.reserve(per_shard);
    if (cold_per_shard > 0) s.cold->Reserve(cold_per_shard);
  }
}

std::vector<int64_t> HashEmbeddingTable::CollectKeys(int64_t since_step,
                                                     ThreadPool* pool) const {
  const int n_shards = options_.num_shards;
  std::vector<std::vector<int64_t>> per_shard(n_shards);
  // Each shard collects and sorts its keys (in parallel); a k-way merge
  // gives the sorted whole.
  ForEachShard(size() * 60, pool, [&](int si) {
    Shard& s = shards_[si];
    std::vector<int64_t>& keys = per_shard[si];
    {
      ReaderLock lock(&s.mu);
      keys.reserve(s.index.size());
      for (const auto& [id, slot] : s.index) {
        if (since_step < 0 || Meta(s, slot).version > since_step) {
          keys.push_back(id);
        }
      }
      if (s.cold != nullptr) {
        // Note [Tiers]: candidates by the cold index's versions (CopyChunk
        // reads the rows; a few may be older than since_step: harmless in
        // a delta).
        const std::vector<int64_t> cold = s.cold->IdsSince(since_step);
        keys.insert(keys.end(), cold.begin(), cold.end());
      }
    }
    std::sort(keys.begin(), keys.end());
  });
  // Note [Base rows]: the visible base rows, sorted into their shards' lists.
  std::shared_ptr<const MappedRows> base;
  {
    ReaderLock lock(&shards_[0].mu);
    base = base_;
  }
  if (base != nullptr) {
    for (int64_t row = 0; row < base->size(); ++row) {
      if (since_step >= 0 && base->version(row) <= since_step) continue;
      const int64_t id = base->id(row);
      Shard& s = shards_[ShardOf(id)];
      ReaderLock lock(&s.mu);
      if (base_ == base && !s.base_hidden.contains(id)) per_shard[ShardOf(id)].push_back(id);
    }
    ForEachShard(size() * 20, pool, [&](int si) {
      std::sort(per_shard[si].begin(), per_shard[si].end());
    });
  }
  size_t total = 0;
  for (const auto& v : per_shard) total += v.size();
  std::vector<int64_t> keys;
  keys.reserve(total);
  using Head = std::pair<int64_t, int>;  // (key, shard)
  std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
  std::vector<size_t> next(n_shards, 0);
  for (int si = 0; si < n_shards; ++si) {
    if (!per_shard[si].empty()) heap.push({per_shard[si][0], si});
  }
  while (!heap.empty()) {
    const auto [key, si] = heap.top();
    heap.pop();
    keys.push_back(key);
    if (++next[si] < per_shard[si].size()) heap.push({per_shard[si][next[si]], si});
  }
  return keys;
}

absl::StatusOr<TableChunk> HashEmbeddingTable::CopyChunk(
    absl::Span<const int64_t> keys, bool include_values, bool include_slots,
    ThreadPool* pool) const {
  const int64_t n = static_cast<int64_t>(keys.size());
  const int64_t dim = options_.dim;
  TableChunk c;
  ASSIGN_OR_RETURN(c.keys, Tensor::Create(DT_INT64, TensorShape({n})));
  if (include_values) {
    ASSIGN_OR_RETURN(c.values, Tensor::Create(DT_FLOAT, TensorShape({n, dim})));
  }
  if (include_slots) {
    ASSIGN_OR_RETURN(
        c.slots, Tensor::Create(DT_FLOAT, TensorShape({n, num_slots_, dim})));
  }
  ASSIGN_OR_RETURN(c.frequencies, Tensor::Create(DT_INT64, TensorShape({n})));
  ASSIGN_OR_RETURN(c.versions, Tensor::Create(DT_INT64, TensorShape({n})));
  int64_t* out_keys = c.keys.data<int64_t>();
  float* out_values = include_values ? c.values.data<float>() : nullptr;
  // Null for a table without slots too: its slots tensor is [n, 0, dim].
  float* out_slots =
      include_slots && num_slots_ > 0 ? c.slots.data<float>() : nullptr;
  int64_t* out_freqs = c.frequencies.data<int64_t>();
  int64_t* out_versions = c.versions.data<int64_t>();
  std::vector<char> found(n, 0);
  std::vector<absl::Status> statuses(options_.num_shards);
  const ShardGroups groups = GroupByShard(keys);
  // Shards copy in parallel: each takes its own lock and writes the
  // positions of its own keys only.
  ForEachShard(n * (30 + 2 * row_floats_), pool, [&](int si) {
    const int64_t b = groups.begin[si], e = groups.begin[si + 1];
    if (b == e) return;
    Shard& s = shards_[si];
    ReaderLock lock(&s.mu);
    std::vector<int64_t> cold_positions;  // Note [Tiers]
    for (int64_t k = b; k < e; ++k) {
      const int64_t pos = groups.positions[k];
      auto it = s.index.find(keys[pos]);
      if (it == s.index.end() && s.cold != nullptr &&
          s.cold->Contains(keys[pos])) {
        cold_positions.push_back(pos);
        continue;
      }
      if (it == s.index.end()) {
        const int64_t row = VisibleBaseRow(s, keys[pos]);
        if (row < 0) continue;  // removed since CollectKeys
        found[pos] = 1;
        out_keys[pos] = keys[pos];
        if (out_values != nullptr) {
          std::memcpy(out_values + pos * dim, base_->weights(row), dim * sizeof(float));
        }
        if (out_slots != nullptr) {
          if (base_->has_slots()) {
            std::memcpy(out_slots + pos * num_slots_ * dim, base_->slots(row),
                        num_slots_ * dim * sizeof(float));
          } else {
            for (int k = 0; k < num_slots_; ++k) {
              std::fill_n(out_slots + (pos * num_slots_ + k) * dim, dim, slot_init_[k]);
            }
          }
        }
        out_freqs[pos] = base_->frequency(row);
        out_versions[pos] = base_->version(row);
        continue;
      }
      found[pos] = 1;
      out_keys[pos] = keys[pos];
      if (out_values != nullptr) ReadWeights(s, it->second, out_values + pos * dim);
      if (out_slots != nullptr) {
        const float* row = RowData(s, it->second);
        std::memcpy(out_slots + pos * num_slots_ * dim, row + dim,
                    num_slots_ * dim * sizeof(float));
      }
      const RowMeta& meta = Meta(s, it->second);
      out_freqs[pos] = meta.frequency.load(std::memory_order_relaxed);
      out_versions[pos] = meta.version;
    }
    if (cold_positions.empty()) return;
    std::vector<int64_t> cold_ids;
    for (const int64_t pos : cold_positions) cold_ids.push_back(keys[pos]);
    ColdRows cold;
    statuses[si] = ReadCold(s, cold_ids, &cold);
    if (!statuses[si].ok()) return;
    // ReadCold keeps the order of the ids it was given (all in the log).
    for (size_t k = 0; k < cold.ids.size(); ++k) {
      if (!cold.found[k]) continue;
      const int64_t pos = cold_positions[k];
      const float* row = cold.rows.data() + k * row_floats_;
      found[pos] = 1;
      out_keys[pos] = keys[pos];
      if (out_values != nullptr)
        std::memcpy(out_values + pos * dim, row, dim * sizeof(float));
      if (out_slots != nullptr) {
        std::memcpy(out_slots + pos * num_slots_ * dim, row + dim,
                    num_slots_ * dim * sizeof(float));
      }
      out_freqs[pos] = cold.freqs[k];
      out_versions[pos] = cold.versions[k];
    }
  });
  for (const absl::Status& st : statuses) RETURN_IF_ERROR(st);
  // Close the gaps of rows that vanished meanwhile, keeping key order.
  int64_t m = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!found[i]) continue;
    if (m != i) {
      out_keys[m] = out_keys[i];
      if (out_values != nullptr) {
        std::memmove(out_values + m * dim, out_values + i * dim,
                     dim * sizeof(float));
      }
      if (out_slots != nullptr) {
        std::memmove(out_slots + m * num_slots_ * dim,
                     out_slots + i * num_slots_ * dim,
                     num_slots_ * dim * sizeof(float));
      }
      out_freqs[m] = out_freqs[i];
      out_versions[m] = out_versions[i];
    }
    ++m;
  }
  if (m != n) {
    c.keys = c.keys.Slice(0, m);
    if (include_values) c.values = c.values.Slice(0, m);
    if (include_slots) c.slots = c.slots.Slice(0, m);
    c.frequencies = c.frequencies.Slice(0, m);
    c.versions = c.versions.Slice(0, m);
  }
  return c;
}

absl::Status HashEmbeddingTable::ExportInStorageOrder(
    const ExportOptions& options,
    const std::function<absl::Status(const TableChunk&)>& sink,
    ExportResult* result, ThreadPool* pool) const {
  const int64_t dim = options_.dim;
  const int64_t max_rows = options.max_rows_per_chunk;
  const bool with_values = options.include_values;
  const bool with_slots = options.include_slots;
  // Slot data per row; 0 for a table without slots (its tensor is
  // [n, 0, dim]).
  const int64_t slot_floats = with_slots ? num_slots_ * dim : 0;
  // The work, in output order: ranges of at most max_rows slots of one
  // shard (each becomes one chunk of its live rows; ranges with none are
  // skipped).
  // shard -1: rows [begin, end) of the base (Note [Base rows]), after
  // every shard's.
  // Note [Tiers]: then each shard's cold rows, after the rows in memory:
  // records [begin, end) of its file for a full export, or for a delta
  // entries [begin, end) of its candidate ids (cold_ids).
  enum class Kind { kMemory, kColdRecords, kColdIds };
  struct Range {
    int shard;
    int64_t begin, end;
    Kind kind = Kind::kMemory;
  };
  std::vector<Range> ranges;
  std::vector<std::vector<int64_t>> cold_ids(options_.num_shards);
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    uint32_t end;
    {
      ReaderLock lock(&s.mu);
      end = s.next_slot;
    }
    for (int64_t b = 0; b < end; b += max_rows) {
      ranges.push_back({si, b, std::min<int64_t>(end, b + max_rows)});
    }
  }
  for (int si = 0; si < options_.num_shards && tiered_; ++si) {
    Shard& s = shards_[si];
    ReaderLock lock(&s.mu);
    if (options.since_step < 0) {
      const int64_t records = static_cast<int64_t>(s.cold->records());
      for (int64_t b = 0; b < records; b += max_rows) {
        ranges.push_back(
            {si, b, std::min(records, b + max_rows), Kind::kColdRecords});
      }
    } else {
      cold_ids[si] = s.cold->IdsSince(options.since_step);
      const int64_t n = static_cast<int64_t>(cold_ids[si].size());
      for (int64_t b = 0; b < n; b += max_rows) {
        ranges.push_back({si, b, std::min(n, b + max_rows), Kind::kColdIds});
      }
    }
  }
  std::shared_ptr<const MappedRows> base;
  {
    ReaderLock lock(&shards_[0].mu);
    base = base_;
  }
  if (base != nullptr) {
    for (int64_t b = 0; b < base->size(); b += max_rows) {
      ranges.push_back({-1, b, std::min<int64_t>(base->size(), b + max_rows)});
    }
  }
  // A chunk's buffers; reused unless the sink kept a reference to them.
  struct Buffers {
    Tensor keys, values, slots, freqs, versions;
    int64_t rows = 0;
    absl::Status status;
  };
  auto allocate = [&](Buffers* b) -> absl::Status {
    ASSIGN_OR_RETURN(b->keys, Tensor::Create(DT_INT64, TensorShape({max_rows})));
    if (with_values) {
      ASSIGN_OR_RETURN(b->values, Tensor::Create(DT_FLOAT, TensorShape({max_rows, dim})));
    }
    if (with_slots) {
      ASSIGN_OR_RETURN(b->slots,
                       Tensor::Create(DT_FLOAT, TensorShape({max_rows, num_slots_, dim})));
    }
    ASSIGN_OR_RETURN(b->freqs, Tensor::Create(DT_INT64, TensorShape({max_rows})));
    ASSIGN_OR_RETURN(b->versions, Tensor::Create(DT_INT64, TensorShape({max_rows})));
    return absl::OkStatus();
  };
  auto kept = [&](const Buffers& b) {
    return !b.keys.RefCountIsOne() || (with_values && !b.values.RefCountIsOne()) ||
           (with_slots && !b.slots.RefCountIsOne()) || !b.freqs.RefCountIsOne() ||
           !b.versions.RefCountIsOne();
  };
  // Where a fill writes: b's columns (values and slots null when not
  // exported; slots null for a table without slots too).
  struct Columns {
    int64_t* keys;
    float* values;
    float* slots;
    int64_t* freqs;
    int64_t* versions;
  };
  auto columns = [&](Buffers* b) {
    return Columns{b->keys.data<int64_t>(), with_values ? b->values.data<float>() : nullptr,
                   slot_floats > 0 ? b->slots.data<float>() : nullptr,
                   b->freqs.data<int64_t>(), b->versions.data<int64_t>()};
  };
  // Copies the visible base rows of `r` into `b`: the candidates by version,
  // then each shard's hidden ids are checked under its reader lock.
  auto fill_base = [&](const Range& r, Buffers* b) {
    std::vector<int64_t> rows, ids;
    for (int64_t row = r.begin; row < r.end; ++row) {
      if (options.since_step >= 0 && base->version(row) <= options.since_step) continue;
      rows.push_back(row);
      ids.push_back(base->id(row));
    }
    std::vector<char> visible(rows.size(), 0);
    const ShardGroups groups = GroupByShard(ids);
    for (int si = 0; si < options_.num_shards; ++si) {
      const int64_t gb = groups.begin[si], ge = groups.begin[si + 1];
      if (gb == ge) continue;
      Shard& s = shards_[si];
      ReaderLock lock(&s.mu);
      if (base_ != base) continue;  // cleared meanwhile: no rows
      for (int64_t k = gb; k < ge; ++k) {
        const int64_t pos = groups.positions[k];
        visible[pos] = s.base_hidden.empty() || !s.base_hidden.contains(ids[pos]);
      }
    }
    int64_t m = 0;
    const Columns c = columns(b);
    for (size_t k = 0; k < rows.size(); ++k) {
      if (!visible[k]) continue;
      const int64_t row = rows[k];
      c.keys[m] = ids[k];
      if (c.values != nullptr) CopyFloats(c.values + m * dim, base->weights(row), dim);
      if (c.slots != nullptr) {
        if (base->has_slots()) {
          CopyFloats(c.slots + m * slot_floats, base->slots(row), slot_floats);
        } else {
          for (int j = 0; j < num_slots_; ++j) {
            std::fill_n(c.slots + m * slot_floats + j * dim, dim, slot_init_[j]);
          }
        }
      }
      c.freqs[m] = base->frequency(row);
      c.versions[m] = base->version(row);
      ++m;
    }
    b->rows = m;
  };
  // Copies the cold rows of `r` into `b` under the shard's reader lock.
  auto fill_cold = [&](const Range& r, Buffers* b) {
    Shard& s = shards_[r.shard];
    ReaderLock lock(&s.mu);
    ColdRows cold;
    if (r.kind == Kind::kColdRecords) {
      b->status =
          s.cold->ReadRange(r.begin, r.end, options.since_step, &cold.ids,
                            &cold.rows, &cold.freqs, &cold.versions);
      cold.found.assign(cold.ids.size(), 1);
    } else {
      b->status =
          ReadCold(s,
                   std::vector<int64_t>(cold_ids[r.shard].begin() + r.begin,
                                        cold_ids[r.shard].begin() + r.end),
                   &cold);
    }
    if (!b->status.ok()) return;
    int64_t m = 0;
    const Columns c = columns(b);
    for (size_t k = 0; k < cold.ids.size(); ++k) {
      if (!cold.found[k] ||
          (options.since_step >= 0 && cold.versions[k] <= options.since_step)) {
        continue;
      }
      const float* row = cold.rows.data() + k * row_floats_;
      c.keys[m] = cold.ids[k];
      if (c.values != nullptr) CopyFloats(c.values + m * dim, row, dim);
      if (c.slots != nullptr)
        CopyFloats(c.slots + m * slot_floats, row + dim, slot_floats);
      c.freqs[m] = cold.freqs[k];
      c.versions[m] = cold.versions[k];
      ++m;
    }
    b->rows = m;
  };
  // Copies the live rows of `r` into `b` under the shard's reader lock.
  auto fill = [&](const Range& r, Buffers* b) {
    b->rows = 0;
    if (!b->keys.IsInitialized() || kept(*b)) {
      b->status = allocate(b);
      if (!b->status.ok()) return;
    }
    if (r.shard < 0) {
      fill_base(r, b);
      return;
    }
    if (r.kind != Kind::kMemory) {
      fill_cold(r, b);
      return;
    }
    Shard& s = shards_[r.shard];
    ReaderLock lock(&s.mu);
    const uint32_t end = static_cast<uint32_t>(std::min<int64_t>(r.end, s.next_slot));
    int64_t m = 0;
    const Columns c = columns(b);
    for (uint32_t cursor = static_cast<uint32_t>(r.begin); cursor < end; ++cursor) {
      const RowMeta& meta = Meta(s, cursor);
      if (meta.version == kFreeSlotVersion) continue;
      if (options.since_step >= 0 && meta.version <= options.since_step) continue;
      c.keys[m] = meta.id;
      if (c.values != nullptr) {
        if (quantized_) {
          ReadWeights(s, cursor, c.values + m * dim);
        } else {
          CopyFloats(c.values + m * dim, RowData(s, cursor), dim);
        }
      }
      if (c.slots != nullptr) CopyFloats(c.slots + m * slot_floats, RowData(s, cursor) + dim, slot_floats);
      c.freqs[m] = meta.frequency.load(std::memory_order_relaxed);
      c.versions[m] = meta.version;
      ++m;
    }
    b->rows = m;
  };
  auto emit = [&](const Buffers& b) -> absl::Status {
    TableChunk c;
    c.keys = b.keys.Slice(0, b.rows);
    if (with_values) c.values = b.values.Slice(0, b.rows);
    if (with_slots) c.slots = b.slots.Slice(0, b.rows);
    c.frequencies = b.freqs.Slice(0, b.rows);
    c.versions = b.versions.Slice(0, b.rows);
    RETURN_IF_ERROR(sink(c));
    result->rows += b.rows;
    ++result->chunks;
    return absl::OkStatus();
  };
  // With a pool, up to `window` ranges are filled ahead on it while this
  // thread hands the filled ones to the sink in order (on 2 cores the
  // copies out of the table and the sink's own work, a checkpoint's copy
  // into its write buffer and checksum, then overlap). No table lock is
  // held by this thread while the sink runs; fills of later ranges may
  // hold reader locks meanwhile.
  const int64_t nr = static_cast<int64_t>(ranges.size());
  // Inline on a thread of the pool itself: waiting there for its tasks
  // could leave none to run them.
  const bool ahead = pool != nullptr && nr >= 2 && pool->CurrentThreadId() < 0;
  const int window = ahead ? pool->NumThreads() + 1 : 1;
  std::vector<Buffers> ring(window);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<char> done(window, 0);  // guarded by mu
  int in_flight = 0;                  // guarded by mu
  int64_t next_fill = 0;
  auto launch = [&](int64_t sinking) {
    for (; next_fill < nr && next_fill - sinking < window; ++next_fill) {
      const int idx = static_cast<int>(next_fill % window);
      const Range r = ranges[next_fill];
      if (window == 1) {
        fill(r, &ring[idx]);
        done[idx] = 1;
        continue;
      }
      {
        std::lock_guard<std::mutex> l(mu);
        done[idx] = 0;
        ++in_flight;
      }
      pool->Schedule([&, r, idx] {
        fill(r, &ring[idx]);
        std::lock_guard<std::mutex> l(mu);
        done[idx] = 1;
        --in_flight;
        cv.notify_all();
      });
    }
  };
  absl::Status status;
  for (int64_t k = 0; k < nr && status.ok(); ++k) {
    launch(k);
    const int idx = static_cast<int>(k % window);
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return done[idx] != 0; });
    }
    Buffers& b = ring[idx];
    status = b.status;
    if (status.ok() && b.rows > 0) status = emit(b);
  }
  {
    // Fills still running reference this frame: wait for them.
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return in_flight == 0; });
  }
  RETURN_IF_ERROR(status);
  // An empty table (or one with no rows in range) still calls the sink once.
  if (result->chunks == 0) {
    TableChunk c;
    c.keys = Tensor(DT_INT64, TensorShape({0}));
    if (with_values) c.values = Tensor(DT_FLOAT, TensorShape({0, dim}));
    if (with_slots) c.slots = Tensor(DT_FLOAT, TensorShape({0, num_slots_, dim}));
    c.frequencies = Tensor(DT_INT64, TensorShape({0}));
    c.versions = Tensor(DT_INT64, TensorShape({0}));
    RETURN_IF_ERROR(sink(c));
    ++result->chunks;
  }
  return absl::OkStatus();
}

Tensor HashEmbeddingTable::DeletedIdsSince(int64_t since_step) const {
  std::vector<int64_t> ids;
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    ReaderLock lock(&s.mu);
    for (const DeletionEntry& e : s.deletion_log) {
      if (e.step > since_step) ids.push_back(e.id);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return Tensor::FromVector<int64_t>(absl::MakeConstSpan(ids));
}

absl::StatusOr<ExportResult> HashEmbeddingTable::Export(
    const ExportOptions& options,
    const std::function<absl::Status(const TableChunk&)>& sink,
    ThreadPool* pool) {
  if (options.max_rows_per_chunk <= 0) {
    return errors::InvalidArgument("Export of embedding table '", options_.name,
                                   "': max_rows_per_chunk must be > 0, got ",
                                   options.max_rows_per_chunk);
  }
  ExportResult result;
  {
    // Note [Base rows]: rows are not copied out of a base whose checksum
    // pass has not ended (it may yet fail).
    std::shared_ptr<const MappedRows> base;
    {
      ReaderLock lock(&shards_[0].mu);
      base = base_;
    }
    if (base != nullptr) {
      RETURN_IF_ERROR(errors::Annotate(base->WaitVerified(),
                                       absl::StrCat("Export of embedding table '", options_.name,
                                                    "'")));
    }
  }
  if (options.evict_at_step.has_value()) {
    result.eviction = Evict(*options.evict_at_step, pool);
  }
  // Note [Tiers]: no row moves between memory and the cold tier meanwhile,
  // so each is exported once.
  // The copies run on this thread: lookups waiting for the lock may hold
  // the pool's threads.
  MaybeWriterLock freeze(&migration_mu_, tiered_);
  if (tiered_) pool = nullptr;
  if (options.order == ExportOptions::Order::kStorage) {
    RETURN_IF_ERROR(ExportInStorageOrder(options, sink, &result, pool));
    result.deleted_ids = options.since_step >= 0
                             ? DeletedIdsSince(options.since_step)
                             : Tensor(DT_INT64, TensorShape({0}));
    return result;
  }
  const std::vector<int64_t> keys = CollectKeys(options.since_step, pool);
  const int64_t total = static_cast<int64_t>(keys.size());
  int64_t start = 0;
  do {
    const int64_t len = std::min(options.max_rows_per_chunk, total - start);
    ASSIGN_OR_RETURN(const TableChunk chunk,
                     CopyChunk(absl::MakeConstSpan(keys.data() + start, len),
                               options.include_values, options.include_slots, pool));
    RETURN_IF_ERROR(sink(chunk));
    result.rows += chunk.keys.dim_size(0);
    ++result.chunks;
    start += len;
  } while (start < total);
  result.deleted_ids = options.since_step >= 0
                           ? DeletedIdsSince(options.since_step)
                           : Tensor(DT_INT64, TensorShape({0}));
  return result;
}

}  // namespace recflow::embedding
