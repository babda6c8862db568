// DataStats, IteratorState (with its byte format), Iterator, ListFiles, the
// Dataset builder and the helpers shared by the stages.

#include "recflow/data/dataset.h"

#include <fnmatch.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset_internal.h"
#include "recflow/framework/tensor_util.h"

namespace recflow::data {

// ---------------------------------------------------------------------------
// DataStats

void DataStats::AddRecordsRead(int64_t n) {
  MutexLock lock(&mu_);
  read_ += n;
}

void DataStats::AddSkipped(absl::string_view reason, absl::string_view detail) {
  MutexLock lock(&mu_);
  ++skipped_;
  std::string key(reason);
  if (++by_reason_[key] == 1) first_detail_[key] = std::string(detail);
}

int64_t DataStats::records_read() const {
  MutexLock lock(&mu_);
  return read_;
}

int64_t DataStats::records_skipped() const {
  MutexLock lock(&mu_);
  return skipped_;
}

std::map<std::string, int64_t> DataStats::skipped_by_reason() const {
  MutexLock lock(&mu_);
  return by_reason_;
}

std::map<std::string, std::string> DataStats::first_skip_detail() const {
  MutexLock lock(&mu_);
  return first_detail_;
}

std::string DataStats::Summary() const {
  MutexLock lock(&mu_);
  if (skipped_ == 0) return "no bad records";
  std::vector<std::string> parts;
  for (const auto& [reason, count] : by_reason_) {
    parts.push_back(absl::StrCat(reason, " ", count,
                                 " (first: ", first_detail_.at(reason), ")"));
  }
  return absl::StrCat("skipped ", skipped_,
                      " records: ", absl::StrJoin(parts, ", "));
}

absl::Status HandleBadRecord(const ErrorPolicy& policy, DataStats* stats,
                             absl::string_view reason, absl::Status error) {
  if (policy.mode == ErrorMode::kFail) return error;
  if (stats != nullptr) stats->AddSkipped(reason, error.message());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// IteratorState
//
// Byte format (all integers little endian):
//   "RFIS" u32 version(=1) u64 num_entries
//   num_entries x { u32 key_len, key, u8 kind, u64 payload_len, payload }
//   u32 masked crc32c of every byte before it
// Payloads: kInt: 8 bytes. kString: the bytes. kTensor: u8 encoding,
// u32 dtype, u32 rank, rank x i64 dims, then for encoding 0 (fixed-size
// dtype) the raw element bytes, for 1 (string) per element u64 length +
// bytes, for 2 (other dtypes) a serialized TensorProto, for 3 (an
// uninitialized Tensor()) nothing.

namespace {

constexpr char kStateMagic[4] = {'R', 'F', 'I', 'S'};
constexpr uint32_t kStateVersion = 1;

void PutU8(std::string* out, uint8_t v) {
  out->push_back(static_cast<char>(v));
}
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}
void PutU64(std::string* out, uint64_t v) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}

// Bounds-checked little-endian reader; every failure is DataLoss.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}
  bool U8(uint8_t* v) {
    if (data_.size() < 1) return false;
    *v = static_cast<uint8_t>(data_[0]);
    data_.remove_prefix(1);
    return true;
  }
  bool U32(uint32_t* v) {
    if (data_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i)
      *v |= uint32_t{static_cast<uint8_t>(data_[i])} << (8 * i);
    data_.remove_prefix(4);
    return true;
  }
  bool U64(uint64_t* v) {
    if (data_.size() < 8) return false;
    *v = 0;
    for (int i = 0; i < 8; ++i)
      *v |= uint64_t{static_cast<uint8_t>(data_[i])} << (8 * i);
    data_.remove_prefix(8);
    return true;
  }
  bool Bytes(uint64_t n, absl::string_view* v) {
    if (data_.size() < n) return false;
    *v = data_.substr(0, n);
    data_.remove_prefix(n);
    return true;
  }
  size_t remaining() const { return data_.size(); }

 private:
  absl::string_view data_;
};

void EncodeTensor(const Tensor& t, std::string* out) {
  if (t.dtype() == DT_INVALID) {
    PutU8(out, 3);
    return;
  }
  const bool pod = DataTypeIsPod(t.dtype());
  const bool str = t.dtype() == DT_STRING;
  if (!pod && !str) {
    PutU8(out, 2);
    tensorflow::TensorProto proto;
    TensorToProto(t, &proto);
    out->append(proto.SerializeAsString());
    return;
  }
  PutU8(out, pod ? 0 : 1);
  PutU32(out, static_cast<uint32_t>(t.dtype()));
  PutU32(out, static_cast<uint32_t>(t.dims()));
  for (int d = 0; d < t.dims(); ++d)
    PutU64(out, static_cast<uint64_t>(t.dim_size(d)));
  if (pod) {
    out->append(t.raw_data() == nullptr ? "" : t.raw_data(),
                t.NumElements() * DataTypeSize(t.dtype()));
  } else {
    for (const std::string& s : t.flat<std::string>()) {
      PutU64(out, s.size());
      out->append(s);
    }
  }
}

absl::StatusOr<Tensor> DecodeTensor(absl::string_view payload,
                                    const std::string& key) {
  auto corrupt = [&key](absl::string_view why) {
    return errors::DataLoss("iterator state: tensor '", key, "' is corrupted (",
                            why, ")");
  };
  Reader r(payload);
  uint8_t encoding;
  if (!r.U8(&encoding)) return corrupt("empty");
  if (encoding == 3) {
    if (r.remaining() != 0) return corrupt("trailing bytes");
    return Tensor();
  }
  if (encoding == 2) {
    tensorflow::TensorProto proto;
    if (!proto.ParseFromArray(payload.data() + 1, payload.size() - 1)) {
      return corrupt("bad TensorProto");
    }
    absl::StatusOr<Tensor> t = TensorFromProto(proto);
    if (!t.ok()) return corrupt(t.status().message());
    return t;
  }
  if (encoding > 1) return corrupt("unknown encoding");
  uint32_t dtype, rank;
  if (!r.U32(&dtype) || !r.U32(&rank) || rank > 64)
    return corrupt("bad header");
  if (!DataTypeIsValid(static_cast<int>(dtype)) ||
      IsRefType(static_cast<DataType>(dtype)) ||
      (encoding == 0) != DataTypeIsPod(static_cast<DataType>(dtype)) ||
      (encoding == 1) != (dtype == DT_STRING)) {
    return corrupt(absl::StrCat("bad dtype ", dtype));
  }
  std::vector<int64_t> dims(rank);
  for (uint32_t d = 0; d < rank; ++d) {
    uint64_t v;
    if (!r.U64(&v)) return corrupt("bad dims");
    dims[d] = static_cast<int64_t>(v);
  }
  absl::StatusOr<TensorShape> shape = TensorShape::Build(dims);
  if (!shape.ok()) return corrupt(shape.status().message());
  const int64_t n = shape->num_elements();
  const DataType dt = static_cast<DataType>(dtype);
  if (encoding == 0) {
    const size_t elem = DataTypeSize(dt);
    if (static_cast<uint64_t>(n) > r.remaining() / std::max<size_t>(elem, 1) ||
        n * elem != r.remaining()) {
      return corrupt("size does not match the shape");
    }
  } else if (static_cast<uint64_t>(n) > r.remaining() / 8) {
    return corrupt("too few bytes for the shape");
  }
  absl::StatusOr<Tensor> t = Tensor::Create(dt, *shape);
  if (!t.ok()) return corrupt(t.status().message());
  if (encoding == 0) {
    absl::string_view bytes;
    r.Bytes(r.remaining(), &bytes);
    if (!bytes.empty()) std::memcpy(t->raw_data(), bytes.data(), bytes.size());
    return t;
  }
  std::string* dst = t->data<std::string>();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t len;
    absl::string_view bytes;
    if (!r.U64(&len) || !r.Bytes(len, &bytes))
      return corrupt("truncated string");
    dst[i].assign(bytes.data(), bytes.size());
  }
  if (r.remaining() != 0) return corrupt("trailing bytes");
  return t;
}

}  // namespace

void IteratorState::WriteInt(const std::string& key, int64_t v) {
  Entry& e = entries_[key];
  e = Entry{Entry::kInt};
  e.i = v;
}

void IteratorState::WriteString(const std::string& key, std::string v) {
  Entry& e = entries_[key];
  e = Entry{Entry::kString};
  e.s = std::move(v);
}

void IteratorState::WriteTensor(const std::string& key, const Tensor& t) {
  Entry& e = entries_[key];
  e = Entry{Entry::kTensor};
  e.t = t;
}

bool IteratorState::Contains(const std::string& key) const {
  return entries_.count(key) != 0;
}

namespace {
const char* KindName(int kind) {
  switch (kind) {
    case 0:
      return "int";
    case 1:
      return "string";
    default:
      return "tensor";
  }
}
}  // namespace

#define RECFLOW_STATE_LOOKUP_(KIND)                                          \
  auto it = entries_.find(key);                                              \
  if (it == entries_.end()) {                                                \
    return errors::NotFound("iterator state has no entry '", key, "'");      \
  }                                                                          \
  if (it->second.kind != Entry::KIND) {                                      \
    return errors::InvalidArgument("iterator state entry '", key, "' is a ", \
                                   KindName(it->second.kind), ", not a ",    \
                                   KindName(Entry::KIND));                   \
  }

absl::StatusOr<int64_t> IteratorState::ReadInt(const std::string& key) const {
  RECFLOW_STATE_LOOKUP_(kInt)
  return it->second.i;
}

absl::StatusOr<std::string> IteratorState::ReadString(
    const std::string& key) const {
  RECFLOW_STATE_LOOKUP_(kString)
  return it->second.s;
}

absl::StatusOr<Tensor> IteratorState::ReadTensor(const std::string& key) const {
  RECFLOW_STATE_LOOKUP_(kTensor)
  return it->second.t;
}
#undef RECFLOW_STATE_LOOKUP_

size_t IteratorState::size() const { return entries_.size(); }

std::string IteratorState::Serialize() const {
  std::string out(kStateMagic, 4);
  PutU32(&out, kStateVersion);
  PutU64(&out, entries_.size());
  std::string payload;
  for (const auto& [key, e] : entries_) {
    PutU32(&out, static_cast<uint32_t>(key.size()));
    out.append(key);
    PutU8(&out, static_cast<uint8_t>(e.kind));
    switch (e.kind) {
      case Entry::kInt:
        PutU64(&out, 8);
        PutU64(&out, static_cast<uint64_t>(e.i));
        break;
      case Entry::kString:
        PutU64(&out, e.s.size());
        out.append(e.s);
        break;
      case Entry::kTensor:
        payload.clear();
        EncodeTensor(e.t, &payload);
        PutU64(&out, payload.size());
        out.append(payload);
        break;
    }
  }
  PutU32(&out, crc32c::Mask(crc32c::Value(out)));
  return out;
}

absl::StatusOr<IteratorState> IteratorState::Parse(absl::string_view bytes) {
  if (bytes.size() < 4 + 4 + 8 + 4) {
    return errors::DataLoss("iterator state is truncated: ", bytes.size(),
                            " bytes");
  }
  if (std::memcmp(bytes.data(), kStateMagic, 4) != 0) {
    return errors::DataLoss(
        "iterator state: bad magic (not a recflow iterator "
        "state)");
  }
  const absl::string_view body = bytes.substr(0, bytes.size() - 4);
  Reader trailer(bytes.substr(bytes.size() - 4));
  uint32_t masked;
  trailer.U32(&masked);
  if (crc32c::Unmask(masked) != crc32c::Value(body)) {
    return errors::DataLoss("iterator state: crc32c mismatch (", bytes.size(),
                            " bytes; truncated or corrupted)");
  }
  Reader r(body.substr(4));
  uint32_t version;
  uint64_t count;
  if (!r.U32(&version) || !r.U64(&count)) {
    return errors::DataLoss("iterator state: bad header");
  }
  if (version != kStateVersion) {
    return errors::DataLoss("iterator state: unknown version ", version);
  }
  IteratorState state;
  for (uint64_t i = 0; i < count; ++i) {
    uint32_t key_len;
    uint8_t kind;
    uint64_t len;
    absl::string_view key, payload;
    if (!r.U32(&key_len) || !r.Bytes(key_len, &key) || !r.U8(&kind) ||
        !r.U64(&len) || !r.Bytes(len, &payload)) {
      return errors::DataLoss("iterator state: entry ", i, " of ", count,
                              " is truncated");
    }
    std::string k(key);
    switch (kind) {
      case Entry::kInt: {
        Reader p(payload);
        uint64_t v;
        if (len != 8 || !p.U64(&v)) {
          return errors::DataLoss("iterator state: int entry '", k, "' has ",
                                  len, " bytes");
        }
        state.WriteInt(k, static_cast<int64_t>(v));
        break;
      }
      case Entry::kString:
        state.WriteString(k, std::string(payload));
        break;
      case Entry::kTensor: {
        ASSIGN_OR_RETURN(Tensor t, DecodeTensor(payload, k));
        state.WriteTensor(k, t);
        break;
      }
      default:
        return errors::DataLoss("iterator state: entry '", k,
                                "' has unknown kind ", int{kind});
    }
  }
  if (r.remaining() != 0) {
    return errors::DataLoss("iterator state: ", r.remaining(),
                            " trailing bytes");
  }
  return state;
}

// ---------------------------------------------------------------------------
// IteratorBase, Iterator

std::string IteratorBase::Key(absl::string_view name) const {
  return absl::StrCat(prefix_, "/", name);
}

absl::StatusOr<std::string> Iterator::SaveToString() {
  IteratorState state;
  RETURN_IF_ERROR(impl_->Save(&state));
  return state.Serialize();
}

absl::Status Iterator::RestoreFromString(absl::string_view bytes) {
  ASSIGN_OR_RETURN(IteratorState state, IteratorState::Parse(bytes));
  return impl_->Restore(state);
}

// ---------------------------------------------------------------------------
// ListFiles

namespace {
bool HasGlob(absl::string_view s) {
  return s.find_first_of("*?[") != absl::string_view::npos;
}
}  // namespace

absl::StatusOr<std::vector<std::string>> ListFiles(
    Env* env, const std::vector<std::string>& patterns) {
  if (env == nullptr) env = Env::Default();
  std::vector<std::string> files;
  for (const std::string& pattern : patterns) {
    const std::string dir = Dirname(pattern);
    const std::string base = Basename(pattern);
    if (HasGlob(dir)) {
      return errors::InvalidArgument(
          "ListFiles: pattern '", pattern,
          "' has a glob character in a directory; only the last path "
          "component may have one");
    }
    size_t before = files.size();
    if (!HasGlob(base)) {
      if (env->FileExists(pattern) && !env->IsDirectory(pattern).ok()) {
        files.push_back(pattern);
      }
    } else {
      absl::StatusOr<std::vector<std::string>> children =
          env->GetChildren(dir.empty() ? "." : dir);
      if (children.ok()) {
        for (const std::string& name : *children) {
          if (fnmatch(base.c_str(), name.c_str(), FNM_PERIOD) != 0) continue;
          std::string path = JoinPath(dir, name);
          if (env->IsDirectory(path).ok()) continue;
          files.push_back(std::move(path));
        }
      } else if (!absl::IsNotFound(children.status())) {
        return errors::Annotate(
            children.status(),
            absl::StrCat("ListFiles: pattern '", pattern, "'"));
      }
    }
    if (files.size() == before) {
      return errors::NotFound("ListFiles: pattern '", pattern,
                              "' matches no file");
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

// ---------------------------------------------------------------------------
// Shared stage helpers

namespace internal {

void SaveElement(IteratorState* state, const std::string& key,
                 const Element& element) {
  state->WriteInt(key + "/n", static_cast<int64_t>(element.size()));
  for (size_t i = 0; i < element.size(); ++i) {
    state->WriteTensor(absl::StrCat(key, "/", i), element[i]);
  }
}

absl::StatusOr<Element> RestoreElement(const IteratorState& state,
                                       const std::string& key) {
  ASSIGN_OR_RETURN(int64_t n, state.ReadInt(key + "/n"));
  if (n < 0 || n > (int64_t{1} << 20)) {
    return errors::DataLoss("iterator state: '", key, "/n' is ", n);
  }
  // Grown as the entries are read, not sized from `n` up front: a state
  // claiming 2^20 components must not cost their allocation before it fails.
  Element element;
  for (int64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(Tensor t, state.ReadTensor(absl::StrCat(key, "/", i)));
    element.push_back(std::move(t));
  }
  return element;
}

void SaveResults(IteratorState* state, const std::string& key,
                 const std::vector<const Result*>& results) {
  state->WriteInt(key + "/count", static_cast<int64_t>(results.size()));
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = *results[i];
    const std::string k = absl::StrCat(key, "/", i);
    state->WriteInt(k + "/end", r.end ? 1 : 0);
    state->WriteInt(k + "/code", static_cast<int64_t>(r.status.code()));
    if (!r.status.ok()) {
      state->WriteString(k + "/message", std::string(r.status.message()));
    } else if (!r.end) {
      SaveElement(state, k, r.element);
    }
  }
}

absl::StatusOr<std::vector<Result>> RestoreResults(const IteratorState& state,
                                                   const std::string& key) {
  ASSIGN_OR_RETURN(int64_t count, state.ReadInt(key + "/count"));
  if (count < 0 || count > (int64_t{1} << 32)) {
    return errors::DataLoss("iterator state: '", key, "/count' is ", count);
  }
  // Grown as the entries are read: a corrupted count (up to 2^32) must
  // fail at its first missing entry, not allocate `count` results first.
  std::vector<Result> results;
  for (int64_t i = 0; i < count; ++i) {
    const std::string k = absl::StrCat(key, "/", i);
    Result& r = results.emplace_back();
    ASSIGN_OR_RETURN(int64_t end, state.ReadInt(k + "/end"));
    ASSIGN_OR_RETURN(int64_t code, state.ReadInt(k + "/code"));
    r.end = end != 0;
    if (code != 0) {
      // absl's codes run 1..16; any other (2^32 would truncate to OK) is
      // damage, not an error to replay.
      if (code < 1 || code > static_cast<int64_t>(absl::StatusCode::kUnauthenticated)) {
        return errors::DataLoss("iterator state: '", k, "/code' is ", code);
      }
      ASSIGN_OR_RETURN(std::string message, state.ReadString(k + "/message"));
      r.status = absl::Status(static_cast<absl::StatusCode>(code), message);
    } else if (!r.end) {
      ASSIGN_OR_RETURN(r.element, RestoreElement(state, k));
    }
  }
  return results;
}

std::shared_ptr<const IteratorContext> ContextForPass(
    const std::shared_ptr<const IteratorContext>& ctx, int64_t pass) {
  if (pass == 0) return ctx;
  auto c = std::make_shared<IteratorContext>(*ctx);
  c->epoch = Mix64(ctx->epoch ^ Mix64(static_cast<uint64_t>(pass)));
  return c;
}

namespace {
class ErrorIterator : public IteratorBase {
 public:
  ErrorIterator(std::shared_ptr<const IteratorContext> ctx, std::string prefix,
                absl::Status status)
      : IteratorBase(std::move(ctx), std::move(prefix)),
        status_(std::move(status)) {}
  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    return status_;
  }
  absl::Status Save(IteratorState*) override { return status_; }
  absl::Status Restore(const IteratorState&) override { return status_; }

 private:
  absl::Status status_;
};
}  // namespace

std::unique_ptr<IteratorBase> MakeErrorIterator(
    std::shared_ptr<const IteratorContext> ctx, const std::string& prefix,
    absl::Status status) {
  return std::make_unique<ErrorIterator>(std::move(ctx), prefix,
                                         std::move(status));
}

absl::Status CheckElement(const Element& element,
                          const std::vector<DataType>& dtypes,
                          const std::vector<PartialShape>& shapes,
                          absl::string_view what) {
  if (dtypes.empty()) return absl::OkStatus();
  if (element.size() != dtypes.size()) {
    return errors::InvalidArgument(what, ": produced an element of ",
                                   element.size(), " components, declared ",
                                   dtypes.size());
  }
  for (size_t i = 0; i < element.size(); ++i) {
    if (element[i].dtype() != dtypes[i]) {
      return errors::InvalidArgument(what, ": component ", i, " is ",
                                     DataTypeString(element[i].dtype()),
                                     ", declared ", DataTypeString(dtypes[i]));
    }
    if (i < shapes.size() &&
        !shapes[i].IsCompatibleWith(PartialShape(element[i].shape()))) {
      return errors::InvalidArgument(what, ": component ", i, " has shape ",
                                     element[i].shape().DebugString(),
                                     ", declared ", shapes[i].DebugString());
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSignature(const std::vector<DataType>& dtypes,
                            const std::vector<PartialShape>& shapes,
                            absl::string_view what) {
  if (!shapes.empty() && shapes.size() != dtypes.size()) {
    return errors::InvalidArgument(what, ": ", shapes.size(),
                                   " output shapes for ", dtypes.size(),
                                   " output dtypes");
  }
  return absl::OkStatus();
}

std::unique_ptr<IteratorBase> UnaryDataset::MakeIteratorInternal(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  absl::Status s = CheckValid();
  if (!s.ok()) return MakeErrorIterator(std::move(ctx), prefix, s);
  return MakeStageIterator(std::move(ctx), prefix);
}

absl::Status UnaryDataset::CheckValid() const {
  RETURN_IF_ERROR(status_);
  return input_->CheckValid();
}

std::string UnaryDataset::DebugString() const {
  return absl::StrCat(StageString(), "<-", input_->DebugString());
}

}  // namespace internal

// ---------------------------------------------------------------------------
// The builder

Dataset Dataset::TextLine(std::vector<std::string> files, ShardOptions shard,
                          TextLineOptions opts) {
  return Dataset(internal::NewTextLineDataset(std::move(files), shard, opts));
}

Dataset Dataset::FromTensorSlices(Element components) {
  return Dataset(internal::NewFromTensorSlicesDataset(std::move(components)));
}

Dataset Dataset::Range(int64_t n) {
  return Dataset(internal::NewRangeDataset(n));
}

Dataset Dataset::Interleave(
    std::function<absl::StatusOr<Dataset>(const Element&)> fn, int cycle_length,
    int block_length, int num_parallel_calls, std::vector<DataType> out_dtypes,
    std::vector<PartialShape> out_shapes) const {
  return Dataset(internal::NewInterleaveDataset(
      impl_, std::move(fn), cycle_length, block_length, num_parallel_calls,
      std::move(out_dtypes), std::move(out_shapes)));
}

Dataset Dataset::Map(MapFn fn, int num_parallel_calls,
                     std::vector<DataType> out_dtypes,
                     std::vector<PartialShape> out_shapes) const {
  return Dataset(
      internal::NewMapDataset(impl_, std::move(fn), num_parallel_calls,
                              std::move(out_dtypes), std::move(out_shapes)));
}

Dataset Dataset::Shuffle(int64_t buffer_size, int64_t seed,
                         bool reshuffle_each_iteration) const {
  return Dataset(internal::NewShuffleDataset(impl_, buffer_size, seed,
                                             reshuffle_each_iteration));
}

Dataset Dataset::Batch(int64_t batch_size, bool drop_remainder,
                       BatchOptions opts) const {
  return Dataset(
      internal::NewBatchDataset(impl_, batch_size, drop_remainder, opts));
}

Dataset Dataset::Prefetch(int64_t buffer_size) const {
  return Dataset(internal::NewPrefetchDataset(impl_, buffer_size));
}

Dataset Dataset::Repeat(int64_t count) const {
  return Dataset(internal::NewRepeatDataset(impl_, count));
}

Dataset Dataset::Take(int64_t count) const {
  return Dataset(internal::NewTakeDataset(impl_, count));
}

Dataset Dataset::Skip(int64_t count) const {
  return Dataset(internal::NewSkipDataset(impl_, count));
}

Dataset Dataset::Cache() const {
  return Dataset(internal::NewCacheDataset(impl_));
}

absl::StatusOr<Iterator> Dataset::MakeIterator(IteratorContext ctx) const {
  RETURN_IF_ERROR(impl_->CheckValid());
  if (ctx.env == nullptr) ctx.env = Env::Default();
  if (ctx.stats == nullptr) ctx.stats = std::make_shared<DataStats>();
  if (ctx.resources == nullptr)
    ctx.resources = std::make_shared<IteratorResources>();
  Iterator it;
  it.dataset_ = impl_;
  it.ctx_ = std::make_shared<const IteratorContext>(std::move(ctx));
  it.impl_ = impl_->MakeIteratorInternal(it.ctx_, "Iterator");
  return it;
}

}  // namespace recflow::data
