// Sources: TextLine, FromTensorSlices, Range.

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/data/dataset.h"
#include "recflow/data/dataset_internal.h"
#include "recflow/data/file_source.h"

namespace recflow::data::internal {
namespace {

// ---------------------------------------------------------------------------
// TextLine

constexpr FileSourceKind kTextLine = {.name = "TextLine",
                                      .records = "lines",
                                      .per_element_attr = "lines_per_element",
                                      .counter_key = "line"};

absl::Status CheckTextLineOptions(const TextLineOptions& opts) {
  if (opts.max_line_bytes < 1 || opts.read_buffer_bytes < 1) {
    return errors::InvalidArgument(
        "TextLine: max_line_bytes (", opts.max_line_bytes,
        ") and read_buffer_bytes (", opts.read_buffer_bytes, ") must be >= 1");
  }
  return absl::OkStatus();
}

// Reads lines through a large buffer with memchr; the only allocation per
// line is the element's std::string. records_in_file_ is the 1-based
// number of the last line read.
class TextLineIterator : public FileSourceIterator<TextLineIterator> {
 public:
  TextLineIterator(const TextLineOptions& opts,
                   std::shared_ptr<const FileSourceDataset> ds,
                   std::shared_ptr<const IteratorContext> ctx,
                   std::string prefix)
      : FileSourceIterator(std::move(ds), std::move(ctx), std::move(prefix)),
        opts_(opts) {}

  // The next line of the open file (FileSourceIterator).
  FileRead ReadRecord(std::vector<std::string>* lines, BadRecord* bad) {
    absl::string_view line;
    bool eof = false, too_long = false;
    absl::Status s = NextLine(&line, &eof, &too_long);
    if (!s.ok()) {
      *bad = {.reason = "unreadable_file",
              .error = std::move(s),
              .ends_file = true};
      return FileRead::kBadRecord;
    }
    if (eof) return FileRead::kEndOfFile;
    if (too_long) {
      *bad = {.reason = "line_too_long",
              .error = errors::DataLoss(
                  CurrentPath(), ":", records_in_file_, ": line is ",
                  "longer than max_line_bytes (", opts_.max_line_bytes, ")"),
              .counts_as_read = true};
      return FileRead::kBadRecord;
    }
    lines->emplace_back(line.data(), line.size());
    return FileRead::kRecord;
  }
  std::string Origin() const {
    return absl::StrCat(CurrentPath(), ":", records_in_file_);
  }

 private:
  void StartFile(RandomAccessFile* file, uint64_t offset) override {
    open_file_ = file;
    const size_t want = static_cast<size_t>(opts_.read_buffer_bytes);
    if (capacity_ < want) {
      buf_.reset(new char[want]);
      capacity_ = want;
    }
    buf_offset_ = offset;
    pos_ = end_ = 0;
    eof_ = false;
  }
  void EndFile() override { open_file_ = nullptr; }
  uint64_t Offset() const override { return buf_offset_ + pos_; }

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
        open_file_->Read(buf_offset_ + end_, want, buf_.get() + end_);
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
    const size_t max = static_cast<size_t>(opts_.max_line_bytes);
    size_t scanned = 0;  // Bytes after pos_ known to hold no '\n'.
    while (true) {
      const char* start = buf_.get() + pos_;
      const size_t avail = end_ - pos_;
      const char* nl = static_cast<const char*>(
          std::memchr(start + scanned, '\n', avail - scanned));
      if (nl != nullptr || (eof_ && avail > 0)) {
        size_t len = nl != nullptr ? static_cast<size_t>(nl - start) : avail;
        pos_ += nl != nullptr ? len + 1 : len;
        ++records_in_file_;
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
    ++records_in_file_;
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

  const TextLineOptions opts_;
  RandomAccessFile* open_file_ = nullptr;  // Between StartFile and EndFile.
  std::unique_ptr<char[]> buf_;
  size_t capacity_ = 0;
  uint64_t buf_offset_ = 0;  // File offset of buf_[0].
  size_t pos_ = 0;           // Next unread byte in buf_.
  size_t end_ = 0;           // End of valid bytes in buf_.
  bool eof_ = false;         // The file has no bytes after buf_[end_).
};

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
  return std::make_shared<FileSourceDataset>(
      kTextLine, std::move(files), shard, opts.lines_per_element,
      opts.emit_origin, CheckTextLineOptions(opts),
      [opts](std::shared_ptr<const FileSourceDataset> ds,
             std::shared_ptr<const IteratorContext> ctx,
             const std::string& prefix) {
        return std::make_unique<TextLineIterator>(opts, std::move(ds),
                                                  std::move(ctx), prefix);
      });
}

DatasetPtr NewFromTensorSlicesDataset(Element components) {
  return std::make_shared<FromTensorSlicesDataset>(std::move(components));
}

DatasetPtr NewRangeDataset(int64_t n) {
  return std::make_shared<RangeDataset>(n);
}

}  // namespace recflow::data::internal
