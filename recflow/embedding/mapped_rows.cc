#include "recflow/embedding/mapped_rows.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_format.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow::embedding {

int64_t TableIndexCapacity(int64_t rows) {
  if (rows <= 0) return 0;
  return (rows * 4 + 2) / 3;  // ceil(rows / 0.75)
}

absl::StatusOr<TableIndexBuilder> TableIndexBuilder::Create(int64_t rows) {
  const int64_t capacity = TableIndexCapacity(rows);
  ASSIGN_OR_RETURN(Tensor entries, Tensor::Create(DT_INT64, TensorShape({capacity, 2})));
  int64_t* e = entries.data<int64_t>();
  for (int64_t i = 0; i < capacity; ++i) {
    e[2 * i] = 0;
    e[2 * i + 1] = -1;
  }
  return TableIndexBuilder(rows, std::move(entries));
}

absl::Status TableIndexBuilder::Add(absl::Span<const int64_t> keys) {
  if (next_row_ + static_cast<int64_t>(keys.size()) > rows_) {
    return errors::FailedPrecondition("table index: more than the ", rows_,
                                      " keys announced (the table changed during the save)");
  }
  int64_t* entries = entries_.data<int64_t>();
  for (const int64_t id : keys) {
    int64_t e = TableIndexHome(id, capacity_);
    while (entries[2 * e + 1] >= 0) {
      if (entries[2 * e] == id) {
        return errors::FailedPrecondition("table index: id ", id, " is in rows ",
                                          entries[2 * e + 1], " and ", next_row_);
      }
      if (++e == capacity_) e = 0;
    }
    entries[2 * e] = id;
    entries[2 * e + 1] = next_row_++;
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TableIndexBuilder::Finish() {
  if (next_row_ != rows_) {
    return errors::FailedPrecondition("table index: ", next_row_, " keys of the ", rows_,
                                      " announced (the table changed during the save)");
  }
  return std::move(entries_);
}

namespace {

// The process's background reader: runs queued passes one at a time, in
// order, on a thread of its own (started on first use, joined at exit).
class PassQueue {
 public:
  static PassQueue& Get() {
    static PassQueue* queue = new PassQueue();  // lives as long as the process
    return *queue;
  }
  void Add(std::function<void()> pass, const void* owner) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
    tasks_.push_back({owner, std::move(pass)});
    cv_.notify_all();
  }
  // Removes `owner`'s pass if it has not started; true when removed.
  bool Cancel(const void* owner) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
      if (it->owner == owner) {
        tasks_.erase(it);
        return true;
      }
    }
    return false;
  }

 private:
  struct Task {
    const void* owner;
    std::function<void()> pass;
  };
  void Loop() {
    for (;;) {
      std::function<void()> pass;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !tasks_.empty(); });
        pass = std::move(tasks_.front().pass);
        tasks_.pop_front();
      }
      pass();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> tasks_;
  std::thread thread_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<MappedRows>> MappedRows::Open(
    const checkpoint::BundleReader& reader, const std::string& key,
    const MappedRowsOptions& options) {
  std::shared_ptr<MappedRows> m(new MappedRows());
  m->source_ = reader.prefix();
  m->dim_ = options.dim;
  m->num_slots_ = options.num_slots;
  const int num_shards = reader.num_shards();
  auto where = [&](const std::string& tensor) {
    return absl::StrCat("'", tensor, "' of checkpoint ", reader.prefix());
  };
  // Maps one tensor; checks its dtype, shape, extent and alignment.
  auto map = [&](const std::string& part, DataType dtype,
                 const std::vector<int64_t>& dims) -> absl::StatusOr<const char*> {
    const std::string name = absl::StrCat(key, "/", part);
    if (!reader.Contains(name)) {
      return errors::NotFound("no tensor ", where(name));
    }
    ASSIGN_OR_RETURN(const checkpoint::TensorInfo info, reader.GetInfo(name));
    if (!info.slices.empty()) {
      return errors::Unimplemented(where(name), " is saved in slices");
    }
    bool fits = info.dtype == dtype && info.shape.dims() == static_cast<int>(dims.size());
    for (size_t d = 0; fits && d < dims.size(); ++d) {
      fits = dims[d] < 0 || info.shape.dim_size(static_cast<int>(d)) == dims[d];
    }
    if (!fits) {
      return errors::InvalidArgument(where(name), " is ", DataTypeString(info.dtype), " ",
                                     info.shape.DebugString(), ", which does not fit the table");
    }
    auto& file = m->files_[info.shard_id];
    if (file == nullptr) {
      ASSIGN_OR_RETURN(file, MappedFile::Open(checkpoint::DataFilename(
                                 reader.prefix(), info.shard_id, num_shards)));
    }
    if (info.offset > file->size() || info.size > file->size() - info.offset) {
      return errors::DataLoss(where(name), " reaches past the end of ", file->path(), " (",
                              file->size(), " bytes)");
    }
    if (info.size > 0 && info.offset % DataTypeSize(dtype) != 0) {
      return errors::Unimplemented(where(name), " starts at offset ", info.offset,
                                   ", not aligned for ", DataTypeString(dtype));
    }
    m->regions_.push_back({name, file.get(), info.offset, info.size, info.masked_crc32c});
    m->mapped_bytes_ += static_cast<int64_t>(info.size);
    return file->data() + info.offset;
  };
  // The index first: lookups need it before anything else.
  ASSIGN_OR_RETURN(const char* index, map("index", DT_INT64, {-1, 2}));
  ASSIGN_OR_RETURN(const checkpoint::TensorInfo keys_info,
                   reader.GetInfo(absl::StrCat(key, "/keys")));
  if (keys_info.dtype != DT_INT64 || keys_info.shape.dims() != 1) {
    return errors::InvalidArgument(where(key + "/keys"), " is not int64 [n]");
  }
  const int64_t n = keys_info.shape.dim_size(0);
  // In the order the background pass reads them: what a lookup touches
  // (index, values), then what a training step's promotion copies too,
  // then the keys (read by exports and eviction only).
  ASSIGN_OR_RETURN(const char* values, map("values", DT_FLOAT, {n, options.dim}));
  const char* slots = nullptr;
  if (options.slots && options.num_slots > 0) {
    ASSIGN_OR_RETURN(slots, map("slots", DT_FLOAT, {n, options.num_slots, options.dim}));
  }
  ASSIGN_OR_RETURN(const char* frequencies, map("frequencies", DT_INT64, {n}));
  ASSIGN_OR_RETURN(const char* versions, map("versions", DT_INT64, {n}));
  ASSIGN_OR_RETURN(const char* keys, map("keys", DT_INT64, {n}));
  ASSIGN_OR_RETURN(const checkpoint::TensorInfo index_info,
                   reader.GetInfo(absl::StrCat(key, "/index")));
  m->capacity_ = index_info.shape.dim_size(0);
  if (m->capacity_ < n) {
    return errors::InvalidArgument(where(key + "/index"), " has ", m->capacity_,
                                   " entries for ", n, " rows");
  }
  ASSIGN_OR_RETURN(const Tensor clock, reader.Lookup(absl::StrCat(key, "/clock")));
  if (clock.dtype() != DT_INT64 || clock.NumElements() != 1) {
    return errors::InvalidArgument(where(key + "/clock"), " is not an int64 scalar");
  }
  m->clock_ = clock.data<int64_t>()[0];
  m->rows_ = n;
  m->index_ = reinterpret_cast<const int64_t*>(index);
  m->values_ = reinterpret_cast<const float*>(values);
  m->keys_ = reinterpret_cast<const int64_t*>(keys);
  m->versions_ = reinterpret_cast<const int64_t*>(versions);
  m->frequencies_ = reinterpret_cast<const int64_t*>(frequencies);
  m->slots_ = reinterpret_cast<const float*>(slots);
  // Hash probes: no read-ahead around each faulting page.
  for (const Region& r : m->regions_) r.file->AdviseRandom(r.offset, r.size);
  if (options.verify) {
    m->queued_ = true;
    PassQueue::Get().Add([raw = m.get()] { raw->VerifyAll(); }, m.get());
  } else {
    // No pass will warm it: no prefetching either.
    m->regions_read_.store(static_cast<int>(m->regions_.size()), std::memory_order_release);
    m->warm_.store(true, std::memory_order_release);
    m->verified_.Notify();
  }
  return m;
}

MappedRows::~MappedRows() {
  if (!queued_) return;
  stop_.store(true, std::memory_order_relaxed);
  // Not started: dropped from the queue. Started: it stops at its next
  // piece; its last act is notifying verified_.
  if (!PassQueue::Get().Cancel(this)) verified_.WaitForNotification();
}

void MappedRows::PrefetchForLookup(absl::Span<const int64_t> ids, bool training_state) const {
  // Warm enough: the regions this lookup touches are read (index, values;
  // for training everything but the keys).
  const int needed = training_state ? static_cast<int>(regions_.size()) - 1 : 2;
  if (regions_read_.load(std::memory_order_acquire) >= needed || capacity_ == 0) return;
  // Page by page: consecutive ids rarely share one (the tables are larger
  // than the batches), and a range would read what lies between.
  for (const int64_t id : ids) {
    MappedFile::AdviseWillNeedAt(index_ + 2 * TableIndexHome(id, capacity_), 16);
  }
  for (const int64_t id : ids) {
    const int64_t row = Find(id);  // waits for its index page only
    if (row < 0) continue;
    MappedFile::AdviseWillNeedAt(values_ + row * dim_, dim_ * sizeof(float));
    if (training_state) {
      if (slots_ != nullptr) {
        MappedFile::AdviseWillNeedAt(slots_ + row * num_slots_ * dim_,
                                     num_slots_ * dim_ * sizeof(float));
      }
      MappedFile::AdviseWillNeedAt(frequencies_ + row, sizeof(int64_t));
      MappedFile::AdviseWillNeedAt(versions_ + row, sizeof(int64_t));
    }
  }
}

void MappedRows::VerifyAll() {
  // Read through the file in big sequential reads (the kernel reads ahead)
  // into a buffer: the pages land in the page cache the mapping shares.
  constexpr uint64_t kPiece = 8 << 20, kAhead = 32 << 20;
  std::vector<char> buffer(kPiece);
  absl::Status status;
  for (const Region& r : regions_) {
    uint32_t crc = 0;
    for (uint64_t done = 0; done < r.size && status.ok(); done += kPiece) {
      if (stop_.load(std::memory_order_relaxed)) break;
      const uint64_t len = std::min(kPiece, r.size - done);
      // Keeps a few pieces queued at the disk ahead of the read (lookups of
      // a cold table compete for it with random reads meanwhile).
      r.file->AdviseWillNeed(r.offset + done + len, std::min(kAhead, r.size - done - len));
      status = r.file->ReadAt(r.offset + done, len, buffer.data());
      if (status.ok()) crc = crc32c::Extend(crc, buffer.data(), len);
    }
    if (stop_.load(std::memory_order_relaxed)) break;
    if (!status.ok()) {
      status = errors::DataLoss("cannot read '", r.tensor, "' of checkpoint ", source_, ": ",
                                status.message());
      LOG(ERROR) << status.message();
      break;
    }
    if (crc32c::Mask(crc) != r.masked_crc32c) {
      status = errors::DataLoss("checksum mismatch in '", r.tensor, "' of checkpoint ", source_,
                                " (", r.file->path(), "), found while reading the mapped table");
      LOG(ERROR) << status.message();
      break;
    }
    regions_read_.fetch_add(1, std::memory_order_release);
  }
  const bool failed = !status.ok();
  {
    MutexLock lock(&mu_);
    verify_status_ = std::move(status);  // the rep is not shared with this thread
  }
  warm_.store(true, std::memory_order_release);
  if (failed) failed_.store(true, std::memory_order_release);
  verified_.Notify();
}

absl::Status MappedRows::verify_status() const {
  MutexLock lock(&mu_);
  // A copy of its own rather than a shared reference: an error Status's
  // reference count lives in Debian's uninstrumented abseil, so TSan sees no
  // order between one thread's copy and another's last release, and reports
  // the delete as a race (docs/fuzzing.md, "Sanitizer builds").
  if (verify_status_.ok()) return absl::OkStatus();
  return absl::Status(verify_status_.code(), verify_status_.message());
}

absl::Status MappedRows::WaitVerified() const {
  verified_.WaitForNotification();
  return verify_status();
}

}  // namespace recflow::embedding
