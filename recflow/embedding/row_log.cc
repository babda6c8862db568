#include "recflow/embedding/row_log.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::embedding {

namespace {

// Fixed fields of a record, before the floats.
struct RecordHead {
  int64_t id;
  int64_t version;
  int64_t frequency;
};
static_assert(sizeof(RecordHead) == 24);

}  // namespace

absl::StatusOr<std::unique_ptr<RowLog>> RowLog::Create(Env* env, const std::string& path,
                                                       const RowLogOptions& options) {
  if (options.row_floats <= 0) {
    return errors::InvalidArgument("row log ", path, ": row_floats must be > 0, got ",
                                   options.row_floats);
  }
  if (options.write_buffer_bytes <= 0) {
    return errors::InvalidArgument("row log ", path, ": write_buffer_bytes must be > 0, got ",
                                   options.write_buffer_bytes);
  }
  std::unique_ptr<RowLog> log(new RowLog(env, path, options));
  RETURN_IF_ERROR(log->Open());
  return log;
}

RowLog::~RowLog() {
  if (writer_ != nullptr) writer_->Close().IgnoreError();
}

absl::Status RowLog::Open() {
  ASSIGN_OR_RETURN(writer_, env_->NewWritableFile(path_));
  ASSIGN_OR_RETURN(reader_, env_->NewRandomAccessFile(path_));
  return absl::OkStatus();
}

absl::Status RowLog::Put(absl::Span<const int64_t> ids, absl::Span<const float> rows,
                         absl::Span<const int64_t> freqs, absl::Span<const int64_t> versions) {
  if (!broken_.ok()) {
    return errors::FailedPrecondition(broken_.message(),
                                      "; the log takes no rows until Compact rewrites it");
  }
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t rf = options_.row_floats;
  if (static_cast<int64_t>(rows.size()) != n * rf || static_cast<int64_t>(freqs.size()) != n ||
      static_cast<int64_t>(versions.size()) != n) {
    return errors::InvalidArgument("row log ", path_, ": Put of ", n, " ids needs ", n * rf,
                                   " floats, ", n, " frequencies and ", n,
                                   " versions; got ", rows.size(), ", ", freqs.size(), " and ",
                                   versions.size());
  }
  if (records_ + static_cast<uint64_t>(n) > kVersionSaturated) {
    return errors::ResourceExhausted(
        "row log ", path_, ": ", records_, " records plus ", n,
        " exceed the log's limit of 2^32 - 1; Compact it");
  }
  const int64_t rb = RecordBytes();
  const int64_t per_piece = std::max<int64_t>(1, options_.write_buffer_bytes / rb);
  std::string buffer;
  buffer.reserve(static_cast<size_t>(std::min(n, per_piece) * rb));
  for (int64_t begin = 0; begin < n; begin += per_piece) {
    const int64_t end = std::min(n, begin + per_piece);
    buffer.clear();
    for (int64_t i = begin; i < end; ++i) {
      const RecordHead head{ids[i], versions[i], freqs[i]};
      buffer.append(reinterpret_cast<const char*>(&head), sizeof(head));
      buffer.append(reinterpret_cast<const char*>(rows.data() + i * rf),
                    static_cast<size_t>(rf) * sizeof(float));
    }
    absl::Status s = writer_->Append(buffer);
    if (s.ok()) s = writer_->Flush();  // readers see what the index points to
    if (!s.ok()) {
      // Part of the piece may stand in the file, so where the next record
      // would start is unknown: the log takes no more rows until Compact
      // rewrites it. The index never points at the piece; the rows of
      // earlier pieces of this call are in.
      broken_ = errors::Annotate(s, absl::StrCat("row log ", path_));
      return broken_;
    }
    for (int64_t i = begin; i < end; ++i) {
      const Entry entry{static_cast<uint32_t>(records_), Hint(versions[i])};
      auto [it, fresh] = index_.try_emplace(ids[i], entry);
      if (!fresh) {
        it->second = entry;
        ++dead_;
      }
      ++records_;
    }
  }
  return absl::OkStatus();
}

absl::Status RowLog::ReadRecord(uint64_t record, char* buf) const {
  const int64_t rb = RecordBytes();
  ASSIGN_OR_RETURN(absl::string_view got, reader_->Read(record * rb, rb, buf));
  if (static_cast<int64_t>(got.size()) != rb) {
    return errors::DataLoss("row log ", path_, ": record ", record, " is cut short (",
                            got.size(), " of ", rb, " bytes)");
  }
  if (got.data() != buf) std::memcpy(buf, got.data(), rb);
  return absl::OkStatus();
}

absl::Status RowLog::Get(absl::Span<const int64_t> ids, absl::Span<float> rows_out,
                         absl::Span<int64_t> freqs_out, absl::Span<int64_t> versions_out,
                         std::vector<char>* found, ThreadPool* pool) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t rf = options_.row_floats;
  if (static_cast<int64_t>(rows_out.size()) != n * rf ||
      static_cast<int64_t>(freqs_out.size()) != n ||
      static_cast<int64_t>(versions_out.size()) != n) {
    return errors::InvalidArgument("row log ", path_, ": Get of ", n, " ids needs room for ",
                                   n * rf, " floats, ", n, " frequencies and ", n, " versions");
  }
  found->assign(n, 0);
  const int64_t rb = RecordBytes();
  std::vector<absl::Status> errors_at(n);
  auto read = [&](int64_t begin, int64_t end) {
    std::vector<char> buf(rb);
    for (int64_t i = begin; i < end; ++i) {
      auto it = index_.find(ids[i]);
      if (it == index_.end()) continue;
      absl::Status s = ReadRecord(it->second.record, buf.data());
      RecordHead head;
      std::memcpy(&head, buf.data(), sizeof(head));
      if (s.ok() && head.id != ids[i]) {
        s = errors::DataLoss("row log ", path_, ": record ", it->second.record, " holds id ",
                             head.id, ", not ", ids[i]);
      }
      if (!s.ok()) {
        errors_at[i] = s;
        continue;
      }
      std::memcpy(rows_out.data() + i * rf, buf.data() + sizeof(head), rf * sizeof(float));
      freqs_out[i] = head.frequency;
      versions_out[i] = head.version;
      (*found)[i] = 1;
    }
  };
  if (pool != nullptr && pool->NumThreads() > 1 && n > 1) {
    // A read that misses the page cache waits for the device: those are
    // spread over the pool so several are in flight, while the records the
    // cache holds are read here without a hand-off.
    std::vector<int64_t> waiting;
    std::vector<char> buf(rb);
    for (int64_t i = 0; i < n; ++i) {
      auto it = index_.find(ids[i]);
      if (it == index_.end()) continue;
      absl::StatusOr<absl::string_view> got =
          reader_->ReadIfCached(it->second.record * rb, rb, buf.data());
      if (!got.ok() || static_cast<int64_t>(got->size()) != rb) {
        waiting.push_back(i);
        continue;
      }
      if (got->data() != buf.data()) std::memcpy(buf.data(), got->data(), rb);
      RecordHead head;
      std::memcpy(&head, buf.data(), sizeof(head));
      if (head.id != ids[i]) {
        waiting.push_back(i);  // Read reports it
        continue;
      }
      std::memcpy(rows_out.data() + i * rf, buf.data() + sizeof(head), rf * sizeof(float));
      freqs_out[i] = head.frequency;
      versions_out[i] = head.version;
      (*found)[i] = 1;
    }
    if (!waiting.empty()) {
      pool->ParallelFor(static_cast<int64_t>(waiting.size()), 20'000,
                        [&](int64_t begin, int64_t end) {
                          for (int64_t k = begin; k < end; ++k) read(waiting[k], waiting[k] + 1);
                        });
    }
  } else {
    read(0, n);
  }
  for (const absl::Status& s : errors_at) RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

int64_t RowLog::VersionOf(int64_t id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return -1;
  if (it->second.version_hint < kVersionSaturated)
    return it->second.version_hint;
  std::vector<char> buf(RecordBytes());
  if (!ReadRecord(it->second.record, buf.data()).ok()) return kVersionSaturated;
  RecordHead head;
  std::memcpy(&head, buf.data(), sizeof(head));
  return head.version;
}

std::vector<int64_t> RowLog::IdsSince(int64_t since_step) const {
  std::vector<int64_t> ids;
  if (since_step < 0) ids.reserve(index_.size());
  for (const auto& [id, e] : index_) {
    if (since_step < 0 || e.version_hint == kVersionSaturated ||
        static_cast<int64_t>(e.version_hint) > since_step) {
      ids.push_back(id);
    }
  }
  return ids;
}

absl::Status RowLog::ReadRange(uint64_t begin, uint64_t end, int64_t since_step,
                               std::vector<int64_t>* ids,
                               std::vector<float>* rows,
                               std::vector<int64_t>* freqs,
                               std::vector<int64_t>* versions) const {
  end = std::min(end, records_);
  if (begin >= end) return absl::OkStatus();
  const int64_t rb = RecordBytes();
  const int64_t rf = options_.row_floats;
  const size_t bytes = static_cast<size_t>((end - begin) * rb);
  std::vector<char> buf(bytes);
  ASSIGN_OR_RETURN(absl::string_view got,
                   reader_->Read(begin * rb, bytes, buf.data()));
  if (got.size() != bytes) {
    return errors::DataLoss("row log ", path_, ": records ", begin, "..", end,
                            " are cut short (", got.size(), " of ", bytes,
                            " bytes)");
  }
  for (uint64_t r = begin; r < end; ++r) {
    const char* rec = got.data() + (r - begin) * rb;
    RecordHead head;
    std::memcpy(&head, rec, sizeof(head));
    auto it = index_.find(head.id);
    if (it == index_.end() || it->second.record != r) continue;  // dead
    if (since_step >= 0 && head.version <= since_step) continue;
    ids->push_back(head.id);
    freqs->push_back(head.frequency);
    versions->push_back(head.version);
    const size_t at = rows->size();
    rows->resize(at + rf);
    std::memcpy(rows->data() + at, rec + sizeof(head), rf * sizeof(float));
  }
  return absl::OkStatus();
}

int64_t RowLog::Remove(absl::Span<const int64_t> ids) {
  int64_t removed = 0;
  for (const int64_t id : ids) {
    if (index_.erase(id) > 0) {
      ++removed;
      ++dead_;
    }
  }
  return removed;
}

absl::Status RowLog::ForEach(int64_t since_step, int64_t max_rows, const ChunkFn& fn) const {
  if (max_rows <= 0) {
    return errors::InvalidArgument("row log ", path_, ": max_rows must be > 0, got ", max_rows);
  }
  const int64_t rb = RecordBytes();
  const int64_t rf = options_.row_floats;
  // The live records wanted, in file order.
  std::vector<std::pair<uint64_t, int64_t>> wanted;  // (record, id)
  for (const auto& [id, e] : index_) {
    if (since_step < 0 || e.version_hint == kVersionSaturated ||
        static_cast<int64_t>(e.version_hint) > since_step) {
      wanted.push_back({e.record, id});
    }
  }
  std::sort(wanted.begin(), wanted.end());
  std::vector<int64_t> ids, freqs, versions;
  std::vector<float> rows;
  std::vector<char> buf(rb);
  for (size_t begin = 0; begin < wanted.size(); begin += max_rows) {
    const size_t end = std::min(wanted.size(), begin + static_cast<size_t>(max_rows));
    ids.clear();
    freqs.clear();
    versions.clear();
    rows.resize((end - begin) * rf);
    for (size_t k = begin; k < end; ++k) {
      RETURN_IF_ERROR(ReadRecord(wanted[k].first, buf.data()));
      RecordHead head;
      std::memcpy(&head, buf.data(), sizeof(head));
      if (head.id != wanted[k].second) {
        return errors::DataLoss("row log ", path_, ": record ", wanted[k].first, " holds id ",
                                head.id, ", not ", wanted[k].second);
      }
      if (since_step >= 0 && head.version <= since_step)
        continue;  // a saturated hint
      std::memcpy(rows.data() + ids.size() * rf, buf.data() + sizeof(head),
                  rf * sizeof(float));
      ids.push_back(head.id);
      freqs.push_back(head.frequency);
      versions.push_back(head.version);
    }
    rows.resize(ids.size() * rf);
    RETURN_IF_ERROR(fn(ids, rows, freqs, versions));
  }
  return absl::OkStatus();
}

absl::Status RowLog::Compact(bool force) {
  if (!force && broken_.ok() && dead_ <= size()) return absl::OkStatus();
  const std::string fresh = path_ + ".compacting";
  const RowLogOptions o = options_;
  std::unique_ptr<RowLog> next(new RowLog(env_, fresh, o));
  absl::Status s = next->Open();
  // The live records in file order, read in large sequential pieces.
  const uint64_t per_read =
      static_cast<uint64_t>(std::max<int64_t>(1, o.write_buffer_bytes / RecordBytes()));
  std::vector<int64_t> ids, freqs, versions;
  std::vector<float> rows;
  for (uint64_t begin = 0; s.ok() && begin < records_; begin += per_read) {
    ids.clear();
    freqs.clear();
    versions.clear();
    rows.clear();
    s = ReadRange(begin, begin + per_read, -1, &ids, &rows, &freqs, &versions);
    if (s.ok() && !ids.empty()) s = next->Put(ids, rows, freqs, versions);
  }
  if (s.ok()) s = next->writer_->Close();
  if (s.ok()) s = env_->RenameFile(fresh, path_);
  if (!s.ok()) {
    env_->DeleteFile(fresh).IgnoreError();
    return errors::Annotate(s, absl::StrCat("compacting row log ", path_));
  }
  // The renamed file is this log's now: reopen for appends at its end.
  ASSIGN_OR_RETURN(auto writer, env_->NewAppendableFile(path_));
  ASSIGN_OR_RETURN(auto reader, env_->NewRandomAccessFile(path_));
  writer_->Close().IgnoreError();
  writer_ = std::move(writer);
  reader_ = std::move(reader);
  index_ = std::move(next->index_);
  records_ = next->records_;
  dead_ = 0;
  broken_ = absl::OkStatus();
  ++compactions_;
  return absl::OkStatus();
}

RowLogStats RowLog::GetStats() const {
  RowLogStats t;
  t.live = size();
  t.dead = dead_;
  t.file_bytes = static_cast<int64_t>(records_) * RecordBytes();
  t.index_bytes = index_bytes();
  t.compactions = compactions_;
  return t;
}

}  // namespace recflow::embedding
