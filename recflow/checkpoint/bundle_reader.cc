#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/tensor_slice.h"
#include "recflow/core/direct_file.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/allocator.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/status.h"

namespace recflow::checkpoint {
namespace {

// Sequential reads of [start, end) of a file through a bounded buffer.
class RangeReader {
 public:
  RangeReader(const RandomAccessFile* file, uint64_t start, uint64_t end, size_t chunk)
      : file_(file), pos_(start), end_(end), chunk_(std::max<size_t>(chunk, 64)) {}

  uint64_t remaining() const { return (end_ - pos_) + (buf_.size() - buf_pos_); }

  // False when the range ends inside the varint or it is malformed.
  absl::StatusOr<bool> ReadVarint64(uint64_t* value) {
    if (buf_.size() - buf_pos_ < 10) RETURN_IF_ERROR(Refill());
    absl::string_view in(buf_.data() + buf_pos_, buf_.size() - buf_pos_);
    const size_t before = in.size();
    if (!table::GetVarint64(&in, value)) return false;
    buf_pos_ += before - in.size();
    return true;
  }

  // REQUIRES: n <= remaining().
  absl::Status ReadBytes(uint64_t n, char* dst) {
    while (n > 0) {
      if (buf_pos_ == buf_.size()) {
        if (n >= chunk_) {  // large: read straight into dst
          ASSIGN_OR_RETURN(absl::string_view got, file_->Read(pos_, n, dst));
          if (got.size() != n) return errors::DataLoss("short read");
          if (got.data() != dst) std::memcpy(dst, got.data(), n);
          pos_ += n;
          return absl::OkStatus();
        }
        RETURN_IF_ERROR(Refill());
        if (buf_pos_ == buf_.size()) return errors::DataLoss("short read");
      }
      const uint64_t take = std::min<uint64_t>(n, buf_.size() - buf_pos_);
      std::memcpy(dst, buf_.data() + buf_pos_, take);
      buf_pos_ += take;
      dst += take;
      n -= take;
    }
    return absl::OkStatus();
  }

 private:
  // Keeps the unread bytes and appends up to one chunk.
  absl::Status Refill() {
    buf_.erase(0, buf_pos_);
    buf_pos_ = 0;
    const uint64_t want = std::min<uint64_t>(chunk_, end_ - pos_);
    if (want == 0) return absl::OkStatus();
    const size_t have = buf_.size();
    buf_.resize(have + want);
    ASSIGN_OR_RETURN(absl::string_view got, file_->Read(pos_, want, buf_.data() + have));
    if (got.size() != want) return errors::DataLoss("short read");
    if (got.data() != buf_.data() + have) std::memcpy(buf_.data() + have, got.data(), want);
    pos_ += want;
    return absl::OkStatus();
  }

  const RandomAccessFile* file_;
  uint64_t pos_;
  const uint64_t end_;
  const size_t chunk_;
  std::string buf_;
  size_t buf_pos_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BundleReader>> BundleReader::Open(
    Env* env, absl::string_view prefix, const BundleReaderOptions& options) {
  std::unique_ptr<BundleReader> reader(new BundleReader(env, std::string(prefix), options));
  const std::string index_path = MetaFilename(prefix);
  auto size = env->GetFileSize(index_path);
  if (!size.ok()) {
    if (absl::IsNotFound(size.status())) {
      return errors::NotFound("checkpoint ", prefix, " not found: no index file ", index_path);
    }
    return errors::Annotate(size.status(), absl::StrCat("opening checkpoint index ", index_path));
  }
  ASSIGN_OR_RETURN(reader->index_file_, env->NewRandomAccessFile(index_path));
  ASSIGN_OR_RETURN(reader->table_,
                   table::Table::Open(reader->index_file_.get(), *size, index_path));
  auto header = reader->table_->Get(kHeaderEntryKey);
  if (!header.ok()) {
    if (absl::IsNotFound(header.status())) {
      return errors::DataLoss("checkpoint index ", index_path,
                              " has no header entry (corrupted)");
    }
    return header.status();
  }
  tensorflow::BundleHeaderProto& h = reader->header_;
  if (!h.ParseFromString(*header)) {
    return errors::DataLoss("checkpoint index ", index_path,
                            ": header entry does not parse (corrupted)");
  }
  if (h.num_shards() <= 0) {
    return errors::DataLoss("checkpoint index ", index_path, ": header declares ",
                            h.num_shards(), " data shards (corrupted)");
  }
  if (h.endianness() != tensorflow::BundleHeaderProto::LITTLE) {
    return errors::Unimplemented("checkpoint ", prefix,
                                 " was written on a big-endian machine; recflow reads "
                                 "little-endian bundles only");
  }
  const tensorflow::VersionDef& v = h.version();
  if (v.producer() < kTensorBundleMinProducer || v.min_consumer() > kTensorBundleVersion ||
      std::find(v.bad_consumers().begin(), v.bad_consumers().end(), kTensorBundleVersion) !=
          v.bad_consumers().end()) {
    return errors::FailedPrecondition(
        "checkpoint ", prefix, " has format version producer ", v.producer(),
        ", min_consumer ", v.min_consumer(), "; this reader is version ",
        kTensorBundleVersion);
  }
  reader->data_files_.resize(h.num_shards());
  return reader;
}

absl::StatusOr<TensorInfo> BundleReader::ParseEntry(absl::string_view name,
                                                    absl::string_view value) const {
  const std::string index_path = MetaFilename(prefix_);
  tensorflow::BundleEntryProto entry;
  if (!entry.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return errors::DataLoss("checkpoint index ", index_path, ": entry for tensor '", name,
                            "' does not parse (corrupted)");
  }
  TensorInfo info;
  info.name = std::string(name);
  const int dt = entry.dtype();
  if (!DataTypeIsValid(dt) || IsRefType(static_cast<DataType>(dt)) || dt == DT_INVALID) {
    return errors::DataLoss("checkpoint index ", index_path, ": tensor '", name,
                            "' has invalid dtype ", dt, " (corrupted)");
  }
  info.dtype = static_cast<DataType>(dt);
  if (!DataTypeIsPod(info.dtype) && info.dtype != DT_STRING) {
    return errors::Unimplemented("tensor '", name, "' in checkpoint ", prefix_, " has dtype ",
                                 DataTypeString(info.dtype), ", which recflow cannot restore");
  }
  if (entry.shape().unknown_rank()) {
    return errors::DataLoss("checkpoint index ", index_path, ": tensor '", name,
                            "' has a shape of unknown rank (corrupted)");
  }
  std::vector<int64_t> dims;
  for (const auto& d : entry.shape().dim()) dims.push_back(d.size());
  auto shape = TensorShape::Build(dims);
  if (!shape.ok()) {
    return errors::DataLoss("checkpoint index ", index_path, ": tensor '", name,
                            "' has an invalid shape: ", shape.status().message());
  }
  info.shape = *std::move(shape);
  if (entry.slices_size() > 0) {
    // Saved in parts, each under its own key; this entry holds no data.
    // (Its dtype was checked above: fixed-size or string.)
    for (const auto& proto : entry.slices()) {
      ASSIGN_OR_RETURN(TensorSlice slice,
                       SliceFromProto(proto, info.shape, name, absl::StrCat("checkpoint index ",
                                                                            index_path)));
      info.slices.push_back(std::move(slice));
    }
    return info;
  }
  if (entry.shard_id() < 0 || entry.shard_id() >= header_.num_shards()) {
    return errors::DataLoss("checkpoint index ", index_path, ": tensor '", name,
                            "' names data shard ", entry.shard_id(), " of ",
                            header_.num_shards(), " (corrupted)");
  }
  if (entry.offset() < 0 || entry.size() < 0) {
    return errors::DataLoss("checkpoint index ", index_path, ": tensor '", name,
                            "' has negative offset or size (corrupted)");
  }
  info.shard_id = entry.shard_id();
  info.offset = static_cast<uint64_t>(entry.offset());
  info.size = static_cast<uint64_t>(entry.size());
  info.masked_crc32c = entry.crc32c();
  const uint64_t n = static_cast<uint64_t>(info.shape.num_elements());
  if (DataTypeIsPod(info.dtype)) {
    const uint64_t elem = DataTypeSize(info.dtype);
    if (n > UINT64_MAX / elem || n * elem != info.size) {
      return errors::DataLoss("checkpoint index ", index_path, ": tensor '", name, "' ",
                              DataTypeString(info.dtype), " ", info.shape.DebugString(),
                              " should take ", n * elem, " bytes but its entry says ",
                              info.size, " (corrupted)");
    }
  } else if (n > 0 && info.size < n + sizeof(uint32_t)) {
    // Each string needs at least a 1-byte length, plus the length checksum.
    return errors::DataLoss("checkpoint index ", index_path, ": string tensor '", name,
                            "' ", info.shape.DebugString(), " cannot fit in ", info.size,
                            " bytes (corrupted)");
  }
  return info;
}

absl::Status BundleReader::ForEachEntry(
    const std::function<absl::Status(absl::string_view, const tensorflow::BundleEntryProto&)>&
        fn) const {
  auto it = table_->NewIterator();
  it->SeekToFirst();
  for (; it->Valid(); it->Next()) {
    if (it->key().empty()) continue;  // the header
    tensorflow::BundleEntryProto entry;
    if (!entry.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return errors::DataLoss("checkpoint index ", MetaFilename(prefix_), ": entry for '",
                              it->key(), "' does not parse (corrupted)");
    }
    RETURN_IF_ERROR(fn(it->key(), entry));
  }
  return it->status();
}

absl::StatusOr<std::vector<TensorInfo>> BundleReader::ListTensors() const {
  std::vector<TensorInfo> out;
  auto it = table_->NewIterator();
  it->SeekToFirst();
  for (; it->Valid(); it->Next()) {
    if (it->key().empty() || IsSliceKey(it->key())) continue;  // header, parts of tensors
    ASSIGN_OR_RETURN(TensorInfo info, ParseEntry(it->key(), it->value()));
    out.push_back(std::move(info));
  }
  RETURN_IF_ERROR(it->status());
  return out;
}

bool BundleReader::Contains(absl::string_view name) const {
  return !name.empty() && table_->Get(name).ok();
}

absl::StatusOr<TensorInfo> BundleReader::GetInfo(absl::string_view name) const {
  if (name.empty()) return errors::InvalidArgument("empty tensor name");
  auto value = table_->Get(name);
  if (!value.ok()) {
    if (absl::IsNotFound(value.status())) {
      return errors::NotFound("tensor '", name, "' not found in checkpoint ", prefix_);
    }
    return value.status();
  }
  return ParseEntry(name, *value);
}

absl::Status BundleReader::GetDataFile(int shard, const RandomAccessFile** file, uint64_t* size,
                                       std::string* path) const {
  MutexLock lock(&mu_);
  std::unique_ptr<DataFile>& slot = data_files_[shard];
  if (slot == nullptr) {
    auto df = std::make_unique<DataFile>();
    df->path = DataFilename(prefix_, shard, header_.num_shards());
    auto sz = env_->GetFileSize(df->path);
    if (!sz.ok()) {
      if (absl::IsNotFound(sz.status())) {
        return errors::NotFound("checkpoint ", prefix_, ": data file ", df->path,
                                " does not exist");
      }
      return sz.status();
    }
    df->size = *sz;
    ASSIGN_OR_RETURN(df->file, options_.direct_io ? env_->NewDirectRandomAccessFile(df->path)
                                                  : env_->NewRandomAccessFile(df->path));
    slot = std::move(df);
  }
  *file = slot->file.get();
  *size = slot->size;
  *path = slot->path;
  return absl::OkStatus();
}

absl::Status BundleReader::ReadPod(const TensorInfo& info, Tensor* out) const {
  const RandomAccessFile* file;
  uint64_t file_size;
  std::string path;
  RETURN_IF_ERROR(GetDataFile(info.shard_id, &file, &file_size, &path));
  if (info.offset > file_size || file_size - info.offset < info.size) {
    return errors::DataLoss("tensor '", info.name, "' needs bytes [", info.offset, ", ",
                            info.offset + info.size, ") of ", path, ", which has only ",
                            file_size, " bytes (truncated)");
  }
  // Large tensors land in 4 KiB-aligned memory, so direct reads fill them
  // in place (BundleWriter aligns their offsets).
  ASSIGN_OR_RETURN(*out, Tensor::Create(info.dtype, info.shape,
                                        options_.direct_io && info.size >= (1 << 20)
                                            ? direct_io_allocator()
                                            : cpu_allocator()));
  char* dst = out->raw_data();
  // Filled in full below: one call maps the pages in, not a fault per page.
  if (info.size >= kPrefaultMinBytes) PrefaultForWrite(dst, info.size);
  uint32_t crc = 0;
  const size_t chunk = std::max<size_t>(options_.read_chunk_bytes, 4096);
  for (uint64_t done = 0; done < info.size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, info.size - done));
    auto got = file->Read(info.offset + done, n, dst + done);
    if (!got.ok()) return errors::Annotate(got.status(), absl::StrCat("reading tensor '", info.name, "' from ", path));
    if (got->size() != n) {
      return errors::DataLoss("tensor '", info.name, "': short read from ", path, " (truncated)");
    }
    if (got->data() != dst + done) std::memcpy(dst + done, got->data(), n);
    crc = crc32c::Extend(crc, dst + done, n);
    done += n;
  }
  if (crc != crc32c::Unmask(info.masked_crc32c)) {
    return errors::DataLoss("checksum mismatch for tensor '", info.name, "' in ", path,
                            " (bytes [", info.offset, ", ", info.offset + info.size,
                            ")): stored crc32c ", crc32c::Unmask(info.masked_crc32c),
                            ", computed ", crc, " (corrupted)");
  }
  return absl::OkStatus();
}

absl::Status BundleReader::ReadStrings(const TensorInfo& info, Tensor* out) const {
  const RandomAccessFile* file;
  uint64_t file_size;
  std::string path;
  RETURN_IF_ERROR(GetDataFile(info.shard_id, &file, &file_size, &path));
  if (info.offset > file_size || file_size - info.offset < info.size) {
    return errors::DataLoss("tensor '", info.name, "' needs bytes [", info.offset, ", ",
                            info.offset + info.size, ") of ", path, ", which has only ",
                            file_size, " bytes (truncated)");
  }
  ASSIGN_OR_RETURN(*out, Tensor::Create(DT_STRING, info.shape));
  const int64_t n = info.shape.num_elements();
  if (info.size == 0) {
    if (n == 0) return absl::OkStatus();
    return errors::DataLoss("string tensor '", info.name, "' has no bytes (corrupted)");
  }
  auto corrupt = [&](absl::string_view what) {
    return errors::DataLoss("string tensor '", info.name, "' in ", path, ": ", what,
                            " (corrupted)");
  };
  RangeReader in(file, info.offset, info.offset + info.size, options_.read_chunk_bytes);
  std::vector<uint64_t> lengths(n);
  uint32_t crc = 0;
  uint64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(bool ok, in.ReadVarint64(&lengths[i]));
    if (!ok) return corrupt(absl::StrCat("bad length of element ", i));
    if (lengths[i] > info.size || total + lengths[i] > info.size) {
      return corrupt(absl::StrCat("lengths exceed the entry's ", info.size, " bytes"));
    }
    total += lengths[i];
    crc = ExtendCrcWithStringLength(crc, lengths[i]);
  }
  if (in.remaining() < sizeof(uint32_t) + total) {
    return corrupt(absl::StrCat("lengths exceed the entry's ", info.size, " bytes"));
  }
  char raw[4];
  RETURN_IF_ERROR(in.ReadBytes(4, raw));
  uint32_t stored;
  std::memcpy(&stored, raw, 4);
  if (crc32c::Unmask(stored) != crc) return corrupt("length checksum mismatch");
  crc = crc32c::Extend(crc, raw, 4);
  std::string* strings = out->data<std::string>();
  for (int64_t i = 0; i < n; ++i) {
    strings[i].resize(lengths[i]);
    RETURN_IF_ERROR(in.ReadBytes(lengths[i], strings[i].data()));
    crc = crc32c::Extend(crc, strings[i].data(), lengths[i]);
  }
  if (in.remaining() != 0) {
    return corrupt(absl::StrCat(in.remaining(), " bytes left over after the elements"));
  }
  if (crc != crc32c::Unmask(info.masked_crc32c)) {
    return errors::DataLoss("checksum mismatch for tensor '", info.name, "' in ", path,
                            ": stored crc32c ", crc32c::Unmask(info.masked_crc32c),
                            ", computed ", crc, " (corrupted)");
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> BundleReader::Lookup(absl::string_view name) const {
  ASSIGN_OR_RETURN(TensorInfo info, GetInfo(name));
  Tensor out;
  if (!info.slices.empty()) {
    RETURN_IF_ERROR(ReadSliced(info, &out));
    return out;
  }
  if (info.dtype == DT_STRING) {
    RETURN_IF_ERROR(ReadStrings(info, &out));
  } else {
    RETURN_IF_ERROR(ReadPod(info, &out));
  }
  return out;
}

absl::Status BundleReader::ReadPart(const TensorInfo& info, const TensorSlice& slice,
                                    Tensor* out) const {
  const std::string index_path = MetaFilename(prefix_);
  const std::string what =
      absl::StrCat("slice ", SliceDebugString(slice), " of tensor '", info.name, "'");
  auto value = table_->Get(EncodeTensorNameSlice(info.name, slice));
  if (!value.ok()) {
    if (absl::IsNotFound(value.status())) {
      return errors::DataLoss("checkpoint index ", index_path, " lists ", what,
                              " but has no entry for it (corrupted)");
    }
    return value.status();
  }
  ASSIGN_OR_RETURN(TensorInfo part, ParseEntry(what, *value));
  const TensorShape want = SliceShape(slice, info.shape);
  if (part.dtype != info.dtype || part.shape != want || !part.slices.empty()) {
    return errors::DataLoss("checkpoint index ", index_path, ": ", what, " is ",
                            DataTypeString(part.dtype), " ", part.shape.DebugString(),
                            part.slices.empty() ? "" : " (itself sliced)", "; expected ",
                            DataTypeString(info.dtype), " ", want.DebugString(), " (corrupted)");
  }
  return part.dtype == DT_STRING ? ReadStrings(part, out) : ReadPod(part, out);
}

absl::Status BundleReader::ReadSliced(const TensorInfo& info, Tensor* out) const {
  ASSIGN_OR_RETURN(*out, Tensor::Create(info.dtype, info.shape));
  const std::string index_path = MetaFilename(prefix_);
  int64_t covered = 0;
  for (const TensorSlice& slice : info.slices) {
    Tensor t;
    RETURN_IF_ERROR(ReadPart(info, slice, &t));
    CopySliceInto(t, slice, out);
    covered += t.NumElements();
  }
  if (covered != info.shape.num_elements()) {
    return errors::DataLoss("checkpoint index ", index_path, ": the ", info.slices.size(),
                            " slices of tensor '", info.name, "' ", info.shape.DebugString(),
                            " hold ", covered, " elements, not ", info.shape.num_elements(),
                            " (missing or overlapping slices)");
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> BundleReader::LookupSlice(absl::string_view name,
                                                 const TensorSlice& slice) const {
  ASSIGN_OR_RETURN(TensorInfo info, GetInfo(name));
  if (static_cast<int>(slice.size()) != info.shape.dims()) {
    return errors::InvalidArgument("slice ", SliceDebugString(slice), " of tensor '", name,
                                   "' has ", slice.size(), " dimensions but the tensor in ",
                                   prefix_, " is ", info.shape.DebugString());
  }
  for (int d = 0; d < info.shape.dims(); ++d) {
    const SliceExtent& e = slice[d];
    if (e.length >= 0 && (e.start < 0 || e.start > info.shape.dim_size(d) ||
                          e.length > info.shape.dim_size(d) - e.start)) {
      return errors::InvalidArgument("slice ", SliceDebugString(slice), " of tensor '", name,
                                     "' lies outside its shape ", info.shape.DebugString(),
                                     " in ", prefix_);
    }
  }
  if (info.slices.empty()) {
    ASSIGN_OR_RETURN(Tensor whole, Lookup(name));
    if (IsFullSlice(slice, info.shape)) return whole;
    ASSIGN_OR_RETURN(Tensor out, Tensor::Create(info.dtype, SliceShape(slice, info.shape)));
    TensorSlice region;
    if (IntersectSlices(slice, TensorSlice(info.shape.dims()), info.shape, &region)) {
      CopySliceRegion(whole, TensorSlice(info.shape.dims()), region, slice, info.shape, &out);
    }
    return out;
  }
  for (const TensorSlice& stored : info.slices) {
    if (stored == slice) {  // saved exactly so: one read
      Tensor out;
      RETURN_IF_ERROR(ReadPart(info, stored, &out));
      return out;
    }
  }
  ASSIGN_OR_RETURN(Tensor out, Tensor::Create(info.dtype, SliceShape(slice, info.shape)));
  int64_t covered = 0;
  for (const TensorSlice& stored : info.slices) {
    TensorSlice region;
    if (!IntersectSlices(slice, stored, info.shape, &region)) continue;
    Tensor part;
    RETURN_IF_ERROR(ReadPart(info, stored, &part));
    CopySliceRegion(part, stored, region, slice, info.shape, &out);
    covered += SliceShape(region, info.shape).num_elements();
  }
  if (covered != out.NumElements()) {
    return errors::NotFound("the saved slices of tensor '", name, "' ",
                            info.shape.DebugString(), " in ", prefix_, " do not cover slice ",
                            SliceDebugString(slice), " (", covered, " of ", out.NumElements(),
                            " elements)");
  }
  return out;
}

absl::StatusOr<std::vector<Tensor>> BundleReader::LookupMany(
    const std::vector<std::string>& names, ThreadPool* pool) const {
  std::vector<Tensor> out(names.size());
  std::vector<absl::Status> status(names.size());
  auto read = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      auto t = Lookup(names[i]);
      if (t.ok()) {
        out[i] = *std::move(t);
      } else {
        status[i] = t.status();
      }
    }
  };
  if (pool != nullptr && names.size() > 1) {
    // One tensor per task: each is a file read worth far more than the
    // scheduling cost.
    pool->ParallelFor(static_cast<int64_t>(names.size()), 1000000000, read);
  } else {
    read(0, static_cast<int64_t>(names.size()));
  }
  for (const absl::Status& s : status) RETURN_IF_ERROR(s);
  return out;
}

absl::StatusOr<std::vector<std::pair<std::string, Tensor>>> BundleReader::ReadAll(
    ThreadPool* pool) const {
  ASSIGN_OR_RETURN(std::vector<TensorInfo> infos, ListTensors());
  std::vector<std::string> names;
  for (const TensorInfo& info : infos) names.push_back(info.name);
  ASSIGN_OR_RETURN(std::vector<Tensor> tensors, LookupMany(names, pool));
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(names[i], std::move(tensors[i]));
  return out;
}

absl::Status BundleReader::ReadChunks(
    absl::string_view name, const std::function<absl::Status(absl::string_view)>& consume) const {
  ASSIGN_OR_RETURN(TensorInfo info, GetInfo(name));
  if (!info.slices.empty() && DataTypeIsPod(info.dtype)) {
    // Assembled from its parts first, then handed over in pieces.
    ASSIGN_OR_RETURN(Tensor whole, Lookup(name));
    const absl::string_view bytes(whole.raw_data(), whole.TotalBytes());
    const size_t chunk = std::max<size_t>(options_.read_chunk_bytes, 4096);
    for (size_t at = 0; at < bytes.size(); at += chunk) {
      RETURN_IF_ERROR(consume(bytes.substr(at, chunk)));
    }
    return absl::OkStatus();
  }
  if (!DataTypeIsPod(info.dtype)) {
    return errors::InvalidArgument("ReadChunks of tensor '", name, "': dtype ",
                                   DataTypeString(info.dtype),
                                   " is not a fixed-size type; use Lookup");
  }
  const RandomAccessFile* file;
  uint64_t file_size;
  std::string path;
  RETURN_IF_ERROR(GetDataFile(info.shard_id, &file, &file_size, &path));
  if (info.offset > file_size || file_size - info.offset < info.size) {
    return errors::DataLoss("tensor '", info.name, "' needs bytes [", info.offset, ", ",
                            info.offset + info.size, ") of ", path, ", which has only ",
                            file_size, " bytes (truncated)");
  }
  const size_t chunk = static_cast<size_t>(
      std::min<uint64_t>(std::max<size_t>(options_.read_chunk_bytes, 4096), info.size));
  std::string scratch(chunk, '\0');
  uint32_t crc = 0;
  for (uint64_t done = 0; done < info.size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, info.size - done));
    ASSIGN_OR_RETURN(absl::string_view got, file->Read(info.offset + done, n, scratch.data()));
    if (got.size() != n) {
      return errors::DataLoss("tensor '", info.name, "': short read from ", path, " (truncated)");
    }
    crc = crc32c::Extend(crc, got.data(), n);
    RETURN_IF_ERROR(consume(got));
    done += n;
  }
  if (crc != crc32c::Unmask(info.masked_crc32c)) {
    return errors::DataLoss("checksum mismatch for tensor '", info.name, "' in ", path,
                            ": stored crc32c ", crc32c::Unmask(info.masked_crc32c),
                            ", computed ", crc, " (corrupted)");
  }
  return absl::OkStatus();
}

// --- MergeBundles ------------------------------------------------------------

absl::Status MergeBundles(Env* env, const std::vector<std::string>& prefixes,
                          absl::string_view merged_prefix, bool allow_missing_files,
                          bool sync) {
  std::map<std::string, tensorflow::BundleEntryProto, std::less<>> entries;
  // Data file path -> its new shard id, in order of first appearance.
  std::vector<std::string> data_files;
  std::vector<std::string> merged_indexes;
  std::map<std::string, int> shard_ids;
  for (const std::string& prefix : prefixes) {
    if (allow_missing_files && !env->FileExists(MetaFilename(prefix))) continue;
    ASSIGN_OR_RETURN(auto reader, BundleReader::Open(env, prefix));
    const int num_shards = reader->num_shards();
    RETURN_IF_ERROR(reader->ForEachEntry(
        [&](absl::string_view name, const tensorflow::BundleEntryProto& entry) -> absl::Status {
          auto existing = entries.find(name);
          if (existing != entries.end()) {
            // A sliced tensor saved by several shards: its parts' keys are
            // unique, and the full-name entries' slice lists are merged.
            if (existing->second.slices_size() == 0 || entry.slices_size() == 0) {
              return errors::InvalidArgument("tensor '", name, "' appears in more than one of "
                                             "the checkpoints being merged (again in ",
                                             prefix, ")");
            }
            if (existing->second.dtype() != entry.dtype() ||
                existing->second.shape().SerializeAsString() !=
                    entry.shape().SerializeAsString()) {
              return errors::InvalidArgument("sliced tensor '", name, "' has another dtype or "
                                             "full shape in ", prefix, " than in the "
                                             "checkpoints merged before it");
            }
            for (const auto& slice : entry.slices()) *existing->second.add_slices() = slice;
            return absl::OkStatus();
          }
          if (entry.shard_id() < 0 || entry.shard_id() >= num_shards) {
            return errors::DataLoss("checkpoint ", prefix, ": tensor '", name,
                                    "' names data shard ", entry.shard_id(), " of ",
                                    num_shards, " (corrupted)");
          }
          const std::string path = DataFilename(prefix, entry.shard_id(), num_shards);
          auto [it, inserted] = shard_ids.emplace(path, static_cast<int>(data_files.size()));
          if (inserted) data_files.push_back(path);
          tensorflow::BundleEntryProto copy = entry;
          copy.set_shard_id(it->second);
          entries.emplace(std::string(name), std::move(copy));
          return absl::OkStatus();
        }));
    // Shards without entries still move (a bundle with no tensors has one).
    for (int s = 0; s < num_shards; ++s) {
      const std::string path = DataFilename(prefix, s, num_shards);
      if (shard_ids.emplace(path, static_cast<int>(data_files.size())).second) {
        data_files.push_back(path);
      }
    }
    merged_indexes.push_back(MetaFilename(prefix));
  }
  if (merged_indexes.empty()) {
    return errors::NotFound("none of the ", prefixes.size(),
                            " checkpoints to merge into ", merged_prefix, " exists");
  }
  const std::string dir = Dirname(merged_prefix);
  if (!dir.empty()) RETURN_IF_ERROR(env->RecursivelyCreateDir(dir));
  const int n = static_cast<int>(data_files.size());
  for (int i = 0; i < n; ++i) {
    const std::string dst = DataFilename(merged_prefix, i, n);
    if (data_files[i] == dst) continue;
    RETURN_IF_ERROR(errors::Annotate(env->RenameFile(data_files[i], dst),
                                     absl::StrCat("merging checkpoint data ", data_files[i])));
  }
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(n);
  header.set_endianness(tensorflow::BundleHeaderProto::LITTLE);
  header.mutable_version()->set_producer(kTensorBundleVersion);
  header.mutable_version()->set_min_consumer(kTensorBundleMinConsumer);
  RETURN_IF_ERROR(WriteBundleIndex(env, merged_prefix, header, entries, sync));
  const std::string merged_index = MetaFilename(merged_prefix);
  for (const std::string& index : merged_indexes) {
    if (index != merged_index) env->DeleteFile(index).IgnoreError();
  }
  return absl::OkStatus();
}

}  // namespace recflow::checkpoint
