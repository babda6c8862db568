// Sources: TextLine, FromTensorSlices, Range.

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_internal.h"

namespace recflow::data::internal {

absl::StatusOr<Tensor> MoveToStringTensor(std::vector<std::string>* records, bool scalar,
                                          absl::string_view what) {
  const int64_t n = static_cast<int64_t>(records->size());
  DCHECK(!scalar || n == 1);
  absl::StatusOr<Tensor> t =
      Tensor::Create(DT_STRING, scalar ? TensorShape() : TensorShape({n}));
  if (!t.ok()) return errors::Annotate(t.status(), absl::StrCat(what, ": ", n, " records"));
  std::string* dst = t->data<std::string>();
  for (int64_t i = 0; i < n; ++i) dst[i] = std::move((*records)[i]);
  records->clear();
  return t;
}

namespace {

// ---------------------------------------------------------------------------
// TextLine

class TextLineDataset : public DatasetBase {
 public:
  TextLineDataset(std::vector<std::string> files, ShardOptions shard,
                  TextLineOptions opts)
      : total_files_(static_cast<int64_t>(files.size())),
        shard_(shard),
        opts_(opts) {
    if (shard.num_shards < 1 || shard.shard_index < 0 ||
        shard.shard_index >= shard.num_shards) {
      status_ = errors::InvalidArgument(
          "TextLine: shard_index ", shard.shard_index, " of num_shards ",
          shard.num_shards,
          "; need num_shards >= 1 and 0 <= shard_index < "
          "num_shards");
    } else if (opts.lines_per_element < 1) {
      status_ =
          errors::InvalidArgument("TextLine: lines_per_element is ",
                                  opts.lines_per_element, "; must be >= 1");
    } else if (opts.max_line_bytes < 1 || opts.read_buffer_bytes < 1) {
      status_ = errors::InvalidArgument(
          "TextLine: max_line_bytes (", opts.max_line_bytes,
          ") and read_buffer_bytes (", opts.read_buffer_bytes,
          ") must be >= 1");
    }
    if (status_.ok()) {
      for (size_t i = 0; i < files.size(); ++i) {
        if (static_cast<int64_t>(i % shard.num_shards) == shard.shard_index) {
          files_.push_back(std::move(files[i]));
        }
      }
    }
    dtypes_.push_back(DT_STRING);
    shapes_.push_back(opts.lines_per_element == 1
                          ? PartialShape({})
                          : PartialShape({kUnknownDim}));
    if (opts.emit_origin) {
      dtypes_.push_back(DT_STRING);
      shapes_.push_back(shapes_[0]);
    }
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;

  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }
  std::string DebugString() const override {
    std::string s = absl::StrCat("TextLine(", files_.size(), " files");
    if (shard_.num_shards > 1) {
      absl::StrAppend(&s, " of ", total_files_, ", shard ", shard_.shard_index,
                      "/", shard_.num_shards);
    }
    if (opts_.lines_per_element > 1) {
      absl::StrAppend(&s, ", lines_per_element=", opts_.lines_per_element);
    }
    if (opts_.emit_origin) absl::StrAppend(&s, ", emit_origin");
    return s + ")";
  }
  absl::Status CheckValid() const override { return status_; }

  const std::vector<std::string>& files() const { return files_; }
  const TextLineOptions& opts() const { return opts_; }

 private:
  std::vector<std::string> files_;  // This shard's, in order.
  int64_t total_files_;
  ShardOptions shard_;
  TextLineOptions opts_;
  absl::Status status_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

// Reads lines through a large buffer with memchr; the only allocation per
// line is the element's std::string.
//
// Position: file_index_ (in the shard's file list), the byte offset of the
// next unread line in that file, and its 1-based line number - 1.
class TextLineIterator : public IteratorBase {
 public:
  TextLineIterator(std::shared_ptr<const TextLineDataset> ds,
                   std::shared_ptr<const IteratorContext> ctx,
                   std::string prefix)
      : IteratorBase(std::move(ctx), std::move(prefix)), ds_(std::move(ds)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    if (!pending_error_.ok()) {
      absl::Status s = std::move(pending_error_);
      pending_error_ = absl::OkStatus();
      return s;
    }
    const int64_t k = ds_->opts().lines_per_element;
    const bool origin = ds_->opts().emit_origin;
    // Up to k lines, gathered as they are read (MoveToStringTensor).
    lines_.clear();
    origins_.clear();
    lines_.reserve(static_cast<size_t>(std::min(k, kInitialRecordReserve)));
    if (origin) origins_.reserve(lines_.capacity());
    int64_t n = 0;
    int64_t read = 0;
    absl::Status error;
    try {
      error = ReadLines(k, origin, &n, &read);
    } catch (const std::bad_alloc&) {
      error = errors::ResourceExhausted(
          "TextLine: out of memory after ", n, " lines of an element of up to ", k,
          " lines (lines_per_element; a batch size?)");
    }
    if (read > 0 && stats() != nullptr) stats()->AddRecordsRead(read);
    if (!error.ok()) {
      if (n == 0) return error;
      pending_error_ = error;  // Returned by the next call, in position.
    }
    if (n == 0) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Tensor lines, MoveToStringTensor(&lines_, k == 1, "TextLine lines"));
    out->push_back(std::move(lines));
    if (origin) {
      ASSIGN_OR_RETURN(Tensor origins,
                       MoveToStringTensor(&origins_, k == 1, "TextLine origins"));
      out->push_back(std::move(origins));
    }
    return absl::OkStatus();
  }

  // Reads up to k lines into lines_ (and their origins into origins_),
  // counting the lines kept in *n and every line read in *read. Returns the
  // error that ended the element early, if any.
  absl::Status ReadLines(int64_t k, bool origin, int64_t* n, int64_t* read) {
    absl::Status error;
    while (*n < k) {
      if (file_ == nullptr) {
        if (file_index_ >= static_cast<int64_t>(ds_->files().size())) break;
        absl::Status s = OpenFile();
        if (!s.ok()) {
          ++file_index_;
          next_offset_ = 0;
          line_number_ = 0;
          s = HandleBadRecord(context().error_policy, stats(),
                              "unreadable_file", s);
          if (!s.ok()) {
            error = s;
            break;
          }
          continue;
        }
      }
      absl::string_view line;
      bool eof = false, too_long = false;
      absl::Status s = NextLine(&line, &eof, &too_long);
      if (!s.ok() || eof) {
        CloseFile();
        if (!s.ok()) {
          s = HandleBadRecord(context().error_policy, stats(),
                              "unreadable_file", s);
          if (!s.ok()) {
            error = s;
            break;
          }
        }
        continue;
      }
      ++*read;
      if (too_long) {
        s = HandleBadRecord(
            context().error_policy, stats(), "line_too_long",
            errors::DataLoss(CurrentPath(), ":", line_number_, ": line is ",
                             "longer than max_line_bytes (",
                             ds_->opts().max_line_bytes, ")"));
        if (!s.ok()) {
          error = s;
          break;
        }
        continue;
      }
      lines_.emplace_back(line.data(), line.size());
      if (origin) origins_.push_back(absl::StrCat(CurrentPath(), ":", line_number_));
      ++*n;
    }
    return error;
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("file_index"), file_index_);
    state->WriteInt(Key("offset"),
                    file_ != nullptr ? static_cast<int64_t>(buf_offset_ + pos_)
                                     : static_cast<int64_t>(next_offset_));
    state->WriteInt(Key("line"), line_number_);
    state->WriteInt(Key("pending_code"),
                    static_cast<int64_t>(pending_error_.code()));
    state->WriteString(Key("pending_message"),
                       std::string(pending_error_.message()));
    return absl::OkStatus();
  }

  absl::Status Restore(const IteratorState& state) override {
    CloseFile();
    ASSIGN_OR_RETURN(file_index_, state.ReadInt(Key("file_index")));
    ASSIGN_OR_RETURN(int64_t offset, state.ReadInt(Key("offset")));
    ASSIGN_OR_RETURN(line_number_, state.ReadInt(Key("line")));
    ASSIGN_OR_RETURN(int64_t code, state.ReadInt(Key("pending_code")));
    ASSIGN_OR_RETURN(std::string message,
                     state.ReadString(Key("pending_message")));
    if (file_index_ < 0 || offset < 0 || line_number_ < 0) {
      return errors::DataLoss("TextLine state at '", prefix(),
                              "' has a negative position");
    }
    if (file_index_ > static_cast<int64_t>(ds_->files().size())) {
      return errors::FailedPrecondition(
          "TextLine state at '", prefix(), "' is at file ", file_index_,
          " but the dataset has ", ds_->files().size(), " files");
    }
    next_offset_ = static_cast<uint64_t>(offset);
    pending_error_ = absl::Status(static_cast<absl::StatusCode>(code), message);
    return absl::OkStatus();
  }

 private:
  const std::string& CurrentPath() const { return ds_->files()[file_index_]; }

  // Opens files()[file_index_] positioned at next_offset_.
  absl::Status OpenFile() {
    Env* env = context().env != nullptr ? context().env : Env::Default();
    absl::StatusOr<std::unique_ptr<RandomAccessFile>> f =
        env->NewRandomAccessFile(CurrentPath());
    if (!f.ok()) {
      return errors::Annotate(
          f.status(),
          absl::StrCat("TextLine: cannot open '", CurrentPath(), "'"));
    }
    file_ = std::move(*f);
    const size_t want = static_cast<size_t>(ds_->opts().read_buffer_bytes);
    if (capacity_ < want) {
      buf_.reset(new char[want]);
      capacity_ = want;
    }
    buf_offset_ = next_offset_;
    pos_ = end_ = 0;
    eof_ = false;
    return absl::OkStatus();
  }

  // Moves to the next file; next_offset_ / line_number_ restart at 0.
  void CloseFile() {
    if (file_ == nullptr) return;
    file_.reset();
    ++file_index_;
    next_offset_ = 0;
    line_number_ = 0;
  }

  // Moves the unread bytes to the front of the buffer (growing it when it is
  // full) and appends bytes from the file.
  absl::Status Refill() {
    const size_t rem = end_ - pos_;
    if (pos_ > 0) {
      if (rem > 0) std::memmove(buf_.get(), buf_.get() + pos_, rem);
      buf_offset_ += pos_;
      pos_ = 0;
      end_ = rem;
    }
    if (end_ == capacity_) {
      size_t cap = capacity_ * 2;
      std::unique_ptr<char[]> bigger(new char[cap]);
      std::memcpy(bigger.get(), buf_.get(), end_);
      buf_ = std::move(bigger);
      capacity_ = cap;
    }
    const size_t want = capacity_ - end_;
    absl::StatusOr<absl::string_view> got =
        file_->Read(buf_offset_ + end_, want, buf_.get() + end_);
    if (!got.ok()) {
      return errors::Annotate(
          got.status(), absl::StrCat("TextLine: cannot read '", CurrentPath(),
                                     "' at offset ", buf_offset_ + end_));
    }
    if (got->data() != buf_.get() + end_ && !got->empty()) {
      std::memcpy(buf_.get() + end_, got->data(), got->size());
    }
    end_ += got->size();
    if (got->size() < want) eof_ = true;
    return absl::OkStatus();
  }

  // Next line of the open file without its "\n" / "\r\n". *eof at the end of
  // the file. An over-long line is consumed and reported as *too_long.
  absl::Status NextLine(absl::string_view* line, bool* eof, bool* too_long) {
    const size_t max = static_cast<size_t>(ds_->opts().max_line_bytes);
    size_t scanned = 0;  // Bytes after pos_ known to hold no '\n'.
    while (true) {
      const char* start = buf_.get() + pos_;
      const size_t avail = end_ - pos_;
      const char* nl = static_cast<const char*>(
          std::memchr(start + scanned, '\n', avail - scanned));
      if (nl != nullptr || (eof_ && avail > 0)) {
        size_t len = nl != nullptr ? static_cast<size_t>(nl - start) : avail;
        pos_ += nl != nullptr ? len + 1 : len;
        ++line_number_;
        if (len > 0 && start[len - 1] == '\r') --len;
        *too_long = len > max;
        *line = absl::string_view(start, len);
        return absl::OkStatus();
      }
      if (eof_) {
        *eof = true;
        return absl::OkStatus();
      }
      scanned = avail;
      if (avail > max + 1) return SkipLongLine(too_long);
      RETURN_IF_ERROR(Refill());  // Keeps the scanned bytes, now at 0.
    }
  }

  // The line at pos_ is longer than max_line_bytes: drops bytes up to and
  // including its '\n' (or the end of the file) without buffering them.
  absl::Status SkipLongLine(bool* too_long) {
    *too_long = true;
    ++line_number_;
    while (true) {
      const char* start = buf_.get() + pos_;
      const char* nl =
          static_cast<const char*>(std::memchr(start, '\n', end_ - pos_));
      if (nl != nullptr) {
        pos_ += nl - start + 1;
        return absl::OkStatus();
      }
      pos_ = end_;
      if (eof_) return absl::OkStatus();
      RETURN_IF_ERROR(Refill());
    }
  }

  std::shared_ptr<const TextLineDataset> ds_;
  int64_t file_index_ = 0;
  uint64_t next_offset_ = 0;  // Where the next OpenFile starts.
  int64_t line_number_ = 0;   // Lines consumed in the current file.
  absl::Status pending_error_;
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  uint64_t buf_offset_ = 0;  // File offset of buf_[0].
  size_t pos_ = 0;           // Next unread byte in buf_.
  size_t end_ = 0;           // End of valid bytes in buf_.
  bool eof_ = false;         // The file has no bytes after buf_[end_).
  // The element being gathered (kept for their capacity between calls).
  std::vector<std::string> lines_;
  std::vector<std::string> origins_;
};

std::unique_ptr<IteratorBase> TextLineDataset::MakeIteratorInternal(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  if (!status_.ok()) return MakeErrorIterator(std::move(ctx), prefix, status_);
  return std::make_unique<TextLineIterator>(
      std::static_pointer_cast<const TextLineDataset>(shared_from_this()),
      std::move(ctx), prefix);
}

// ---------------------------------------------------------------------------
// FromTensorSlices

class FromTensorSlicesDataset : public DatasetBase {
 public:
  explicit FromTensorSlicesDataset(Element components)
      : components_(std::move(components)) {
    if (components_.empty()) {
      status_ = errors::InvalidArgument("FromTensorSlices: no components");
    }
    for (size_t i = 0; i < components_.size() && status_.ok(); ++i) {
      const Tensor& t = components_[i];
      if (!t.IsInitialized() || t.dims() < 1) {
        status_ = errors::InvalidArgument(
            "FromTensorSlices: component ", i, " is ",
            t.IsInitialized() ? "a scalar" : "uninitialized",
            "; every component needs a dim 0 to slice");
      } else if (t.dim_size(0) != components_[0].dim_size(0)) {
        status_ = errors::InvalidArgument(
            "FromTensorSlices: component ", i, " has shape ",
            t.shape().DebugString(), " but component 0 has ",
            components_[0].shape().DebugString(), "; dim 0 must match");
      }
    }
    for (const Tensor& t : components_) {
      dtypes_.push_back(t.dtype());
      TensorShape s = t.dims() >= 1 ? t.shape() : TensorShape({0});
      s.RemoveDim(0);
      shapes_.push_back(PartialShape(s));
      slice_shapes_.push_back(s);
    }
    n_ = status_.ok() ? components_[0].dim_size(0) : 0;
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override;
  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }
  std::string DebugString() const override {
    return absl::StrCat("FromTensorSlices(", n_, " x ", components_.size(),
                        " components)");
  }
  absl::Status CheckValid() const override { return status_; }

  int64_t n() const { return n_; }
  absl::StatusOr<Element> Get(int64_t i) const {
    Element e;
    e.reserve(components_.size());
    for (size_t c = 0; c < components_.size(); ++c) {
      ASSIGN_OR_RETURN(
          Tensor t, components_[c].Slice(i, i + 1).Reshaped(slice_shapes_[c]));
      e.push_back(std::move(t));
    }
    return e;
  }

 private:
  Element components_;
  absl::Status status_;
  int64_t n_ = 0;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
  std::vector<TensorShape> slice_shapes_;
};

// Position: the index of the next slice.
class IndexIterator : public IteratorBase {
 public:
  IndexIterator(std::shared_ptr<const IteratorContext> ctx, std::string prefix,
                int64_t n, std::function<absl::StatusOr<Element>(int64_t)> get,
                DatasetPtr keep_alive)
      : IteratorBase(std::move(ctx), std::move(prefix)),
        n_(n),
        get_(std::move(get)),
        keep_alive_(std::move(keep_alive)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = next_ >= n_;
    if (*end_of_sequence) return absl::OkStatus();
    ASSIGN_OR_RETURN(*out, get_(next_));
    ++next_;
    return absl::OkStatus();
  }
  absl::Status Save(IteratorState* state) override {
    state->WriteInt(Key("next"), next_);
    return absl::OkStatus();
  }
  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(int64_t next, state.ReadInt(Key("next")));
    if (next < 0 || next > n_) {
      return errors::FailedPrecondition("state at '", prefix(), "' is at ",
                                        next, " of ", n_, " elements");
    }
    next_ = next;
    return absl::OkStatus();
  }

 private:
  const int64_t n_;
  std::function<absl::StatusOr<Element>(int64_t)> get_;
  DatasetPtr keep_alive_;
  int64_t next_ = 0;
};

std::unique_ptr<IteratorBase> FromTensorSlicesDataset::MakeIteratorInternal(
    std::shared_ptr<const IteratorContext> ctx,
    const std::string& prefix) const {
  if (!status_.ok()) return MakeErrorIterator(std::move(ctx), prefix, status_);
  return std::make_unique<IndexIterator>(
      std::move(ctx), prefix, n_, [this](int64_t i) { return Get(i); },
      shared_from_this());
}

// ---------------------------------------------------------------------------
// Range

class RangeDataset : public DatasetBase {
 public:
  explicit RangeDataset(int64_t n)
      : n_(n < 0 ? 0 : n), dtypes_{DT_INT64}, shapes_{PartialShape({})} {}

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx,
      const std::string& prefix) const override {
    return std::make_unique<IndexIterator>(
        std::move(ctx), prefix, n_,
        [](int64_t i) -> absl::StatusOr<Element> {
          return Element{Tensor::Scalar<int64_t>(i)};
        },
        shared_from_this());
  }
  const std::vector<DataType>& output_dtypes() const override {
    return dtypes_;
  }
  const std::vector<PartialShape>& output_shapes() const override {
    return shapes_;
  }
  std::string DebugString() const override {
    return absl::StrCat("Range(", n_, ")");
  }

 private:
  int64_t n_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

}  // namespace

DatasetPtr NewTextLineDataset(std::vector<std::string> files,
                              ShardOptions shard, TextLineOptions opts) {
  return std::make_shared<TextLineDataset>(std::move(files), shard, opts);
}

DatasetPtr NewFromTensorSlicesDataset(Element components) {
  return std::make_shared<FromTensorSlicesDataset>(std::move(components));
}

DatasetPtr NewRangeDataset(int64_t n) {
  return std::make_shared<RangeDataset>(n);
}

}  // namespace recflow::data::internal
