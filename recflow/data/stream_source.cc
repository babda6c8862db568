#include "recflow/data/stream_source.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/record_io.h"
#include "recflow/core/status.h"
#include "recflow/data/file_source.h"

namespace recflow::data {
namespace {

const char* NameOf(const StreamOptions& o) {
  return o.framing == StreamFraming::kTfRecords ? "StreamTfRecords" : "StreamTextLines";
}

absl::Status CheckOptions(const StreamOptions& o) {
  const char* kName = NameOf(o);
  if (o.pattern.empty()) return errors::InvalidArgument(kName, ": the file pattern is empty");
  const size_t slash = o.pattern.rfind('/');
  if (slash != std::string::npos &&
      o.pattern.substr(0, slash).find_first_of("*?[") != std::string::npos) {
    return errors::InvalidArgument(kName, ": pattern '", o.pattern,
                                   "' has a glob character outside its last component");
  }
  if (o.lines_per_element < 1) {
    return errors::InvalidArgument(kName, ": lines_per_element must be >= 1, got ",
                                   o.lines_per_element);
  }
  if (!(o.poll_seconds > 0) || !std::isfinite(o.poll_seconds) || !(o.max_wait_secs > 0) ||
      !std::isfinite(o.max_wait_secs)) {
    return errors::InvalidArgument(kName, ": poll_seconds (", o.poll_seconds,
                                   ") and max_wait_secs (", o.max_wait_secs, ") must be > 0");
  }
  if (o.max_line_bytes < 1 || o.read_buffer_bytes < 1) {
    return errors::InvalidArgument(kName, ": max_line_bytes and read_buffer_bytes must be >= 1");
  }
  return absl::OkStatus();
}

class StreamDataset final : public DatasetBase {
 public:
  explicit StreamDataset(StreamOptions options)
      : options_(std::move(options)), status_(CheckOptions(options_)) {
    const PartialShape shape =
        options_.lines_per_element == 1 ? PartialShape({}) : PartialShape({-1});
    dtypes_ = {DT_STRING};
    shapes_ = {shape};
    if (options_.emit_origin) {
      dtypes_.push_back(DT_STRING);
      shapes_.push_back(shape);
    }
  }
  std::unique_ptr<IteratorBase> MakeIteratorInternal(std::shared_ptr<const IteratorContext> ctx,
                                                     const std::string& prefix) const override;
  const std::vector<DataType>& output_dtypes() const override { return dtypes_; }
  const std::vector<PartialShape>& output_shapes() const override { return shapes_; }
  std::string DebugString() const override {
    return absl::StrCat(NameOf(options_), "(", options_.pattern, ", lines_per_element=",
                        options_.lines_per_element,
                        options_.done_suffix.empty() ? "" : ", done_suffix=" + options_.done_suffix,
                        options_.emit_origin ? ", emit_origin" : "", ")");
  }
  absl::Status CheckValid() const override { return status_; }
  const StreamOptions& options() const { return options_; }

 private:
  StreamOptions options_;
  absl::Status status_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

class StreamIterator final : public IteratorBase {
 public:
  StreamIterator(std::shared_ptr<const StreamDataset> ds, std::shared_ptr<const IteratorContext> ctx,
                 const std::string& prefix)
      : IteratorBase(std::move(ctx), prefix),
        ds_(std::move(ds)),
        o_(ds_->options()),
        name_(NameOf(o_)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override {
    out->clear();
    *end_of_sequence = false;
    if (finished_) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    Env* env = context().env != nullptr ? context().env : Env::Default();
    const int64_t k = o_.lines_per_element;
    lines_.clear();
    origins_.clear();
    int64_t read = 0;
    uint64_t idle_since = env->NowMicros();
    absl::Status error;
    try {
      while (static_cast<int64_t>(lines_.size()) < k) {
        std::string line;
        bool got = false;
        error = o_.framing == StreamFraming::kTfRecords ? NextRecord(env, &line, &got)
                                                        : NextLine(env, &line, &got);
        if (!error.ok()) break;
        if (got) {
          ++read;
          if (o_.emit_origin) origins_.push_back(absl::StrCat(current_, ":", line_));
          lines_.push_back(std::move(line));
          idle_since = env->NowMicros();
          continue;
        }
        // Nothing to read now.
        if (o_.stop && o_.stop()) {
          finished_ = true;
          break;
        }
        if (!lines_.empty() &&
            static_cast<double>(env->NowMicros() - idle_since) >= o_.max_wait_secs * 1e6) {
          break;
        }
        env->SleepForMicros(static_cast<int64_t>(o_.poll_seconds * 1e6));
      }
    } catch (const std::bad_alloc&) {
      error = errors::ResourceExhausted(name_, ": out of memory gathering ", lines_.size(), " of ",
                                        k, " lines");
    }
    if (read > 0 && stats() != nullptr) stats()->AddRecordsRead(read);
    if (!error.ok() && lines_.empty()) return error;
    if (!error.ok()) pending_error_ = std::move(error);  // next call, in position
    if (lines_.empty()) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(Tensor t, internal::MoveToStringTensor(&lines_, k == 1, name_, "lines"));
    out->push_back(std::move(t));
    if (o_.emit_origin) {
      ASSIGN_OR_RETURN(Tensor origins,
                       internal::MoveToStringTensor(&origins_, k == 1, name_, "origins"));
      out->push_back(std::move(origins));
    }
    return absl::OkStatus();
  }

  absl::Status Save(IteratorState* state) override {
    state->WriteString(Key("file"), current_);
    state->WriteInt(Key("offset"), static_cast<int64_t>(offset_));
    state->WriteInt(Key("line"), line_);
    state->WriteString(Key("done"), done_);
    state->WriteInt(Key("finished"), finished_ ? 1 : 0);
    return absl::OkStatus();
  }

  absl::Status Restore(const IteratorState& state) override {
    ASSIGN_OR_RETURN(current_, state.ReadString(Key("file")));
    ASSIGN_OR_RETURN(int64_t offset, state.ReadInt(Key("offset")));
    ASSIGN_OR_RETURN(line_, state.ReadInt(Key("line")));
    ASSIGN_OR_RETURN(done_, state.ReadString(Key("done")));
    ASSIGN_OR_RETURN(int64_t finished, state.ReadInt(Key("finished")));
    if (offset < 0 || line_ < 0) {
      return errors::DataLoss(name_, ": saved position offset ", offset, " line ", line_,
                              " is negative");
    }
    offset_ = static_cast<uint64_t>(offset);
    reader_.reset();
    // A stream stopped by `stop` goes on after a restore: the stop belonged
    // to the process that saved it.
    (void)finished;
    finished_ = false;
    file_.reset();
    buf_.clear();
    skipping_ = false;
    complete_ = false;
    pending_error_ = absl::OkStatus();
    return absl::OkStatus();
  }

 private:
  // The matching data files, by name (markers left out). Empty when none.
  absl::StatusOr<std::vector<std::string>> List(Env* env) const {
    auto files = ListFiles(env, {o_.pattern});
    if (!files.ok()) {
      if (absl::IsNotFound(files.status())) return std::vector<std::string>{};
      return files.status();
    }
    std::vector<std::string> out;
    for (std::string& f : *files) {
      if (o_.done_suffix.empty() || !absl::EndsWith(f, o_.done_suffix)) out.push_back(std::move(f));
    }
    return out;
  }

  // Whether no more lines will be appended to the current file.
  absl::StatusOr<bool> CurrentComplete(Env* env) const {
    if (!o_.done_suffix.empty()) return env->FileExists(current_ + o_.done_suffix);
    ASSIGN_OR_RETURN(std::vector<std::string> files, List(env));
    return !files.empty() && files.back() > current_;
  }

  // Reads more of the current file into buf_; *eof when nothing came.
  absl::Status Fill(bool* eof) {
    const size_t n = static_cast<size_t>(o_.read_buffer_bytes);
    scratch_.resize(n);
    ASSIGN_OR_RETURN(absl::string_view got,
                     file_->Read(offset_ + buf_.size(), n, scratch_.data()));
    *eof = got.empty();
    buf_.append(got.data(), got.size());
    return absl::OkStatus();
  }

  // The error held back for this call (an element was returned before it),
  // cleared; OK when there is none.
  absl::Status TakePendingError() {
    absl::Status s = std::move(pending_error_);
    pending_error_ = absl::OkStatus();
    return s;
  }

  // Takes the next complete line, if there is one now (*got).
  absl::Status NextLine(Env* env, std::string* line, bool* got) {
    *got = false;
    RETURN_IF_ERROR(TakePendingError());
    for (;;) {
      bool open = false;
      RETURN_IF_ERROR(OpenCurrent(env, &open));
      if (!open) return absl::OkStatus();  // wait for a file
      const size_t newline = buf_.find('\n');
      if (newline != std::string::npos) {
        const size_t taken = newline + 1;
        if (skipping_) {  // the rest of a line too long
          Consume(taken);
          skipping_ = false;
          continue;
        }
        size_t end = newline;
        if (end > 0 && buf_[end - 1] == '\r') --end;
        line->assign(buf_.data(), end);
        Consume(taken);
        *got = true;
        return absl::OkStatus();
      }
      if (static_cast<int64_t>(buf_.size()) > o_.max_line_bytes && !skipping_) {
        const absl::Status error = errors::DataLoss(name_, ": ", current_, ":", line_ + 1,
                                                    ": line longer than ", o_.max_line_bytes,
                                                    " bytes");
        ++line_;
        skipping_ = true;
        offset_ += buf_.size();
        buf_.clear();
        RETURN_IF_ERROR(HandleBadRecord(context().error_policy, stats(), "line_too_long", error));
        continue;
      }
      if (skipping_) {
        offset_ += buf_.size();
        buf_.clear();
      }
      bool eof = false;
      RETURN_IF_ERROR(Fill(&eof));
      if (!eof) continue;
      // At the end of what is written. Complete (checked before a last read,
      // so lines written before the writer moved on are not lost)?
      ASSIGN_OR_RETURN(bool complete, CurrentComplete(env));
      if (!complete) return absl::OkStatus();  // wait for more
      RETURN_IF_ERROR(Fill(&eof));
      if (!eof) continue;
      if (!buf_.empty() && !skipping_) {  // a last line without '\n'
        line->assign(buf_);
        Consume(buf_.size());
        *got = true;
        return absl::OkStatus();
      }
      FinishFile();
    }
  }

  // Opens the current file, or the first after the last one done: *open
  // false when there is none yet. A file deleted before it is read is
  // skipped; one that cannot be opened follows the error policy.
  absl::Status OpenCurrent(Env* env, bool* open) {
    *open = false;
    while (file_ == nullptr) {
      if (current_.empty()) {
        ASSIGN_OR_RETURN(std::vector<std::string> files, List(env));
        auto next = std::upper_bound(files.begin(), files.end(), done_);
        if (next == files.end()) return absl::OkStatus();
        current_ = *next;
        offset_ = 0;
        line_ = 0;
      }
      auto file = env->NewRandomAccessFile(current_);
      if (!file.ok()) {
        const absl::Status error =
            errors::Annotate(file.status(), absl::StrCat(name_, ": ", current_));
        FinishFile();
        if (!absl::IsNotFound(file.status())) {
          RETURN_IF_ERROR(
              HandleBadRecord(context().error_policy, stats(), "unreadable_file", error));
        }
        continue;
      }
      file_ = std::move(*file);
      buf_.clear();
      skipping_ = false;
      complete_ = false;
    }
    *open = true;
    return absl::OkStatus();
  }

  // TFRecord framing: takes the next whole record, if there is one now.
  absl::Status NextRecord(Env* env, std::string* record, bool* got) {
    *got = false;
    RETURN_IF_ERROR(TakePendingError());
    for (;;) {
      bool open = false;
      RETURN_IF_ERROR(OpenCurrent(env, &open));
      if (!open) return absl::OkStatus();
      if (reader_ == nullptr) {
        RecordReaderOptions ro;
        ro.max_record_bytes = static_cast<uint64_t>(o_.max_line_bytes);
        ro.buffer_bytes = static_cast<size_t>(o_.read_buffer_bytes);
        reader_ = std::make_unique<RecordReader>(file_.get(), current_, ro);
        reader_->Seek(offset_);
      }
      if (!skipping_) {
        absl::Status s = reader_->ReadRecord(record);
        const RecordError kind = reader_->last_error();
        if (s.ok()) {
          offset_ = reader_->offset();
          ++line_;
          *got = true;
          return absl::OkStatus();
        }
        if (kind == RecordError::kBadDataCrc || kind == RecordError::kTooLong) {
          // The framing holds: drop this record and go on.
          offset_ = reader_->offset();
          ++line_;
          RETURN_IF_ERROR(HandleBadRecord(context().error_policy, stats(),
                                          kind == RecordError::kTooLong ? "record_too_long"
                                                                        : "bad_crc",
                                          errors::Annotate(s, name_)));
          continue;
        }
        if (kind == RecordError::kIo) return errors::Annotate(s, name_);
        if (kind == RecordError::kBadLengthCrc) {
          // The framing is lost: nothing more of this file can be read.
          skipping_ = true;
          RETURN_IF_ERROR(HandleBadRecord(
              context().error_policy, stats(), "truncated",
              errors::Annotate(s, absl::StrCat(name_, " (the rest of the file is skipped)"))));
          continue;
        }
        if (kind == RecordError::kTruncated && complete_) {
          // Left half-written in a complete file.
          FinishFile();
          RETURN_IF_ERROR(
              HandleBadRecord(context().error_policy, stats(), "truncated",
                              errors::Annotate(s, absl::StrCat(name_, " (at its end)"))));
          continue;
        }
        // The end of what is written, or a record still being written.
        reader_->Seek(offset_);
        if (complete_ && kind == RecordError::kNone) {
          FinishFile();
          continue;
        }
      }
      // Complete? Checked before one more read, so that records written
      // before the writer moved on are not lost.
      ASSIGN_OR_RETURN(bool complete, CurrentComplete(env));
      if (!complete) return absl::OkStatus();  // wait for more
      if (skipping_) {
        FinishFile();
        continue;
      }
      complete_ = true;
    }
  }

  void Consume(size_t n) {
    buf_.erase(0, n);
    offset_ += n;
    if (!skipping_) ++line_;
  }

  void FinishFile() {
    done_ = current_;
    current_.clear();
    reader_.reset();
    file_.reset();
    buf_.clear();
    offset_ = 0;
    line_ = 0;
    skipping_ = false;
    complete_ = false;
  }

  std::shared_ptr<const StreamDataset> ds_;
  const StreamOptions& o_;
  const char* const name_;  // StreamTextLines or StreamTfRecords
  std::string current_;  // "" between files
  std::string done_;     // the last file finished ("": none)
  uint64_t offset_ = 0;  // of the next unread byte of current_ (buf_ starts there)
  int64_t line_ = 0;     // lines taken from current_
  std::unique_ptr<RandomAccessFile> file_;
  std::unique_ptr<RecordReader> reader_;  // TFRecords: reads file_ (destroyed first)
  std::string buf_, scratch_;
  // Lines: dropping the rest of a line too long. Records: the framing is
  // lost, the rest of the file is dropped.
  bool skipping_ = false;
  bool complete_ = false;  // records: current_ was seen complete
  bool finished_ = false;
  absl::Status pending_error_;
  std::vector<std::string> lines_, origins_;
};

std::unique_ptr<IteratorBase> StreamDataset::MakeIteratorInternal(
    std::shared_ptr<const IteratorContext> ctx, const std::string& prefix) const {
  return std::make_unique<StreamIterator>(
      std::static_pointer_cast<const StreamDataset>(shared_from_this()), std::move(ctx),
      absl::StrCat(prefix, "/", NameOf(options_)));
}

}  // namespace

Dataset StreamTextLines(StreamOptions options) {
  options.framing = StreamFraming::kLines;
  return Dataset(std::make_shared<StreamDataset>(std::move(options)));
}

Dataset StreamTfRecords(StreamOptions options) {
  options.framing = StreamFraming::kTfRecords;
  return Dataset(std::make_shared<StreamDataset>(std::move(options)));
}

}  // namespace recflow::data
