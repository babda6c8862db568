// LibsvmParser (declared in text_parsers.h).
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/data/text_parser_util.h"
#include "recflow/data/text_parsers.h"

namespace recflow::data {
namespace {

using text_internal::IsBlank;
using text_internal::LineError;

struct LibsvmOut {
  float* labels;
  std::vector<int64_t>* ids;
  std::vector<float>* weights;
};

// Parses one line (comment and '\r' already cut) into row `row`; appends
// its ids and weights. On failure fills *err and returns false (the caller
// truncates ids/weights back).
bool ParseLibsvmLine(const char* p, const char* end, bool binary_labels,
                     int64_t row, LibsvmOut* out, LineError* err) {
  while (p < end && IsBlank(*p)) ++p;
  if (p == end) {
    err->reason = "empty_line";
    err->expected = "expected 'label index:value ...'";
    return false;
  }
  const char* ts = p;
  while (p < end && !IsBlank(*p)) ++p;
  float label;
  const absl::string_view label_text(ts, p - ts);
  bool label_ok = text_internal::ParseFiniteFloat(label_text, &label);
  if (label_ok && binary_labels) {
    if (label == 1.0f) {
      label = 1.0f;
    } else if (label == 0.0f || label == -1.0f) {
      label = 0.0f;
    } else {
      label_ok = false;
    }
  }
  if (!label_ok) {
    err->reason = "bad_label";
    err->field = 0;
    err->text = label_text;
    err->expected =
        binary_labels ? "expected 1, +1, 0 or -1" : "expected a finite number";
    return false;
  }
  out->labels[row] = label;

  for (int token = 1;; ++token) {
    while (p < end && IsBlank(*p)) ++p;
    if (p == end) break;
    ts = p;
    const char* colon = nullptr;
    while (p < end && !IsBlank(*p)) {
      if (*p == ':' && colon == nullptr) colon = p;
      ++p;
    }
    const absl::string_view text(ts, p - ts);
    if (colon == nullptr) {
      err->reason = "bad_id";
      err->field = token;
      err->text = text;
      err->expected = "expected index:value";
      return false;
    }
    if (colon - ts == 3 && std::memcmp(ts, "qid", 3) == 0) continue;
    int64_t index;
    if (!text_internal::ParseInt64(absl::string_view(ts, colon - ts), &index) ||
        index < 0) {
      err->reason = "bad_id";
      err->field = token;
      err->text = text;
      err->expected = "expected a non-negative integer index before ':'";
      return false;
    }
    float value;
    if (!text_internal::ParseFiniteFloat(
            absl::string_view(colon + 1, p - colon - 1), &value)) {
      err->reason = "not_a_number";
      err->field = token;
      err->text = text;
      err->expected = "expected a finite number after ':'";
      return false;
    }
    out->ids->push_back(index);
    out->weights->push_back(value);
  }
  return true;
}

}  // namespace

LibsvmParser::LibsvmParser(LibsvmOptions options)
    : options_(std::move(options)) {
  schema_.sparse.push_back({options_.feature_name, /*weighted=*/true});
}

absl::StatusOr<std::unique_ptr<LibsvmParser>> LibsvmParser::Create(
    LibsvmOptions options) {
  if (options.feature_name.empty()) {
    return errors::InvalidArgument(
        "libsvm parser: feature_name must not be empty");
  }
  if (options.bad_records.max_line_bytes < 1) {
    return errors::InvalidArgument(
        "libsvm parser: max_line_bytes must be >= 1, got ",
        options.bad_records.max_line_bytes);
  }
  return std::unique_ptr<LibsvmParser>(new LibsvmParser(std::move(options)));
}

absl::StatusOr<Batch> LibsvmParser::Parse(
    absl::Span<const absl::string_view> lines,
    absl::Span<const absl::string_view> origins) const {
  RETURN_IF_ERROR(
      text_internal::CheckOrigins("libsvm", lines.size(), origins.size()));
  const int64_t num_lines = static_cast<int64_t>(lines.size());
  ASSIGN_OR_RETURN(Tensor labels,
                   Tensor::Create(DT_FLOAT, TensorShape({num_lines})));
  ASSIGN_OR_RETURN(Tensor splits,
                   Tensor::Create(DT_INT64, TensorShape({num_lines + 1})));
  // Every id needs a ':' in the text: an exact bound, so no regrowth.
  int64_t colons = 0;
  for (absl::string_view line : lines) {
    colons += std::count(line.begin(), line.end(), ':');
  }
  std::vector<int64_t> ids;
  std::vector<float> weights;
  ids.reserve(colons);
  weights.reserve(colons);
  LibsvmOut out{labels.data<float>(), &ids, &weights};
  int64_t* sp = splits.data<int64_t>();
  sp[0] = 0;

  const BadRecordOptions& bad = options_.bad_records;
  int64_t row = 0;
  for (int64_t i = 0; i < num_lines; ++i) {
    absl::string_view line = text_internal::StripCr(lines[i]);
    LineError err;
    bool ok;
    if (static_cast<int64_t>(line.size()) > bad.max_line_bytes) {
      err.reason = "line_too_long";
      err.expected = "longer than max_line_bytes";
      err.text = line;
      ok = false;
    } else {
      const void* hash = std::memchr(line.data(), '#', line.size());
      if (hash != nullptr) {
        line = line.substr(0, static_cast<const char*>(hash) - line.data());
      }
      ok = ParseLibsvmLine(line.data(), line.data() + line.size(),
                           options_.binary_labels, row, &out, &err);
    }
    if (ABSL_PREDICT_TRUE(ok)) {
      sp[++row] = static_cast<int64_t>(ids.size());
      continue;
    }
    ids.resize(sp[row]);
    weights.resize(sp[row]);
    const std::string field_name =
        err.field == 0 ? "label" : absl::StrCat("token ", err.field);
    RETURN_IF_ERROR(text_internal::ReportBadLine(bad, "libsvm", origins, i,
                                                 field_name, err));
  }

  Batch batch;
  batch.batch_size = row;
  batch.labels = row == num_lines ? labels : labels.Slice(0, row);
  ASSIGN_OR_RETURN(batch.dense,
                   Tensor::Create(DT_FLOAT, TensorShape({row, 0})));
  SparseBatch s;
  ASSIGN_OR_RETURN(s.ids, text_internal::VectorToTensor(ids));
  ASSIGN_OR_RETURN(s.weights, text_internal::VectorToTensor(weights));
  s.row_splits = splits.Slice(0, row + 1);
  batch.sparse.push_back(std::move(s));
  return batch;
}

}  // namespace recflow::data
