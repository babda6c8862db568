// HashEmbeddingTable: the cold tier of a table bigger than its memory budget
// (Note [Tiers] in hash_embedding_table.h): opening it, moving rows out
// (demotion) and back in (promotion), and Prefetch.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "recflow/core/allocator.h"
#include "recflow/core/env.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/embedding/hash_embedding_table.h"

namespace recflow::embedding {

namespace {

// A shard never demotes below this many rows, whatever its budget.
constexpr int64_t kMinHotRows = 16;
// Rows sampled per row demoted (Note [Tiers]).
constexpr int64_t kSamplesPerVictim = 5;
// Bytes of an absl::flat_hash_map slot of the in-memory index, with its
// control byte.
constexpr int64_t kHotIndexSlotBytes =
    sizeof(int64_t) + sizeof(uint32_t) + 4 + 1;

// Tables of one process get distinct cold files even in one directory.
std::atomic<int64_t> next_table_serial{0};

uint64_t NextRandom(uint64_t* state) {
  // splitmix64
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Keeps the letters, digits, '-' and '_' of a table name for a file name.
std::string FileSafe(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '-' || c == '_';
    out.push_back(ok ? c : '_');
    if (out.size() == 48) break;
  }
  return out.empty() ? "table" : out;
}

Env* TierEnv(const TierOptions& t) {
  return t.env != nullptr ? t.env : Env::Default();
}

// Threads that do nothing but wait for the cold tier's reads: a batch's
// reads are spread over them so the device sees many at once (a read
// that misses the page cache waits ~0.1 ms for an SSD, and costs no CPU
// meanwhile). Shared by every tiered table of the process; never freed.
ThreadPool* ColdReadPool() {
  static ThreadPool* const pool = new ThreadPool("recflow_cold_io", 16);
  return pool;
}

// Cold files are named <table>.<pid>.<serial>.s<shard>.rowlog (and
// .compacting while rewritten): a process killed with its tables leaves
// them behind. Those of processes that no longer run are deleted.
void DeleteColdFilesOfDeadProcesses(Env* env, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = env->GetChildren(dir);
  if (!names.ok()) return;
  for (const std::string& name : *names) {
    const std::vector<std::string> parts = absl::StrSplit(name, '.');
    if (parts.size() < 5 || (parts.back() != "rowlog" && parts.back() != "compacting")) continue;
    int pid = 0;
    if (!absl::SimpleAtoi(parts[1], &pid) || pid <= 0 || pid == getpid()) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to ask)
    const std::string path = absl::StrCat(dir, "/", name);
    if (env->DeleteFile(path).ok()) {
      LOG(INFO) << "deleted the cold tier file of a process that no longer runs: " << path;
    }
  }
}

}  // namespace

bool HashEmbeddingTable::SlotsAtInit(const float* row) const {
  for (int k = 0; k < num_slots_; ++k) {
    const float* slot = row + (k + 1) * options_.dim;
    for (int64_t j = 0; j < options_.dim; ++j) {
      if (slot[j] != slot_init_[k]) return false;
    }
  }
  return true;
}

std::string HashEmbeddingTable::ColdPath(int shard) const {
  return absl::StrCat(cold_prefix_, ".s", shard, ".rowlog");
}

absl::Status HashEmbeddingTable::OpenColdTier() {
  const TierOptions& t = options_.tier;
  Env* env = TierEnv(t);
  RETURN_IF_ERROR(
      errors::Annotate(env->RecursivelyCreateDir(t.cold_dir),
                       absl::StrCat("embedding table '", options_.name,
                                    "': cold tier directory")));
  DeleteColdFilesOfDeadProcesses(env, t.cold_dir);
  cold_prefix_ = absl::StrCat(t.cold_dir, "/", FileSafe(options_.name), ".",
                              getpid(), ".", next_table_serial.fetch_add(1));
  shard_budget_bytes_ = t.dram_budget_bytes / options_.num_shards;
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    WriterLock lock(&s.mu);
    ASSIGN_OR_RETURN(
        s.cold, RowLog::Create(env, ColdPath(si), {.row_floats = row_floats_}));
    s.sample_state = Mix64(options_.seed ^ (0x5851f42d4c957f2dull * (si + 1)));
  }
  return absl::OkStatus();
}

void HashEmbeddingTable::CloseColdTier() {
  Env* env = TierEnv(options_.tier);
  for (int si = 0; si < options_.num_shards; ++si) {
    Shard& s = shards_[si];
    WriterLock lock(&s.mu);
    if (s.cold == nullptr) continue;
    s.cold.reset();
    env->DeleteFile(ColdPath(si)).IgnoreError();
  }
}

int64_t HashEmbeddingTable::HotCap(const Shard& s) const {
  const int64_t index_bytes =
      static_cast<int64_t>(s.index.capacity()) * kHotIndexSlotBytes +
      static_cast<int64_t>(s.free_slots.capacity() * sizeof(uint32_t)) +
      static_cast<int64_t>(s.base_hidden.capacity()) * 9 +
      s.cold->GetStats().index_bytes;
  return std::max(kMinHotRows,
                  (shard_budget_bytes_ - index_bytes) / stride_bytes_);
}

absl::Status HashEmbeddingTable::ReadCold(const Shard& s,
                                          std::vector<int64_t> ids,
                                          ColdRows* out) const {
  ids.erase(std::remove_if(ids.begin(), ids.end(),
                           [&](int64_t id) { return !s.cold->Contains(id); }),
            ids.end());
  const size_t n = ids.size();
  out->ids = std::move(ids);
  out->rows.resize(n * row_floats_);
  out->freqs.resize(n);
  out->versions.resize(n);
  out->records.resize(n);
  for (size_t k = 0; k < n; ++k)
    out->records[k] = s.cold->RecordOf(out->ids[k]);
  return s.cold->Get(out->ids, absl::MakeSpan(out->rows),
                     absl::MakeSpan(out->freqs), absl::MakeSpan(out->versions),
                     &out->found, n > 1 ? ColdReadPool() : nullptr);
}

absl::Status HashEmbeddingTable::PromoteCold(Shard& s,
                                             absl::Span<const int64_t> wanted,
                                             const ColdRows* have) {
  // Where each wanted row's data is: (rows read earlier or now, index).
  std::vector<std::pair<const ColdRows*, size_t>> sources;
  std::vector<int64_t> reread;
  absl::flat_hash_map<int64_t, size_t> had;
  if (have != nullptr) {
    for (size_t k = 0; k < have->ids.size(); ++k) {
      if (have->found[k]) had.emplace(have->ids[k], k);
    }
  }
  for (const int64_t id : wanted) {
    if (s.index.contains(id)) continue;
    const int64_t record = s.cold->RecordOf(id);
    if (record < 0) continue;
    auto it = had.find(id);
    if (it != had.end() && have->records[it->second] == record) {
      sources.push_back({have, it->second});
    } else {
      reread.push_back(id);  // written again (or the log compacted) since
    }
  }
  ColdRows now;
  if (!reread.empty()) {
    RETURN_IF_ERROR(ReadCold(s, std::move(reread), &now));
    for (size_t k = 0; k < now.ids.size(); ++k) {
      if (now.found[k]) sources.push_back({&now, k});
    }
  }
  if (sources.empty()) return absl::OkStatus();
  std::vector<int64_t> moved;
  moved.reserve(sources.size());
  absl::Status status;
  for (const auto& [from, k] : sources) {
    const int64_t id = from->ids[k];
    absl::StatusOr<uint32_t> slot = AllocateSlot(s);
    if (!slot.ok()) {
      status = slot.status();
      break;
    }
    std::memcpy(RowData(s, *slot), from->rows.data() + k * row_floats_,
                row_floats_ * sizeof(float));
    RowMeta& meta = Meta(s, *slot);
    meta.id = id;
    meta.frequency.store(from->freqs[k], std::memory_order_relaxed);
    meta.version = from->versions[k];
    s.index.emplace(id, *slot);
    moved.push_back(id);
  }
  s.cold->Remove(moved);
  s.promoted.fetch_add(static_cast<int64_t>(moved.size()),
                       std::memory_order_relaxed);
  return status;
}

absl::Status HashEmbeddingTable::MakeRoom(Shard& s, int64_t need,
                                          absl::Span<const int64_t> keep_ids) {
  const int64_t cap = HotCap(s);
  const int64_t hot = static_cast<int64_t>(s.index.size());
  if (hot + need <= cap) return absl::OkStatus();
  const absl::flat_hash_set<int64_t> keep(keep_ids.begin(), keep_ids.end());
  // Demote a batch beyond what is needed, so the next calls find room.
  const int64_t slack = std::max<int64_t>(16, cap / 64);
  const int64_t target = std::max<int64_t>(0, cap - need - slack);
  const int64_t wanted = hot - target;
  if (wanted <= 0) return absl::OkStatus();

  // Candidates: sampled live slots (all of them when sampling would draw
  // about as many), never ids the caller keeps.
  const uint32_t slots_used = s.next_slot;
  std::vector<uint32_t> candidates;
  if (wanted * kSamplesPerVictim >= slots_used) {
    candidates.reserve(slots_used);
    for (uint32_t slot = 0; slot < slots_used; ++slot)
      candidates.push_back(slot);
  } else {
    candidates.resize(wanted * kSamplesPerVictim);
    for (uint32_t& slot : candidates) {
      slot = static_cast<uint32_t>(
          (static_cast<unsigned __int128>(NextRandom(&s.sample_state)) *
           slots_used) >>
          64);
    }
    std::sort(candidates.begin(), candidates.end());
    candidates.erase(std::unique(candidates.begin(), candidates.end()),
                     candidates.end());
  }
  const int64_t now = clock() + 1;
  const double half_life =
      static_cast<double>(options_.tier.frequency_half_life_steps);
  std::vector<std::pair<double, uint32_t>> scored;  // (score, slot)
  scored.reserve(candidates.size());
  for (const uint32_t slot : candidates) {
    const RowMeta& meta = Meta(s, slot);
    if (meta.version == kFreeSlotVersion) continue;
    if (!keep.empty() && keep.contains(meta.id)) continue;
    const double age =
        static_cast<double>(std::max<int64_t>(0, now - meta.version));
    const double freq =
        static_cast<double>(meta.frequency.load(std::memory_order_relaxed));
    scored.push_back({(freq + 1.0) * std::exp2(-age / half_life), slot});
  }
  const size_t take =
      std::min<size_t>(scored.size(), static_cast<size_t>(wanted));
  if (take == 0) return absl::OkStatus();
  std::nth_element(scored.begin(), scored.begin() + (take - 1), scored.end());
  scored.resize(take);
  std::sort(scored.begin(), scored.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });

  // Rows read from the base and unchanged since go back to it (they are
  // still there); the others are written to the cold tier.
  std::vector<int64_t> ids, freqs, versions, to_base;
  std::vector<float> rows;
  std::vector<uint32_t> written_slots, base_slots;
  ids.reserve(take);
  rows.reserve(take * row_floats_);
  for (const auto& [score, slot] : scored) {
    const RowMeta& meta = Meta(s, slot);
    const float* data = RowData(s, slot);
    const int64_t freq = meta.frequency.load(std::memory_order_relaxed);
    if (base_ != nullptr && !s.base_hidden.empty() &&
        s.base_hidden.contains(meta.id)) {
      const int64_t row = base_->Find(meta.id);
      if (row >= 0 && base_->version(row) == meta.version &&
          base_->frequency(row) == freq &&
          std::memcmp(base_->weights(row), data,
                      options_.dim * sizeof(float)) == 0 &&
          (num_slots_ == 0 || !base_->has_slots() ||
           std::memcmp(base_->slots(row), data + options_.dim,
                       num_slots_ * options_.dim * sizeof(float)) == 0) &&
          (num_slots_ == 0 || base_->has_slots() || SlotsAtInit(data))) {
        to_base.push_back(meta.id);
        base_slots.push_back(slot);
        continue;
      }
    }
    ids.push_back(meta.id);
    freqs.push_back(freq);
    versions.push_back(meta.version);
    rows.insert(rows.end(), data, data + row_floats_);
    written_slots.push_back(slot);
  }
  absl::Status status;
  if (!ids.empty()) {
    status = s.cold->Put(ids, rows, freqs, versions);
    if (!status.ok() && absl::IsFailedPrecondition(status)) {
      // A write failed earlier: rewrite the log, then try once more.
      status = s.cold->Compact();
      if (status.ok()) status = s.cold->Put(ids, rows, freqs, versions);
    }
    if (!status.ok()) {
      written_slots.clear();
      status = errors::Annotate(
          status,
          absl::StrCat(
              "embedding table '", options_.name, "': moving ", ids.size(),
              " rows to the cold tier (they stay in memory, over the budget)"));
    }
  }
  for (const uint32_t slot : written_slots) {
    s.index.erase(Meta(s, slot).id);
    FreeSlot(s, slot);
  }
  for (size_t k = 0; k < base_slots.size(); ++k) {
    s.index.erase(to_base[k]);
    s.base_hidden.erase(to_base[k]);
    FreeSlot(s, base_slots[k]);
  }
  s.cold_writes.fetch_add(static_cast<int64_t>(written_slots.size()),
                          std::memory_order_relaxed);
  s.demoted.fetch_add(
      static_cast<int64_t>(written_slots.size() + base_slots.size()),
      std::memory_order_relaxed);
  RETURN_IF_ERROR(status);
  ReleaseSlabs(s, cap);
  // Compaction runs when dead records outnumber the live ones; a failure
  // leaves the log as it was, readable.
  absl::Status compacted = s.cold->Compact();
  if (!compacted.ok()) {
    LOG(WARNING) << "embedding table '" << options_.name
                 << "': " << compacted.message();
  }
  return absl::OkStatus();
}

void HashEmbeddingTable::ReleaseSlabs(Shard& s, int64_t cap) {
  // Keep room for the cap and one slab more; release only two slabs or more
  // beyond that, so a shard near its cap does not allocate and release a
  // slab by turns.
  const size_t keep_slabs =
      static_cast<size_t>((cap + rows_per_slab_ - 1) / rows_per_slab_) + 1;
  if (s.slabs.size() <= keep_slabs + 1) return;
  const size_t slab_bytes = rows_per_slab_ * stride_bytes_;
  const uint32_t limit = static_cast<uint32_t>(keep_slabs * rows_per_slab_);
  // Slots never handed out below the limit count as free from now on.
  for (uint32_t slot = s.next_slot; slot < limit; ++slot) {
    Meta(s, slot).version = kFreeSlotVersion;
  }
  // Free slots below the limit, lowest last, to move the rows above to.
  std::vector<uint32_t> low;
  for (uint32_t slot = 0; slot < std::min(limit, s.next_slot); ++slot) {
    if (Meta(s, slot).version == kFreeSlotVersion) low.push_back(slot);
  }
  for (uint32_t slot = s.next_slot; slot < limit; ++slot) low.push_back(slot);
  size_t live = 0;
  for (uint32_t slot = limit; slot < s.next_slot; ++slot) {
    live += Meta(s, slot).version != kFreeSlotVersion ? 1 : 0;
  }
  if (live > low.size()) return;  // more rows than the cap: keep the slabs
  std::reverse(low.begin(), low.end());
  for (uint32_t slot = limit; slot < s.next_slot; ++slot) {
    RowMeta& meta = Meta(s, slot);
    if (meta.version == kFreeSlotVersion) continue;
    const uint32_t to = low.back();
    low.pop_back();
    RowMeta& dst = Meta(s, to);
    dst.id = meta.id;
    dst.frequency.store(meta.frequency.load(std::memory_order_relaxed),
                        std::memory_order_relaxed);
    dst.version = meta.version;
    std::memcpy(RowStart(s, to) + sizeof(RowMeta),
                RowStart(s, slot) + sizeof(RowMeta),
                stride_bytes_ - sizeof(RowMeta));
    s.index[meta.id] = to;
  }
  // Slots handed out end after the last live row; the free ones below it
  // are the free list.
  uint32_t next = limit;
  while (next > 0 && Meta(s, next - 1).version == kFreeSlotVersion) --next;
  s.free_slots.clear();
  for (uint32_t slot = 0; slot < next; ++slot) {
    if (Meta(s, slot).version == kFreeSlotVersion) s.free_slots.push_back(slot);
  }
  s.next_slot = next;
  while (s.slabs.size() > keep_slabs) {
    // The pages go back to the kernel now: free() may keep a slab's memory
    // in the heap, where it would still count in the process's RSS.
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(s.slabs.back().data) + page - 1) & ~(page - 1);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(s.slabs.back().data) + slab_bytes) & ~(page - 1);
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    cpu_allocator()->DeallocateRaw(s.slabs.back().data, slab_bytes);
    s.slabs.pop_back();
  }
}

absl::Status HashEmbeddingTable::Prefetch(absl::Span<const int64_t> ids) {
  if (!tiered_ || ids.empty()) return absl::OkStatus();
  const ShardGroups groups = GroupByShard(ids);
  const int n_shards = options_.num_shards;
  std::vector<absl::Status> statuses(n_shards);
  std::vector<ColdRows> cold(n_shards);
  std::vector<std::vector<int64_t>> wanted(n_shards), from_base(n_shards);
  // First every shard's reads, on the cold-read threads, so the reads of all
  // shards are in flight together; then the moves, on this thread (their
  // buffers come and go in one malloc arena, not in one per I/O thread).
  ForEachShard(static_cast<int64_t>(ids.size()) * 200, ColdReadPool(), [&](int si) {
    const int64_t b = groups.begin[si], e = groups.begin[si + 1];
    if (b == e) return;
    Shard& s = shards_[si];
    ReaderLock lock(&s.mu);
    absl::flat_hash_set<int64_t> seen;
    for (int64_t k = b; k < e; ++k) {
      const int64_t id = ids[groups.positions[k]];
      if (s.index.contains(id) || !seen.insert(id).second) continue;
      if (s.cold->Contains(id)) {
        wanted[si].push_back(id);
      } else if (VisibleBaseRow(s, id) >= 0) {
        from_base[si].push_back(id);  // Note [Base rows]: its pages are read now
      }
    }
    if (!wanted[si].empty()) statuses[si] = ReadCold(s, wanted[si], &cold[si]);
  });
  for (int si = 0; si < n_shards; ++si) {
    if (!statuses[si].ok() || (wanted[si].empty() && from_base[si].empty())) continue;
    Shard& s = shards_[si];
    ReaderLock migrating(&migration_mu_);
    WriterLock lock(&s.mu);
    std::vector<int64_t> keep = wanted[si];
    keep.insert(keep.end(), from_base[si].begin(), from_base[si].end());
    const absl::Status room = MakeRoom(s, static_cast<int64_t>(keep.size()), keep);
    statuses[si] = PromoteCold(s, wanted[si], &cold[si]);
    for (const int64_t id : from_base[si]) {
      if (!statuses[si].ok()) break;
      if (s.index.contains(id)) continue;
      const int64_t row = VisibleBaseRow(s, id);
      if (row >= 0) statuses[si] = PromoteRow(s, id, row).status();
    }
    if (statuses[si].ok()) statuses[si] = room;
    cold[si] = ColdRows();
  }
  for (const absl::Status& st : statuses) RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

}  // namespace recflow::embedding
