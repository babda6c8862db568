// The checks between parsing and training (checked_batches.h).
//
// The parse Map counts, per batch, how many lines of each file it read and
// how many of them were good, and passes those counts as two extra
// components ("paths" string [k], "counts" int64 [k, 2]: lines, good). The
// stage above it consumes them in order: it keeps the running counts of
// the file being read, which is complete when a later file shows up or the
// input ends.
#include "recflow/data/checked_batches.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::data {
namespace {

// "path:LINE" -> "path".
absl::string_view PathOf(absl::string_view origin) {
  const size_t colon = origin.rfind(':');
  return colon == absl::string_view::npos ? origin : origin.substr(0, colon);
}

class CheckedBatchesDataset;

class CheckedBatchesIterator : public IteratorBase {
 public:
  CheckedBatchesIterator(std::shared_ptr<const CheckedBatchesDataset> ds,
                         std::shared_ptr<const IteratorContext> ctx,
                         const std::string& prefix, std::unique_ptr<IteratorBase> input)
      : IteratorBase(std::move(ctx), prefix), ds_(std::move(ds)), input_(std::move(input)) {}

  absl::Status GetNext(Element* out, bool* end_of_sequence) override;
  absl::Status Save(IteratorState* state) override;
  absl::Status Restore(const IteratorState& state) override;

 private:
  // The file being read is complete: an error when none of its lines was
  // good. Then starts counting `next`.
  absl::Status FinishFile(const std::string& next);

  std::shared_ptr<const CheckedBatchesDataset> ds_;
  std::unique_ptr<IteratorBase> input_;
  std::string file_;  // being read ("" before the first line)
  int64_t file_lines_ = 0, file_good_ = 0;
  int64_t pass_lines_ = 0, pass_good_ = 0;  // this pass, every file
  // A batch read together with the news that an earlier file had no good
  // line: the error is returned first, the batch by the next GetNext (and
  // saved with the position), so a run resumed after the error loses no
  // line.
  Element held_;
};

class CheckedBatchesDataset : public DatasetBase {
 public:
  CheckedBatchesDataset(DatasetPtr input, CheckedBatchesOptions options)
      : input_(std::move(input)), options_(std::move(options)) {
    dtypes_ = input_->output_dtypes();
    shapes_ = input_->output_shapes();
    dtypes_.resize(std::max<size_t>(dtypes_.size(), 2) - 2);
    shapes_.resize(std::min(shapes_.size(), dtypes_.size()));
  }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(
      std::shared_ptr<const IteratorContext> ctx, const std::string& prefix) const override {
    // The input keeps this stage's prefix: the stage adds keys of its own
    // but does not move its input's, so positions saved before it existed
    // still restore.
    auto input = input_->MakeIteratorInternal(ctx, prefix);
    return std::make_unique<CheckedBatchesIterator>(
        std::static_pointer_cast<const CheckedBatchesDataset>(shared_from_this()), std::move(ctx),
        prefix, std::move(input));
  }
  const std::vector<DataType>& output_dtypes() const override { return dtypes_; }
  const std::vector<PartialShape>& output_shapes() const override { return shapes_; }
  std::string DebugString() const override {
    return absl::StrCat("CheckedBatches<-", input_->DebugString());
  }
  absl::Status CheckValid() const override { return input_->CheckValid(); }
  const CheckedBatchesOptions& options() const { return options_; }

 private:
  DatasetPtr input_;
  CheckedBatchesOptions options_;
  std::vector<DataType> dtypes_;
  std::vector<PartialShape> shapes_;
};

absl::Status CheckedBatchesIterator::FinishFile(const std::string& next) {
  absl::Status s;
  if (ds_->options().whole_files && !file_.empty() && file_lines_ > 0 && file_good_ == 0) {
    const auto& stats = ds_->options().records;
    s = errors::InvalidArgument(
        "data file ", file_, " has no good line: its ", file_lines_,
        " line(s) are all bad records", stats != nullptr ? " (" + stats->Summary() + ")" : "",
        "; fix it, or empty it (a checkpoint holds positions by file index; "
        "docs/formats/text.md, \"Bad records\")");
  }
  file_ = next;
  file_lines_ = file_good_ = 0;
  return s;
}

absl::Status CheckedBatchesIterator::GetNext(Element* out, bool* end_of_sequence) {
  out->clear();
  *end_of_sequence = false;
  if (!held_.empty()) {
    *out = std::move(held_);
    held_.clear();
    return absl::OkStatus();
  }
  for (;;) {
    Element e;
    bool end = false;
    RETURN_IF_ERROR(input_->GetNext(&e, &end));
    if (end) {
      RETURN_IF_ERROR(FinishFile(""));
      // With whole files, a pass without a good line had a file without one,
      // reported above.
      if (!ds_->options().whole_files && pass_lines_ > 0 && pass_good_ == 0) {
        const auto& stats = ds_->options().records;
        pass_lines_ = 0;  // reported once
        return errors::InvalidArgument(
            ds_->options().data_name, " has no good line: ", "all lines read are bad records",
            stats != nullptr ? " (" + stats->Summary() + ")" : "",
            " (docs/formats/text.md, \"Bad records\")");
      }
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    if (e.size() < 3 || e[e.size() - 2].dtype() != DT_STRING || e.back().dtype() != DT_INT64 ||
        e.back().NumElements() != 2 * e[e.size() - 2].NumElements()) {
      return errors::Internal("CheckedBatches: the parse step did not add per-file counts");
    }
    const Tensor paths = e[e.size() - 2], counts = e.back();
    e.resize(e.size() - 2);
    absl::Status file_error;
    for (int64_t i = 0; i < paths.NumElements(); ++i) {
      const std::string& path = paths.flat<std::string>()[i];
      if (path != file_) {
        absl::Status s = FinishFile(path);
        if (file_error.ok()) file_error = s;
      }
      const int64_t lines = counts.flat<int64_t>()[2 * i], good = counts.flat<int64_t>()[2 * i + 1];
      file_lines_ += lines;
      file_good_ += good;
      pass_lines_ += lines;
      pass_good_ += good;
    }
    const bool empty = e[0].dims() < 1 || e[0].dim_size(0) == 0;
    if (empty) {
      if (ds_->options().batches != nullptr) ds_->options().batches->empty_batches.fetch_add(1);
      if (!file_error.ok()) return file_error;
      continue;
    }
    if (!file_error.ok()) {
      held_ = std::move(e);
      return file_error;
    }
    *out = std::move(e);
    return absl::OkStatus();
  }
}

absl::Status CheckedBatchesIterator::Save(IteratorState* state) {
  RETURN_IF_ERROR(input_->Save(state));
  state->WriteString(Key("checked_batches/file"), file_);
  state->WriteInt(Key("checked_batches/file_lines"), file_lines_);
  state->WriteInt(Key("checked_batches/file_good"), file_good_);
  state->WriteInt(Key("checked_batches/pass_lines"), pass_lines_);
  state->WriteInt(Key("checked_batches/pass_good"), pass_good_);
  state->WriteInt(Key("checked_batches/held"), static_cast<int64_t>(held_.size()));
  for (size_t i = 0; i < held_.size(); ++i) {
    state->WriteTensor(Key(absl::StrCat("checked_batches/held/", i)), held_[i]);
  }
  return absl::OkStatus();
}

absl::Status CheckedBatchesIterator::Restore(const IteratorState& state) {
  RETURN_IF_ERROR(input_->Restore(state));
  file_.clear();
  file_lines_ = file_good_ = pass_lines_ = pass_good_ = 0;
  held_.clear();
  // Positions saved before this stage existed have no counts: start afresh.
  if (!state.Contains(Key("checked_batches/file"))) return absl::OkStatus();
  ASSIGN_OR_RETURN(file_, state.ReadString(Key("checked_batches/file")));
  ASSIGN_OR_RETURN(file_lines_, state.ReadInt(Key("checked_batches/file_lines")));
  ASSIGN_OR_RETURN(file_good_, state.ReadInt(Key("checked_batches/file_good")));
  ASSIGN_OR_RETURN(pass_lines_, state.ReadInt(Key("checked_batches/pass_lines")));
  ASSIGN_OR_RETURN(pass_good_, state.ReadInt(Key("checked_batches/pass_good")));
  ASSIGN_OR_RETURN(int64_t held, state.ReadInt(Key("checked_batches/held")));
  for (int64_t i = 0; i < held; ++i) {
    ASSIGN_OR_RETURN(Tensor t, state.ReadTensor(Key(absl::StrCat("checked_batches/held/", i))));
    held_.push_back(std::move(t));
  }
  return absl::OkStatus();
}

}  // namespace

MapFn CountingParseFn(std::shared_ptr<const TextParser> parser,
                            std::shared_ptr<const TextParser> quiet) {
  return [parser = std::move(parser),
          quiet = std::move(quiet)](Element e) -> absl::StatusOr<Element> {
    if (e.size() != 2) {
      return errors::InvalidArgument("the parse step needs {lines, origins}, got ", e.size(),
                                     " components");
    }
    ASSIGN_OR_RETURN(Batch batch, parser->ParseTensor(e[0], &e[1]));
    // Runs of lines from one file: [begin, end) and the file.
    const int64_t n = e[1].NumElements();
    const std::string* origins = e[1].data<std::string>();
    std::vector<std::pair<int64_t, int64_t>> runs;
    std::vector<std::string> paths;
    for (int64_t i = 0; i < n; ++i) {
      const absl::string_view path = PathOf(origins[i]);
      if (paths.empty() || path != paths.back()) {
        if (!runs.empty()) runs.back().second = i;
        runs.emplace_back(i, n);
        paths.emplace_back(path);
      }
    }
    std::vector<int64_t> good(runs.size(), 0);
    if (runs.size() == 1) {
      good[0] = batch.batch_size;
    } else if (batch.batch_size == n) {
      for (size_t r = 0; r < runs.size(); ++r) good[r] = runs[r].second - runs[r].first;
    } else if (batch.batch_size > 0) {
      // Some lines of a batch spanning files were bad: which file's? Parse
      // each run again with the parser that counts nothing (rare: only a
      // batch at a file boundary).
      const std::string* lines = e[0].data<std::string>();
      for (size_t r = 0; r < runs.size(); ++r) {
        std::vector<absl::string_view> views(lines + runs[r].first, lines + runs[r].second);
        ASSIGN_OR_RETURN(Batch part, quiet->Parse(views));
        good[r] = part.batch_size;
      }
    }
    Element out = batch.ToElement();
    Tensor path_tensor(DT_STRING, TensorShape({static_cast<int64_t>(runs.size())}));
    Tensor count_tensor(DT_INT64, TensorShape({static_cast<int64_t>(runs.size()), 2}));
    for (size_t r = 0; r < runs.size(); ++r) {
      path_tensor.flat<std::string>()[r] = std::move(paths[r]);
      count_tensor.flat<int64_t>()[2 * r] = runs[r].second - runs[r].first;
      count_tensor.flat<int64_t>()[2 * r + 1] = good[r];
    }
    out.push_back(std::move(path_tensor));
    out.push_back(std::move(count_tensor));
    return out;
  };
}

Dataset CheckedBatches(const Dataset& counted, CheckedBatchesOptions options) {
  return Dataset(
      std::make_shared<CheckedBatchesDataset>(counted.impl(), std::move(options)));
}

std::string SkippedBatchesNote(const BatchStats* batches) {
  const int64_t n = batches != nullptr ? batches->empty_batches.load() : 0;
  if (n == 0) return "";
  return absl::StrCat(n, n == 1 ? " batch" : " batches", " of only bad lines skipped");
}

std::string SkippedRecordsReport(const DataStats* records, const BatchStats* batches) {
  const std::string skipped = SkippedBatchesNote(batches);
  if ((records == nullptr || records->records_skipped() == 0) && skipped.empty()) return "";
  return absl::StrCat("input: ", records != nullptr ? records->Summary() : "",
                      skipped.empty() ? "" : "; ", skipped,
                      " (bad lines are skipped and counted; docs/formats/text.md, \"Bad records\")");
}

}  // namespace recflow::data
