// CsvParser (declared in text_parsers.h).
#include <algorithm>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/fingerprint.h"
#include "recflow/core/status.h"
#include "recflow/data/text_parser_util.h"
#include "recflow/data/text_parsers.h"

namespace recflow::data {
namespace {

using text_internal::LineError;
using Kind = CsvColumn::Kind;

// One field of a line: the text between the quotes for a quoted field.
// `escaped`: it holds "" pairs still to be turned into '"'.
struct Field {
  absl::string_view text;
  bool escaped = false;
};

class Splitter {
 public:
  Splitter(char delimiter, bool quoting, bool trim)
      : delim_(delimiter), quoting_(quoting), trim_(trim) {}

  // Splits `line` into exactly fields->size() fields. On failure fills *err
  // (field index, reason) and returns false.
  bool Split(absl::string_view line, std::vector<Field>* fields,
             LineError* err) const {
    const char* p = line.data();
    const char* const end = p + line.size();
    const int n = static_cast<int>(fields->size());
    for (int c = 0; c < n; ++c) {
      if (trim_) p = SkipBlanks(p, end);
      Field& f = (*fields)[c];
      f.escaped = false;
      if (quoting_ && p < end && *p == '"') {
        const char* qs = ++p;
        for (;;) {
          const void* q =
              p < end ? std::memchr(p, '"', static_cast<size_t>(end - p))
                      : nullptr;
          if (q == nullptr) {
            err->reason = "bad_quote";
            err->field = c;
            err->text = absl::string_view(qs - 1, end - qs + 1);
            err->expected = "no closing quote";
            return false;
          }
          p = static_cast<const char*>(q) + 1;
          if (p < end && *p == '"') {  // "" inside: one quote
            f.escaped = true;
            ++p;
            continue;
          }
          break;
        }
        f.text = absl::string_view(qs, p - 1 - qs);
        if (trim_) p = SkipBlanks(p, end);
        if (p < end && *p != delim_) {
          const char* fe = FieldEnd(p, end);
          err->reason = "bad_quote";
          err->field = c;
          err->text = absl::string_view(qs - 1, fe - qs + 1);
          err->expected = "text after the closing quote";
          return false;
        }
      } else {
        const char* fs = p;
        p = FieldEnd(p, end);
        const char* fe = p;
        if (trim_) {
          while (fe > fs && IsTrimmed(fe[-1])) --fe;
        }
        f.text = absl::string_view(fs, fe - fs);
      }
      // p is at a delimiter or the end.
      if (c + 1 < n) {
        if (p == end) {
          err->reason = "wrong_field_count";
          err->count = c + 1;
          err->text = line;
          return false;
        }
        ++p;
      } else if (p != end) {
        err->reason = "wrong_field_count";
        err->count = n + 1 + std::count(p + 1, end, delim_);
        err->text = line;
        return false;
      }
    }
    return true;
  }

 private:
  bool IsTrimmed(char c) const {
    return (c == ' ' || c == '\t') && c != delim_;
  }
  const char* SkipBlanks(const char* p, const char* end) const {
    while (p < end && IsTrimmed(*p)) ++p;
    return p;
  }
  const char* FieldEnd(const char* p, const char* end) const {
    const void* d = p < end
                        ? std::memchr(p, delim_, static_cast<size_t>(end - p))
                        : nullptr;
    return d == nullptr ? end : static_cast<const char*>(d);
  }

  char delim_;
  bool quoting_;
  bool trim_;
};

// The value of a field: its text, with "" turned into '"' (in *scratch).
absl::string_view Unescape(const Field& f, std::string* scratch) {
  if (!f.escaped) return f.text;
  scratch->clear();
  for (size_t i = 0; i < f.text.size(); ++i) {
    scratch->push_back(f.text[i]);
    if (f.text[i] == '"') ++i;  // skip the second quote of a pair
  }
  return *scratch;
}

struct SparseOut {
  std::vector<int64_t> ids;
  std::vector<int64_t> splits;
};

}  // namespace

CsvParser::CsvParser(CsvOptions options) : options_(std::move(options)) {
  for (size_t c = 0; c < options_.columns.size(); ++c) {
    const CsvColumn& col = options_.columns[c];
    switch (col.kind) {
      case Kind::kLabel:
        label_column_ = static_cast<int>(c);
        break;
      case Kind::kDense:
        schema_.dense_names.push_back(col.name);
        break;
      case Kind::kSparse:
        schema_.sparse.push_back({col.name, false});
        break;
      case Kind::kIgnore:
        break;
    }
  }
}

absl::StatusOr<std::unique_ptr<CsvParser>> CsvParser::Create(
    CsvOptions options) {
  if (options.columns.empty()) {
    return errors::InvalidArgument("csv parser: the schema has no columns");
  }
  const char d = options.delimiter;
  if (d == '"' || d == '\n' || d == '\r') {
    return errors::InvalidArgument("csv parser: the delimiter cannot be '",
                                   absl::CHexEscape(absl::string_view(&d, 1)),
                                   "'");
  }
  if (options.bad_records.max_line_bytes < 1) {
    return errors::InvalidArgument(
        "csv parser: max_line_bytes must be >= 1, got ",
        options.bad_records.max_line_bytes);
  }
  std::set<std::string> names;
  int labels = 0;
  for (size_t c = 0; c < options.columns.size(); ++c) {
    const CsvColumn& col = options.columns[c];
    if (col.name.empty()) {
      return errors::InvalidArgument("csv parser: column ", c, " has no name");
    }
    if (!names.insert(col.name).second) {
      return errors::InvalidArgument("csv parser: column ", c, " ('", col.name,
                                     "'): the name is used twice");
    }
    if (col.kind == Kind::kLabel && ++labels > 1) {
      return errors::InvalidArgument("csv parser: column ", c, " ('", col.name,
                                     "') is a second label column");
    }
    if (col.kind == Kind::kSparse && col.multi_value_separator != '\0' &&
        (col.multi_value_separator == d || col.multi_value_separator == '"')) {
      return errors::InvalidArgument(
          "csv parser: column ", c, " ('", col.name,
          "'): the multi-value separator cannot be the delimiter or '\"'");
    }
  }
  return std::unique_ptr<CsvParser>(new CsvParser(std::move(options)));
}

absl::StatusOr<Batch> CsvParser::Parse(
    absl::Span<const absl::string_view> lines,
    absl::Span<const absl::string_view> origins) const {
  RETURN_IF_ERROR(
      text_internal::CheckOrigins("csv", lines.size(), origins.size()));
  const int64_t num_lines = static_cast<int64_t>(lines.size());
  const int nd = static_cast<int>(schema_.dense_names.size());
  const int ns = static_cast<int>(schema_.sparse.size());
  const int ncols = static_cast<int>(options_.columns.size());
  ASSIGN_OR_RETURN(Tensor labels,
                   Tensor::Create(DT_FLOAT, TensorShape({num_lines})));
  ASSIGN_OR_RETURN(Tensor dense,
                   Tensor::Create(DT_FLOAT, TensorShape({num_lines, nd})));
  float* lab = labels.data<float>();
  float* den = dense.data<float>();
  std::vector<SparseOut> sparse(ns);
  for (SparseOut& s : sparse) {
    s.ids.reserve(num_lines);
    s.splits.reserve(num_lines + 1);
    s.splits.push_back(0);
  }

  const Splitter splitter(options_.delimiter, options_.quoting,
                          options_.trim_whitespace);
  std::vector<Field> fields(ncols);
  std::string scratch;
  const BadRecordOptions& bad = options_.bad_records;
  int64_t row = 0;
  for (int64_t i = 0; i < num_lines; ++i) {
    const absl::string_view line = text_internal::StripCr(lines[i]);
    if (options_.has_header && !origins.empty() &&
        absl::EndsWith(origins[i], ":1")) {
      continue;
    }
    LineError err;
    bool ok;
    if (line.empty()) {
      err.reason = "empty_line";
      err.expected = "an empty line";
      ok = false;
    } else if (static_cast<int64_t>(line.size()) > bad.max_line_bytes) {
      err.reason = "line_too_long";
      err.expected = "longer than max_line_bytes";
      err.text = line;
      ok = false;
    } else {
      ok = splitter.Split(line, &fields, &err);
      if (!ok && std::strcmp(err.reason, "wrong_field_count") == 0) {
        err.expected = "expected one per column of the schema";
      }
    }
    if (ok && options_.has_header && origins.empty()) {
      bool is_header = true;
      for (int c = 0; c < ncols && is_header; ++c) {
        is_header = Unescape(fields[c], &scratch) == options_.columns[c].name;
      }
      if (is_header) continue;
    }
    int d = 0;
    int s = 0;
    lab[row] = 0.0f;
    for (int c = 0; ok && c < ncols; ++c) {
      const CsvColumn& col = options_.columns[c];
      const Field& f = fields[c];
      switch (col.kind) {
        case Kind::kIgnore:
          break;
        case Kind::kLabel:
          if (!text_internal::ParseFiniteFloat(f.text, &lab[row])) {
            err = {"bad_label", c, f.text, "expected a finite number"};
            ok = false;
          }
          break;
        case Kind::kDense: {
          float* v = &den[row * nd + d++];
          if (f.text.empty()) {
            *v = col.default_value;
          } else if (!text_internal::ParseFiniteFloat(f.text, v)) {
            err = {"not_a_number", c, f.text, "expected a finite number"};
            ok = false;
          }
          break;
        }
        case Kind::kSparse: {
          SparseOut& out = sparse[s++];
          const absl::string_view value = Unescape(f, &scratch);
          size_t pos = 0;
          while (ok && pos <= value.size()) {
            size_t next = value.size();
            if (col.multi_value_separator != '\0') {
              next = value.find(col.multi_value_separator, pos);
              if (next == absl::string_view::npos) next = value.size();
            }
            absl::string_view item = value.substr(pos, next - pos);
            if (options_.trim_whitespace && col.multi_value_separator != '\0') {
              item = text_internal::TrimBlanks(item);
            }
            pos = next + 1;
            if (item.empty()) continue;
            int64_t id;
            if (col.id_type == CsvColumn::IdType::kString) {
              id = static_cast<int64_t>(Fingerprint64(item));
            } else if (!text_internal::ParseInt64(item, &id)) {
              err = {"bad_id", c, item, "expected a decimal int64 id"};
              ok = false;
              break;
            }
            out.ids.push_back(id);
          }
          break;
        }
      }
    }
    if (ABSL_PREDICT_TRUE(ok)) {
      for (SparseOut& out : sparse) {
        out.splits.push_back(static_cast<int64_t>(out.ids.size()));
      }
      ++row;
      continue;
    }
    for (SparseOut& out : sparse) out.ids.resize(out.splits.back());
    const std::string field_name =
        err.field >= 0 ? options_.columns[err.field].name : std::string();
    RETURN_IF_ERROR(
        text_internal::ReportBadLine(bad, "csv", origins, i, field_name, err));
  }

  Batch batch;
  batch.batch_size = row;
  batch.labels = row == num_lines ? labels : labels.Slice(0, row);
  batch.dense = row == num_lines ? dense : dense.Slice(0, row);
  batch.sparse.resize(ns);
  for (int k = 0; k < ns; ++k) {
    ASSIGN_OR_RETURN(batch.sparse[k].ids,
                     text_internal::VectorToTensor(sparse[k].ids));
    ASSIGN_OR_RETURN(batch.sparse[k].row_splits,
                     text_internal::VectorToTensor(sparse[k].splits));
  }
  return batch;
}

}  // namespace recflow::data
