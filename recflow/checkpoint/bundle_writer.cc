#include "recflow/checkpoint/bundle_writer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_format.h"
#include "recflow/checkpoint/table.h"
#include "recflow/checkpoint/tensor_slice.h"
#include "recflow/core/crc32c.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"

namespace recflow::checkpoint {
namespace {

std::string RandomSuffix() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const uint64_t r = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ (counter.fetch_add(1) << 1);
  return absl::StrFormat(".tempstate%016x", r);
}

}  // namespace

// Appends buffers to files on one background thread, in order. At most
// kMaxPending writes wait; Append blocks beyond that. The first error sticks
// (later writes are dropped) and is returned by Drain. Buffers come back
// through TakeBuffer once written, so steady state allocates nothing (and
// touches no new memory).
class BackgroundAppender {
 public:
  static constexpr size_t kMaxPending = 2;

  // When no thread can be started (a process or PID limit), appends run
  // on the caller instead: slower, never an abort.
  BackgroundAppender() {
    absl::StatusOr<std::thread> t = StartThread("bundle_writer", [this] { Run(); });
    if (t.ok()) thread_ = std::move(*t);
  }
  ~BackgroundAppender() {
    {
      MutexLock l(&mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // Queues `buffer` for appending to `file`.
  void Append(WritableFile* file, AlignedBuffer buffer) { Push(Item{file, std::move(buffer)}); }

  // Waits until every queued write is done; the first error, if any.
  absl::Status Drain() {
    std::unique_lock<std::mutex> l(mu_.native());
    cv_.wait(l, [this] { return queue_.empty() && !busy_; });
    return status_;
  }

  // The first write error so far (without waiting).
  absl::Status status() {
    MutexLock l(&mu_);
    return status_;
  }

  // An empty buffer of `capacity` bytes (a multiple of kDirectIoAlignment).
  AlignedBuffer TakeBuffer(size_t capacity) {
    {
      MutexLock l(&mu_);
      while (!free_.empty()) {
        AlignedBuffer b = std::move(free_.back());
        free_.pop_back();
        if (b.capacity() == capacity) {
          b.clear();
          return b;
        }
      }
    }
    return AlignedBuffer(capacity);
  }

 private:
  struct Item {
    WritableFile* file;
    AlignedBuffer buffer;
  };

  void Push(Item item) {
    if (!thread_.joinable()) {  // No background thread: write inline.
      absl::Status s;
      {
        MutexLock l(&mu_);
        s = status_;
      }
      if (s.ok() && item.file != nullptr) {
        s = item.file->Append(absl::string_view(item.buffer.data(), item.buffer.size()));
      }
      MutexLock l(&mu_);
      if (status_.ok()) status_ = s;
      if (free_.size() < kMaxPending + 1) free_.push_back(std::move(item.buffer));
      return;
    }
    {
      std::unique_lock<std::mutex> l(mu_.native());
      cv_.wait(l, [this] { return queue_.size() < kMaxPending; });
      queue_.push_back(std::move(item));
    }
    cv_.notify_all();
  }

  void Run() {
    for (;;) {
      Item item;
      {
        std::unique_lock<std::mutex> l(mu_.native());
        cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and drained
        item = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
        if (!status_.ok()) item.file = nullptr;  // a dead writer writes nothing more
      }
      cv_.notify_all();  // room in the queue
      absl::Status s;
      if (item.file != nullptr) {
        s = item.file->Append(absl::string_view(item.buffer.data(), item.buffer.size()));
      }
      {
        MutexLock l(&mu_);
        if (status_.ok()) status_ = s;
        busy_ = false;
        if (free_.size() < kMaxPending + 1) free_.push_back(std::move(item.buffer));
      }
      cv_.notify_all();
    }
  }

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<AlignedBuffer> free_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // Started last, after the fields above exist.
};

uint32_t ExtendCrcWithStringLength(uint32_t crc, uint64_t len) {
  if (len <= 0xffffffffull) {
    const uint32_t len32 = static_cast<uint32_t>(len);
    return crc32c::Extend(crc, reinterpret_cast<const char*>(&len32), sizeof(len32));
  }
  return crc32c::Extend(crc, reinterpret_cast<const char*>(&len), sizeof(len));
}

std::string MetaFilename(absl::string_view prefix) { return absl::StrCat(prefix, ".index"); }

std::string DataFilename(absl::string_view prefix, int shard_id, int num_shards) {
  return absl::StrFormat("%s.data-%05d-of-%05d", prefix, shard_id, num_shards);
}

absl::Status CheckSavableDtype(absl::string_view name, DataType dtype) {
  if (IsRefType(dtype) || !DataTypeIsValid(dtype) || dtype == DT_INVALID ||
      (!DataTypeIsPod(dtype) && dtype != DT_STRING)) {
    return errors::InvalidArgument("tensor '", name, "' has dtype ", DataTypeString(dtype),
                                   ", which a checkpoint cannot hold (fixed-size types and "
                                   "string only)");
  }
  return absl::OkStatus();
}

BundleWriter::BundleWriter(Env* env, std::string prefix, const BundleWriterOptions& options)
    : env_(env),
      prefix_(std::move(prefix)),
      options_(options),
      temp_suffix_(RandomSuffix()),
      appender_(std::make_unique<BackgroundAppender>()),
      buffer_(std::max<size_t>(options_.buffer_bytes, kDirectIoAlignment)) {}

absl::StatusOr<std::unique_ptr<BundleWriter>> BundleWriter::Create(
    Env* env, absl::string_view prefix, const BundleWriterOptions& options) {
  if (prefix.empty() || prefix.back() == '/') {
    return errors::InvalidArgument("checkpoint prefix '", prefix,
                                   "' must name a file prefix, not a directory");
  }
  const std::string dir = Dirname(prefix);
  if (!dir.empty()) {
    RETURN_IF_ERROR(errors::Annotate(env->RecursivelyCreateDir(dir),
                                     absl::StrCat("creating checkpoint directory ", dir)));
  }
  std::unique_ptr<BundleWriter> writer(new BundleWriter(env, std::string(prefix), options));
  RETURN_IF_ERROR(writer->OpenShard());
  return writer;
}

BundleWriter::~BundleWriter() {
  appender_->Drain().IgnoreError();
  if (!finished_) DeleteTemporaryFiles();
}

std::string BundleWriter::TempDataFilename(int shard) const {
  return absl::StrFormat("%s.data-%05d%s", prefix_, shard, temp_suffix_);
}

void BundleWriter::DeleteTemporaryFiles() {
  appender_->Drain().IgnoreError();
  if (shard_ != nullptr) {
    shard_->Close().IgnoreError();
    shard_.reset();
  }
  for (int i = 0; i < num_shards_; ++i) {
    const std::string path = TempDataFilename(i);
    if (env_->FileExists(path)) env_->DeleteFile(path).IgnoreError();
  }
  const std::string index = MetaFilename(prefix_) + temp_suffix_;
  if (env_->FileExists(index)) env_->DeleteFile(index).IgnoreError();
}

absl::Status BundleWriter::Fail(absl::Status s) {
  if (status_.ok()) status_ = s;
  return status_;
}

absl::Status BundleWriter::OpenShard() {
  const std::string path = TempDataFilename(num_shards_);
  auto file = options_.direct_io ? env_->NewDirectWritableFile(path) : env_->NewWritableFile(path);
  if (!file.ok()) return Fail(errors::Annotate(file.status(), "creating checkpoint shard"));
  shard_ = *std::move(file);
  ++num_shards_;
  shard_bytes_ = 0;
  return absl::OkStatus();
}

absl::Status BundleWriter::FlushBuffer() {
  absl::Status s = appender_->status();
  if (!s.ok()) {
    return Fail(errors::Annotate(s, absl::StrCat("writing ", TempDataFilename(num_shards_ - 1))));
  }
  if (buffer_.empty()) return absl::OkStatus();
  const size_t capacity = buffer_.capacity();
  appender_->Append(shard_.get(), std::move(buffer_));
  buffer_ = appender_->TakeBuffer(capacity);
  return absl::OkStatus();
}

absl::Status BundleWriter::DrainWrites() {
  absl::Status s = appender_->Drain();
  if (!s.ok()) {
    return Fail(errors::Annotate(s, absl::StrCat("writing ", TempDataFilename(num_shards_ - 1))));
  }
  return absl::OkStatus();
}

absl::Status BundleWriter::CloseShard() {
  RETURN_IF_ERROR(FlushBuffer());
  RETURN_IF_ERROR(DrainWrites());
  const std::string path = TempDataFilename(num_shards_ - 1);
  absl::Status s;
  if (options_.sync) s = shard_->Sync();
  if (s.ok()) s = shard_->Close();
  shard_.reset();
  if (!s.ok()) return Fail(errors::Annotate(s, absl::StrCat("closing ", path)));
  return absl::OkStatus();
}

absl::Status BundleWriter::MaybeStartShard(uint64_t bytes) {
  if (options_.max_shard_bytes == 0 || shard_bytes_ == 0 ||
      shard_bytes_ + bytes <= options_.max_shard_bytes) {
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(CloseShard());
  return OpenShard();
}

absl::Status BundleWriter::MaybeAlign(uint64_t bytes) {
  const uint64_t threshold = options_.align_tensors_from_bytes;
  const uint64_t misalign = shard_bytes_ % kDirectIoAlignment;
  if (threshold == 0 || bytes < threshold || misalign == 0) return absl::OkStatus();
  static const char kZeros[kDirectIoAlignment] = {};
  uint32_t ignored = 0;
  return Append(absl::string_view(kZeros, kDirectIoAlignment - misalign), &ignored);
}

absl::Status BundleWriter::Append(absl::string_view data, uint32_t* crc) {
  // Every buffer but a shard's last goes out full, so each write starts at
  // an aligned file offset from aligned memory: a direct file writes it
  // without a copy.
  for (absl::string_view rest = data; !rest.empty();) {
    if (buffer_.full()) RETURN_IF_ERROR(FlushBuffer());
    const size_t n = std::min(rest.size(), buffer_.room());
    const size_t at = buffer_.size();
    buffer_.append(rest.data(), n);
    // Checksum the copy, not the source, so the crc matches what is written.
    *crc = crc32c::Extend(*crc, buffer_.data() + at, n);
    rest.remove_prefix(n);
  }
  shard_bytes_ += data.size();
  total_bytes_ += data.size();
  return absl::OkStatus();
}

absl::Status BundleWriter::CheckNewEntry(absl::string_view name, DataType dtype) {
  RETURN_IF_ERROR(status_);
  if (finished_) return errors::FailedPrecondition("bundle writer for ", prefix_, " is finished");
  if (name.empty()) {
    return Fail(errors::InvalidArgument("tensor name must not be empty (the empty key holds "
                                        "the bundle header)"));
  }
  if (entries_.find(name) != entries_.end()) {
    return Fail(errors::InvalidArgument("tensor '", name, "' added twice to checkpoint ",
                                        prefix_));
  }
  absl::Status s = CheckSavableDtype(name, dtype);
  if (!s.ok()) return Fail(s);
  return absl::OkStatus();
}

absl::Status BundleWriter::Add(absl::string_view name, const Tensor& tensor) {
  RETURN_IF_ERROR(CheckNewEntry(name, tensor.dtype()));
  if (!tensor.IsInitialized()) {
    return Fail(errors::InvalidArgument("tensor '", name, "' is not initialized"));
  }
  tensorflow::BundleEntryProto entry;
  entry.set_dtype(static_cast<tensorflow::DataType>(tensor.dtype()));
  entry.mutable_shape();  // present even for scalars, as TensorFlow writes it
  for (int64_t d : tensor.shape().dim_sizes()) entry.mutable_shape()->add_dim()->set_size(d);
  uint32_t crc = 0;
  uint64_t size = 0;
  if (tensor.dtype() == DT_STRING) {
    // Layout: varint64 length of every element, a masked crc32c of the
    // lengths (as uint32 or uint64 values), then the element bytes. The
    // entry's crc covers the length values, the length checksum and the
    // bytes. Two passes over the lengths keep memory bounded.
    absl::Span<const std::string> strings = tensor.flat<std::string>();
    uint64_t varint_bytes = 0, data_bytes = 0;
    for (const std::string& s : strings) {
      crc = ExtendCrcWithStringLength(crc, s.size());
      varint_bytes += table::VarintLength(s.size());
      data_bytes += s.size();
    }
    size = varint_bytes + sizeof(uint32_t) + data_bytes;
    RETURN_IF_ERROR(MaybeStartShard(size));
    entry.set_shard_id(num_shards_ - 1);
    entry.set_offset(shard_bytes_);
    uint32_t ignored = 0;
    std::string lengths;
    for (const std::string& s : strings) {
      table::PutVarint64(&lengths, s.size());
      if (lengths.size() >= 64 * 1024) {
        RETURN_IF_ERROR(Append(lengths, &ignored));
        lengths.clear();
      }
    }
    std::string checksum;
    table::PutFixed32(&checksum, crc32c::Mask(crc));
    lengths += checksum;
    RETURN_IF_ERROR(Append(lengths, &ignored));
    crc = crc32c::Extend(crc, checksum.data(), checksum.size());
    for (const std::string& s : strings) RETURN_IF_ERROR(Append(s, &crc));
  } else {
    size = tensor.NumElements() * DataTypeSize(tensor.dtype());
    RETURN_IF_ERROR(MaybeStartShard(size));
    RETURN_IF_ERROR(MaybeAlign(size));
    entry.set_shard_id(num_shards_ - 1);
    entry.set_offset(shard_bytes_);
    RETURN_IF_ERROR(Append(absl::string_view(tensor.raw_data(), size), &crc));
  }
  entry.set_size(size);
  entry.set_crc32c(crc32c::Mask(crc));
  entries_.emplace(std::string(name), std::move(entry));
  return absl::OkStatus();
}

absl::Status BundleWriter::AddSlice(absl::string_view name, const TensorShape& full_shape,
                                    const std::vector<SliceExtentInfo>& slice,
                                    const Tensor& part) {
  RETURN_IF_ERROR(status_);
  if (static_cast<int>(slice.size()) != full_shape.dims() ||
      SliceShape(slice, full_shape) != part.shape()) {
    return Fail(errors::InvalidArgument(
        "slice ", SliceDebugString(slice), " of tensor '", name, "' ", full_shape.DebugString(),
        " has shape ",
        static_cast<int>(slice.size()) == full_shape.dims()
            ? SliceShape(slice, full_shape).DebugString()
            : absl::StrCat("of rank ", slice.size()),
        " but the tensor given for it is ", part.shape().DebugString()));
  }
  if (IsFullSlice(slice, full_shape)) return Add(name, part);
  if (name.empty() || IsSliceKey(name)) {
    return Fail(errors::InvalidArgument("bad name for a sliced tensor: '", name, "'"));
  }
  RETURN_IF_ERROR(CheckSavableDtype(name, part.dtype()));
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    tensorflow::BundleEntryProto entry;
    entry.set_dtype(static_cast<tensorflow::DataType>(part.dtype()));
    entry.mutable_shape();
    for (int64_t d : full_shape.dim_sizes()) entry.mutable_shape()->add_dim()->set_size(d);
    it = entries_.emplace(std::string(name), std::move(entry)).first;
  } else {
    const tensorflow::BundleEntryProto& entry = it->second;
    std::vector<int64_t> dims;
    for (const auto& d : entry.shape().dim()) dims.push_back(d.size());
    if (entry.slices_size() == 0) {
      return Fail(errors::InvalidArgument("tensor '", name, "' added whole and as slice ",
                                          SliceDebugString(slice), " to checkpoint ", prefix_));
    }
    if (entry.dtype() != static_cast<int>(part.dtype()) ||
        dims != std::vector<int64_t>(full_shape.dim_sizes().begin(),
                                     full_shape.dim_sizes().end())) {
      return Fail(errors::InvalidArgument(
          "slice ", SliceDebugString(slice), " of tensor '", name, "' is ",
          DataTypeString(part.dtype()), " of ", full_shape.DebugString(),
          " but its earlier slices are ", DataTypeString(static_cast<DataType>(entry.dtype())),
          " of [", absl::StrJoin(dims, ","), "]"));
    }
  }
  RETURN_IF_ERROR(Add(EncodeTensorNameSlice(name, slice), part));
  SliceToProto(slice, it->second.add_slices());
  return absl::OkStatus();
}

absl::Status BundleWriter::AddChunks(
    absl::string_view name, DataType dtype, const TensorShape& shape,
    const std::function<absl::Status(const ChunkSink& sink)>& produce) {
  RETURN_IF_ERROR(CheckNewEntry(name, dtype));
  if (!DataTypeIsPod(dtype)) {
    return Fail(errors::InvalidArgument("AddChunks of tensor '", name, "': dtype ",
                                        DataTypeString(dtype),
                                        " is not a fixed-size type; use Add"));
  }
  const uint64_t size = static_cast<uint64_t>(shape.num_elements()) * DataTypeSize(dtype);
  RETURN_IF_ERROR(MaybeStartShard(size));
  RETURN_IF_ERROR(MaybeAlign(size));
  tensorflow::BundleEntryProto entry;
  entry.set_dtype(static_cast<tensorflow::DataType>(dtype));
  entry.mutable_shape();
  for (int64_t d : shape.dim_sizes()) entry.mutable_shape()->add_dim()->set_size(d);
  entry.set_shard_id(num_shards_ - 1);
  entry.set_offset(shard_bytes_);
  uint32_t crc = 0;
  uint64_t written = 0;
  absl::Status s = produce([&](absl::string_view piece) -> absl::Status {
    RETURN_IF_ERROR(status_);
    if (piece.size() > size - written) {
      return Fail(errors::InvalidArgument("AddChunks of tensor '", name, "' ",
                                          DataTypeString(dtype), " ", shape.DebugString(),
                                          ": pieces exceed the expected ", size, " bytes"));
    }
    written += piece.size();
    return Append(piece, &crc);
  });
  if (!s.ok()) {
    return Fail(errors::Annotate(s, absl::StrCat("producing tensor '", name, "'")));
  }
  RETURN_IF_ERROR(status_);
  if (written != size) {
    return Fail(errors::InvalidArgument("AddChunks of tensor '", name, "' ",
                                        DataTypeString(dtype), " ", shape.DebugString(),
                                        ": got ", written, " bytes, expected ", size));
  }
  entry.set_size(size);
  entry.set_crc32c(crc32c::Mask(crc));
  entries_.emplace(std::string(name), std::move(entry));
  return absl::OkStatus();
}

absl::Status WriteBundleIndex(
    Env* env, absl::string_view prefix, const tensorflow::BundleHeaderProto& header,
    const std::map<std::string, tensorflow::BundleEntryProto, std::less<>>& entries,
    bool sync) {
  const std::string final_path = MetaFilename(prefix);
  const std::string temp_path = final_path + RandomSuffix();
  auto file_or = env->NewWritableFile(temp_path);
  if (!file_or.ok()) return errors::Annotate(file_or.status(), "creating checkpoint index");
  std::unique_ptr<WritableFile> file = *std::move(file_or);
  absl::Status s;
  {
    table::TableBuilder builder(table::TableBuilderOptions(), file.get());
    s = builder.Add(kHeaderEntryKey, header.SerializeAsString());
    for (auto it = entries.begin(); s.ok() && it != entries.end(); ++it) {
      s = builder.Add(it->first, it->second.SerializeAsString());
    }
    if (s.ok()) s = builder.Finish();
  }
  if (s.ok() && sync) s = file->Sync();
  if (s.ok()) s = file->Close();
  file.reset();
  if (s.ok()) s = env->RenameFile(temp_path, final_path);
  if (!s.ok()) {
    env->DeleteFile(temp_path).IgnoreError();
    return errors::Annotate(s, absl::StrCat("writing checkpoint index ", final_path));
  }
  if (sync) {
    const std::string dir = Dirname(prefix);
    RETURN_IF_ERROR(env->SyncDir(dir.empty() ? "." : dir));
  }
  return absl::OkStatus();
}

absl::Status BundleWriter::Finish() {
  RETURN_IF_ERROR(status_);
  if (finished_) return errors::FailedPrecondition("bundle writer for ", prefix_, " is finished");
  RETURN_IF_ERROR(CloseShard());
  for (int i = 0; i < num_shards_; ++i) {
    absl::Status s = env_->RenameFile(TempDataFilename(i), DataFilename(prefix_, i, num_shards_));
    if (!s.ok()) {
      // Shards already renamed stay behind without an index; harmless.
      DeleteTemporaryFiles();
      return Fail(errors::Annotate(s, absl::StrCat("publishing shard ", i, " of ", prefix_)));
    }
  }
  tensorflow::BundleHeaderProto header;
  header.set_num_shards(num_shards_);
  header.set_endianness(tensorflow::BundleHeaderProto::LITTLE);
  header.mutable_version()->set_producer(kTensorBundleVersion);
  header.mutable_version()->set_min_consumer(kTensorBundleMinConsumer);
  absl::Status s = WriteBundleIndex(env_, prefix_, header, entries_, options_.sync);
  if (!s.ok()) return Fail(s);
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace recflow::checkpoint
