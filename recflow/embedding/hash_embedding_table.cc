// HashEmbeddingTable: storage, lookup, optimizer steps, eviction and stats.
// Export and import live in hash_embedding_table_io.cc.
#include "recflow/embedding/hash_embedding_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/core/allocator.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/embedding/update_rules.h"

namespace recflow::embedding {

namespace {

// Below this much estimated work a call runs on the caller alone.
constexpr int64_t kParallelThresholdNs = 50'000;
constexpr uint32_t kMaxSlots = std::numeric_limits<uint32_t>::max();

// True when no element is NaN or infinite (exponent bits all ones), without
// an early exit so the loop vectorizes.
bool AllFinite(const float* g, int64_t dim) {
  uint32_t any_special = 0;
  for (int64_t i = 0; i < dim; ++i) {
    uint32_t bits;
    std::memcpy(&bits, g + i, sizeof(bits));
    any_special |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any_special == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<HashEmbeddingTable>> HashEmbeddingTable::Create(
    const EmbeddingTableOptions& options) {
  RETURN_IF_ERROR(Validate(options));
  std::unique_ptr<HashEmbeddingTable> table(new HashEmbeddingTable(options));
  if (table->tiered_) RETURN_IF_ERROR(table->OpenColdTier());
  return table;
}

HashEmbeddingTable::HashEmbeddingTable(const EmbeddingTableOptions& options)
    : options_(options),
      quantized_(options.row_format != RowFormat::kFloat32),
      num_slots_(quantized_ ? 0 : NumSlots(options.optimizer)),
      row_floats_(options.dim * (1 + num_slots_)),
      stride_bytes_(
          (sizeof(RowMeta) +
           (quantized_ ? EncodedRowBytes(options.row_format, options.dim)
                       : row_floats_ * static_cast<int64_t>(sizeof(float))) +
           7) /
          8 * 8),
      initializer_(options.initializer, options.seed, options.dim),
      shards_(new Shard[options.num_shards]),
      tiered_(options.tier.dram_budget_bytes > 0) {
  shard_shift_ =
      64 - absl::countr_zero(static_cast<unsigned>(options_.num_shards));
  int64_t per_slab = options_.rows_per_slab;
  if (per_slab == 0) {
    per_slab = std::max<int64_t>(16, (256 << 10) / stride_bytes_);
    if (tiered_) {
      // Note [Tiers]: memory comes and goes by the slab; a slab is at most
      // 1/16 of a shard's budget.
      const int64_t shard_rows =
          options_.tier.dram_budget_bytes / options_.num_shards / stride_bytes_;
      per_slab = std::max<int64_t>(16, std::min(per_slab, shard_rows / 16));
    }
  }
  rows_per_slab_ =
      static_cast<int64_t>(absl::bit_ceil(static_cast<uint64_t>(per_slab)));
  slab_shift_ = absl::countr_zero(static_cast<uint64_t>(rows_per_slab_));
  slab_mask_ = static_cast<uint32_t>(rows_per_slab_ - 1);

  default_row_.assign(options_.dim, 0.0f);
  if (options_.default_value.size() == 1) {
    std::fill(default_row_.begin(), default_row_.end(),
              options_.default_value[0]);
  } else if (!options_.default_value.empty()) {
    default_row_ = options_.default_value;
  }
  switch (options_.optimizer) {
    case OptimizerKind::kSgd:
      break;
    case OptimizerKind::kAdagrad:
      slot_init_ = {options_.initial_accumulator_value};
      break;
    case OptimizerKind::kAdam:
      slot_init_ = {0.0f, 0.0f};
      break;
    case OptimizerKind::kFtrl:
      slot_init_ = {options_.initial_accumulator_value, 0.0f};
      break;
  }
  if (options_.admission.kind != AdmissionOptions::Kind::kAlways) {
    const int64_t width = std::max<int64_t>(
        1, options_.admission.sketch_width / options_.num_shards);
    for (int i = 0; i < options_.num_shards; ++i) {
      Shard& s = shards_[i];
      WriterLock lock(&s.mu);
      s.sketch = CountMinSketch(width, options_.admission.sketch_depth,
                                Mix64(options_.seed + i + 1));
    }
  }
}

HashEmbeddingTable::~HashEmbeddingTable() {
  if (tiered_) CloseColdTier();
  const size_t slab_bytes = rows_per_slab_ * stride_bytes_;
  static_assert(std::is_trivially_destructible_v<RowMeta>);
  for (int i = 0; i < options_.num_shards; ++i) {
    Shard& s = shards_[i];
    WriterLock lock(&s.mu);
    for (Slab& slab : s.slabs) {
      cpu_allocator()->DeallocateRaw(slab.data, slab_bytes);
    }
  }
}

HashEmbeddingTable::ShardGroups HashEmbeddingTable::GroupByShard(
    absl::Span<const int64_t> ids) const {
  const int n_shards = options_.num_shards;
  ShardGroups g;
  g.begin.assign(n_shards + 1, 0);
  g.positions.resize(ids.size());
  if (n_shards == 1) {
    g.begin[1] = static_cast<int64_t>(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) g.positions[i] = i;
    return g;
  }
  std::vector<uint16_t> shard_of(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    shard_of[i] = static_cast<uint16_t>(ShardOf(ids[i]));
    ++g.begin[shard_of[i] + 1];
  }
  for (int s = 0; s < n_shards; ++s) g.begin[s + 1] += g.begin[s];
  std::vector<int64_t> cursor(g.begin.begin(), g.begin.end() - 1);
  for (size_t i = 0; i < ids.size(); ++i) {
    g.positions[cursor[shard_of[i]]++] = static_cast<int64_t>(i);
  }
  return g;
}

void HashEmbeddingTable::ForEachShard(
    int64_t total_cost_ns, ThreadPool* pool,
    const std::function<void(int)>& fn) const {
  const int n = options_.num_shards;
  if (pool == nullptr || pool->NumThreads() <= 1 || n == 1 ||
      total_cost_ns < kParallelThresholdNs) {
    for (int s = 0; s < n; ++s) fn(s);
    return;
  }
  pool->ParallelFor(n, std::max<int64_t>(1, total_cost_ns / n),
                    [&fn](int64_t begin, int64_t end) {
                      for (int64_t s = begin; s < end; ++s) {
                        fn(static_cast<int>(s));
                      }
                    });
}

void HashEmbeddingTable::AdvanceClock(int64_t step) {
  int64_t cur = clock_.load(std::memory_order_relaxed);
  while (step > cur &&
         !clock_.compare_exchange_weak(cur, step, std::memory_order_relaxed)) {
  }
}

void HashEmbeddingTable::InitSlots(float* row) const {
  const int64_t dim = options_.dim;
  for (int k = 0; k < num_slots_; ++k) {
    float* slot = row + (k + 1) * dim;
    std::fill(slot, slot + dim, slot_init_[k]);
  }
}

absl::StatusOr<uint32_t> HashEmbeddingTable::AllocateSlotSlow(Shard& s) {
  if (!s.free_slots.empty()) {
    const uint32_t slot = s.free_slots.back();
    s.free_slots.pop_back();
    return slot;
  }
  if (s.next_slot == kMaxSlots) {
    return errors::ResourceExhausted("embedding table '", options_.name,
                                     "': a shard holds the maximum of ",
                                     kMaxSlots, " rows; use more shards");
  }
  const uint32_t slot = s.next_slot;
  if ((slot >> slab_shift_) == s.slabs.size()) {
    const size_t bytes = rows_per_slab_ * stride_bytes_;
    Slab slab;
    slab.data = static_cast<char*>(
        cpu_allocator()->AllocateRaw(kAllocatorAlignment, bytes));
    if (slab.data == nullptr) {
      return errors::ResourceExhausted("embedding table '", options_.name,
                                       "': cannot allocate a slab of ", bytes,
                                       " bytes for new rows");
    }
    // Every row's metadata is written just below, and the rows follow: one
    // call maps the slab in instead of a page fault per page.
    PrefaultForWrite(slab.data, bytes);
    for (int64_t r = 0; r < rows_per_slab_; ++r) {
      new (slab.data + r * stride_bytes_) RowMeta();
    }
    s.slabs.push_back(slab);
  }
  ++s.next_slot;
  return slot;
}

absl::StatusOr<uint32_t> HashEmbeddingTable::InsertRow(Shard& s, int64_t id,
                                                       int64_t version,
                                                       bool initialize) {
  ASSIGN_OR_RETURN(const uint32_t slot, AllocateSlot(s));
  if (initialize && quantized_) {
    std::vector<float> weights(static_cast<size_t>(options_.dim));
    initializer_.Init(id, weights.data());
    WriteWeights(s, slot, weights.data());
  } else if (initialize) {
    float* row = RowData(s, slot);
    initializer_.Init(id, row);
    InitSlots(row);
  }
  RowMeta& meta = Meta(s, slot);
  meta.id = id;
  meta.frequency.store(0, std::memory_order_relaxed);
  meta.version = version;
  s.index.emplace(id, slot);
  s.inserts.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

void HashEmbeddingTable::EraseRow(Shard& s, int64_t id, uint32_t slot,
                                  int64_t log_step) {
  // Marks the slot free for storage-order exports, which walk the slabs.
  Meta(s, slot).version = kFreeSlotVersion;
  s.free_slots.push_back(slot);
  s.deletion_log.push_back({id, log_step});
}

absl::StatusOr<uint32_t> HashEmbeddingTable::PromoteRow(Shard& s, int64_t id, int64_t row) {
  ASSIGN_OR_RETURN(const uint32_t slot, AllocateSlot(s));
  const int64_t dim = options_.dim;
  float* data = RowData(s, slot);  // a base never sits under quantized rows
  std::memcpy(data, base_->weights(row), dim * sizeof(float));
  if (num_slots_ > 0 && base_->has_slots()) {
    std::memcpy(data + dim, base_->slots(row), num_slots_ * dim * sizeof(float));
  } else {
    InitSlots(data);
  }
  RowMeta& meta = Meta(s, slot);
  meta.id = id;
  meta.frequency.store(base_->frequency(row), std::memory_order_relaxed);
  meta.version = base_->version(row);
  s.index.emplace(id, slot);
  s.base_hidden.insert(id);
  return slot;
}

void HashEmbeddingTable::LockAllShards() const {
  for (int si = 0; si < options_.num_shards; ++si) shards_[si].mu.Lock();
}

void HashEmbeddingTable::UnlockAllShards() const {
  for (int si = options_.num_shards - 1; si >= 0; --si) shards_[si].mu.Unlock();
}

absl::Status HashEmbeddingTable::AttachBase(std::shared_ptr<const MappedRows> base) {
  if (quantized_) {
    return errors::FailedPrecondition("embedding table '", options_.name, "' stores ",
                                      RowFormatName(options_.row_format),
                                      " rows; a mapped checkpoint's rows are float32");
  }
  if (base->dim() != options_.dim) {
    return errors::InvalidArgument("embedding table '", options_.name, "' has dim ",
                                   options_.dim, " but the mapped checkpoint ", base->source(),
                                   " has rows of ", base->dim());
  }
  const int64_t base_clock = base->clock();
  LockAllShards();
  absl::Status status;
  if (base_ != nullptr) {
    status = errors::FailedPrecondition("embedding table '", options_.name,
                                        "' already has a mapped base (", base_->source(), ")");
  }
  for (int si = 0; si < options_.num_shards && status.ok(); ++si) {
    if (!shards_[si].index.empty() ||
        (shards_[si].cold != nullptr && shards_[si].cold->size() > 0)) {
      status = errors::FailedPrecondition("embedding table '", options_.name,
                                          "' must be empty to take a mapped base; Clear() first");
    }
  }
  if (status.ok()) {
    base_ = std::move(base);
    has_base_hint_.store(true, std::memory_order_relaxed);
  }
  UnlockAllShards();
  if (status.ok()) AdvanceClock(base_clock);
  return status;
}

absl::Status HashEmbeddingTable::WaitForBase() const {
  std::shared_ptr<const MappedRows> base;
  {
    ReaderLock lock(&shards_[0].mu);
    base = base_;
  }
  return base == nullptr ? absl::OkStatus() : base->WaitVerified();
}

bool HashEmbeddingTable::has_base() const {
  Shard& s = shards_[0];
  ReaderLock lock(&s.mu);
  return base_ != nullptr;
}

bool HashEmbeddingTable::Admit(Shard& s, int64_t id, int64_t count) {
  const AdmissionOptions& a = options_.admission;
  switch (a.kind) {
    case AdmissionOptions::Kind::kAlways:
      return true;
    case AdmissionOptions::Kind::kCount:
      return s.sketch.Add(id, count) >= a.min_count;
    case AdmissionOptions::Kind::kProbability: {
      const int64_t before = s.sketch.Estimate(id);
      const int64_t after = s.sketch.Add(id, count);
      const int64_t trials = std::min(after - before, count);
      for (int64_t k = before + 1; k <= before + trials; ++k) {
        if (AdmissionDraw(options_.seed, id, k) < a.probability) return true;
      }
      return false;
    }
  }
  return false;
}

// Note [Two-phase lookup]: the ids of one shard are first served under the
// reader lock (the common case in steady-state training: the row exists), and
// only the misses take the writer lock, where each is looked up again (another
// thread may have created it meanwhile), counted toward admission once per
// call with all its occurrences, and created if admitted.
absl::Status HashEmbeddingTable::LookupShard(
    Shard& s, absl::Span<const int64_t> ids,
    absl::Span<const int64_t> positions, float* out, LookupMode mode,
    LookupResult* result) {
  const int64_t dim = options_.dim;
  const size_t row_bytes = dim * sizeof(float);
  const bool train = mode == LookupMode::kTrain;
  std::vector<int64_t> misses;
  ColdRows cold;  // Note [Tiers]
  {
    ReaderLock lock(&s.mu);
    if (base_ != nullptr && base_->verify_failed()) return base_->verify_status();
    // Note [Lookup pipeline]: a large table misses the cache on both the
    // index probe and the row, so the loop runs three stages apart: prefetch
    // the index for id i + kIndexAhead, probe id i + kRowAhead and prefetch
    // its row, copy row i. Found slots wait in a small ring.
    constexpr size_t kIndexAhead = 16, kRowAhead = 8, kRing = 16;
    static_assert(kRing > kRowAhead && (kRing & (kRing - 1)) == 0);
    const size_t n = positions.size();
    const int64_t prefetch_span = std::min<int64_t>(stride_bytes_, sizeof(RowMeta) + row_bytes);
    int64_t ring[kRing];
    // Quantized rows: the loop only finds them (and prefetches them); they
    // are decoded after it, when their lines have arrived. Decoding inside
    // the loop put a decode's worth of instructions behind every row miss,
    // so fewer index and row misses overlapped: a 4M-row int8 table looked
    // up at 0.65x float32's speed, against 1.2x without the decode.
    std::vector<std::pair<int64_t, uint32_t>> found;  // (position, slot)
    if (quantized_) found.reserve(n);
    for (size_t i = 0; i < std::min(n, kIndexAhead); ++i) {
      s.index.prefetch(ids[positions[i]]);
    }
    for (size_t i = 0; i < n + kRowAhead; ++i) {
      if (i < n) {
        if (i + kIndexAhead < n)
          s.index.prefetch(ids[positions[i + kIndexAhead]]);
        auto it = s.index.find(ids[positions[i]]);
        if (it == s.index.end()) {
          ring[i % kRing] = -1;
        } else {
          ring[i % kRing] = it->second;
          // The metadata and the weights (not the slots).
          const char* row = RowStart(s, it->second);
          __builtin_prefetch(row);
          __builtin_prefetch(row + prefetch_span - 1);
        }
      }
      if (i < kRowAhead) continue;
      const size_t j = i - kRowAhead;
      const int64_t pos = positions[j];
      const int64_t slot = ring[j % kRing];
      if (slot < 0) {
        misses.push_back(pos);
        continue;
      }
      if (!quantized_) {
        std::memcpy(out + pos * dim, RowData(s, static_cast<uint32_t>(slot)), row_bytes);
      } else {
        found.emplace_back(pos, static_cast<uint32_t>(slot));
      }
      if (train) BumpFrequency(Meta(s, static_cast<uint32_t>(slot)));
    }
    for (const auto& [pos, slot] : found) {
      DecodeRow(options_.row_format, RowStart(s, slot) + sizeof(RowMeta), dim, out + pos * dim);
    }
    s.dram_hits.fetch_add(static_cast<int64_t>(n - misses.size()),
                          std::memory_order_relaxed);
    if (tiered_ && !misses.empty()) {
      // Note [Tiers]: the misses' cold rows, read now under the reader lock.
      // kReadOnly copies them out; kTrain moves them in below.
      absl::flat_hash_set<int64_t> seen;
      std::vector<int64_t> wanted;
      int64_t occurrences = 0;
      for (const int64_t pos : misses) {
        if (!s.cold->Contains(ids[pos])) continue;
        ++occurrences;
        if (seen.insert(ids[pos]).second) wanted.push_back(ids[pos]);
      }
      if (!wanted.empty()) {
        s.cold_hits.fetch_add(occurrences, std::memory_order_relaxed);
        RETURN_IF_ERROR(ReadCold(s, std::move(wanted), &cold));
      }
      if (!train && !cold.ids.empty()) {
        absl::flat_hash_map<int64_t, size_t> at;
        for (size_t k = 0; k < cold.ids.size(); ++k) {
          if (cold.found[k]) at.emplace(cold.ids[k], k);
        }
        size_t kept = 0;
        for (const int64_t pos : misses) {
          auto it = at.find(ids[pos]);
          if (it == at.end()) {
            misses[kept++] = pos;
            continue;
          }
          std::memcpy(out + pos * dim,
                      cold.rows.data() + it->second * row_floats_, row_bytes);
        }
        misses.resize(kept);
      }
    }
    if (base_ != nullptr && !misses.empty() && !train) {
      // Note [Base rows]: the misses' base rows, found (index entries
      // prefetched ahead) and then copied (rows prefetched ahead). kTrain
      // skips this: its misses are looked up in the base (and promoted)
      // under the writer lock, once.
      constexpr size_t kAhead = 8;
      const size_t nm = misses.size();
      std::vector<int64_t> rows(nm);
      for (size_t m = 0; m < std::min(nm, kAhead); ++m) base_->PrefetchIndex(ids[misses[m]]);
      for (size_t m = 0; m < nm; ++m) {
        if (m + kAhead < nm) base_->PrefetchIndex(ids[misses[m + kAhead]]);
        rows[m] = VisibleBaseRow(s, ids[misses[m]]);
      }
      size_t kept = 0;
      for (size_t m = 0; m < nm; ++m) {
        if (m + kAhead < nm && rows[m + kAhead] >= 0) base_->PrefetchRow(rows[m + kAhead]);
        if (rows[m] < 0) {
          misses[kept++] = misses[m];
          continue;
        }
        std::memcpy(out + misses[m] * dim, base_->weights(rows[m]), row_bytes);
      }
      misses.resize(kept);
    }
  }
  result->found += static_cast<int64_t>(positions.size() - misses.size());
  if (misses.empty()) return absl::OkStatus();
  if (!train) {
    for (const int64_t pos : misses) {
      std::memcpy(out + pos * dim, default_row_.data(), row_bytes);
    }
    s.missing_lookups.fetch_add(misses.size(), std::memory_order_relaxed);
    result->defaulted += static_cast<int64_t>(misses.size());
    return absl::OkStatus();
  }

  // Distinct missing ids in first-occurrence order, with their counts.
  absl::flat_hash_map<int64_t, int64_t> distinct;
  std::vector<int64_t> which(misses.size());  // miss -> distinct index
  std::vector<int64_t> uids, counts;
  for (size_t m = 0; m < misses.size(); ++m) {
    auto [it, inserted] =
        distinct.try_emplace(ids[misses[m]], static_cast<int64_t>(uids.size()));
    if (inserted) {
      uids.push_back(ids[misses[m]]);
      counts.push_back(0);
    }
    which[m] = it->second;
    ++counts[it->second];
  }
  std::vector<int64_t> slot_of(uids.size(), -1);
  absl::Status status;
  MaybeReaderLock migrating(&migration_mu_, tiered_);
  WriterLock lock(&s.mu);
  const int64_t new_version = clock() + 1;
  if (tiered_) {
    // Note [Tiers]: room for the rows this call adds, then the cold ones in.
    std::vector<int64_t> batch_ids;
    if (static_cast<int64_t>(s.index.size() + uids.size()) > HotCap(s)) {
      batch_ids.reserve(positions.size());
      for (const int64_t pos : positions) batch_ids.push_back(ids[pos]);
      status = MakeRoom(s, static_cast<int64_t>(uids.size()), batch_ids);
    }
    const absl::Status promoted = PromoteCold(s, uids, &cold);
    if (status.ok()) status = promoted;
  }
  for (size_t u = 0; u < uids.size(); ++u) {
    auto it = s.index.find(uids[u]);
    int64_t base_row;
    if (it != s.index.end()) {
      slot_of[u] = it->second;
    } else if (tiered_ && s.cold->Contains(uids[u])) {
      // Its promotion failed (status says why): it reads the default row.
      continue;
    } else if ((base_row = VisibleBaseRow(s, uids[u])) >= 0) {
      absl::StatusOr<uint32_t> slot = PromoteRow(s, uids[u], base_row);
      if (!slot.ok()) {
        status = slot.status();
        break;
      }
      slot_of[u] = *slot;
    } else if (Admit(s, uids[u], counts[u])) {
      absl::StatusOr<uint32_t> slot = InsertRow(s, uids[u], new_version);
      if (!slot.ok()) {
        status = slot.status();
        break;
      }
      slot_of[u] = *slot;
      s.admitted.fetch_add(1, std::memory_order_relaxed);
      ++result->inserted;
    } else {
      s.rejected_lookups.fetch_add(counts[u], std::memory_order_relaxed);
    }
  }
  for (size_t m = 0; m < misses.size(); ++m) {
    const int64_t slot = slot_of[which[m]];
    float* dst = out + misses[m] * dim;
    if (slot < 0) {
      std::memcpy(dst, default_row_.data(), row_bytes);
      ++result->defaulted;
    } else {
      ReadWeights(s, static_cast<uint32_t>(slot), dst);
      BumpFrequency(Meta(s, static_cast<uint32_t>(slot)));
      ++result->found;
    }
  }
  return status;
}

absl::Status HashEmbeddingTable::Lookup(absl::Span<const int64_t> ids,
                                        absl::Span<float> out, LookupMode mode,
                                        ThreadPool* pool,
                                        LookupResult* result) {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (static_cast<int64_t>(out.size()) != n * options_.dim) {
    return errors::InvalidArgument("Lookup in embedding table '", options_.name,
                                   "': output has ", out.size(), " floats but ",
                                   n, " ids * dim ", options_.dim, " = ",
                                   n * options_.dim, " are needed");
  }
  if (n == 0) return absl::OkStatus();
  if (has_base_hint_.load(std::memory_order_relaxed)) {
    // Note [Base rows]: a cold base reads the batch's pages in parallel.
    std::shared_ptr<const MappedRows> base;
    {
      ReaderLock lock(&shards_[0].mu);
      base = base_;
    }
    if (base != nullptr) base->PrefetchForLookup(ids, mode == LookupMode::kTrain);
  }
  const ShardGroups groups = GroupByShard(ids);
  const int n_shards = options_.num_shards;
  std::vector<absl::Status> statuses(n_shards);
  std::vector<LookupResult> results(n_shards);
  ForEachShard(n * (40 + options_.dim), pool, [&](int si) {
    const int64_t b = groups.begin[si], e = groups.begin[si + 1];
    if (b == e) return;
    statuses[si] =
        LookupShard(shards_[si], ids,
                    absl::MakeConstSpan(groups.positions.data() + b, e - b),
                    out.data(), mode, &results[si]);
  });
  LookupResult total;
  for (int si = 0; si < n_shards; ++si) {
    total.found += results[si].found;
    total.inserted += results[si].inserted;
    total.defaulted += results[si].defaulted;
  }
  if (result != nullptr) *result = total;
  for (const absl::Status& st : statuses) RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::Status HashEmbeddingTable::CheckApplyArgs(const char* op,
                                                absl::Span<const int64_t> ids,
                                                absl::Span<const float> grads,
                                                int needed_slots) const {
  if (quantized_) {
    return errors::FailedPrecondition(
        op, " on embedding table '", options_.name, "': its rows are stored as ",
        RowFormatName(options_.row_format), " for serving and take no optimizer step");
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  if (static_cast<int64_t>(grads.size()) != n * options_.dim) {
    return errors::InvalidArgument(
        op, " on embedding table '", options_.name, "': grads has ",
        grads.size(), " floats but ", n, " ids * dim ", options_.dim, " = ",
        n * options_.dim, " are needed");
  }
  if (options_.nonfinite_gradients == NonFinitePolicy::kError) {
    for (int64_t i = 0; i < n; ++i) {
      if (!AllFinite(grads.data() + i * options_.dim, options_.dim)) {
        return errors::InvalidArgument(
            op, " on embedding table '", options_.name,
            "': the gradient for id ", ids[i], " (row ", i,
            ") holds NaN or infinity; nothing was applied");
      }
    }
  }
  return absl::OkStatus();
}

template <typename Update>
absl::Status HashEmbeddingTable::ApplyImpl(absl::Span<const int64_t> ids,
                                           absl::Span<const float> grads,
                                           int64_t step, int64_t cost_per_id_ns,
                                           ThreadPool* pool,
                                           ApplyResult* result,
                                           const Update& update) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t dim = options_.dim;
  const bool skip_nonfinite =
      options_.nonfinite_gradients == NonFinitePolicy::kSkipRow;
  std::vector<ApplyResult> results(options_.num_shards);
  std::vector<absl::Status> statuses(options_.num_shards);
  if (n > 0) {
    const ShardGroups groups = GroupByShard(ids);
    ForEachShard(n * cost_per_id_ns, pool, [&](int si) {
      const int64_t b = groups.begin[si], e = groups.begin[si + 1];
      if (b == e) return;
      Shard& s = shards_[si];
      ApplyResult& r = results[si];
      MaybeReaderLock migrating(&migration_mu_, tiered_);
      WriterLock lock(&s.mu);
      if (tiered_) {
        // Note [Tiers]: rows moved out since their lookup come back first.
        std::vector<int64_t> batch, cold_ids;
        batch.reserve(e - b);
        for (int64_t k = b; k < e; ++k) {
          const int64_t id = ids[groups.positions[k]];
          batch.push_back(id);
          if (!s.index.contains(id) && s.cold->Contains(id))
            cold_ids.push_back(id);
        }
        std::sort(cold_ids.begin(), cold_ids.end());
        cold_ids.erase(std::unique(cold_ids.begin(), cold_ids.end()),
                       cold_ids.end());
        if (!cold_ids.empty()) {
          const absl::Status room =
              MakeRoom(s, static_cast<int64_t>(cold_ids.size()), batch);
          const absl::Status promoted = PromoteCold(s, cold_ids, nullptr);
          statuses[si] = promoted.ok() ? room : promoted;
          if (!promoted.ok()) return;
        }
      }
      // Probe every id first (prefetching the index ahead), then update the
      // rows in order (prefetching rows ahead): Note [Lookup pipeline].
      constexpr int64_t kIndexAhead = 16, kRowAhead = 4;
      std::vector<int64_t> slots(e - b);
      for (int64_t k = b; k < std::min(e, b + kIndexAhead); ++k) {
        s.index.prefetch(ids[groups.positions[k]]);
      }
      for (int64_t k = b; k < e; ++k) {
        if (k + kIndexAhead < e) {
          s.index.prefetch(ids[groups.positions[k + kIndexAhead]]);
        }
        const int64_t id = ids[groups.positions[k]];
        auto it = s.index.find(id);
        // (Cast first: `cond ? -1 : uint32` would be unsigned.)
        slots[k - b] =
            it == s.index.end() ? -1 : static_cast<int64_t>(it->second);
        int64_t base_row;
        if (it == s.index.end() && (base_row = VisibleBaseRow(s, id)) >= 0) {
          // Note [Base rows]: a base row is promoted before its update.
          absl::StatusOr<uint32_t> slot = PromoteRow(s, id, base_row);
          if (!slot.ok()) {
            statuses[si] = slot.status();
            return;
          }
          slots[k - b] = *slot;
        }
      }
      for (int64_t k = b; k < e; ++k) {
        if (k + kRowAhead < e && slots[k + kRowAhead - b] >= 0) {
          const char* row =
              RowStart(s, static_cast<uint32_t>(slots[k + kRowAhead - b]));
          for (int64_t off = 0; off < stride_bytes_; off += 64) {
            __builtin_prefetch(row + off, 1);
          }
        }
        const int64_t slot = slots[k - b];
        if (slot < 0) {
          ++r.dropped;
          continue;
        }
        const int64_t pos = groups.positions[k];
        const float* g = grads.data() + pos * dim;
        if (skip_nonfinite && !AllFinite(g, dim)) {
          ++r.nonfinite;
          continue;
        }
        update(g, RowData(s, static_cast<uint32_t>(slot)));
        Meta(s, static_cast<uint32_t>(slot)).version = step;
        ++r.updated;
      }
      s.dropped_updates.fetch_add(r.dropped, std::memory_order_relaxed);
      s.nonfinite_updates.fetch_add(r.nonfinite, std::memory_order_relaxed);
    });
  }
  AdvanceClock(step);
  for (const absl::Status& st : statuses) RETURN_IF_ERROR(st);
  if (result != nullptr) {
    *result = ApplyResult();
    for (const ApplyResult& r : results) {
      result->updated += r.updated;
      result->dropped += r.dropped;
      result->nonfinite += r.nonfinite;
    }
  }
  return absl::OkStatus();
}

absl::Status HashEmbeddingTable::RequireOptimizer(const char* op,
                                                  OptimizerKind kind,
                                                  const char* slots) const {
  if (options_.optimizer != kind) {
    return errors::FailedPrecondition(
        op, " on embedding table '", options_.name,
        "': the table was created for optimizer ",
        OptimizerName(options_.optimizer), ", without ", slots);
  }
  return absl::OkStatus();
}

absl::Status HashEmbeddingTable::ApplySgd(absl::Span<const int64_t> ids,
                                          absl::Span<const float> grads,
                                          const SgdParams& params, int64_t step,
                                          ThreadPool* pool,
                                          ApplyResult* result) {
  RETURN_IF_ERROR(CheckApplyArgs("ApplySgd", ids, grads, 0));
  RETURN_IF_ERROR(errors::Annotate(Validate(params), "ApplySgd"));
  const int64_t dim = options_.dim;
  const float lr = params.learning_rate;
  return ApplyImpl(ids, grads, step, 40 + dim, pool, result,
                   [lr, dim](const float* g, float* row) {
                     GradientDescentUpdate(lr, dim, g, row);
                   });
}

absl::Status HashEmbeddingTable::ApplyAdagrad(absl::Span<const int64_t> ids,
                                              absl::Span<const float> grads,
                                              const AdagradParams& params,
                                              int64_t step, ThreadPool* pool,
                                              ApplyResult* result) {
  RETURN_IF_ERROR(RequireOptimizer("ApplyAdagrad", OptimizerKind::kAdagrad,
                                   "Adagrad's accumulator"));
  RETURN_IF_ERROR(CheckApplyArgs("ApplyAdagrad", ids, grads, 1));
  RETURN_IF_ERROR(errors::Annotate(Validate(params), "ApplyAdagrad"));
  const int64_t dim = options_.dim;
  const AdagradCoefficients<float> c{.lr = params.learning_rate,
                                     .epsilon = params.epsilon};
  return ApplyImpl(ids, grads, step, 40 + 4 * dim, pool, result,
                   [c, dim](const float* g, float* row) {
                     AdagradUpdate</*kEpsilon=*/true>(c, dim, g, row,
                                                      row + dim);
                   });
}

absl::Status HashEmbeddingTable::ApplyAdam(absl::Span<const int64_t> ids,
                                           absl::Span<const float> grads,
                                           const AdamParams& params,
                                           int64_t step, ThreadPool* pool,
                                           ApplyResult* result) {
  RETURN_IF_ERROR(RequireOptimizer("ApplyAdam", OptimizerKind::kAdam,
                                   "Adam's m and v slots"));
  RETURN_IF_ERROR(CheckApplyArgs("ApplyAdam", ids, grads, 2));
  RETURN_IF_ERROR(errors::Annotate(Validate(params), "ApplyAdam"));
  const int64_t dim = options_.dim;
  const AdamCoefficients<float> c = MakeAdamCoefficients(
      params.learning_rate, params.beta1, params.beta2, params.epsilon,
      params.beta1_power, params.beta2_power);
  return ApplyImpl(ids, grads, step, 40 + 6 * dim, pool, result,
                   [c, dim](const float* g, float* row) {
                     AdamUpdate(c, dim, g, row, row + dim, row + 2 * dim);
                   });
}

absl::Status HashEmbeddingTable::ApplyFtrl(absl::Span<const int64_t> ids,
                                           absl::Span<const float> grads,
                                           const FtrlParams& params,
                                           int64_t step, ThreadPool* pool,
                                           ApplyResult* result) {
  RETURN_IF_ERROR(RequireOptimizer("ApplyFtrl", OptimizerKind::kFtrl,
                                   "FTRL's n and z slots"));
  RETURN_IF_ERROR(CheckApplyArgs("ApplyFtrl", ids, grads, 2));
  RETURN_IF_ERROR(errors::Annotate(Validate(params), "ApplyFtrl"));
  const int64_t dim = options_.dim;
  // ApplyFtrlV2's rule with multiply_linear_by_lr = false, summed in the
  // table's order (Note [Update rule bits] in update_rules.h).
  const FtrlCoefficients<float> c = MakeFtrlCoefficients(
      params.learning_rate, params.l1, params.l2, params.l2_shrinkage,
      params.lr_power, /*multiply_linear_by_lr=*/false);
  return ApplyImpl(ids, grads, step, 40 + 12 * dim, pool, result,
                   [c, dim](const float* g, float* row) {
                     FtrlUpdate</*kShrinkage=*/true, FtrlSumOrder::kHashTable>(
                         c, dim, g, row, row + dim, row + 2 * dim);
                   });
}

EvictionResult HashEmbeddingTable::Evict(int64_t current_step,
                                         ThreadPool* pool) {
  return Evict(current_step, options_.eviction, pool);
}

EvictionResult HashEmbeddingTable::Evict(int64_t current_step,
                                         const EvictionOptions& criteria,
                                         ThreadPool* pool) {
  const int n_shards = options_.num_shards;
  std::vector<EvictionResult> results(n_shards);
  const int64_t max_age = criteria.max_age_steps;
  const int64_t min_freq = criteria.min_frequency;
  if (max_age > 0 || min_freq > 0) {
    ForEachShard(size() * 20, pool, [&](int si) {
      Shard& s = shards_[si];
      EvictionResult& r = results[si];
      WriterLock lock(&s.mu);
      const int64_t log_step = clock() + 1;
      for (auto it = s.index.begin(); it != s.index.end();) {
        const RowMeta& meta = Meta(s, it->second);
        const bool old = max_age > 0 && current_step - meta.version > max_age;
        const bool rare =
            min_freq > 0 &&
            meta.frequency.load(std::memory_order_relaxed) < min_freq;
        if (old || rare) {
          (old ? r.by_age : r.by_frequency) += 1;
          EraseRow(s, it->first, it->second, log_step);
          s.index.erase(it++);
        } else {
          ++it;
        }
      }
      if (tiered_ && s.cold->size() > 0) {
        // Note [Tiers]: the cold rows, read in file order.
        std::vector<int64_t> gone, rids, freqs, versions;
        std::vector<float> rows;
        constexpr uint64_t kRecordsPerRead = 8192;
        for (uint64_t rb = 0; rb < s.cold->records(); rb += kRecordsPerRead) {
          rids.clear();
          freqs.clear();
          versions.clear();
          rows.clear();
          const absl::Status st = s.cold->ReadRange(
              rb, rb + kRecordsPerRead, -1, &rids, &rows, &freqs, &versions);
          if (!st.ok()) {
            LOG(WARNING) << "embedding table '" << options_.name
                         << "': eviction skips the cold tier's rest: "
                         << st.message();
            break;
          }
          for (size_t k = 0; k < rids.size(); ++k) {
            const bool old =
                max_age > 0 && current_step - versions[k] > max_age;
            const bool rare = min_freq > 0 && freqs[k] < min_freq;
            if (!old && !rare) continue;
            (old ? r.by_age : r.by_frequency) += 1;
            gone.push_back(rids[k]);
            s.deletion_log.push_back({rids[k], log_step});
          }
        }
        s.cold->Remove(gone);
      }
      s.evicted.fetch_add(r.by_age + r.by_frequency, std::memory_order_relaxed);
      r.rows_left = static_cast<int64_t>(s.index.size());
    });
    EvictBaseRows(current_step, criteria, &results);
  }
  EvictionResult total;
  for (const EvictionResult& r : results) {
    total.by_age += r.by_age;
    total.by_frequency += r.by_frequency;
  }
  total.rows_left = size();
  return total;
}

void HashEmbeddingTable::EvictBaseRows(int64_t current_step, const EvictionOptions& criteria,
                                       std::vector<EvictionResult>* results) {
  std::shared_ptr<const MappedRows> base;
  {
    ReaderLock lock(&shards_[0].mu);
    base = base_;
  }
  if (base == nullptr) return;
  // The candidates by the base's own (immutable) frequencies and versions,
  // without a lock; then each shard hides those still visible.
  const int64_t max_age = criteria.max_age_steps;
  const int64_t min_freq = criteria.min_frequency;
  std::vector<int64_t> ids;
  std::vector<char> by_age;
  for (int64_t row = 0; row < base->size(); ++row) {
    const bool old = max_age > 0 && current_step - base->version(row) > max_age;
    const bool rare = min_freq > 0 && base->frequency(row) < min_freq;
    if (old || rare) {
      ids.push_back(base->id(row));
      by_age.push_back(old ? 1 : 0);
    }
  }
  if (ids.empty()) return;
  const ShardGroups groups = GroupByShard(ids);
  for (int si = 0; si < options_.num_shards; ++si) {
    const int64_t b = groups.begin[si], e = groups.begin[si + 1];
    if (b == e) continue;
    Shard& s = shards_[si];
    EvictionResult& r = (*results)[si];
    WriterLock lock(&s.mu);
    if (base_ != base) return;  // replaced meanwhile
    const int64_t log_step = clock() + 1;
    int64_t here = 0;
    for (int64_t k = b; k < e; ++k) {
      const int64_t pos = groups.positions[k];
      // Visible: neither hidden nor overridden (a row of the table's own
      // hides its base row).
      if (!s.base_hidden.insert(ids[pos]).second) continue;
      (by_age[pos] ? r.by_age : r.by_frequency) += 1;
      s.deletion_log.push_back({ids[pos], log_step});
      ++here;
    }
    s.evicted.fetch_add(here, std::memory_order_relaxed);
  }
}

int64_t HashEmbeddingTable::Remove(absl::Span<const int64_t> ids) {
  const ShardGroups groups = GroupByShard(ids);
  int64_t removed = 0;
  for (int si = 0; si < options_.num_shards; ++si) {
    const int64_t b = groups.begin[si], e = groups.begin[si + 1];
    if (b == e) continue;
    Shard& s = shards_[si];
    WriterLock lock(&s.mu);
    const int64_t log_step = clock() + 1;
    int64_t here = 0;
    for (int64_t k = b; k < e; ++k) {
      const int64_t id = ids[groups.positions[k]];
      auto it = s.index.find(id);
      if (it == s.index.end() && tiered_ && s.cold->Remove({id}) > 0) {
        s.deletion_log.push_back({id, log_step});  // Note [Tiers]
        ++here;
        continue;
      }
      if (it == s.index.end()) {
        // Note [Base rows]: a visible base row is hidden and logged.
        if (VisibleBaseRow(s, id) >= 0) {
          s.base_hidden.insert(id);
          s.deletion_log.push_back({id, log_step});
          ++here;
        }
        continue;
      }
      EraseRow(s, id, it->second, log_step);
      s.index.erase(it);
      ++here;
    }
    s.removed.fetch_add(here, std::memory_order_relaxed);
    removed += here;
  }
  return removed;
}

void HashEmbeddingTable::Clear() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  LockAllShards();
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    s.index.clear();
    s.next_slot = 0;
    s.free_slots.clear();
    s.sketch.Clear();
    s.deletion_log.clear();
    s.base_hidden.clear();
    if (s.cold != nullptr) {
      // Note [Tiers]: forget every cold row; the rewrite empties the file
      // (if it fails, the dead records wait for the next compaction).
      s.cold->Remove(s.cold->IdsSince(-1));
      s.cold->Compact(/*force=*/true).IgnoreError();
    }
  }
  base_.reset();
  has_base_hint_.store(false, std::memory_order_relaxed);
  clock_.store(0, std::memory_order_relaxed);
  UnlockAllShards();
}

void HashEmbeddingTable::KeepDeletionsAfter(std::optional<int64_t> step) {
  keep_deletions_after_.store(step.value_or(std::numeric_limits<int64_t>::max()),
                              std::memory_order_relaxed);
}

void HashEmbeddingTable::TrimDeletionLog(int64_t step) {
  step = std::min(step, keep_deletions_after_.load(std::memory_order_relaxed));
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    WriterLock lock(&s.mu);
    auto& log = s.deletion_log;
    log.erase(std::remove_if(
                  log.begin(), log.end(),
                  [step](const DeletionEntry& e) { return e.step <= step; }),
              log.end());
  }
}

void HashEmbeddingTable::DecayAdmissionCounts() {
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    WriterLock lock(&s.mu);
    s.sketch.Decay();
  }
}

int64_t HashEmbeddingTable::size() const {
  int64_t rows = 0;
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    ReaderLock lock(&s.mu);
    rows += static_cast<int64_t>(s.index.size());
    if (s.cold != nullptr) rows += s.cold->size();
    if (base_ != nullptr) {
      // The base's rows counted once (in shard 0), less each shard's hidden.
      if (si == 0) rows += base_->size();
      rows -= static_cast<int64_t>(s.base_hidden.size());
    }
  }
  return rows;
}

bool HashEmbeddingTable::Contains(int64_t id) const {
  Shard& s = shards_[ShardOf(id)];
  ReaderLock lock(&s.mu);
  return s.index.contains(id) || (s.cold != nullptr && s.cold->Contains(id)) ||
         VisibleBaseRow(s, id) >= 0;
}

std::optional<RowSnapshot> HashEmbeddingTable::GetRow(int64_t id) const {
  Shard& s = shards_[ShardOf(id)];
  ReaderLock lock(&s.mu);
  auto it = s.index.find(id);
  const int64_t dim = options_.dim;
  if (it == s.index.end() && s.cold != nullptr && s.cold->Contains(id)) {
    ColdRows cold;
    if (!ReadCold(s, {id}, &cold).ok() || cold.ids.empty() || !cold.found[0]) {
      return std::nullopt;
    }
    RowSnapshot snap;
    snap.weights.assign(cold.rows.begin(), cold.rows.begin() + dim);
    for (int k = 0; k < num_slots_; ++k) {
      snap.slots.emplace_back(cold.rows.begin() + (k + 1) * dim,
                              cold.rows.begin() + (k + 2) * dim);
    }
    snap.frequency = cold.freqs[0];
    snap.version = cold.versions[0];
    return snap;
  }
  if (it == s.index.end()) {
    const int64_t row = VisibleBaseRow(s, id);
    if (row < 0) return std::nullopt;
    RowSnapshot snap;
    snap.weights.assign(base_->weights(row), base_->weights(row) + dim);
    for (int k = 0; k < num_slots_; ++k) {
      if (base_->has_slots()) {
        snap.slots.emplace_back(base_->slots(row) + k * dim, base_->slots(row) + (k + 1) * dim);
      } else {
        snap.slots.emplace_back(dim, slot_init_[k]);
      }
    }
    snap.frequency = base_->frequency(row);
    snap.version = base_->version(row);
    return snap;
  }
  RowSnapshot snap;
  snap.weights.resize(static_cast<size_t>(dim));
  ReadWeights(s, it->second, snap.weights.data());
  const float* row = RowData(s, it->second);  // slots: float32 rows only
  for (int k = 0; k < num_slots_; ++k) {
    snap.slots.emplace_back(row + (k + 1) * dim, row + (k + 2) * dim);
  }
  const RowMeta& meta = Meta(s, it->second);
  snap.frequency = meta.frequency.load(std::memory_order_relaxed);
  snap.version = meta.version;
  return snap;
}

int64_t HashEmbeddingTable::AdmissionCount(int64_t id) const {
  Shard& s = shards_[ShardOf(id)];
  ReaderLock lock(&s.mu);
  return s.sketch.Estimate(id);
}

TableStats HashEmbeddingTable::GetStats() const {
  TableStats t;
  constexpr int64_t kIndexSlotBytes = sizeof(Index::value_type) + 1;  // + ctrl
  const int64_t slab_bytes = rows_per_slab_ * stride_bytes_;
  t.bytes_per_row = stride_bytes_;
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    ReaderLock lock(&s.mu);
    t.rows += static_cast<int64_t>(s.index.size());
    t.dram_rows += static_cast<int64_t>(s.index.size());
    if (s.cold != nullptr) {
      const RowLogStats c = s.cold->GetStats();
      t.cold_rows += c.live;
      t.cold_file_bytes += c.file_bytes;
      t.cold_index_bytes += c.index_bytes;
      t.cold_compactions += c.compactions;
    }
    if (base_ != nullptr) {
      if (si == 0) {
        t.base_rows += base_->size();
        t.base_mapped_bytes = base_->mapped_bytes();
      }
      t.base_rows -= static_cast<int64_t>(s.base_hidden.size());
    }
    t.slab_bytes += static_cast<int64_t>(s.slabs.size()) * slab_bytes;
    t.free_slots += static_cast<int64_t>(s.free_slots.size()) +
                    static_cast<int64_t>(s.slabs.size()) * rows_per_slab_ -
                    s.next_slot;
    t.index_bytes +=
        static_cast<int64_t>(s.index.capacity()) * kIndexSlotBytes +
        static_cast<int64_t>(s.free_slots.capacity() * sizeof(uint32_t)) +
        static_cast<int64_t>(s.base_hidden.capacity()) * (sizeof(int64_t) + 1);
    t.sketch_bytes += s.sketch.MemoryBytes();
    t.deletion_log_bytes +=
        static_cast<int64_t>(s.deletion_log.capacity() * sizeof(DeletionEntry));
    auto get = [](const std::atomic<int64_t>& a) {
      return a.load(std::memory_order_relaxed);
    };
    t.admitted += get(s.admitted);
    t.inserts += get(s.inserts);
    t.rejected_lookups += get(s.rejected_lookups);
    t.missing_lookups += get(s.missing_lookups);
    t.evicted += get(s.evicted);
    t.removed += get(s.removed);
    t.dropped_updates += get(s.dropped_updates);
    t.nonfinite_updates += get(s.nonfinite_updates);
    t.dram_hits += get(s.dram_hits);
    t.cold_hits += get(s.cold_hits);
    t.promoted += get(s.promoted);
    t.demoted += get(s.demoted);
    t.cold_writes += get(s.cold_writes);
  }
  t.rows += t.base_rows + t.cold_rows;
  t.index_bytes += t.cold_index_bytes;
  t.dram_budget_bytes = options_.tier.dram_budget_bytes;
  t.total_bytes = t.slab_bytes + t.index_bytes + t.sketch_bytes +
                  t.deletion_log_bytes +
                  static_cast<int64_t>(sizeof(Shard)) * options_.num_shards;
  return t;
}

std::string HashEmbeddingTable::DebugString() const {
  const TableStats t = GetStats();
  return absl::StrFormat(
      "HashEmbeddingTable(%s, dim=%d, optimizer=%s, %srows=%d, %.1f MiB)",
      options_.name, options_.dim, OptimizerName(options_.optimizer),
      quantized_ ? absl::StrCat(RowFormatName(options_.row_format), " ") : "", t.rows,
      t.total_bytes / (1024.0 * 1024.0));
}

}  // namespace recflow::embedding
